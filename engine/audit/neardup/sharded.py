"""Candidate pairs on the bounded path, from the prefix entries and sketches on disk (ondisk.py): the
same codes as candidates.find_candidates, found shard by shard.

- Single-shingle path: where single entries (tiny or long-prefix texts) are the fewer, their shingles
  are gathered first, then only the entries holding one of them are read back (tickets: a few); else
  (long documents) the entries are read back one shard of shingle hashes at a time (_single_shards).
- Ordered pairs of prefix shingles: generated a span of texts at a time from the entry files and
  written to one file per pass of pair hashes (candidates.shard_passes: kernels.scatter), each pass
  matched in turn; the early signatures first, then only the late ones whose key an early one holds
  (_split_signatures, _EarlyKeys).
- The candidates are written to cell files by ranges of their two texts, and the sketch bounds then
  read each range's sketches once per filled cell (blockjoin.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from claimcheck.engine import threads
from claimcheck.engine.audit.budget import release_free_memory
from claimcheck.engine.audit.neardup import kernels
from claimcheck.engine.audit.neardup.arrays import ranges, scratch, split_codes, unique
from claimcheck.engine.audit.neardup.blockjoin import Cells, bound_cells, coarse_ok
from claimcheck.engine.audit.neardup.candidates import (
    _PAIR_MIX,
    BOUNDED_SIG_BLOCK,
    LONG_PREFIX,
    Packing,
    Sketches,
    _merge_counts,
    _run_pairs,
    _shared_with,
    match_pass,
    packed_pairs,
    shard_passes,
    single_pairs_of,
)
from claimcheck.engine.audit.neardup.ondisk import TRIM_EVERY, DiskPrefixes
from claimcheck.engine.audit.neardup.shingles import Prefixes
from claimcheck.engine.threads import ordered_map

Bound = Callable[[np.ndarray], np.ndarray]
BOUND_BATCH = 1_000_000  # candidate codes gathered before they are written to their cells (blockjoin.py)
EARLY_KEY_BITS = 4  # bits of the early signatures' bitmap per early signature (_EarlyKeys)
EARLY_KEY_BYTES = 16  # and at most this many bytes of it per text
_KEY_MIX = np.uint64(0x94D049BB133111EB)  # odd: a pass index times it, xor a packed key (_EarlyKeys)
SPLIT_ENTRIES = 500_000  # prefix entries split into the shard files at a time (~100 bytes each meanwhile)


def find_candidates(p: DiskPrefixes, threshold: float) -> np.ndarray:
    """candidates.find_candidates' codes on prefixes held on disk, in passes of BOUNDED_SIG_BLOCK: the
    candidates that pass the coarse bound are gathered in cell files, and the sketch bounds run after
    the passes (blockjoin.py)."""
    with scratch() as tmp:
        cells = Cells(Path(tmp), p.sizes.size)
        pending: list[np.ndarray] = []

        def flush() -> None:
            if pending:
                c = np.concatenate(pending)
                pending.clear()
                cells.add(unique(c[coarse_ok(c, p, threshold)]))  # the few kept, then sorted

        def gather(c: np.ndarray) -> np.ndarray:
            # Codes meet the coarse bound and are written BOUND_BATCH at a time (fewer, larger appends).
            pending.append(c)
            if sum(x.size for x in pending) >= BOUND_BATCH:
                flush()
            return c[:0]

        _gather(p, threshold, gather)
        flush()
        release_free_memory()
        out = bound_cells(cells, p, threshold)
    return unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


def _gather(p: DiskPrefixes, threshold: float, bound: Bound) -> None:
    """Every candidate code before the sketch bounds, a block at a time into `bound`."""
    sizes = p.sizes
    plen = np.diff(p.offs)
    tiny = sizes <= (1 + threshold) / threshold - 1 + 1e-9
    big = p.ext > LONG_PREFIX
    if (plen[tiny | big] > 0).any():
        _single(p, (sizes, tiny, big), threshold, bound)
    sel = np.flatnonzero(~big & (plen >= 2))
    size_bits = max(int(sizes[sel].max(initial=0)).bit_length(), 1)  # once, not a scan of sizes a pass
    release_free_memory()
    sketches = Sketches(p.coarse, nibbles=True)

    def matched(part: tuple[np.ndarray, Packing]) -> list[np.ndarray]:
        return match_pass(part, sizes, threshold, _as_made, sketches, size_bits)

    # Passes are matched in worker threads (claimcheck.engine.threads: the sort, the runs and the pair loop
    # are compiled and release the GIL) while the next pass file is read; their codes are bounded here,
    # in order, as each pass ends.
    for i, made in enumerate(ordered_map(matched, _passes(p, sel, threshold), threads.thread_cap())):
        for codes in made:
            bound(codes)
        if (
            i % TRIM_EVERY == TRIM_EVERY - 1
        ):  # the passes' temporaries, freed on the C heap, back to the system
            release_free_memory()


def _as_made(codes: np.ndarray) -> np.ndarray:
    return codes


def _single(
    p: DiskPrefixes, texts: tuple[np.ndarray, np.ndarray, np.ndarray], threshold: float, bound: Bound
) -> list[np.ndarray]:
    """The single-shingle path's candidates (candidates._single_pairs, then `bound`)."""
    _, tiny, big = texts
    single_text = tiny | big
    plen = np.diff(p.offs)
    if 2 * int(plen[single_text].sum()) >= int(p.offs[-1]):
        return _single_shards(p, texts, threshold, bound)
    # As candidates._shared_with does where single entries are the fewer: only the entries whose
    # shingle a single entry holds take part.
    parts = []
    for lo, hi in p.spans(np.where(single_text, plen, 0)):
        tok, _ = p.entries(lo, hi)
        parts.append(tok[single_text[np.repeat(np.arange(lo, hi), plen[lo:hi])]])
    held = unique(np.concatenate(parts))
    del parts
    toks, docs, ranks = [], [], []
    for lo, hi in p.spans():
        local, doc = p.local(lo, hi)
        at = np.minimum(np.searchsorted(held, local.tok), held.size - 1)
        keep = held[at] == local.tok
        toks.append(local.tok[keep])
        docs.append(doc[keep])
        ranks.append(local.rank[keep])
    tok, doc, rank = np.concatenate(toks), np.concatenate(docs), np.concatenate(ranks)
    del toks, docs, ranks
    return [bound(single_pairs_of(tok, doc, rank, single_text[doc], texts, threshold))]


def _single_shards(
    p: DiskPrefixes, texts: tuple[np.ndarray, np.ndarray, np.ndarray], threshold: float, bound: Bound
) -> list[np.ndarray]:
    """The single-shingle path where every entry takes part (long documents), one shard of shingle
    hashes at a time (by their high 32 bits, so entries whose keys collide share a shard), keyed with
    the shift the whole search would use. A pair's shared count is summed over the shards: a pair
    counted once in a shard where it needs two is written to a file by its own hash, and kept where
    it was counted in two shards or more."""
    sizes, tiny, big = texts
    plen = np.diff(p.offs)
    shards = max(1, -(-int(p.offs[-1]) // BOUNDED_SIG_BLOCK))
    shift = max(int(sizes[plen > 0].max()).bit_length(), 1)
    out: list[np.ndarray] = []
    with scratch() as tmp:
        entry_files = [Path(tmp) / f"entries{r}" for r in range(shards)]
        once_files = [Path(tmp) / f"once{r}" for r in range(shards)]
        _split_entries(p, entry_files)
        for path in entry_files:
            e = np.fromfile(path, dtype=_ENTRY)
            path.unlink()
            doc = e["doc"].astype(np.int64)
            runs = _shared_with(e["tok"], doc, e["rank"], tiny[doc] | big[doc], sizes, shift)
            del e, doc
            codes, shared = _merge_counts(_run_pairs(runs, sizes, threshold))
            del runs
            a, b = split_codes(codes)
            alpha = np.ceil(threshold * (sizes[a] + sizes[b]) / (1 + threshold) - 1e-9).astype(np.int64)
            need = (tiny[a] & tiny[b]) | big[a] | big[b]
            out.append(bound(codes[need & (shared >= np.minimum(2, alpha))]))
            _append_by_hash(codes[need & (shared < 2) & (alpha >= 2)], once_files)
        for path in once_files:
            codes = np.fromfile(path, dtype=np.uint64) if path.exists() else np.empty(0, dtype=np.uint64)
            codes.sort()
            twice = codes[1:][codes[1:] == codes[:-1]]
            out.append(bound(unique(twice)))
    return out


_ENTRY = np.dtype([("tok", "<u8"), ("doc", "<i4"), ("rank", "<u2")])
_CODE_MIX = np.uint64(0x9E3779B97F4A7C15)


def _split_entries(p: DiskPrefixes, files: list[Path]) -> None:
    """Every prefix entry (hash, text, position) into files[shard of its hash's high 32 bits]."""
    shards = len(files)
    handles = [f.open("wb") for f in files]
    try:
        for lo, hi in p.spans(most=SPLIT_ENTRIES):
            local, doc = p.local(lo, hi)
            part = (((local.tok >> np.uint64(32)) * np.uint64(shards)) >> np.uint64(32)).astype(np.int64)
            rec = np.empty(local.tok.size, dtype=_ENTRY)
            rec["tok"], rec["doc"], rec["rank"] = local.tok, doc, local.rank
            order = np.argsort(part, kind="stable")
            cuts = np.cumsum(np.bincount(part, minlength=shards))[:-1]
            for f, chunk in zip(handles, np.split(rec[order], cuts), strict=True):
                chunk.tofile(f)
    finally:
        for f in handles:
            f.close()


def _append_by_hash(codes: np.ndarray, files: list[Path]) -> None:
    """Pair codes appended to files[a partition of their hash] (every copy of a code in one file)."""
    if codes.size == 0:
        return
    with np.errstate(over="ignore"):
        mixed = codes * _CODE_MIX
    part = (((mixed >> np.uint64(32)) * np.uint64(len(files))) >> np.uint64(32)).astype(np.int64)
    order = np.argsort(part, kind="stable")
    cuts = np.cumsum(np.bincount(part, minlength=len(files)))[:-1]
    for path, chunk in zip(files, np.split(codes[order], cuts), strict=True):
        if chunk.size:
            with path.open("ab") as f:
                chunk.tofile(f)


def _passes(p: DiskPrefixes, sel: np.ndarray, threshold: float) -> Iterator[tuple[np.ndarray, Packing]]:
    """The prefix-pair signatures of the texts `sel` that can make a candidate (candidates.
    _signature_passes on the bounded path: the same passes), generated from the entry files a span of
    texts at a time: first every early signature, then the late ones whose key an early one holds
    (_EarlyKeys: a late one whose key no early one holds makes no candidate)."""
    if sel.size == 0:
        return
    n = p.sizes.size
    plen = np.diff(p.offs)
    n_sig = np.zeros(n, dtype=np.int64)
    n_sig[sel] = plen[sel] * (plen[sel] - 1) // 2
    passes = max(1, -(-int(n_sig.sum()) // BOUNDED_SIG_BLOCK))
    # A second shingle's position is below its text's extended prefix length (<= LONG_PREFIX here).
    pack = Packing(max(int(n - 1).bit_length(), 1), max(int(p.ext[sel].max() - 1).bit_length(), 1))
    s = p.sizes[sel]
    early_most = np.minimum(plen[sel], np.maximum(_early_bound(s, threshold) + 1, 0))
    keys = _EarlyKeys(int((early_most * (early_most - 1) // 2).sum()), n, passes, pack)

    def gen() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for late in (False, True):
            # Spans weighed by their signatures and entries (long-prefix texts' entries are read too).
            for lo, hi in p.spans(n_sig + plen, BOUNDED_SIG_BLOCK):
                mine = sel[np.searchsorted(sel, lo) : np.searchsorted(sel, hi)]
                if mine.size:
                    local, doc = p.local(lo, hi)
                    sig, high = _split_signatures(local, doc, mine - lo, (pack, threshold, late))
                    if late:
                        keep = keys.held(sig, high)
                        sig, high = sig[keep], high[keep]
                    else:
                        keys.add(sig, high)
                    yield sig, high
        keys.words = np.zeros(0, dtype=np.uint64)  # freed: not needed while the passes are matched

    yield from shard_passes(gen(), passes, pack)


def _early_bound(s: np.ndarray, t: float) -> np.ndarray:
    """The last position (0-based) of an early signature's second shingle in texts of sizes s: that of
    a true pair's second common shingle where the partner is no smaller (alpha >= ceil(2ts/(1+t)))."""
    return s + 1 - np.ceil(t * (2 * s) / (1 + t) - 1e-9).astype(np.int64)


def _split_signatures(
    p: Prefixes, doc: np.ndarray, sel: np.ndarray, how: tuple[Packing, float, bool]
) -> tuple[np.ndarray, np.ndarray]:
    """candidates._pair_signatures' signatures of the texts `sel`, the early or the late ones only.

    A signature (i < j) is early where its second shingle's position is at most _early_bound of its
    text. A candidate of texts x, y (|x| <= |y|) comes from signatures whose second shingles pass the
    positional filter, pos <= |.| + 1 - alpha with alpha = ceil(t(|x|+|y|)/(1+t)) >= ceil(2t|x|/(1+t))
    (the same float expression, monotone): x's signature is early. So a late signature makes a
    candidate only with an early one of the same key (the same run of a pass), and positions grow
    along a text's entries: its early signatures are those whose second entry is among its first e."""
    pack, t, late = how
    start, plen = p.offs[sel], p.offs[sel + 1] - p.offs[sel]
    entry = ranges(start, plen)
    early = p.rank[entry].astype(np.int64) <= np.repeat(_early_bound(p.sizes[sel], t), plen)
    cum = np.zeros(entry.size + 1, dtype=np.int64)
    np.cumsum(early, out=cum[1:])
    ends = np.cumsum(plen)
    e = cum[ends] - cum[ends - plen]  # early entries per text: its first e
    jlo, jhi = (np.maximum(e, 1), plen) if late else (np.ones_like(e), np.maximum(e, 1))
    cnt = jhi - jlo
    first = np.repeat(start, cnt)
    right = first + ranges(jlo, cnt)
    nl = right - first  # the right entry pairs with every entry before it in its text
    left = np.repeat(first, nl) + ranges(np.zeros(nl.size, dtype=np.int64), nl)
    right = np.repeat(right, nl)
    del entry, early, cum, first, nl
    return packed_pairs(p, doc, left, right, pack)


class _EarlyKeys:
    """A bitmap of the early signatures' keys, by (pass, packed key): the run a signature joins, so a
    late signature joins a run with an early one only where its bit is set (other keys setting it only
    keep more). About EARLY_KEY_BITS bits an early signature (bounded above by the texts' count: at most
    EARLY_KEY_BYTES a text)."""

    def __init__(self, early: int, n: int, passes: int, pack: Packing) -> None:
        most = max(1 << 16, EARLY_KEY_BYTES * 8 * n)
        want = max(1 << 16, EARLY_KEY_BITS * early)
        bits = min(1 << (want - 1).bit_length(), 1 << (most.bit_length() - 1))
        self.shift = np.uint64(64 - (bits.bit_length() - 1))
        self.words = np.zeros(bits // 64, dtype=np.uint64)
        self.passes, self.pack = np.uint64(passes), pack

    def _index(self, sig: np.ndarray, high: np.ndarray) -> np.ndarray:
        key = sig >> np.uint64(self.pack.low)
        part = (high * self.passes) >> np.uint64(32)
        with np.errstate(over="ignore"):
            return ((key ^ (part * _KEY_MIX)) * _PAIR_MIX) >> self.shift

    def add(self, sig: np.ndarray, high: np.ndarray) -> None:
        idx = self._index(sig, high)
        if kernels.available():
            kernels.bits_set(self.words, idx)
        else:
            np.bitwise_or.at(
                self.words, (idx >> np.uint64(6)).astype(np.int64), np.uint64(1) << (idx & np.uint64(63))
            )

    def held(self, sig: np.ndarray, high: np.ndarray) -> np.ndarray:
        idx = self._index(sig, high)
        if kernels.available():
            return kernels.bits_test(self.words, idx)
        word = self.words[(idx >> np.uint64(6)).astype(np.int64)]
        return ((word >> (idx & np.uint64(63))) & np.uint64(1)).astype(bool)
