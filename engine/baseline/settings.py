"""What the learners read of the baseline stage's inputs, as a protocol: the learners depend on
these attributes, not on the stage module (engine/stages/baseline/run.py's `Inputs` satisfies it)."""

from __future__ import annotations

from typing import Protocol


class LearnerSettings(Protocol):
    cv: str
    cv_below_rows: int
    cv_folds: int
    unit: str
    seed: int
    max_features: int
    ngram_max: int
    min_df: int
    max_iter: int
    hgb_max_iter: int
    C: float
    C_grid: list[float]
