"""Task metrics: classification, regression, ranking and generation figures.

Uncertainty (unit-level bootstrap, McNemar) is in engine/stats/uncertainty.py; calibration and operating
points are in engine/stats/calibration.py.

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

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

EPS = float(np.finfo(np.float64).eps)


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


def as_index(y: Sequence[Any] | np.ndarray, classes: Sequence[str]) -> np.ndarray:
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
    y_idx = as_index(y, classes) if classes is not None else np.asarray(y, dtype=np.int64)
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
    y_idx = as_index(y, classes) if classes is not None else np.asarray(y)
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
    y = as_index(y_true, classes)
    p = _check_proba(proba, k)
    if len(y) != len(p):
        raise ValueError(f"{len(y)} labels but {len(p)} probability rows")
    if len(y) == 0:
        raise ValueError("no rows to score")
    yhat = argmax_pred(p) if pred is None else as_index(pred, classes)
    cm = confusion_counts(y, yhat, k)
    support = cm.sum(axis=1)
    present = [i for i in range(k) if support[i] > 0]
    absent = [classes[i] for i in range(k) if support[i] == 0]
    undefined: dict[str, str] = {}

    prec, rec, f1, _ = skm.precision_recall_fscore_support(y, yhat, labels=list(range(k)), zero_division=0.0)
    per_class = [_class_row(i, c, cm, y, p, (prec, rec, f1), undefined) for i, c in enumerate(classes)]

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
        "brier": _f(brier_rows(y, p).mean()),
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
    out["conventions"] = _conventions(classes, pred is None, ece_bins)
    return out


def _class_row(
    i: int, c: str, cm: np.ndarray, y: np.ndarray, p: np.ndarray, prf: tuple, undefined: dict[str, str]
) -> dict[str, Any]:
    """One class's counts, precision / recall / F1 and one-vs-rest ranking figures."""
    from sklearn import metrics as skm

    prec, rec, f1 = prf
    support = int(cm[i].sum())
    row: dict[str, Any] = {
        "class": c,
        "support": support,
        "predicted": int(cm[:, i].sum()),
        "tp": int(cm[i, i]),
        "fp": int(cm[:, i].sum() - cm[i, i]),
        "fn": int(support - cm[i, i]),
        "tn": int(len(y) - support - cm[:, i].sum() + cm[i, i]),
        "precision": _f(prec[i]),
    }
    if support > 0:
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
    return row


def _conventions(classes: list[str], argmax: bool, ece_bins: int) -> dict[str, Any]:
    k = len(classes)
    return {
        "class_order": classes,
        "decision": "arg-max (ties → earlier class)" if argmax else "caller-supplied predictions",
        "averaging": "macro/weighted over classes with support in the evaluated rows",
        "zero_division": "precision of a never-predicted class = 0",
        "ranking": "AUROC/AUPRC one-vs-rest per class; macro = mean over classes where defined",
        "brier": "mean over rows of Σ_k (p_k − y_k)²" + (" / 2 (binary)" if k == 2 else ""),
        "log_loss": "natural log, probabilities clipped to [eps, 1 − eps]",
        "ece": f"top-label, {ece_bins} equal-width bins on [0, 1], weighted by bin share",
        "denominator": "rows (sample-level)",
    }


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


def _auroc(pos: np.ndarray, score: np.ndarray) -> float:
    """AUROC as the Mann-Whitney statistic with average ranks (ties count half): equal to sklearn's
    roc_auc_score (tested) without its per-call validation cost; the bootstrap calls it per resample."""
    from scipy.stats import rankdata

    n_pos, n_neg = int(pos.sum()), int(len(pos) - pos.sum())
    ranks = rankdata(score)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def macro_auroc(y_idx: np.ndarray, proba: np.ndarray) -> float:
    """Mean one-vs-rest AUROC over the classes with both outcomes present (as classification_report)."""
    return _macro_ovr(_auroc, y_idx, proba)


def macro_auprc(y_idx: np.ndarray, proba: np.ndarray) -> float:
    """Mean one-vs-rest average precision over the classes with both outcomes present."""
    from sklearn.metrics import average_precision_score

    return _macro_ovr(average_precision_score, y_idx, proba)


def binary_ranking(name: str, positive: np.ndarray, score: np.ndarray) -> float:
    """AUROC ("auroc") or average precision ("auprc") of one positive class scored by `score`.
    ValueError when the rows do not hold both positives and negatives (undefined)."""
    from sklearn.metrics import average_precision_score

    pos = np.asarray(positive, dtype=bool)
    if not 0 < int(pos.sum()) < len(pos):
        raise ValueError(f"{name} needs both positive and negative rows")
    s = np.asarray(score, dtype=np.float64)
    return _auroc(pos, s) if name == "auroc" else float(average_precision_score(pos, s))


def brier_rows(y_idx: np.ndarray, p: np.ndarray) -> np.ndarray:
    onehot = np.zeros_like(p)
    onehot[np.arange(len(y_idx)), y_idx] = 1.0
    rows = ((p - onehot) ** 2).sum(axis=1)
    return rows / 2.0 if p.shape[1] == 2 else rows  # sklearn's binary Brier is the positive-class one


def logloss_rows(y_idx: np.ndarray, p: np.ndarray) -> np.ndarray:
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
