"""The bounded path's per-text arrays of the near-duplicate search, on disk (pass 2 writes them).

In memory stay four int64 numbers a text (set size, extended prefix length, prefix offset, row in the
wide sketches), its coarse sketch (8 bytes: see coarse_sketch) and one flag a wide text. In temporary files (tempfile's folder, TMPDIR) go:
- the prefix entries (each shingle hash and its position), text after text, in two files read back a
  span of texts at a time (sharded.py partitions them by shingle or pair hash from there);
- the 64-byte sketches and the 2 KB wide sketches, one row a text (a wide text): the sketches read
  back a range of texts at a time (blockjoin.py), the wide sketches for the candidate ids of a block
  only: sorted ids, and one read (os.pread) per run of nearby rows. The files are read, not mapped:
  mapped pages would count in the process's resident memory.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from claimcheck.engine.audit.budget import release_free_memory
from claimcheck.engine.audit.neardup.shingles import WIDE_BUCKETS, WIDE_MIN, Prefixes, _Chunk

SPAN_ENTRIES = 2_000_000  # prefix entries read back at a time (10 bytes each, plus their text index)
READ_GAP = 32 << 10  # rows nearer than this many bytes apart are read in one pread
TRIM_EVERY = 4  # chunks or passes between two trims of the C heap (release_free_memory)
READ_SPAN = 4 << 20  # and no read spans more than this many bytes (unless one row is longer)
COARSE_BUCKETS = 16  # a coarse sketch's buckets, each the sum of SKETCH_BUCKETS / 16 buckets, in 4 bits
COARSE_FULL = 15  # a coarse bucket's saturated value (its sum is 15 or more)


@dataclass
class DiskPrefixes:
    """shingles.Prefixes with the prefix entries and the sketches in files under `folder`."""

    folder: Path
    sizes: np.ndarray  # each text's shingle set size
    ext: np.ndarray  # each text's extended prefix length
    offs: np.ndarray  # text i's entries are entries offs[i]:offs[i+1] of the entry files
    wide_of: np.ndarray  # per text, its row in the wide sketch file, else -1
    wide_full: np.ndarray  # per wide text, whether a bucket of its wide sketch saturated
    coarse: np.ndarray  # per text, its coarse sketch (coarse_sketch)
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    def close(self) -> None:
        """Removes the files."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def entries(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """The prefix entries (hashes, positions) of texts lo..hi-1."""
        a, b = int(self.offs[lo]), int(self.offs[hi])
        tok = np.fromfile(self.folder / "prefix.tok", dtype=np.uint64, count=b - a, offset=8 * a)
        rank = np.fromfile(self.folder / "prefix.rank", dtype=np.uint16, count=b - a, offset=2 * a)
        return tok, rank

    def local(self, lo: int, hi: int) -> tuple[Prefixes, np.ndarray]:
        """Texts lo..hi-1's entries as a Prefixes of those texts only (text i there is text lo + i; no
        sketches), and each entry's text (the whole search's index)."""
        tok, rank = self.entries(lo, hi)
        offs = self.offs[lo : hi + 1] - self.offs[lo]
        doc = np.repeat(np.arange(lo, hi, dtype=np.int32), np.diff(offs))
        none = np.zeros((0, 0), dtype=np.uint8)
        ext, sizes, wide_of = self.ext[lo:hi], self.sizes[lo:hi], self.wide_of[lo:hi]
        return Prefixes(tok, rank, offs, ext, sizes, none, wide_of, none, np.zeros(0, dtype=bool)), doc

    def spans(self, weight: np.ndarray | None = None, most: int = SPAN_ENTRIES) -> Iterator[tuple[int, int]]:
        """Text ranges [lo, hi) of at most `most` entries (or of `weight`, per text) each, one text at least."""
        w = np.diff(self.offs) if weight is None else weight
        cum = np.zeros(w.size + 1, dtype=np.int64)
        np.cumsum(w, out=cum[1:])
        lo, n = 0, w.size
        while lo < n:
            hi = int(np.searchsorted(cum, cum[lo] + most, side="right")) - 1
            hi = min(max(hi, lo + 1), n)
            yield lo, hi
            lo = hi

    def wide_pairs(self, wa: np.ndarray, wb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The wide sketches of wide rows wa and wb."""
        return _pair_rows(self.folder / "wide", WIDE_BUCKETS, self.wide_full.size, wa, wb)


def _pair_rows(path: Path, width: int, n: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows a and b of a file of n rows, each distinct row read once (a flag per row finds them)."""
    need = np.zeros(n, dtype=bool)
    need[a] = True
    need[b] = True
    ids = np.flatnonzero(need)
    del need
    rows = read_rows(path, width, ids)
    return rows[np.searchsorted(ids, a)], rows[np.searchsorted(ids, b)]


def read_rows(path: Path, width: int, ids: np.ndarray) -> np.ndarray:
    """Rows `ids` (sorted, distinct) of a file of `width`-byte rows: one pread per run of nearby rows."""
    out = np.empty((ids.size, width), dtype=np.uint8)
    if ids.size == 0:
        return out
    gap, span = max(1, READ_GAP // width), max(1, READ_SPAN // width)
    starts = np.flatnonzero(np.diff(ids) > gap) + 1  # where a run must start (a gap before it)
    fd = os.open(path, os.O_RDONLY)
    try:
        i = 0
        while i < ids.size:
            # The run: ids[i:j], up to the next gap, its rows spanning at most `span` rows.
            k = int(np.searchsorted(starts, i, side="right"))
            j = int(starts[k]) if k < starts.size else ids.size
            j = max(i + 1, min(j, int(np.searchsorted(ids, ids[i] + span, side="left"))))
            first, last = int(ids[i]), int(ids[j - 1])
            buf = os.pread(fd, (last - first + 1) * width, first * width)
            block = np.frombuffer(buf, dtype=np.uint8).reshape(-1, width)
            out[i:j] = block[ids[i:j] - first]
            i = j
    finally:
        os.close(fd)
    return out


def coarse_sketch(sketch: np.ndarray) -> np.ndarray:
    """64-bucket sketches → COARSE_BUCKETS buckets, each the sum of 4 adjacent buckets saturating at
    COARSE_FULL, two buckets a byte (bucket 2k in byte k's low 4 bits, 2k + 1 in its high 4 bits).
    A sum of minima over them is at least the sum over the 64 buckets' minima (a looser bound)."""
    sums = sketch.reshape(sketch.shape[0], COARSE_BUCKETS, -1).sum(axis=2, dtype=np.uint16)
    nib = np.minimum(sums, COARSE_FULL).astype(np.uint8)
    return nib[:, 0::2] | (nib[:, 1::2] << np.uint8(4))


def spill(done: Iterable[tuple[tuple[int, int], _Chunk]], n: int) -> DiskPrefixes:
    """shingles.assemble's arrays with the entries and sketches written to a new temporary folder."""
    tmp = tempfile.TemporaryDirectory(prefix="claimcheck-neardup-prefixes-")
    folder = Path(tmp.name)
    try:
        sizes = np.zeros(n, dtype=np.int64)
        ext = np.zeros(n, dtype=np.int64)
        kept = np.zeros(n, dtype=np.int64)
        coarse = np.zeros((n, COARSE_BUCKETS // 2), dtype=np.uint8)
        full: list[np.ndarray] = []
        chunks = 0
        with (
            (folder / "prefix.tok").open("wb") as tok,
            (folder / "prefix.rank").open("wb") as rank,
            (folder / "sketch").open("wb") as sketch,
            (folder / "wide").open("wb") as wide,
        ):
            for (lo, hi), c in done:
                kept[lo:hi], sizes[lo:hi], ext[lo:hi] = c.kept, c.size, c.ext
                coarse[lo:hi] = coarse_sketch(c.sketch)
                np.ascontiguousarray(c.tok, dtype=np.uint64).tofile(tok)
                np.ascontiguousarray(c.rank, dtype=np.uint16).tofile(rank)
                np.ascontiguousarray(c.sketch, dtype=np.uint8).tofile(sketch)
                if c.wide.shape[0]:
                    np.ascontiguousarray(c.wide, dtype=np.uint8).tofile(wide)
                    full.append((c.wide == 255).any(axis=1))
                del c
                chunks += 1
                if (
                    chunks % TRIM_EVERY == 0
                ):  # the chunks' temporaries, freed on the C heap, back to the system
                    release_free_memory()
        offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(kept, out=offs[1:])
        wide_of = np.full(n, -1, dtype=np.int64)
        is_wide = sizes >= WIDE_MIN
        wide_of[is_wide] = np.arange(int(is_wide.sum()))
        wide_full = np.concatenate(full) if full else np.zeros(0, dtype=bool)
    except BaseException:
        tmp.cleanup()
        raise
    return DiskPrefixes(folder, sizes, ext, offs, wide_of, wide_full, coarse, tmp)
