"""The source stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator

from claimcheck.engine.data.rows import TimeUnit


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

    def named_columns(self) -> dict[str, list[str]]:
        """Input field → the columns it names (what must be in the data; `require_columns` checks it)."""
        return {
            "label_column": [self.label_column],
            "input_columns": self.input_columns,
            "text_columns": self.text_columns,
            "id_column": [self.id_column],
            "entity_columns": self.entity_columns,
            "time_column": [self.time_column],
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
