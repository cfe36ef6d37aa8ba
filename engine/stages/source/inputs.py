"""The source stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
    model_validator,
)

from claimcheck.engine.data.rows import TimeUnit
from claimcheck.engine.retrieval.columns import RetrievalColumns


class Filter(BaseModel):
    model_config = ConfigDict(extra="forbid")
    reason: str = Field(
        default="", description="Why these rows are kept (the record and the report show it)."
    )
    # A condition of the rows to KEEP, in the filter language of engine/data/filters.py.
    where: str = Field(
        default="",
        description="A condition on the source's columns of the rows to KEEP, e.g. channel <> 'test'.",
    )

    @field_validator("where")
    @classmethod
    def _where(cls, value: str) -> str:
        from claimcheck.engine.data.filters import FilterError, parse

        if value.strip():
            try:
                parse(value)
            except FilterError as exc:
                raise ValueError(str(exc)) from None
        return value


class IndependentRows(BaseModel):
    """The person's decision that the rows are independent (no entity links them), with its reason."""

    model_config = ConfigDict(extra="forbid")
    declared: StrictBool = Field(
        default=False, description="Every row is its own family: no entity links rows."
    )
    rationale: str = Field(default="", description="Why no entity links the rows (required when declared).")

    @field_validator("rationale")
    @classmethod
    def _rationale(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("declared") and not value.strip():
            raise ValueError("declaring the rows independent needs a rationale: say why no entity links them")
        if value.strip() and not info.data.get("declared"):
            raise ValueError("a rationale without 'declared = true' records nothing; set declared or drop it")
        return value


class Preprocessing(BaseModel):
    """One script that produced a data file: pinned by sha256 with its imports; optionally rebuilt."""

    model_config = ConfigDict(extra="forbid")
    script: str = Field(description="The Python script (inside the workspace) that wrote a data file.")
    args: list[str] = Field(default_factory=list, description="Arguments the script is run with.")
    reads: list[str] = Field(
        default_factory=list,
        description="Other workspace files the script reads (pinned by sha256; copied for a rebuild).",
    )
    output: str = Field(
        default="", description="Which of 'files' the script writes (empty: the only file, if one)."
    )
    rebuild: StrictBool = Field(
        default=False,
        description="Re-run the script in a scratch folder and compare its output's sha256 with the data file.",
    )

    @field_validator("script")
    @classmethod
    def _script(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is empty; name the Python script that produced the data")
        if not value.endswith(".py"):
            raise ValueError(
                f"{value!r} is not a .py file; only Python scripts are pinned with their imports"
            )
        return value


LabelMethod = Literal["", "human", "teacher_model", "rule", "script", "unknown"]
# The longest label delay accepted (100 years), in days.
MAX_LABEL_DELAY_DAYS = 36_500.0


class LabelSource(BaseModel):
    """How the labels were made, how certain they are, and how long after an observation they are final."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    method: LabelMethod = Field(
        default="",
        description="How labels were made: human, teacher_model, rule, script or unknown (empty: not stated).",
    )
    annotators: str = Field(
        default="", description="Who labelled (human): e.g. '3 support agents, majority vote'."
    )
    teacher_model: str = Field(default="", description="The model id that wrote the labels (teacher_model).")
    teacher_revision: str = Field(
        default="", description="The teacher model's revision or commit (teacher_model)."
    )
    script: str = Field(
        default="", description="The rule or script file that wrote the labels (pinned by sha256)."
    )
    agreement: str = Field(
        default="",
        description="Annotation uncertainty: an agreement figure (e.g. 'Cohen kappa 0.78 on 500 rows') or 'not measured'.",
    )
    label_delay_days: float = Field(
        default=0.0,
        ge=0.0,
        le=MAX_LABEL_DELAY_DAYS,
        description="Days after the observation until its label is final (0: final at once).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> LabelSource:
        m = self.method
        if m == "teacher_model" and not (self.teacher_model.strip() and self.teacher_revision.strip()):
            raise ValueError("method 'teacher_model' needs 'teacher_model' (its id) and 'teacher_revision'")
        if m != "teacher_model" and (self.teacher_model or self.teacher_revision):
            raise ValueError(
                f"'teacher_model' / 'teacher_revision' are set but method is {m!r}; set method = 'teacher_model' or drop them"
            )
        if m in ("rule", "script") and not self.script.strip():
            raise ValueError(f"method {m!r} needs 'script': the file that wrote the labels")
        if m not in ("rule", "script") and self.script:
            raise ValueError(
                f"'script' is set but method is {m!r}; set method = 'rule' or 'script' or drop it"
            )
        if m != "human" and self.annotators:
            raise ValueError(f"'annotators' is set but method is {m!r}; set method = 'human' or drop it")
        return self


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    files: list[str] = Field(
        default_factory=list,
        description="Data files (CSV, JSONL, Parquet), relative to the workspace, comma-separated.",
    )
    label_column: str = Field(default="", description="The column holding the target.")
    label_mapping: dict[str, str] = Field(
        default_factory=dict,
        description="Raw label value = claimed class, comma-separated pairs (empty: the values as they are).",
    )
    input_columns: list[str] = Field(
        default_factory=list, description="Columns the model may read at prediction time; never the label."
    )
    text_columns: list[str] = Field(
        default_factory=list, description="Which input columns are free text (a subset of the input columns)."
    )
    id_column: str = Field(default="", description="A column naming each row uniquely (empty: none).")
    entity_columns: list[str] = Field(
        default_factory=list,
        description="Columns naming who or what a row is about (customer, patient); splits keep them together.",
    )
    # Without entity columns: the recorded decision that every row is independent (its own family).
    independent_rows: IndependentRows = Field(
        default_factory=IndependentRows,
        description="Without entity columns: the decision that every row is independent, with its rationale.",
    )
    time_column: str = Field(default="", description="The column with each row's time (empty: none).")
    # Per-row sample weights: numeric, finite and non-negative on every row kept (a row that is not
    # is refused, named by file and line, before anything is written). Never a model input; rows
    # are never collapsed into weights nor weights expanded into rows.
    weight_column: str = Field(
        default="",
        description="A numeric column of per-row sample weights (non-negative, finite; empty: none).",
    )
    # What the time column's values are; "" infers it from a date / datetime / ISO text column only
    # (a numeric column must say: year, unix_seconds or ordinal). Checked against the column's type.
    time_unit: TimeUnit = Field(
        default="",
        description="What the time values are: date, datetime, year, unix_seconds or ordinal (empty: inferred from a date column).",
    )
    unavailable_columns: list[str] = Field(
        default_factory=list, description="Columns known only after the prediction is made (leakage if used)."
    )
    sensitive_columns: list[str] = Field(
        default_factory=list, description="Columns with personal or protected attributes."
    )
    availability: dict[str, Literal["yes", "no", "unresolved"]] = Field(
        default_factory=dict,
        description="Per input column: is it available at prediction time? column=yes|no|unresolved, comma-separated.",
    )
    filters: list[Filter] = Field(
        default_factory=list,
        description='Rows to keep, as a TOML list of tables: [{reason = "…", where = "…"}].',
    )
    normalisation: Literal["lower_strip_ws", "none"] = Field(
        default="lower_strip_ws", description="How text is normalised before duplicates are compared."
    )
    license: str = Field(default="", description="The data's licence.")
    provenance: str = Field(default="", description="Where the data came from and how it was collected.")
    # 0 = full pass; N > 0 = preview on the first N rows (every figure then says so).
    preview_rows: int = Field(
        default=0,
        ge=0,
        le=10**9,
        description="0 = read every row; N > 0 = a preview of the first N rows (every figure says so).",
    )
    near_dup_threshold: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="Jaccard similarity from which two texts count as near-duplicates.",
    )
    shingle_size: int = Field(
        default=5, ge=1, le=50, description="Words per shingle in the near-duplicate comparison."
    )
    # Timestamps later than this (ISO date) count as future; empty = the time the check runs.
    as_of: str = Field(
        default="",
        description="Timestamps later than this ISO date count as future (empty: when the check runs).",
    )
    # Non-finite numbers (NaN, inf, 1e999) and numbers too large to square (|x| > 1e150) in a numeric
    # model input: "refuse" fails source.non_finite (later stages are not run); "exclude_rows" leaves
    # those rows out, counted in source.transformations.
    non_finite: Literal["refuse", "exclude_rows"] = Field(
        default="refuse",
        description="Rows with NaN, inf or overflowing numbers in a numeric input: refuse (a failing check) or exclude_rows (counted).",
    )
    # Data files must lie inside the workspace (symlinks are followed); true lets them lie anywhere,
    # and the record says so.
    allow_outside_workspace: StrictBool = Field(
        default=False, description="Let data files lie outside the workspace (the record says so)."
    )
    # A retrieval claim's query / document columns (read by a retrieval claim only; engine/retrieval).
    retrieval: RetrievalColumns = Field(
        default_factory=RetrievalColumns,
        description="Retrieval: the query id, query, document id and document columns (empty: not a retrieval claim).",
    )

    # A multi-label target (claim target_type = "multi_label"): how the label column holds each row's
    # label set (engine/data/labelsets.py). Empty: one label per row.
    label_format: Literal["", "json_list", "delimited"] = Field(
        default="",
        description='Multi-label only: how the label column holds a row\'s labels, "json_list" or "delimited" (empty: one label per row).',
    )
    label_delimiter: str = Field(
        default="",
        description='With label_format = "delimited": the string between labels, e.g. ";".',
    )
    # The scripts that produced the data files (engine/data/preprocessing.py pins and rebuilds them).
    preprocessing: list[Preprocessing] = Field(
        default_factory=list,
        description='Scripts that produced the data: [{script = "…", output = "…", rebuild = true}].',
    )
    label_provenance: LabelSource = Field(
        default_factory=LabelSource,
        description="How the labels were made (method, teacher model, script), their agreement and delay.",
    )
    selection: str = Field(
        default="",
        description="How rows were selected into the data set, and the selection bias that follows (a decision).",
    )
    # Groups the claim must hold for (engine/data/subgroups.py): counted per split, measured per arm.
    subgroup_columns: list[str] = Field(
        default_factory=list,
        description="Columns whose values name subgroups (support per split, metric per arm); not model inputs unless listed there.",
    )
    # How much memory the audit may plan for; each check with a bounded path takes it when its
    # in-memory path would need more (engine/audit/budget.py; docs/audit-scale.md). Empty: the
    # environment's CLAIMCHECK_MEMORY_BUDGET, else half the machine's memory.
    memory_budget: str = Field(
        default="",
        description="Memory the audit plans for, e.g. 4G: steps that would need more take their bounded path (not a cap; empty: CLAIMCHECK_MEMORY_BUDGET, else half the machine's).",
    )
    # Where the near-duplicate search and the duplicate / conflict keys run: here, or as Ray tasks on a
    # cluster (engine/audit/onray; docs/audit-scale.md). The figures are the same either way.
    audit_backend: Literal["local", "ray"] = Field(
        default="local",
        description="Where the near-duplicate search, the duplicate keys and the entity families run: local (this process) or ray (tasks on a Ray cluster; the same figures).",
    )
    audit_ray_address: str = Field(
        default="",
        description="The Ray cluster for audit_backend = ray: ray://host:10001 (Ray Client), host:6379 (on a cluster node) or auto; empty: RAY_ADDRESS.",
    )
    # How the Ray tasks get the texts the bounded path leaves on disk (engine/audit/onray/shared.py).
    audit_ray_texts: Literal["sent", "shared"] = Field(
        default="sent",
        description="With audit_backend = ray and the texts left on disk: sent (the driver sends each task its texts) or shared (the tasks read the spill file; TMPDIR must be a folder every node mounts at the same path).",
    )

    # Checked before any data is read (empty 'files' / 'label_column' only when the stage runs: a
    # form starts empty), so an answers file is refused before a stage runs.
    @field_validator("files")
    @classmethod
    def _files(cls, value: list[str]) -> list[str]:
        import posixpath

        if any(not f.strip() for f in value):
            raise ValueError("holds an empty path")
        seen: dict[str, str] = {}
        for f in value:
            key = posixpath.normpath(f)
            if key in seen:
                twice = f"'{f}'" if seen[key] == f else f"'{seen[key]}' and '{f}' name one path"
                raise ValueError(f"lists the same file twice ({twice}); list it once")
            seen[key] = f
        return value

    @field_validator("id_column", "entity_columns")
    @classmethod
    def _not_the_label(cls, value: str | list[str], info: ValidationInfo) -> str | list[str]:
        label = info.data.get("label_column", "")
        if label and (value == label or (isinstance(value, list) and label in value)):
            raise ValueError(
                f"names the label column '{label}'; an id or entity column identifies rows, it is not the "
                "target: name another column"
            )
        return value

    @field_validator("weight_column")
    @classmethod
    def _weight(cls, value: str, info: ValidationInfo) -> str:
        label = info.data.get("label_column", "")
        if value and value == label:
            raise ValueError(f"names the label column '{label}'; name the column holding the weights")
        if value and value in info.data.get("input_columns", []):
            raise ValueError(
                f"'{value}' is also an input column; a sample weight says how much a row counts, it is "
                "not a model input: remove it from 'input_columns'"
            )
        return value

    @field_validator("input_columns")
    @classmethod
    def _inputs(cls, value: list[str], info: ValidationInfo) -> list[str]:
        label = info.data.get("label_column", "")
        if label and label in value:
            raise ValueError(f"lists the label column '{label}'; a model may not see its target")
        return value

    @field_validator("independent_rows")
    @classmethod
    def _independent(cls, value: IndependentRows, info: ValidationInfo) -> IndependentRows:
        if value.declared and info.data.get("entity_columns"):
            raise ValueError(
                "declares the rows independent while 'entity_columns' names entities that link them; "
                "keep one of the two"
            )
        return value

    @field_validator("text_columns")
    @classmethod
    def _texts(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if "input_columns" not in info.data:  # already refused
            return value
        stray = [c for c in value if c not in info.data["input_columns"]]
        if stray:
            raise ValueError(f"{stray} are not in 'input_columns'; add them there or remove them")
        return value

    @field_validator("availability")
    @classmethod
    def _availability(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if "input_columns" not in info.data:  # already refused
            return value
        unknown = [c for c in value if c not in info.data["input_columns"]]
        if unknown:
            raise ValueError(f"names column(s) {unknown} that are not input columns")
        return value

    @model_validator(mode="after")
    def _label_lists(self) -> Inputs:
        """A label-list column: its delimiter when delimited, and no label_mapping."""
        from claimcheck.engine.data.labelsets import SEP

        if self.label_format == "delimited" and not self.label_delimiter.strip():
            raise ValueError(
                'label_format "delimited" needs label_delimiter, the string between labels (e.g. ";")'
            )
        if self.label_format != "delimited" and self.label_delimiter:
            raise ValueError(
                'label_delimiter is read with label_format = "delimited" only; set that or leave it empty'
            )
        if SEP in self.label_delimiter and self.label_delimiter != SEP:
            raise ValueError(f"label_delimiter may not contain '{SEP}' unless it is exactly '{SEP}'")
        if self.label_mapping and self.label_format:
            raise ValueError(
                "label_mapping is not applied to a label-list column (label_format); write the labels "
                "as the claim names them, or map them when preparing the file"
            )
        return self

    @field_validator("preprocessing")
    @classmethod
    def _preprocessing(cls, value: list[Preprocessing], info: ValidationInfo) -> list[Preprocessing]:
        files = info.data.get("files")
        if files is None:  # already refused
            return value
        scripts = [p.script for p in value]
        twice = sorted({s for s in scripts if scripts.count(s) > 1})
        if twice:
            raise ValueError(f"declares {twice} twice; declare each script once")
        for p in value:
            if p.output and p.output not in files:
                raise ValueError(f"{p.script}: output {p.output!r} is not one of 'files' {files}")
            if p.rebuild and not p.output and len(files) != 1:
                raise ValueError(f"{p.script}: rebuild = true needs 'output' (which of 'files' it writes)")
        return value

    @field_validator("subgroup_columns")
    @classmethod
    def _subgroups(cls, value: list[str], info: ValidationInfo) -> list[str]:
        label = info.data.get("label_column", "")
        if label and label in value:
            raise ValueError(
                f"lists the label column '{label}'; a subgroup is a group of rows, not the target"
            )
        if len(set(value)) != len(value):
            raise ValueError("lists a column twice; list each once")
        return value

    def named_columns(self) -> dict[str, list[str]]:
        """Input field → the columns it names (what must be in the data; `require_columns` checks it)."""
        return {
            "label_column": [self.label_column],
            "input_columns": self.input_columns,
            "text_columns": self.text_columns,
            "id_column": [self.id_column],
            "entity_columns": self.entity_columns,
            "time_column": [self.time_column],
            "weight_column": [self.weight_column],
            "retrieval": self.retrieval.columns(),
            "subgroup_columns": self.subgroup_columns,
        }

    @field_validator("filters")
    @classmethod
    def _filters(cls, value: list[Filter]) -> list[Filter]:
        if any(not f.where.strip() or not f.reason.strip() for f in value):
            raise ValueError("every filter needs a 'reason' and a 'where' expression (rows to keep)")
        return value

    @field_validator("as_of")
    @classmethod
    def _as_of(cls, value: str) -> str:
        if value:
            try:
                dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError(f"{value!r} is not an ISO date (e.g. 2025-09-01)") from None
        return value

    @field_validator("audit_ray_texts")
    @classmethod
    def _ray_texts(cls, value: str, info: ValidationInfo) -> str:
        if value == "shared" and info.data.get("audit_backend") != "ray":
            raise ValueError(
                "shared texts are read by Ray tasks: set audit_backend = ray, or leave audit_ray_texts = sent"
            )
        return value

    @field_validator("memory_budget")
    @classmethod
    def _memory_budget(cls, value: str) -> str:
        from claimcheck.engine.audit.budget import BudgetError, parse_size

        if value.strip():
            try:
                parse_size(value, "memory_budget")
            except BudgetError as exc:
                raise ValueError(str(exc)) from None
        return value
