"""A declared tuning search (docs/tuning.md): the declaration's refusals, the freeze and its revisions,
selection with the seed spread, and docs/answers-tuning.toml run CI-sized on real records and
replayed. Searches killed mid-trial, run on Ray or pruned while they train: tests/test_tuning_runs.py."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import tomlkit

from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import tuning as TU
from claimcheck.engine.shapes.tuning import TrialRecord
from claimcheck.engine.stages.contract import tuning
from claimcheck.engine.stages.contract.selection import select
from claimcheck.engine.training import search as S
from claimcheck.engine.training.schema import Search

BASE = {
    "seed": 3,
    "micro_batch": 16,
    "grad_accum": 1,
    "dp_replicas": 1,
    "effective_batch": 16,
    "epochs": 1,
    "max_steps": 12,
    "optimizer_steps": 12,
    "optimizer": {"lr": 3e-3},
    "lora": {"r": 8},
    "schedule": {"warmup_ratio": 0.06, "warmup_steps": 1},
    "data": {"train_rows": 100},
}


def _search(**kw) -> Search:
    doc = {
        "hypothesis": "a higher learning rate helps",
        "n_trials": 6,
        "sampler": "grid",
        "space": [
            {"name": "optimizer.lr", "choices": [1e-3, 3e-3, 1e-2]},
            {"name": "lora.r", "choices": [4, 8]},
        ],
    }
    doc.update(kw)
    return Search.model_validate(doc)


def _refusals(search: Search) -> list[str]:
    return S.refusals(search, BASE, "macro_f1", False)


# ---------------------------------------------------------------- the declaration


def test_the_documented_search_is_accepted() -> None:
    assert _refusals(_search()) == []
    assert S.grid_size(_search()) == 6


def test_varying_batch_size_with_the_learning_rate_pinned_is_refused() -> None:
    why = _refusals(_search(space=[{"name": "micro_batch", "choices": [8, 16]}], n_trials=2))
    assert any("varies micro_batch but pins optimizer.lr" in w for w in why), why
    # varying both is a retune, accepted
    both = [{"name": "micro_batch", "choices": [8, 16]}, {"name": "optimizer.lr", "choices": [1e-3, 3e-3]}]
    assert _refusals(_search(space=both, n_trials=4)) == []


@pytest.mark.parametrize(
    ("space", "kw", "needle"),
    [
        ([{"name": "model_path", "choices": ["a", "b"]}], {}, "not a setting a search may vary"),
        ([{"name": "optimizer.lr", "low": 1e-4, "high": 1e-2}], {}, "grid sampler needs choices"),
        ([{"name": "optimizer.lr", "low": 1e-2, "high": 1e-4}], {"sampler": "tpe"}, "low < high"),
        ([{"name": "optimizer.lr", "low": 0.0, "high": 1e-2, "log": True}], {"sampler": "tpe"}, "log scale"),
        ([{"name": "lora.r", "choices": [4.5, 8]}], {}, "not int values"),
        ([{"name": "optimizer.lr", "choices": [1e-3, 3e-3]}], {"n_trials": 3}, "exceed the grid's 2 points"),
        (
            [{"name": "optimizer.lr", "choices": [1e-3, 3e-3]}],
            {"n_trials": 2, "dev_metric": "accuracy"},
            "not the metric",
        ),
        (
            [{"name": "optimizer.lr", "choices": [1e-3, 3e-3]}],
            {"n_trials": 2, "tied": [["optimizer.lr", "lora.alpha"]]},
            "varies optimizer.lr but pins lora.alpha",
        ),
    ],
)
def test_a_declaration_that_cannot_run_is_refused_with_its_reason(space, kw, needle) -> None:
    why = _refusals(_search(space=space, **kw))
    assert any(needle in w for w in why), why


def test_a_search_without_a_hypothesis_is_invalid() -> None:
    with pytest.raises(ValueError, match="hypothesis"):
        Search.model_validate({"n_trials": 2, "space": [{"name": "optimizer.lr", "choices": [1e-3]}]})


def test_a_trial_contract_is_the_base_with_its_settings() -> None:
    eff = S.trial_effective(BASE, {"optimizer.lr": 1e-2, "micro_batch": 8}, seed=5)
    assert (eff["optimizer"]["lr"], eff["micro_batch"], eff["effective_batch"], eff["seed"]) == (
        1e-2,
        8,
        8,
        5,
    )
    assert eff["optimizer_steps"] == 12  # max_steps pins the budget
    assert BASE["optimizer"]["lr"] == 3e-3  # the base is not touched


def test_a_declaration_changed_after_its_trials_began_is_refused_and_a_new_revision_keeps_the_old(
    tmp_path: Path,
) -> None:
    first = tuning.freeze(_search(), "sha256:base", tmp_path, replay=False)
    assert tuning.freeze(_search(), "sha256:base", tmp_path, replay=False).frozen_at == first.frozen_at
    rdir = tuning.revision_dir(tmp_path, 1)
    rec = TrialRecord(
        number=0, kind="trial", settings={"optimizer.lr": 1e-3}, seed=3, digest="sha256:x", op_id="x-a1",
        state="complete", metric="macro_f1", value=0.5, started_at=tuning.now_iso(),
    )  # fmt: skip
    tuning.write_trial(rdir, rec)
    changed = _search(hypothesis="a larger rank helps")
    with pytest.raises(StageInputError, match="declare revision 2"):
        tuning.freeze(changed, "sha256:base", tmp_path, replay=False)
    second = tuning.freeze(changed.model_copy(update={"revision": 2}), "sha256:base", tmp_path, replay=False)
    assert [(e["revision"], e["trial_files"]) for e in second.earlier] == [(1, 1)]
    assert (rdir / "trials" / "t000.toml").is_file()


# ---------------------------------------------------------------- selection


def _rec(number: int, value: float, seed: int = 3, kind: str = "trial", params: int = 100) -> TrialRecord:
    return TrialRecord(
        number=number, kind=kind, settings={"lora.r": number + 1}, seed=seed, digest=f"sha256:{number}",
        op_id=f"{number}-a1", state="complete", metric="macro_f1", value=value, started_at="t",
        trainable_params=params,
    )  # fmt: skip


def test_a_winner_inside_the_seed_spread_is_a_tie_broken_by_the_declared_rule() -> None:
    ledger = [
        _rec(0, 0.60, params=200), _rec(0, 0.50, seed=4, kind="repeat"),
        _rec(1, 0.58, params=100), _rec(1, 0.56, seed=4, kind="repeat"),
        _rec(2, 0.10),
    ]  # fmt: skip
    sel = select(ledger, 2, False, 1, "cheaper")
    assert sel.tie and sel.chosen.number == 1 and "TIE" in sel.rule
    assert select(ledger, 2, False, 1, "first_trial").chosen.number == 0


def test_a_margin_beyond_the_seed_spread_names_the_winner() -> None:
    ledger = [
        _rec(0, 0.80), _rec(0, 0.79, seed=4, kind="repeat"),
        _rec(1, 0.50), _rec(1, 0.52, seed=4, kind="repeat"),
    ]  # fmt: skip
    sel = select(ledger, 2, False, 1, "cheaper")
    assert not sel.tie and sel.chosen.number == 0 and sel.margin > sel.spread


# ---------------------------------------------------------------- pruning a running trial


class _Running:
    """A provider whose job is always training; it records what it was asked to cancel."""

    name = "fake"

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def status(self, handle):
        from claimcheck.engine.providers.base import JobStatus

        return JobStatus(op_id=handle.op_id, phase="training")

    def cancel(self, handle) -> None:
        self.cancelled.append(handle.op_id)


def test_a_trial_behind_the_median_is_cancelled_and_kept_as_pruned(tmp_path: Path) -> None:
    import optuna

    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.jobrecords import EvalLine

    search = _search(pruning="median", pruning_startup_trials=1)
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    first = study.ask()
    first.report(0.9, 6)
    study.tell(first, 0.9)
    trial = study.ask()
    job = tmp_path / "job"
    job.mkdir()
    line = dict(
        split="dev", step=6, time=0.0, metric="macro_f1", loss=1.0, train_value=0.0, train_rows=1, rows=1
    )
    jobfiles.append_metric(job, EvalLine(kind="eval", value=0.1, phase="training", selected_step=6, **line))
    st, pending = _running_trial(tmp_path, search, trial, job)
    provider = _Running()
    tuning._poll(st, provider, pending, study)
    assert pending == {} and provider.cancelled == ["x-a1"]
    assert study.trials[1].state == optuna.trial.TrialState.PRUNED
    (kept,) = tuning.read_ledger(st.rdir)
    assert (kept.state, kept.value) == ("pruned", None) and "median" in kept.reason


def _running_trial(tmp_path: Path, search: Any, trial: Any, job: Path) -> tuple[Any, dict[str, Any]]:
    """A study of `search` and the one running trial it waits on (job folder `job`), as _poll sees them."""
    from claimcheck.engine.pipeline.context import StageContext
    from claimcheck.engine.providers.base import Handle

    frozen = tuning.Frozen(1, "sha256:d", "sha256:b", "2026-01-01T00:00:00+00:00")
    st = tuning.Study(
        search, BASE, {}, StageContext(tmp_path, tmp_path), tmp_path / "r1", frozen, False, "macro_f1"
    )
    rec = TrialRecord(
        number=trial.number, kind="trial", settings={"optimizer.lr": 1e-3}, seed=3, digest="sha256:x",
        op_id="x-a1", state="running", metric="macro_f1", started_at=tuning.now_iso(),
    )  # fmt: skip
    return st, {"x": tuning.Pending(rec, Handle("x-a1", job, "fake"), trial)}


class _Done(_Running):
    """A provider whose job has ended on its own; nothing to fetch."""

    def status(self, handle):
        from claimcheck.engine.providers.base import JobStatus

        return JobStatus(op_id=handle.op_id, phase="done")

    def fetch(self, handle, dest=None):
        return handle.job_dir


def test_a_trial_that_ended_between_polls_is_told_its_whole_curve(tmp_path: Path) -> None:
    """A trial first seen ended still gives the pruner every dev evaluation at its step, so a later
    trial is judged against it step for step (the median pruner finds no value at a step a
    completed trial did not report)."""
    import optuna

    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.jobrecords import EvalLine

    search = _search(pruning="median", pruning_startup_trials=1)
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=1))
    trial = study.ask()
    job = tmp_path / "job"
    job.mkdir()
    line = dict(split="dev", time=0.0, metric="macro_f1", loss=1.0, train_value=0.0, train_rows=1, rows=1)
    for step, value in ((0, 0.1), (3, 0.4), (6, 0.7)):
        phase = "initial-eval" if step == 0 else "training"
        ev = EvalLine(kind="eval", step=step, value=value, phase=phase, selected_step=-1, **line)
        jobfiles.append_metric(job, ev)
    st, pending = _running_trial(tmp_path, search, trial, job)
    tuning._poll(st, _Done(), pending, study)
    assert pending == {}
    assert study.trials[0].state == optuna.trial.TrialState.COMPLETE
    assert study.trials[0].intermediate_values == {3: 0.4, 6: 0.7}
    # a second trial behind it at step 3 is pruned there
    second = study.ask()
    second.report(0.1, 3)
    assert second.should_prune()


# ---------------------------------------------------------------- the documented search, run for real


@pytest.fixture
def tuned(tuned_workspace: Path) -> Path:
    """docs/answers-tuning.toml run CI-sized by `claimcheck run --answers` (built once per test run,
    conftest.py's tuned_workspace); the workspace."""
    return tuned_workspace


def _contract(ws: Path):
    from claimcheck.engine.ledger.session import Session

    return Session.open(ws / "runs" / "tuned").record("contract")


@pytest.mark.slow
def test_the_documented_search_runs_every_trial_and_the_contract_cites_the_chosen_one(tuned: Path) -> None:
    rec = _contract(tuned)
    trials = parse(rec.check("contract.search_trials"), TU.SearchTrials)
    sel = parse(rec.check("contract.search_selection"), TU.SearchSelection)
    assert (trials.trials, trials.complete, trials.repeats, trials.problems) == (6, 6, 4, [])
    assert len({r.digest for r in trials.rows}) == 10  # every trial and repeat its own contract
    assert len(sel.finalists) == 2 and all(len(f.values) == 3 for f in sel.finalists)
    assert sel.contract_digest == sel.chosen_digest == rec.check("contract.digest").measured["digest"]
    assert sel.tie == (sel.margin <= sel.spread)
    lr, r = sel.chosen_settings["optimizer.lr"], sel.chosen_settings["lora.r"]
    eff = rec.check("contract.effective").measured["effective"]
    assert (eff["optimizer"]["lr"], eff["lora"]["r"]) == (lr, r)


@pytest.mark.slow
def test_no_trial_job_holds_a_locked_test_row(tuned: Path) -> None:
    session = tuned / "runs" / "tuned"
    test_ids = set(
        pl.read_parquet(session / "data" / "split.parquet")
        .filter(pl.col("split") == "test")["row_id"]
        .to_list()
    )
    jobs = sorted((session / "search" / "r1" / "jobs").iterdir())
    assert len(jobs) == 10
    for job in jobs:
        assert sorted(p.name for p in (job / "data").iterdir()) == ["dev.jsonl", "train.jsonl"]
        for name in ("train.jsonl", "dev.jsonl"):
            header, *rows = (job / "data" / name).read_text().splitlines()
            at = json.loads(header).index("row_id")  # a header row, then one list per row
            ids = {json.loads(row)[at] for row in rows}
            assert ids and not ids & test_ids


@pytest.mark.slow
def test_the_tuned_session_replays_and_the_report_discloses_the_search(tuned: Path, capsys) -> None:
    from claimcheck.tui.cli import main

    session = tuned / "runs" / "tuned"
    assert main(["--replay", str(session)]) == 0
    assert main(["report", str(session)]) == 0
    text = (session / "report.md").read_text()
    assert "Tuning: search revision 1 (grid, 6 trials declared" in text
    assert "6 trials run: 6 complete, 0 failed" in text
    conc = parse(_contract(tuned).check("contract.search_concurrency"), TU.SearchConcurrency)
    assert f"{conc.bound} trial(s) at a time of 2 declared (local)" in text
    assert "reused an earlier trial's memory estimate and step time" in text


@pytest.mark.slow
def test_an_edited_ledger_file_fails_replay(tuned: Path, tmp_path: Path) -> None:
    import shutil

    from claimcheck.tui.cli import main

    dest = tmp_path / "copy"
    shutil.copytree(tuned / "runs" / "tuned", dest, ignore=shutil.ignore_patterns(".lock"))
    path = dest / "search" / "r1" / "trials" / "t001.toml"
    doc = tomllib.loads(path.read_text())
    doc["value"] = 0.99
    path.write_text(tomlkit.dumps(doc))
    assert main(["--replay", str(dest)]) != 0


# ---------------------------------------------------------------- throughput / memory evidence, concurrency


def _meta_and_base(ws: Path):
    """The tuned session's base contract (its chosen contract less nothing the estimate reads) and the
    model on the meta device, as the contract stage builds it."""
    from claimcheck.engine.training import models

    eff = _contract(ws).check("contract.effective").measured["effective"]
    return eff, models.meta_model(eff, ws, num_labels=len(eff["label_classes"]))


@pytest.mark.slow
def test_a_trial_with_an_earlier_trials_resource_settings_reuses_its_figures_attributed(tuned: Path) -> None:
    from claimcheck.engine.stages.contract import trial_resources as R
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.pace import step_seconds

    rdir = tuning.revision_dir(tuned / "runs" / "tuned", 1)
    ledger = tuning.read_ledger(rdir)
    by = {(r.number, r.seed): r for r in ledger}
    reused = [r for r in ledger if r.resources_from is not None]
    measured = [r for r in ledger if r.resources_from is None]
    # 6 trials over 2 ranks then 4 seed repeats: past the first trial of each rank, figures are reused
    assert len(reused) >= 4 and {S.resource_key(r.settings)["lora.r"] for r in measured} == {4, 8}
    for r in reused:
        src = by[(r.resources_from, r.resources_from_seed)]
        assert src.digest == r.resources_from_digest and src.resources_from is None
        assert S.resource_key(src.settings) == S.resource_key(r.settings)
        assert (r.memory_bytes, r.step_s) == (src.memory_bytes, src.step_s)
    eff, meta = _meta_and_base(tuned)
    for r in measured:  # its own estimate, and its own job's step time
        assert r.memory_bytes == R.estimate_bytes(eff, r.settings, meta) > 0
        assert r.step_s == round(step_seconds(jobfiles.read_metrics(rdir / "jobs" / r.op_id)), 6)
    assert R.reuse_problems(ledger) == []
    forged = [r.model_copy(update={"step_s": (r.step_s or 0) + 1}) if r is reused[0] else r for r in ledger]
    assert "its figures are not that trial's" in R.reuse_problems(forged)[0]


@pytest.mark.slow
def test_the_search_records_its_concurrency_bound_and_why(tuned: Path, monkeypatch) -> None:
    from claimcheck.engine import threads
    from claimcheck.engine.stages.contract import trial_resources as R
    from claimcheck.engine.training import memory

    rec = _contract(tuned)
    got = parse(rec.check("contract.search_concurrency"), TU.SearchConcurrency)
    assert got.declared == 2 and got.bound == min(x for x in (2, got.cores, got.by_memory) if x)
    assert got.path == "search/r1/resources.toml" and "the least of" in got.why
    eff, meta = _meta_and_base(tuned)
    search = _search(concurrency=4)
    largest = R.estimate_bytes(eff, {"lora.r": 8}, meta)
    assert largest > R.estimate_bytes(eff, {"lora.r": 4}, meta)
    monkeypatch.setattr(threads, "usable_cores", lambda: 8)
    monkeypatch.setattr(memory, "available_memory", lambda device: 100 * largest)
    free = R.bound(search, eff, meta)
    assert (free["bound"], free["threads_per_trial"], free["memory_per_trial_bytes"]) == (4, 2, largest)
    assert "set by declared" in free["why"]
    monkeypatch.setattr(threads, "usable_cores", lambda: 3)
    assert (R.bound(search, eff, meta)["bound"], R.bound(search, eff, meta)["threads_per_trial"]) == (3, 1)
    monkeypatch.setattr(memory, "available_memory", lambda device: int(2.9 * largest / R.MEMORY_SHARE))
    tight = R.bound(search, eff, meta)
    assert (tight["bound"], tight["by_memory"]) == (2, 2) and "set by memory" in tight["why"]
    ray = R.bound(search.model_copy(update={"provider": "ray"}), eff, meta)
    assert ray["bound"] == 4 and "cluster" in ray["why"]
