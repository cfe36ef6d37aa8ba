"""Array helpers of the near-duplicate search: sorted uniques, concatenated ranges, pair codes, and
the temporary folder for what would not fit the memory bound."""

from __future__ import annotations

import tempfile

import numpy as np


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for intermediate arrays that would not fit the memory bound (removed after)."""
    return tempfile.TemporaryDirectory(prefix="claimcheck-neardup-")


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
