"""claimcheck.engine.stats.metrics against hand-computed values on tiny inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from claimcheck.engine.stats import calibration, metrics, uncertainty
from claimcheck.engine.stats.uncertainty import Bootstrap as B

C3 = ["a", "b", "c"]


def test_report_hand_computed_three_classes():
    y = ["a", "a", "b", "c"]
    p = np.array([[0.7, 0.2, 0.1], [0.2, 0.5, 0.3], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    r = metrics.classification_report(y, p, C3, ece_bins=2)
    # predictions: a, b, b, c → 3 of 4 right
    assert r["accuracy"] == 0.75
    assert r["confusion"] == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]
    a, b, c = r["per_class"]
    assert (a["support"], a["tp"], a["fp"], a["fn"], a["tn"]) == (2, 1, 0, 1, 2)
    assert a["precision"] == 1.0 and a["recall"] == 0.5 and a["f1"] == pytest.approx(2 / 3)
    assert b["precision"] == 0.5 and b["recall"] == 1.0 and b["f1"] == pytest.approx(2 / 3)
    assert c["f1"] == 1.0
    assert r["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert r["weighted_f1"] == pytest.approx((2 * 2 / 3 + 2 / 3 + 1) / 4)
    assert r["balanced_accuracy"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert r["majority_class"] == "a" and r["majority_rate"] == 0.5
    # log loss: −mean(log .7, log .2, log .8, log .4)
    assert r["log_loss"] == pytest.approx(-np.mean(np.log([0.7, 0.2, 0.8, 0.4])))
    # Brier: Σ_k (p − onehot)² per row, averaged
    rows = [0.09 + 0.04 + 0.01, 0.64 + 0.25 + 0.09, 0.01 + 0.04 + 0.01, 0.09 + 0.09 + 0.36]
    assert r["brier"] == pytest.approx(np.mean(rows))
    # ECE with 2 bins: confidences .7,.5,.8,.4 → bin (0,.5]: {.5 wrong, .4 right}; (.5,1]: {.7 right, .8 right}
    ece = 0.5 * abs(0.5 - 0.45) + 0.5 * abs(1.0 - 0.75)
    assert r["ece"] == pytest.approx(ece)
    # AUROC for class a: positives score .7, .2; negatives .1, .3 → pairs won: (.7>.1,.7>.3,.2>.1) = 3/4
    assert a["auroc"] == pytest.approx(0.75)
    assert r["collapsed_classes"] == []


def test_class_absent_from_dev_is_named_and_left_out_of_macro():
    y = ["a", "b", "a", "b"]
    p = np.array([[0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.2, 0.2, 0.6], [0.4, 0.5, 0.1]])
    r = metrics.classification_report(y, p, C3)
    assert r["classes_absent"] == ["c"]
    assert "recall" not in r["per_class"][2] and "recall.c" in r["undefined"]
    assert "auroc.c" in r["undefined"]
    # a: tp 1, fn 1 (predicted c), precision 1 → f1 2/3; b: 2/2 right, precision 1 → f1 1
    assert r["macro_f1"] == pytest.approx((2 / 3 + 1) / 2)
    assert r["balanced_accuracy"] == pytest.approx((0.5 + 1) / 2)
    assert r["per_class"][2]["fp"] == 1 and r["per_class"][2]["precision"] == 0.0


def test_single_class_dev():
    y = ["a", "a", "a"]
    p = np.array([[0.9, 0.05, 0.05], [0.4, 0.5, 0.1], [0.6, 0.2, 0.2]])
    r = metrics.classification_report(y, p, C3)
    assert r["majority_rate"] == 1.0
    assert r["accuracy"] == pytest.approx(2 / 3)
    assert r["balanced_accuracy"] == pytest.approx(2 / 3)
    assert "macro_auroc" not in r and "macro_auroc" in r["undefined"]
    assert r["log_loss"] == pytest.approx(-np.mean(np.log([0.9, 0.4, 0.6])))


def test_ties_in_scores():
    # arg-max ties go to the earlier class; AUROC counts a tied pair as half
    y = ["a", "b", "b", "a"]
    p = np.array([[0.5, 0.5], [0.5, 0.5], [0.2, 0.8], [0.9, 0.1]])
    r = metrics.classification_report(y, p, ["a", "b"])
    assert r["confusion"] == [[2, 0], [1, 1]]
    # class b scores: positives .5,.8; negatives .5,.1 → pairs: (.5=.5 half, .5>.1, .8>.5, .8>.1) = 3.5/4
    assert r["per_class"][1]["auroc"] == pytest.approx(3.5 / 4)
    assert r["brier"] == pytest.approx(np.mean([0.25, 0.25, 0.04, 0.01]))  # binary: positive-class Brier


def test_collapse_flagged_by_recall():
    y = ["a"] * 9 + ["b"]
    p = np.tile([0.9, 0.1], (10, 1))
    r = metrics.classification_report(y, p, ["a", "b"])
    assert r["accuracy"] == 0.9 and r["collapsed_classes"] == ["b"]


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match="not in the class order"):
        metrics.classification_report(["z"], np.array([[1.0, 0, 0]]), C3)
    with pytest.raises(ValueError, match="sum to 1"):
        metrics.classification_report(["a"], np.array([[0.5, 0.1, 0.1]]), C3)


def test_statistics_match_sklearn_point_values():
    rng = np.random.default_rng(1)
    k, n = 4, 300
    classes = list("wxyz")
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) + 1.5 * np.eye(k)[y]
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    r = metrics.classification_report(y, p, classes)
    for name in ("accuracy", "macro_f1", "weighted_f1", "balanced_accuracy", "log_loss", "brier"):
        s = uncertainty.classification_statistic(name, classes)
        val = s.finish(s.rows(y, p).sum(0, keepdims=True))[0]
        assert val == pytest.approx(r[name], abs=1e-12), name
    s = uncertainty.classification_statistic("recall.x", classes)
    assert s.finish(s.rows(y, p).sum(0, keepdims=True))[0] == pytest.approx(r["per_class"][1]["recall"])


def test_group_bootstrap_wider_than_row_bootstrap_when_groups_correlate():
    # 40 groups of 10 rows; every row of a group is right or wrong together
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(40), 10)
    group_right = rng.random(40) < 0.6
    y = np.zeros(400, dtype=int)
    pred = np.where(group_right[groups], 0, 1)
    row = uncertainty.bootstrap_ci("accuracy", y, pred, None, B(n=500, seed=3, classes=["a", "b"]))
    grp = uncertainty.bootstrap_ci("accuracy", y, pred, groups, B(n=500, seed=3, classes=["a", "b"]))
    assert row["estimate"] == grp["estimate"] == group_right.mean()
    assert grp["units"] == 40 and row["units"] == 400 and grp["unit"] == "group"
    assert (grp["hi"] - grp["lo"]) > 2 * (row["hi"] - row["lo"])


def test_bootstrap_deterministic_and_callable_path_agrees():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 200)
    pred = np.where(rng.random(200) < 0.8, y, 1 - y)
    units = rng.integers(0, 50, 200)
    a = uncertainty.bootstrap_ci("accuracy", y, pred, units, B(n=300, seed=7, classes=["n", "p"]))
    b = uncertainty.bootstrap_ci("accuracy", y, pred, units, B(n=300, seed=7, classes=["n", "p"]))
    assert a == b
    slow = uncertainty.bootstrap_ci(
        lambda t, q: float((t == q).mean()), y, pred, units, B(n=300, seed=7, classes=["n", "p"])
    )
    # same unit draws, so the same interval up to float rounding
    assert slow["lo"] == pytest.approx(a["lo"]) and slow["hi"] == pytest.approx(a["hi"])


def test_paired_diff_and_mcnemar():
    y = np.zeros(100, dtype=int)
    a_right = np.arange(100) < 90
    b_right = np.arange(100) < 60
    d = uncertainty.paired_bootstrap_diff(
        "accuracy",
        y,
        np.where(a_right, 0, 1),
        np.where(b_right, 0, 1),
        None,
        B(n=500, seed=0, classes=["x", "y"]),
    )
    assert d["estimate"] == pytest.approx(0.3) and d["excludes_zero"] and d["lo"] > 0
    t = uncertainty.mcnemar(a_right, b_right)
    assert (t["a_only_correct"], t["b_only_correct"]) == (30, 0)
    assert t["method"].startswith("chi-square") and t["statistic"] == pytest.approx(29**2 / 30)
    small = uncertainty.mcnemar([True, True, True, False], [False, False, True, False])
    # b=2, c=0 → exact two-sided binomial p = 2 · 0.5² = 0.5
    assert small["method"] == "exact binomial" and small["p_value"] == pytest.approx(0.5)


def test_bootstrap_over_20k_rows_is_seeded_and_brackets_the_estimate():
    # Its speed is a benchmark's business (bench/), not a wall-clock assertion on a shared machine.
    rng = np.random.default_rng(0)
    n = 20_000
    y = rng.integers(0, 6, n)
    p = rng.dirichlet(np.ones(6), n)
    units = rng.integers(0, 8000, n)

    def run() -> dict:
        return uncertainty.paired_bootstrap_diff(
            "macro_f1", y, p, np.zeros(n, dtype=int), units, B(n=1000, seed=0, classes=list("abcdef"))
        )

    first = run()
    assert first == run()
    assert first["lo"] <= first["estimate"] <= first["hi"]


def test_regression_and_ranking_and_exact_match():
    r = metrics.regression_report([1, 2, 3, 4], [1, 2, 3, 8])
    assert r["mae"] == 1.0 and r["rmse"] == 2.0 and r["r2"] == pytest.approx(1 - 16 / 5)
    assert "r2" in metrics.regression_report([2, 2], [1, 3])["undefined"]
    stat = uncertainty.regression_statistic("r2")
    y, yh = np.array([1.0, 2, 3, 4]), np.array([1.0, 2, 3, 8])
    assert stat.finish(stat.rows(y, yh).sum(0, keepdims=True))[0] == pytest.approx(r["r2"])
    rel = np.array([[1, 0, 1, 0], [0, 0, 0, 0]])
    sc = np.array([[0.9, 0.8, 0.1, 0.5], [0.1, 0.2, 0.3, 0.4]])
    rr = metrics.ranking_report(rel, sc, k=2)
    assert rr["recall_at_k"] == 0.5 and rr["queries_without_relevant"] == 1
    assert metrics.exact_match(["Yes ", "no"], ["yes", "No"]) == 1.0


def test_ece_helpers():
    p = np.array([[0.95, 0.05], [0.95, 0.05], [0.55, 0.45], [0.55, 0.45]])
    y = np.array([0, 1, 0, 0])
    # bin (0.9,1]: acc .5 vs conf .95; bin (.5,.6]: acc 1 vs .55 → (0.45 + 0.45) / 2
    assert metrics.expected_calibration_error(y, p, n_bins=10) == pytest.approx(0.45)
    bins = metrics.calibration_bins(y, p, n_bins=10)
    assert [b["count"] for b in bins] == [2, 2]


def test_temperature_recovers_known_value():
    rng = np.random.default_rng(0)
    n, k = 4000, 3
    z = rng.normal(scale=2.0, size=(n, k))
    true_p = calibration._softmax(z)
    y = np.array([rng.choice(k, p=row) for row in true_p])
    over = calibration._softmax(z * 2.5)  # overconfident by a factor 2.5
    t = calibration.fit_temperature(over, y)
    assert t == pytest.approx(2.5, rel=0.1)
    cal = calibration.fit_calibrator("temperature", over, y)
    assert metrics.expected_calibration_error(y, cal.transform(over)) < metrics.expected_calibration_error(
        y, over
    )
    for method in ("platt", "isotonic", "none"):
        q = calibration.fit_calibrator(method, over, y).transform(over)
        assert np.allclose(q.sum(1), 1.0)


def test_choose_threshold_rules():
    pos = np.array([1, 1, 0, 1, 0, 0], dtype=bool)
    score = np.array([0.9, 0.8, 0.7, 0.6, 0.3, 0.1])
    # precision ≥ 0.75: t=.6 flags 4 rows with 3 positives (0.75) — the lowest such t
    r = calibration.choose_threshold(pos, score, constraint="min_precision", target=0.75)
    assert r["threshold"] == 0.6 and r["fit"]["precision"] == 0.75 and r["fit"]["recall"] == 1.0
    r = calibration.choose_threshold(pos, score, constraint="min_recall", target=0.6)
    assert r["threshold"] == 0.8
    # FN costs 5, FP 1: t=.6 → FP 1, FN 0 → cost 1 (best)
    r = calibration.choose_threshold(pos, score, constraint="cost", cost_fp=1, cost_fn=5)
    assert r["threshold"] == 0.6 and r["fit"]["cost"] == 1.0
    r = calibration.choose_threshold(pos, score, constraint="min_precision", target=1.01)
    assert not r["feasible"] and math.isinf(r["threshold"])


def test_macro_auroc_callable_bootstrap():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 120)
    p = rng.dirichlet(np.ones(3), 120)
    p[np.arange(120), y] += 1.0
    p /= p.sum(1, keepdims=True)
    r = metrics.classification_report(y, p, C3)
    assert metrics.macro_auroc(y, p) == pytest.approx(r["macro_auroc"])
    assert metrics.macro_auprc(y, p) == pytest.approx(r["macro_auprc"])
    d = uncertainty.paired_bootstrap_diff(
        metrics.macro_auroc, y, p, np.full((120, 3), 1 / 3), None, B(n=100, seed=0, classes=C3)
    )
    assert d["estimate"] == pytest.approx(r["macro_auroc"] - 0.5) and d["lo"] > 0


def test_every_regression_metric_of_the_registry_has_summed_statistics() -> None:
    from claimcheck.engine.stats import registry, uncertainty

    assert set(registry.REGRESSION) == set(uncertainty.REGRESSION_STATISTICS)
