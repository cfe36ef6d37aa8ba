"""Uncertainty over the independent unit: a vectorised unit-level bootstrap (intervals and paired
differences) and McNemar's test. Arrays in, TOML-able dicts out (no None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from claimcheck.engine.stats.metrics import argmax_pred, as_index, brier_rows, logloss_rows

# The fewest independent units (families, or rows when rows are the unit) an interval is drawn over:
# with fewer, a unit bootstrap sees too few distinct resamples and a ratio metric such as R² (whose
# denominator is recomputed on each resample) takes absurd values. Below it, intervals are refused.
MIN_UNITS = 20

# Resamples drawn per block; fixed so a seed gives the same resamples however large n is.
_BLOCK = 128


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
        fn = logloss_rows if metric == "log_loss" else brier_rows

        def rows(y: np.ndarray, p: np.ndarray) -> np.ndarray:
            if p.ndim != 2:
                raise ValueError(f"{metric} needs probabilities, not labels")
            return np.stack([fn(y, p), np.ones(len(y))], axis=1)

        return Statistic(metric, rows, lambda t: t[:, 0] / t[:, 1])
    if metric in ORDINAL_STATISTICS:
        return Statistic(metric, cm_rows, lambda t: _ordinal_from_confusion(cm_of(t), metric))
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


# Ordinal metrics over the class order (ranks 0..k-1): quadratic-weighted kappa, and the mean
# absolute difference of ranks.
ORDINAL_STATISTICS = frozenset({"quadratic_weighted_kappa", "mae_rank"})


def _ordinal_from_confusion(cm: np.ndarray, metric: str) -> np.ndarray:
    """QWK (1 − Σ W·O / Σ W·E, W = (i − j)², E the outer product of the marginals over n; sklearn's
    cohen_kappa_score(weights="quadratic", labels=the class order)) or the mean |rank − rank|."""
    k = cm.shape[1]
    idx = np.arange(k)
    w = (idx[:, None] - idx[None, :]).astype(np.float64) ** 2
    n = cm.sum(axis=(1, 2))
    if metric == "mae_rank":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (cm * np.sqrt(w)).sum(axis=(1, 2)) / np.where(n > 0, n, 1), np.nan)
    rows, cols = cm.sum(axis=2), cm.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[:, :, None] * cols[:, None, :] / np.where(n > 0, n, 1)[:, None, None]
        den = (w * expected).sum(axis=(1, 2))
        return np.where(den > 0, 1 - (w * cm).sum(axis=(1, 2)) / np.where(den > 0, den, 1), np.nan)


# The regression metrics summed per row here (what each means, and which a claim may name: the metric
# registry, engine/stats/registry.py, which sits above this module).
REGRESSION_STATISTICS = frozenset({"mae", "rmse", "r2"})


def regression_statistic(metric: str) -> Statistic:
    """mae, rmse, r2 from per-row sums (R² uses Σy, Σy², Σ residual², n).

    The target is centred on its mean over the rows given before Σy and Σy² are taken (every one of
    these metrics is unchanged by shifting target and prediction together): otherwise a target far
    from zero (revenues in the billions) loses the resample's total sum of squares to cancellation
    in Σy² − (Σy)²/n and R² comes out wildly wrong."""

    def rows(y: np.ndarray, yh: np.ndarray) -> np.ndarray:
        y, yh = y.astype(np.float64), yh.astype(np.float64)
        r = y - yh
        y = y - (y.mean() if len(y) else 0.0)
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

    if metric not in REGRESSION_STATISTICS:
        raise ValueError(f"no decomposable statistic for metric {metric!r}")
    return Statistic(metric, rows, fin)


def too_few_units(n_units: int, unit_kind: str) -> str | None:
    """Why no interval is drawn over `n_units` independent units, or None when there are enough."""
    if n_units >= MIN_UNITS:
        return None
    return (
        f"only {n_units} independent {unit_kind} unit(s) evaluated; an interval over the independent "
        f"unit needs at least {MIN_UNITS} (an evaluated split holding more independent groups)"
    )


def unit_rule(interval: dict[str, Any], unit_kind: str = "") -> dict[str, Any]:
    """The one interval rule of a session (baseline and artifact alike): an interval over fewer than
    MIN_UNITS independent units is refused — its bounds dropped, `refused` saying why — and the
    point estimate kept."""
    why = too_few_units(int(interval.get("units", 0)), unit_kind or str(interval.get("unit", "row")))
    if why is None:
        return interval
    return {k: v for k, v in interval.items() if k not in ("lo", "hi", "excludes_zero")} | {"refused": why}


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
    if metric in REGRESSION_STATISTICS:
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
    y = as_index(y_true, classes)
    p = np.asarray(pred)
    p = np.asarray(p, dtype=np.float64) if p.ndim == 2 else as_index(p, classes)
    return y, p


@dataclass(frozen=True)
class Bootstrap:
    """How an interval is drawn (resamples, seed, level), and what a class metric reads: the class
    order of `y_true` / `pred`, and the label indices a macro average runs over (None: every class)."""

    n: int = 1000
    seed: int = 0
    level: float = 0.95
    classes: Sequence[str] | None = None
    labels: list[int] | None = None
    # Per-row sample weights (the source's weight column) of a claim with metric_weighting =
    # "sample_weight": every row's sufficient statistics are multiplied by its weight, so the estimate
    # is scikit-learn's metric with sample_weight and each resample is weighted the same way. None:
    # unweighted. Decomposable metrics only (a callable metric is refused with weights).
    weights: Any = field(default=None, compare=False)


def weighted_rows(s: np.ndarray, weights: Any) -> np.ndarray:
    """Per-row statistics times the rows' sample weights (unchanged without weights)."""
    if weights is None:
        return s
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != len(s):
        raise ValueError(f"{len(w)} sample weights for {len(s)} rows")
    return s * w[:, None]


def _no_weights_for_callables(boot: Bootstrap, is_fn: bool) -> None:
    if is_fn and boot.weights is not None:
        raise ValueError("sample weights apply to decomposable metrics only, not a recomputed one")


DEFAULT_BOOTSTRAP = Bootstrap()


def bootstrap_ci(
    metric: str | Statistic | Callable[[np.ndarray, np.ndarray], float],
    y_true: Sequence[Any] | np.ndarray,
    pred: np.ndarray,
    units: Sequence[Any] | np.ndarray | None = None,
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
) -> dict[str, Any]:
    """Percentile bootstrap interval that resamples whole units (families), or rows when ``units`` is None.

    ``metric``: a decomposable name (see ``classification_statistic`` / ``regression_statistic``),
    a ``Statistic``, or any callable ``f(y, pred) -> float`` (slow path, one call per resample).
    ``pred`` is labels or an (n, K) probability matrix (class metrics), or values (regression).
    Returns estimate, lo, hi, resamples, seed, units, level and how many resamples were undefined.
    """
    is_fn = callable(metric) and not isinstance(metric, Statistic)
    _no_weights_for_callables(boot, is_fn)
    y, p = _prep(y_true, pred, boot.classes, raw=is_fn)
    inv, n_units = unit_index(units, len(y))
    if n_units == 0:
        raise ValueError("no rows to resample")
    if callable(metric) and not isinstance(metric, Statistic):
        est = float(metric(y, p))
        values = _callable_values(metric, [(y, p)], inv, n_units, boot.n, boot.seed)[0]
        name = getattr(metric, "__name__", "custom")
    else:
        stat = _resolve_stat(metric, boot.classes, boot.labels)
        s = weighted_rows(stat.rows(y, p), boot.weights)
        est = float(stat.finish(s.sum(axis=0, keepdims=True))[0])
        values = _bootstrap_values([s], [stat.finish], inv, n_units, boot.n, boot.seed)[0]
        name = stat.name
    how = _Resampling(boot.n, boot.seed, boot.level, n_units, len(y), units is None)
    return _result(name, est, _interval(values, boot.level), how)


@dataclass(frozen=True)
class _Resampling:
    """How an interval was drawn: what it resampled, how often, with which seed and level."""

    n: int
    seed: int
    level: float
    n_units: int
    n_rows: int
    by_row: bool  # no units given: rows are the independent unit


def _result(name: str, est: float, interval: tuple[float, float, int], how: _Resampling) -> dict[str, Any]:
    lo, hi, bad = interval
    out: dict[str, Any] = {
        "metric": name,
        "estimate": est,
        "resamples": int(how.n),
        "seed": int(how.seed),
        "unit": "row" if how.by_row else "group",
        "units": int(how.n_units),
        "rows": int(how.n_rows),
        "level": float(how.level),
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
    boot: Bootstrap = DEFAULT_BOOTSTRAP,
) -> dict[str, Any]:
    """Interval of metric(a) − metric(b) on the same rows: both learners see the same unit resamples."""
    is_fn = callable(metric) and not isinstance(metric, Statistic)
    _no_weights_for_callables(boot, is_fn)
    y, pa = _prep(y_true, pred_a, boot.classes, raw=is_fn)
    _, pb = _prep(y_true, pred_b, boot.classes, raw=is_fn)
    if len(pa) != len(y) or len(pb) != len(y):
        raise ValueError("paired comparison needs both learners' predictions on the same rows")
    inv, n_units = unit_index(units, len(y))
    if is_fn:
        ea, eb = float(metric(y, pa)), float(metric(y, pb))
        va, vb = _callable_values(metric, [(y, pa), (y, pb)], inv, n_units, boot.n, boot.seed)
        name = getattr(metric, "__name__", "custom")
    else:
        stat = _resolve_stat(metric, boot.classes, boot.labels)
        sa, sb = weighted_rows(stat.rows(y, pa), boot.weights), weighted_rows(stat.rows(y, pb), boot.weights)
        ea = float(stat.finish(sa.sum(axis=0, keepdims=True))[0])
        eb = float(stat.finish(sb.sum(axis=0, keepdims=True))[0])
        va, vb = _bootstrap_values([sa, sb], [stat.finish, stat.finish], inv, n_units, boot.n, boot.seed)
        name = stat.name
    how = _Resampling(boot.n, boot.seed, boot.level, n_units, len(y), units is None)
    out = _result(name, ea - eb, _interval(va - vb, boot.level), how)
    out["estimate_a"], out["estimate_b"] = ea, eb
    out["excludes_zero"] = bool("lo" in out and (out["lo"] > 0 or out["hi"] < 0))
    return out


# ---------------------------------------------------------------- McNemar


def mcnemar(
    correct_a: Sequence[bool] | np.ndarray,
    correct_b: Sequence[bool] | np.ndarray,
    units: Sequence[Any] | np.ndarray | None = None,
) -> dict[str, Any]:
    """McNemar's test on paired correctness.

    b = a right & b wrong, c = a wrong & b right. With independent rows (``units`` None, or every unit
    one row): exact two-sided binomial p-value when b + c < 25, else the continuity-corrected
    chi-square (1 df). With units of several rows (families), the discordant pairs of one unit are not
    independent: the clustered McNemar of Durkalski et al. (2003), (Σ_k (b_k − c_k))² / Σ_k (b_k − c_k)²
    over units k, chi-square with 1 df.
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
    inv, n_units = unit_index(units, len(a))
    if n_units < len(a):  # some unit holds several rows
        out["units"] = int(n_units)
        if b + c:
            return out | _clustered_mcnemar((a & ~bb).astype(np.float64) - (~a & bb), inv, n_units)
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


def _clustered_mcnemar(diff: np.ndarray, inv: np.ndarray, n_units: int) -> dict[str, Any]:
    """Durkalski et al. (2003): per unit the discordant difference d_k = b_k − c_k; the statistic
    (Σ d_k)² / Σ d_k², chi-square with 1 df (no continuity correction)."""
    from scipy import stats

    d = np.bincount(inv, weights=diff, minlength=n_units)
    denom = float((d * d).sum())
    method = f"clustered over {n_units} units (Durkalski et al. 2003), chi-square"
    if denom == 0:  # every unit's discordant pairs cancel out
        return {"method": method, "p_value": 1.0, "statistic": 0.0}
    chi2 = float(d.sum()) ** 2 / denom
    return {"method": method, "statistic": chi2, "p_value": float(stats.chi2.sf(chi2, 1))}
