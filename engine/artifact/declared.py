"""The artifact stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.artifact.common import (
    PB_ARMS,
    PB_BASE,
    PB_CAL,
    PB_IDENTITY,
    PB_LATENCY,
    PB_OUTCOMES,
    PB_PARITY,
    PB_REPORT,
)
from claimcheck.engine.data.weights import PB_WEIGHTS
from claimcheck.engine.pipeline.checks import (
    CATEGORICAL,
    LEARNED,
    MULTI_LABEL,
    NUMERIC,
    RETRIEVAL,
    SFT,
    TABULAR,
    TEXT_CLASSIFICATION,
    TRAINED,
    declare,
)

declare("artifact.job_finished", PB_OUTCOMES)
declare("artifact.identity", PB_IDENTITY)
declare("artifact.reload_parity", PB_PARITY)
declare("artifact.arms", PB_ARMS)
declare("artifact.base_model_identity", PB_BASE, tasks=TRAINED, required=False)  # with a base_model arm
declare(
    "artifact.locked_test_read",
    "If a test influenced development, disclose that and obtain a fresh holdout for a new generalization claim.",
)
declare("artifact.comparison", PB_REPORT)
declare(
    "artifact.frozen_probe", PB_BASE, tasks=TEXT_CLASSIFICATION, required=False
)  # with a frozen_probe arm
declare("artifact.coverage_bias", PB_ARMS, tasks=LEARNED)
declare("artifact.per_class", PB_REPORT, tasks=LEARNED, targets=CATEGORICAL)
declare("artifact.operating_point", PB_CAL, tasks=LEARNED, targets=CATEGORICAL)
declare("artifact.calibrated", PB_CAL, targets=CATEGORICAL, required=False)  # with a calibration split
declare("artifact.slices", PB_REPORT, required=False)  # with slice columns
declare("artifact.generation", PB_BASE, tasks=SFT)
declare("artifact.latency", PB_LATENCY)
declare("artifact.verdict", PB_OUTCOMES)
declare(
    "artifact.ordinal", PB_WEIGHTS, tasks=LEARNED, targets=CATEGORICAL, required=False
)  # an ordinal claim
declare("artifact.label_thresholds", PB_CAL, tasks=LEARNED, targets=MULTI_LABEL, shaped=False)
declare("artifact.per_label", PB_REPORT, tasks=LEARNED, targets=MULTI_LABEL, shaped=False)
declare("artifact.ranking", PB_REPORT, tasks=RETRIEVAL)
declare("artifact.subgroups", PB_REPORT, tasks=LEARNED, targets=CATEGORICAL, shaped=False)
declare("artifact.errors", PB_REPORT, tasks=TABULAR, targets=NUMERIC)
