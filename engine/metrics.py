"""Task metrics, calibration, operating points and unit-level uncertainty.

Shared by the baseline stage (dev figures) and the artifact stage (locked-test comparison).
Everything here is pure: arrays in, TOML-able dicts out (no None — an undefined figure is left
out and named in an ``undefined`` mapping with the reason).

Conventions, recorded in every report's ``conventions``:
- Class order is the caller's ``classes`` list; probability columns follow it.
- Labels are compared as strings after ``encode`` (unknown labels are an error, not a silent drop).
- Macro averages run over the classes with support in the evaluated rows; absent classes are named.
- Precision of a class never predicted is 0 (sklearn ``zero_division=0``).
- The decision is the arg-max class (ties go to the earlier class in ``classes``) unless a threshold
  is given for a declared operating point.
- Figures are sample-level (one row = one unit of the denominator); intervals resample the
  independent unit given by ``units``.

sklearn.metrics provides every metric it has; this module adds only ECE, recall@k, the vectorised
unit bootstrap, McNemar and the calibrators' glue.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

EPS = float(np.finfo(np.float64).eps)
# Resamples drawn per block; fixed so a seed gives the same resamples however large n is.
_BLOCK = 128


# ---------------------------------------------------------------- encoding


def encode(y: Sequence[Any] | np.ndarray, classes: Sequence[str]) -> np.ndarray:
    """Class labels → int indices in ``classes`` order. Raises ValueError naming unknown labels."""
    index = {str(c): i for i, c in enumerate(classes)}
    arr = np.asarray([str(v) for v in np.asarray(y, dtype=object).ravel()], dtype=object)
    out = np.fromiter((index.get(v, -1) for v in arr), dtype=np.int64, count=len(arr))
    if (out < 0).any():
        unknown = sorted(set(arr[out < 0].tolist()))[:5]
        raise ValueError(f"labels not in the class order {list(classes)}: {unknown}")
    return out


def _as_index(y: Sequence[Any] | np.ndarray, classes: Sequence[str]) -> np.ndarray:
    arr = np.asarray(y)
    if arr.dtype.kind in "iu":
        if len(arr) and (arr.min() < 0 or arr.max() >= len(classes)):
            raise ValueError(f"class index out of range 0..{len(classes) - 1}")
        return arr.astype(np.int64)
    return encode(arr, classes)


def argmax_pred(proba: np.ndarray) -> np.ndarray:
    """Arg-max decision; np.argmax resolves ties to the first (earlier class-order) column."""
    return np.asarray(proba, dtype=np.float64).argmax(axis=1)


def _check_proba(proba: np.ndarray, k: int) -> np.ndarray:
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != k:
        raise ValueError(f"probabilities must have shape (n, {k}), got {p.shape}")
    if len(p) and (not np.isfinite(p).all() or (p < -1e-9).any()):
        raise ValueError("probabilities must be finite and non-negative")
    s = p.sum(axis=1)
    if len(p) and np.abs(s - 1).max() > 1e-6:
        raise ValueError(
            f"probability rows must sum to 1 (worst row sums to {s[np.abs(s - 1).argmax()]:.6f})"
        )
    return p


def _f(x: float) -> float:
    return float(x)


# ---------------------------------------------------------------- classification


def confusion_counts(y_idx: np.ndarray, pred_idx: np.ndarray, k: int) -> np.ndarray:
    """K×K counts, rows = true class, columns = predicted class, in class order."""
    from sklearn.metrics import confusion_matrix

    return confusion_matrix(y_idx, pred_idx, labels=list(range(k)))


def expected_calibration_error(
    y: Sequence[Any] | np.ndarray, proba: np.ndarray, n_bins: int = 15, classes: Sequence[str] | None = None
) -> float:
    """Top-label ECE: equal-width confidence bins on [0, 1], |accuracy − confidence| weighted by bin share.

    Bins are right-closed ((0, 1/n], (1/n, 2/n], ...], the first one also holds 0.
    """
    p = np.asarray(proba, dtype=np.float64)
    y_idx = _as_index(y, classes) if classes is not None else np.asarray(y, dtype=np.int64)
    if len(p) == 0:
        raise ValueError("ECE of an empty set is undefined")
    return float(_ece_from(y_idx, p, n_bins)[0])


def _ece_from(y_idx: np.ndarray, p: np.ndarray, n_bins: int) -> tuple[float, list[dict[str, Any]]]:
    conf = p.max(axis=1)
    correct = (p.argmax(axis=1) == y_idx).astype(np.float64)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.clip(np.searchsorted(edges, conf, side="left") - 1, 0, n_bins - 1)
    n = len(conf)
    ece, bins = 0.0, []
    for b in range(n_bins):
        m = which == b
        cnt = int(m.sum())
        if cnt == 0:
            continue
        acc, cf = float(correct[m].mean()), float(conf[m].mean())
        ece += cnt / n * abs(acc - cf)
        bins.append(
            {
                "lo": float(edges[b]),
                "hi": float(edges[b + 1]),
                "count": cnt,
                "accuracy": acc,
                "confidence": cf,
            }
        )
    return ece, bins


def calibration_bins(
    y: np.ndarray, proba: np.ndarray, n_bins: int = 15, classes: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """Reliability-diagram bins (non-empty only): lo, hi, count, accuracy, mean confidence.

    ``y`` holds class indices, or labels when ``classes`` is given."""
    y_idx = _as_index(y, classes) if classes is not None else np.asarray(y)
    return _ece_from(y_idx, np.asarray(proba, dtype=np.float64), n_bins)[1]


def classification_report(
    y_true: Sequence[Any] | np.ndarray,
    proba: np.ndarray,
    classes: Sequence[str],
    *,
    pred: Sequence[Any] | np.ndarray | None = None,
    ece_bins: int = 15,
) -> dict[str, Any]:
    """Every classification figure for one learner on one set of rows.

    ``proba`` columns follow ``classes``. ``pred`` defaults to the arg-max of ``proba``; pass it
    when a declared threshold decides instead. Undefined figures (AUROC of a class without both
    outcomes, say) are omitted and listed under ``undefined`` with the reason.
    """
    from sklearn import metrics as skm

    classes = [str(c) for c in classes]
    k = len(classes)
    y = _as_index(y_true, classes)
    p = _check_proba(proba, k)
    if len(y) != len(p):
        raise ValueError(f"{len(y)} labels but {len(p)} probability rows")
    if len(y) == 0:
        raise ValueError("no rows to score")
    yhat = argmax_pred(p) if pred is None else _as_index(pred, classes)
    cm = confusion_counts(y, yhat, k)
    support = cm.sum(axis=1)
    present = [i for i in range(k) if support[i] > 0]
    absent = [classes[i] for i in range(k) if support[i] == 0]
    undefined: dict[str, str] = {}

    prec, rec, f1, _ = skm.precision_recall_fscore_support(y, yhat, labels=list(range(k)), zero_division=0.0)
    per_class = []
    for i, c in enumerate(classes):
        row: dict[str, Any] = {
            "class": c,
            "support": int(support[i]),
            "predicted": int(cm[:, i].sum()),
            "tp": int(cm[i, i]),
            "fp": int(cm[:, i].sum() - cm[i, i]),
            "fn": int(support[i] - cm[i, i]),
            "tn": int(len(y) - support[i] - cm[:, i].sum() + cm[i, i]),
            "precision": _f(prec[i]),
        }
        if support[i] > 0:
            row["recall"] = _f(rec[i])
            row["f1"] = _f(f1[i])
        else:
            undefined[f"recall.{c}"] = "class absent from the evaluated rows"
        pos = y == i
        if 0 < pos.sum() < len(y):
            row["auroc"] = _f(skm.roc_auc_score(pos, p[:, i]))
            row["auprc"] = _f(skm.average_precision_score(pos, p[:, i]))
        else:
            undefined[f"auroc.{c}"] = "needs both members and non-members of the class"
        per_class.append(row)

    majority = int(np.argmax(support))
    out: dict[str, Any] = {
        "n": int(len(y)),
        "classes": classes,
        "classes_absent": absent,
        "accuracy": _f(skm.accuracy_score(y, yhat)),
        "majority_class": classes[majority],
        "majority_rate": _f(support[majority] / len(y)),
        "confusion": cm.astype(int).tolist(),
        "per_class": per_class,
        "log_loss": _f(skm.log_loss(y, p, labels=list(range(k)))),
        "brier": _f(_brier_rows(y, p).mean()),
        "ece": _ece_from(y, p, ece_bins)[0],
        "ece_bins": int(ece_bins),
    }
    if present:
        out["macro_f1"] = _f(np.mean([f1[i] for i in present]))
        out["weighted_f1"] = _f(np.average([f1[i] for i in present], weights=[support[i] for i in present]))
        out["balanced_accuracy"] = _f(np.mean([rec[i] for i in present]))
        out["macro_recall"] = out["balanced_accuracy"]
    aurocs = [r["auroc"] for r in per_class if "auroc" in r]
    if aurocs:
        out["macro_auroc"] = _f(np.mean(aurocs))
        out["macro_auprc"] = _f(np.mean([r["auprc"] for r in per_class if "auprc" in r]))
        out["auroc_classes"] = len(aurocs)
    else:
        undefined["macro_auroc"] = "no class has both members and non-members in the evaluated rows"
    out["collapsed_classes"] = [
        r["class"] for r in per_class if r["support"] > 0 and r.get("recall", 0.0) == 0.0
    ]
    out["undefined"] = undefined
    out["conventions"] = {
        "class_order": classes,
        "decision": "arg-max (ties → earlier class)" if pred is None else "caller-supplied predictions",
        "averaging": "macro/weighted over classes with support in the evaluated rows",
        "zero_division": "precision of a never-predicted class = 0",
        "ranking": "AUROC/AUPRC one-vs-rest per class; macro = mean over classes where defined",
        "brier": "mean over rows of Σ_k (p_k − y_k)²" + (" / 2 (binary)" if k == 2 else ""),
        "log_loss": "natural log, probabilities clipped to [eps, 1 − eps]",
        "ece": f"top-label, {ece_bins} equal-width bins on [0, 1], weighted by bin share",
        "denominator": "rows (sample-level)",
    }
    return out


def _macro_ovr(score_fn: Callable[..., float], y_idx: np.ndarray, proba: np.ndarray) -> float:
    y = np.asarray(y_idx, dtype=np.int64)
    vals = []
    for i in range(proba.shape[1]):
        pos = y == i
        if 0 < pos.sum() < len(y):
            vals.append(score_fn(pos, proba[:, i]))
    if not vals:
        raise ValueError("no class has both members and non-members")
    return float(np.mean(vals))


def macro_auroc(y_idx: np.ndarray, proba: np.ndarray) -> float:
    """Mean one-vs-rest AUROC over the classes with both outcomes present (as classification_report).

    Computed as the Mann-Whitney statistic with average ranks (ties count half), which equals
    sklearn's roc_auc_score (tested) without its per-call validation cost: the bootstrap calls
    this once per resample.
    """
    from scipy.stats import rankdata

    def auroc(pos: np.ndarray, score: np.ndarray) -> float:
        n_pos, n_neg = int(pos.sum()), int(len(pos) - pos.sum())
        ranks = rankdata(score)
        return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))

    return _macro_ovr(auroc, y_idx, proba)


def macro_auprc(y_idx: np.ndarray, proba: np.ndarray) -> float:
    """Mean one-vs-rest average precision over the classes with both outcomes present."""
    from sklearn.metrics import average_precision_score

    return _macro_ovr(average_precision_score, y_idx, proba)


def _brier_rows(y_idx: np.ndarray, p: np.ndarray) -> np.ndarray:
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y_idx)), y_idx] = 1.0
    rows = ((p - onehot) ** 2).sum(axis=1)
    return rows / 2.0 if p.shape[1] == 2 else rows  # sklearn's binary Brier is the positive-class one


def _logloss_rows(y_idx: np.ndarray, p: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(p[np.arange(len(y_idx)), y_idx], EPS, 1 - EPS))


# ---------------------------------------------------------------- regression, ranking, generation


def regression_report(
    y_true: Sequence[float] | np.ndarray, y_pred: Sequence[float] | np.ndarray
) -> dict[str, Any]:
    """MAE, RMSE (target units) and R². R² is undefined (omitted) when the target is constant."""
    from sklearn import metrics as skm

    y, yh = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    if len(y) == 0 or len(y) != len(yh):
        raise ValueError(f"need equal, non-zero lengths (got {len(y)} and {len(yh)})")
    out: dict[str, Any] = {
        "n": int(len(y)),
        "mae": _f(skm.mean_absolute_error(y, yh)),
        "rmse": _f(skm.root_mean_squared_error(y, yh)),
        "target_mean": _f(y.mean()),
        "target_std": _f(y.std()),
        "undefined": {},
        "conventions": {"units": "the target's own units", "denominator": "rows (sample-level)"},
    }
    if np.ptp(y) > 0:
        out["r2"] = _f(skm.r2_score(y, yh))
    else:
        out["undefined"]["r2"] = "the target is constant in the evaluated rows"
    return out


def ranking_report(relevance: np.ndarray, scores: np.ndarray, k: int) -> dict[str, Any]:
    """NDCG@k (sklearn; tied scores averaged) and recall@k per query, averaged over queries.

    ``relevance`` and ``scores`` are (queries, items). Recall@k = relevant items in the top k /
    relevant items; ties in the score are broken by item position (stable sort) and queries with
    no relevant item are left out of recall@k and counted.
    """
    from sklearn.metrics import ndcg_score

    rel, sc = np.asarray(relevance, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    if rel.shape != sc.shape or rel.ndim != 2:
        raise ValueError("relevance and scores must both be (queries, items)")
    order = np.argsort(-sc, axis=1, kind="stable")[:, :k]
    hit = np.take_along_axis(rel > 0, order, axis=1).sum(axis=1)
    total = (rel > 0).sum(axis=1)
    has = total > 0
    out: dict[str, Any] = {
        "k": int(k),
        "queries": int(rel.shape[0]),
        "queries_without_relevant": int((~has).sum()),
        "undefined": {},
    }
    if rel.shape[1] > 1:
        out["ndcg_at_k"] = _f(ndcg_score(rel, sc, k=k))
    else:
        out["undefined"]["ndcg_at_k"] = "needs more than one item per query"
    if has.any():
        out["recall_at_k"] = _f((hit[has] / total[has]).mean())
    else:
        out["undefined"]["recall_at_k"] = "no query has a relevant item"
    return out


def exact_match(y_true: Sequence[str], y_pred: Sequence[str], normalise: bool = True) -> float:
    """Share of answers equal to the reference (whitespace-collapsed, case-folded when ``normalise``)."""

    def norm(s: str) -> str:
        return " ".join(str(s).split()).casefold() if normalise else str(s)

    if len(y_true) == 0 or len(y_true) != len(y_pred):
        raise ValueError("need equal, non-zero lengths")
    return float(np.mean([norm(a) == norm(b) for a, b in zip(y_true, y_pred, strict=True)]))


# ---------------------------------------------------------------- unit-level bootstrap


@dataclass
class Statistic:
    """A metric written as per-row sufficient statistics summed over resampled units.

    ``rows(y, pred) -> (n, d)`` per-row statistics; ``finish(totals (B, d)) -> (B,)`` the metric.
    Ratio metrics stay exact under resampling because numerator and denominator are both summed.
    """

    name: str
    rows: Callable[[np.ndarray, np.ndarray], np.ndarray]
    finish: Callable[[np.ndarray], np.ndarray]
    meta: dict[str, Any] = field(default_factory=dict)


def _confusion_rows(y: np.ndarray, pred: np.ndarray, k: int) -> np.ndarray:
    out = np.zeros((len(y), k * k), dtype=np.float64)
    out[np.arange(len(y)), y * k + pred] = 1.0
    return out


def _f1_from_confusion(cm: np.ndarray, labels: list[int], weighted: bool) -> np.ndarray:
    tp = np.diagonal(cm, axis1=1, axis2=2)
    support = cm.sum(axis=2)
    predicted = cm.sum(axis=1)
    denom = support + predicted
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)[:, labels]
    if not weighted:
        return f1.mean(axis=1)
    w = support[:, labels]
    tot = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, (f1 * w).sum(axis=1) / np.where(tot > 0, tot, 1), np.nan)


def classification_statistic(
    metric: str, classes: Sequence[str], labels: list[int] | None = None
) -> Statistic:
    """Decomposable classification metrics: accuracy, macro_f1, weighted_f1, balanced_accuracy,
    log_loss, brier, recall.<class>, precision.<class>, f1.<class>.

    ``labels`` fixes the classes macro averages run over (default: all); the baseline passes the
    classes present in the full evaluated set, so a resample that loses a class scores its F1 as
    0 (sklearn's zero_division) and leaves it out of balanced accuracy (undefined recall).
    """
    k = len(classes)
    labels = list(range(k)) if labels is None else labels
    names = [str(c) for c in classes]

    def pred_of(p: np.ndarray) -> np.ndarray:
        return argmax_pred(p) if p.ndim == 2 else p.astype(np.int64)

    def cm_rows(y: np.ndarray, p: np.ndarray) -> np.ndarray:
        return _confusion_rows(y, pred_of(p), k)

    def cm_of(t: np.ndarray) -> np.ndarray:
        return t.reshape(len(t), k, k)

    if metric == "accuracy":
        return Statistic(metric, cm_rows, lambda t: np.trace(cm_of(t), axis1=1, axis2=2) / t.sum(axis=1))
    if metric in ("macro_f1", "weighted_f1"):
        return Statistic(
            metric, cm_rows, lambda t: _f1_from_confusion(cm_of(t), labels, metric == "weighted_f1")
        )
    if metric in ("balanced_accuracy", "macro_recall"):

        def bal(t: np.ndarray) -> np.ndarray:
            cm = cm_of(t)
            tp = cm[:, labels, labels]
            sup = cm[:, labels, :].sum(axis=2)
            with np.errstate(invalid="ignore", divide="ignore"):
                return np.nanmean(np.where(sup > 0, tp / np.where(sup > 0, sup, 1), np.nan), axis=1)

        return Statistic(metric, cm_rows, bal)
    if metric in ("log_loss", "brier"):
        fn = _logloss_rows if metric == "log_loss" else _brier_rows

        def rows(y: np.ndarray, p: np.ndarray) -> np.ndarray:
            if p.ndim != 2:
                raise ValueError(f"{metric} needs probabilities, not labels")
            return np.stack([fn(y, p), np.ones(len(y))], axis=1)

        return Statistic(metric, rows, lambda t: t[:, 0] / t[:, 1])
    kind, _, cls = metric.partition(".")
    if kind in ("recall", "precision", "f1") and cls in names:
        i = names.index(cls)

        def one(t: np.ndarray) -> np.ndarray:
            cm = cm_of(t)
            tp, sup, prd = cm[:, i, i], cm[:, i, :].sum(axis=1), cm[:, :, i].sum(axis=1)
            den = {"recall": sup, "precision": prd, "f1": sup + prd}[kind]
            num = 2 * tp if kind == "f1" else tp
            with np.errstate(invalid="ignore", divide="ignore"):
                zero = 0.0 if kind != "recall" else np.nan
                return np.where(den > 0, num / np.where(den > 0, den, 1), zero)

        return Statistic(metric, cm_rows, one)
    raise ValueError(f"no decomposable statistic for metric {metric!r}")


def regression_statistic(metric: str) -> Statistic:
    """mae, rmse, r2 from per-row sums (R² uses Σy, Σy², Σ residual², n)."""

    def rows(y: np.ndarray, yh: np.ndarray) -> np.ndarray:
        y, yh = y.astype(np.float64), yh.astype(np.float64)
        r = y - yh
        return np.stack([np.abs(r), r * r, y, y * y, np.ones(len(y))], axis=1)

    def fin(t: np.ndarray) -> np.ndarray:
        n = t[:, 4]
        if metric == "mae":
            return t[:, 0] / n
        if metric == "rmse":
            return np.sqrt(t[:, 1] / n)
        sst = t[:, 3] - t[:, 2] ** 2 / n
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(sst > 1e-12, 1 - t[:, 1] / np.where(sst > 1e-12, sst, 1), np.nan)

    if metric not in ("mae", "rmse", "r2"):
        raise ValueError(f"no decomposable statistic for metric {metric!r}")
    return Statistic(metric, rows, fin)


def unit_index(units: Sequence[Any] | np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """Rows → dense unit ids (sorted unique), so resamples do not depend on row order."""
    if units is None:
        return np.arange(n, dtype=np.int64), n
    arr = np.asarray(units)
    if len(arr) != n:
        raise ValueError(f"{len(arr)} unit ids for {n} rows")
    _, inv = np.unique(arr, return_inverse=True)
    return inv.astype(np.int64), int(inv.max()) + 1 if n else 0


def _unit_sums(stats: np.ndarray, inv: np.ndarray, n_units: int) -> np.ndarray:
    return np.stack(
        [np.bincount(inv, weights=stats[:, j], minlength=n_units) for j in range(stats.shape[1])], axis=1
    )


def resample_counts(n_units: int, n_resamples: int, seed: int) -> Any:
    """Yield (B_block, n_units) multiplicity matrices: each row draws n_units units with replacement."""
    rng = np.random.default_rng(seed)
    done = 0
    while done < n_resamples:
        b = min(_BLOCK, n_resamples - done)
        idx = rng.integers(0, n_units, size=(b, n_units))
        flat = (idx + (np.arange(b) * n_units)[:, None]).ravel()
        yield np.bincount(flat, minlength=b * n_units).reshape(b, n_units).astype(np.float64)
        done += b


def _bootstrap_values(
    stats_list: list[np.ndarray],
    finishers: list[Callable[[np.ndarray], np.ndarray]],
    inv: np.ndarray,
    n_units: int,
    n_resamples: int,
    seed: int,
) -> list[np.ndarray]:
    sums = [_unit_sums(s, inv, n_units) for s in stats_list]
    out: list[list[np.ndarray]] = [[] for _ in stats_list]
    for w in resample_counts(n_units, n_resamples, seed):
        for j, (s, fin) in enumerate(zip(sums, finishers, strict=True)):
            out[j].append(fin(w @ s))
    return [np.concatenate(v) for v in out]


def _interval(values: np.ndarray, level: float) -> tuple[float, float, int]:
    ok = values[np.isfinite(values)]
    if len(ok) == 0:
        return math.nan, math.nan, len(values)
    a = (1 - level) / 2
    lo, hi = np.quantile(ok, [a, 1 - a])
    return float(lo), float(hi), int(len(values) - len(ok))


def _resolve_stat(
    metric: str | Statistic, classes: Sequence[str] | None, labels: list[int] | None
) -> Statistic:
    if isinstance(metric, Statistic):
        return metric
    if metric in ("mae", "rmse", "r2"):
        return regression_statistic(metric)
    if classes is None:
        raise ValueError(f"metric {metric!r} needs the class order")
    return classification_statistic(metric, classes, labels)


def _prep(
    y_true: Any, pred: Any, classes: Sequence[str] | None, raw: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    if raw and classes is None:  # a callable metric takes the arrays as given (strings for exact match)
        return np.asarray(y_true), np.asarray(pred)
    if classes is None:
        return np.asarray(y_true, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    y = _as_index(y_true, classes)
    p = np.asarray(pred)
    p = np.asarray(p, dtype=np.float64) if p.ndim == 2 else _as_index(p, classes)
    return y, p


def bootstrap_ci(
    metric: str | Statistic | Callable[[np.ndarray, np.ndarray], float],
    y_true: Sequence[Any] | np.ndarray,
    pred: np.ndarray,
    units: Sequence[Any] | np.ndarray | None = None,
    *,
    n: int = 1000,
    seed: int = 0,
    classes: Sequence[str] | None = None,
    labels: list[int] | None = None,
    level: float = 0.95,
) -> dict[str, Any]:
    """Percentile bootstrap interval that resamples whole units (families), or rows when ``units`` is None.

    ``metric``: a decomposable name (see ``classification_statistic`` / ``regression_statistic``),
    a ``Statistic``, or any callable ``f(y, pred) -> float`` (slow path, one call per resample).
    ``pred`` is labels or an (n, K) probability matrix (class metrics), or values (regression).
    Returns estimate, lo, hi, resamples, seed, units, level and how many resamples were undefined.
    """
    is_fn = callable(metric) and not isinstance(metric, Statistic)
    y, p = _prep(y_true, pred, classes, raw=is_fn)
    inv, n_units = unit_index(units, len(y))
    if n_units == 0:
        raise ValueError("no rows to resample")
    if callable(metric) and not isinstance(metric, Statistic):
        est = float(metric(y, p))
        values = _callable_values(metric, [(y, p)], inv, n_units, n, seed)[0]
        name = getattr(metric, "__name__", "custom")
    else:
        stat = _resolve_stat(metric, classes, labels)
        s = stat.rows(y, p)
        est = float(stat.finish(s.sum(axis=0, keepdims=True))[0])
        values = _bootstrap_values([s], [stat.finish], inv, n_units, n, seed)[0]
        name = stat.name
    lo, hi, bad = _interval(values, level)
    return _result(name, est, lo, hi, n, seed, n_units, len(y), level, bad, units is None)


def _result(
    name: str,
    est: float,
    lo: float,
    hi: float,
    n: int,
    seed: int,
    n_units: int,
    n_rows: int,
    level: float,
    bad: int,
    rows: bool,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "metric": name,
        "estimate": est,
        "resamples": int(n),
        "seed": int(seed),
        "unit": "row" if rows else "group",
        "units": int(n_units),
        "rows": int(n_rows),
        "level": float(level),
        "method": "percentile",
        "undefined_resamples": int(bad),
    }
    if math.isfinite(lo):
        out["lo"], out["hi"] = lo, hi
    return out


def _callable_values(
    fn: Callable[[np.ndarray, np.ndarray], float],
    pairs: list[tuple[np.ndarray, np.ndarray]],
    inv: np.ndarray,
    n_units: int,
    n_resamples: int,
    seed: int,
) -> list[np.ndarray]:
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(n_units + 1))
    out: list[list[float]] = [[] for _ in pairs]
    for w in resample_counts(n_units, n_resamples, seed):
        for row in w.astype(np.int64):
            chosen = np.repeat(np.arange(n_units), row)
            rows = (
                np.concatenate([order[starts[u] : starts[u + 1]] for u in chosen])
                if len(chosen)
                else order[:0]
            )
            for j, (y, p) in enumerate(pairs):
                try:
                    out[j].append(float(fn(y[rows], p[rows])))
                except ValueError:
                    out[j].append(math.nan)
    return [np.asarray(v) for v in out]


def paired_bootstrap_diff(
    metric: str | Statistic | Callable[[np.ndarray, np.ndarray], float],
    y_true: Sequence[Any] | np.ndarray,
    pred_a: np.ndarray,
    pred_b: np.ndarray,
    units: Sequence[Any] | np.ndarray | None = None,
    *,
    n: int = 1000,
    seed: int = 0,
    classes: Sequence[str] | None = None,
    labels: list[int] | None = None,
    level: float = 0.95,
) -> dict[str, Any]:
    """Interval of metric(a) − metric(b) on the same rows: both learners see the same unit resamples."""
    is_fn = callable(metric) and not isinstance(metric, Statistic)
    y, pa = _prep(y_true, pred_a, classes, raw=is_fn)
    _, pb = _prep(y_true, pred_b, classes, raw=is_fn)
    if len(pa) != len(y) or len(pb) != len(y):
        raise ValueError("paired comparison needs both learners' predictions on the same rows")
    inv, n_units = unit_index(units, len(y))
    if callable(metric) and not isinstance(metric, Statistic):
        ea, eb = float(metric(y, pa)), float(metric(y, pb))
        va, vb = _callable_values(metric, [(y, pa), (y, pb)], inv, n_units, n, seed)
        name = getattr(metric, "__name__", "custom")
    else:
        stat = _resolve_stat(metric, classes, labels)
        sa, sb = stat.rows(y, pa), stat.rows(y, pb)
        ea = float(stat.finish(sa.sum(axis=0, keepdims=True))[0])
        eb = float(stat.finish(sb.sum(axis=0, keepdims=True))[0])
        va, vb = _bootstrap_values([sa, sb], [stat.finish, stat.finish], inv, n_units, n, seed)
        name = stat.name
    lo, hi, bad = _interval(va - vb, level)
    out = _result(name, ea - eb, lo, hi, n, seed, n_units, len(y), level, bad, units is None)
    out["estimate_a"], out["estimate_b"] = ea, eb
    out["excludes_zero"] = bool("lo" in out and (out["lo"] > 0 or out["hi"] < 0))
    return out


# ---------------------------------------------------------------- McNemar


def mcnemar(correct_a: Sequence[bool] | np.ndarray, correct_b: Sequence[bool] | np.ndarray) -> dict[str, Any]:
    """McNemar's test on paired correctness (row-level: it assumes independent rows).

    b = a right & b wrong, c = a wrong & b right. Exact two-sided binomial p-value when b + c < 25,
    else the continuity-corrected chi-square (1 df).
    """
    from scipy import stats

    a, bb = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    if a.shape != bb.shape:
        raise ValueError("McNemar needs both learners' correctness on the same rows")
    b = int((a & ~bb).sum())
    c = int((~a & bb).sum())
    out: dict[str, Any] = {
        "a_only_correct": b,
        "b_only_correct": c,
        "both_correct": int((a & bb).sum()),
        "both_wrong": int((~a & ~bb).sum()),
        "rows": int(len(a)),
    }
    if b + c == 0:
        out.update(method="none (no discordant pairs)", p_value=1.0)
    elif b + c < 25:
        out.update(method="exact binomial", p_value=float(stats.binomtest(b, b + c, 0.5).pvalue))
    else:
        chi2 = (abs(b - c) - 1) ** 2 / (b + c)
        out.update(
            method="chi-square, continuity-corrected",
            statistic=float(chi2),
            p_value=float(stats.chi2.sf(chi2, 1)),
        )
    return out


# ---------------------------------------------------------------- calibration


@dataclass
class Calibrator:
    """A fitted probability map. ``params`` is TOML-able; ``transform`` maps (n, K) → (n, K)."""

    method: str
    params: dict[str, Any]
    _fn: Callable[[np.ndarray], np.ndarray]

    def transform(self, proba: np.ndarray) -> np.ndarray:
        return self._fn(np.asarray(proba, dtype=np.float64))


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def proba_to_logits(proba: np.ndarray) -> np.ndarray:
    return np.log(np.clip(np.asarray(proba, dtype=np.float64), EPS, 1.0))


def apply_temperature(scores: np.ndarray, temperature: float, *, logits: bool = False) -> np.ndarray:
    z = np.asarray(scores, dtype=np.float64) if logits else proba_to_logits(scores)
    return _softmax(z / temperature)


def fit_temperature(scores: np.ndarray, y_idx: np.ndarray, *, logits: bool = False) -> float:
    """The temperature T minimising the log loss of softmax(z / T); z = logits, or log-probabilities."""
    from scipy.optimize import minimize_scalar

    z = np.asarray(scores, dtype=np.float64) if logits else proba_to_logits(scores)
    y = np.asarray(y_idx, dtype=np.int64)

    def nll(log_t: float) -> float:
        return float(_logloss_rows(y, _softmax(z / math.exp(log_t))).mean())

    res = minimize_scalar(
        nll, bounds=(math.log(0.05), math.log(20.0)), method="bounded", options={"xatol": 1e-6}
    )
    return float(math.exp(res.x))


def _renorm(p: np.ndarray) -> np.ndarray:
    s = p.sum(axis=1, keepdims=True)
    k = p.shape[1]
    return np.where(s > 0, p / np.where(s > 0, s, 1), 1.0 / k)


def fit_calibrator(method: str, proba: np.ndarray, y_idx: np.ndarray, *, seed: int = 0) -> Calibrator:
    """Fit ``temperature`` | ``platt`` (one-vs-rest sigmoid on each class's log-odds, renormalised) |
    ``isotonic`` (one-vs-rest isotonic, clipped, renormalised) | ``none`` on given predictions."""
    p = np.asarray(proba, dtype=np.float64)
    y = np.asarray(y_idx, dtype=np.int64)
    k = p.shape[1]
    if method == "none":
        return Calibrator("none", {}, lambda q: q)
    if method == "temperature":
        t = fit_temperature(p, y)
        return Calibrator("temperature", {"temperature": t}, lambda q: apply_temperature(q, t))
    if method == "platt":
        from sklearn.linear_model import LogisticRegression

        coefs: list[tuple[float, float]] = []
        for i in range(k):
            pos = y == i
            if pos.all() or not pos.any():
                coefs.append((1.0, 0.0))  # one outcome only: leave the class's score as it is
                continue
            x = _logit(p[:, i])[:, None]
            lr = LogisticRegression(C=1e6, random_state=seed).fit(x, pos)
            coefs.append((float(lr.coef_[0, 0]), float(lr.intercept_[0])))

        def platt(q: np.ndarray) -> np.ndarray:
            out = np.stack(
                [1 / (1 + np.exp(-(a * _logit(q[:, i]) + b))) for i, (a, b) in enumerate(coefs)], axis=1
            )
            return _renorm(out)

        return Calibrator(
            "platt", {"slopes": [a for a, _ in coefs], "intercepts": [b for _, b in coefs]}, platt
        )
    if method == "isotonic":
        from sklearn.isotonic import IsotonicRegression

        models = []
        for i in range(k):
            models.append(IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(p[:, i], y == i))

        def iso(q: np.ndarray) -> np.ndarray:
            return _renorm(np.stack([m.predict(q[:, i]) for i, m in enumerate(models)], axis=1))

        return Calibrator("isotonic", {"breakpoints": [int(len(m.X_thresholds_)) for m in models]}, iso)
    raise ValueError(f"unknown calibration method {method!r}: temperature, platt, isotonic or none")


def _logit(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 1e-12, 1 - 1e-12)
    return np.log(x) - np.log1p(-x)


# ---------------------------------------------------------------- operating point


def binary_counts(pos: np.ndarray, score: np.ndarray, threshold: float) -> dict[str, Any]:
    """Confusion counts and rates when 'score ≥ threshold' decides positive."""
    pos = np.asarray(pos, dtype=bool)
    flag = np.asarray(score, dtype=np.float64) >= threshold
    tp, fp = int((flag & pos).sum()), int((flag & ~pos).sum())
    fn, tn = int((~flag & pos).sum()), int((~flag & ~pos).sum())
    out: dict[str, Any] = {
        "threshold": float(threshold),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else 0.0,
    }
    if tp + fn:
        out["recall"] = tp / (tp + fn)
    return out


def choose_threshold(
    pos: Sequence[bool] | np.ndarray,
    score: Sequence[float] | np.ndarray,
    *,
    constraint: str = "min_precision",
    target: float = 0.9,
    cost_fp: float = 1.0,
    cost_fn: float = 1.0,
) -> dict[str, Any]:
    """Choose 'score ≥ t' for one class on fitting data (the calibration split, never the test).

    ``min_precision``: the lowest t whose precision ≥ target (most recall under the constraint).
    ``min_recall``: the highest t whose recall ≥ target (fewest false alarms under it).
    ``cost``: the t minimising cost_fp·FP + cost_fn·FN (ties → the higher t).
    Candidates are the distinct scores plus +∞ (flag nothing). ``feasible`` is False when no
    candidate meets the constraint; the threshold is then +∞ and the caller must report it.
    """
    pos = np.asarray(pos, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    if len(s) == 0:
        raise ValueError("no rows to choose a threshold on")
    cand = np.unique(s)[::-1]  # descending: flag more rows as t falls
    order = np.argsort(-s, kind="stable")
    ss, pp = s[order], pos[order]
    # rows with score ≥ t for each candidate t
    n_flag = np.searchsorted(-ss, -cand, side="right")
    ctp = np.concatenate([[0], np.cumsum(pp)])
    tp = ctp[n_flag]
    fp = n_flag - tp
    npos = int(pos.sum())
    fn = npos - tp
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(n_flag > 0, tp / np.maximum(n_flag, 1), 0.0)
        recall = tp / npos if npos else np.zeros_like(tp, dtype=np.float64)
    chosen: float = math.inf
    if constraint == "min_precision":
        ok = np.nonzero(precision >= target)[0]
        if len(ok):
            chosen = float(cand[ok.max()])
    elif constraint == "min_recall":
        ok = np.nonzero(recall >= target)[0] if npos else np.array([], dtype=int)
        if len(ok):
            chosen = float(cand[ok.min()])
    elif constraint == "cost":
        cost = cost_fp * fp + cost_fn * fn
        none_cost = cost_fn * npos
        best = int(np.argmin(cost))  # first minimum = highest threshold among ties
        chosen = float(cand[best]) if cost[best] < none_cost else math.inf
    else:
        raise ValueError(f"unknown constraint {constraint!r}: min_precision, min_recall or cost")
    out: dict[str, Any] = {
        "constraint": constraint,
        "rows": int(len(s)),
        "positives": npos,
        "feasible": math.isfinite(chosen),
    }
    if constraint == "cost":
        out.update(cost_fp=float(cost_fp), cost_fn=float(cost_fn), feasible=True)
    else:
        out["target"] = float(target)
    if math.isfinite(chosen):
        out["fit"] = binary_counts(pos, s, chosen)
        if constraint == "cost":
            out["fit"]["cost"] = float(cost_fp * out["fit"]["fp"] + cost_fn * out["fit"]["fn"])
    else:
        out["threshold_rule"] = "flag nothing: no threshold meets the constraint on the fitting rows"
    out["threshold"] = chosen
    return out
