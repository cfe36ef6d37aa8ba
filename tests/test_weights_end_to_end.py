"""A weighted claim (docs/answers-weights.toml, sample_data/tickets_weighted.csv) runs all seven
stages headless to a verdict with intervals, and replay reproduces it. The weights travel with the
rows (source.sample_weights, split.weight_mass), every scikit-learn fit gets them as sample_weight
(baseline.sample_weights; the contracted candidate), and the artifact's metric is scikit-learn's
metric with sample_weight on the candidate's own locked-test predictions."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from claimcheck.engine.headless.answers import load_answers, run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-weights.toml"


@pytest.fixture(scope="module")
def weighted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    session_dir = tmp_path_factory.mktemp("weights") / "s"
    return session_dir, run_answers(ANSWERS, session_dir)


def test_the_documented_weights_answers_parse_and_are_referenced() -> None:
    answers = load_answers(ANSWERS)
    assert answers.stages["source"]["weight_column"] == "weight"
    assert answers.stages["claim"]["metric_weighting"] == "sample_weight"
    assert "docs/answers-weights.toml" in (ROOT / "docs" / "answers-format.md").read_text()


def test_the_sample_file_is_small_and_regenerated_byte_for_byte(tmp_path: Path) -> None:
    import polars as pl

    from sample_data import make_weights

    path = ROOT / "sample_data" / "tickets_weighted.csv"
    assert path.stat().st_size < 1_000_000
    out = make_weights.build(pl.read_csv(ROOT / "sample_data" / "tickets.csv", infer_schema_length=0))
    out.write_csv(tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_bytes() == path.read_bytes()


def test_weights_travel_through_every_stage(weighted) -> None:
    session_dir, result = weighted
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(session_dir).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    sw = parse(recs["source"].check("source.sample_weights"), data_shapes.SampleWeights)
    assert recs["source"].check("source.sample_weights").status == "pass"
    assert sw.column == "weight" and sw.metric_weighting == "sample_weight"
    assert sw.zero_weight_rows > 0 and sw.min == 0.0 and sw.max == 4.0
    assert "never collapsed into weights" in recs["source"].check("source.duplicate_inputs").summary
    mass = parse(recs["split"].check("split.weight_mass"), data_shapes.SplitWeightMass)
    assert set(mass.splits) == {"train", "dev", "calibration", "test"}
    assert sum(p.rows for p in mass.splits.values()) == sw.rows
    assert mass.total_mass == pytest.approx(sw.total_mass)
    bw = parse(recs["baseline"].check("baseline.sample_weights"), baseline_shapes.BaselineSampleWeights)
    assert bw.learners == ["most_frequent", "prior", "logreg", "hgb"]
    assert bw.fit_rows == mass.splits["train"].rows and bw.fit_mass == pytest.approx(
        mass.splits["train"].total_mass
    )
    comp = parse(recs["artifact"].check("artifact.comparison"), artifact_shapes.Comparison)
    assert "weighted by 'weight'" in recs["artifact"].check("artifact.comparison").summary
    assert all(d.bounded for d in comp.differences.values())
    verdict = parse(recs["artifact"].check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and verdict.artifact_verified


def _candidate_on_test(session_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The contracted candidate rebuilt and fitted as the artifact stage does; its locked-test
    probabilities, the test labels (class index) and weights."""
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
    proba = sklearn_candidate.predictor(model, spec.learner, data)(test)
    y = np.asarray([data.classes.index(str(t)) for t in test["target"].to_list()])
    return proba, y, test["weight"].cast(float).to_numpy(), data.classes


def test_the_weighted_metric_is_sklearns_on_the_same_predictions(weighted) -> None:
    from sklearn.metrics import f1_score

    session_dir, _ = weighted
    comp = parse(
        Session.open(session_dir).records()["artifact"].check("artifact.comparison"),
        artifact_shapes.Comparison,
    )
    proba, y, w, classes = _candidate_on_test(session_dir)
    labels = sorted(set(y.tolist()))
    want = f1_score(y, proba.argmax(axis=1), labels=labels, average="macro", sample_weight=w, zero_division=0)
    assert comp.values["candidate"] == pytest.approx(want, abs=1e-12)
    unweighted = f1_score(y, proba.argmax(axis=1), labels=labels, average="macro", zero_division=0)
    assert abs(unweighted - want) > 1e-6  # the weights changed the figure
    # the trivial arm is train's majority class by weight mass, scored with the same weights
    from claimcheck.engine.data import splits

    sess = Session.open(session_dir)
    train = splits.rows("train", sess.records(), sess.context("artifact"), caller="artifact")
    ti = np.asarray([classes.index(str(t)) for t in train["target"].to_list()])
    mass = np.bincount(ti, weights=train["weight"].cast(float).to_numpy(), minlength=len(classes))
    const = np.full(len(y), int(mass.argmax()))
    trivial = f1_score(y, const, labels=labels, average="macro", sample_weight=w, zero_division=0)
    assert comp.values["trivial_baseline"] == pytest.approx(trivial, abs=1e-12)


def test_replay_reproduces_the_weighted_session(weighted, tmp_path: Path) -> None:
    session_dir, _ = weighted
    copy = tmp_path / "s"
    shutil.copytree(session_dir, copy)
    result = replay(copy)
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    assert any(r.stage == "artifact" and r.check == "artifact.comparison" for r in result.rows)


def test_the_model_card_says_the_metric_is_weighted(weighted) -> None:
    from claimcheck.engine.report.model_card import model_card_data

    session_dir, _ = weighted
    card = model_card_data(Session.open(session_dir))
    (result,) = card.eval_results
    assert result.metric_name == "macro_f1 (weighted) on the locked test"
    assert result.metric_args == {"average": "macro", "sample_weight": "weight"}
