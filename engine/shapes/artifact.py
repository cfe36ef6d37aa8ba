"""Shapes of the artifact stage's checks: identity, the arms table, the final comparison, verdict."""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from claimcheck.engine.shapes.base import Part, Shape, check_extra_keys
from claimcheck.engine.shapes.common import Interval, McNemar
from claimcheck.engine.shapes.data import TargetSummary

Scalar = float | int | str | bool


class JobFinished(Shape):
    check_ids = ("artifact.job_finished",)
    job_state: str


class Identity(Shape):
    check_ids = ("artifact.identity",)
    path: str
    file_sha256: dict[str, str] | None = None
    files: int | None = None
    tensor_count: int | None = None
    tensor_count_recorded: int | None = None
    tensor_shapes: dict[str, list[int]] | None = None
    lora_b_matrices: int | None = None
    lora_b_min_norm: float | None = None
    selected_step: int | None = None
    checkpoint_selection: str | None = None
    problems: list[str] | None = None
    # a scikit-learn candidate (no saved files): the rebuilt estimator against the contract's pin
    candidate_kind: str | None = None
    estimator: str | None = None
    params_sha256: str | None = None
    versions: dict[str, str] | None = None


class BaseModelIdentity(Shape):
    """The base-model arm's weights re-hashed as the contract pins them (engine/artifact/arms.py)."""

    check_ids = ("artifact.base_model_identity",)
    model_path: str
    contract_model_sha256: str
    model_sha256: str
    model_files: int
    matches: bool


class ReloadParity(Shape):
    check_ids = ("artifact.reload_parity",)
    error: str | None = None
    rows: int | None = None
    compared: int | None = None
    missing_recorded: int | None = None
    prediction_mismatches: int | None = None
    mismatched_row_ids: list[str] | None = None
    max_abs_proba_diff: float | None = None
    # a retrieval claim's encoder: two independent loads embedding the same retained dev queries
    max_abs_embedding_diff: float | None = None
    tolerance: float | None = None
    missing_keys: list[str] | None = None
    unexpected_keys: list[str] | None = None
    inference_mode: str | None = None
    keys_ok: bool | None = None


class LockedRead(Part):
    caller: str
    rows: int
    labels: bool
    split: str | None = None


class LockedTestRead(Shape):
    check_ids = ("artifact.locked_test_read",)
    test_rows: int
    reads: list[dict[str, Scalar]]


class ArmCounts(Part):
    """One arm of the locked-test comparison: a failed prediction is missing evidence, never a zero."""

    requested: int
    scored: int
    failed: int
    missing: int
    # Generation arms (causal-LM SFT): answers that reached max_new_tokens without a stop — counted, not scored.
    truncated: int | None = None
    errors: list[str] = Field(default_factory=list)
    what: str = ""


class Arms(Shape):
    check_ids = ("artifact.arms",)
    arms: dict[str, ArmCounts]
    labels_outside_class_order: int = 0
    # Causal-LM SFT: test rows whose conversation has no assistant turn to score against.
    rows_without_reference: int | None = None
    # The claim's frozen comparators, and those of them no test row was scored for (the check fails).
    claim_comparators: list[str] = Field(default_factory=list)
    unscored: list[str] = Field(default_factory=list)
    # Comparators of the claim that are not arms, and why (the candidate itself: Comparison.excluded).
    excluded: dict[str, str] = Field(default_factory=dict)


class FrozenProbe(Shape):
    """The `frozen_probe` comparator pinned: the frozen base model's pooled embeddings of the train
    rows, a logistic-regression head with its C chosen on dev, and what replay must reproduce."""

    check_ids = ("artifact.frozen_probe",)
    model_sha256: str  # the contract's digest of the base model's files
    pooling: str  # which embedding the head was fitted on (the classification head's own input)
    features: int  # embedding width
    rows_fitted: int  # train rows the head was fitted on
    dev_rows: int  # dev rows C was chosen on
    c_grid: list[float]
    dev_metric: str
    dev_values: dict[str, float]  # C (as text) -> the dev metric
    c_chosen: float
    converged: bool
    head_sha256: str  # sha256 over the scaler's mean_, scale_, then coef_, intercept_ (float64, C order)
    test_predictions_sha256: str  # sha256 over the arg-max class (int64) of every locked-test row scored
    test_rows_predicted: int


class Comparison(Shape):
    """The primary metric per arm and the candidate's paired differences to every comparator."""

    check_ids = ("artifact.comparison",)
    figure = "forest"
    metric: str
    values: dict[str, float]
    differences: dict[str, Interval]
    mcnemar: dict[str, McNemar] = Field(default_factory=dict)
    candidate_better: dict[str, bool]
    unit: str
    shared_rows: int
    # Arms of the claim not compared with the candidate, and why (best_baseline when the candidate is
    # that learner: a model is never compared with itself).
    excluded: dict[str, str] = Field(default_factory=dict)


class MixDifference(Part):
    """Each value's share among the rows every arm scored and among the rest, the largest
    difference, and a chi-square test of independence (absent when the table has one column)."""

    scored: dict[str, float]
    unscored: dict[str, float]
    max_share_difference: float
    p_value: float | None = None


class LengthDifference(Part):
    """Characters over the free-text inputs per row: medians of scored and unscored rows, and a
    Mann-Whitney U test between them."""

    columns: list[str]
    scored_median: float
    unscored_median: float
    p_value: float | None = None


class TargetDifference(Part):
    """A numeric target's median among scored and unscored rows, and the scored rows' std."""

    scored_median: float
    unscored_median: float
    scored_sd: float


class CoverageBias(Shape):
    """The rows every arm scored against the rest: class mix (or numeric target), input length and
    slice mix; `differs` names the aspects past their thresholds (engine/artifact/coverage.py)."""

    check_ids = ("artifact.coverage_bias",)
    rows: int
    scored_rows: int
    unscored_rows: int
    unscored_by_arm: dict[str, int]
    class_mix: MixDifference | None = None
    target: TargetDifference | None = None
    input_length: LengthDifference | None = None
    slices: dict[str, MixDifference] = Field(default_factory=dict)
    differs: list[str] = Field(default_factory=list)


class DecodingContract(Part):
    strategy: str
    max_new_tokens: int
    stop_sequences: list[str]


class Generation(Shape):
    """Causal-LM SFT: every answer metric per arm and the candidate's paired differences, under
    the recorded decoding contract; a few answers beside their references."""

    check_ids = ("artifact.generation",)
    decoding: DecodingContract
    normalisation: str
    # metric (exact_match, token_f1, mean_nll) -> arm -> value; mean_nll for the model arms only.
    values: dict[str, dict[str, float]]
    # metric -> comparator -> candidate − comparator.
    differences: dict[str, dict[str, Interval]]
    candidate_better: dict[str, dict[str, bool]]
    unit: str
    samples: list[dict[str, str]] = Field(default_factory=list)


class ClassFigures(Part):
    support: int | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None


class ClassRegression(Part):
    class_: str = Field(alias="class")
    versus: str
    candidate_f1: float
    comparator_f1: float
    support: int

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PerClass(Shape):
    check_ids = ("artifact.per_class",)
    figure = "bars"
    per_class: dict[str, dict[str, ClassFigures]]
    regressions: list[ClassRegression]


class SliceRegression(Part):
    slice: str
    versus: str
    rows: int


class Slices(Shape):
    check_ids = ("artifact.slices",)
    metric: str
    # "column=value" -> the metric per arm, plus "rows".
    slices: dict[str, dict[str, float | int]]
    regressions: list[SliceRegression]
    # A numeric target: per slice, candidate − comparator paired intervals over the slice's units
    # (refused under the session's one interval rule, uncertainty.unit_rule); absent for classes.
    intervals: dict[str, dict[str, Interval]] = Field(default_factory=dict)


class PredictedVsActual(Part):
    """The candidate's locked-test rows counted on a bins × bins grid over one shared range of
    actual and predicted values: counts[i][j] = rows whose actual falls in bin i (lowest first)
    and whose prediction falls in bin j."""

    bins: int
    lo: float
    hi: float
    counts: list[list[int]]


class Errors(Shape):
    """A numeric target's errors on the locked test: per arm, the distribution of predicted −
    actual over the rows every arm scored, and the candidate's predicted-vs-actual grid."""

    check_ids = ("artifact.errors",)
    metric: str
    rows: int
    error: dict[str, TargetSummary]
    predicted_vs_actual: PredictedVsActual | None = None


class Reliability(Part):
    confidence: list[float]
    accuracy: list[float]
    count: list[int]


class ArmReliability(Part):
    bins: int
    raw: Reliability
    calibrated: Reliability


class ProperScores(Part):
    log_loss: float | None = None
    brier: float | None = None
    ece: float | None = None


class CalibratedArm(Part):
    # One computed key `calibrated_<primary metric>` rides along (the v1 layout).
    model_config = ConfigDict(extra="allow")
    params: dict[str, float | list[float]]
    raw: ProperScores
    calibrated: ProperScores
    reliability: ArmReliability

    @model_validator(mode="after")
    def _metric_key(self) -> CalibratedArm:
        check_extra_keys(self.model_extra or {}, "calibrated_")
        return self

    def calibrated_metric(self) -> tuple[str, float] | None:
        for key, value in (self.model_extra or {}).items():
            return key.removeprefix("calibrated_"), float(value)
        return None


class HeadlineReliability(Reliability):
    arm: str


class Calibrated(Shape):
    check_ids = ("artifact.calibrated",)
    figure = "reliability"
    method: str
    arms: dict[str, CalibratedArm]
    reliability: HeadlineReliability | dict[str, Any] = Field(default_factory=dict)


class DecisionCounts(Part):
    """Test-row counts for one class when 'score ≥ threshold' decides it (arg-max: 0.5 on a 0/1 flag)."""

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float
    recall: float | None = None
    cost: float


class OperatingArm(Part):
    chosen_on_rows: int  # the arm's calibration rows the threshold was chosen on
    feasible: bool
    threshold: float | None = None  # absent when no threshold met the rule (the arm flags nothing)
    reason: str = ""
    test: DecisionCounts
    argmax: DecisionCounts


class OperatingPointShape(Shape):
    check_ids = ("artifact.operating_point",)
    positive_class: str
    constraint: str
    rule: str
    scores: str  # "raw": thresholds cut uncalibrated probabilities
    test_rows: int
    arms: dict[str, OperatingArm]


class Latency(Part):
    p50_ms: float
    p95_ms: float
    examples: int


class ArtifactLatency(Shape):
    check_ids = ("artifact.latency",)
    arms: dict[str, Latency]
    batch_size: int
    device: str


class Verdict(Shape):
    """The four outcomes kept apart, and the success criterion's rule and measured value."""

    check_ids = ("artifact.verdict",)
    job_finished: bool
    artifact_verified: bool
    candidate_better: bool
    claim_met: bool
    claim_state: str
    # The rule and the measured value in one line, as every record has held it (kept for replay);
    # or why the claim was not judged.
    criterion: str
    # The rule the claim needs and the measured value it was applied to, apart (absent in records
    # made before they were kept apart).
    rule: str = ""
    measured_value: float | None = None

    def judgement(self) -> str:
        """The rule and the measured value, apart ("needs …; measured …"); for a record made before
        they were kept apart, its one-line criterion, said to be that."""
        if not self.rule:
            return f"recorded as: {self.criterion}"
        shown = "undefined" if self.measured_value is None else f"{self.measured_value:+.4f}"
        return f"needs {self.rule}; measured {shown}"

    limitations: list[str] = Field(default_factory=list)
    disabled_alarms: list[str] = Field(default_factory=list)

    def claim_word(self) -> str:
        """The claim's verdict in words: 'met', 'not met' or 'not decided' (from claim_state)."""
        return CLAIM_WORDS.get(self.claim_state, "not decided")

    def reason(self) -> str:
        """Why the claim is in that state: the rule and the measured value when it was judged, else
        why it was not (the record's `criterion` holds that reason for a claim not decided)."""
        if self.claim_state in CLAIM_WORDS:
            return self.judgement()
        return self.criterion or "no reason recorded"

    def claim_line(self) -> str:
        """The one line every reader shows (TUI banner, stage panel, report headline, --json):
        'CLAIM MET: needs …; measured …', 'CLAIM NOT MET: …' or 'CLAIM NOT DECIDED: <why>'."""
        return f"CLAIM {self.claim_word().upper()}: {self.reason()}"

    def claim_verdict(self) -> dict[str, str]:
        """The claim's verdict as data (the --json outputs): state, words, reason and the line."""
        return {
            "state": self.claim_state if self.claim_state in CLAIM_WORDS else "not_decided",
            "words": self.claim_word(),
            "reason": self.reason(),
            "line": self.claim_line(),
        }


# The claim verdict's words by Verdict.claim_state; any other state (not_run) is "not decided".
CLAIM_WORDS = {"met": "met", "not_met": "not met"}


class Ordinal(Shape):
    """artifact.ordinal: QWK, MAE on ranks and macro-F1 per arm, confusion in the class order."""

    check_ids = ("artifact.ordinal",)
    class_order: list[str]
    figures: dict[str, dict[str, float]]
    confusion: dict[str, list[list[int]]]
    weighted: bool
    candidate_qwk: float
