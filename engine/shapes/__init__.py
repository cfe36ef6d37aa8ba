"""Typed shapes of the evidence that anything reads: one pydantic model per check id.

`parse(check, Shape)` is the one way to read a check's measured values outside the stage that
wrote them; `validate_measured` is applied whenever a Check is built (written or loaded). Which
file holds what: artifact.py (the final comparison), baseline.py, data.py (source and split),
training.py (claim criterion, contract and dispatch), common.py (intervals, McNemar), retrieval.py
(a retrieval claim's checks).
"""

from claimcheck.engine.shapes import (  # noqa: F401  (registers)
    artifact,
    baseline,
    common,
    data,
    retrieval,
    training,
    tuning,
)
from claimcheck.engine.shapes.base import (
    FIGURES,
    Shape,
    ShapeError,
    parse,
    registered,
    shape_for,
    validate_measured,
)

__all__ = ["FIGURES", "Shape", "ShapeError", "parse", "registered", "shape_for", "validate_measured"]
