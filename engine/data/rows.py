"""The data set as every stage sees it: scanned lazily with Polars, with a stable row identity.

Row identity: `row_id` is 0..n-1 over the files in the order given, then record order inside each
file; `source_file` and `source_line` (1-based record number inside that file) say where a row came
from. Filters never renumber rows, so a row id means the same source record in every stage.

Playbook: "Preserve stable source identities and parents through filters, branches and joins;
report exclusions and label changes."
"""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from claimcheck.engine.evidence import EvidenceError, StageRecord
from claimcheck.engine.pipeline.context import StageContext, StageInputError

if TYPE_CHECKING:
    import polars as pl

    from claimcheck.engine.data.blockread import BlockFolder

ROW_ID = "row_id"
TARGET = "target"
FAMILY = "family_id"
SOURCE_FILE = "source_file"
SOURCE_LINE = "source_line"
# Columns the engine adds; a data file may not use these names itself.
ENGINE_COLUMNS = (ROW_ID, TARGET, FAMILY, SOURCE_FILE, SOURCE_LINE)

FAMILIES_FILE = "families.parquet"
SUFFIXES = {".csv": "csv", ".tsv": "csv", ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl"}
SUFFIXES[".ndjson"] = "jsonl"
NO_TARGET_REASON = "no target (null label, or a raw label the mapping does not cover)"


def file_kind(path: Path) -> str:
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise StageInputError(
            f"{path}: unsupported file type '{path.suffix}'; give a .csv, .parquet or .jsonl file"
        )
    return kind


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


GLOB_CHARS = frozenset("*?[]{}")
# Columns per data file: every column is profiled and written into the source record, so the cost of
# the audit and of the record grows with it (5,000 columns took minutes). Documented in docs/checks.md.
MAX_COLUMNS = 1000


def _nul_line(path: Path, chunk: int = 1 << 20) -> int:
    """1-based line of the first NUL byte in the file, 0 when there is none (a fast byte scan)."""
    lines = 1
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            at = block.find(b"\0")
            if at >= 0:
                return lines + block.count(b"\n", 0, at)
            lines += block.count(b"\n")
    return 0


def _csv_header(path: Path, separator: str) -> list[str]:
    import csv
    import io

    with open(path, "rb") as fh:
        head = fh.read(1 << 20)
    text = io.StringIO(head.decode("utf-8", errors="replace"), newline="")
    csv.field_size_limit(2**31 - 1)
    try:
        return next(csv.reader(text, delimiter=separator), [])
    except csv.Error:
        return []


def check_text_file(path: Path, name: str) -> None:
    """A CSV / JSONL file that is text: no NUL bytes (a binary file, UTF-16, a compressed file), no
    duplicate header names (Polars would rename them silently)."""
    kind = file_kind(path)
    if kind == "parquet":
        return
    line = _nul_line(path)
    if line:
        raise StageInputError(
            f"data file {name}: line {line} holds a NUL byte — a binary file, UTF-16 text or a compressed "
            f"file, not a UTF-8 {path.suffix.lower()} file; export it as UTF-8 text"
        )
    if kind == "csv":
        header = _csv_header(path, "\t" if path.suffix.lower() == ".tsv" else ",")
        seen: set[str] = set()
        dups = sorted({c for c in header if c in seen or seen.add(c)})
        if dups:
            raise StageInputError(
                f"data file {name}: the header names column(s) {dups} more than once; rename them so "
                "every column has its own name"
            )


def refuse_same_file(paths: list[Path], names: list[str]) -> None:
    """Two entries of `files` that resolve to one file (./data.csv, a symlink) would read it twice."""
    seen: dict[Path, str] = {}
    for path, name in zip(paths, names, strict=True):
        real = Path(path).resolve()
        first = seen.setdefault(real, name)
        if first != name:
            raise StageInputError(
                f"source input 'files' names one file twice: '{first}' and '{name}' are both {real}; "
                "list it once"
            )


def _scan_one(path: Path, name: str, blocks: BlockFolder | None = None) -> pl.LazyFrame:
    import polars as pl

    if not path.is_file():
        raise StageInputError(f"data file {name} not found (looked at {path}); check the path in 'files'")
    if path.stat().st_size == 0:
        raise StageInputError(f"data file {name} is empty (0 bytes); give a file with a header and rows")
    kind = file_kind(path)
    check_text_file(path, name)
    if kind == "csv" and blocks is not None:
        # The bounded path: the same frame, read in blocks without mapping the file (blockread.py).
        separator = "\t" if path.suffix.lower() == ".tsv" else ","
        lf = blocks.scan_csv(path, name, separator).with_row_index(SOURCE_LINE, offset=1)
    elif kind == "csv":
        # Full-file schema inference: a column that turns from numbers to text late in the file
        # becomes a string column instead of failing mid-scan. Invalid UTF-8 is replaced here and
        # located, line by line, by the source.schema check. glob=False: a path is a path — the file
        # read is the file hashed, even when its name holds '[', '*' or '?'.
        lf = pl.scan_csv(
            path,
            separator="\t" if path.suffix.lower() == ".tsv" else ",",
            infer_schema_length=None,
            truncate_ragged_lines=True,
            encoding="utf8-lossy",
            row_index_name=SOURCE_LINE,
            row_index_offset=1,
            glob=False,
        )
    elif kind == "parquet":
        lf = pl.scan_parquet(path, row_index_name=SOURCE_LINE, row_index_offset=1, glob=False)
    elif blocks is not None:
        lf = blocks.scan_ndjson(path, name).with_row_index(SOURCE_LINE, offset=1)
    else:
        # scan_ndjson has no glob switch: a name with glob characters is read from its bytes.
        src: Any = path.read_bytes() if GLOB_CHARS & set(path.name) else path
        lf = pl.scan_ndjson(src, infer_schema_length=None, row_index_name=SOURCE_LINE, row_index_offset=1)
    try:
        cols = lf.collect_schema().names()
    except Exception as exc:  # polars raises several error types for unreadable files
        raise StageInputError(f"data file {name} cannot be read: {_first_line(exc)}") from None
    if len(cols) - 1 > MAX_COLUMNS:  # the row index is not a column of the file
        raise StageInputError(
            f"data file {name} has {len(cols) - 1:,} columns; claimcheck audits at most {MAX_COLUMNS:,} "
            "per file (each column is profiled and recorded); write the columns the claim needs to a "
            "narrower file"
        )
    clash = [c for c in cols if c in ENGINE_COLUMNS and c != SOURCE_LINE]
    if clash:
        raise StageInputError(
            f"data file {name} has column(s) {clash} whose names claimcheck reserves; rename them"
        )
    return lf.with_columns(
        pl.lit(name, dtype=pl.String).alias(SOURCE_FILE), pl.col(SOURCE_LINE).cast(pl.Int64)
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def scan_files(
    paths: list[Path], names: list[str] | None = None, blocks: BlockFolder | None = None
) -> pl.LazyFrame:
    """Lazy scan of CSV / Parquet / JSONL files, concatenated in order, with row_id, source_file, source_line.

    `names` (same length as paths) is what `source_file` records; the file name by default. With
    `blocks` (the bounded path) CSV / TSV / JSONL files are read in blocks into its folder
    (blockread.py), the same frame without mapping the file; the scan reads that folder, so it is
    collected before the folder is closed.
    """
    import polars as pl

    if not paths:
        raise StageInputError("no data files given; add at least one path to 'files'")
    names = names or [Path(p).name for p in paths]
    frames = [_scan_one(Path(p), n, blocks) for p, n in zip(paths, names, strict=True)]
    lf = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    return lf.with_row_index(ROW_ID).with_columns(pl.col(ROW_ID).cast(pl.Int64))


def target_expr(label_column: str, label_mapping: dict[str, str]) -> pl.Expr:
    """The mapped label as a string; null where the label is null or the mapping does not cover it."""
    import polars as pl

    raw = pl.col(label_column).cast(pl.String)
    if not label_mapping:
        return raw.alias(TARGET)
    keys, values = list(label_mapping), [str(v) for v in label_mapping.values()]
    return raw.replace_strict(keys, values, default=None, return_dtype=pl.String).alias(TARGET)


def source_target_expr(source_inputs: dict[str, Any]) -> pl.Expr:
    """The source's target: the mapped label, or for a label-list column (label_format) the row's
    canonical label set (engine/data/labelsets.py)."""
    from claimcheck.engine.data import labelsets

    label = str(source_inputs.get("label_column", ""))
    if labelsets.is_multi_label(source_inputs):
        return labelsets.target_expr(
            label, str(source_inputs["label_format"]), str(source_inputs.get("label_delimiter") or ""), TARGET
        )
    return target_expr(label, dict(source_inputs.get("label_mapping") or {}))


def filter_expr(where: str, reason: str, schema: Any) -> pl.Expr:
    """A recorded filter (`where` = rows to KEEP) as a Polars expression over the source's own columns
    (`schema`: the scanned frame's); the language and its refusals are engine/data/filters.py's."""
    from claimcheck.engine.data import filters

    columns = {c: t for c, t in schema.items() if c not in (TARGET, FAMILY)}
    try:
        return filters.compile_filter(where, columns)
    except filters.FilterError as exc:
        raise filters.filter_error(where, reason, exc) from None


# Columns that must hold plain values (a label, an id, a time), never lists or objects. With
# `text_columns` given, every column but those must be plain: only a text column may be nested (chat
# messages); the audits profile every other column of the file.
SCALAR_FIELDS = ("label_column", "id_column", "entity_columns", "time_column")


def require_columns(
    lf: pl.LazyFrame, wanted: dict[str, list[str]], text_columns: list[str] | None = None
) -> None:
    """Raise a clear error naming the input field whose column is not in the data."""
    schema = lf.collect_schema()
    have = set(schema.names())
    for field, cols in wanted.items():
        missing = [c for c in cols if c and c not in have]
        if missing:
            raise StageInputError(
                f"source input '{field}' names column(s) {missing} not in the data; "
                f"columns are: {', '.join(sorted(have - set(ENGINE_COLUMNS)))}"
            )
        if field in SCALAR_FIELDS:
            nested = [c for c in cols if c and schema[c].is_nested()]
            if nested:
                raise StageInputError(
                    f"source input '{field}' names column(s) {nested} that hold nested values "
                    f"({schema[nested[0]]}), not plain values; flatten them or pick another column"
                )
    if text_columns is not None:
        nested = [
            c for c, t in schema.items() if t.is_nested() and c not in text_columns and c != SOURCE_FILE
        ]
        if nested:
            raise StageInputError(
                f"the data has column(s) {nested[:5]} holding nested values (lists or objects); only a "
                "text column (text_columns) may; flatten them, or drop them from the file"
            )


def scan_source(
    source_inputs: dict[str, Any], ctx: StageContext, blocks: BlockFolder | None = None
) -> pl.LazyFrame:
    """The recorded files, scanned, before any filter (`blocks`: scan_files)."""
    files = list(source_inputs.get("files") or [])
    return scan_files([ctx.resolve(f) for f in files], names=files, blocks=blocks)


def apply_filters(lf: pl.LazyFrame, filters: list[dict[str, Any]]) -> pl.LazyFrame:
    if not filters:
        return lf
    schema = lf.collect_schema()
    for f in filters:
        where, reason = str(f.get("where", "")), str(f.get("reason", ""))
        lf = lf.filter(filter_expr(where, reason, schema).fill_null(False))
    return lf


# A number whose magnitude passes this is "too large": its square (a variance, a scaler, a dot
# product) overflows float64 (max 1.8e308) once a few hundred million of them are summed.
TOO_LARGE = 1e150
NON_FINITE_REASON = "NaN, inf or a number over 1e150 in a numeric model input (non_finite = exclude_rows)"


def numeric_inputs(source_inputs: dict[str, Any], schema: Any) -> list[str]:
    """The model input columns of a floating-point type: the ones that can hold NaN, inf or 1e999."""
    return [c for c in model_inputs(source_inputs) if c in schema and schema[c].is_float()]


def non_finite_row(columns: list[str]) -> pl.Expr:
    """True where a row holds NaN, ±inf or |x| > TOO_LARGE in one of `columns` (False with none)."""
    import polars as pl

    if not columns:
        return pl.lit(False)
    return pl.any_horizontal(
        [(~pl.col(c).is_finite() | (pl.col(c).abs() > TOO_LARGE)).fill_null(False) for c in columns]
    )


def load_dataset(
    source_inputs: dict[str, Any], ctx: StageContext, blocks: BlockFolder | None = None
) -> pl.LazyFrame:
    """Scanned files after the recorded filters, with `target` added; rows without a target are left out.

    Every original column is kept and `row_id` is unchanged by filtering. With non_finite =
    "exclude_rows", rows with NaN, inf or overflowing numbers in a numeric input are left out (the
    source stage counts them under NON_FINITE_REASON). Rows whose label is null or not covered by the
    mapping are excluded (the source stage counts them under
    NO_TARGET_REASON), so later stages always see a target. `blocks`: scan_files.
    """
    return refined(scan_source(source_inputs, ctx, blocks), source_inputs)


def refined(lf: pl.LazyFrame, source_inputs: dict[str, Any]) -> pl.LazyFrame:
    """`load_dataset`'s rows from `lf`, a scan of the recorded files before any filter (`scan_source`'s
    frame, or the bounded path's spill of it, engine/audit/textstore.py)."""
    import polars as pl

    label = str(source_inputs.get("label_column", ""))
    if not label:
        raise StageInputError("source input 'label_column' is empty; name the column holding the label")
    require_columns(lf, {"label_column": [label]})
    lf = apply_filters(lf, list(source_inputs.get("filters") or []))
    if source_inputs.get("non_finite") == "exclude_rows":
        lf = lf.filter(~non_finite_row(numeric_inputs(source_inputs, lf.collect_schema())))
    lf = lf.with_columns(source_target_expr(source_inputs))
    return lf.filter(pl.col(TARGET).is_not_null())


def model_inputs(source_inputs: dict[str, Any]) -> list[str]:
    """Input columns a model may see: declared inputs minus unavailable, sensitive and 'no'-availability ones."""
    drop = set(source_inputs.get("unavailable_columns") or []) | set(
        source_inputs.get("sensitive_columns") or []
    )
    availability = dict(source_inputs.get("availability") or {})
    return [
        c for c in (source_inputs.get("input_columns") or []) if c not in drop and availability.get(c) != "no"
    ]


def text_inputs(source_inputs: dict[str, Any]) -> list[str]:
    """The free-text columns among the model inputs."""
    allowed = set(model_inputs(source_inputs))
    return [c for c in (source_inputs.get("text_columns") or []) if c in allowed]


# How a time column's values are read. "" (the default) infers the unit only from a real date or
# datetime column (or ISO text); a numeric column must say what its numbers are.
TIME_UNITS = ("date", "datetime", "year", "unix_seconds", "ordinal")
TimeUnit = Literal["", "date", "datetime", "year", "unix_seconds", "ordinal"]
NUMERIC_TIME_UNITS = ("year", "unix_seconds", "ordinal")


def resolve_time_unit(column: str, dtype: pl.DataType, unit: str) -> str:
    """The unit the time column is read in: the declared one checked against the column's type, or
    (none declared) 'date' / 'datetime' for date, datetime and text columns; a clear error otherwise."""
    import polars as pl

    numeric = dtype.is_numeric()
    dated = dtype == pl.Date or isinstance(dtype, pl.Datetime) or dtype == pl.String
    if not unit:
        if numeric:
            raise StageInputError(
                f"source input 'time_unit' is empty but the time column '{column}' holds numbers ({dtype}); "
                f"say what they are: set 'time_unit' to one of {', '.join(NUMERIC_TIME_UNITS)}"
            )
        if not dated:
            raise StageInputError(
                f"source input 'time_column' names '{column}' of type {dtype}, which is not a time; "
                "give a date, datetime, ISO text or numeric column (with 'time_unit')"
            )
        return "date" if dtype == pl.Date else "datetime"
    if unit in NUMERIC_TIME_UNITS and not numeric:
        raise StageInputError(
            f"source input 'time_unit' = '{unit}' needs a numeric time column, but '{column}' is {dtype}; "
            f"use 'date' or 'datetime' (or leave 'time_unit' empty) for it"
        )
    if unit in ("date", "datetime") and not dated:
        raise StageInputError(
            f"source input 'time_unit' = '{unit}' needs a date, datetime or ISO text column, but '{column}' "
            f"is {dtype}; for numbers use one of {', '.join(NUMERIC_TIME_UNITS)}"
        )
    return unit


def time_expr(column: str, dtype: pl.DataType, unit: str) -> pl.Expr:
    """The time column as a naive UTC Datetime(us) in its resolved unit (resolve_time_unit); values that
    cannot be read (unparseable text, a fractional year or ordinal) become null, counted by the source stage.

    An ordinal's value v is placed at v microseconds after the epoch: only its order is meant.
    """
    import polars as pl

    col = pl.col(column)
    if unit in NUMERIC_TIME_UNITS:
        whole = col.cast(pl.Float64).round(0) == col.cast(pl.Float64)
        as_int = pl.when(whole).then(col.cast(pl.Float64).cast(pl.Int64, strict=False))
        if unit == "year":  # years 1..9999, the range every reader can write
            year = pl.when(as_int.is_between(1, 9999)).then(as_int).cast(pl.Int32)
            return pl.datetime(year, 1, 1, time_unit="us")
        if unit == "ordinal":
            return pl.from_epoch(as_int, time_unit="us").cast(pl.Datetime("us"))
        return pl.from_epoch(col.cast(pl.Int64, strict=False), time_unit="s").cast(pl.Datetime("us"))
    if dtype == pl.String:
        # Normalise a trailing 'Z' so offset and 'Z' forms parse alike; mixed offsets convert to UTC.
        text = col.str.strip_chars().str.replace(r"Z$", "+00:00")
        with_tz = text.str.to_datetime(
            format="%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC"
        ).dt.replace_time_zone(None)
        no_tz = text.str.to_datetime(strict=False, time_unit="us")
        date_only = text.str.to_date(format="%Y-%m-%d", strict=False).cast(pl.Datetime("us"))
        return pl.coalesce(with_tz, no_tz, date_only)
    if isinstance(dtype, pl.Datetime):
        out = col
        if dtype.time_zone:
            out = out.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        return out.cast(pl.Datetime("us"))
    if dtype == pl.Date:
        return col.cast(pl.Datetime("us"))
    return pl.lit(None, dtype=pl.Datetime("us"))


def format_time(value: dt.datetime | int, unit: str) -> str:
    """A time (a datetime, or epoch microseconds) written in the column's unit: 1948, 2024-06-01, 17."""
    us = value if isinstance(value, int) else int((value - _EPOCH) / dt.timedelta(microseconds=1))
    if unit == "ordinal":
        return str(us)
    t = _EPOCH + dt.timedelta(microseconds=us)
    if unit == "year":
        return f"{t.year:04d}"
    if unit == "date":
        return t.date().isoformat()
    return t.isoformat()


_EPOCH = dt.datetime(1970, 1, 1)


def source_time(source_inputs: dict[str, Any], schema: Any) -> tuple[str, str]:
    """(time column, resolved unit) of a recorded source, or ("", "") when it declares none."""
    col = str(source_inputs.get("time_column") or "")
    if not col or col not in schema:
        return "", ""
    return col, resolve_time_unit(col, schema[col], str(source_inputs.get("time_unit") or ""))


def verify_pinned(path: Path, recorded_sha256: str, field: str, what: str, stage: str) -> Path:
    """A file a stage saved and pinned by sha256 in its record: present and unchanged, or a clear error."""
    if not path.is_file():
        raise EvidenceError(path, "(file)", f"the {what} file is missing", f"re-run the {stage} stage")
    digest = sha256_file(path)
    if digest != recorded_sha256:
        raise EvidenceError(
            path,
            field,
            f"file sha256 {digest[:12]}… differs from the recorded {str(recorded_sha256)[:12]}…",
            f"the file was changed after the {stage} stage ran; re-run the {stage} stage",
        )
    return path


def families_path(ctx: StageContext) -> Path:
    return ctx.data_dir / FAMILIES_FILE


def families(source_record: StageRecord, ctx: StageContext) -> pl.DataFrame:
    """row_id → family_id as saved by the source stage; the file's sha256 is verified against the record."""
    import polars as pl

    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    fam = parse(source_record.check("source.entity_families"), shapes.EntityFamilies)
    if fam is None:
        raise EvidenceError(
            "source record",
            "checks.source.entity_families",
            "has no families file",
            "re-run the source stage",
        )
    path = ctx.session_dir / fam.families_path
    verify_pinned(path, fam.families_sha256, "families_sha256", "entity-families", "source")
    return pl.read_parquet(path).select(ROW_ID, FAMILY)
