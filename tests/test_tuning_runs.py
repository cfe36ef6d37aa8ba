"""A declared tuning search run for real on copies of the real session (tests/real_session.py): killed
mid-trial then rerun, each trial as its own Ray job, and a real trial pruned while it trains. The
declaration, selection and the documented search's own session are tests/test_tuning.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import tomlkit

from claimcheck.engine.stages.contract import tuning
from claimcheck.engine.training import search as S
from claimcheck.engine.training.schema import Search
from tests.test_tuning import _search

# ---------------------------------------------------------------- a crash mid-trial


def _crash_answers(ws: Path) -> Path:
    """The real session's answers up to the contract, with a small search (revision 1)."""
    answers = tomllib.loads((ws / "answers.toml").read_text())
    for later in ("dispatch", "artifact"):
        answers.pop(later, None)
    answers["contract"]["search"] = {
        "hypothesis": "a higher learning rate helps the tiny encoder",
        "sampler": "random",
        "n_trials": 2,
        "finalists": 1,
        "seed_repeats": 0,
        "space": [{"name": "optimizer.lr", "low": 1e-3, "high": 1e-2, "log": True}],
    }
    path = ws / "answers-crash.toml"
    path.write_text(tomlkit.dumps(answers))
    return path


def _wait_for_training(rdir: Path, proc: subprocess.Popen, limit: float = 240.0) -> Path:
    end = time.time() + limit
    while time.time() < end:
        assert proc.poll() is None, "the search ended before a trial trained"
        for status in (rdir / "jobs").glob("*/status.json") if (rdir / "jobs").is_dir() else []:
            try:
                if json.loads(status.read_text()).get("phase") == "training":
                    return status.parent
            except (ValueError, OSError):
                continue
        time.sleep(0.2)
    raise AssertionError("no trial reached training")


@pytest.mark.slow
def test_killing_the_search_mid_trial_and_rerunning_finishes_without_running_a_trial_twice(
    real_workspace: Path, tmp_path: Path
) -> None:
    from claimcheck.engine.training import jobfiles
    from tests.real_session import copy_workspace

    session = copy_workspace(real_workspace, tmp_path)
    ws = session.parents[1]
    answers = _crash_answers(ws)
    cmd = [str(Path(sys.executable).parent / "claimcheck"), "run", "--answers", str(answers), str(session)]
    rdir = session / "search" / "r1"
    proc = subprocess.Popen(cmd, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        killed_job = _wait_for_training(rdir, proc)
    finally:
        proc.kill()
        proc.wait()
    # the trial's own process goes too: the rerun must resume it from its checkpoint or fail it
    pid = jobfiles.read_pid(killed_job).pid
    os.killpg(pid, signal.SIGKILL)
    out = subprocess.run(cmd, cwd=ws, capture_output=True, text=True, timeout=600)
    assert "contract.search_trials" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]
    ledger = tuning.read_ledger(rdir)
    assert [r.number for r in ledger] == [0, 1]
    killed = next(r for r in ledger if r.op_id == killed_job.name)
    assert killed.state in ("complete", "failed")
    for job in (rdir / "jobs").iterdir():
        starts = jobfiles.read_pid(job).starts
        # one start per job; the killed trial's second start (if any) is its resume in the same folder
        assert len(starts) == (len(starts) if job == killed_job else 1) and len(starts) <= 2
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    study = optuna.load_study(
        study_name="r1", storage=JournalStorage(JournalFileBackend(str(rdir / "study.journal")))
    )
    assert len(study.trials) == 2 and all(t.state.is_finished() for t in study.trials)


# ---------------------------------------------------------------- trials as Ray jobs


@pytest.mark.slow
@pytest.mark.ray
def test_the_search_runs_each_trial_as_its_own_ray_job(
    real_workspace: Path,
    tmp_path: Path,
    ray_head,
) -> None:
    from claimcheck.engine.providers.ray_jobs import RECORD
    from claimcheck.tui.cli import main
    from tests.real_session import copy_workspace

    session = copy_workspace(real_workspace, tmp_path)
    ws = session.parents[1]
    answers_path = _crash_answers(ws)
    answers = tomllib.loads(answers_path.read_text())
    answers["contract"]["search"].update(provider="ray", ray_address=ray_head.address, concurrency=2)
    answers_path.write_text(tomlkit.dumps(answers))
    assert main(["run", "--answers", str(answers_path), str(session)]) == 0
    rdir = session / "search" / "r1"
    ledger = tuning.read_ledger(rdir)
    assert [(r.number, r.state) for r in ledger] == [(0, "complete"), (1, "complete")]
    submissions = {
        json.loads((rdir / "jobs" / r.op_id / RECORD).read_text())["submission_id"] for r in ledger
    }
    assert len(submissions) == 2
    rec = _contract_at(session)
    assert rec.check("contract.search_trials").status == "pass"


def _contract_at(session: Path):
    from claimcheck.engine.ledger.session import Session

    return Session.open(session).record("contract")


# ---------------------------------------------------------------- live pruning of a real trial job


def _grid_order(search: Search) -> list[dict]:
    """The order the search runs its grid points in (tuning.run_search: the sampler seed's shuffle)."""
    import random

    points = S.grid_points(search)
    random.Random(search.sampler_seed).shuffle(points)
    return points


# The pruning test's trials: a dozen steps, a dev evaluation every three. The trial that cannot learn is
# paced (its job's runtime step delay, a knob every job honours) so that it would need minutes to end:
# the search, polling every tuning.POLL_SECONDS, finds it behind at its first evaluations whatever the
# load, and its fate rests on the step-indexed reports, not on how fast the machine trains.
PRUNE_STEPS, PRUNE_EVAL_EVERY, SLOW_STEP_SECONDS = 12, 3, 5.0


def _pace_the_slow_trial(monkeypatch: pytest.MonkeyPatch, lr: float) -> None:
    """Every trial job of learning rate `lr` gets SLOW_STEP_SECONDS between its optimizer steps."""
    from claimcheck.engine.stages.dispatch import run as dispatch_run

    real = dispatch_run.export_job

    def export_job(job_dir, op, upstream, ctx, extra_runtime=None):  # type: ignore[no-untyped-def]
        if op.eff["optimizer"]["lr"] == lr:
            extra_runtime = {**(extra_runtime or {}), "step_delay_seconds": SLOW_STEP_SECONDS}
        return real(job_dir, op, upstream, ctx, extra_runtime)

    monkeypatch.setattr(dispatch_run, "export_job", export_job)


@pytest.mark.slow
def test_a_real_trial_behind_the_median_is_pruned_while_it_trains(
    real_workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two trials one after the other: a learning rate that learns, then one that cannot (1e-7). The
    second's job is cancelled by Optuna's MedianPruner at a dev evaluation, while it trains, and kept
    in the ledger as pruned. The first trial's whole curve reaches the pruner when it ends (however
    few polls saw it run), so the second is judged step for step against it."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from claimcheck.engine.training import jobfiles
    from claimcheck.tui.cli import main
    from tests.real_session import copy_workspace

    session = copy_workspace(real_workspace, tmp_path)
    ws = session.parents[1]
    answers_path = _crash_answers(ws)
    answers = tomllib.loads(answers_path.read_text())
    answers["contract"].update(
        max_steps=PRUNE_STEPS, eval_every_steps=PRUNE_EVAL_EVERY, checkpoint_every_steps=PRUNE_STEPS
    )
    space = [{"name": "optimizer.lr", "choices": [1e-2, 1e-7]}]
    declared = {"sampler": "grid", "space": space, "pruning": "median", "pruning_startup_trials": 1}
    declared.update(n_trials=2, concurrency=1, finalists=1, seed_repeats=0)
    seed = next(
        s for s in range(50) if _grid_order(_search(**declared, sampler_seed=s))[0]["optimizer.lr"] == 1e-2
    )
    answers["contract"]["search"].update(declared, sampler_seed=seed)
    answers_path.write_text(tomlkit.dumps(answers))
    _pace_the_slow_trial(monkeypatch, 1e-7)
    assert main(["run", "--answers", str(answers_path), str(session)]) == 0
    rdir = session / "search" / "r1"
    good, bad = tuning.read_ledger(rdir)
    assert (good.settings["optimizer.lr"], good.state) == (1e-2, "complete")
    assert (bad.settings["optimizer.lr"], bad.state, bad.value) == (1e-7, "pruned", None)
    assert "median" in bad.reason
    # the good trial ran all its steps, the pruned one really stopped early: cancelled, short of its steps
    assert max(s.step for s in jobfiles.latest_steps(jobfiles.read_metrics(rdir / "jobs" / good.op_id))) == (
        PRUNE_STEPS
    )
    job = rdir / "jobs" / bad.op_id
    steps = [s.step for s in jobfiles.latest_steps(jobfiles.read_metrics(job))]
    assert steps and max(steps) < PRUNE_STEPS
    end = time.time() + 60  # the job writes "cancelled" from its own SIGTERM handler
    while getattr(jobfiles.read_status(job), "phase", "") != "cancelled" and time.time() < end:
        time.sleep(0.1)
    assert jobfiles.read_status(job).phase == "cancelled"
    evals = [e for e in jobfiles.dev_evals(jobfiles.read_metrics(job)) if e.kind == "eval" and e.step > 0]
    assert evals, "pruned before any dev evaluation"
    study = optuna.load_study(
        study_name="r1", storage=JournalStorage(JournalFileBackend(str(rdir / "study.journal")))
    )
    assert [t.state for t in study.trials] == [
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.PRUNED,
    ]
    # the first trial's intermediate values are its every dev evaluation, step for step
    good_evals = [
        e for e in jobfiles.dev_evals(jobfiles.read_metrics(rdir / "jobs" / good.op_id)) if e.kind == "eval"
    ]
    assert sorted(study.trials[0].intermediate_values) == [e.step for e in good_evals if e.step > 0]
    assert _contract_at(session).check("contract.search_trials").status == "pass"
