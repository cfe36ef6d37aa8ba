"""Shapes of the baseline stage's checks: learner reports with intervals, learnability, calibration."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from claimcheck.engine.shapes.base import Part, Shape
from claimcheck.engine.shapes.common import Interval, McNemar

Scalar = float | int | str | bool


class ClassRow(Part):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    class_: str = Field(alias="class")
    support: int
    predicted: int
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    auroc: float | None = None
    auprc: float | None = None


class LearnerReport(Part):
    """One learner's figures on the evaluated rows (classification or regression)."""

    n: int
    intervals: dict[str, Interval] = Field(default_factory=dict)
    undefined: dict[str, str] = Field(default_factory=dict)
    # classification
    accuracy: float | None = None
    majority_class: str | None = None
    majority_rate: float | None = None
    macro_f1: float | None = None
    weighted_f1: float | None = None
    balanced_accuracy: float | None = None
    macro_auroc: float | None = None
    macro_auprc: float | None = None
    # an ordinal claim (target_type = "ordinal"): the figures over the class order
    quadratic_weighted_kappa: float | None = None
    mae_rank: float | None = None
    # a binary AUROC / AUPRC claim: the figure of the claim's positive class
    auroc: float | None = None
    auprc: float | None = None
    log_loss: float | None = None
    brier: float | None = None
    ece: float | None = None
    ece_bins: int | None = None
    confusion: list[list[int]] | None = None
    per_class: list[ClassRow] | None = None
    classes_absent: list[str] | None = None
    collapsed_classes: list[str] | None = None
    trials: list[dict[str, Scalar]] | None = None
    C: float | None = None
    # regression
    mae: float | None = None
    rmse: float | None = None
    r2: float | None = None
    target_mean: float | None = None
    target_std: float | None = None
    conventions: dict[str, str] | None = None
    # multi-label (engine/baseline/multilabel.py; macro_f1 above is the labels' mean F1 there)
    micro_f1: float | None = None
    subset_accuracy: float | None = None

    def metric(self, name: str) -> float | None:
        value = getattr(self, name, None) if name in type(self).model_fields else None
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class Trivial(Shape):
    check_ids = ("baseline.trivial",)
    figure = "confusion_matrix"
    learners: dict[str, LearnerReport] | None = None
    # regression: the claim's metric the summary leads with
    primary_metric: str | None = None
    # regression: the trivial predictor the claim is judged against (other_tasks.trivial_reference),
    # the rows the trivial learners were fitted on ("train", or "folds" in K-fold) and how many
    reference: str | None = None
    fitted_on: str | None = None
    fit_rows: int | None = None
    train_majority_class: str | None = None
    accuracy_equals_majority_rate: bool | None = None
    # generation: the most frequent training answer
    answer: str | None = None
    exact_match: float | None = None
    interval: Interval | None = None
    normalisation: str | None = None


class Conventional(Shape):
    check_ids = ("baseline.conventional",)
    figure = "confusion_matrix"
    learners: dict[str, LearnerReport]
    primary_metric: str | None = None
    fitted_on: str | None = None
    measured_on: str | None = None
    mode: str | None = None
    # The independent unit of the measured rows (the split's: claimcheck.engine.data.splits.unit_kind)
    # and how many; K-fold: the folds and how many units span more than one (0: the folds keep them whole).
    unit: str | None = None
    units: int | None = None
    folds: int | None = None
    units_spanning_folds: int | None = None


class Weakest(Part):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    class_: str = Field(alias="class")
    recall: float
    support: int


class BaselinePerClass(Shape):
    check_ids = ("baseline.per_class",)
    classes_absent: list[str]
    recall_absent_marker: float
    collapsed: dict[str, list[str]]
    weakest: dict[str, Weakest]
    recall: dict[str, dict[str, float]]


class Learnability(Shape):
    check_ids = ("baseline.learnability",)
    figure = "forest"
    learner: str
    reference: str
    difference: Interval
    beats_trivial: bool
    metric: str | None = None
    accuracy_difference: Interval | None = None
    mcnemar: McNemar | None = None
    selected_on: str | None = None
    noise_ceiling_source: str | None = None
    noise_ceiling: float | None = None
    accuracy: float | None = None
    gap_to_ceiling: float | None = None
    ceiling_comparison: str | None = None


class CalFigures(Part):
    sample: str
    log_loss: float
    brier: float
    ece: float
    accuracy: float
    rows: int


class RawCalibrated(Part):
    raw: CalFigures | None = None
    calibrated: CalFigures


class BaselineCalibration(Shape):
    check_ids = ("baseline.calibration",)
    learner: str
    method: str
    fitted_on: str
    params: dict[str, float | list[float]]
    evaluation: RawCalibrated
    fitting_rows: RawCalibrated
    ece_bins: int


class OperatingPoint(Shape):
    check_ids = ("baseline.operating_point",)
    learner: str
    positive_class: str
    rule: str
    # calibration.choose_threshold / binary_counts: the threshold and its counts and rates
    choice: dict[str, Scalar | dict[str, Scalar]]
    applied: dict[str, Scalar]


class Predictions(Shape):
    check_ids = ("baseline.predictions",)
    path: str
    sha256: str
    rows: int
    columns: list[str]


class BaselineSampleWeights(Shape):
    """baseline.sample_weights: the learners fitted with the source's weights (sample_weight)."""

    check_ids = ("baseline.sample_weights",)
    column: str
    learners: list[str]
    fit_rows: int
    fit_mass: float
    zero_weight_fit_rows: int
    dev_figures: str  # the baseline's dev figures: unweighted
