"""Parts shared by several shapes: a bootstrap interval, a paired difference, McNemar's test."""

from __future__ import annotations

from claimcheck.engine.shapes.base import Part


class Interval(Part):
    """A percentile-bootstrap interval over the independent unit (engine/stats/uncertainty.py)."""

    metric: str
    estimate: float
    resamples: int
    seed: int
    unit: str
    units: int
    rows: int
    level: float
    method: str
    undefined_resamples: int
    # Absent when too few resamples were defined to bound the interval.
    lo: float | None = None
    hi: float | None = None
    # Why no interval was drawn (too few independent units: claimcheck.engine.stats.uncertainty.MIN_UNITS).
    refused: str | None = None
    # Paired differences (a − b) only.
    estimate_a: float | None = None
    estimate_b: float | None = None
    excludes_zero: bool | None = None

    @property
    def bounded(self) -> bool:
        return self.lo is not None and self.hi is not None


class McNemar(Part):
    a_only_correct: int
    b_only_correct: int
    both_correct: int
    both_wrong: int
    rows: int
    method: str
    p_value: float
    statistic: float | None = None
    # Independent units the test was clustered over (present only when a unit holds several rows).
    units: int | None = None
