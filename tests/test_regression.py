"""Regression (a numeric target) as a first-class task kind: the claim declares it, the source and
split audits describe the target's distribution instead of classes, the baseline's trivial and
conventional summaries hold their own learners and the primary metric, and the interval on the
difference is sane or refused with its reason. Run on a small firm × year panel written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.data.rows import ROW_ID, TARGET
from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.pipeline.core import InvalidInputs, compute
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.stages.source import checks as source_checks
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import checks as split_checks
from claimcheck.engine.stats import uncertainty
from tests.claim_answers import CLAIM

REG_CLAIM = CLAIM | {
    "task_kind": "tabular",
    "target_type": "numeric",
    "prediction_unit": "one firm in one year",
    "target_meaning": "the firm's reported margin that year",
    "inference_inputs": ["x1", "x2", "size"],
    "population": "listed firms",
    "primary_metric": "r2",
    "metric_averaging": "",
    "class_order": [],
    "success": {"metric": "r2", "op": ">=", "value": 0.0, "relative_to": "trivial_baseline"},
    "comparators": ["trivial_baseline", "best_baseline"],
    "fine_tuning": False,
    "run_scope": "scikit-learn baselines only",
}


def panel(firms: int, years: int = 8, seed: int = 0) -> pl.DataFrame:
    """A firm × year panel: margin = x1 − x2 + a firm effect + noise (rounded, so values repeat)."""
    rng = np.random.default_rng(seed)
    firm = np.repeat(np.arange(firms), years)
    year = np.tile(np.arange(2015, 2015 + years), firms)
    effect = rng.normal(0, 1.0, firms)[firm]
    x1, x2 = rng.normal(size=firm.size), rng.normal(size=firm.size)
    size = np.round(rng.lognormal(3, 1, firms)[firm], 1)
    y = x1 - x2 + effect + rng.normal(0, 0.5, firm.size)
    return pl.DataFrame(
        {
            "obs_id": np.arange(firm.size),
            "firm_id": [f"F{f:03d}" for f in firm],
            "year": year,
            "x1": np.round(x1, 4),
            "x2": np.round(x2, 4),
            "size": size,
            "margin": np.round(y, 3),
        }
    )


SOURCE = {
    "files": ["panel.csv"],
    "label_column": "margin",
    "input_columns": ["x1", "x2", "size"],
    "id_column": "obs_id",
    "entity_columns": ["firm_id"],
    "license": "synthetic, written by the test",
    "provenance": "tests/test_regression.py",
    "availability": {"x1": "yes", "x2": "yes", "size": "yes"},
}


def run_stages(tmp: Path, frame: pl.DataFrame, upto: str = "baseline") -> dict[str, StageRecord]:
    frame.write_csv(tmp / "panel.csv")
    ctx = StageContext(session_dir=tmp / "session", workspace=tmp)
    (tmp / "session" / "data").mkdir(parents=True, exist_ok=True)
    answers = {
        "claim": REG_CLAIM | {"review_scope": []},
        "source": SOURCE,
        "split": {"strategy": "group", "rationale": "new firms"},
        "baseline": {"bootstrap_resamples": 300, "hgb_max_iter": 20, "cv_folds": 3},
    }
    up: dict[str, StageRecord] = {}
    for stage, inputs in answers.items():
        up[stage] = compute(stage, inputs, up, ctx)
        if stage == upto:
            break
    return up


@pytest.fixture(scope="module")
def forty_firms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StageRecord]:
    return run_stages(tmp_path_factory.mktemp("forty"), panel(40))


def _claim(tmp: Path, **change: object) -> StageRecord:
    ctx = StageContext(session_dir=tmp / "session", workspace=tmp)
    return compute("claim", REG_CLAIM | {"review_scope": []} | change, {}, ctx)


def test_the_claim_declares_a_numeric_target(tmp_path: Path) -> None:
    rec = _claim(tmp_path)
    assert rec.inputs["target_type"] == "numeric"
    assert rec.check("claim.completeness").status == "pass"  # no class_order for a numeric target
    assert rec.check("claim.success_criterion").status == "pass"
    # A categorical tabular target still needs its class order; a numeric one needs a regression metric.
    cat = _claim(
        tmp_path, target_type="categorical", primary_metric="macro_f1", success={"metric": "macro_f1"}
    )
    assert "class_order" in cat.check("claim.completeness").measured["missing"]
    # A metric the registry does not compute for the target is refused before the stage runs.
    with pytest.raises(InvalidInputs, match=r"'macro_f1' is not computed .* numeric target \(a regression"):
        _claim(tmp_path, primary_metric="macro_f1", success={"metric": "macro_f1"})
    with pytest.raises(InvalidInputs, match="no metric is computed for a text_classification claim"):
        _claim(tmp_path, task_kind="text_classification")
    # Left empty, the type is derived: a tabular claim with a regression metric is numeric.
    from claimcheck.engine.stats.registry import target_type

    assert target_type(REG_CLAIM | {"target_type": ""}) == "numeric"
    assert target_type(CLAIM) == "categorical"


def test_source_describes_the_numeric_target(forty_firms: dict[str, StageRecord], tmp_path: Path) -> None:
    rec = forty_firms["source"]
    assert rec.check("source.class_coverage").status == "not_run"
    dist = rec.check("source.target_distribution")
    shape = parse(dist, data_shapes.TargetDistribution)
    y = panel(40)["margin"]
    assert dist.status == "info" and shape.rows == 320 and shape.non_numeric == 0
    s = shape.summary
    assert (s.count, s.min, s.max) == (320, y.min(), y.max())
    assert s.p50 == pytest.approx(float(y.median())) and s.std == pytest.approx(float(y.std()))
    assert s.p05 < s.p25 < s.p50 < s.p75 < s.p95
    # Labels that are not numbers fail, named, rather than vanishing.
    labels = [str(v) for v in panel(40)["margin"]]
    bad = panel(40).with_columns(
        pl.Series("margin", ["n/a" if i in (0, 5) else v for i, v in enumerate(labels)])
    )
    frame = bad.with_columns(pl.col("margin").alias(TARGET))
    chk = source_checks.target_distribution(frame, source.Inputs(**SOURCE), "full")
    assert chk.status == "fail" and "2 label(s)" in chk.summary and "'n/a'" in chk.summary


def test_split_describes_the_target_per_split(forty_firms: dict[str, StageRecord]) -> None:
    rec = forty_firms["split"]
    for cid in ("split.prevalence", "split.label_coverage", "split.class_support"):
        assert rec.check(cid).status == "not_run", cid
    dist = parse(rec.check("split.target_distribution"), data_shapes.SplitTargetDistribution)
    sizes = rec.check("split.membership").measured["sizes"]
    assert {s: p.count for s, p in dist.per_split.items()} == {s: n for s, n in sizes.items() if n}
    assert dist.whole.count == 320
    assert rec.check("split.target_range").status in ("pass", "warn")


def test_held_out_targets_outside_the_train_range_warn_with_counts() -> None:
    joined = pl.DataFrame(
        {
            "split": ["train"] * 5 + ["dev"] * 4 + ["test"] * 3,
            TARGET: ["0", "2.5", "10", "4", "7", "1.049", "13.032", "-3", "5", "5", "6", "7"],
        }
    )
    chk = split_checks.target_range(joined)
    r = parse(chk, data_shapes.TargetRange)
    assert chk.status == "warn" and "absent" not in chk.summary
    assert (r.train_min, r.train_max) == (0.0, 10.0)
    assert r.below_train_min == {"dev": 1, "test": 0} and r.above_train_max == {"dev": 1, "test": 0}
    assert r.share_outside == {"dev": 0.5, "test": 0.0}
    assert "dev: 2 (1 below, 1 above, 50.0%)" in chk.summary
    inside = split_checks.target_range(joined.filter(~pl.col(TARGET).is_in(["13.032", "-3"])))
    assert inside.status == "pass"


def test_baseline_summaries_hold_their_own_learners_and_the_primary_metric(
    forty_firms: dict[str, StageRecord],
) -> None:
    rec = forty_firms["baseline"]
    triv = parse(rec.check("baseline.trivial"), baseline_shapes.Trivial)
    conv = parse(rec.check("baseline.conventional"), baseline_shapes.Conventional)
    assert set(triv.learners) == {"mean", "median"} and set(conv.learners) == {"hgb"}
    assert "hgb" not in rec.check("baseline.trivial").summary
    assert "mean" not in rec.check("baseline.conventional").summary
    assert conv.primary_metric == triv.primary_metric == "r2"
    assert rec.check("baseline.conventional").summary.startswith("hgb: R² ")
    assert "R²" in rec.check("baseline.trivial").summary
    hgb = conv.learners["hgb"]
    assert hgb.r2 is not None and hgb.r2 > 0.3 and hgb.intervals["r2"].bounded
    learn = parse(rec.check("baseline.learnability"), baseline_shapes.Learnability)
    d = learn.difference
    assert learn.metric == "r2" and d.units >= uncertainty.MIN_UNITS and d.refused is None
    # The difference of R² recomputed on each resample: it brackets the estimate, and is bounded.
    assert d.lo is not None and d.hi is not None
    assert d.lo <= d.estimate <= d.hi and -1.0 < d.lo and d.hi < 1.5 and d.hi - d.lo < 0.6
    assert d.estimate == pytest.approx(hgb.r2 - triv.learners[learn.reference].r2)
    assert rec.check("baseline.learnability").status == "pass"


def test_too_few_firms_refuse_the_interval_with_the_reason(tmp_path: Path) -> None:
    rec = run_stages(tmp_path, panel(11, seed=1))["baseline"]
    learn = rec.check("baseline.learnability")
    d = parse(learn, baseline_shapes.Learnability).difference
    assert d.units < uncertainty.MIN_UNITS and d.lo is None and d.hi is None
    assert d.refused and f"needs at least {uncertainty.MIN_UNITS}" in d.refused
    assert learn.status == "warn" and "no interval" in learn.summary
    conv = parse(rec.check("baseline.conventional"), baseline_shapes.Conventional)
    assert (
        conv.learners["hgb"].intervals == {} and "no intervals" in rec.check("baseline.conventional").summary
    )


# ---------------------------------------------------------------- leakage on numeric columns


def _leak_frame(n: int, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    label = rng.choice(["a", "b", "c"], size=n)
    # ids allocated in per-class ranges, every one distinct (unseen out of fold as an exact value)
    ident = np.array(["abc".index(t) * 100_000 for t in label]) + rng.permutation(n)
    return pl.DataFrame(
        {ROW_ID: np.arange(n), "case_no": ident, "noise": rng.integers(0, 50, n), TARGET: label}
    )


def test_an_identifier_in_per_class_ranges_is_caught_on_300_rows() -> None:
    from claimcheck.engine.audit.leakage import single_feature_scores

    df = _leak_frame(300)
    scores = single_feature_scores(df, ["case_no", "noise"])
    assert scores["case_no"]["gain"] >= 0.8, scores["case_no"]
    assert scores["noise"]["gain"] < 0.2
    inp = source.Inputs(files=["x.csv"], label_column="y", input_columns=["case_no", "noise"], id_column="")
    ident, single = source_checks.leakage(df, inp)
    assert ident.status == "fail" and "case_no" in ident.measured["flagged_in_model_inputs"]
    assert single.status == "fail" and single.measured["suspected_in_model_inputs"] == ["case_no"]
    # Deterministic: the same figures on a second run.
    assert single_feature_scores(df, ["case_no", "noise"]) == scores


def test_a_copy_of_a_numeric_target_fails_single_feature_leakage() -> None:
    rng = np.random.default_rng(2)
    y = np.round(rng.normal(50, 10, 300), 2)
    df = pl.DataFrame(
        {
            ROW_ID: np.arange(300),
            "scaled_target": y * 1.01,
            "unrelated": rng.normal(size=300),
            TARGET: [str(v) for v in y],
        }
    )
    inp = source.Inputs(files=["x.csv"], label_column="y", input_columns=["scaled_target", "unrelated"])
    _, single = source_checks.leakage(df, inp, numeric=True)
    scores = {s["column"]: s for s in single.measured["scores"]}
    assert single.status == "fail" and single.measured["suspected_in_model_inputs"] == ["scaled_target"]
    assert scores["scaled_target"]["r2"] > 0.95 and scores["unrelated"]["gain"] < 0.1
    assert "R²" not in single.summary or "scaled_target" in single.summary


def test_r2_intervals_hold_for_a_target_far_from_zero() -> None:
    """Σy² − (Σy)²/n cancels for a target near 1e9: R² per resample must still be the real one."""
    from sklearn.metrics import r2_score

    rng = np.random.default_rng(4)
    firms = np.repeat(np.arange(30), 10)
    x = rng.normal(size=300)
    y = 1e9 + 3 * x + rng.normal(0, 1, 300)
    good, mean = 1e9 + 3 * x, np.full(300, y.mean())
    ci = uncertainty.bootstrap_ci("r2", y, good, firms, uncertainty.Bootstrap(n=400, seed=0))
    assert ci["estimate"] == pytest.approx(r2_score(y, good), abs=1e-9)
    assert 0.8 < ci["lo"] <= ci["estimate"] <= ci["hi"] < 1.0
    d = uncertainty.paired_bootstrap_diff("r2", y, good, mean, firms, uncertainty.Bootstrap(n=400, seed=0))
    assert d["estimate"] == pytest.approx(r2_score(y, good) - r2_score(y, mean), abs=1e-9)
    assert 0.8 < d["lo"] <= d["estimate"] <= d["hi"] < 1.2


def test_a_regression_session_runs_headless_and_replays(tmp_path: Path) -> None:
    """claim → source → split → baseline from an answers file, then --replay reproduces every figure."""
    import tomlkit

    from claimcheck.tui.cli import main

    panel(24, seed=3).write_csv(tmp_path / "panel.csv")
    answers = {
        "session": {"workspace": "."},
        "claim": REG_CLAIM | {"review_scope": []},
        "source": SOURCE,
        "split": {"strategy": "group", "rationale": "new firms"},
        "baseline": {"bootstrap_resamples": 100, "hgb_max_iter": 10, "cv_folds": 3},
    }
    (tmp_path / "answers.toml").write_text(tomlkit.dumps(answers))
    session = tmp_path / "runs" / "panel"
    assert main(["run", "--answers", str(tmp_path / "answers.toml"), str(session)]) == 0
    assert main(["--replay", str(session)]) == 0
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.shapes import shape_for

    written = {c.id for r in Session.open(session).records().values() for c in r.checks if c.measured}
    for cid in ("source.target_distribution", "split.target_distribution", "split.target_range"):
        assert cid in written and shape_for(cid) is not None
    # The report reads the numeric-target checks as they are (no class figures asked of them).
    assert main(["report", str(session)]) == 0
    report = (session / "report.md").read_text()
    assert "split.target_range" in report and "source.target_distribution" in report


def test_coverage_counts_the_target_distribution_for_a_numeric_target(
    forty_firms: dict[str, StageRecord],
) -> None:
    """Items answered by class coverage / prevalence for classes are answered by the target's
    distribution for a number (the map's "a|b" alternatives), not left "partly" by a not_run check."""
    from claimcheck.engine.report import coverage

    cov = coverage.compute(forty_firms, {n: "frozen" for n in forty_firms})
    refs = [e.ref for it in cov.reforms for e in it.evidence]
    assert "check:source.class_coverage" not in refs and "check:split.prevalence" not in refs
    chosen = [e for it in cov.reforms for e in it.evidence if e.ref == "check:source.target_distribution"]
    assert chosen and all(e.found and e.status != "not_run" for e in chosen)
