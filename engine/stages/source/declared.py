"""The source stage's checks, declared once (engine/pipeline/checks.py)."""

from claimcheck.engine.data.weights import PB_WEIGHTS
from claimcheck.engine.pipeline.checks import CATEGORICAL, MULTI_LABEL, NUMERIC, RETRIEVAL, declare
from claimcheck.engine.stages.source.checks import (
    PB_BYTES,
    PB_DUPS,
    PB_FAMILY,
    PB_INSPECT,
    PB_LEAK,
    PB_MAPPING,
    PB_NEAR,
    PB_NOISE,
    PB_PREVIEW,
    PB_SENSITIVE,
    PB_TRANSFORM,
    PB_UNRESOLVED,
)

declare("source.checksum", PB_BYTES)
declare("source.schema", PB_INSPECT)
declare("source.non_finite", PB_INSPECT, shaped=False)
declare("source.transformations", PB_TRANSFORM, shaped=False)
declare("source.missingness", PB_INSPECT)
declare("source.time_range", PB_INSPECT, shaped=False)
declare("source.future_timestamps", PB_INSPECT, shaped=False, required=False)  # with a time column
declare("source.class_coverage", PB_MAPPING, targets=CATEGORICAL)
declare("source.class_order", PB_MAPPING, targets=CATEGORICAL, shaped=False)
declare("source.target_distribution", PB_INSPECT, targets=NUMERIC)
declare("source.duplicate_inputs", PB_DUPS, shaped=False)
declare("source.conflicting_labels", PB_NOISE)
declare("source.near_duplicates", PB_NEAR)
declare("source.identifier_shortcut", PB_LEAK, shaped=False)
declare("source.single_feature_leakage", PB_LEAK, shaped=False)
declare("source.prediction_time_availability", PB_UNRESOLVED, shaped=False)
declare("source.entity_families", PB_FAMILY)
declare("source.sensitive_columns", PB_SENSITIVE, shaped=False)
declare("source.licence_provenance", PB_BYTES, shaped=False)
declare("source.pass_kind", PB_PREVIEW, shaped=False, required=False)  # a preview pass only
declare("source.sample_weights", PB_WEIGHTS, required=False)  # with a weight column
declare("source.label_lists", PB_MAPPING, targets=MULTI_LABEL, shaped=False)
declare("source.retrieval", PB_INSPECT, tasks=RETRIEVAL)

from claimcheck.engine.stages.source.provenance import PB_CODE, PB_LABELS  # noqa: E402

declare("source.preprocessing", PB_CODE)
declare("source.preprocessing_environment", PB_CODE, shaped=False)
declare("source.label_provenance", PB_LABELS)
declare("source.label_maturity", PB_LABELS, shaped=False)
declare("source.selection", PB_LABELS, shaped=False)
