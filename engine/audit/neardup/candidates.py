"""Candidate pairs of the near-duplicate search: texts that share an ordered pair of extended-prefix
shingles (or one shingle, for tiny and long texts), kept only if the length, positional and sketch
bounds allow the threshold. A superset of the true pairs; verify.py decides."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from claimcheck.engine import threads
from claimcheck.engine.audit.neardup import kernels
from claimcheck.engine.audit.neardup.arrays import pair_codes, ranges, scratch, split_codes, unique
from claimcheck.engine.audit.neardup.ondisk import DiskPrefixes
from claimcheck.engine.audit.neardup.shingles import Prefixes
from claimcheck.engine.threads import ordered_map

PAIR_BLOCK = 1_000_000  # candidate pairs generated at a time
SKETCH_CHUNK = 100_000  # candidate pairs bounded at a time (two 64-byte sketches each)
ENTRY_ROW_BYTES = 16 << 20  # a pass's sketch rows gathered per entry for the compiled pair loop, at most
SIG_BLOCK = 3_000_000  # prefix-pair signatures held for matching at a time (over all worker threads)
GEN_BLOCK = 2_000_000  # prefix-pair signatures generated at a time (bounds the temporaries)
BOUNDED_SIG_BLOCK = 500_000  # signatures per shard (pass), and generated at a time, on the bounded path
LONG_PREFIX = 32  # texts with longer extended prefixes are matched by single shared shingles
_PAIR_MIX = np.uint64(0xBF58476D1CE4E5B9)  # odd: the second shingle's hash times it, xor the first's


def _bound(sa: np.ndarray, sb: np.ndarray, m: np.ndarray, threshold: float) -> np.ndarray:
    """Whether two sets of sizes sa, sb can reach the threshold, given the per-bucket minimum counts m
    of their sketches (common shingles share a bucket: |x & y| <= sum of the minima)."""
    # A saturated bucket (255 on both sides) bounds nothing: count it as unlimited.
    ub = m.sum(axis=1, dtype=np.int64) + (m == 255).any(axis=1) * (1 << 40)
    return _reaches(sa, sb, ub, threshold)


def _reaches(sa: np.ndarray, sb: np.ndarray, ub: np.ndarray, threshold: float) -> np.ndarray:
    inter = np.minimum(ub, np.minimum(sa, sb))
    return inter >= threshold * (sa + sb - inter) - 1e-9


def _wide_bound(
    sa: np.ndarray, sb: np.ndarray, wa: np.ndarray, wb: np.ndarray, p: Prefixes | DiskPrefixes, t: float
) -> np.ndarray:
    """_bound on the wide sketches. The minima are summed 256 buckets at a time in uint16 (at most
    256 * 255 fits), and a pair whose texts both have a saturated bucket anywhere is not bounded."""
    m = np.minimum(*_rows(p, wa, wb, wide=True))
    ub = m.reshape(m.shape[0], -1, 256).sum(axis=2, dtype=np.uint16).sum(axis=1, dtype=np.int64)
    ub += (p.wide_full[wa] & p.wide_full[wb]) * (1 << 40)
    return _reaches(sa, sb, ub, t)


def sketch_ok(
    codes: np.ndarray,
    p: Prefixes | DiskPrefixes,
    threshold: float,
    rows: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
) -> np.ndarray:
    """Exact upper bound on the Jaccard from the bucket sketches (and, where both texts have one, the
    wide sketches): False for pairs that cannot reach t. `rows(a, b)` gives texts a and b's 64-byte
    sketches where the caller holds them (blockjoin.py), else they come from `p`."""
    keep = np.ones(codes.size, dtype=bool)
    for lo in range(0, codes.size, SKETCH_CHUNK):
        c = codes[lo : lo + SKETCH_CHUNK]
        a, b = split_codes(c)
        sa, sb = p.sizes[a], p.sizes[b]
        held = rows(a, b) if rows is not None else _rows(p, a, b, wide=False)
        ok = _bound(sa, sb, np.minimum(*held), threshold)
        del held
        wa, wb = p.wide_of[a], p.wide_of[b]
        both = np.flatnonzero(ok & (wa >= 0) & (wb >= 0))
        for w in range(0, both.size, SKETCH_CHUNK // 32):  # 2 KB sketches: fewer pairs at a time
            i = both[w : w + SKETCH_CHUNK // 32]
            ok[i] = _wide_bound(sa[i], sb[i], wa[i], wb[i], p, threshold)
        keep[lo : lo + c.size] = ok
    return keep


def _rows(
    p: Prefixes | DiskPrefixes, a: np.ndarray, b: np.ndarray, *, wide: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The sketches (or wide sketches, by wide row) of texts a and b: held, or the wide ones read from
    disk (a DiskPrefixes' 64-byte sketches come through sketch_ok's `rows`, blockjoin.py)."""
    if isinstance(p, DiskPrefixes):
        return p.wide_pairs(a, b)
    held = p.wide if wide else p.sketch
    return np.take(held, a, axis=0), np.take(held, b, axis=0)  # row gathers: faster than held[a]


def _length_ok(a: np.ndarray, b: np.ndarray, sizes: np.ndarray, threshold: float) -> np.ndarray:
    sa, sb = sizes[a], sizes[b]
    return np.minimum(sa, sb) >= threshold * np.maximum(sa, sb) - 1e-9


def _repeated(key: np.ndarray) -> np.ndarray:
    """Of sorted keys, those held by two entries or more (most occur once)."""
    same = key[1:] == key[:-1]
    shared = np.zeros(key.size, dtype=bool)
    shared[1:] = same
    shared[:-1] |= same
    return shared


def _run_index(key: np.ndarray) -> np.ndarray:
    """Of sorted keys, each entry's run number (entries with equal keys form one run)."""
    new_run = np.ones(key.size, dtype=bool)
    new_run[1:] = key[1:] != key[:-1]
    return np.cumsum(new_run) - 1


class Runs(NamedTuple):
    """Entries grouped in runs of one key, each run sorted by text size: `combo` packs the key's high
    bits above `shift` bits of size, so one sort does both and a searchsorted finds a size bound."""

    combo: np.ndarray
    doc: np.ndarray
    pos: np.ndarray  # int64
    shift: int


def _shared_with(
    tok: np.ndarray,
    doc: np.ndarray,
    pos: np.ndarray,
    single: np.ndarray,
    sizes: np.ndarray,
    shift: int | None = None,
) -> Runs:
    """The entries whose shingle is also held by a `single` entry, in runs of one shingle held by two
    entries or more, each run sorted by size (one sort of the packed (shingle, size) key).

    The key keeps the shingle hash's high 64 - shift bits: two shingles whose kept bits collide share a
    run and only add pairs (and shared counts), which the later filters or verification drop.
    Where most entries are single (long documents), every entry takes part and the runs without a
    single entry are dropped; otherwise (tickets: a few tiny texts) the few single shingles are looked
    up in their sorted uniques by binary search first. A given `shift` (a shard of the entries, by
    their shingle's high 32 bits: sharded.py) means every entry takes part, keyed with that shift.
    """
    if shift is None and 2 * int(single.sum()) < single.size:
        u = unique(tok[single])
        at = np.minimum(np.searchsorted(u, tok), u.size - 1)
        part = np.flatnonzero(u[at] == tok)
        tok, doc, pos, single = tok[part], doc[part], pos[part], single[part]
    s = sizes[doc]
    if shift is None:
        shift = max(int(s.max()).bit_length(), 1) if s.size else 1
    combo = ((tok >> np.uint64(shift)) << np.uint64(shift)) | s.astype(np.uint64)
    order = np.argsort(combo)
    combo, own, at, mine = combo[order], doc[order], pos[order].astype(np.int64), single[order]
    del order
    key = combo >> np.uint64(shift)
    run = _run_index(key)
    has = np.zeros(int(run[-1]) + 1 if run.size else 0, dtype=bool)
    has[run[mine]] = True
    keep = has[run] & _repeated(key)
    return Runs(combo[keep], own[keep], at[keep], shift)


def _block_pairs(later: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Entry pairs (i, i+1 .. i+later[i]) of the sorted entries, as (left, right) index blocks of about
    PAIR_BLOCK pairs each, made one at a time, so that no more than a block of pairs is ever held."""
    n = later.size
    cum = np.cumsum(later)
    start = int(np.searchsorted(cum, 0, side="right"))
    while start < n:
        base = cum[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(cum, base + PAIR_BLOCK, side="right")))
        lat = later[start:stop]
        left = np.repeat(np.arange(start, stop, dtype=np.int64), lat)
        yield left, left + 1 + ranges(np.zeros(lat.size, dtype=np.int64), lat)
        start = stop


def _merge_counts(blocks: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """(codes, counts) blocks → each distinct code once, with its counts summed over the blocks."""
    if not blocks:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    codes = np.concatenate([c for c, _ in blocks])
    counts = np.concatenate([n for _, n in blocks])
    blocks.clear()
    order = np.argsort(codes)
    codes, counts = codes[order], counts[order]
    if codes.size == 0:
        return codes, counts
    start = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
    return codes[start], np.add.reduceat(counts, start)


def _positional_pairs(
    key: np.ndarray, doc: np.ndarray, pos: np.ndarray, sizes: np.ndarray, threshold: float
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Text pairs sharing a key that pass the length and positional filters, per block as (sorted
    codes, how many entries of the block made each pair).

    `pos` is the position in its text's ordered set of a signature's second shingle, or of a single
    shared shingle. The first and the second common shingle of a true pair sit at positions
    <= |x| + 1 - alpha in each text, since at least alpha - 2 common shingles must still follow them
    (alpha - 1 after the first). With alpha = ceil(t(|x|+|y|)/(1+t)) this bounds the partner's size:
    |y| <= (|x| + 1 - pos)(1+t)/t - |x|. So each run is sorted by size and every entry is paired only
    with the later entries up to its own bound (the other side's bound is checked on the pairs made):
    templated text's long runs of one signature no longer make every pair of the run.
    """
    if key.size < 2:
        return []
    return _run_pairs(_size_runs(key, doc, pos, sizes), sizes, threshold)


def _size_runs(key: np.ndarray, doc: np.ndarray, pos: np.ndarray, sizes: np.ndarray) -> Runs:
    """Entries of sorted keys in runs of one key, each run sorted by text size."""
    run = _run_index(key)
    s = sizes[doc]
    shift = max(int(s.max()).bit_length(), 1)
    combo = (run << shift) | s
    order = np.argsort(combo)  # runs stay in place (run is sorted); within each, by size
    return Runs(combo[order], doc[order], pos[order].astype(np.int64), shift)


def _run_ends(r: Runs, sizes: np.ndarray, t: float) -> np.ndarray:
    """Per entry, the end of the later entries of its run within its size bound (see _positional_pairs)."""
    doc, p = r.doc, r.pos
    s = sizes[doc]
    # Generous by 1e-3 (sizes are integers): the exact filters decide.
    hi = np.floor(np.minimum((s + 1 - p) * (1 + t) / t - s, s / t) + 1e-3)
    hi = np.clip(hi, 0, (1 << r.shift) - 1).astype(r.combo.dtype)
    base = (r.combo >> r.combo.dtype.type(r.shift)) << r.combo.dtype.type(r.shift)
    return np.searchsorted(r.combo, base | hi, side="right")


def _run_pairs(r: Runs, sizes: np.ndarray, t: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """_positional_pairs on entries already in runs sorted by size."""
    n = r.combo.size
    if n < 2:
        return []
    doc, p = r.doc, r.pos
    later = np.maximum(_run_ends(r, sizes, t) - np.arange(n) - 1, 0)
    out = []
    for left, right in _block_pairs(later):
        a, b = doc[left], doc[right]
        sa, sb = sizes[a], sizes[b]
        alpha = np.ceil(t * (sa + sb) / (1 + t) - 1e-9).astype(np.int64)
        ok = (a != b) & _length_ok(a, b, sizes, t)
        ok &= (p[left] <= sa + 1 - alpha) & (p[right] <= sb + 1 - alpha)
        codes = np.sort(pair_codes(a[ok], b[ok]))
        if codes.size == 0:
            continue
        start = np.flatnonzero(np.concatenate([[True], codes[1:] != codes[:-1]]))
        out.append((codes[start], np.diff(np.append(start, codes.size))))
    return out


class Packing(NamedTuple):
    """A prefix-pair signature packed in one uint64, so that one plain sort groups them (no argsort and
    gathers): the pair's hash in the high bits, then its text, then the position of its second shingle.
    The hash keeps 64 - doc_bits - pos_bits bits; two pairs whose kept bits collide only add a candidate,
    which the filters or verification drop."""

    doc_bits: int
    pos_bits: int

    @property
    def low(self) -> int:
        return self.doc_bits + self.pos_bits

    def unpack(self, packed: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sorted packed signatures → key, text and position of the shared ones."""
        key = packed >> np.uint64(self.low)
        shared = _repeated(key)
        key, packed = key[shared], packed[shared]
        doc = ((packed >> np.uint64(self.pos_bits)) & np.uint64((1 << self.doc_bits) - 1)).astype(np.int64)
        return key, doc, (packed & np.uint64((1 << self.pos_bits) - 1)).astype(np.int64)


def _pair_signatures(
    p: Prefixes, doc: np.ndarray, sel: np.ndarray, pack: Packing
) -> tuple[np.ndarray, np.ndarray]:
    """Each ordered pair (i < j) of prefix shingles of each selected text, packed (see Packing), and
    the pass its hash falls in as a fraction of 2^32 (its high 32 bits)."""
    plen = p.offs[sel + 1] - p.offs[sel]
    # Entry e pairs with e+1 .. the end of its text's prefix.
    entry = ranges(p.offs[sel], plen)
    later = np.repeat(p.offs[sel] + plen, plen) - entry - 1
    left = np.repeat(entry, later)
    right = left + 1 + ranges(np.zeros(later.size, dtype=np.int64), later)
    del entry, later
    return packed_pairs(p, doc, left, right, pack)


def packed_pairs(
    p: Prefixes, doc: np.ndarray, left: np.ndarray, right: np.ndarray, pack: Packing
) -> tuple[np.ndarray, np.ndarray]:
    """Entry pairs (left before right in one text) as signatures packed (see Packing), and the pass
    each hash falls in as a fraction of 2^32 (its high 32 bits)."""
    # Shingle hashes are already well mixed; a collision only adds a candidate, which verification drops.
    with np.errstate(over="ignore"):
        sig = p.tok[right] * _PAIR_MIX
    sig ^= p.tok[left]
    high = sig >> np.uint64(32)
    sig <<= np.uint64(pack.low)
    sig |= doc[left].astype(np.uint64) << np.uint64(pack.pos_bits)
    sig |= p.rank[right].astype(np.uint64)
    return sig, high


def _signature_passes(
    p: Prefixes, doc: np.ndarray, sel: np.ndarray, block: int = SIG_BLOCK, gen_block: int = GEN_BLOCK
) -> Iterator[tuple[np.ndarray, Packing]]:
    """The prefix-pair signatures of the texts `sel`, packed (see Packing) and unsorted, one pass over a
    disjoint range of keys at a time: at most ~SIG_BLOCK are held (find_candidates sorts and matches each).

    Signatures are generated once, a block of texts at a time, and each block is written to one
    temporary file per pass: reading a pass back costs far less than generating every signature again
    for each pass.
    """
    if sel.size == 0:
        return
    plen = np.diff(p.offs)[sel]
    n_sig = plen * (plen - 1) // 2
    total = int(n_sig.sum())
    passes = max(1, -(-total // block))
    n_gen = max(1, -(-total // gen_block))
    blocks = np.searchsorted(np.cumsum(n_sig), np.arange(1, n_gen + 1) * gen_block, side="left")
    bounds = np.unique(np.concatenate([[0], np.minimum(blocks + 1, sel.size)]))
    # A second shingle's position is below its text's extended prefix length (<= LONG_PREFIX here).
    pack = Packing(max(int(p.sizes.size - 1).bit_length(), 1), max(int(p.ext[sel].max() - 1).bit_length(), 1))
    gen = (_pair_signatures(p, doc, sel[lo:hi], pack) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))
    yield from shard_passes(gen, passes, pack)


def shard_passes(
    gen: Iterable[tuple[np.ndarray, np.ndarray]], passes: int, pack: Packing
) -> Iterator[tuple[np.ndarray, Packing]]:
    """Generated blocks of (packed signatures, their hashes' high 32 bits) → the signatures of one pass
    (a disjoint range of hashes) at a time: all at once where there is one pass, else each block split
    into one temporary file per pass and the files read back in turn."""
    if passes == 1:
        yield np.concatenate([np.empty(0, dtype=np.uint64), *(sig for sig, _ in gen)]), pack
        return
    with scratch() as tmp:
        paths = [Path(tmp) / f"pass{r}.sig" for r in range(passes)]
        if kernels.available():
            kernels.scatter(gen, paths)  # one compiled loop a block, not a write per pass and block
        else:
            _split_to_files(gen, paths)
        for path in paths:
            packed = np.fromfile(path, dtype=np.uint64)
            path.unlink()
            yield packed, pack


def _split_to_files(gen: Iterable[tuple[np.ndarray, np.ndarray]], paths: list[Path]) -> None:
    """kernels.scatter in numpy: each block sorted by pass and split, a write per pass and block."""
    passes = len(paths)
    files = [path.open("wb") for path in paths]
    try:
        for sig, high in gen:
            # The pass: the hash's high bits scaled to [0, passes) (multiply-shift, no division).
            part = ((high * np.uint64(passes)) >> np.uint64(32)).astype(np.int64)
            order = np.argsort(part.astype(np.uint16 if passes <= 1 << 16 else np.uint32), kind="stable")
            cuts = np.cumsum(np.bincount(part, minlength=passes))[:-1]
            # A pass's chunk is small where the passes are many: the files' buffers gather
            # them (ndarray.tofile would make several system calls for each).
            for f, chunk in zip(files, np.split(sig[order], cuts), strict=True):
                f.write(chunk)
            del sig, high, part, order
    finally:
        for f in files:
            f.close()


def _single_pairs(
    p: Prefixes, doc: np.ndarray, single: np.ndarray, tiny: np.ndarray, big: np.ndarray, threshold: float
) -> np.ndarray:
    """The single-shingle path's pairs before the sketch bound (kernels.single_pairs is the same in C)."""
    return _numpy_single_pairs(p.tok, doc, p.rank, single, (p.sizes, tiny, big), threshold)


def single_pairs_of(
    tok: np.ndarray,
    doc: np.ndarray,
    rank: np.ndarray,
    single: np.ndarray,
    texts: tuple[np.ndarray, np.ndarray, np.ndarray],
    threshold: float,
) -> np.ndarray:
    """_single_pairs on prefix entries given apart (tok, doc, rank, single each) and per text
    (sizes, tiny, big): in the compiled loops where they were built."""
    if kernels.available():
        return kernels.single_pairs(tok, doc, rank, single, *texts, threshold)
    return _numpy_single_pairs(tok, doc, rank, single, texts, threshold)


def _numpy_single_pairs(
    tok: np.ndarray,
    doc: np.ndarray,
    rank: np.ndarray,
    single: np.ndarray,
    texts: tuple[np.ndarray, np.ndarray, np.ndarray],
    threshold: float,
) -> np.ndarray:
    sizes, tiny, big = texts
    # Shared shingles that fail the positional filter are not counted (see find_candidates).
    pairs = _run_pairs(_shared_with(tok, doc, rank, single, sizes), sizes, threshold)
    # Keep only pairs where a side needs the single-shingle rule, and that share min(2, alpha) prefix
    # shingles (see find_candidates): one shared common shingle is not enough for long texts.
    codes, shared = _merge_counts(pairs)
    a, b = split_codes(codes)
    alpha = np.ceil(threshold * (sizes[a] + sizes[b]) / (1 + threshold) - 1e-9).astype(np.int64)
    keep = ((tiny[a] & tiny[b]) | big[a] | big[b]) & (shared >= np.minimum(2, alpha))
    return codes[keep]


class Sketches(NamedTuple):
    """Per-text sketch rows that the compiled pair loop bounds its pairs by (kernels.run_pairs): the
    held 64-byte sketches (Prefixes.sketch, buckets saturating at 255), or the coarse sketches
    (DiskPrefixes.coarse, two 4-bit buckets a byte saturating at 15). The same bound as _bound or
    blockjoin.coarse_ok, looser than or equal to the `bound` that runs on the pairs kept."""

    rows: np.ndarray
    nibbles: bool


def match_pass(
    part: tuple[np.ndarray, Packing],
    sizes: np.ndarray,
    threshold: float,
    bound: Callable[[np.ndarray], np.ndarray],
    sketches: Sketches | None = None,
    size_bits: int | None = None,
) -> list[np.ndarray]:
    """One pass of packed signatures: sorted, matched into text pairs, each block bounded by `bound`.

    With the compiled loops and `sketches`, the pairs are made, filtered and bounded by the sketches in
    one loop (kernels.run_pairs), so only the few that pass are held; the numpy path makes every pair
    of a block, and `bound` alone drops them (the same pairs in the end). `size_bits`: at least the bits
    of any text's size, where the caller has them (else each pass finds its own)."""
    packed, pack = part
    kernels.sort(packed) if kernels.available() else packed.sort()
    if sketches is None or not kernels.available():
        key, own, at = pack.unpack(packed)
        del packed
        return [bound(c) for c, _ in _positional_pairs(key, own, at, sizes, threshold)]
    # Packing.unpack and _size_runs in one compiled loop (the same runs; ties in size by text, position).
    r = Runs(*kernels.unpack_runs(packed, pack.low, pack.pos_bits, sizes, size_bits))
    del packed
    if r.doc.size < 2:
        return []
    rows, per_entry = sketches.rows, r.doc.size * sketches.rows.shape[1] <= ENTRY_ROW_BYTES
    if per_entry:  # the entries' rows in their order: the loop reads them in sequence
        rows = np.take(rows, r.doc, axis=0)  # (np.take: ~7x faster than rows[r.doc] on 8-byte rows)
    made = kernels.run_pairs(r, threshold, (rows, sketches.nibbles, per_entry), PAIR_BLOCK)
    return [bound(unique(c)) for c in made]


def find_candidates(p: Prefixes, threshold: float) -> np.ndarray:
    """Text pairs that may reach the threshold, as codes lo*2^32+hi (a superset of the true pairs).

    Extended-prefix rule: if J(x, y) >= t, x and y share at least min(2, alpha) shingles among their
    first |.| - ceil(t|.|) + 2, where alpha = ceil(t(|x|+|y|)/(1+t)) is the least overlap (the second
    common shingle lies within both extended prefixes). So texts must share an ordered pair of prefix
    shingles — keyed by one hash per pair, which is far more selective on templated text than one
    shared shingle. Texts with long prefixes (>= LONG_PREFIX shingles) are matched by single shared
    shingles instead, and so are tiny sets, where alpha can be 1. Only shingles another text may hold
    take part (c1 and c2 are common, so they are among them).
    Single-shingle path, positional filter (PPJoin, Xiao et al. 2008) before counting: a shared prefix
    shingle at positions i in x and j in y is counted only if alpha <= 1 + min(|x| - i, |y| - j). Lossless:
    if w is the k-th common shingle in the global order, |x & y| <= (k - 1) + min(|x| - i, |y| - j) (the
    k - 1 before it, then at most what follows it in either text, itself included), so the first two
    common shingles (k = 1, 2), which the min(2, alpha) rule needs, always pass. Positions are clamped to
    2^16 - 1, which only loosens the test. On templated long documents most pairs that share two prefix
    shingles share them late in their prefixes, and are never made.
    Each block's pairs are filtered by sketch_ok at once (the same final set as one filter at the
    end, but the many false candidates are never held together).
    """
    sizes = p.sizes

    def bound(c: np.ndarray) -> np.ndarray:
        return c[sketch_ok(c, p, threshold)]

    n = sizes.size
    plen = np.diff(p.offs)
    doc = np.repeat(np.arange(n, dtype=np.int32), plen)  # text indices fit (codes hold them in 32 bits)
    out: list[np.ndarray] = []
    tiny = sizes <= (1 + threshold) / threshold - 1 + 1e-9
    big = p.ext > LONG_PREFIX
    # 1. single shared shingle for pairs with a long-prefix or a tiny text (never both tiny and long).
    single = tiny[doc] | big[doc]
    if single.any():
        if kernels.available():
            out.append(bound(kernels.single_pairs(p.tok, doc, p.rank, single, sizes, tiny, big, threshold)))
        else:
            out.append(bound(_single_pairs(p, doc, single, tiny, big, threshold)))
    # 2. ordered pairs of prefix shingles, for texts with 2..LONG_PREFIX prefix shingles (tiny ones too:
    #    a tiny text can pair with a larger one, where alpha >= 2).
    sel = np.flatnonzero(~big & (plen >= 2))

    def matched(part: tuple[np.ndarray, Packing]) -> list[np.ndarray]:
        return match_pass(part, sizes, threshold, bound, Sketches(p.sketch, nibbles=False))

    # Passes are matched in worker threads (claimcheck.engine.threads): w in flight and the next being read, each
    # pass SIG_BLOCK / (w + 1) signatures. On 1M tickets' prefix pairs, one 6 M pass at a time took
    # 9.0 s (the search alone peaking +298 MB); two threads on 1 M passes took 5.2 s (+195 MB). The
    # source + split stages then peaked at 1,173 MB against 1,155 MB, 3.09x the data (bench/HISTORY.md,
    # audit round 10). The bounded path's passes are sharded.py's.
    workers = threads.thread_cap()
    block = max(1, SIG_BLOCK // (workers + 1))
    for res in ordered_map(matched, _signature_passes(p, doc, sel, block, GEN_BLOCK), workers):
        out.extend(res)
    return unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)
