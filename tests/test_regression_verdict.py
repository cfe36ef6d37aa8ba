"""A numeric-target claim without fine-tuning, on a firm × year panel with fewer than 20 firms and a
time split: the claim verdict the artifact records (met / not met / not decided, made by varying
the success criterion) is the one the TUI banner, the stage list, the report headline and --json
state, verbatim; the candidate is never compared with itself; the trivial predictor is the named one,
fitted on train only; baseline and artifact apply the one interval rule (too few units: no interval)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tomlkit

from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.stats import uncertainty
from tests.test_regression import REG_CLAIM, SOURCE, panel

FIRMS = 11  # fewer than uncertainty.MIN_UNITS independent units

# The success criteria that make each claim verdict on the same data.
CRITERIA = {
    "met": {"metric": "mae", "op": "<=", "value": 1.0e6, "relative_to": "absolute"},
    "not_met": {"metric": "mae", "op": "<=", "value": 1.0e-9, "relative_to": "absolute"},
    "not_decided": {"metric": "mae", "op": "<=", "value": 0.0, "relative_to": "trivial_baseline"},
}


def _answers(ws: Path, success: dict, **stages: dict) -> Path:
    claim = REG_CLAIM | {
        "primary_metric": "mae",
        "success": success,
        "target_kind": "measured_quantity",
        "review_scope": [],
    }
    answers = {
        "session": {"title": "firm margins", "recipe": "tabular-sklearn", "workspace": "."},
        "claim": claim,
        "source": SOURCE | {"time_column": "year", "time_unit": "year"},
        "split": {
            "strategy": "time",
            "rationale": "later years are held out: the claim is about next years' margins",
            "fractions": {"train": 0.5, "dev": 0.1, "calibration": 0.1, "test": 0.3},
        },
        # cv left at its default "auto": K-fold cannot run here and the holdout runs instead
        "baseline": {"learners": ["mean", "median", "hgb"], "hgb_max_iter": 20},
        "contract": {
            "task_kind": "tabular",
            "seed": 0,
            "candidate": {"learner": "best_baseline", "fit_rows": "train"},
        },
        "dispatch": {"provider": "local"},
        "artifact": {
            "bootstrap_resamples": 200,
            "seed": 0,
            "latency_examples": 3,
            "slice_columns": ["firm_id"],
        },
    }
    for stage, fields in stages.items():
        answers[stage] |= fields
    path = ws / "answers.toml"
    path.write_text(tomlkit.dumps(answers))
    return path


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    """One real session per claim verdict (the criterion varied), each built headless."""
    out = {}
    for state, success in CRITERIA.items():
        ws = tmp_path_factory.mktemp(state)
        panel(FIRMS, years=20, seed=5).write_csv(ws / "panel.csv")
        result = run_answers(_answers(ws, success), ws / "s")
        assert not result.error, result.error
        out[state] = (ws / "s", result)
    return out


def _verdict(session_dir: Path) -> artifact_shapes.Verdict:
    rec = Session.open(session_dir).record("artifact")
    v = parse(rec.check("artifact.verdict"), artifact_shapes.Verdict)
    assert v is not None
    return v


@pytest.mark.parametrize("state", list(CRITERIA))
def test_every_reader_states_the_recorded_claim_verdict(sessions, state: str) -> None:
    from claimcheck.engine.report.build import render
    from claimcheck.tui.stage_words import stage_banner, state_words, verdict_line

    session_dir, result = sessions[state]
    rec = Session.open(session_dir).record("artifact")
    v = _verdict(session_dir)
    assert v.claim_state == {"not_decided": "not_run"}.get(state, state)
    words = {"met": "met", "not_met": "not met", "not_decided": "not decided"}[state]
    line = v.claim_line()
    assert line == f"CLAIM {words.upper()}: {v.reason()}" and v.reason()
    # the TUI banner and the stage list
    assert stage_banner("frozen", rec).plain.splitlines()[0].endswith(line)
    assert verdict_line(v)[1].endswith(line)
    assert state_words("frozen", rec) == f"frozen · {words}"
    # the report's headline
    md, _ = render(session_dir)
    head = md.split("\n## ", 1)[0]
    from claimcheck.engine.report.render import md_escape

    # the headline: the arms' values on the locked test, then the record's reason verbatim
    headline = next(x for x in head.splitlines() if x.startswith(f"> **CLAIM {words.upper()}** — "))
    assert f"{md_escape(v.reason().rstrip('.'))}." in headline
    # the claim's target_kind (measured_quantity) sets what the report says the label is
    assert "Predicting a measured quantity as it was recorded is not predicting its true value" in md
    assert "recorded workflow label is not" not in md
    # --json of the answers run and of replay
    doc = json.loads(json.dumps(result.to_json(), default=str))
    assert doc["claim_verdict"]["line"] == line and doc["claim_verdict"]["reason"] == v.reason()
    if state == "not_decided":  # the reason is the interval rule, recorded
        assert "too few units for an interval; the verdict is not decided" in v.reason()
    else:
        assert v.reason().startswith("needs candidate mae ≤")


def test_replay_json_states_the_same_verdict(sessions) -> None:
    from claimcheck.engine.headless.replay import replay

    session_dir, _ = sessions["not_decided"]
    result = replay(session_dir)
    assert result.exit_code == 0, [r.to_json() for r in result.rows if r.failing]
    assert result.to_json()["claim_verdict"]["line"] == _verdict(session_dir).claim_line()


def test_no_arm_is_compared_with_itself(sessions) -> None:
    for session_dir, _ in sessions.values():
        recs = Session.open(session_dir).records()
        spec = recs["contract"].check("contract.effective").measured["effective"]["sklearn"]
        best = parse(recs["baseline"].check("baseline.conventional"), baseline_shapes.Conventional)
        assert spec["learner"] in best.learners  # the candidate is the best baseline learner
        art = recs["artifact"]
        comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
        arms = parse(art.check("artifact.arms"), artifact_shapes.Arms)
        assert "best_baseline" not in comp.values and "best_baseline" not in comp.differences
        assert "candidate" not in comp.differences
        assert "comparing a model with itself" in comp.excluded["best_baseline"]
        assert "best_baseline" in arms.excluded and "best_baseline" not in arms.arms
        # the claim's comparator left out as the candidate itself does not fail the arms check
        assert art.check("artifact.arms").status != "fail"


def test_the_trivial_predictor_is_the_named_one_fitted_on_train_only(sessions) -> None:
    session_dir, _ = sessions["met"]
    recs = Session.open(session_dir).records()
    learn = parse(recs["baseline"].check("baseline.learnability"), baseline_shapes.Learnability)
    assert learn.reference == "median"  # the registry's trivial predictor for MAE
    ws = session_dir.parent
    import polars as pl

    split = pl.read_parquet(next((session_dir / "data").glob("split*.parquet")))
    frame = pl.read_csv(ws / "panel.csv").join(split, left_on="obs_id", right_on=split.columns[0])
    train = frame.filter(pl.col("split") == "train")["margin"].to_numpy()
    arms = parse(recs["artifact"].check("artifact.arms"), artifact_shapes.Arms)
    what = arms.arms["trivial_baseline"].what
    assert f"always {float(np.median(train)):.4g}" in what and f"train split's {len(train)} " in what
    assert "median" in what
    # the baseline stage records the same predictor and the rows its trivial learners were fitted on
    trivial = parse(recs["baseline"].check("baseline.trivial"), baseline_shapes.Trivial)
    assert (trivial.reference, trivial.fitted_on, trivial.fit_rows) == ("median", "train", len(train))
    assert (
        recs["baseline"]
        .check("baseline.trivial")
        .summary.endswith(
            f"the trivial reference for mae: median, fitted on the train split's {len(train):,} rows"
        )
    )


def test_baseline_and_artifact_apply_one_interval_rule(sessions) -> None:
    session_dir, _ = sessions["not_decided"]
    recs = Session.open(session_dir).records()
    base = parse(recs["baseline"].check("baseline.learnability"), baseline_shapes.Learnability).difference
    comp = parse(recs["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    d = comp.differences["trivial_baseline"]
    assert base.units < uncertainty.MIN_UNITS and base.refused and base.lo is None
    assert d.units < uncertainty.MIN_UNITS and d.refused and d.lo is None and d.hi is None
    assert not comp.candidate_better["trivial_baseline"]
    summary = recs["artifact"].check("artifact.comparison").summary
    assert "(no interval: too few units)" in summary and "nan" not in summary


def test_slices_on_a_numeric_target_hold_per_slice_error_and_the_interval_rule(sessions) -> None:
    import polars as pl

    from claimcheck.engine.stats import metrics

    session_dir, _ = sessions["met"]
    art = Session.open(session_dir).record("artifact")
    chk = art.check("artifact.slices")
    sl = parse(chk, artifact_shapes.Slices)
    assert chk.status in ("pass", "warn") and sl.metric == "mae"
    assert sl.slices and all(k.startswith("firm_id=") for k in sl.slices)
    # one firm per slice: one unit, so every slice interval is refused under the one rule
    for by in sl.intervals.values():
        assert set(by) == {"trivial_baseline"}
        assert all(d.refused and d.lo is None for d in by.values())
    # every firm of the locked test is a slice; the trivial arm's per-slice MAE is recomputed here
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert sum(int(e["rows"]) for e in sl.slices.values()) == comp.shared_rows
    assert len(sl.slices) == FIRMS and all(e["rows"] >= 5 for e in sl.slices.values())
    recs = Session.open(session_dir).records()
    ws = session_dir.parent
    split = pl.read_parquet(next((session_dir / "data").glob("split*.parquet")))
    frame = pl.read_csv(ws / "panel.csv").join(split, left_on="obs_id", right_on=split.columns[0])
    train_median = float(np.median(frame.filter(pl.col("split") == "train")["margin"].to_numpy()))
    firm = frame.filter((pl.col("split") == "test") & (pl.col("firm_id") == "F000"))["margin"].to_numpy()
    expected = metrics.regression_report(firm, np.full(firm.size, train_median))["mae"]
    assert sl.slices["firm_id=F000"]["trivial_baseline"] == pytest.approx(expected, rel=1e-9)
    for reg in sl.regressions:  # MAE: lower is better; a slice regression is a higher candidate MAE
        e = sl.slices[reg.slice]
        assert e["candidate"] > e[reg.versus]
    assert recs["artifact"].check("artifact.slices").coverage.startswith("test rows scored")


def test_the_baseline_panel_reads_the_difference_in_the_metric_direction(sessions) -> None:
    from claimcheck.tui.stage_panels import render_baseline

    session_dir, _ = sessions["met"]
    rec = Session.open(session_dir).record("baseline")
    learn = parse(rec.check("baseline.learnability"), baseline_shapes.Learnability)
    assert learn.metric == "mae" and learn.difference.refused and learn.difference.estimate < 0
    text = render_baseline(rec, None).plain
    assert "beats the trivial baseline: not decided: no interval" in text
    assert "is better (mae: lower is better)" in text


def test_no_job_words_and_the_rows_the_candidate_is_fitted_on(sessions) -> None:
    from claimcheck.tui.stage_words import artifact_readiness

    session_dir, _ = sessions["met"]
    recs = Session.open(session_dir).records()
    said = artifact_readiness("frozen", recs["dispatch"], None)
    assert "no job for this claim" in said and "the job finished" not in said
    assert "is frozen" in artifact_readiness("draft", recs["dispatch"], None)
    ident = recs["contract"].check("contract.data_identity")
    membership = recs["split"].check("split.membership").measured["sizes"]
    assert ident.summary.endswith(f"{membership['train']:,} rows the candidate is fitted on (train)")
    assert ident.measured["train_rows"] == membership["train"]


def test_a_criterion_relative_to_the_candidate_itself_is_not_decided(tmp_path: Path) -> None:
    panel(FIRMS, years=20, seed=5).write_csv(tmp_path / "panel.csv")
    success = {"metric": "mae", "op": "<=", "value": 0.0, "relative_to": "best_baseline"}
    result = run_answers(_answers(tmp_path, success), tmp_path / "s")
    assert not result.error, result.error
    v = _verdict(tmp_path / "s")
    assert v.claim_state == "not_run" and v.claim_word() == "not decided"
    assert "relative to 'best_baseline'" in v.reason() and "comparing a model with itself" in v.reason()
    assert result.to_json()["claim_verdict"]["reason"] == v.reason()


def test_cv_auto_falls_back_to_the_holdout_and_records_why(sessions) -> None:
    """11 firms over a time split: every firm starts in the first fold, so K-fold (which cv "auto"
    picks for a small train) cannot make two folds with training rows; the train/dev holdout runs and
    every baseline check's coverage says so."""
    session_dir, _ = sessions["met"]
    rec = Session.open(session_dir).record("baseline")
    assert rec.inputs.get("cv", "auto") == "auto"
    dev = Session.open(session_dir).record("split").check("split.membership").measured["sizes"]["dev"]
    for cid in ("baseline.trivial", "baseline.conventional", "baseline.learnability"):
        cov = rec.check(cid).coverage
        assert cov.startswith(f"full: all {dev} dev rows (cv 'auto' fell back to the train/dev holdout: ")
        assert "K-fold needs at least two folds with training rows" in cov
    assert rec.check("baseline.timing").measured["mode"] == "holdout"


def test_cv_on_that_cannot_make_folds_is_refused_with_the_reason(tmp_path: Path) -> None:
    panel(FIRMS, years=20, seed=5).write_csv(tmp_path / "panel.csv")
    answers = _answers(tmp_path, CRITERIA["met"], baseline={"cv": "on"})
    result = run_answers(answers, tmp_path / "s")
    assert "K-fold needs at least two folds with training rows" in result.error


def test_slices_too_small_for_any_measure_are_refused_with_the_reason(tmp_path: Path) -> None:
    """A test split of 2 years: each firm's slice has 2 rows, below MIN_SLICE_ROWS; the check is
    not run and says why, never a passing check over no slices."""
    from claimcheck.engine.artifact.sklearn_candidate import MIN_SLICE_ROWS

    panel(FIRMS, years=20, seed=5).write_csv(tmp_path / "panel.csv")
    fractions = {"train": 0.7, "dev": 0.1, "calibration": 0.1, "test": 0.1}
    result = run_answers(_answers(tmp_path, CRITERIA["met"], split={"fractions": fractions}), tmp_path / "s")
    assert not result.error, result.error
    chk = Session.open(tmp_path / "s").record("artifact").check("artifact.slices")
    assert chk.status == "not_run"
    assert chk.summary.startswith(f"no slice of firm_id has {MIN_SLICE_ROWS} or more scored test rows ")
    assert f"({FIRMS} slice(s), at most 2 rows each): per-slice mae is refused" in chk.summary


def test_the_panels_of_a_numeric_target_show_its_spread_and_errors_not_class_words(sessions) -> None:
    from claimcheck.engine.shapes import data as data_shapes
    from claimcheck.tui.numeric_panels import METRIC_WORD
    from claimcheck.tui.plots import num
    from claimcheck.tui.stage_panels import (
        render_artifact,
        render_baseline,
        render_contract,
        render_source,
        render_split,
    )

    session_dir, _ = sessions["not_decided"]
    recs = Session.open(session_dir).records()
    source = render_source(recs["source"], None).plain
    dist = parse(recs["source"].check("source.target_distribution"), data_shapes.TargetDistribution)
    assert "Target distribution (numeric)" in source and f"median {num(dist.summary.p50)}" in source
    assert "Class distribution" not in source and "accuracy ceiling" not in source
    split = render_split(recs["split"], None).plain
    per = parse(recs["split"].check("split.target_distribution"), data_shapes.SplitTargetDistribution)
    assert "Target per split" in split and "Prevalence per split" not in split
    for name, s in per.per_split.items():
        assert f"{name} {s.count:,}: median {num(s.p50)}, 5–95% [{num(s.p05)}, {num(s.p95)}]" in split
    base = render_baseline(recs["baseline"], None).plain
    assert "Error per learner" in base and "Confusion matri" not in base and "Per-class" not in base
    head = next(x for x in base.splitlines() if x.lstrip().startswith("learner"))
    assert head.split()[1:] == [METRIC_WORD[m] for m in ("mae", "rmse", "r2")]  # the claim's metric first
    conv = parse(recs["baseline"].check("baseline.conventional"), baseline_shapes.Conventional)
    hgb = next(x for x in base.splitlines() if x.split()[:1] == ["hgb"])
    assert hgb.split()[1] == num(conv.learners["hgb"].mae)
    contract = render_contract(recs["contract"], None).plain
    assert recs["contract"].check("contract.candidate").summary in contract
    assert "Token-length" not in contract and "Decoded examples" not in contract
    # the verdict block states the record's three-way claim verdict, never a yes/no "claim met: no"
    art = render_artifact(recs["artifact"], None).plain
    assert "claim not decided: " in art and "claim met: no" not in art
    assert "Calibration" not in art  # no probabilities on a numeric target
    # no job: the dispatch panel draws no training curves ("not measured" would suggest missing ones)
    from claimcheck.tui.stage_panels import render_dispatch_record

    assert recs["dispatch"].check("dispatch.no_job") is not None
    assert render_dispatch_record(recs["dispatch"]).plain == ""


def test_the_trivial_predictor_the_baseline_names_is_the_one_compared(tmp_path: Path) -> None:
    """trivial_reference = "mean" on an MAE claim (whose default is the median): the learnability
    difference and the artifact's trivial_baseline arm both use the train mean."""
    panel(FIRMS, years=20, seed=5).write_csv(tmp_path / "panel.csv")
    answers = _answers(tmp_path, CRITERIA["met"], baseline={"trivial_reference": "mean"})
    result = run_answers(answers, tmp_path / "s")
    assert not result.error, result.error
    recs = Session.open(tmp_path / "s").records()
    learn = parse(recs["baseline"].check("baseline.learnability"), baseline_shapes.Learnability)
    assert learn.reference == "mean"
    arms = parse(recs["artifact"].check("artifact.arms"), artifact_shapes.Arms)
    assert "mean" in arms.arms["trivial_baseline"].what and "median" not in arms.arms["trivial_baseline"].what


def test_a_named_trivial_predictor_that_is_not_fitted_is_refused(tmp_path: Path) -> None:
    panel(FIRMS, years=20, seed=5).write_csv(tmp_path / "panel.csv")
    baseline = {"trivial_reference": "mean", "learners": ["median", "hgb"]}
    result = run_answers(_answers(tmp_path, CRITERIA["met"], baseline=baseline), tmp_path / "s")
    assert "trivial_reference 'mean' names a learner that is not fitted" in result.error
    assert "Traceback" not in result.error


def test_errors_on_the_locked_test_are_recorded_per_arm_and_drawn(sessions) -> None:
    """artifact.errors: the trivial arm's predicted − actual recomputed by hand (train median minus
    each locked-test value); the candidate's predicted-vs-actual grid counts every shared row; the
    artifact panel draws both."""
    import polars as pl

    from claimcheck.tui.plots import num
    from claimcheck.tui.stage_panels import render_artifact

    session_dir, _ = sessions["met"]
    art = Session.open(session_dir).record("artifact")
    errs = parse(art.check("artifact.errors"), artifact_shapes.Errors)
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert errs is not None and errs.metric == "mae" and errs.rows == comp.shared_rows
    assert set(errs.error) == {"candidate", "trivial_baseline"}
    split = pl.read_parquet(next((session_dir / "data").glob("split*.parquet")))
    frame = pl.read_csv(session_dir.parent / "panel.csv").join(
        split, left_on="obs_id", right_on=split.columns[0]
    )
    train = frame.filter(pl.col("split") == "train")["margin"].to_numpy()
    test = frame.filter(pl.col("split") == "test")["margin"].to_numpy()
    trivial = errs.error["trivial_baseline"]
    assert trivial.count == test.size
    assert trivial.p50 == pytest.approx(float(np.median(np.median(train) - test)), rel=1e-9)
    assert trivial.mean == pytest.approx(float(np.mean(np.median(train) - test)), rel=1e-9)
    grid = errs.predicted_vs_actual
    assert grid is not None and sum(map(sum, grid.counts)) == errs.rows
    assert grid.lo <= float(test.min()) and grid.hi >= float(test.max())
    text = render_artifact(art, None).plain
    assert "Error (predicted − actual) per arm" in text and "Predicted vs actual, candidate" in text
    assert f"trivial_baseline {trivial.count}: median {num(trivial.p50)}" in text


def test_a_categorical_record_keeps_the_class_pictures(sessions) -> None:
    """The numeric checks a categorical target records as not run do not switch the panels over."""
    from claimcheck.tui.numeric_panels import is_numeric
    from claimcheck.tui.stage_panels import render_source

    session_dir, _ = sessions["met"]
    src = Session.open(session_dir).record("source")
    assert is_numeric(src, "source.target_distribution")
    checks = [
        c.model_copy(update={"status": "not_run", "basis": "not_run", "measured": {}})
        if c.id == "source.target_distribution"
        else c
        for c in src.checks
    ]
    categorical = src.model_copy(update={"checks": checks})
    assert not is_numeric(categorical, "source.target_distribution")
    text = render_source(categorical, None).plain
    assert "Target distribution (numeric)" not in text and "accuracy ceiling" in text
