"""The near-duplicate search as Ray tasks: the same exact pairs, the same counts as the local search
(engine/audit/neardup; its docstring defines the method), its steps spread over the cluster's workers.

1. Pass 1 — one task per chunk of distinct texts (shingles.chunks, at least two chunks per worker where
   the texts allow): hash the chunk's shingles; return its part of the shingle count table, (bucket,
   count) in COUNT_RANGES bucket ranges, and keep the hashed chunk in the object store. Reduce task r
   sums range r over every chunk (a sum does not depend on the order: the local table); one task
   joins the ranges (32 MB), kept in the object store. On a cluster of one worker CPU, where the texts
   are in the frame or the tasks read the spill file, one task runs passes 1 and 2 as the local
   search does (_built: shingles.build_prefixes, the same Prefixes).
2. Pass 2 — one task per chunk, given its hashed chunk and the table: the chunk's extended prefixes
   and sketches (shingles.chunk_pass2). One task assembles them in text order (shingles.assemble):
   the Prefixes (set sizes, sketches, prefixes) stay in the object store, never in the driver.
3. Candidates, the shuffle by prefix-pair hash — map tasks over blocks of texts make their prefix-pair
   signatures and return one array per partition (the signature hash's high 32 bits scaled to the
   partition count, as the local search's passes); reduce task r takes partition r of every map task,
   sorts and matches it (candidates._positional_pairs, the sketch bound). A planning task picks the
   map blocks and the packing from the Prefixes (the driver gets the blocks' bounds only). A
   signature's partition is a function of its kept key bits (these are at least 32 while texts ×
   prefix positions fit 2^32), so equal keys meet in one reducer, as they meet in one local pass.
   The single-shingle path (tiny texts and long prefixes) is one task. The candidates are the union
   of the reducers', made unique. On a cluster of one worker CPU a shuffle can only add work: one
   task runs the local search's passes one at a time instead (_one_task: the same candidates).
4. Verification — one task per block of candidates (about VERIFY_SHINGLES shingles), given the texts of
   that block only: exact Jaccard (verify.verify_pairs).
Distinct texts (the exact-duplicate grouping of rows by normalised text) and the expansion of text
pairs to row pairs run on the driver, as in the local search. What the driver holds, per row: its row
id and text index (16 bytes) and the row hashes while the texts are grouped (8 bytes); per distinct
text: its first row (8 bytes) and its set size (8 bytes, fetched for verification); per candidate pair
its code and Jaccard (16 bytes).

Where the text columns stay on disk (engine/audit/textstore.py; the frame holds stand-ins), the driver
reads each task's texts from the store when it sends the task (a pass chunk's rows, a verification
block's rows): it holds one task's texts at a time, never all of them, and each is released from the
object store once its task has run. With `audit_ray_texts = "shared"` the driver sends those rows'
ids instead and each task reads its texts from the spill file (shared.py). The row hashes and the duplicate rows' grouping read the store a
slice at a time, as on the local bounded path.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.audit.neardup import NearDupResult, _expand, _no_pairs
from claimcheck.engine.audit.neardup.arrays import small_pages, split_codes, unique
from claimcheck.engine.audit.neardup.candidates import (
    GEN_BLOCK,
    LONG_PREFIX,
    SIG_BLOCK,
    Packing,
    Sketches,
    _pair_signatures,
    _signature_passes,
    _single_pairs,
    match_pass,
    sketch_ok,
)
from claimcheck.engine.audit.neardup.hashing import row_hashes_and_bytes
from claimcheck.engine.audit.neardup.shingles import (
    CHUNK_TEXTS,
    COUNT_BITS,
    Prefixes,
    _hash_chunk,
    assemble,
    build_prefixes,
    chunk_pass2,
    chunks,
)
from claimcheck.engine.audit.neardup.verify import VERIFY_SHINGLES, verify_pairs
from claimcheck.engine.audit.onray import Cluster, remote, shared
from claimcheck.engine.audit.texts import Texts, distinct_texts
from claimcheck.engine.audit.textstore import TextStore

_MASK = np.uint64((1 << COUNT_BITS) - 1)
COUNT_RANGES = 16  # the count table is summed in this many bucket ranges, one reduce task each
_RANGE = (1 << COUNT_BITS) // COUNT_RANGES


# ---------------------------------------------------------------- tasks (run on the workers)


def _pass1(frame: pl.DataFrame | TextStore, columns: list[str], k: int, parts: int) -> tuple[Any, ...]:
    """A chunk's shingles hashed: its count-table part split into `parts` bucket ranges ((bucket,
    count) each), then the hashed chunk for pass 2. `frame`: the chunk's texts, or what to read them
    from (shared.rows_of)."""
    frame = shared.frame_of(frame, columns)
    x = _hash_chunk(Texts(frame, columns, np.arange(frame.height, dtype=np.int64)), 0, frame.height, k)
    buckets, counts = np.unique(x.h & _MASK, return_counts=True)
    cuts = np.searchsorted(buckets, np.arange(1, parts, dtype=np.uint64) * np.uint64(_RANGE))
    ranges = [
        (b.astype(np.int64), c.astype(np.int64))
        for b, c in zip(np.split(buckets, cuts), np.split(counts, cuts), strict=True)
    ]
    held = (x.store, None if x.distinct or x.d is None else x.d.astype(np.int64), x.per, x.distinct)
    return (*ranges, held)


def _built(texts: Texts, k: int, threshold: float, nbytes: np.ndarray | None) -> Prefixes:
    """Passes 1 and 2 in one task (a cluster of one worker CPU): the local search's build_prefixes over
    every text, read from the spill file where they stay on disk (shared.py) — the same Prefixes."""
    if texts.store is not None:
        shared.readable(texts.store)
    return build_prefixes(texts, k, threshold, nbytes=nbytes)


def _count_range(r: int, *parts: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Bucket range r of the count table: every chunk's counts there, summed."""
    table = np.zeros(_RANGE, dtype=np.int64)
    for buckets, counts in parts:
        table[buckets - r * _RANGE] += counts  # buckets are distinct within one part: exact
    return table.astype(np.uint32)


def _pass2(held: tuple, m: int, counts: np.ndarray, threshold: float) -> Any:
    store, d, per, distinct = held
    if not distinct and d is None:
        d = np.repeat(np.arange(m, dtype=np.int64), per)
    return chunk_pass2(store, None if distinct else d, per, m, counts, threshold)


def _join(*ranges: np.ndarray) -> np.ndarray:
    """The count table from its bucket ranges."""
    return np.concatenate(ranges)


def _assembled(bounds: list[tuple[int, int]], n: int, *done: Any) -> Prefixes:
    """The Prefixes of n texts from pass 2's chunks, in text order."""
    return assemble(zip(bounds, done, strict=True), n)


def _sizes(p: Prefixes) -> np.ndarray:
    return p.sizes


def _selected(p: Prefixes) -> np.ndarray:
    """The texts whose prefix pairs make signatures: two prefix entries or more, not a long prefix
    (those take the single-shingle path)."""
    return np.flatnonzero(~(p.ext > LONG_PREFIX) & (np.diff(p.offs) >= 2))


def _plan(p: Prefixes, partitions: int) -> tuple[np.ndarray, Packing, int] | None:
    """The signature shuffle's map blocks (cuts into _selected(p)), packing and partition count; None
    where no text makes a signature. Two partitions per worker CPU (`partitions`), more where a
    partition would hold over SIG_BLOCK signatures; at least one map block per partition, at most
    GEN_BLOCK signatures each."""
    sel = _selected(p)
    if not sel.size:
        return None
    plen = np.diff(p.offs)[sel]
    n_sig = plen * (plen - 1) // 2
    total = int(n_sig.sum())
    parts = max(partitions, -(-total // SIG_BLOCK))
    block = max(1, min(GEN_BLOCK, -(-total // parts)))
    ends = np.searchsorted(np.cumsum(n_sig), np.arange(1, -(-total // block) + 1) * block, side="left")
    cuts = np.unique(np.concatenate([[0], np.minimum(ends + 1, sel.size)]))
    pack = Packing(max(int(p.sizes.size - 1).bit_length(), 1), max(int(p.ext[sel].max() - 1).bit_length(), 1))
    return cuts, pack, parts


def _bound(c: np.ndarray, p: Prefixes, threshold: float) -> np.ndarray:
    return c[sketch_ok(c, p, threshold)]


def _single(p: Prefixes, threshold: float) -> np.ndarray:
    """The single-shingle path of candidates.find_candidates (tiny texts and long prefixes)."""
    from claimcheck.engine.audit.neardup import kernels

    sizes, plen = p.sizes, np.diff(p.offs)
    doc = np.repeat(np.arange(sizes.size, dtype=np.int32), plen)
    tiny = sizes <= (1 + threshold) / threshold - 1 + 1e-9
    big = p.ext > LONG_PREFIX
    single = tiny[doc] | big[doc]
    if not single.any():
        return np.empty(0, dtype=np.uint64)
    if kernels.available():
        codes = kernels.single_pairs(p.tok, doc, p.rank, single, sizes, tiny, big, threshold)
    else:
        codes = _single_pairs(p, doc, single, tiny, big, threshold)
    return _bound(codes, p, threshold)


def _sig_map(p: Prefixes, lo: int, hi: int, pack: Packing, parts: int) -> tuple[np.ndarray, ...]:
    """The prefix-pair signatures of texts _selected(p)[lo:hi], one array per partition."""
    sel = _selected(p)[lo:hi]
    t0, t1 = int(sel[0]), int(sel[-1]) + 1
    lo_e, hi_e = int(p.offs[t0]), int(p.offs[t1])
    # The entries of texts t0..t1-1 only, with offsets made relative to them.
    local = p._replace(tok=p.tok[lo_e:hi_e], rank=p.rank[lo_e:hi_e], offs=p.offs - lo_e)
    doc = np.repeat(np.arange(t0, t1, dtype=np.int32), np.diff(p.offs[t0 : t1 + 1]))
    sig, high = _pair_signatures(local, doc, sel, pack)
    part = ((high * np.uint64(parts)) >> np.uint64(32)).astype(np.int64)
    # A stable sort of 16-bit keys is numpy's radix sort (as candidates.shard_passes sorts its passes).
    order = np.argsort(part.astype(np.uint16 if parts <= 1 << 16 else np.uint32), kind="stable")
    cuts = np.cumsum(np.bincount(part, minlength=parts))[:-1]
    return tuple(np.split(sig[order], cuts))


def _sig_reduce(p: Prefixes, pack: Packing, threshold: float, *parts: np.ndarray) -> np.ndarray:
    """One partition of signatures from every map task: sorted, matched, bounded."""
    packed = np.concatenate([np.empty(0, dtype=np.uint64), *parts])
    bound = functools.partial(_bound, p=p, threshold=threshold)
    # The local search's matching of one pass (the compiled pair loop bounded by the sketches where built).
    out = match_pass((packed, pack), p.sizes, threshold, bound, Sketches(p.sketch, nibbles=False))
    return unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


def _one_task(p: Prefixes, threshold: float) -> np.ndarray:
    """Every candidate in one task (a cluster of one worker CPU): the local search's passes
    (candidates._signature_passes, match_pass), one at a time in this task, and the single-shingle
    path; the same set as the shuffle's, without moving the signatures through the object store."""
    sel = _selected(p)
    out = [_single(p, threshold)]
    if sel.size:
        doc = np.repeat(np.arange(p.sizes.size, dtype=np.int32), np.diff(p.offs))
        sketches = Sketches(p.sketch, nibbles=False)
        bound = functools.partial(_bound, p=p, threshold=threshold)
        for part in _signature_passes(p, doc, sel, SIG_BLOCK, GEN_BLOCK):
            out.extend(match_pass(part, p.sizes, threshold, bound, sketches))
    return unique(np.concatenate(out))


def _verify(
    frame: pl.DataFrame | TextStore, columns: list[str], codes: np.ndarray, sizes: np.ndarray, k: int
) -> np.ndarray:
    """Exact Jaccard of a block's candidate pairs (codes over the block's own texts, `frame`'s rows;
    or the rows to read, shared.rows_of)."""
    frame = shared.frame_of(frame, columns)
    texts = Texts(frame, columns, np.arange(frame.height, dtype=np.int64))
    return verify_pairs(texts, codes, sizes, k)[2]


# ---------------------------------------------------------------- driver


def near_duplicates(
    ray: Any,
    cluster: Cluster,
    df: pl.DataFrame,
    text_columns: list[str],
    *,
    row_id: str = "row_id",
    threshold: float = 0.8,
    shingle_size: int = 5,
    store: TextStore | None = None,
) -> NearDupResult:
    """engine.audit.neardup.near_duplicates with its steps as Ray tasks on `cluster` (module docstring).
    `store`: the text columns stay on disk and `df` holds stand-ins (engine/audit/textstore.py)."""
    if df.height == 0 or not text_columns:
        return NearDupResult(_no_pairs(), 0, 0, 0, 0)
    if shared.wanted(cluster, store):
        shared.check(ray, store)  # type: ignore[arg-type]
    with small_pages():
        got = row_hashes_and_bytes(df, text_columns, store)
        texts, rows, text_of = distinct_texts(
            df, text_columns, row_id, None if got is None else got[0], store
        )
        # Each text's bytes, from the row hashes' read of the texts (not a second read of the store).
        nbytes = None if got is None else got[1][texts.reps]
        del got
        p = _prefixes(ray, cluster, texts, shingle_size, threshold, nbytes)
        codes = _candidates(ray, cluster, p, threshold)
        sizes = ray.get(remote(ray, _sizes).remote(p))
        del p
        a, b = split_codes(codes)
        jac = _verified(ray, cluster, texts, codes, sizes, shingle_size)
    hit = jac >= threshold - 1e-12
    a, b, jac = a[hit], b[hit], jac[hit]
    return NearDupResult(
        _expand(rows, text_of, a, b, jac), texts.len(), int(codes.size), int(a.size), int(sizes.sum())
    )


def _task_texts(cluster: Cluster, texts: Texts, idx: np.ndarray) -> pl.DataFrame | TextStore:
    """What a task is sent for the text columns of texts `idx` (ascending; their first rows): the rows,
    read from the store where they stay on disk, or where the tasks read the spill file themselves
    (shared.py) the rows' ids."""
    if shared.wanted(cluster, texts.store):
        return shared.rows_of(texts.store, texts.reps[idx])  # type: ignore[arg-type]
    return texts.rows(idx)


def pass_bounds(texts: Texts, cluster: Cluster, nbytes: np.ndarray | None = None) -> list[tuple[int, int]]:
    """The chunks of passes 1 and 2: at least two per worker where the texts allow (1,000 texts at the
    least), at most the local search's CHUNK_TEXTS. `nbytes`: each text's bytes where the caller has
    them (else read from the texts)."""
    split = max(1, min(CHUNK_TEXTS // 1000, -(-2 * cluster.workers * CHUNK_TEXTS // max(texts.len(), 1))))
    return chunks(texts, split, nbytes)


def _prefixes(
    ray: Any, cluster: Cluster, texts: Texts, k: int, threshold: float, nbytes: np.ndarray | None = None
) -> Any:
    """Passes 1 and 2 (module docstring, steps 1-2): the object-store reference of the Prefixes."""
    if shared.one_task(cluster, texts.store):
        # One worker: the passes' chunks would run one after another anyway; one task runs them as the
        # local search does, its hashed shingles in a temporary file, not moved through the object store.
        store = None if texts.store is None else shared.whole(texts.store)
        return remote(ray, _built).remote(
            Texts(texts.frame, texts.columns, texts.reps, store), k, threshold, nbytes
        )
    n = texts.len()
    bounds = pass_bounds(texts, cluster, nbytes)
    p1 = remote(ray, _pass1, num_returns=COUNT_RANGES + 1)
    outs = [
        p1.remote(
            _task_texts(cluster, texts, np.arange(lo, hi, dtype=np.int64)), texts.columns, k, COUNT_RANGES
        )
        for lo, hi in bounds
    ]
    # The count table's shuffle: reducer r sums bucket range r of every chunk; one task joins the ranges.
    summed = remote(ray, _count_range)
    table = remote(ray, _join).remote(*[summed.remote(r, *[o[r] for o in outs]) for r in range(COUNT_RANGES)])
    p2 = remote(ray, _pass2)
    done = [p2.remote(o[-1], hi - lo, table, threshold) for (lo, hi), o in zip(bounds, outs, strict=True)]
    del outs, table
    return remote(ray, _assembled).remote(bounds, n, *done)


def _candidates(ray: Any, cluster: Cluster, p_ref: Any, threshold: float) -> np.ndarray:
    """find_candidates with the signature shuffle done by Ray (module docstring, step 3); `p_ref`: the
    object-store reference of the Prefixes."""
    if cluster.workers == 1:
        return ray.get(remote(ray, _one_task).remote(p_ref, threshold))
    refs = [remote(ray, _single).remote(p_ref, threshold)]
    plan = ray.get(remote(ray, _plan).remote(p_ref, cluster.partitions))
    if plan is not None:
        cuts, pack, parts = plan
        smap = remote(ray, _sig_map, num_returns=parts)
        maps = [
            smap.remote(p_ref, lo, hi, pack, parts)
            for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
        ]
        sred = remote(ray, _sig_reduce)
        refs += [sred.remote(p_ref, pack, threshold, *[m[r] for m in maps]) for r in range(parts)]
    out = ray.get(refs)
    return unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


def _verified(
    ray: Any, cluster: Cluster, texts: Texts, codes: np.ndarray, sizes: np.ndarray, k: int
) -> np.ndarray:
    """Exact Jaccard of every candidate, in codes' order (module docstring, step 4)."""
    if codes.size == 0:
        return np.zeros(0, dtype=np.float64)
    a, b = split_codes(codes)
    work = np.cumsum(sizes[a] + sizes[b])
    blocks = max(cluster.workers, -(-int(work[-1]) // VERIFY_SHINGLES))
    marks = np.searchsorted(work, np.arange(1, blocks) * (work[-1] / blocks)) + 1
    stops = np.unique(np.append(np.minimum(marks, a.size), a.size))
    task = remote(ray, _verify)
    refs, lo = [], 0
    for hi in stops.tolist():
        if hi <= lo:
            continue
        pa, pb = a[lo:hi], b[lo:hi]
        docs = unique(np.concatenate([pa, pb]))
        ia, ib = np.searchsorted(docs, pa), np.searchsorted(docs, pb)
        local = (ia.astype(np.uint64) << np.uint64(32)) | ib.astype(np.uint64)
        refs.append(task.remote(_task_texts(cluster, texts, docs), texts.columns, local, sizes[docs], k))
        lo = hi
    return np.concatenate(ray.get(refs))
