"""Record boundaries, types, missingness, time range and class coverage of the source data."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from threading import Event
from typing import Any

import polars as pl

from claimcheck.engine.data.rows import SOURCE_FILE, SOURCE_LINE, TARGET, file_kind, format_time, time_expr
from claimcheck.engine.pipeline.context import StageInputError

MAX_LOCATIONS = 20
STOP_EVERY = 4096  # lines between two looks at malformed_records' `stop`


def malformed_records(path: Path, name: str, stop: Event | None = None) -> dict[str, Any]:
    """Records whose field count differs from the header, and lines that are not valid UTF-8 (CSV / JSONL).

    Polars reads such records (ragged ones truncated or padded with nulls, bad bytes replaced); this
    scan says which ones, by file and physical line, so nothing is silently altered. `stop` (a scan
    running beside the read): once it is set the scan ends within a few thousand lines, its counts
    partial, for a caller that discards them.
    """
    kind = file_kind(path)
    bad_utf8: list[int] = []
    if kind == "parquet":
        return {"file": name, "records": -1, "malformed": 0, "bad_utf8_lines": 0, "locations": []}

    def lines():
        with open(path, "rb") as fh:
            for no, raw in enumerate(fh, start=1):
                if stop is not None and no % STOP_EVERY == 0 and stop.is_set():
                    return
                if b"\0" in raw:
                    raise StageInputError(
                        f"data file {name}: line {no} holds a NUL byte — a binary file, UTF-16 text or a "
                        f"compressed file, not a UTF-8 {path.suffix.lower()} file; export it as UTF-8 text"
                    )
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError:
                    bad_utf8.append(no)
                    yield raw.decode("utf-8", errors="replace")

    locations: list[dict[str, Any]] = []
    malformed = 0
    records = 0
    if kind == "csv":
        # Polars reads fields of any size; so does this scan (the csv module's default limit is 128 KiB).
        csv.field_size_limit(2**31 - 1)
        reader = csv.reader(lines(), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
        try:
            header = next(reader, None)
            width = len(header or [])
            start = reader.line_num + 1
            for row in reader:
                if row:
                    records += 1
                    if len(row) != width:
                        malformed += 1
                        if len(locations) < MAX_LOCATIONS:
                            locations.append(
                                {
                                    "line": start,
                                    "record": records,
                                    "problem": f"{len(row)} fields, header has {width}",
                                }
                            )
                start = reader.line_num + 1
        except csv.Error as exc:
            raise StageInputError(
                f"data file {name}: line {reader.line_num} cannot be read as CSV ({exc}); "
                "check that it is a text CSV file"
            ) from None
    else:
        for no, text in enumerate(lines(), start=1):
            if not text.strip():
                continue
            records += 1
            try:
                ok = isinstance(json.loads(text), dict)
            except ValueError:
                ok = False
            if not ok:
                malformed += 1
                if len(locations) < MAX_LOCATIONS:
                    locations.append({"line": no, "record": records, "problem": "not a JSON object"})
    for no in bad_utf8[:MAX_LOCATIONS]:
        locations.append(
            {"line": no, "record": 0, "problem": "bytes that are not UTF-8 (replaced by U+FFFD)"}
        )
    return {
        "file": name,
        "records": records,
        "malformed": malformed,
        "bad_utf8_lines": len(bad_utf8),
        "locations": locations,
    }


def schema_of(lf_schema: pl.Schema) -> dict[str, str]:
    return {c: str(t) for c, t in lf_schema.items() if c not in ("row_id", SOURCE_FILE, SOURCE_LINE)}


Rows = pl.DataFrame | pl.LazyFrame


def _streamed(frame: pl.LazyFrame) -> pl.DataFrame:
    """A small aggregate of a scan, collected by Polars' streaming engine: its memory follows the
    groups, not the rows."""
    return frame.collect(engine="streaming")


def missingness(rows: Rows, columns: list[str]) -> dict[str, Any]:
    """Null share per column overall and per target class (null target rows as their own class), and
    the rows with a null in any of `columns` (count and share). `rows`: a frame or a scan, aggregated
    in one streaming pass (null counts) and one group-by of the classes."""
    lf = rows.lazy()
    total = "_" * (1 + max((len(c) for c in columns), default=0))  # a name no column has
    anyn = total + "_"
    counts = _streamed(
        lf.select(
            pl.len().alias(total),
            (pl.any_horizontal(pl.col(c).is_null() for c in columns) if columns else pl.lit(False))
            .sum()
            .alias(anyn),
            *[pl.col(c).null_count().alias(c) for c in columns],
        )
    ).row(0, named=True)
    n = int(counts[total])
    overall = {c: round(int(counts[c]) / n, 6) if n else 0.0 for c in columns}
    any_null = int(counts[anyn]) if n and columns else 0
    per_class: dict[str, dict[str, float]] = {}
    if n and TARGET in lf.collect_schema():
        g = _streamed(
            lf.select(
                pl.col(TARGET).fill_null("<no target>"), *[pl.col(c).is_null().alias(c) for c in columns]
            )
            .group_by(TARGET)
            .agg([pl.col(c).mean().round(6) for c in columns])
        ).sort(TARGET)
        for row in g.iter_rows(named=True):
            cls = str(row.pop(TARGET))
            per_class[cls] = {c: float(v) for c, v in row.items() if v}
    return {
        "overall": overall,
        "per_class": per_class,
        "rows_with_any_null": any_null,
        "rows_with_any_null_share": round(any_null / n, 6) if n else 0.0,
    }


def time_profile(rows: Rows, column: str, unit: str, as_of: dt.datetime | None) -> dict[str, Any]:
    """Min / max in the column's unit, rows per month (per year for years; none for ordinals), empty
    periods inside the range, unparseable and future timestamps (none for ordinals). `rows`: a frame
    or a scan, aggregated by streaming passes (the counts and bounds, then the rows per period)."""
    lf = rows.lazy()
    t = time_expr(column, lf.collect_schema()[column], unit).alias("t")
    parsed = lf.select(t, pl.col(column).is_not_null().alias("present"))
    future = (pl.col("t") > as_of).sum() if as_of is not None and unit != "ordinal" else pl.lit(0)
    agg = _streamed(
        parsed.select(
            (pl.col("present") & pl.col("t").is_null()).sum().alias("unparseable"),
            (~pl.col("present")).sum().alias("missing"),
            pl.col("t").count().alias("parsed"),
            pl.col("t").min().alias("lo"),
            pl.col("t").max().alias("hi"),
            future.alias("future"),
        )
    ).row(0, named=True)
    out: dict[str, Any] = {
        "unit": unit,
        "unparseable": int(agg["unparseable"]),
        "missing": int(agg["missing"]),
        "parsed": int(agg["parsed"]),
    }
    if not out["parsed"]:
        return out
    lo, hi = agg["lo"], agg["hi"]
    out.update({"min": format_time(lo, unit), "max": format_time(hi, unit)})
    if unit == "ordinal":
        out["distinct_values"] = int(
            _streamed(parsed.select(pl.col("t").drop_nulls().n_unique().alias("k"))).item()
        )
        return out
    yearly = unit == "year"
    periods = _streamed(
        parsed.select(pl.col("t").drop_nulls().dt.strftime("%Y" if yearly else "%Y-%m"))
        .group_by("t")
        .agg(pl.len().alias("count"))
    ).sort("t")
    per_period = dict(
        zip(periods.get_column("t").to_list(), periods.get_column("count").to_list(), strict=True)
    )
    gaps, y, m = [], lo.year, 1 if yearly else lo.month
    while (y, m) <= (hi.year, 1 if yearly else hi.month):
        key = f"{y:04d}" if yearly else f"{y:04d}-{m:02d}"
        if key not in per_period:
            gaps.append(key)
        y, m = (y + 1, 1) if yearly or m == 12 else (y, m + 1)
    counts = {k: int(v) for k, v in per_period.items()}
    out.update(
        {"rows_per_year": counts, "empty_years": gaps}
        if yearly
        else {"rows_per_month": counts, "empty_months": gaps}
    )
    if as_of is not None:
        out["future"] = int(agg["future"])
    return out


def class_coverage(
    rows: Rows, label_column: str, mapping: dict[str, str], rare_share: float, rare_count: int
) -> dict[str, Any]:
    """Counts per raw label and per mapped target; null labels; unmapped raw values; unused mapping keys;
    rare classes. `rows`: a frame or a scan, aggregated by two streaming group-bys (raw labels, targets)."""
    raw = rows.lazy().select(pl.col(label_column).cast(pl.String).alias("raw"), pl.col(TARGET))
    raw_counts = _streamed(raw.group_by("raw").agg(pl.len().alias("len"))).sort("raw", nulls_last=True)
    n = int(raw_counts.get_column("len").sum()) if raw_counts.height else 0
    per_raw = {str(r): int(c) for r, c in raw_counts.iter_rows() if r is not None}
    null_labels = sum(int(c) for r, c in raw_counts.iter_rows() if r is None)
    unmapped = {r: c for r, c in per_raw.items() if mapping and r not in mapping}
    unused = [k for k in mapping if k not in per_raw]
    tc = _streamed(raw.drop_nulls(TARGET).group_by(TARGET).agg(pl.len().alias("len"))).sort(TARGET)
    per_target = {str(t): int(c) for t, c in tc.iter_rows()}
    k = max(len(per_target), 1)
    limit = max(rare_count, int(rare_share / k * n))
    rare = sorted(t for t, c in per_target.items() if c < limit)
    # Every mapped value: which raw values route to each target (not just the majority).
    routes: dict[str, list[str]] = {}
    for r in per_raw:
        t = mapping.get(r, r) if mapping else r
        if not mapping or r in mapping:
            routes.setdefault(str(t), []).append(r)
    return {
        "rows": n,
        "per_raw_label": per_raw,
        "per_target": per_target,
        "null_labels": null_labels,
        "unmapped_raw_values": unmapped,
        "unused_mapping_keys": unused,
        "rare_classes": rare,
        "rare_limit_rows": limit,
        "routes": routes,
    }
