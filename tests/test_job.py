"""The training job run in-process on a tiny encoder: lifecycle files, non-finite halt, alarms."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pytest

from tests import test_job_kit as kit


@pytest.fixture(autouse=True)
def _keep_signal_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    import torch

    torch.set_num_threads(1)
    yield
    for s, h in saved.items():
        signal.signal(s, h)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return kit.make_model(tmp_path_factory.mktemp("model"))


def _run(jd: Path) -> int:
    from claimcheck.engine.training.job import Job

    return Job(jd).run()


def test_full_run_writes_its_own_progress(tmp_path: Path, model_dir: Path) -> None:
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.artifact_files import verify_artifact

    jd = kit.job_dir(tmp_path, model_dir)
    assert _run(jd) == 0
    st = jobfiles.read_status(jd)
    assert st is not None and st.phase == "done" and st.step == st.total_steps == 12
    recs = jobfiles.read_metrics(jd)
    steps = jobfiles.latest_steps(recs)
    assert [s.step for s in steps] == list(range(1, 13))
    assert all(math.isfinite(s.loss) and s.grad_norm >= 0 and s.lr > 0 for s in steps)
    evals = jobfiles.dev_evals(recs)
    assert [e.step for e in evals] == [0, 4, 8, 12]  # initial, every 4 steps, final
    assert sum((evals[-1].pred_distribution or {}).values()) == 24
    hb = jobfiles.read_heartbeat(jd)
    assert (
        hb is not None and hb.beats >= 1 and hb.step == 12
    )  # a heartbeat records the step it saw, it is not one
    ckpts = sorted(p.name for p in (jd / "checkpoints").iterdir())
    assert ckpts == ["step-000004", "step-000008"]
    for f in ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state.pt", "trainable.safetensors"):
        assert (jd / "checkpoints/step-000008" / f).is_file()
    ident = verify_artifact(jd / "final")
    assert ident["ok"], ident["problems"]
    assert ident["lora_b_matrices"] == 4 and ident["lora_b_min_norm"] > 0


def test_non_finite_loss_halts_with_a_clear_status(tmp_path: Path, model_dir: Path) -> None:
    from claimcheck.engine.training import alarms as job_alarms
    from claimcheck.engine.training import jobfiles

    jd = kit.job_dir(
        tmp_path, model_dir, optimizer={"lr": 1e30, "head_lr": 1e30}, schedule={"warmup_ratio": 0.0}
    )
    assert _run(jd) == 3
    st = jobfiles.read_status(jd)
    assert st is not None and st.phase == "failed" and "non-finite" in st.reason
    assert not (jd / "final").exists()
    obs = job_alarms.Observed(jobfiles.read_metrics(jd), 12)
    alarms = {a["name"]: a for a in job_alarms.evaluate(obs, kit.effective(model_dir))}
    assert alarms["non_finite"]["state"] == "raised"
    assert alarms["train_dev_gap"]["state"] == "disabled"


def test_alarms_on_a_synthetic_series() -> None:
    from claimcheck.engine.training.alarms import Observed
    from claimcheck.engine.training.alarms import evaluate as evaluate_alarms
    from claimcheck.engine.training.jobrecords import MetricLine, parse_line

    def lines(*docs: dict) -> list[MetricLine]:
        return [parse_line(d, "synthetic") for d in docs]

    def step(s: int, loss: float) -> dict:
        return {"kind": "step", "step": s, "time": s, "loss": loss, "lr": 1e-3, "grad_norm": 1.0}

    timing = {"seconds": 0.1, "epoch": 0.1}
    dev = {"kind": "eval", "split": "dev", "time": 10.0, "metric": "macro_f1", "loss": 1.0}
    dev.update(train_rows=20, rows=20, phase="training", selected_step=-1)

    eff = {
        "alarms": {
            "divergence_factor": 2.0,
            "collapse_share": 0.9,
            "gap_limit": 0.1,
            "stall_heartbeats": 3,
            "worse_than_trivial_after_step": 5,
            "disabled": [],
        }
    }
    recs = lines({"kind": "trivial", "step": 0, "metric": "macro_f1", "value": 0.3})
    recs += lines(*({**step(s, 1.0 if s < 15 else 5.0), **timing} for s in range(1, 21)))
    collapsed = {"pred_distribution": {"a": 19, "b": 1}, "true_distribution": {"a": 10, "b": 10}}
    recs += lines({**dev, "step": 10, "value": 0.2, "train_value": 0.9, **collapsed})
    got = {a["name"]: a["state"] for a in evaluate_alarms(Observed(recs, 20, 7), eff)}
    assert got == {
        "non_finite": "clear",
        "divergence": "raised",
        "class_collapse": "raised",
        "train_dev_gap": "raised",
        "stall": "raised",
        "worse_than_trivial": "raised",
    }
    even = {"pred_distribution": {"a": 11, "b": 9}, "true_distribution": {"a": 10, "b": 10}}
    calm = [recs[0], *lines({**dev, "step": 10, "value": 0.8, "train_value": 0.85, **even})]
    calm += lines(*({**step(s, 1.0 / s), **timing} for s in range(1, 21)))
    got = {a["name"]: a["state"] for a in evaluate_alarms(Observed(calm, 20, 2), eff)}
    assert set(got.values()) == {"clear"}


def test_truncated_metrics_line_is_skipped(tmp_path: Path) -> None:
    from claimcheck.engine.training.jobfiles import read_metrics

    whole = {"kind": "step", "step": 1, "time": 1.0, "loss": 1.0, "lr": 0.1, "grad_norm": 1.0}
    whole.update(seconds=0.1, epoch=0.5)
    (tmp_path / "metrics.jsonl").write_text(json.dumps(whole) + '\n{"kind": "st')
    [line] = read_metrics(tmp_path)
    assert line.model_dump() == whole


def test_best_dev_selection_and_early_stopping(tmp_path: Path, model_dir: Path) -> None:
    from claimcheck.engine.training import jobfiles

    jd = kit.job_dir(
        tmp_path,
        model_dir,
        max_steps=40,
        eval_every_steps=2,
        checkpoint_every_steps=0,
        checkpoint_selection="best_dev",
        stopping_rule="early_stopping",
        patience_evals=2,
        optimizer={"lr": 1e-6, "head_lr": 1e-6},
    )  # too small to improve: stops early
    assert _run(jd) == 0
    recs = jobfiles.read_metrics(jd)
    stop = [r for r in recs if r.kind == "early_stop"]
    assert stop and stop[0].step < 40
    manifest = json.loads((jd / "final/manifest.json").read_text())
    evals = [e for e in jobfiles.dev_evals(recs) if e.step > 0]  # step 0 is the untrained model
    best = max(evals, key=lambda e: (e.value, -e.step))
    # the artifact is the best dev state (or the last one when nothing beat it)
    assert manifest["selected_step"] in (best.step, stop[0].step)
    st = jobfiles.read_status(jd)
    assert st is not None and st.phase == "done" and st.early_stopped_at == stop[0].step


def test_eval_rows_evaluates_a_fixed_dev_subset_and_the_artifact_keeps_every_dev_row(
    tmp_path: Path, model_dir: Path
) -> None:
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.rowfiles import read_rows

    jd = kit.job_dir(
        tmp_path, model_dir, max_steps=4, eval_every_steps=2, checkpoint_every_steps=0, eval_rows=6
    )
    assert _run(jd) == 0
    evals = jobfiles.dev_evals(jobfiles.read_metrics(jd))
    assert [e.step for e in evals] == [0, 2, 4] and {e.rows for e in evals} == {6}
    assert all(sum((e.pred_distribution or {}).values()) == 6 for e in evals)
    assert read_rows(jd / "final" / jobfiles.DEV_PREDICTIONS).height == 24
    st = jobfiles.read_status(jd)
    assert st is not None and st.phase == "done" and st.step == 4  # the last step's status is always written


# A job process (python -m claimcheck.engine.training.job JOB_DIR) that reports, after its job ran,
# whether bitsandbytes was imported.
_JOB_PROCESS = """
import sys
from claimcheck.engine.training.job import main
rc = main([sys.argv[1]])
bnb = sys.modules.get("bitsandbytes")
print("rc", rc, "bitsandbytes", "imported" if bnb is not None else "not imported")
"""


def _job_process(jd: Path) -> str:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _JOB_PROCESS, str(jd)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_a_lora_job_process_trains_without_importing_bitsandbytes(tmp_path: Path, model_dir: Path) -> None:
    """peft imports bitsandbytes eagerly when it is installed; a LoRA job's process keeps it out
    (models.keep_bitsandbytes_out) and still trains its adapters to a verified artifact."""
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.artifact_files import verify_artifact

    jd = kit.job_dir(tmp_path, model_dir, max_steps=4, eval_every_steps=2, checkpoint_every_steps=0)
    assert _job_process(jd) == "rc 0 bitsandbytes not imported"
    st = jobfiles.read_status(jd)
    assert st is not None and st.phase == "done" and st.step == 4
    assert verify_artifact(jd / "final") is not None
    trained = [s for s in jobfiles.latest_steps(jobfiles.read_metrics(jd)) if s.grad_norm > 0]
    assert trained, "the adapters got no gradient"


@pytest.mark.parametrize(
    ("over", "needs"),
    [
        ({}, False),
        ({"adapter_mode": "full"}, False),
        ({"adapter_mode": "qlora"}, True),
        ({"quant": {"load_in_4bit": True}}, True),
        ({"optimizer": {"name": "paged_adamw_8bit"}}, True),
    ],
)
def test_only_a_contract_that_needs_bitsandbytes_keeps_it_visible(over: dict, needs: bool) -> None:
    import sys

    from claimcheck.engine.training.models import keep_bitsandbytes_out, needs_bitsandbytes
    from claimcheck.engine.training.schema import Effective

    eff = Effective(**over)
    assert needs_bitsandbytes(eff) is needs
    if needs:  # nothing is hidden in this (test) process: it returns before touching sys.modules
        before = sys.modules.get("bitsandbytes", "absent")
        assert keep_bitsandbytes_out(eff) is False
        assert sys.modules.get("bitsandbytes", "absent") is before
