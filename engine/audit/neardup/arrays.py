"""Array helpers of the near-duplicate search: sorted uniques, concatenated ranges, pair codes, the
temporary folder for what would not fit the memory bound, and small pages for its arrays."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np


class _Pages:
    """small_pages' shared state: how many searches run, and numpy's setting before the first."""

    lock = threading.Lock()
    depth = 0
    before = True


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for intermediate arrays that would not fit the memory bound (removed after)."""
    return tempfile.TemporaryDirectory(prefix="claimcheck-neardup-")


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's request for transparent huge pages on its large arrays, off while the search runs.

    The search makes and frees large arrays chunk after chunk. Where the kernel grants huge pages on
    request (transparent_hugepage "madvise", a common default), numpy asks for them on every array of
    4 MB or more, and each first touch then zeroes (and may first compact) 2 MB: on 20,000 long
    documents the search took 2.39-2.54 s without them against 2.71-3.64 s with (bench/HISTORY.md, audit round 10).
    numpy has one switch for the process: it is off while any search runs, then as it was.
    """
    from numpy._core import multiarray

    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    with _Pages.lock:
        if _Pages.depth == 0:
            _Pages.before = bool(setter(False))
        _Pages.depth += 1
    try:
        yield
    finally:
        with _Pages.lock:
            _Pages.depth -= 1
            if _Pages.depth == 0:
                setter(_Pages.before)


def unique(x: np.ndarray) -> np.ndarray:
    """Sorted unique values by one sort (numpy 2.4's np.unique without return_inverse is far slower)."""
    if x.size == 0:
        return x
    s = np.sort(x)
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique values and, per element, the index of its value."""
    order = np.argsort(x)
    s = x[order]
    new = np.empty(s.size, dtype=bool)
    if s.size:
        new[0] = True
        np.not_equal(s[1:], s[:-1], out=new[1:])
    rank = np.cumsum(new) - 1
    inv = np.empty(x.size, dtype=np.int64)
    inv[order] = rank
    return s[new], inv


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated aranges [s, s + c) for each (s, c), without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(total, dtype=np.int64)


def drain(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate and empty the list, so the pieces are freed as soon as the whole exists."""
    whole = np.concatenate(parts)
    parts.clear()
    return whole


def pair_codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Text pairs as one uint64 each, lower index in the high 32 bits (so sorting orders pairs)."""
    a, b = a.astype(np.uint64), b.astype(np.uint64)
    return (np.minimum(a, b) << np.uint64(32)) | np.maximum(a, b)


def split_codes(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pair_codes back into the two text indices."""
    return (codes >> np.uint64(32)).astype(np.int64), (codes & np.uint64(0xFFFFFFFF)).astype(np.int64)
