"""A first look at a data file before a session is built on it: its columns (type, kind, a few
values), the first rows, and the column names a form may name.

Read through the same lazy scan every stage uses (engine/data/rows.py `scan_files`): the types are
the ones the source stage will see (CSV types inferred from the whole file); the values and the
distinct counts come from the first `PEEK_ROWS` rows, and `DataPeek.rows_read` says how many.
Values are kept as the data holds them; whoever shows them makes them safe (engine/textsafe.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from claimcheck.engine.data.rows import (
    ENGINE_COLUMNS,
    SUFFIXES,
    _csv_header,
    check_text_file,
    file_kind,
    resolve_time_unit,
    scan_files,
)
from claimcheck.engine.pipeline.context import StageInputError

PEEK_ROWS = 2000  # rows read for the values and distinct counts of each column
PREVIEW_ROWS = 8  # rows shown as the preview
FEW_VALUES = 5  # distinct values shown per column
DATA_SUFFIXES = tuple(sorted(SUFFIXES))  # the file types the engine reads

ColumnKind = Literal["number", "text", "date", "bool", "nested"]


class ColumnPeek(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    dtype: str  # the Polars type of the whole-file scan
    kind: ColumnKind
    values: list[str]  # up to FEW_VALUES distinct values of the first rows, in order of appearance
    distinct: int  # distinct non-null values in the first `rows_read` rows
    nulls: int  # null values in the first `rows_read` rows


class DataPeek(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file: str  # as given, relative to the workspace
    rows_read: int  # rows the values, distinct and null counts cover (at most PEEK_ROWS)
    rows: int = 0  # the file's rows, counted over the whole file (0: not counted)
    columns: list[ColumnPeek]
    preview: list[list[str]]  # the first PREVIEW_ROWS rows, one cell per column, as text

    def column(self, name: str) -> ColumnPeek | None:
        return next((c for c in self.columns if c.name == name), None)

    def names(self) -> list[str]:
        return [c.name for c in self.columns]


def workspace_file(workspace: Path, name: str) -> Path:
    """The data file `name` (relative to the workspace) as a path inside it: refused when it, or a
    symlink on the way, leads out of the workspace, when it is no file, or of a type not read."""
    root = Path(workspace).resolve()
    given = Path(name).expanduser()
    path = given if given.is_absolute() else root / given
    real = path.resolve()
    if not real.is_relative_to(root):
        link = " (a symlink out of it)" if real != Path(os.path.normpath(path.absolute())) else ""
        raise StageInputError(
            f"data file {name!r} lies outside the workspace {root}{link}; copy it into the workspace"
        )
    if not real.is_file():
        raise StageInputError(f"data file {name!r} not found in the workspace; pick a file there")
    if real.suffix.lower() not in SUFFIXES:
        raise StageInputError(
            f"data file {name!r}: type '{real.suffix}' is not read; give a "
            + ", ".join(DATA_SUFFIXES)
            + " file"
        )
    return path


def _kind(dtype: object) -> ColumnKind:
    import polars as pl

    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_numeric():  # type: ignore[attr-defined]
        return "number"
    if dtype.is_temporal():  # type: ignore[attr-defined]
        return "date"
    if dtype.is_nested():  # type: ignore[attr-defined]
        return "nested"
    return "text"


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def peek(workspace: Path, name: str) -> DataPeek:
    """Schema, a few values per column and a preview of one data file (StageInputError when unreadable)."""
    import polars as pl

    path = workspace_file(workspace, name)
    lf = scan_files([path], names=[name])
    schema = lf.collect_schema()
    cols = [c for c in schema.names() if c not in ENGINE_COLUMNS]
    try:
        head = lf.select(cols).head(PEEK_ROWS).collect()
        rows = int(lf.select(pl.len()).collect().item())
    except pl.exceptions.PolarsError as exc:
        raise StageInputError(f"data file {name} cannot be read: {str(exc).splitlines()[0]}") from None
    columns = []
    for c in cols:
        series = head[c]
        plain = series if not series.dtype.is_nested() else series.cast(pl.String, strict=False)
        values = [_cell(v) for v in plain.drop_nulls().unique(maintain_order=True).head(FEW_VALUES)]
        columns.append(
            ColumnPeek(
                name=c,
                dtype=str(schema[c]),
                kind=_kind(schema[c]),
                values=values,
                distinct=int(plain.drop_nulls().n_unique()),
                nulls=int(series.null_count()),
            )
        )
    preview = [[_cell(v) for v in row] for row in head.head(PREVIEW_ROWS).iter_rows()]
    return DataPeek(file=name, rows_read=head.height, rows=rows, columns=columns, preview=preview)


def file_columns(workspace: Path, files: list[str]) -> list[str]:
    """The column names of the data files (their union, in order): a CSV's header line only, the
    schema of a Parquet file, the keys a JSONL scan infers."""
    import polars as pl

    names: list[str] = []
    for name in files:
        path = workspace_file(workspace, name)
        kind = file_kind(path)
        if kind == "csv":
            check_text_file(path, name)
            got = _csv_header(path, "\t" if path.suffix.lower() == ".tsv" else ",")
        else:
            try:
                got = scan_files([path], names=[name]).collect_schema().names()
            except pl.exceptions.PolarsError as exc:
                raise StageInputError(
                    f"data file {name} cannot be read: {str(exc).splitlines()[0]}"
                ) from None
        names.extend(c for c in got if c not in names and c not in ENGINE_COLUMNS)
    return names


def time_unit_problem(workspace: Path, files: list[str], column: str, unit: str) -> str:
    """What the source stage would refuse about the time column's unit, by its own rule
    (`resolve_time_unit` on the scan's type of the column), worded for the form ("" if nothing)."""
    if not column:
        return "'time_unit' is set but 'time_column' is empty; name the time column" if unit else ""
    paths = [workspace_file(workspace, name) for name in files]
    schema = scan_files(paths, names=list(files)).collect_schema()
    if column not in schema:
        return ""  # the missing column is the column check's to say
    try:
        resolve_time_unit(column, schema[column], unit)
    except StageInputError as exc:
        return str(exc).removeprefix("source input ")
    return ""


def columns_problem(named: dict[str, list[str]], have: list[str]) -> str:
    """The first input field naming a column the files do not have, worded for the form ("" if none)."""
    for field, cols in named.items():
        missing = [c for c in cols if c and c not in have]
        if missing:
            return (
                f"field '{field}': column(s) {missing} not in the data file; its columns are: "
                + ", ".join(have)
            )
    return ""


__all__ = [
    "DATA_SUFFIXES",
    "PEEK_ROWS",
    "ColumnPeek",
    "DataPeek",
    "columns_problem",
    "file_columns",
    "peek",
    "workspace_file",
]
