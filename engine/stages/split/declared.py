"""The split stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.data.weights import PB_WEIGHTS
from claimcheck.engine.pipeline.checks import CATEGORICAL, MULTI_LABEL, NUMERIC, RETRIEVAL, declare
from claimcheck.engine.stages.split.checks import (
    PB_CHOOSE,
    PB_LEDGER,
    PB_NEAR,
    PB_PREVALENCE,
    PB_RARE,
    PB_SEPARATE,
    PB_SMALL,
    PB_VERIFY,
)

declare("split.membership", PB_LEDGER)
declare("split.rationale", PB_CHOOSE, shaped=False)
declare("split.train_classes", PB_SEPARATE, shaped=False)
declare("split.prevalence", PB_PREVALENCE, targets=CATEGORICAL)
declare("split.target_distribution", PB_PREVALENCE, targets=NUMERIC)
declare("split.family_intersection", PB_VERIFY)
declare("split.chronology", PB_VERIFY)
declare("split.exact_overlap", PB_VERIFY)
declare("split.near_duplicate_overlap", PB_NEAR)
declare("split.label_coverage", PB_SEPARATE, targets=CATEGORICAL)
declare("split.class_support", PB_RARE, targets=CATEGORICAL)
declare("split.target_range", PB_SEPARATE, targets=NUMERIC)
declare("split.folds", PB_SMALL, shaped=False, required=False)  # K-fold splits only
declare("split.weight_mass", PB_WEIGHTS, required=False)  # with a weight column
declare("split.label_support", PB_RARE, targets=MULTI_LABEL, shaped=False)
declare("split.query_integrity", PB_VERIFY, tasks=RETRIEVAL)

from claimcheck.engine.stages.split.subgroups import PB_SUBGROUPS  # noqa: E402

declare("split.subgroup_support", PB_SUBGROUPS, shaped=False)
