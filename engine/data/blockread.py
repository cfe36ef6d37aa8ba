"""The bounded path's read of a CSV / TSV file: blocks of at most BLOCK_BYTES read with ordinary file
reads, never a mapping of the whole file (mapped pages count in the process's memory).

Polars' own reader (`pl.scan_csv`, engine/data/rows.py) maps the file; the bounded path
(engine/audit/budget.py) reads it here instead, in two passes over the file:

1. Each block, cut at a record boundary (a newline outside quotes: the count of quote characters
   before it is even, RFC 4180, as Polars' own line splitter counts them) and preceded by the header
   record, is parsed by Polars with the reader's settings, its schema inferred over the whole block,
   and written to a Parquet part file in a temporary folder.
2. The blocks' schemas are merged into the schema Polars infers over the whole file
   (`infer_schema_length=None`; `merge_dtype`); a part whose inferred types differ on a column that
   holds values is parsed again from its bytes with the merged schema, one whose differing columns
   are all null is cast.

The parts, scanned together in block order, are the frame Polars' reader gives (tests/test_blockread.py).
Where a block infers a type outside Int64, Float64, Boolean and String (an integer past Int64 is
Int128) and the blocks disagree, Polars' rule for mixing it is not a merge of block types: the file's
schema then comes from Polars' inference over the whole file (the only case that maps it).
JSONL files and Parquet files are not read here: JSONL by Polars' reader, Parquet lazily by row group.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.pipeline.context import StageInputError

# Bytes of file per block: the read holds one block, its parsed frame and the part being written.
BLOCK_BYTES = 16 << 20
NEWLINE, QUOTE = 10, 34
# The types whose mixing across blocks follows `merge_dtype`; any other one mixed falls back to Polars'
# whole-file inference (module docstring).
MERGEABLE = (pl.Int64, pl.Float64, pl.Boolean, pl.String)


def record_end(buf: Any, start: int = 0) -> int:
    """Offset just past the last record boundary in `buf` at or after `start` (a newline with an even
    count of quote characters before it in `buf`); 0 when there is none. `buf` starts at a boundary."""
    last = buf.rfind(b"\n", start)
    if last < 0:
        return 0
    if buf.count(b'"', 0, last) % 2 == 0:  # the common case: the last newline ends a record
        return last + 1
    arr = np.frombuffer(buf, dtype=np.uint8)
    nl = np.flatnonzero(arr[start:] == NEWLINE) + start
    quotes = np.flatnonzero(arr == QUOTE)
    even = nl[np.searchsorted(quotes, nl) % 2 == 0]
    return int(even[-1]) + 1 if even.size else 0


def blocks(path: Path, block_bytes: int = BLOCK_BYTES) -> Iterator[tuple[int, memoryview]]:
    """(file offset, bytes) of consecutive blocks of whole records, each about `block_bytes` (a longer
    one where one record is longer); the last block ends at the end of the file. A block's view is
    valid until the next one is asked for."""
    offset = 0
    carry = b""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(block_bytes)
            if not chunk:
                if carry:
                    yield offset, memoryview(carry)
                return
            buf = carry + chunk if carry else chunk
            del chunk
            end = record_end(buf, len(carry))
            if end == 0:
                carry = buf
                continue
            yield offset, memoryview(buf)[:end]
            offset += end
            carry = buf[end:]
            del buf


def merge_dtype(dtypes: list[pl.DataType]) -> pl.DataType | None:
    """The type Polars infers over the whole file for a column whose blocks (those where it holds a
    value) inferred `dtypes`; String when it holds none; None when Polars' rule is not a merge of them."""
    kinds = set(dtypes)
    if not kinds:
        return pl.String()
    if len(kinds) == 1:
        return dtypes[0]
    if not kinds <= set(MERGEABLE):
        return None
    if kinds <= {pl.Int64, pl.Float64}:
        return pl.Float64()
    return pl.String()


@dataclass
class _Part:
    path: Path
    offset: int
    size: int
    schema: pl.Schema
    valued: frozenset[str]  # the columns holding at least one value in this block


@dataclass
class BlockFolder:
    """The temporary folder of the parts of the files read in blocks; `close()` removes it."""

    folder: tempfile.TemporaryDirectory[str] = field(
        default_factory=lambda: tempfile.TemporaryDirectory(prefix="claimcheck-blocks-")
    )
    block_bytes: int = 0  # 0: BLOCK_BYTES
    files: int = 0

    def close(self) -> None:
        self.folder.cleanup()

    def __enter__(self) -> BlockFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def scan_csv(self, path: Path, name: str, separator: str) -> pl.LazyFrame:
        """The file's records as Polars' `scan_csv(infer_schema_length=None, truncate_ragged_lines=True,
        encoding="utf8-lossy")` reads them, as a scan of Parquet parts written block by block."""
        self.files += 1
        where = Path(self.folder.name) / f"f{self.files}"
        where.mkdir()
        try:
            parts, header = self._first_pass(path, where, separator)
            schema = _merged(parts, path, separator)
            for part in parts:
                _conform(part, schema, path, header, separator)
        except pl.exceptions.PolarsError as exc:
            raise StageInputError(f"data file {name} cannot be read: {_first_line(exc)}") from None
        except OSError as exc:
            raise StageInputError(
                f"the bounded-memory read could not write its temporary file in {where}: "
                f"{exc.strerror or exc}; free space there or set TMPDIR to a folder with room"
            ) from exc
        return pl.scan_parquet([p.path for p in parts])

    def _first_pass(self, path: Path, where: Path, separator: str) -> tuple[list[_Part], bytes]:
        parts: list[_Part] = []
        header = b""
        for offset, view in blocks(path, self.block_bytes or BLOCK_BYTES):
            if not parts:
                header = bytes(view[: _header_end(view.obj)])
            data = b"".join((header if parts else b"", view))
            size = len(view)
            del view
            frame = _parse(data, separator, None)
            del data
            part = where / f"{len(parts):06d}.parquet"
            frame.write_parquet(part, compression="lz4", statistics=False)
            valued = frozenset(
                c for c, s in zip(frame.columns, frame.null_count().row(0), strict=True) if s < frame.height
            )
            parts.append(_Part(part, offset, size, frame.schema, valued))
            del frame
        return parts, header


def _header_end(data: bytes) -> int:
    """Bytes of `data` (a file's first block) up to and including its first record boundary (the
    header record)."""
    at = 0
    while True:
        nl = data.find(b"\n", at)
        if nl < 0:
            return len(data)
        if data.count(b'"', 0, nl) % 2 == 0:
            return nl + 1
        at = nl + 1


def _parse(data: bytes, separator: str, schema: pl.Schema | None) -> pl.DataFrame:
    """A block (with its header record) parsed with `schema`, or with the schema inferred over all of
    it (inferring first, then parsing with the result, is about twice as fast as read_csv inferring)."""
    settings: dict[str, Any] = {
        "separator": separator,
        "truncate_ragged_lines": True,
        "encoding": "utf8-lossy",
    }
    if schema is None:
        schema = pl.scan_csv(data, infer_schema_length=None, **settings).collect_schema()
    return pl.read_csv(data, schema=schema, **settings)


def _merged(parts: list[_Part], path: Path, separator: str) -> pl.Schema:
    """The whole file's schema from its blocks' (`merge_dtype`; Polars' whole-file inference where it
    has no merge)."""
    names = list(parts[0].schema.names())
    out: dict[str, pl.DataType] = {}
    for name in names:
        dtype = merge_dtype([p.schema[name] for p in parts if name in p.valued])
        if dtype is None:
            return pl.scan_csv(
                path,
                separator=separator,
                infer_schema_length=None,
                truncate_ragged_lines=True,
                encoding="utf8-lossy",
                glob=False,
            ).collect_schema()
        out[name] = dtype
    return pl.Schema(out)


def _conform(part: _Part, schema: pl.Schema, path: Path, header: bytes, separator: str) -> None:
    """Rewrite the part with the file's schema: cast where the differing columns hold no value, parse
    the block's bytes again where they do."""
    differ = [c for c in schema.names() if part.schema[c] != schema[c]]
    if not differ:
        return
    if any(c in part.valued for c in differ):
        with open(path, "rb") as fh:
            fh.seek(part.offset)
            data = fh.read(part.size)
        frame = _parse(data if part.offset == 0 else header + data, separator, schema)
    else:
        frame = pl.read_parquet(part.path).with_columns(pl.col(c).cast(schema[c]) for c in differ)
    frame.write_parquet(part.path, compression="lz4", statistics=False)
    part.schema = frame.schema


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
