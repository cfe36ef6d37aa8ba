"""The baseline stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.baseline.evaluation import (
    PB_CAL,
    PB_LEARN,
    PB_RARE,
    PB_REPORT,
    PB_SPLITS,
    PB_TRIVIAL,
)
from claimcheck.engine.data.weights import PB_WEIGHTS
from claimcheck.engine.pipeline.checks import CATEGORICAL, LEARNED, MULTI_LABEL, RETRIEVAL, declare

declare("baseline.trivial", PB_TRIVIAL)
declare("baseline.conventional", PB_TRIVIAL)
declare("baseline.learnability", PB_LEARN, tasks=LEARNED)
declare("baseline.per_class", PB_RARE, tasks=LEARNED, targets=CATEGORICAL)
declare("baseline.calibration", PB_CAL, tasks=LEARNED, targets=CATEGORICAL)
declare("baseline.operating_point", PB_CAL, tasks=LEARNED, targets=CATEGORICAL)
declare("baseline.predictions", PB_REPORT)
declare("baseline.locked_test", PB_SPLITS, shaped=False)
declare(
    "baseline.timing", "Performance timing and quality benchmarks are different experiments.", shaped=False
)
declare("baseline.sample_weights", PB_WEIGHTS, required=False)  # with a weight column
declare("baseline.per_label", PB_RARE, tasks=LEARNED, targets=MULTI_LABEL, shaped=False)
declare("baseline.retrieval", PB_TRIVIAL, tasks=RETRIEVAL)
