"""The bounded path's read of a CSV / TSV / JSONL file: blocks of about BLOCK_BYTES read with ordinary
file reads, never a mapping of the whole file (mapped pages count in the process's memory).

Polars' own reader (`pl.scan_csv`, `pl.scan_ndjson`, engine/data/rows.py) maps the file; the bounded path
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
JSONL files are read the same way, cut at every newline (a JSON text holds none unescaped); their
blocks must all have the same keys in the same order, and each key one type wherever it is not null
throughout a block (Polars orders the keys of blocks with other keys in a way no merge of the
blocks' schemas reproduces). Polars' reader maps the file only where the blocks cannot give its
frame: for the schema, where CSV blocks that disagree include a type outside Int64, Float64, Boolean
and String (an integer past Int64 is Int128: Polars' rule for mixing it is no merge of block types)
or JSONL blocks differ otherwise; for the whole read, where a block does not parse (a stray quote outside
quotes can put a cut where Polars' own reader does not: it then reads or refuses the file as on the
in-memory path). Parquet files are not read here: they are read lazily by row group.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.pipeline.context import StageInputError

GLOB_CHARS = frozenset("*?[]{}")

# Bytes of file per block: the read holds one block, its parsed frame and the part being written.
BLOCK_BYTES = 16 << 20
# Blocks parsed and written at once, each on its own thread (at most the usable cores, engine/threads.py;
# not lowered under load, so that the read's memory does not move with it): the read holds that many
# blocks with their frames.
BLOCKS_IN_FLIGHT = 2
# Rows per row group of a part: the scan of the parts decodes a group at a time.
PART_ROWS = 8_192
NEWLINE, QUOTE = 10, 34
# The types whose mixing across blocks follows `merge_dtype`; any other one mixed falls back to Polars'
# whole-file inference (module docstring).
MERGEABLE = (pl.Int64, pl.Float64, pl.Boolean, pl.String)


def record_end(buf: Any, start: int = 0, quoted: bool = True) -> int:
    """Offset just past the last record boundary in `buf` at or after `start` (CSV, `quoted`: a newline
    with an even count of quote characters before it in `buf`; JSONL: a newline); 0 when there is
    none. `buf` starts at a boundary."""
    last = buf.rfind(b"\n", start)
    if last < 0:
        return 0
    if not quoted or buf.count(b'"', 0, last) % 2 == 0:  # the common case: the last newline ends a record
        return last + 1
    arr = np.frombuffer(buf, dtype=np.uint8)
    nl = np.flatnonzero(arr[start:] == NEWLINE) + start
    quotes = np.flatnonzero(arr == QUOTE)
    even = nl[np.searchsorted(quotes, nl) % 2 == 0]
    return int(even[-1]) + 1 if even.size else 0


def blocks(
    path: Path, block_bytes: int = BLOCK_BYTES, quoted: bool = True
) -> Iterator[tuple[int, memoryview]]:
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
            end = record_end(buf, len(carry), quoted)
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


@dataclass(frozen=True)
class _Format:
    """How a file kind is cut, inferred, parsed and merged."""

    kind: str  # "csv" or "jsonl"
    separator: str = ","

    @property
    def csv(self) -> bool:
        return self.kind == "csv"

    def settings(self) -> dict[str, Any]:
        if self.csv:
            return {"separator": self.separator, "truncate_ragged_lines": True, "encoding": "utf8-lossy"}
        return {}

    def parse(self, data: bytes, schema: pl.Schema | None) -> pl.DataFrame:
        """A block (CSV: with its header record) parsed with `schema`, or with the schema inferred over
        all of it (inferring first, then parsing with the result, is about twice as fast as read_csv
        inferring)."""
        scan = pl.scan_csv if self.csv else pl.scan_ndjson
        if schema is None:
            schema = scan(data, infer_schema_length=None, **self.settings()).collect_schema()
        if self.csv:
            return pl.read_csv(data, schema=schema, **self.settings())
        return pl.read_ndjson(data, schema=schema)

    def whole_file_scan(self, path: Path) -> pl.LazyFrame:
        """Polars' own scan of the whole file (it maps the file)."""
        if self.csv:
            return pl.scan_csv(path, infer_schema_length=None, glob=False, **self.settings())
        src: Any = path.read_bytes() if GLOB_CHARS & set(path.name) else path
        return pl.scan_ndjson(src, infer_schema_length=None)

    def whole_file_schema(self, path: Path) -> pl.Schema:
        """Polars' inference over the whole file: where the blocks' schemas cannot be merged."""
        return self.whole_file_scan(path).collect_schema()

    def merged(self, parts: list[_Part], path: Path) -> pl.Schema:
        """The whole file's schema from its blocks'. CSV: per column, `merge_dtype`. JSONL: where every
        block has the same keys in the same order, per key the one type of the blocks where it is not
        Null (null throughout a block); Polars orders the keys of blocks with other keys in a way no
        merge of the blocks' schemas reproduces. Otherwise Polars' whole-file inference."""
        names = list(parts[0].schema.names())
        if not self.csv and any(list(p.schema.names()) != names for p in parts):
            return self.whole_file_schema(path)
        out: dict[str, pl.DataType] = {}
        for name in names:
            if self.csv:
                dtype = merge_dtype([p.schema[name] for p in parts if name in p.valued])
            else:
                kinds = {p.schema[name] for p in parts} - {pl.Null}
                dtype = (kinds.pop() if kinds else pl.Null()) if len(kinds) <= 1 else None
            if dtype is None:
                return self.whole_file_schema(path)
            out[name] = dtype
        return pl.Schema(out)


def folder_for(bounded: bool) -> contextlib.AbstractContextManager[BlockFolder | None]:
    """The folder a read puts its blocks in: a BlockFolder on the bounded path, None (Polars' own
    reader) otherwise."""
    return BlockFolder() if bounded else contextlib.nullcontext()


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
        return self._scan(path, name, _Format("csv", separator))

    def scan_ndjson(self, path: Path, name: str) -> pl.LazyFrame:
        """The file's records as Polars' `scan_ndjson(infer_schema_length=None)` reads them, as a scan
        of Parquet parts written block by block."""
        return self._scan(path, name, _Format("jsonl"))

    def _scan(self, path: Path, name: str, fmt: _Format) -> pl.LazyFrame:
        self.files += 1
        where = Path(self.folder.name) / f"f{self.files}"
        where.mkdir()
        try:
            parts, header = self._first_pass(path, where, fmt)
            if not parts:  # a JSONL file of blank lines: Polars' reader says what it says of it
                return fmt.whole_file_scan(path)
            schema = fmt.merged(parts, path)
            for part in parts:
                _conform(part, schema, path, header, fmt)
        except pl.exceptions.PolarsError:
            # A block Polars cannot parse (a stray quote outside a quoted field can make a cut that
            # Polars' own reader does not): the file is read by that reader, which reads or refuses
            # it as on the in-memory path.
            return fmt.whole_file_scan(path)
        except OSError as exc:
            raise StageInputError(
                f"the bounded-memory read could not write its temporary file in {where}: "
                f"{exc.strerror or exc}; free space there or set TMPDIR to a folder with room"
            ) from exc
        return pl.scan_parquet([p.path for p in parts])

    def _first_pass(self, path: Path, where: Path, fmt: _Format) -> tuple[list[_Part], bytes]:
        """Every block parsed with its own inferred schema and written to its part: two blocks in
        flight on two threads (engine/threads.py `ordered_map`; Polars' parse and write release the
        GIL), the file read in this one; the parts in block order."""
        from claimcheck.engine.threads import ordered_map, usable_cores

        header = [b""]

        def numbered() -> Iterator[tuple[int, int, int, bytes]]:
            for i, (offset, view) in enumerate(blocks(path, self.block_bytes or BLOCK_BYTES, fmt.csv)):
                if i == 0 and fmt.csv:
                    header[0] = bytes(view[: _header_end(view.obj)])
                # A copy: the view is valid until the next block is read, which happens while this
                # one is parsed.
                data = b"".join((header[0] if i else b"", view))
                yield i, offset, len(view), data

        def part_of(item: tuple[int, int, int, bytes]) -> _Part | None:
            i, offset, size, data = item
            return _parsed_part(data, where / f"{i:06d}.parquet", (offset, size), fmt)

        parts = [
            p
            for p in ordered_map(part_of, numbered(), min(BLOCKS_IN_FLIGHT, usable_cores()))
            if p is not None
        ]
        return parts, header[0]


def _parsed_part(data: bytes, part: Path, at: tuple[int, int], fmt: _Format) -> _Part | None:
    """One block (`at`: its offset and size in the file) parsed and written to `part`; None for a
    JSONL block of blank lines only (no records: Polars skips them)."""
    if not fmt.csv and not data.strip():
        return None
    frame = fmt.parse(data, None)
    del data
    _write(frame, part)
    valued = frozenset(
        c for c, s in zip(frame.columns, frame.null_count().row(0), strict=True) if s < frame.height
    )
    return _Part(part, at[0], at[1], frame.schema, valued)


def _write(frame: pl.DataFrame, part: Path) -> None:
    # Uncompressed: writing the part is the read's largest cost after parsing; lz4 took 4x as long.
    frame.write_parquet(part, compression="uncompressed", statistics=False, row_group_size=PART_ROWS)


def _header_end(data: bytes) -> int:
    """Bytes of `data` (a CSV file's first block) up to and including its first record boundary (the
    header record)."""
    at = 0
    while True:
        nl = data.find(b"\n", at)
        if nl < 0:
            return len(data)
        if data.count(b'"', 0, nl) % 2 == 0:
            return nl + 1
        at = nl + 1


def _conform(part: _Part, schema: pl.Schema, path: Path, header: bytes, fmt: _Format) -> None:
    """Rewrite the part with the file's schema: cast where the differing columns hold no value,
    parse the block's bytes again otherwise."""
    if part.schema == schema:
        return
    differ = [c for c in schema.names() if c not in part.schema or part.schema[c] != schema[c]]
    if any(c not in part.schema or c in part.valued for c in differ):
        with open(path, "rb") as fh:
            fh.seek(part.offset)
            data = fh.read(part.size)
        frame = fmt.parse(data if part.offset == 0 else header + data, schema)
    else:
        frame = pl.read_parquet(part.path).with_columns(pl.col(c).cast(schema[c]) for c in differ)
    _write(frame, part.path)
    part.schema = frame.schema
