"""Text columns left on disk: the bounded path's frame without its free text.

On the bounded path (engine/audit/budget.py) the source and split stages stream their rows into a
temporary Parquet file (the split stage, run right after the source stage in the same process, reads
the source's file where it is handed over: `hand_over`, `take_over`). The frame they then load keeps
every column but the declared text columns, which are replaced by a stand-in of the same name and
type holding "" where the text is present and null where it is missing: the null counts every check reads stay exact, and the text itself, most of
a corpus' bytes, stays in the file. The steps that read the text (row hashes, duplicate candidates,
near-duplicate texts, exact overlap across splits) ask a `TextStore` for it: a slice of rows at a time
in file order, or the rows of given positions, each a streaming scan of the file's needed columns. The
figures do not change (tests/test_audit_memory.py); docs/audit-scale.md says when this path is taken.
"""

from __future__ import annotations

import functools
import json
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import polars as pl

from claimcheck.engine.data.rows import ROW_ID
from claimcheck.engine.pipeline.context import StageInputError

T = TypeVar("T")

ROW_GROUP = 8_192  # rows per row group of the spill: a read of a few rows decodes one group per hit
SLICE_BYTES = 64 << 20  # decoded bytes of the file's row groups per slice handed to `by_slices`
ROWS_SLICE_BYTES = 16 << 20  # and per slice that `rows` reads its rows from


@dataclass(frozen=True)
class TextStore:
    """Columns of a frame's rows, read from the spill file on demand.

    `ids`: the frame's row ids, in frame order (ascending: every frame here keeps the file's order, a
    subset of its rows); position i of the frame is the file's row with id ids[i]."""

    path: Path
    ids: np.ndarray
    schema: pl.Schema
    # The temporary folder holding `path`; the store that made it removes it on close().
    folder: tempfile.TemporaryDirectory[str] | None = field(default=None, compare=False, repr=False)

    def restrict(self, ids: np.ndarray) -> TextStore:
        """The same file for a frame holding the rows `ids` (a subset, in file order)."""
        return TextStore(self.path, np.asarray(ids, dtype=np.int64), self.schema)

    def close(self) -> None:
        if self.folder is not None:
            _file_scan.cache_clear()
            self.folder.cleanup()

    def _scan(self, columns: list[str]) -> pl.LazyFrame:
        st = self.path.stat()
        scan = _file_scan(self.path, st.st_size, st.st_mtime_ns)
        return scan.select(ROW_ID, *[c for c in columns if c != ROW_ID])

    def by_slices(
        self,
        columns: list[str],
        fn: Callable[[pl.DataFrame], T],
        slice_bytes: int = SLICE_BYTES,
        workers: int = 1,
    ) -> list[T]:
        """fn over the frame's rows (`columns` of them) a slice of the file at a time, in frame order:
        whole row groups up to `slice_bytes` decoded (one group where a group is larger). With
        `workers` > 1 (for an fn that releases the GIL and holds no more than its slice), that many
        slices of `slice_bytes / workers` are read and handed to fn at once on worker threads
        (engine/threads.py `ordered_map`): the same bytes decoded at a time."""
        from claimcheck.engine.threads import ordered_map

        def one(at: tuple[int, int]) -> T | None:
            part = self._mine(self._scan(columns).slice(at[0], at[1]).collect())
            return fn(part.select(columns)) if part.height else None

        step = slice_bytes if workers < 2 else max(1, slice_bytes // workers)
        done = ordered_map(one, self.slices(step), max(1, workers))
        return [r for r in done if r is not None]

    def slices(self, slice_bytes: int = SLICE_BYTES) -> list[tuple[int, int]]:
        """(first row, rows) of each slice of the file: consecutive row groups up to `slice_bytes`."""
        return [(start, rows) for start, rows, _, _ in self._id_slices(slice_bytes)]

    def _id_slices(self, slice_bytes: int) -> list[tuple[int, int, int, int]]:
        """`slices`, each with the least and greatest row id its row groups hold (the file's
        statistics; the widest range where a group has none)."""
        st = self.path.stat()
        groups = _row_groups(self.path, st.st_size, st.st_mtime_ns)
        none = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)
        out: list[tuple[int, int, int, int]] = []
        start = rows = size = 0
        lo, hi = none
        for g_rows, g_bytes, g_lo, g_hi in groups:
            if rows and size + g_bytes > slice_bytes:
                out.append((start, rows, lo, hi))
                start, rows, size = start + rows, 0, 0
                lo, hi = none
            rows += g_rows
            size += g_bytes
            lo, hi = min(lo, g_lo), max(hi, g_hi)
        if rows:
            out.append((start, rows, lo, hi))
        return out

    def _mine(self, batch: pl.DataFrame) -> pl.DataFrame:
        """The batch's rows that belong to the frame."""
        bid = batch.get_column(ROW_ID).to_numpy()
        if not bid.size or not self.ids.size:
            return batch.clear()
        at = np.minimum(np.searchsorted(self.ids, bid), self.ids.size - 1)
        keep = self.ids[at] == bid
        return batch if keep.all() else batch.filter(pl.Series(keep))

    def rows(self, positions: np.ndarray, columns: list[str]) -> pl.DataFrame:
        """`columns` of the frame's rows at `positions` (any order, repeats allowed), in that order."""
        wanted = self.ids[np.asarray(positions, dtype=np.int64)]
        if not wanted.size:
            return pl.DataFrame(schema={c: self.schema[c] for c in columns})
        u = np.unique(wanted)
        keep = pl.col(ROW_ID).is_in(pl.Series(u).implode())
        # A slice of the file at a time, only the slices whose ids can hold wanted ones: a streaming
        # scan of the whole file holds several row groups per thread in flight (+170 MB for 28,000
        # rows of 1.3 KB conversations, against +35 MB).
        got = self._scan(columns).clear().collect()
        for off, n, lo, hi in self._id_slices(ROWS_SLICE_BYTES):
            at = int(np.searchsorted(u, lo))
            if at < u.size and u[at] <= hi:
                got.vstack(self._scan(columns).slice(off, n).filter(keep).collect(), in_place=True)
        order = np.searchsorted(got.get_column(ROW_ID).to_numpy(), wanted)
        if order.size == got.height and (order == np.arange(order.size)).all():
            return got.select(columns)  # the rows in file order, each once: no gathered copy
        return got.select(columns)[order]


@functools.lru_cache(maxsize=8)
def _file_scan(path: Path, size: int, mtime_ns: int) -> pl.LazyFrame:
    """One scan of the file at `path` (of that size and time) for every read of it: Polars keeps the
    footer it parsed at a scan's first collect, and a fresh scan parses it again, which grows with the
    file's row groups (a read of one 8,192-row slice of a 10M-row spill took 5.6 ms fresh against 1.8 ms
    on the kept scan; the bounded audit reads about 300 slices per million rows). Without Polars' result
    cache: no read's rows are kept for a later one."""
    return pl.scan_parquet(path, cache=False)


@functools.lru_cache(maxsize=8)
def _row_groups(path: Path, size: int, mtime_ns: int) -> tuple[tuple[int, int, int, int], ...]:
    """(rows, decoded bytes, least row id, greatest row id) of each row group of the file at `path`
    (of that size and time: a file written anew is read anew). Read once per file: each read of the
    footer leaves about 1.4 MB in pyarrow's memory pool (60 reads: +83 MB)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    col = meta.schema.names.index(ROW_ID)
    out = []
    for i in range(meta.num_row_groups):
        g = meta.row_group(i)
        stats = g.column(col).statistics
        if stats is None or not stats.has_min_max:
            lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        else:
            lo, hi = int(stats.min), int(stats.max)
        out.append((g.num_rows, g.total_byte_size, lo, hi))
    return tuple(out)


def stand_in(column: str) -> pl.Expr:
    """A text column's stand-in in the frame: "" where the text is present, null where it is missing."""
    return _stand_in_where(pl.col(column).is_null(), column)


def _stand_in_where(missing: pl.Expr, column: str) -> pl.Expr:
    """The stand-in named `column`, null where `missing` holds and "" elsewhere."""
    return pl.when(missing).then(pl.lit(None, pl.String)).otherwise(pl.lit("")).alias(column)


def spill(lf: pl.LazyFrame, text_columns: list[str]) -> tuple[pl.DataFrame, TextStore]:
    """`lf` streamed to a temporary Parquet file, and the frame read back with `text_columns` as
    stand-ins, with the store that reads the real columns. The caller closes the store."""
    folder = tempfile.TemporaryDirectory(prefix="claimcheck-spill-")
    path = Path(folder.name) / "frame.parquet"
    try:
        lf.sink_parquet(path, compression="lz4", row_group_size=ROW_GROUP, engine="streaming")
        scan = pl.scan_parquet(path)
        frame = read_back(scan, text_columns)
    except OSError as exc:
        folder.cleanup()
        raise StageInputError(
            f"the bounded-memory read could not write its temporary file in {folder.name}: "
            f"{exc.strerror or exc}; free space there or set TMPDIR to a folder with room"
        ) from exc
    except BaseException:
        folder.cleanup()
        raise
    ids = frame.get_column(ROW_ID).to_numpy().astype(np.int64)
    return frame, TextStore(path, ids, scan.collect_schema(), folder)


def read_back(scan: pl.LazyFrame, text_columns: list[str]) -> pl.DataFrame:
    """The spill file as a frame with `text_columns` as stand-ins, in one chunk per column: the
    streaming engine's many chunks would be copied, every column, by the first with_columns of a later
    step (and that copy kept beside the next ones). Read a column at a time, so that only one column
    is held twice while it is made one chunk (rechunking the whole frame held it all twice)."""
    columns = []
    for name in scan.collect_schema().names():
        if name not in text_columns:
            columns.append(scan.select(name).collect(engine="streaming").to_series().rechunk())
            continue
        # The stand-in is made from the null mask in memory: Polars (2.1, either engine) scanning several
        # row groups returned a column of `stand_in` alone (both branches literals) out of row order.
        missing = scan.select(pl.col(name).is_null()).collect(engine="streaming").to_series().rechunk()
        columns.append(pl.DataFrame({name: missing}).select(_stand_in_where(pl.col(name), name)).to_series())
    return pl.DataFrame(columns)


def restricted(store: TextStore | None, frame: pl.DataFrame) -> TextStore | None:
    """The store for `frame` (rows of the store's frame, in its order), or None without a store."""
    return None if store is None else store.restrict(frame.get_column(ROW_ID).to_numpy())


def columns_on_disk(source_inputs: dict, schema: pl.Schema, claim: dict) -> list[str]:
    """The text columns the bounded path leaves on disk: every declared text column of type String,
    unless one of them is also read as something else (an id, entity, time, weight or subgroup
    column, a filter's operand) or the claim is a retrieval one (its checks read the texts whole);
    then none, and the frame holds the texts as on the in-memory path. The Ray backend
    (engine/audit/onray) leaves them on disk as the local one does: its tasks are sent their texts
    read from the store a slice at a time."""
    from claimcheck.engine.data import weights

    cols = [str(c) for c in source_inputs.get("text_columns") or []]
    if not cols or claim.get("task_kind") == "retrieval":
        return []
    if any(c not in schema or schema[c] != pl.String for c in cols):
        return []
    other = {
        str(source_inputs.get("id_column") or ""),
        str(source_inputs.get("time_column") or ""),
        str(source_inputs.get("label_column") or ""),
        str(weights.column(source_inputs) or ""),
        *[str(c) for c in source_inputs.get("entity_columns") or []],
        *[str(c) for c in source_inputs.get("subgroup_columns") or []],
    }
    wheres = " ".join(str(f.get("where", "")) for f in source_inputs.get("filters") or [])
    if any(c in other or c in wheres for c in cols):
        return []
    return cols


# ---------------------------------------------------------------- the source's spill, handed to the split
#
# The source stage's spill holds every column of the file's rows (row id and target added, before any
# filter). The split stage, run next in the same process on the same files and source inputs, reads
# its rows from that file instead of reading and spilling the files again: the same rows and values as
# its own read (tests/test_split_reuse.py). The file is trusted only while nothing it rests on moved:
# the source inputs (equal), each data file (path, device, inode, size, modification and change
# times as when the source read it, before and after that read) and the spill file itself (size and
# modification time as written). Anything else, a missing file or another process (the hand-over is
# held in memory only): the split reads the files itself.


@dataclass(frozen=True)
class _Handed:
    store: TextStore  # owns the spill folder
    inputs: str  # the source inputs, JSON with sorted keys
    files: tuple[tuple[int | str, ...], ...]  # file_marks of the data files at the source's read
    spill: tuple[int, int]  # the spill file's size and modification time as written


_handed: list[_Handed] = []  # at most one: the latest source stage's spill
_handed_lock = threading.Lock()


def file_marks(paths: list[Path]) -> tuple[tuple[int | str, ...], ...] | None:
    """Each file's resolved path, device, inode, size, modification and change times; None when one
    cannot be read."""
    try:
        out = []
        for p in paths:
            st = Path(p).stat()
            out.append(
                (str(Path(p).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            )
        return tuple(out)
    except OSError:
        return None


def _inputs_key(source_inputs: dict) -> str:
    return json.dumps(source_inputs, sort_keys=True, default=str)


def _spill_mark(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def hand_over(store: TextStore, source_inputs: dict, marks: tuple | None, paths: list[Path]) -> bool:
    """Keep the source stage's spill (`store`, read from `paths` whose file_marks were `marks` before
    the read) for the split stage; False (the caller closes the store) when the files moved since,
    or the spill is unreadable. Replaces (and removes) any spill handed over before."""
    spill = _spill_mark(store.path)
    if marks is None or spill is None or file_marks(paths) != marks or store.folder is None:
        return False
    # Without the source frame's row ids (8 bytes a row): the split gives the store its own.
    kept = TextStore(store.path, np.zeros(0, dtype=np.int64), store.schema, store.folder)
    entry = _Handed(kept, _inputs_key(source_inputs), marks, spill)
    with _handed_lock:
        old, _handed[:] = list(_handed), [entry]
    for e in old:
        e.store.close()
    return True


def take_over(source_inputs: dict, paths: list[Path]) -> TextStore | None:
    """The spill a source stage handed over for these source inputs and files, still as it was
    written, or None: a store of no rows yet (`restrict` it, or make one with its path, schema and
    folder). The caller owns (and closes) it; a handed spill that does not match is removed."""
    with _handed_lock:
        old, _handed[:] = list(_handed), []
    found = None
    for e in old:
        if (
            found is None
            and e.inputs == _inputs_key(source_inputs)
            and file_marks(paths) == e.files
            and _spill_mark(e.store.path) == e.spill
        ):
            found = e.store
        else:
            e.store.close()
    return found


def drop_handed() -> None:
    """Remove any spill handed over and not taken."""
    with _handed_lock:
        old, _handed[:] = list(_handed), []
    for e in old:
        e.store.close()
