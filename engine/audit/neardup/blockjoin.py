"""The bounded path's sketch bounds as a block join over ranges of texts (sharded.py gathers the codes).

The texts are cut into contiguous ranges of RANGE_BYTES of 64-byte sketches each. Candidate codes
(a < b) are appended, a batch at a time, to one file per cell (range of a, range of b). Then for each
range i that has a cell, its sketch rows are read once (one sequential read), and for each filled
cell (i, j) range j's rows too (range i's serve j == i); the cell's codes, read CELL_CODES at a time,
are bounded by candidates.sketch_ok on those rows in memory. So the sketch file is read at most
once per filled cell (m(m+1)/2 ranges for m ranges), whatever the candidates: at most two ranges are
held. The wide bounds (texts with wide sketches on both sides) read their wide rows from the file as
sketch_ok does (ondisk.read_rows): 2 KB rows, so each read fetches about the rows it needs.

Before a batch is written, coarse_ok drops the codes whose coarse sketches (held in memory, 8 bytes a
text) already rule the threshold out: a looser bound than sketch_ok's, so it drops no pair that
sketch_ok keeps, and on templated texts it drops most candidates (fewer bytes written and bounded).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from claimcheck.engine.audit.neardup.arrays import split_codes, unique
from claimcheck.engine.audit.neardup.candidates import SKETCH_CHUNK, _reaches, sketch_ok
from claimcheck.engine.audit.neardup.ondisk import COARSE_FULL, DiskPrefixes
from claimcheck.engine.audit.neardup.shingles import SKETCH_BUCKETS

RANGE_BYTES = 16 << 20  # sketch bytes of one range of texts (two ranges are held at a time)
CELL_CODES = 2_000_000  # a cell's candidate codes bounded at a time (8 bytes each)


class Cells:
    """Candidate codes (a < b) of n texts in files under `folder`, one per cell (a // span, b // span),
    a range being `span` texts (RANGE_BYTES of sketches)."""

    def __init__(self, folder: Path, n: int) -> None:
        self.folder, self.span = folder, max(1, RANGE_BYTES // SKETCH_BUCKETS)
        self.m = max(1, -(-n // self.span))  # ranges
        self.filled: set[tuple[int, int]] = set()
        self.codes = 0  # codes written (a code may be written more than once)

    def path(self, i: int, j: int) -> Path:
        return self.folder / f"cell{i}_{j}"

    def add(self, codes: np.ndarray) -> None:
        """Codes appended to their cells' files."""
        if codes.size == 0:
            return
        a, b = split_codes(codes)
        cell = (a // self.span) * self.m + b // self.span
        del a, b
        order = np.argsort(cell, kind="stable")
        cell, codes = cell[order], codes[order]
        del order
        starts = np.flatnonzero(np.concatenate([[True], cell[1:] != cell[:-1]]))
        ends = np.append(starts[1:], cell.size)
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            i, j = divmod(int(cell[s]), self.m)
            with self.path(i, j).open("ab") as f:
                codes[s:e].tofile(f)
            self.filled.add((i, j))
        self.codes += int(codes.size)

    def chunks(self, i: int, j: int) -> list[tuple[int, int]]:
        """Cell (i, j)'s file as (first code, count) pieces of at most CELL_CODES codes."""
        total = self.path(i, j).stat().st_size // 8
        return [(lo, min(CELL_CODES, total - lo)) for lo in range(0, total, CELL_CODES)]

    def read(self, i: int, j: int, lo: int, count: int) -> np.ndarray:
        """Codes lo..lo+count-1 of cell (i, j), sorted, each once."""
        return unique(np.fromfile(self.path(i, j), dtype=np.uint64, count=count, offset=8 * lo))


def coarse_ok(codes: np.ndarray, p: DiskPrefixes, threshold: float) -> np.ndarray:
    """False for pairs whose coarse sketches (ondisk.coarse_sketch) cannot reach the threshold: the sum
    of the coarse buckets' minima bounds the overlap, and a saturated minimum bounds nothing."""
    keep = np.ones(codes.size, dtype=bool)
    full = np.uint8(COARSE_FULL)
    for lo in range(0, codes.size, SKETCH_CHUNK):
        a, b = split_codes(codes[lo : lo + SKETCH_CHUNK])
        ca, cb = p.coarse[a], p.coarse[b]
        low = np.minimum(ca & full, cb & full)
        high = np.minimum(ca >> np.uint8(4), cb >> np.uint8(4))
        del ca, cb
        ub = low.sum(axis=1, dtype=np.int64) + high.sum(axis=1, dtype=np.int64)
        ub += ((low == full) | (high == full)).any(axis=1) * (1 << 40)
        keep[lo : lo + a.size] = _reaches(p.sizes[a], p.sizes[b], ub, threshold)
    return keep


def sketch_range(p: DiskPrefixes, lo: int, hi: int) -> np.ndarray:
    """Texts lo..hi-1's 64-byte sketches, in one sequential read of the sketch file."""
    flat = np.fromfile(
        p.folder / "sketch", dtype=np.uint8, count=(hi - lo) * SKETCH_BUCKETS, offset=lo * SKETCH_BUCKETS
    )
    return flat.reshape(-1, SKETCH_BUCKETS)


def bound_cells(cells: Cells, p: DiskPrefixes, threshold: float) -> list[np.ndarray]:
    """Each cell's codes that pass candidates.sketch_ok, cell after cell (row i, then j >= i)."""
    out: list[np.ndarray] = []
    n, span = p.sizes.size, cells.span
    for i in range(cells.m):
        row = sorted(j for (ri, j) in cells.filled if ri == i)
        if not row:
            continue
        held = sketch_range(p, i * span, min(n, (i + 1) * span))
        for j in row:
            other = held if j == i else sketch_range(p, j * span, min(n, (j + 1) * span))
            out.extend(_bound_cell(cells, (i, j), (held, other), p, threshold))
            cells.path(i, j).unlink()
            del other
    return out


def _bound_cell(
    cells: Cells,
    cell: tuple[int, int],
    held: tuple[np.ndarray, np.ndarray],
    p: DiskPrefixes,
    threshold: float,
) -> list[np.ndarray]:
    """Cell (i, j)'s codes that pass the bounds, given ranges i and j's sketches."""
    i, j = cell
    first, second = held
    base_a, base_b = i * cells.span, j * cells.span

    def rows(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return first[a - base_a], second[b - base_b]

    out = []
    for lo, count in cells.chunks(i, j):
        codes = cells.read(i, j, lo, count)
        out.append(codes[sketch_ok(codes, p, threshold, rows)])
    return out
