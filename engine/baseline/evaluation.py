"""What every baseline check is computed from: one `Evaluation` (the stage's inputs, the rows, the
fitted learners and the evaluated targets), passed whole instead of ten parameters, and the playbook
lines the checks cite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from claimcheck.engine.baseline.learners import Data, Fitted
from claimcheck.engine.evidence import Note, StageRecord

if TYPE_CHECKING:
    import numpy as np

PB_TRIVIAL = (
    "Measure a task-appropriate trivial baseline and, when informative, a simple conventional learner using "
    "train/development only."
)
PB_RARE = (
    "For rare classes, retain per-class support, precision/recall, confusion counts and suitable "
    "probability/ranking/operating-point metrics. Accuracy can reward predicting only the majority class."
)
PB_LEARN = (
    "Inspect whether the available inputs can reasonably determine the targets. Contradictory or weak labels "
    "may limit performance; more epochs do not create missing information."
)
PB_CAL = (
    "Probability calibration and action-threshold choice are different. Fit them using independent or "
    "out-of-fold predictions, never final results. Tie thresholds to error costs or operating constraints; "
    "0.5 is not universally appropriate."
)
PB_SPLITS = (
    "Separate training, development, calibration and locked final testing when applicable. Development "
    "selects recipes/checkpoints; calibration fits temperatures/thresholds; final results do not select either."
)
PB_SMALL = (
    "For small datasets, consider cross-validation that respects the same groups/time constraints rather than "
    "fragmenting the data into four undersized sets. Keep model selection inside development folds."
)
PB_REPORT = (
    "Report raw and calibrated results separately, including per-class/slice regressions, uncertainty "
    "appropriate to the independent unit"
)


@dataclass
class Evaluation:
    """One baseline run's material: what the checks measure and from which rows."""

    inputs: Any  # the baseline stage's Inputs (engine/stages/baseline/run.py)
    data: Data
    fitted: dict[str, Fitted]
    y: np.ndarray  # targets of the evaluated rows
    units: np.ndarray  # independent unit of each evaluated row
    mask: np.ndarray  # which eval rows were evaluated (K-fold: rows some fold predicted)
    metric: str
    upstream: dict[str, StageRecord]
    notes: list[Note] = field(default_factory=list)

    @property
    def coverage(self) -> str:
        return _coverage(self.data, self.mask)


def evaluated(data: Data) -> np.ndarray:
    import numpy as np

    if data.eval_fold is None:
        return np.ones(data.eval.height, dtype=bool)
    return data.eval_fold >= 0


def _coverage(data: Data, mask: np.ndarray) -> str:
    n = int(mask.sum())
    if data.mode == "holdout":
        return f"full: all {n} dev rows" + (f" ({data.mode_reason})" if data.mode_reason else "")
    return (
        f"full: {n} of {data.eval.height} train+dev rows, out-of-fold ({len(data.folds)} folds, {data.mode})"
    )


def unit_facts(data: Data, mask: np.ndarray) -> dict[str, Any]:
    """The independent unit of the evaluated rows (the split's, claimcheck.engine.data.splits.unit_kind)
    and how many there are; in K-fold, how many of them span more than one fold (0: folds respect it)."""
    import numpy as np

    units = np.asarray(data.units)[mask]
    out: dict[str, Any] = {"unit": data.unit_kind, "units": int(np.unique(units).size)}
    if data.eval_fold is not None:
        folds = np.asarray(data.eval_fold)[mask]
        pairs = np.unique(np.stack([units, folds], axis=1), axis=0) if units.size else np.zeros((0, 2))
        out["folds"] = len(data.folds)
        out["units_spanning_folds"] = int(pairs.shape[0] - np.unique(pairs[:, 0]).size)
    return out


def _where(data: Data) -> str:
    return "dev" if data.mode == "holdout" else "out-of-fold"
