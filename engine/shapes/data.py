"""Shapes of the source and split stages' checks that later stages and the report read."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from claimcheck.engine.shapes.base import Part, Shape

Label = str | int | float | bool


class FileSum(Part):
    path: str
    sha256: str
    bytes: int


class Checksum(Shape):
    check_ids = ("source.checksum",)
    total_bytes: int
    files: list[FileSum]


class Schema(Shape):
    """Rows and the column types the source was read with (Polars dtype names)."""

    check_ids = ("source.schema",)
    rows: int
    columns: dict[str, str]
    rows_per_file: dict[str, int] = Field(default_factory=dict)
    malformed_records: int = 0
    non_utf8_lines: int = 0
    malformed_by_file: list[dict[str, Any]] = Field(default_factory=list)


class ClassCoverage(Shape):
    check_ids = ("source.class_coverage",)
    figure = "class_coverage"
    rows: int
    null_labels: int
    unused_mapping_keys: list[str]
    rare_classes: list[str]
    rare_limit_rows: int
    per_raw_label: dict[str, int]
    per_target: dict[str, int]
    unmapped_raw_values: dict[str, int]
    routes: dict[str, list[str]] = Field(default_factory=dict)


class Missingness(Shape):
    check_ids = ("source.missingness",)
    figure = "bars"
    inputs_mostly_null: list[str]
    null_share: dict[str, float]
    null_share_by_class: dict[str, dict[str, float]] = Field(default_factory=dict)
    # Rows with a null in any data column (records written before this field read as 0).
    rows_with_any_null: int = 0
    rows_with_any_null_share: float = 0.0


class ConflictingLabels(Shape):
    check_ids = ("source.conflicting_labels",)
    columns: list[str]
    groups: int
    rows: int
    noise_ceiling_accuracy: float
    rows_above_ceiling: int


class NearDuplicates(Shape):
    check_ids = ("source.near_duplicates",)
    columns: list[str]
    pairs: int
    text_pairs: int
    distinct_texts: int
    candidates: int
    clusters: int
    rows_in_clusters: int
    largest_cluster_rows: int
    threshold: float
    shingle_size: int
    method: str
    # the shingles' word hash (hashing.SHINGLE_HASH); "" in records made before it was named, which
    # hashed words with Polars' own hash: their candidate counts differ, their pairs do not
    shingle_hash: str = ""
    candidate_probability_at_threshold: float
    pairs_path: str
    pairs_sha256: str


class EntityFamilies(Shape):
    check_ids = ("source.entity_families",)
    entity_columns: list[str]
    rows: int
    families: int
    singleton_families: int
    largest_family_rows: int
    rows_in_multi_row_families: int
    rows_without_entity_id: int
    multi_row_families: int
    families_path: str
    families_sha256: str
    size_quantiles: dict[str, int] = Field(default_factory=dict)
    families_linking_several_ids: dict[str, int] = Field(default_factory=dict)
    # The source's recorded decision that rows are independent (no entity columns; basis "decided").
    independent_rows_declared: bool = False


class KeptFamilies(Part):
    """The families one kind of grouping formed over the assigned rows: how many, how many hold two
    or more rows, and the rows those hold."""

    families: int
    multi_row_families: int
    rows_in_multi_row_families: int


class Membership(Shape):
    check_ids = ("split.membership",)
    path: str
    sha256: str
    rows: int
    sizes: dict[str, int]
    excluded: dict[str, int]
    # Share of the assigned rows per split, and its largest difference from the asked fractions
    # (time splits cut only between distinct timestamps). Older records: empty / 0.
    realised_fractions: dict[str, float] = Field(default_factory=dict)
    largest_fraction_shift: float = 0.0
    # What a group split kept together (entities, duplicates, duplicates_and_near) and how many
    # such families the assigned data held.
    grouping: str = "entities"
    families: int = 0
    # The independent unit every later stage folds and resamples over (claimcheck.engine.data.splits
    # .UNIT_KINDS: "family", "duplicate family", "near-duplicate family"; the membership file's
    # family_id column holds it per row), its count over the assigned rows, and the families each
    # grouping formed over those rows ("entities", "exact_duplicates", "near_duplicates": the parts
    # the unit joins). Older records: "" / 0 / empty, and later stages read the source's entity families.
    unit: str = ""
    units: int = 0
    kept_together: dict[str, KeptFamilies] = Field(default_factory=dict)


class Prevalence(Shape):
    check_ids = ("split.prevalence",)
    figure = "class_coverage"
    max_abs_share_difference: float
    sizes: dict[str, int]
    whole: dict[str, float]
    per_split: dict[str, dict[str, float]]


class FamilyIntersection(Shape):
    check_ids = ("split.family_intersection",)
    families_crossing: int
    rows_in_crossing_families: int
    pairs: dict[str, int]


class Chronology(Shape):
    check_ids = ("split.chronology",)
    max_train_time: str
    min_test_time: str
    test_share_before_max_train: float
    # The times above are written in this unit (date, datetime, year, unix_seconds, ordinal).
    unit: str = "datetime"
    # Test rows whose time equals the latest train time: one timestamp on both sides (overlap).
    test_rows_at_max_train: int = 0


class ExactOverlap(Shape):
    check_ids = ("split.exact_overlap",)
    columns: list[str]
    normalisation: str
    rows: dict[str, int]
    share: dict[str, float]


class NearDuplicateOverlap(Shape):
    check_ids = ("split.near_duplicate_overlap",)
    pairs_crossing: int
    pairs_by_splits: dict[str, int]
    held_out_rows_with_train_near_copy: dict[str, int]


class LabelCoverage(Shape):
    check_ids = ("split.label_coverage",)
    train_labels: list[Label]
    absent_from_train: dict[str, list[Label]]


class ClassSupport(Shape):
    check_ids = ("split.class_support",)
    figure = "class_coverage"
    floor: int
    support: dict[str, dict[str, int]]
    below_floor: dict[str, list[str]]


# ---------------------------------------------------------------- numeric targets (regression)


class TargetSummary(Part):
    """A numeric target's distribution over some rows (engine/audit/target.py); only `count` when empty."""

    count: int
    min: float | None = None
    p05: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p95: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None


class TargetDistribution(Shape):
    """source.class_coverage's counterpart for a numeric target."""

    check_ids = ("source.target_distribution",)
    rows: int
    null_labels: int
    non_numeric: int
    non_numeric_examples: list[str]
    distinct: int
    summary: TargetSummary


class SplitTargetDistribution(Shape):
    """split.prevalence and split.class_support's counterpart for a numeric target."""

    check_ids = ("split.target_distribution",)
    sizes: dict[str, int]
    whole: TargetSummary
    per_split: dict[str, TargetSummary]
    # the largest |median(split) − median(whole)|, in standard deviations of the whole
    max_median_shift_sd: float


class TargetRange(Shape):
    """split.label_coverage's counterpart: held-out targets outside the train range (a warning: a model
    can still predict there, but tree learners and the train mean cannot extrapolate)."""

    check_ids = ("split.target_range",)
    train_min: float | None = None
    train_max: float | None = None
    below_train_min: dict[str, int]
    above_train_max: dict[str, int]
    share_outside: dict[str, float]


class SampleWeights(Shape):
    """source.sample_weights: the declared weight column on the rows kept (engine/data/weights.py)."""

    check_ids = ("source.sample_weights",)
    column: str
    metric_weighting: str  # the claim's: unweighted | sample_weight
    rows: int
    zero_weight_rows: int
    total_mass: float
    min: float
    max: float
    duplicates: str  # how duplicated rows relate to weights (never collapsed, never expanded)


class WeightPart(Part):
    rows: int
    total_mass: float
    mass_share: float
    zero_weight_rows: int
    min: float
    max: float


class SplitWeightMass(Shape):
    """split.weight_mass: the weight mass per split, recounted from the assigned rows."""

    check_ids = ("split.weight_mass",)
    column: str
    total_mass: float
    splits: dict[str, WeightPart]


class Rebuilt(Part):
    """What re-running a preprocessing script in a scratch folder produced."""

    returncode: int
    sha256: str
    matches: bool
    stderr_tail: str = ""


class ScriptPin(Part):
    """One declared preprocessing script: its bytes, what it imports and reads, and its rebuild."""

    sha256: str
    bytes: int
    args: list[str]
    output: str
    imports: list[str]
    local_modules: dict[str, str]
    reads: dict[str, str]
    rebuild: bool
    rebuilt: Rebuilt | None = None


class Preprocessing(Shape):
    """source.preprocessing: per declared script (its workspace-relative path), its pin."""

    check_ids = ("source.preprocessing",)
    scripts: dict[str, ScriptPin]


class LabelProvenance(Shape):
    """source.label_provenance: how the labels were made (the source's label_provenance inputs), with
    the sha256 of a rule or script that wrote them ("" when none)."""

    check_ids = ("source.label_provenance",)
    method: str
    annotators: str = ""
    teacher_model: str = ""
    teacher_revision: str = ""
    script: str = ""
    script_sha256: str = ""
    agreement: str = ""
    label_delay_days: float = 0.0
