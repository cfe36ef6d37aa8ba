"""Probability calibration (temperature, Platt, isotonic) and operating points tied to a declared
constraint or cost. Fitted on calibration data only; the callers say which split that was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from claimcheck.engine.stats.metrics import EPS, logloss_rows


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
        return float(logloss_rows(y, _softmax(z / math.exp(log_t))).mean())

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
