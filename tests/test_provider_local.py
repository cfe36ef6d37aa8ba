"""The local provider with real detached processes: idempotent launch, SIGHUP survival and
reattachment, cancel of one job only, kill + resume continuing the loss curve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import test_job_kit as kit

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return kit.make_model(tmp_path_factory.mktemp("model"))


def test_launch_survives_sighup_reattaches_and_cancel_stops_only_that_job(
    tmp_path: Path, model_dir: Path
) -> None:
    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.training import jobfiles

    op = "aaaaaaaaaaaaaaaa-a1"
    jd = kit.job_dir(tmp_path, model_dir, op, runtime={"step_delay_seconds": 0.3})
    # The "app": launches the job, then its terminal goes away (SIGHUP) and it dies.
    # SIGHUP's default action first: a runner started under nohup would pass it on as ignored.
    app = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"
        "from pathlib import Path\n"
        "from claimcheck.engine.providers.local import LocalProvider\n"
        f"h = LocalProvider(Path({str(tmp_path)!r})).launch(Path({str(jd)!r}), {op!r})\n"
        "print(h.ref, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGHUP)\n"
    )
    out = subprocess.run([sys.executable, "-c", app], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGHUP, out.stderr
    pid = int(out.stdout.strip())
    # A new app instance finds the same job by identity, and launching again adopts it.
    prov = LocalProvider(tmp_path)
    found = prov.find(op)
    assert found is not None and int(found.ref) == pid
    again = prov.launch(jd, op)
    assert not again.started and int(again.ref) == pid
    assert prov.status(again).alive

    # A second job, cancelled while it trains: only that process group gets SIGTERM.
    other = "bbbbbbbbbbbbbbbb-a1"
    b = prov.launch(kit.job_dir(tmp_path, model_dir, other, runtime={"step_delay_seconds": 0.5}), other)
    kit.wait_for(lambda: prov.status(b).phase == "training" and prov.status(b).step >= 1, timeout=90)
    prov.cancel(b)
    st_b = prov.wait(b, timeout=30, poll=0.1)
    assert st_b.phase == "cancelled" and "SIGTERM" in st_b.reason and not st_b.alive
    status_b = jobfiles.read_status(b.job_dir)
    assert status_b is not None and status_b.phase == "cancelled"  # terminal status written by the job itself

    final = prov.wait(again, timeout=90, poll=0.2)
    assert final.phase == "done", final
    assert len(json.loads((jd / "pid.json").read_text())["starts"]) == 1  # one process ever started
    assert final.heartbeats >= 1 and final.step == 12
    assert not prov.launch(jd, op).started  # launching a finished job again starts nothing


def test_killed_job_resumes_and_its_loss_curve_continues(tmp_path: Path, model_dir: Path) -> None:
    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.job import Job

    # Reference: the same contract, uninterrupted, in this process.
    ref = kit.job_dir(tmp_path / "ref", model_dir, "dddddddddddddddd-a1")
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert Job(ref).run() == 0
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    ref_loss = {s.step: s.loss for s in jobfiles.latest_steps(jobfiles.read_metrics(ref))}

    prov = LocalProvider(tmp_path)
    op = "eeeeeeeeeeeeeeee-a1"
    jd = kit.job_dir(tmp_path, model_dir, op, runtime={"step_delay_seconds": 0.3})
    h = prov.launch(jd, op)
    kit.wait_for(lambda: (st := jobfiles.read_status(jd)) is not None and st.step >= 6, timeout=90)
    os.killpg(int(h.ref), signal.SIGKILL)  # no handler runs: the job cannot write a status
    st = kit.wait_for(lambda: (s := prov.status(h)).phase == "lost" and s, timeout=20)
    assert "never wrote a terminal status" in st.reason
    assert not prov.launch(jd, op).started  # launch without resume adopts the lost job, starts nothing
    h2 = prov.launch(jd, op, resume=True)
    assert h2.started
    st = prov.wait(h2, timeout=90, poll=0.2)
    assert st.phase == "done" and st.resumed_from == [4]
    got = {s.step: s.loss for s in jobfiles.latest_steps(jobfiles.read_metrics(jd))}
    assert sorted(got) == sorted(ref_loss)
    # Tolerance 1e-5: same CPU, same threads, restored RNG → the curve continues as if never killed.
    assert max(abs(got[s] - ref_loss[s]) for s in got) < 1e-5
