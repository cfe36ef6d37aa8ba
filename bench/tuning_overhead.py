"""Overhead of claimcheck's declared search per trial against a plain Optuna loop running the same
training function (the job), in one run.

    .venv/bin/python bench/tuning_overhead.py                # 3 grid trials each, CI-sized
    .venv/bin/python bench/tuning_overhead.py --trials 6 --rounds 2

Setup (not timed): the sample data CI-sized (tests/real_session.py's ci_sized: one ticket in eight,
a tiny encoder, 12 steps) run by `claimcheck run --answers` through the contract stage without a
search, which gives the base effective contract and the frozen upstream records.

Timed, the order alternating round by round so machine load hits both alike (concurrency 1 in both):
- plain: an in-memory Optuna study with the same enqueued grid points; the objective exports the
  trial's job folder (same export as claimcheck's) and runs the job synchronously
  (`python -m claimcheck.engine.training.job DIR`), then reads its dev figure;
- claimcheck: engine/stages/contract/tuning.py's run_search with the same declaration (no seed
  repeats): journal storage, ledger files, the provider's detached launch and polling.

Printed: each side's wall seconds, per-trial seconds, the ratio and the overhead per trial, and the
machine's load average before and after (os.getloadavg), so the figure is read with its load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import tomlkit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _workspace(ws: Path) -> Path:
    from claimcheck.engine.training.tiny import make_tiny_encoder
    from claimcheck.tui.cli import main
    from tests.real_session import SAMPLE, ci_sized

    (ws / "sample_data").mkdir(parents=True)
    shutil.copy(SAMPLE, ws / "sample_data" / "tickets.csv")
    answers = ci_sized(
        tomllib.loads((ROOT / "docs" / "answers-tuning.toml").read_text()), make_tiny_encoder(ws / "enc")
    )
    answers["contract"].pop("search")
    answers.pop("dispatch")
    answers.pop("artifact")
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    session = ws / "runs" / "base"
    if main(["run", "--answers", str(ws / "answers.toml"), str(session)]) != 0:
        raise SystemExit("setup: the base session did not build")
    return session


def _search(trials: int):
    from claimcheck.engine.training.schema import Search

    doc = tomllib.loads((ROOT / "docs" / "answers-tuning.toml").read_text())["contract"]["search"]
    doc.update(n_trials=trials, seed_repeats=0, finalists=1, concurrency=1)
    return Search.model_validate(doc)


def plain(session_dir: Path, search, base: dict, out: Path) -> float:
    """A plain Optuna loop: ask → export → run the job to its end → tell."""
    import optuna

    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.providers.base import operation_id
    from claimcheck.engine.stages.contract.tuning import dev_value
    from claimcheck.engine.stages.dispatch.run import Operation, export_job
    from claimcheck.engine.training import search as S

    session = Session.open(session_dir)
    upstream, ctx = session.records(), session.context("contract")
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    for point in S.grid_points(search)[: search.n_trials]:
        study.enqueue_trial(point)

    def objective(trial) -> float:
        settings = {
            s.name: trial.suggest_categorical(s.name, [S.typed(s.name, c) for c in s.choices])
            for s in search.space
        }
        eff = S.trial_effective(base, settings)
        digest = digest_of(eff)
        op = operation_id(digest, 1)
        job = out / op
        export_job(job, Operation(eff, digest, op, 1), upstream, ctx)
        subprocess.run(
            [sys.executable, "-m", "claimcheck.engine.training.job", str(job.resolve())],
            cwd=job,
            check=True,
            capture_output=True,
        )
        value = dev_value(job)
        if value is None:
            raise RuntimeError(f"{job}: no dev figure")
        return value

    t = time.perf_counter()
    study.optimize(objective, n_trials=search.n_trials)
    return time.perf_counter() - t


def ours(session_dir: Path, search, base: dict, round_no: int) -> float:
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.stages.contract import tuning

    session = Session.open(session_dir)
    ctx = session.context("contract")
    search = search.model_copy(update={"revision": round_no})
    t = time.perf_counter()
    frozen = tuning.freeze(search, digest_of(base), session_dir, replay=False)
    rdir = tuning.revision_dir(session_dir, search.revision)
    st = tuning.Study(search, base, session.records(), ctx, rdir, frozen, False, "macro_f1")
    ledger = tuning.run_search(st)
    took = time.perf_counter() - t
    bad = [r.number for r in ledger if r.state != "complete"]
    if bad:
        raise RuntimeError(f"trials {bad} did not complete")
    return took


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tuning-bench-") as tmp:
        session = _workspace(Path(tmp) / "ws")
        base = session_contract(session)
        search = _search(args.trials)
        load0 = os.getloadavg()
        times: dict[str, list[float]] = {"plain": [], "claimcheck": []}
        for r in range(1, args.rounds + 1):  # the order alternates round by round
            sides = [("plain", lambda r=r: plain(session, search, base, Path(tmp) / f"plain{r}"))]
            sides.append(("claimcheck", lambda r=r: ours(session, search, base, r)))
            for name, fn in sides if r % 2 else sides[::-1]:
                times[name].append(fn())
        load1 = os.getloadavg()
    p, c = sum(times["plain"]), sum(times["claimcheck"])
    n = args.trials * args.rounds
    result = {
        "trials_per_side": n,
        "plain_s": [round(x, 2) for x in times["plain"]],
        "claimcheck_s": [round(x, 2) for x in times["claimcheck"]],
        "plain_per_trial_s": round(p / n, 2),
        "claimcheck_per_trial_s": round(c / n, 2),
        "ratio": round(c / p, 3),
        "overhead_per_trial_s": round((c - p) / n, 2),
        "loadavg_before": [round(x, 2) for x in load0],
        "loadavg_after": [round(x, 2) for x in load1],
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    return 0


def session_contract(session_dir: Path) -> dict:
    from claimcheck.engine.ledger.session import Session

    rec = Session.open(session_dir).record("contract")
    return dict(rec.check("contract.effective").measured["effective"])


if __name__ == "__main__":
    raise SystemExit(main())
