"""Multi-label metrics as per-row sufficient statistics, and per-label decision thresholds.

Labels and decisions are (n, L) 0/1 matrices over the claim's labels (engine/data/labelsets.py
`indicator`). Every metric here is a `Statistic` (engine/stats/uncertainty.py): per-row counts summed
over resampled units, so the unit bootstrap and the paired candidate − comparator interval are exact
and vectorised, as for the single-label class metrics.

- micro_f1: 2·TP / (2·TP + FP + FN) with the counts pooled over every label;
- macro_f1: the mean over labels of each label's F1 (0 where a label is neither held nor predicted
  in the rows scored, scikit-learn's zero_division=0);
- subset_accuracy: the share of rows whose predicted label set equals the true set exactly.

These equal sklearn.metrics.f1_score(average="micro" / "macro", zero_division=0) and accuracy_score
on indicator matrices (tests/test_multilabel.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from claimcheck.engine.stats.uncertainty import Statistic

METRICS = ("micro_f1", "macro_f1", "subset_accuracy")
# The decision threshold of a label whose calibration rows cannot choose one (and the default).
DEFAULT_THRESHOLD = 0.5
# The thresholds tried per label on the calibration rows.
THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(1, 20))


def decisions(scores: np.ndarray, thresholds: Sequence[float] | float = DEFAULT_THRESHOLD) -> np.ndarray:
    """0/1 decisions from (n, L) scores: score ≥ the label's threshold. A 0/1 matrix stays itself."""
    s = np.asarray(scores, dtype=np.float64)
    return (s >= np.asarray(thresholds, dtype=np.float64)).astype(np.int8)


def _counts(y: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = np.asarray(y, dtype=np.float64)
    d = decisions(p)
    return y * d, (1 - y) * d, y * (1 - d)


def statistic(metric: str) -> Statistic:
    """The multi-label `metric` (one of METRICS) as per-row sums; rows(y, pred) reads 0/1 decisions
    (scores are cut at DEFAULT_THRESHOLD)."""
    if metric == "micro_f1":

        def rows(y: np.ndarray, p: np.ndarray) -> np.ndarray:
            tp, fp, fn = _counts(y, p)
            return np.stack([tp.sum(axis=1), fp.sum(axis=1), fn.sum(axis=1)], axis=1)

        def fin(t: np.ndarray) -> np.ndarray:
            den = 2 * t[:, 0] + t[:, 1] + t[:, 2]
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.where(den > 0, 2 * t[:, 0] / np.where(den > 0, den, 1), 0.0)

        return Statistic(metric, rows, fin)
    if metric == "macro_f1":

        def rows_m(y: np.ndarray, p: np.ndarray) -> np.ndarray:
            return np.concatenate(_counts(y, p), axis=1)

        def fin_m(t: np.ndarray) -> np.ndarray:
            tp, fp, fn = np.split(t, 3, axis=1)
            den = 2 * tp + fp + fn
            with np.errstate(invalid="ignore", divide="ignore"):
                f1 = np.where(den > 0, 2 * tp / np.where(den > 0, den, 1), 0.0)
            return f1.mean(axis=1)

        return Statistic(metric, rows_m, fin_m)
    if metric == "subset_accuracy":

        def rows_s(y: np.ndarray, p: np.ndarray) -> np.ndarray:
            same = (np.asarray(y, dtype=np.int8) == decisions(p)).all(axis=1)
            return np.stack([same.astype(np.float64), np.ones(len(same))], axis=1)

        return Statistic(metric, rows_s, lambda t: t[:, 0] / t[:, 1])
    raise ValueError(f"no multi-label statistic for metric {metric!r}")


def value(metric: str, y: np.ndarray, pred: np.ndarray) -> float:
    """The multi-label metric of one arm on the given rows."""
    stat = statistic(metric)
    return float(stat.finish(stat.rows(np.asarray(y), np.asarray(pred)).sum(axis=0, keepdims=True))[0])


def per_label(y: np.ndarray, pred: np.ndarray, labels: Sequence[str]) -> dict[str, dict[str, float | int]]:
    """Per label: support (rows holding it), predicted, precision, recall and F1 of the decisions."""
    tp, fp, fn = (c.sum(axis=0) for c in _counts(y, pred))
    out: dict[str, dict[str, float | int]] = {}
    for j, lab in enumerate(labels):
        t, f_p, f_n = float(tp[j]), float(fp[j]), float(fn[j])
        out[str(lab)] = {
            "support": int(t + f_n),
            "predicted": int(t + f_p),
            "precision": t / (t + f_p) if t + f_p else 0.0,
            "recall": t / (t + f_n) if t + f_n else 0.0,
            "f1": 2 * t / (2 * t + f_p + f_n) if 2 * t + f_p + f_n else 0.0,
        }
    return out


def choose_thresholds(y: np.ndarray, scores: np.ndarray) -> tuple[list[float], list[str]]:
    """Per label, the threshold of THRESHOLD_GRID with the best F1 on these (calibration) rows (ties:
    the one nearest DEFAULT_THRESHOLD), and how each was chosen. A label the rows never hold keeps
    DEFAULT_THRESHOLD: no positive row can choose one."""
    y = np.asarray(y, dtype=np.int8)
    s = np.asarray(scores, dtype=np.float64)
    chosen, how = [], []
    for j in range(y.shape[1]):
        if y[:, j].sum() == 0:
            chosen.append(DEFAULT_THRESHOLD)
            how.append("default: no calibration row holds the label")
            continue
        best, best_f1 = DEFAULT_THRESHOLD, -1.0
        for t in sorted(THRESHOLD_GRID, key=lambda x: abs(x - DEFAULT_THRESHOLD)):
            d = s[:, j] >= t
            tp = float((d & (y[:, j] == 1)).sum())
            den = float(d.sum() + y[:, j].sum())
            f1 = 2 * tp / den if den else 0.0
            if f1 > best_f1 + 1e-12:
                best, best_f1 = t, f1
        chosen.append(float(best))
        how.append(f"best F1 on calibration ({best_f1:.3f})")
    return chosen, how
