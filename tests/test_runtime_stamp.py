"""The process is the one contracted, and a running job is judged on what is due: real job folders
(a tiny encoder, the local provider's detached process, stopped mid-run with SIGSTOP), the runtime
stamp the job writes itself, the dispatch checks read from them, and the contract's alarm budget."""

from __future__ import annotations

import os
import platform
import signal
from pathlib import Path

import pytest

from tests import test_job_kit as kit


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return kit.make_model(tmp_path_factory.mktemp("model"))


def _pinned(model_dir: Path) -> str:
    from claimcheck.engine.training import stamp

    return stamp.model_digest(model_dir)[0]


def _environment():
    """The contract's environment record as the contract stage writes it on this machine."""
    from claimcheck.engine.shapes import training as shapes
    from claimcheck.engine.training import stamp

    return shapes.Environment(
        versions=stamp.library_versions(),
        hardware={"python": platform.python_version()},
        engine=shapes.EngineSources(**stamp.environment_record()),
    )


def _checks(jd: Path, prov) -> dict:
    from claimcheck.engine.stages.dispatch.checks import Look, job_checks
    from claimcheck.engine.training import jobfiles

    doc = jobfiles.read_contract(jd)
    info = {"operation_id": jd.name, "replay": True}
    look = Look(jd, doc["effective"], doc["digest"], jd.name, prov, info, _environment())
    return {c.id: c for c in job_checks(look)}


def test_a_running_job_is_judged_on_what_is_due(tmp_path: Path, model_dir: Path) -> None:
    """Step 7 of 60, checkpoints every 20: no checkpoint warning, the worse-than-trivial alarm (from
    step 40) pending, the dev metric reported as the latest, not "at the end"; the stamp is there."""
    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.training import jobfiles

    op = "5a5a5a5a5a5a5a5a-a1"
    jd = kit.job_dir(
        tmp_path,
        model_dir,
        op,
        max_steps=60,
        eval_every_steps=20,
        checkpoint_every_steps=20,
        model_sha256=_pinned(model_dir),
        alarms={"worse_than_trivial_after_step": 40},
        runtime={"step_delay_seconds": 0.3, "heartbeat_seconds": 2.0},
    )
    prov = LocalProvider(tmp_path)
    h = prov.launch(jd, op)
    try:
        kit.wait_for(lambda: (st := jobfiles.read_status(jd)) is not None and st.step >= 7)
        os.killpg(int(h.ref), signal.SIGSTOP)  # its files, read mid-run
        by = _checks(jd, prov)
    finally:
        os.killpg(int(h.ref), signal.SIGCONT)
    step = by["dispatch.progress"].measured["last_step"]
    assert 7 <= step < 20 and by["dispatch.progress"].measured["job_state"] == "incomplete"
    ck = by["dispatch.checkpoints"]
    assert ck.status == "not_run" and "not yet due" in ck.summary and "step 20" in ck.summary, ck.summary
    wtt = by["dispatch.alarms.worse_than_trivial"]
    assert wtt.status == "not_run" and "not yet due" in wtt.summary, wtt.summary
    assert by["dispatch.alarms.divergence"].measured["state"] in ("pending", "clear", "raised")
    dev = by["dispatch.dev_metric"]
    assert dev.status == "info" and "at the end" not in dev.summary and "latest" in dev.summary, dev.summary
    assert dev.coverage == "full dev split (24 rows)"
    rt = by["dispatch.runtime"]
    assert rt.status == "pass", rt.summary
    assert rt.measured["model_sha256"] == _pinned(model_dir) and rt.measured["engine_compared"]

    # cancelled at about step 8: it ended before the first checkpoint — said, not warned
    prov.cancel(h)
    assert prov.wait(h, timeout=60, poll=0.1).phase == "cancelled"
    by = _checks(jd, prov)
    assert by["dispatch.checkpoints"].status == "info", by["dispatch.checkpoints"].summary
    assert "before the first scheduled one (step 20)" in by["dispatch.checkpoints"].summary
    assert by["dispatch.alarms.worse_than_trivial"].measured["state"] == "not_run"
    assert "at the end" in by["dispatch.dev_metric"].summary


def test_the_stamp_names_the_process_and_a_changed_model_fails(tmp_path: Path, model_dir: Path) -> None:
    """The job stamps its own process; a base model whose bytes differ from the pinned digest fails
    dispatch.runtime, other library versions or engine sources than the contract's warn; dev figures
    of an eval_rows subset say how many dev rows they cover."""
    import shutil

    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.job import Job

    pinned = _pinned(model_dir)
    changed = tmp_path / "changed-model"
    shutil.copytree(model_dir, changed)
    weights = next(changed.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one byte of the last tensor: the model still loads
    weights.write_bytes(bytes(data))

    jd = kit.job_dir(tmp_path, changed, max_steps=2, eval_every_steps=0, eval_rows=6, model_sha256=pinned)
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert Job(jd).run() == 0
    finally:
        for s, hnd in saved.items():
            signal.signal(s, hnd)
    stamp = jobfiles.read_runtime(jd)
    assert stamp is not None and stamp.pid == os.getpid() and stamp.model_sha256 != pinned
    assert {"python", "torch", "transformers", "peft", "bitsandbytes", "numpy"} <= set(stamp.versions)
    assert "claimcheck.engine.training.job" in stamp.engine_modules
    assert "claimcheck.tui" not in " ".join(stamp.engine_modules)
    assert stamp.device["device"] == "cpu" and int(stamp.device["memory_bytes"]) > 0
    prov = LocalProvider(tmp_path)
    by = _checks(jd, prov)
    rt = by["dispatch.runtime"]
    assert rt.status == "fail" and "is not the contract's" in rt.summary, rt.summary
    # six of the 24 dev rows evaluated during training: the dev figures say so
    dev = by["dispatch.dev_metric"]
    assert dev.coverage == "sample: 6 of 24 dev rows (the contract's eval_rows)", dev.coverage
    assert dev.measured["rows"] == 6 and dev.measured["dev_rows"] == 24

    # the same stamp against a contract environment with another torch and another engine file
    from claimcheck.engine.providers.snapshot import snapshot
    from claimcheck.engine.stages.dispatch.checks import _runtime
    from claimcheck.engine.training.schema import effective

    env = _environment()
    env.versions["torch"] = "0.0.1"
    env.engine.modules["claimcheck.engine.training.job"] = "0" * 64
    eff = effective({**jobfiles.read_contract(jd)["effective"], "model_sha256": stamp.model_sha256})
    warned = _runtime(jd, snapshot(jd, prov), eff, env)
    assert warned.status == "warn", warned.summary
    assert "torch 0.0.1 →" in warned.summary and "claimcheck.engine.training.job" in warned.summary


def test_no_stamp_yet_is_pending(tmp_path: Path, model_dir: Path) -> None:
    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.jobrecords import StatusFile

    jd = kit.job_dir(tmp_path, model_dir)
    prov = LocalProvider(tmp_path)
    proc_status = StatusFile(phase="loading", operation_id=jd.name, pid=os.getpid())
    jobfiles.write_status(jd, proc_status)  # this process, alive, says it is loading
    jobfiles.write_pid(jd, jobfiles.PidFile(pid=os.getpid(), pgid=os.getpgid(0), host="x", starts=[]))
    rt = _checks(jd, prov)["dispatch.runtime"]
    assert rt.status == "not_run" and rt.summary.startswith("pending"), rt.summary
