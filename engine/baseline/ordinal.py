"""The trivial predictor of an ordinal target: the median class of the fitting rows in the class
order (the weighted median when sample weights are given), predicted for every row.

A scikit-learn-style estimator (fit / predict / predict_proba / get_params) so the baseline stage,
the contract's pin and the artifact's refit treat it like DummyClassifier.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class MedianClass:
    """Always the median class of the fitting rows, ranks taken from `classes` (lowest first)."""

    def __init__(self, classes: tuple[str, ...] = ()) -> None:
        self.classes = classes

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"classes": self.classes}

    def set_params(self, **params: Any) -> MedianClass:
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def fit(self, x: Any, y: Any, sample_weight: Any = None) -> MedianClass:
        order = [str(c) for c in self.classes]
        ranks = np.asarray([order.index(str(v)) for v in np.asarray(y, dtype=object)], dtype=np.int64)
        w = np.ones(len(ranks)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        mass = np.bincount(ranks, weights=w, minlength=len(order))
        self.median_rank_ = median_rank(mass)
        self.classes_ = np.asarray(order, dtype=object)
        return self

    def predict_proba(self, x: Any) -> np.ndarray:
        out = np.zeros((len(x), len(self.classes_)))
        out[:, self.median_rank_] = 1.0
        return out

    def predict(self, x: Any) -> np.ndarray:
        return np.full(len(x), self.classes_[self.median_rank_], dtype=object)


def median_rank(mass: np.ndarray) -> int:
    """The lowest rank at which the cumulative mass reaches half of the total."""
    total = float(mass.sum())
    if total <= 0:
        raise ValueError("no mass to take a median of")
    return int(np.searchsorted(np.cumsum(mass), total / 2.0, side="left"))
