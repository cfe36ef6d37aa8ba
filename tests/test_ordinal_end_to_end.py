"""An ordinal claim (docs/answers-ordinal.toml, sample_data/tickets_ratings.csv) runs all seven
stages headless to a verdict judged in quadratic-weighted kappa, and replay reproduces it. QWK is
scikit-learn's cohen_kappa_score(weights="quadratic") on the candidate's own locked-test predictions,
MAE on ranks is the mean rank distance, the confusion matrix is in the class order, and the trivial
arm is train's median class."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix, f1_score

from claimcheck.engine.headless.answers import load_answers, run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-ordinal.toml"
ORDER = ["very_poor", "poor", "fair", "good", "excellent"]


@pytest.fixture(scope="module")
def ordinal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    session_dir = tmp_path_factory.mktemp("ordinal") / "s"
    return session_dir, run_answers(ANSWERS, session_dir)


# ---------------------------------------------------------------- parts (fast)


def test_qwk_and_rank_mae_are_sklearns_weighted_or_not() -> None:
    from claimcheck.engine.stats import registry

    rng = np.random.default_rng(11)
    y = rng.integers(0, 5, 600)
    proba = rng.dirichlet(np.ones(5), 600)
    proba[np.arange(600), np.clip(y + rng.integers(-1, 2, 600), 0, 4)] += 1.0
    pred = proba.argmax(axis=1)
    w = rng.uniform(0.0, 2.0, 600)
    qwk, rank = registry.get("quadratic_weighted_kappa"), registry.get("mae_rank")
    plain, weighted = registry.Scoring(tuple(ORDER)), registry.Scoring(tuple(ORDER), weights=w)
    labels = list(range(5))
    assert qwk.value(y, proba, plain) == pytest.approx(
        cohen_kappa_score(y, pred, weights="quadratic", labels=labels), abs=1e-12
    )
    assert qwk.value(y, proba, weighted) == pytest.approx(
        cohen_kappa_score(y, pred, weights="quadratic", labels=labels, sample_weight=w), abs=1e-12
    )
    assert rank.value(y, proba, plain) == pytest.approx(np.abs(y - pred).mean())
    assert rank.value(y, proba, weighted) == pytest.approx(np.average(np.abs(y - pred), weights=w))
    assert rank.lower_is_better and not qwk.lower_is_better


def test_the_median_class_is_the_weighted_median_in_the_class_order() -> None:
    from claimcheck.engine.baseline.ordinal import MedianClass

    y = np.asarray(["very_poor"] * 4 + ["fair"] * 1 + ["excellent"] * 4, dtype=object)
    m = MedianClass(tuple(ORDER)).fit(np.zeros((9, 1)), y)
    assert m.predict(np.zeros((2, 1))).tolist() == ["fair", "fair"]  # the mode would be a tie of the ends
    w = np.asarray([1.0] * 4 + [1.0] + [5.0] * 4)
    assert MedianClass(tuple(ORDER)).fit(np.zeros((9, 1)), y, sample_weight=w).predict([0])[0] == "excellent"
    proba = m.predict_proba(np.zeros((3, 1)))
    assert proba.shape == (3, 5) and (proba[:, ORDER.index("fair")] == 1).all()


def test_ordinal_metrics_and_targets_are_refused_where_they_do_not_apply() -> None:
    from claimcheck.engine.stages.claim.inputs import Inputs

    base = {"task_kind": "tabular", "class_order": ORDER}
    with pytest.raises(ValueError, match="set target_type = 'ordinal'"):
        Inputs.model_validate({**base, "primary_metric": "quadratic_weighted_kappa"})
    with pytest.raises(ValueError, match="at least three"):
        Inputs.model_validate({**base, "target_type": "ordinal", "class_order": ["low", "high"]})
    ok = Inputs.model_validate({**base, "target_type": "ordinal", "primary_metric": "mae_rank"})
    assert ok.target_type == "ordinal"


# ---------------------------------------------------------------- the session


def test_the_documented_ordinal_answers_parse_and_are_referenced() -> None:
    answers = load_answers(ANSWERS)
    assert answers.stages["claim"]["target_type"] == "ordinal"
    assert answers.stages["claim"]["class_order"] == ORDER
    assert "docs/answers-ordinal.toml" in (ROOT / "docs" / "answers-format.md").read_text()


def test_the_sample_file_is_small_and_regenerated_byte_for_byte(tmp_path: Path) -> None:
    import polars as pl

    from sample_data import make_ratings

    path = ROOT / "sample_data" / "tickets_ratings.csv"
    assert path.stat().st_size < 1_000_000
    out = make_ratings.build(pl.read_csv(ROOT / "sample_data" / "tickets.csv", infer_schema_length=0))
    out.write_csv(tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == path.read_bytes()
    assert sorted(set(out["rating"].to_list())) == sorted(ORDER)


def _candidate_on_test(session_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The contracted candidate rebuilt and fitted as the artifact stage does: its locked-test
    decisions and the test labels, as ranks in the class order."""
    from claimcheck.engine.artifact import sklearn_candidate
    from claimcheck.engine.baseline.learners import load
    from claimcheck.engine.data import splits
    from claimcheck.engine.stages.baseline import run as baseline
    from claimcheck.engine.training.schema import SklearnCandidate

    sess = Session.open(session_dir)
    recs = sess.records()
    spec = SklearnCandidate.model_validate(
        recs["contract"].check("contract.effective").measured["effective"]["sklearn"]
    )
    settings = baseline.Inputs.model_validate(spec.baseline_settings)
    ctx = sess.context("artifact")
    data = load(settings, recs, ctx)
    model = sklearn_candidate.fit(
        sklearn_candidate.plan(spec.learner, spec.C, settings, data), spec.learner, spec.fit_rows
    )
    test = splits.rows("test", recs, ctx, caller="artifact")
    pred = sklearn_candidate.predictor(model, spec.learner, data)(test).argmax(axis=1)
    return pred, np.asarray([ORDER.index(str(t)) for t in test["target"].to_list()])


@pytest.mark.slow
def test_an_ordinal_claim_reaches_a_verdict_in_qwk(ordinal) -> None:
    session_dir, result = ordinal
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(session_dir).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    conv = recs["baseline"].check("baseline.conventional").measured
    assert all("quadratic_weighted_kappa" in r for r in conv["learners"].values())
    assert "median_class" in recs["baseline"].check("baseline.trivial").measured["learners"]
    comp = parse(recs["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "quadratic_weighted_kappa" and all(d.bounded for d in comp.differences.values())
    verdict = parse(recs["artifact"].check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and "trivial_baseline" in verdict.criterion

    pred, y = _candidate_on_test(session_dir)
    want = cohen_kappa_score(y, pred, weights="quadratic")
    assert comp.values["candidate"] == pytest.approx(want, abs=1e-12)
    ordc = parse(recs["artifact"].check("artifact.ordinal"), artifact_shapes.Ordinal)
    assert ordc.class_order == ORDER and not ordc.weighted
    cand = ordc.figures["candidate"]
    assert cand["quadratic_weighted_kappa"] == pytest.approx(want, abs=1e-12)
    assert cand["mae_rank"] == pytest.approx(np.abs(y - pred).mean())
    assert cand["macro_f1"] == pytest.approx(f1_score(y, pred, labels=sorted(set(y)), average="macro"))
    assert ordc.confusion["candidate"] == confusion_matrix(y, pred, labels=list(range(5))).tolist()
    # the trivial arm predicts train's median class for every row
    trivial = np.asarray(ordc.confusion["trivial_baseline"])
    assert (trivial.sum(axis=0) > 0).sum() == 1
    what = recs["artifact"].check("artifact.arms").measured["arms"]["trivial_baseline"]["what"]
    median = ORDER[int(np.flatnonzero(trivial.sum(axis=0))[0])]
    assert what == f"always '{median}' (train's median class in the class order)"


@pytest.mark.slow
def test_replay_reproduces_the_ordinal_session(ordinal, tmp_path: Path) -> None:
    session_dir, _ = ordinal
    copy = tmp_path / "s"
    shutil.copytree(session_dir, copy)
    result = replay(copy)
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    assert any(r.stage == "artifact" and r.check == "artifact.ordinal" for r in result.rows)
