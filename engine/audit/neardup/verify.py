"""Exact Jaccard of candidate text pairs (the last step of the near-duplicate search)."""

from __future__ import annotations

import numpy as np

from claimcheck.engine.audit.neardup import kernels
from claimcheck.engine.audit.neardup.arrays import ranges, split_codes, unique, unique_inverse
from claimcheck.engine.audit.neardup.hashing import text_shingles
from claimcheck.engine.audit.neardup.shingles import dedupe, distinct_by_text
from claimcheck.engine.audit.texts import Texts

VERIFY_SHINGLES = 4_000_000  # shingles re-hashed per verification block
# and on the bounded path: a block holds about 40 bytes a shingle (+158 MB at 4,000,000 on 1.3 KB texts)
BOUNDED_VERIFY_SHINGLES = 1_000_000


def _jaccard(
    ids: np.ndarray, offsets: np.ndarray, a: np.ndarray, b: np.ndarray, chunk: int = 4_000_000
) -> np.ndarray:
    """Exact Jaccard of the shingle sets of text pairs (a[i], b[i]); ids sorted within each text."""
    sizes = np.diff(offsets)
    span = np.int64(int(ids.max()) + 1) if ids.size else np.int64(1)
    out = np.zeros(a.size, dtype=np.float64)
    start = 0
    while start < a.size:
        # Chunk so that the expanded sets stay under `chunk` elements.
        work = np.cumsum(sizes[a[start:]] + sizes[b[start:]])
        stop = start + max(1, int(np.searchsorted(work, chunk, side="right")))
        pa, pb = a[start:stop], b[start:stop]
        la, lb = sizes[pa], sizes[pb]
        idx_a = ranges(offsets[pa], la)
        idx_b = ranges(offsets[pb], lb)
        # pair * span + id is globally sorted on the b side, so membership is one searchsorted.
        key_a = np.repeat(np.arange(pa.size, dtype=np.int64), la) * span + ids[idx_a]
        key_b = np.repeat(np.arange(pb.size, dtype=np.int64), lb) * span + ids[idx_b]
        pos = np.minimum(np.searchsorted(key_b, key_a), key_b.size - 1)
        found = key_b[pos] == key_a
        inter = np.bincount(key_a[found] // span, minlength=pa.size)
        out[start:stop] = inter / (la + lb - inter)
        start = stop
    return out


def verify_pairs(
    texts: Texts, codes: np.ndarray, sizes: np.ndarray, k: int, block: int = VERIFY_SHINGLES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact Jaccard of candidate text pairs, re-hashing only the texts involved, block by block
    (about `block` shingles each)."""
    a, b = split_codes(codes)
    jac = np.zeros(a.size, dtype=np.float64)
    work = np.cumsum(sizes[a] + sizes[b])
    start = 0
    while start < a.size:
        base = work[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(work, base + block, side="right")))
        pa, pb = a[start:stop], b[start:stop]
        docs = unique(np.concatenate([pa, pb]))
        h, d = text_shingles(texts, docs, k)
        ia, ib = np.searchsorted(docs, pa), np.searchsorted(docs, pb)
        exact = _compiled_jaccard if kernels.available() else _numpy_jaccard
        jac[start:stop] = exact(h, d, docs.size, ia, ib)
        start = stop
    return a, b, jac


def _numpy_jaccard(h: np.ndarray, d: np.ndarray, n: int, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    h, d, _ = dedupe(h, d)
    # Dense ids keep each text's hash order, so _jaccard's sorted-set search applies.
    _, ids = unique_inverse(h)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(d, minlength=n), out=offs[1:])
    return _jaccard(ids, offs, ia, ib)


def _compiled_jaccard(h: np.ndarray, d: np.ndarray, n: int, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """_numpy_jaccard in the compiled loops: each text's distinct shingles (a hash set), sorted, then
    one merge per pair — no sort over the whole block."""
    _, store, per = distinct_by_text(h, d, n)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per, out=offs[1:])
    return kernels.jaccard(store, offs, ia, ib)
