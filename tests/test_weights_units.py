"""Sample weights in parts (engine/data/weights.py, engine/stats/registry.py): a weighted metric is
scikit-learn's metric with sample_weight, its interval is drawn on weighted resamples, and a weight
column that is not a non-negative finite number is refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn import metrics as skm

from claimcheck.engine.stages.claim.inputs import Inputs as ClaimInputs
from claimcheck.engine.stages.source.inputs import Inputs as SourceInputs
from claimcheck.engine.stats import registry, uncertainty
from claimcheck.tui.cli import main

CLASSES = ("a", "b", "c")


def _class_rows(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    proba = rng.dirichlet([1.0, 1.0, 1.0], n)
    proba[np.arange(n), y] += 0.4  # better than chance
    w = rng.uniform(0.0, 3.0, n)
    w[:17] = 0.0  # zero-weight rows count for nothing
    return y, proba / proba.sum(axis=1, keepdims=True), w


SKLEARN_CLASS = {
    "accuracy": lambda y, p, w: skm.accuracy_score(y, p.argmax(1), sample_weight=w),
    "balanced_accuracy": lambda y, p, w: skm.balanced_accuracy_score(y, p.argmax(1), sample_weight=w),
    "macro_f1": lambda y, p, w: skm.f1_score(y, p.argmax(1), average="macro", sample_weight=w),
    "weighted_f1": lambda y, p, w: skm.f1_score(y, p.argmax(1), average="weighted", sample_weight=w),
    "log_loss": lambda y, p, w: skm.log_loss(y, p, sample_weight=w, labels=[0, 1, 2]),
}


@pytest.mark.parametrize("name", sorted(SKLEARN_CLASS))
def test_a_weighted_class_metric_is_sklearns_with_sample_weight(name: str) -> None:
    y, proba, w = _class_rows()
    scoring = registry.Scoring(CLASSES, -1, (0, 1, 2), weights=w)
    got = registry.get(name).value(y, proba, scoring)
    assert got == pytest.approx(SKLEARN_CLASS[name](y, proba, w), rel=1e-12, abs=1e-12)
    # and the weights matter: the unweighted figure differs
    assert got != pytest.approx(registry.get(name).value(y, proba, registry.Scoring(CLASSES, -1, (0, 1, 2))))


@pytest.mark.parametrize(
    ("name", "ref"),
    [
        ("mae", skm.mean_absolute_error),
        (
            "rmse",
            lambda y, p, sample_weight: np.sqrt(skm.mean_squared_error(y, p, sample_weight=sample_weight)),
        ),
        ("r2", skm.r2_score),
    ],
)
def test_a_weighted_regression_metric_is_sklearns_with_sample_weight(name: str, ref) -> None:
    rng = np.random.default_rng(3)
    y = rng.normal(1e6, 50.0, 300)  # far from zero: the centring must keep R² exact
    pred = y + rng.normal(0.0, 20.0, 300)
    w = rng.exponential(1.0, 300)
    got = registry.get(name).value(y, pred, registry.Scoring(weights=w))
    assert got == pytest.approx(ref(y, pred, sample_weight=w), rel=1e-9)


def test_the_weighted_interval_resamples_weighted_rows() -> None:
    """Integer weights are row multiplicities: the weighted estimate equals the metric on the rows
    repeated, and the weighted paired interval is drawn on the weighted resamples (it differs from
    the unweighted one, and it brackets the weighted estimate)."""
    y, proba, _ = _class_rows(300, seed=5)
    w = np.random.default_rng(7).integers(0, 4, len(y)).astype(float)
    trivial = np.tile([1.0, 0.0, 0.0], (len(y), 1))
    m = registry.get("macro_f1")
    scoring = registry.Scoring(CLASSES, -1, (0, 1, 2), weights=w)
    rep = np.repeat(np.arange(len(y)), w.astype(int))
    plain = registry.Scoring(CLASSES, -1, (0, 1, 2))
    assert m.value(y, proba, scoring) == pytest.approx(m.value(y[rep], proba[rep], plain))
    boot = uncertainty.Bootstrap(n=300, seed=1, classes=CLASSES, labels=[0, 1, 2])
    weighted = registry.paired_difference(m, (y, proba, trivial, None), boot, scoring)
    unweighted = registry.paired_difference(m, (y, proba, trivial, None), boot, plain)
    assert weighted["estimate"] == pytest.approx(m.value(y, proba, scoring) - m.value(y, trivial, scoring))
    assert weighted["lo"] <= weighted["estimate"] <= weighted["hi"]
    assert (weighted["lo"], weighted["hi"]) != (unweighted["lo"], unweighted["hi"])
    ci = registry.interval(m, (y, proba, None), boot, scoring)
    assert ci["estimate"] == pytest.approx(m.value(y, proba, scoring))


def test_a_metric_that_cannot_be_weighted_is_refused_by_the_claim() -> None:
    base = {
        "task_kind": "tabular",
        "class_order": ["a", "b"],
        "positive_class": "a",
        "metric_weighting": "sample_weight",
    }
    with pytest.raises(ValueError, match="metric_weighting = 'sample_weight' is not computed for auroc"):
        ClaimInputs.model_validate({**base, "primary_metric": "auroc"})
    ok = ClaimInputs.model_validate({**base, "primary_metric": "macro_f1", "positive_class": ""})
    assert ok.metric_weighting == "sample_weight"
    assert [n for n, m in registry.METRICS.items() if m.weightable] == [
        "accuracy",
        "balanced_accuracy",
        "macro_f1",
        "weighted_f1",
        "log_loss",
        "brier",
        "mae",
        "rmse",
        "r2",
        "quadratic_weighted_kappa",
        "mae_rank",
    ]


def test_the_weight_column_is_neither_the_label_nor_an_input() -> None:
    with pytest.raises(ValueError, match="names the label column"):
        SourceInputs.model_validate({"label_column": "y", "weight_column": "y"})
    with pytest.raises(ValueError, match="not a model input"):
        SourceInputs.model_validate({"label_column": "y", "input_columns": ["w", "x"], "weight_column": "w"})


# ---------------------------------------------------------------- refused before anything is written

ANSWERS = """[session]
workspace = "."

[claim]
task_kind = "tabular"
prediction_unit = "one row"
target_meaning = "the label"
target_kind = "recorded_workflow_label"
inference_inputs = ["x"]
population = "all rows"
primary_metric = "accuracy"
metric_weighting = "{weighting}"
class_order = ["a", "b"]
comparators = ["trivial_baseline"]
fine_tuning = {fine_tuning}
run_scope = "weights refusal table"

[claim.success]
metric = "accuracy"
op = ">="
value = 0.5

[source]
files = ["data.csv"]
label_column = "label"
input_columns = ["x"]
id_column = "id"
{weight_line}
[source.independent_rows]
declared = true
rationale = "generated rows, one per id"

[split]
strategy = "random"
seed = 0
"""


def _workspace(tmp_path: Path, bad: str, weighting: str, weight_line: str, fine_tuning: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    rows = ["id,x,label,w"] + [f"{i},{i % 5},{'a' if i % 2 else 'b'},{1 + i % 3}" for i in range(40)]
    if bad:
        rows[12] = f"11,1,a,{bad}"  # data line 12 (file line 13 counting the header)
    (ws / "data.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    text = ANSWERS.format(weighting=weighting, weight_line=weight_line, fine_tuning=fine_tuning)
    (ws / "answers.toml").write_text(text, encoding="utf-8")
    return ws


@pytest.mark.parametrize(
    ("bad", "weighting", "weight_line", "fine_tuning", "expect"),
    [
        ("-1.0", "sample_weight", 'weight_column = "w"', "false", "line 12 (-1.0)"),
        ("NaN", "sample_weight", 'weight_column = "w"', "false", "line 12 (nan)"),
        ("inf", "unweighted", 'weight_column = "w"', "false", "line 12 (inf)"),
        ("", "sample_weight", "", "false", "declares no 'weight_column'"),
        ("", "unweighted", 'weight_column = "w"', "true", "fine-tuned tabular job's loss is unweighted"),
        ("", "unweighted", 'weight_column = "label"', "false", "names the label column"),
    ],
)
def test_bad_weights_are_refused_before_anything_is_written(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    bad: str,
    weighting: str,
    weight_line: str,
    fine_tuning: str,
    expect: str,
) -> None:
    ws = _workspace(tmp_path, bad, weighting, weight_line, fine_tuning)
    session = tmp_path / "session"
    rc = main(["run", "--answers", str(ws / "answers.toml"), str(session)])
    _, err = capsys.readouterr()
    assert rc == 2, err
    assert expect in err and "Traceback" not in err
    assert not session.exists()


def test_good_weights_run_through_the_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.shapes import data as data_shapes
    from claimcheck.engine.shapes import parse

    ws = _workspace(tmp_path, "0", "sample_weight", 'weight_column = "w"', "false")
    session = tmp_path / "session"
    main(["run", "--answers", str(ws / "answers.toml"), str(session)])
    capsys.readouterr()
    recs = Session.open(session).records()
    sw = parse(recs["source"].check("source.sample_weights"), data_shapes.SampleWeights)
    assert (sw.rows, sw.zero_weight_rows, sw.metric_weighting) == (40, 1, "sample_weight")
    assert sw.total_mass == pytest.approx(sum(1 + i % 3 for i in range(40)) - 3)  # row 11's 3 became 0
    mass = parse(recs["split"].check("split.weight_mass"), data_shapes.SplitWeightMass)
    assert sum(p.rows for p in mass.splits.values()) == 40
    assert sum(p.total_mass for p in mass.splits.values()) == pytest.approx(sw.total_mass)
    assert sum(p.mass_share for p in mass.splits.values()) == pytest.approx(1.0)
