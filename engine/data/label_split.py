"""Splits of a multi-label target: iterative stratification by label sets, and how far it got.

Rows are 0/1 label-set rows (engine/data/labelsets.py `indicator`); split indices follow
engine/data/splits.py SPLITS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claimcheck.engine.data.splits import SPLITS

if TYPE_CHECKING:
    import numpy as np


def assign_iterative(matrix: np.ndarray, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Split index per row (engine/data/splits.py SPLITS order) stratified by label sets: iterative
    stratification (iterstrat's MultilabelStratifiedShuffleSplit, Sechidis et al. 2011) peels off
    test, then calibration, then dev from what is left, each at its share of the remaining rows."""
    import numpy as np
    from iterstrat.ml_stratifiers import MultilabelStratifiedShuffleSplit

    n = matrix.shape[0]
    out = np.zeros(n, dtype=np.int64)  # train unless peeled off
    left = np.arange(n)
    total = sum(fractions.get(s, 0.0) for s in SPLITS) or 1.0
    rest = 1.0
    for name in ("test", "calibration", "dev"):
        share = fractions.get(name, 0.0) / total
        if share <= 0 or left.size < 2:
            continue
        size = share / rest
        rest -= share
        if size >= 1.0:
            out[left] = SPLITS.index(name)
            left = left[:0]
            continue
        msss = MultilabelStratifiedShuffleSplit(n_splits=1, test_size=size, random_state=seed)
        keep, peel = next(msss.split(np.zeros((left.size, 1)), matrix[left]))
        out[left[peel]] = SPLITS.index(name)
        left = left[keep]
    return out


def prevalence_deviation(matrix: np.ndarray, split_index: np.ndarray) -> dict[str, Any]:
    """How far each split's per-label prevalence lies from the whole's: the largest absolute
    difference per split, and over all splits (what the stratification achieved)."""
    import numpy as np

    whole = matrix.mean(axis=0) if matrix.shape[0] else np.zeros(matrix.shape[1])
    per_split: dict[str, float] = {}
    for i, name in enumerate(SPLITS):
        rows = matrix[split_index == i]
        if rows.shape[0]:
            per_split[name] = float(np.abs(rows.mean(axis=0) - whole).max()) if matrix.shape[1] else 0.0
    return {"max": max(per_split.values(), default=0.0), "per_split": per_split}
