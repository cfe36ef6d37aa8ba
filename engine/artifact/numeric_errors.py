"""artifact.errors: a numeric target's errors on the locked test.

Per arm, the distribution of predicted − actual over the rows every arm scored (the same rows as
artifact.comparison), and the candidate's predicted-vs-actual counts on a grid over one shared range
of actual and predicted values, so a reader sees where the candidate misses (the tails, a level it
never predicts) and not only its mean error.
"""

from __future__ import annotations

from typing import Any

from claimcheck.engine.artifact.common import PB_REPORT
from claimcheck.engine.evidence import Check
from claimcheck.engine.shapes import artifact as shapes

# Bins per axis of the predicted-vs-actual grid (a text plot draws one cell per bin).
GRID_BINS = 12


def _grid(actual: Any, predicted: Any) -> shapes.PredictedVsActual:
    """Counts of (actual bin, predicted bin) over the range both share (their joint min .. max)."""
    import numpy as np

    lo = float(min(actual.min(), predicted.min()))
    hi = float(max(actual.max(), predicted.max()))
    span = (hi - lo) or 1.0

    def bins(v: Any) -> Any:
        return np.clip(((v - lo) / span * GRID_BINS).astype(np.int64), 0, GRID_BINS - 1)

    counts = np.zeros((GRID_BINS, GRID_BINS), dtype=np.int64)
    np.add.at(counts, (bins(actual), bins(predicted)), 1)
    return shapes.PredictedVsActual(bins=GRID_BINS, lo=lo, hi=hi, counts=counts.tolist())


def errors_check(preds: dict[str, Any], y: Any, metric: str, coverage: str) -> Check:
    """artifact.errors from every arm's locked-test values (`preds[arm]["proba"][:, 0]`, `["ok"]`)."""
    import numpy as np
    import polars as pl

    from claimcheck.engine.audit.target import summary
    from claimcheck.engine.shapes.data import TargetSummary

    arms = list(preds)
    shared = np.isfinite(y) & np.logical_and.reduce([preds[a]["ok"] for a in arms])
    values = {a: np.asarray(preds[a]["proba"][:, 0], dtype=np.float64)[shared] for a in arms}
    actual = np.asarray(y, dtype=np.float64)[shared]
    error = {a: TargetSummary(**summary(pl.Series(values[a] - actual))) for a in arms}
    grid = _grid(actual, values["candidate"]) if actual.size and "candidate" in values else None

    def said(a: str) -> str:
        e = error[a]
        if e.p50 is None:
            return f"{a}: no rows"
        return f"{a}: median {e.p50:+.4g}, 5–95% [{e.p05:+.4g}, {e.p95:+.4g}]"

    return Check(
        id="artifact.errors",
        status="info",
        summary=f"predicted − actual on {int(shared.sum()):,} locked-test rows: "
        + "; ".join(said(a) for a in arms),
        coverage=coverage,
        measured=shapes.Errors(metric=metric, rows=int(shared.sum()), error=error, predicted_vs_actual=grid),
        why="Where the errors lie (their spread, their sign, the levels the candidate never predicts) "
        f"is what one {metric} figure hides.",
        playbook=PB_REPORT,
    )


__all__ = ["GRID_BINS", "errors_check"]
