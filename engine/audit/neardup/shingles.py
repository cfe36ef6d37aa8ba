"""Shingle hashing and each text's extended prefix (passes 1 and 2 of the near-duplicate search).

Shingles are hashed to 64 bits (hashing.py). Pass 1 hashes every shingle,
fills an over-counting table of shingle counts and keeps the hashes in a temporary file (with each
shingle's text, or where the texts come in order just their shingle counts); pass 2 reads
them back and keeps, per text, its set size, a bucket sketch and its extended prefix in the global
(count, hash) order (the count clamped to 2^16 - 1); the sort is one argsort of a packed uint64 key.
Where the compiled loops were built (kernels.py), both passes run there one text at a time instead (pass 1 then keeps each text's distinct shingles), with the same arrays as a result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
import polars as pl

from claimcheck.engine import threads
from claimcheck.engine.audit.budget import release_free_memory
from claimcheck.engine.audit.neardup import kernels
from claimcheck.engine.audit.neardup.arrays import drain, ranges, scratch
from claimcheck.engine.audit.neardup.hashing import STORE_SLICE_BYTES, text_shingles
from claimcheck.engine.audit.texts import Texts
from claimcheck.engine.threads import ordered_map

CHUNK_TEXTS = 25_000  # texts hashed at a time
CHUNK_BYTES = 16 << 20  # and no more than about this much text (long documents make smaller chunks)
THREADED_MIN_BYTES = 2048  # texts this long on average are hashed and prefixed in worker threads
COUNT_BITS = 23  # 8M-bucket frequency table (32 MB)
SKETCH_BUCKETS = 64  # per-text shingle counts by hash bucket, for an exact overlap upper bound
# Texts of WIDE_MIN shingles or more also get a WIDE_BUCKETS-bucket sketch (2 KB a text): 64 buckets
# bound nothing for long texts, whose prefixes of templated text share common shingles.
WIDE_MIN = 256
WIDE_BUCKETS = 2048  # a multiple of 256 (candidates._wide_bound sums 256 buckets in uint16)
WIDE_BATCH = 4096  # wide texts counted at a time (bounds the bincount's temporary)

RANK_BITS = 16  # a shingle's count in the order key, clamped to 2^16 - 1
LONG_TEXT = 256  # chunks of texts this many shingles long on average are deduplicated text by text
MIN_HASH_BITS = 16  # fewer hash bits left in the packed key: sort on the columns instead


class _Sorted(NamedTuple):
    order: np.ndarray  # the permutation sorting by (d, rank, h)
    key: np.ndarray | None  # the packed keys in that order (None where the columns were sorted instead)
    h: np.ndarray | None  # the hashes in that order (with key)
    dbits: int  # the text bits at the top of the packed key
    hbits: int  # the hash bits at its bottom (the rank sits just above them)


def _order(d: np.ndarray, rank: np.ndarray | None, h: np.ndarray) -> _Sorted:
    """The permutation sorting by (d, rank, h): one argsort of a packed uint64 key (d, rank, the hash's
    high bits), far cheaper than a sort on three columns. Exact: where two different hashes tie on the
    packed key (their high bits agree), those runs alone are re-sorted on the full hash."""
    dbits = max(int(d.max()).bit_length(), 1) if d.size else 1
    rbits = 0 if rank is None else RANK_BITS
    hbits = 64 - dbits - rbits
    if hbits < MIN_HASH_BITS:
        return _Sorted(np.lexsort((h, d) if rank is None else (h, rank, d)), None, None, dbits, hbits)
    key = (d.astype(np.uint64) << np.uint64(64 - dbits)) | (h >> np.uint64(64 - hbits))
    if rank is not None:
        key |= rank.astype(np.uint64) << np.uint64(hbits)
    order = np.argsort(key)
    ks, hs = key[order], h[order]
    del key
    eq = np.flatnonzero(ks[1:] == ks[:-1])
    tie = eq[hs[eq + 1] != hs[eq]]
    if tie.size:
        # Every position in a run of equal keys that holds two different hashes, re-sorted by hash.
        run = np.cumsum(np.concatenate([[True], ks[1:] != ks[:-1]]))
        sub = np.flatnonzero(np.isin(run, run[tie + 1]))
        order[sub] = order[sub][np.lexsort((hs[sub], run[sub]))]
        hs[sub] = h[order[sub]]
    return _Sorted(order, ks, hs, dbits, hbits)


def dedupe(
    h: np.ndarray, d: np.ndarray, rank: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Sort shingles by (text, rank, hash) and drop repeats of a shingle within a text; the rank
    (clamped to 2^RANK_BITS - 1: the order is by min(rank, 2^RANK_BITS - 1), then hash; a shingle's
    rank is a function of its hash) comes back in the same order (None without one).

    On the packed key, with few passes: a repeat is an entry whose key and hash equal the previous
    one's (the key holds the whole text index, and the rank is the hash's); the text and the rank are
    read back from the sorted keys (the tie re-sort moves only entries of equal keys), or the text is
    its own sorted column where it came sorted (pass 1 writes texts in order)."""
    if rank is not None:
        rank = np.minimum(rank, (1 << RANK_BITS) - 1)
    srt = _order(d, rank, h)
    if srt.key is None:
        order = srt.order
        h, d = h[order], d[order].astype(np.int64)
        rank = rank[order] if rank is not None else None
        keep = np.ones(h.size, dtype=bool)
        if h.size > 1:
            keep[1:] = (h[1:] != h[:-1]) | (d[1:] != d[:-1])
        return h[keep], d[keep], (rank[keep] if rank is not None else None)
    ks, hs = srt.key, srt.h
    assert hs is not None
    eq = np.flatnonzero(ks[1:] == ks[:-1])
    keep = np.ones(hs.size, dtype=bool)
    keep[eq[hs[eq + 1] == hs[eq]] + 1] = False
    ks = ks[keep]
    if _is_sorted(d):
        d = d[keep].astype(np.int64, copy=False)
    else:
        d = (ks >> np.uint64(64 - srt.dbits)).astype(np.int64)
    if rank is not None:
        rank = ((ks >> np.uint64(srt.hbits)) & np.uint64((1 << RANK_BITS) - 1)).astype(rank.dtype)
    return hs[keep], d, rank


def dedupe_by_text(
    h: np.ndarray, d: np.ndarray, rank_of: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dedupe(h, d, rank_of(h)) for texts of many shingles each, in sorted text order (d sorted, fewer
    than 2^16 texts and 2^32 shingles): the same three arrays, without an argsort over the chunk.

    Each text's hashes are sorted in place (full 64-bit values: repeats are adjacent, so dropping them
    is exact); the rank is looked up for the distinct shingles only; then one plain sort of the key
    (text, rank, index) packed in 16 + 16 + 32 bits puts every text's shingles in (rank, hash) order:
    within a text, the index follows the hash order. Its low 32 bits are the permutation. A Python
    loop over texts: only worth it where texts are long (LONG_TEXT shingles on average)."""
    n = h.size
    hs = h.copy()
    cut = [0, *(np.flatnonzero(d[1:] != d[:-1]) + 1).tolist(), n]
    for lo, hi in zip(cut[:-1], cut[1:], strict=True):
        hs[lo:hi].sort()
    keep = np.ones(n, dtype=bool)
    if n > 1:
        keep[1:] = (hs[1:] != hs[:-1]) | (d[1:] != d[:-1])
    hs, ds = hs[keep], d[keep].astype(np.int64)
    rank = rank_of(hs)
    rank = np.minimum(rank, (1 << RANK_BITS) - 1).astype(rank.dtype)
    if ds.size == 0:
        return hs, ds, rank
    key = (ds - ds[0]).astype(np.uint64) << np.uint64(48)
    key |= rank.astype(np.uint64) << np.uint64(32)
    key |= np.arange(hs.size, dtype=np.uint64)
    key.sort()
    low = np.uint64(0xFFFFFFFF)
    return (
        hs[(key & low).astype(np.int64)],
        ds,
        ((key >> np.uint64(32)) & np.uint64(0xFFFF)).astype(rank.dtype),
    )


def _is_sorted(x: np.ndarray) -> bool:
    return bool(x.size < 2 or (x[1:] >= x[:-1]).all())


class _Held(NamedTuple):
    """What pass 1 wrote for a chunk: m hashes, then (per None) m int32 text indices; or, texts in
    order, per text its number of shingles (`distinct`: its distinct shingles, repeats already dropped)."""

    m: int
    per: np.ndarray | None
    distinct: bool


class Prefixes(NamedTuple):
    """What candidate generation needs from pass 2, in text-major CSR form."""

    tok: np.ndarray  # hashes of the extended-prefix shingles another text may hold
    rank: np.ndarray  # each one's position in its text's ordered set (uint16), for the positional filter
    offs: np.ndarray  # tok[offs[i]:offs[i+1]] belong to text i
    ext: np.ndarray  # each text's extended prefix length, counting every shingle
    sizes: np.ndarray  # each text's shingle set size
    sketch: np.ndarray  # per text, its shingles counted in SKETCH_BUCKETS hash buckets (saturating)
    wide_of: np.ndarray  # per text, its row in `wide` (texts of WIDE_MIN shingles or more), else -1
    wide: np.ndarray  # per wide text, its shingles counted in WIDE_BUCKETS hash buckets (saturating)
    wide_full: np.ndarray  # per wide text, whether a bucket of its wide sketch saturated (at 255)


def build_prefixes(
    texts: Texts, k: int, threshold: float, *, gather: Gather | None = None, nbytes: np.ndarray | None = None
) -> Any:
    """Each text's extended prefix (first |x| - ceil(t|x|) + 2 shingles, rarest first) and set sizes:
    what `gather` makes of pass 2's chunks — a Prefixes by default (`assemble`); the bounded path passes
    ondisk.spill, which writes the entries and sketches to files (and the C heap is then trimmed as
    pass 1 goes).
    `nbytes`: each text's bytes where the caller has them (_text_bytes, else).

    A shingle counted once in the (over-counting) table occurs in one text only: no pair can share it,
    so it takes a prefix place (it counts for positions and lengths) but is not kept.
    """
    n = texts.len()
    nbytes = _text_bytes(texts) if nbytes is None else nbytes
    # Worker threads for long documents only: there they halve the time; on a million tickets they
    # saved ~4 s of a 30 s source stage but lifted its peak ~105 MB, past 3x the data (bench/HISTORY.md, audit round 7).
    workers = threads.thread_cap() if n and nbytes.mean() >= THREADED_MIN_BYTES else 1
    bounds = chunks(texts, workers, nbytes)
    counts = np.zeros(1 << COUNT_BITS, dtype=np.uint32)
    with scratch() as tmp:
        # Pass 1 hashes every shingle once and keeps the hashes in a temporary file for pass 2: reading
        # them back costs far less than normalising, splitting and hashing the texts again.
        store = Path(tmp) / "shingles"
        held: list[_Held] = []
        buckets: list[np.ndarray] = []
        with store.open("wb") as f:
            # The next chunks are normalised, split, hashed and deduplicated in worker threads
            # (claimcheck.engine.threads) while this one is counted and written, in order.
            def hashed(b: tuple[int, int]) -> _Hashed:
                return _hash_chunk(texts, b[0], b[1], k)

            for x in ordered_map(hashed, bounds, workers):
                held.append(_pass1_chunk(x, counts, f, buckets))
                if gather is not None:
                    release_free_memory()  # the chunks' temporaries, freed on the C heap, back to the system
            if buckets:
                counts += np.bincount(drain(buckets), minlength=counts.size).astype(np.uint32)
        with store.open("rb") as f:
            parts = list(zip(bounds, held, strict=True))
            return _prefixes_pass2(f, parts, counts, (n, threshold, workers), gather or assemble)


class _Hashed(NamedTuple):
    """One chunk's shingles, hashed (in a worker thread) for pass 1."""

    h: np.ndarray  # every shingle, repeats too (the count table counts them all)
    store: np.ndarray  # what pass 2 reads back: each text's distinct shingles (compiled loops), or h
    d: np.ndarray | None  # the text of each shingle of h, where texts are not in order (numpy path)
    per: np.ndarray | None  # per text, its number of stored shingles, where texts are in order
    distinct: bool


def _hash_chunk(texts: Texts, lo: int, hi: int, k: int) -> _Hashed:
    """Hash a chunk's shingles and, where the compiled loops exist, drop each text's repeats (in text
    order). Touches no shared state: runs in worker threads."""
    h, d = text_shingles(texts, np.arange(lo, hi), k)
    if kernels.available():
        h, store, per = distinct_by_text(h, d, hi - lo)
        return _Hashed(h, store, None, per, True)
    # Texts in order (no short text after the long ones): their shingle counts stand for d.
    per = np.bincount(d, minlength=hi - lo) if _is_sorted(d) else None
    return _Hashed(h, h, d if per is None else None, per, False)


def distinct_by_text(h: np.ndarray, d: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shingles h of texts d (of n) put in text order (stable), and each text's distinct shingles with
    their number (the compiled hash set)."""
    if not _is_sorted(d):
        order = np.argsort(d, kind="stable")
        h, d = h[order], d[order]
    store, per = kernels.distinct(h, np.bincount(d, minlength=n))
    return h, store, per


def _pass1_chunk(x: _Hashed, counts: np.ndarray, f: BinaryIO, buckets: list[np.ndarray]) -> _Held:
    """Pass 1 for one hashed chunk: its shingles go to `f` and into the count table (at once with the
    compiled loops, else in `buckets`, a few chunks at a time)."""
    x.store.tofile(f)
    if x.distinct:
        kernels.count(x.h, counts)
        return _Held(x.store.size, x.per, True)
    if x.d is not None:
        x.d.astype(np.int32).tofile(f)
    buckets.append((x.h & np.uint64(counts.size - 1)).astype(np.uint32))
    # The table is updated every few chunks: one bincount over 8M buckets costs as much as a chunk.
    if len(buckets) == 4:
        counts += np.bincount(drain(buckets), minlength=counts.size).astype(np.uint32)
    return _Held(x.h.size, x.per, False)


def _text_bytes(texts: Texts) -> np.ndarray:
    """Each text's bytes (its columns' bytes before normalisation)."""
    lengths = [pl.col(c).cast(pl.String).str.len_bytes().fill_null(0).cast(pl.Int64) for c in texts.columns]

    def fn(part: pl.DataFrame) -> np.ndarray:
        return part.select(pl.sum_horizontal(lengths)).to_series().to_numpy()

    if texts.store is None:
        return fn(texts.frame)[texts.reps]
    parts = texts.store.by_slices(texts.columns, fn, STORE_SLICE_BYTES)
    return np.concatenate([np.zeros(0, dtype=np.int64), *parts])[texts.reps]


def chunks(texts: Texts, workers: int = 1, nbytes: np.ndarray | None = None) -> list[tuple[int, int]]:
    """Text ranges [lo, hi) hashed at a time: at most CHUNK_TEXTS texts and, unless one text is longer,
    CHUNK_BYTES bytes of text (the columns' bytes before normalisation), so that memory is bounded by
    a chunk of words, not of texts; with `workers` chunks in flight, each is 1/workers of that."""
    n = texts.len()
    nbytes = _text_bytes(texts) if nbytes is None else nbytes
    cum = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nbytes, out=cum[1:])
    out, lo = [], 0
    while lo < n:
        hi = int(np.searchsorted(cum, cum[lo] + CHUNK_BYTES // workers, side="right")) - 1
        hi = min(max(hi, lo + 1), lo + max(1, CHUNK_TEXTS // workers), n)
        out.append((lo, hi))
        lo = hi
    return out


class _Chunk(NamedTuple):
    """Pass 2's arrays for one chunk of texts (see Prefixes)."""

    tok: np.ndarray
    rank: np.ndarray  # uint16
    kept: np.ndarray  # per text, how many of its prefix shingles are in tok
    ext: np.ndarray
    size: np.ndarray
    sketch: np.ndarray
    wide: np.ndarray  # the chunk's wide texts' sketches, in text order


# What build_prefixes makes of pass 2's chunks ((lo, hi), chunk), in text order, for n texts.
Gather = Callable[[Iterable[tuple[tuple[int, int], "_Chunk"]], int], Any]


def _prefixes_pass2(
    f: BinaryIO,
    parts: list[tuple[tuple[int, int], _Held]],
    counts: np.ndarray,
    how: tuple[int, float, int],
    gather: Gather,
) -> Any:
    """Pass 2 of build_prefixes for n texts over the shingle hashes of pass 1, read back chunk by chunk
    from `f` and worked on by `workers` threads; the chunks' arrays handed, in text order, to `gather`."""
    n, threshold, workers = how

    def read() -> Iterator[tuple[int, _Held, np.ndarray, np.ndarray | None]]:
        for (lo, hi), held in parts:
            h = np.fromfile(f, dtype=np.uint64, count=held.m)
            d = None
            if not held.distinct:
                if held.per is None:
                    d = np.fromfile(f, dtype=np.int32, count=held.m).astype(np.int64)
                else:
                    d = np.repeat(np.arange(hi - lo, dtype=np.int64), held.per)
            yield hi - lo, held, h, d

    def one(part: tuple[int, _Held, np.ndarray, np.ndarray | None]) -> _Chunk:
        m, held, h, d = part
        return chunk_pass2(h, d, held.per, m, counts, threshold)

    # Chunks are read in order here and worked on in worker threads (claimcheck.engine.threads), a few at a time.
    bounds = [b for b, _ in parts]
    done = zip(bounds, ordered_map(one, read(), workers), strict=True)
    return gather(done, n)


def chunk_pass2(
    h: np.ndarray, d: np.ndarray | None, per: np.ndarray | None, m: int, counts: np.ndarray, threshold: float
) -> _Chunk:
    """Pass 2 for one chunk of m texts: `d` None — h holds each text's distinct shingles, text after text,
    `per` of them each (the compiled loops); else every shingle h of text d (numpy)."""
    if d is None:
        assert per is not None
        lay = kernels.Layout(threshold, SKETCH_BUCKETS, WIDE_MIN, WIDE_BUCKETS)
        tok, rank, kept_c, ext, sk, wd = kernels.long_prefixes(h, per, counts, lay)
        return _Chunk(tok, rank, kept_c, ext, per, sk, wd)
    return _chunk_prefixes(h, d, m, counts, threshold)


def assemble(done: Iterable[tuple[tuple[int, int], _Chunk]], n: int) -> Prefixes:
    """The Prefixes of n texts from pass 2's chunks ((lo, hi), chunk), in text order."""
    sizes = np.zeros(n, dtype=np.int64)
    ext_all = np.zeros(n, dtype=np.int64)
    kept = np.zeros(n, dtype=np.int64)
    sketch = np.zeros((n, SKETCH_BUCKETS), dtype=np.uint8)
    toks, ranks = [], []
    wides: list[np.ndarray] = []
    for (lo, hi), c in done:
        toks.append(c.tok)
        ranks.append(c.rank)
        kept[lo:hi], sizes[lo:hi], ext_all[lo:hi], sketch[lo:hi] = c.kept, c.size, c.ext, c.sketch
        if c.wide.shape[0]:
            wides.append(c.wide)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kept, out=offs[1:])
    wide_of = np.full(n, -1, dtype=np.int64)
    is_wide = sizes >= WIDE_MIN
    wide_of[is_wide] = np.arange(int(is_wide.sum()))
    wide = np.concatenate(wides) if wides else np.zeros((0, WIDE_BUCKETS), dtype=np.uint8)
    full = (wide == 255).any(axis=1)
    return Prefixes(
        np.concatenate(toks), np.concatenate(ranks), offs, ext_all, sizes, sketch, wide_of, wide, full
    )


def _chunk_prefixes(h: np.ndarray, d: np.ndarray, n: int, counts: np.ndarray, threshold: float) -> _Chunk:
    """Pass 2 for one chunk of n texts in numpy: every shingle h of text d (repeats too, any order)."""
    mask = np.uint64(counts.size - 1)
    # Global order: (approximate count, clamped; hash) — the same total order in every text.
    if h.size >= LONG_TEXT * n and n < 1 << 16 and h.size < 1 << 32 and _is_sorted(d):
        h, d, count = dedupe_by_text(h, d, lambda x: counts[(x & mask).astype(np.int64)])
    else:
        h, d, count = dedupe(h, d, counts[(h & mask).astype(np.int64)])
    size = np.bincount(d, minlength=n)
    first = np.zeros(size.size, dtype=np.int64)
    np.cumsum(size[:-1], out=first[1:])
    pos = np.arange(d.size, dtype=np.int64) - first[d]
    ext = np.minimum(size, size - np.ceil(threshold * size - 1e-9).astype(np.int64) + 2)
    take = (pos < ext[d]) & (count > 1)
    shift = np.uint64(64 - SKETCH_BUCKETS.bit_length() + 1)
    cell = d * SKETCH_BUCKETS + (h >> shift).astype(np.int64)
    per = np.bincount(cell, minlength=n * SKETCH_BUCKETS).reshape(n, SKETCH_BUCKETS)
    wides = _wide_sketches(h, d, size)
    return _Chunk(
        h[take],
        np.minimum(pos[take], 65535).astype(np.uint16),
        np.bincount(d[take], minlength=n),
        ext,
        size,
        np.minimum(per, 255).astype(np.uint8),
        np.concatenate(wides) if wides else np.zeros((0, WIDE_BUCKETS), dtype=np.uint8),
    )


def _wide_sketches(h: np.ndarray, d: np.ndarray, size: np.ndarray) -> list[np.ndarray]:
    """The WIDE_BUCKETS-bucket sketches of a chunk's wide texts, in text order (h, d: deduplicated
    shingles, sorted by text)."""
    wide = np.flatnonzero(size >= WIDE_MIN)
    if wide.size == 0:
        return []
    first = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(size, out=first[1:])
    shift = np.uint64(64 - WIDE_BUCKETS.bit_length() + 1)
    out = []
    for lo in range(0, wide.size, WIDE_BATCH):
        batch = wide[lo : lo + WIDE_BATCH]
        idx = ranges(first[batch], size[batch])
        cell = np.repeat(np.arange(batch.size, dtype=np.int64), size[batch]) * WIDE_BUCKETS
        cell += (h[idx] >> shift).astype(np.int64)
        per = np.bincount(cell, minlength=batch.size * WIDE_BUCKETS).reshape(batch.size, WIDE_BUCKETS)
        out.append(np.minimum(per, 255).astype(np.uint8))
    return out
