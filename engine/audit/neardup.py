"""Near-duplicate text inputs: exact all-pairs Jaccard over word shingles by prefix filtering.

Definitions (docs/checks.md#source-near-duplicates):
- a row's text = its text columns, each normalised (lowercase, strip, whitespace runs → one space),
  joined by one space, nulls and empty values skipped;
- shingles = the set of `k` consecutive words (k=5); a text shorter than k words is one shingle;
- rows with the same normalised text columns are one *text* (exact duplicates are another check);
  a near-duplicate pair is two rows of different texts whose shingle sets have Jaccard >= t (0.8).

Shingles are hashed to 64 bits (Polars' seeded hash of each word; a shingle's hash is splitmix64 of
the sum of its word hashes, each times an odd constant of its position); Jaccard is computed exactly on
these 64-bit shingle hashes (a collision needs ~2^32 shingles).

Search — exact, no false negatives and no false positives: prefix filtering (Chaudhuri et al. 2006,
Bayardo et al. 2007). Put all shingles in one global order; if J(x, y) >= t then x and y share one of
the first |x| - ceil(t|x|) + 1 shingles of x and of y. Any fixed total order keeps this exact; ordering
rarest-first (by a hashed count table, which can only over-count) makes prefixes hold the rare
shingles, so templated text yields few candidates — unlike MinHash-LSH, which is probabilistic and
floods such text with false candidates. Candidates sharing a prefix shingle that pass the length
filter t·max(|x|,|y|) <= min(|x|,|y|) are verified by exact Jaccard.

Memory is bounded by a chunk of texts, not by the data: pass 1 hashes the shingles and fills the count
table, pass 2 keeps only each text's prefix (a few shingles), verification re-hashes just the texts that
appear in candidates. What would not fit that bound goes to temporary files (tempfile's folder, TMPDIR),
removed as soon as they are read: pass 1's shingle hashes for pass 2 (12 bytes a shingle) and the
prefix-pair signatures, one file per matching pass (8 bytes a signature) — about 0.6 GB at most for a
million ticket-length texts.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

import numpy as np
import polars as pl

from engine.audit.texts import Texts, distinct_texts
from engine.splits import splitmix64

METHOD = "prefix filtering (exact)"
_SEED = 20240917
_H0 = np.uint64(0x243F6A8885A308D3)
CHUNK_TEXTS = 25_000  # texts hashed at a time
COUNT_BITS = 23  # 8M-bucket frequency table (32 MB)
PAIR_BLOCK = 1_000_000  # candidate pairs generated at a time
VERIFY_SHINGLES = 4_000_000  # shingles re-hashed per verification block
SKETCH_BUCKETS = 64  # per-text shingle counts by hash bucket, for an exact overlap upper bound
SKETCH_CHUNK = 100_000  # candidate pairs bounded at a time (two 64-byte sketches each)
SIG_BLOCK = 6_000_000  # prefix-pair signatures matched at a time
GEN_BLOCK = 2_000_000  # prefix-pair signatures generated at a time (bounds the temporaries)
LONG_PREFIX = 32  # texts with longer extended prefixes are matched by single shared shingles


def _scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder for intermediate arrays that would not fit the memory bound (removed after)."""
    return tempfile.TemporaryDirectory(prefix="claimcheck-neardup-")


def _unique(x: np.ndarray) -> np.ndarray:
    """Sorted unique values by one sort (numpy 2.4's np.unique without return_inverse is far slower)."""
    if x.size == 0:
        return x
    s = np.sort(x)
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _unique_inverse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated aranges [s, s + c) for each (s, c), without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(starts - ends + counts, counts) + np.arange(total, dtype=np.int64)


@dataclass
class NearDupResult:
    # Row-level pairs (row ids, a < b) with their exact Jaccard.
    pairs: pl.DataFrame
    texts: int
    candidates: int
    verified_text_pairs: int
    shingles: int

    def recall_at(self, threshold: float) -> float:
        """Probability a pair with Jaccard = threshold is found: 1, the search is exact."""
        return 1.0


_M1, _M2, _GOLDEN = (
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
    np.uint64(0x9E3779B97F4A7C15),
)


def _mix(z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """engine.splits.splitmix64 in place (same values, no temporaries)."""
    with np.errstate(over="ignore"):
        z += _GOLDEN
        np.right_shift(z, np.uint64(30), out=tmp)
        z ^= tmp
        z *= _M1
        np.right_shift(z, np.uint64(27), out=tmp)
        z ^= tmp
        z *= _M2
        np.right_shift(z, np.uint64(31), out=tmp)
        z ^= tmp
    return z


def _position_weights(k: int) -> np.ndarray:
    """One odd 64-bit constant per word position of a shingle (odd: multiplying by it is a bijection)."""
    return splitmix64(np.arange(1, k + 1, dtype=np.uint64)) | np.uint64(1)


def _doc_shingles(texts: pl.Series, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every shingle's 64-bit hash and its text's index in `texts` (duplicates within a text kept).

    A shingle of words w_0..w_{m-1} (m = k, or fewer for a short text) hashes to
    splitmix64(H0 + sum_j C_j * hash(w_j)) with wrapping arithmetic: one finaliser per shingle instead of
    one per word position.
    """
    words = pl.DataFrame({"w": texts.str.split(" ")})
    lens = words.select(pl.col("w").list.len()).to_series().to_numpy().astype(np.int64)
    flat = words.select(pl.col("w").explode().hash(_SEED)).to_series().to_numpy()
    del words
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    weight = _position_weights(k)
    hs, ds = [], []
    long = lens >= k
    with np.errstate(over="ignore"):
        if long.any():
            # Shingle hashes at every word position from k shifted views of the word hashes (no gathers);
            # only positions whose k words lie inside one text are kept.
            m = flat.size - k + 1
            h = np.full(m, _H0, dtype=np.uint64)
            term = np.empty_like(h)
            for j in range(k):
                np.multiply(flat[j : j + m], weight[j], out=term)
                h += term
            _mix(h, term)
            del term
            docs = np.flatnonzero(long)
            n_sh = lens[docs] - k + 1
            hs.append(h[_ranges(offsets[docs], n_sh)])
            ds.append(np.repeat(docs, n_sh))
            del h
        if not long.all():
            # A text shorter than k words is one shingle: all its words.
            docs = np.flatnonzero(~long)
            width, start = lens[docs], offsets[docs]
            h = np.full(docs.size, _H0, dtype=np.uint64)
            for j in range(k):
                sel = j < width
                if not sel.any():
                    break
                h[sel] += flat[start[sel] + j] * weight[j]
            hs.append(splitmix64(h))
            ds.append(docs)
    return np.concatenate(hs), np.concatenate(ds)


def _dedupe(h: np.ndarray, d: np.ndarray, rank: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sort shingles by (text, rank, hash) and drop repeats of a shingle within a text."""
    cols = (
        {"d": d.astype(np.uint32), "h": h} if rank is None else {"d": d.astype(np.uint32), "r": rank, "h": h}
    )
    f = pl.DataFrame(cols).sort(list(cols))
    h, d = f.get_column("h").to_numpy(), f.get_column("d").to_numpy().astype(np.int64)
    del f
    keep = np.ones(h.size, dtype=bool)
    if h.size > 1:
        keep[1:] = (h[1:] != h[:-1]) | (d[1:] != d[:-1])
    return h[keep], d[keep]


class Prefixes(NamedTuple):
    """What candidate generation needs from pass 2, in text-major CSR form."""

    tok: np.ndarray  # hashes of the extended-prefix shingles another text may hold
    rank: np.ndarray  # each one's position in its text's ordered set (uint16), for the positional filter
    offs: np.ndarray  # tok[offs[i]:offs[i+1]] belong to text i
    ext: np.ndarray  # each text's extended prefix length, counting every shingle
    sizes: np.ndarray  # each text's shingle set size
    sketch: np.ndarray  # per text, its shingles counted in SKETCH_BUCKETS hash buckets (saturating)


def _prefixes(texts: Texts, k: int, threshold: float) -> Prefixes:
    """Each text's extended prefix (first |x| - ceil(t|x|) + 2 shingles, rarest first) and set sizes.

    A shingle counted once in the (over-counting) table occurs in one text only: no pair can share it,
    so it takes a prefix place (it counts for positions and lengths) but is not kept.
    """
    n = texts.len()
    mask = np.uint64((1 << COUNT_BITS) - 1)
    counts = np.zeros(1 << COUNT_BITS, dtype=np.uint32)
    with _scratch() as tmp:
        # Pass 1 hashes every shingle once and keeps the hashes in a temporary file for pass 2: reading
        # them back costs far less than normalising, splitting and hashing the texts again.
        store = Path(tmp) / "shingles"
        held: list[int] = []
        buckets: list[np.ndarray] = []
        with store.open("wb") as f:
            for lo in range(0, n, CHUNK_TEXTS):
                h, d = _doc_shingles(texts.slice(lo, CHUNK_TEXTS), k)
                h.tofile(f)
                d.astype(np.int32).tofile(f)
                held.append(h.size)
                buckets.append((h & mask).astype(np.uint32))
                del h, d
                # The table is updated every few chunks: one bincount over 8M buckets costs as much as a
                # chunk.
                if len(buckets) == 4 or lo + CHUNK_TEXTS >= n:
                    counts += np.bincount(_drain(buckets), minlength=counts.size).astype(np.uint32)
        with store.open("rb") as f:
            return _prefixes_pass2(f, held, counts, n, threshold)


def _prefixes_pass2(f: BinaryIO, held: list[int], counts: np.ndarray, n: int, threshold: float) -> Prefixes:
    """Pass 2 of _prefixes over the shingle hashes of pass 1, read back chunk by chunk from `f`."""
    mask = np.uint64(counts.size - 1)
    sizes = np.zeros(n, dtype=np.int64)
    ext_all = np.zeros(n, dtype=np.int64)
    kept = np.zeros(n, dtype=np.int64)
    sketch = np.zeros((n, SKETCH_BUCKETS), dtype=np.uint8)
    shift = np.uint64(64 - SKETCH_BUCKETS.bit_length() + 1)
    toks, ranks = [], []
    for lo, m in zip(range(0, n, CHUNK_TEXTS), held, strict=True):
        h = np.fromfile(f, dtype=np.uint64, count=m)
        d = np.fromfile(f, dtype=np.int32, count=m).astype(np.int64)
        # Global order: (approximate count, hash) — the same total order in every text.
        h, d = _dedupe(h, d, counts[(h & mask).astype(np.int64)])
        size = np.bincount(d, minlength=min(CHUNK_TEXTS, n - lo))
        first = np.zeros(size.size, dtype=np.int64)
        np.cumsum(size[:-1], out=first[1:])
        pos = np.arange(d.size, dtype=np.int64) - first[d]
        ext = np.minimum(size, size - np.ceil(threshold * size - 1e-9).astype(np.int64) + 2)
        take = (pos < ext[d]) & (counts[(h & mask).astype(np.int64)] > 1)
        toks.append(h[take])
        ranks.append(np.minimum(pos[take], 65535).astype(np.uint16))
        kept[lo : lo + size.size] = np.bincount(d[take], minlength=size.size)
        sizes[lo : lo + size.size] = size
        ext_all[lo : lo + size.size] = ext
        cell = d * SKETCH_BUCKETS + (h >> shift).astype(np.int64)
        per = np.bincount(cell, minlength=size.size * SKETCH_BUCKETS).reshape(size.size, SKETCH_BUCKETS)
        sketch[lo : lo + size.size] = np.minimum(per, 255)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(kept, out=offs[1:])
    return Prefixes(np.concatenate(toks), np.concatenate(ranks), offs, ext_all, sizes, sketch)


def _sketch_ok(codes: np.ndarray, sizes: np.ndarray, sketch: np.ndarray, threshold: float) -> np.ndarray:
    """Exact upper bound on the Jaccard from the bucket sketches: common shingles share a bucket, so
    |x & y| <= sum over buckets of min(count_x, count_y). False for pairs that cannot reach t."""
    keep = np.ones(codes.size, dtype=bool)
    for lo in range(0, codes.size, SKETCH_CHUNK):
        c = codes[lo : lo + SKETCH_CHUNK]
        a = (c >> np.uint64(32)).astype(np.int64)
        b = (c & np.uint64(0xFFFFFFFF)).astype(np.int64)
        m = np.minimum(sketch[a], sketch[b])
        # A saturated bucket (255 on both sides) bounds nothing: count it as unlimited.
        ub = m.sum(axis=1, dtype=np.int64) + (m == 255).any(axis=1) * (1 << 40)
        sa, sb = sizes[a], sizes[b]
        inter = np.minimum(ub, np.minimum(sa, sb))
        keep[lo : lo + c.size] = inter >= threshold * (sa + sb - inter) - 1e-9
    return keep


def _length_ok(a: np.ndarray, b: np.ndarray, sizes: np.ndarray, threshold: float) -> np.ndarray:
    sa, sb = sizes[a], sizes[b]
    return np.minimum(sa, sb) >= threshold * np.maximum(sa, sb) - 1e-9


def _codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.uint64), b.astype(np.uint64)
    return (np.minimum(a, b) << np.uint64(32)) | np.maximum(a, b)


def _drain(parts: list[np.ndarray]) -> np.ndarray:
    """Concatenate and empty the list, so the pieces are freed as soon as the whole exists."""
    whole = np.concatenate(parts)
    parts.clear()
    return whole


def _repeated(key: np.ndarray) -> np.ndarray:
    """Of sorted keys, those held by two entries or more (most occur once)."""
    same = key[1:] == key[:-1]
    shared = np.zeros(key.size, dtype=bool)
    shared[1:] = same
    shared[:-1] |= same
    return shared


def _group_by_key(key: np.ndarray, doc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entries sorted by key, keeping only keys held by two entries or more."""
    order = np.argsort(key)
    key = key[order]
    doc = doc[order]
    del order
    shared = _repeated(key)
    return key[shared], doc[shared]


def _block_pairs(later: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Entry pairs (i, i+1 .. i+later[i]) of the sorted entries, as (left, right) index blocks of about
    PAIR_BLOCK pairs each, so that no more than a block of pairs is ever held."""
    n = later.size
    cum = np.cumsum(later)
    blocks = []
    start = int(np.searchsorted(cum, 0, side="right"))
    while start < n:
        base = cum[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(cum, base + PAIR_BLOCK, side="right")))
        lat = later[start:stop]
        left = np.repeat(np.arange(start, stop, dtype=np.int64), lat)
        blocks.append((left, left + 1 + _ranges(np.zeros(lat.size, dtype=np.int64), lat)))
        start = stop
    return blocks


def _run_pairs(key: np.ndarray, doc: np.ndarray, sizes: np.ndarray, threshold: float) -> list[np.ndarray]:
    """Text pairs sharing a key (length-filtered codes) from _group_by_key's output."""
    n = key.size
    if n < 2:
        return []
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = key[1:] != key[:-1]
    run_end = np.append(np.flatnonzero(new_run)[1:], n)[np.cumsum(new_run) - 1]
    out = []
    for left, right in _block_pairs(run_end - np.arange(n) - 1):
        a, b = doc[left], doc[right]
        ok = (a != b) & _length_ok(a, b, sizes, threshold)
        out.append(_unique(_codes(a[ok], b[ok])))
    return out


def _positional_pairs(
    key: np.ndarray, doc: np.ndarray, pos: np.ndarray, sizes: np.ndarray, threshold: float
) -> list[np.ndarray]:
    """Text pairs sharing a signature that pass the length and positional filters (codes).

    `pos` is the position of a signature's second shingle in its text's ordered set: the second common
    shingle of a true pair sits at a position <= |x| + 1 - alpha in each text, since alpha - 2 common
    shingles must still follow it. With alpha = ceil(t(|x|+|y|)/(1+t)) this bounds the partner's size:
    |y| <= (|x| + 1 - pos)(1+t)/t - |x|. So each run is sorted by size and every entry is paired only
    with the later entries up to its own bound (the other side's bound is checked on the pairs made):
    templated text's long runs of one signature no longer make every pair of the run.
    """
    n = key.size
    if n < 2:
        return []
    new_run = np.ones(n, dtype=bool)
    new_run[1:] = key[1:] != key[:-1]
    run = np.cumsum(new_run) - 1
    s = sizes[doc]
    shift = max(int(s.max()).bit_length(), 1)
    combo = (run << shift) | s
    order = np.argsort(combo)  # runs stay in place (run is sorted); within each, by size
    combo, doc, p, s = combo[order], doc[order], pos[order].astype(np.int64), s[order]
    del order
    t = threshold
    # Generous by 1e-3 (sizes are integers): the exact filters below decide.
    hi = np.floor(np.minimum((s + 1 - p) * (1 + t) / t - s, s / t) + 1e-3)
    hi = np.clip(hi, 0, (1 << shift) - 1).astype(np.int64)
    end = np.searchsorted(combo, (run << shift) | hi, side="right")
    del combo, hi
    later = np.maximum(end - np.arange(n) - 1, 0)
    out = []
    for left, right in _block_pairs(later):
        a, b = doc[left], doc[right]
        sa, sb = sizes[a], sizes[b]
        alpha = np.ceil(t * (sa + sb) / (1 + t) - 1e-9).astype(np.int64)
        ok = (a != b) & _length_ok(a, b, sizes, t)
        ok &= (p[left] <= sa + 1 - alpha) & (p[right] <= sb + 1 - alpha)
        out.append(_unique(_codes(a[ok], b[ok])))
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
    entry = _ranges(p.offs[sel], plen)
    later = np.repeat(p.offs[sel] + plen, plen) - entry - 1
    left = np.repeat(entry, later)
    right = left + 1 + _ranges(np.zeros(later.size, dtype=np.int64), later)
    del entry, later
    # Shingle hashes are already well mixed; a collision only adds a candidate, which verification drops.
    with np.errstate(over="ignore"):
        sig = p.tok[right] * _M1
    sig ^= p.tok[left]
    high = sig >> np.uint64(32)
    sig <<= np.uint64(pack.low)
    sig |= doc[left].astype(np.uint64) << np.uint64(pack.pos_bits)
    sig |= p.rank[right].astype(np.uint64)
    return sig, high


def _signature_passes(
    p: Prefixes, doc: np.ndarray, sel: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The prefix-pair signatures of the texts `sel` shared by two texts or more, as (key, text,
    position) sorted by key, one pass over a disjoint range of keys at a time: at most ~SIG_BLOCK are
    held.

    Signatures are generated once, a block of texts at a time, and each block is written to one
    temporary file per pass: reading a pass back costs far less than generating every signature again
    for each pass.
    """
    if sel.size == 0:
        return
    plen = np.diff(p.offs)[sel]
    n_sig = plen * (plen - 1) // 2
    total = int(n_sig.sum())
    passes = max(1, -(-total // SIG_BLOCK))
    n_gen = max(1, -(-total // GEN_BLOCK))
    blocks = np.searchsorted(np.cumsum(n_sig), np.arange(1, n_gen + 1) * GEN_BLOCK, side="left")
    bounds = np.unique(np.concatenate([[0], np.minimum(blocks + 1, sel.size)]))
    # A second shingle's position is below its text's extended prefix length (<= LONG_PREFIX here).
    pack = Packing(max(int(p.sizes.size - 1).bit_length(), 1), max(int(p.ext[sel].max() - 1).bit_length(), 1))
    gen = (_pair_signatures(p, doc, sel[lo:hi], pack) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))
    if passes == 1:
        packed = np.concatenate([sig for sig, _ in gen])
        packed.sort()
        yield pack.unpack(packed)
        return
    with _scratch() as tmp:
        paths = [Path(tmp) / f"pass{r}.sig" for r in range(passes)]
        files = [path.open("wb") for path in paths]
        try:
            for sig, high in gen:
                # The pass: the hash's high bits scaled to [0, passes) (multiply-shift, no division).
                part = ((high * np.uint64(passes)) >> np.uint64(32)).astype(np.int64)
                order = np.argsort(part.astype(np.uint16 if passes <= 1 << 16 else np.uint32), kind="stable")
                cuts = np.cumsum(np.bincount(part, minlength=passes))[:-1]
                for f, chunk in zip(files, np.split(sig[order], cuts), strict=True):
                    chunk.tofile(f)
                del sig, high, part, order
        finally:
            for f in files:
                f.close()
        for path in paths:
            packed = np.fromfile(path, dtype=np.uint64)
            path.unlink()
            packed.sort()
            grouped = pack.unpack(packed)
            del packed
            yield grouped


def _candidates(p: Prefixes, threshold: float) -> np.ndarray:
    """Text pairs that may reach the threshold, as codes lo*2^32+hi (a superset of the true pairs).

    Extended-prefix rule: if J(x, y) >= t, x and y share at least min(2, alpha) shingles among their
    first |.| - ceil(t|.|) + 2, where alpha = ceil(t(|x|+|y|)/(1+t)) is the least overlap (the second
    common shingle lies within both extended prefixes). So texts must share an ordered pair of prefix
    shingles — keyed by one hash per pair, which is far more selective on templated text than one
    shared shingle. Texts with long prefixes (>= LONG_PREFIX shingles) are matched by single shared
    shingles instead, and so are tiny sets, where alpha can be 1. Only shingles another text may hold
    take part (c1 and c2 are common, so they are among them).
    Each block's pairs are filtered by _sketch_ok at once (the same final set as one filter at the
    end, but the many false candidates are never held together).
    """
    sizes = p.sizes

    def bound(c: np.ndarray) -> np.ndarray:
        return c[_sketch_ok(c, sizes, p.sketch, threshold)]

    n = sizes.size
    plen = np.diff(p.offs)
    doc = np.repeat(np.arange(n, dtype=np.int32), plen)  # text indices fit (codes hold them in 32 bits)
    out: list[np.ndarray] = []
    tiny = sizes <= (1 + threshold) / threshold - 1 + 1e-9
    big = p.ext > LONG_PREFIX
    # 1. single shared shingle for pairs with a long-prefix or a tiny text (never both tiny and long).
    single = tiny[doc] | big[doc]
    if single.any():
        # Every entry whose shingle is also in a tiny/long text's prefix takes part.
        part = np.isin(p.tok, _unique(p.tok[single]), assume_unique=False)
        pairs = _run_pairs(*_group_by_key(p.tok[part], doc[part]), sizes, threshold)
        # Keep only pairs where a side needs the single-shingle rule.
        for c in pairs:
            a = (c >> np.uint64(32)).astype(np.int64)
            b = (c & np.uint64(0xFFFFFFFF)).astype(np.int64)
            out.append(bound(c[(tiny[a] & tiny[b]) | big[a] | big[b]]))
    # 2. ordered pairs of prefix shingles, for texts with 2..LONG_PREFIX prefix shingles (tiny ones too:
    #    a tiny text can pair with a larger one, where alpha >= 2).
    sel = np.flatnonzero(~big & (plen >= 2))
    for key, own, at in _signature_passes(p, doc, sel):
        out.extend(bound(c) for c in _positional_pairs(key, own, at, sizes, threshold))
        del key, own, at
    return _unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


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
        idx_a = _ranges(offsets[pa], la)
        idx_b = _ranges(offsets[pb], lb)
        # pair * span + id is globally sorted on the b side, so membership is one searchsorted.
        key_a = np.repeat(np.arange(pa.size, dtype=np.int64), la) * span + ids[idx_a]
        key_b = np.repeat(np.arange(pb.size, dtype=np.int64), lb) * span + ids[idx_b]
        pos = np.minimum(np.searchsorted(key_b, key_a), key_b.size - 1)
        found = key_b[pos] == key_a
        inter = np.bincount(key_a[found] // span, minlength=pa.size)
        out[start:stop] = inter / (la + lb - inter)
        start = stop
    return out


def _verify(
    texts: Texts, codes: np.ndarray, sizes: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact Jaccard of candidate text pairs, re-hashing only the texts involved, block by block."""
    a = (codes >> np.uint64(32)).astype(np.int64)
    b = (codes & np.uint64(0xFFFFFFFF)).astype(np.int64)
    jac = np.zeros(a.size, dtype=np.float64)
    work = np.cumsum(sizes[a] + sizes[b])
    start = 0
    while start < a.size:
        base = work[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(work, base + VERIFY_SHINGLES, side="right")))
        pa, pb = a[start:stop], b[start:stop]
        docs = _unique(np.concatenate([pa, pb]))
        h, d = _dedupe(*_doc_shingles(texts.gather(docs), k))
        # Dense ids keep each text's hash order, so _jaccard's sorted-set search applies.
        _, ids = _unique_inverse(h)
        offs = np.zeros(docs.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(d, minlength=docs.size), out=offs[1:])
        jac[start:stop] = _jaccard(ids, offs, np.searchsorted(docs, pa), np.searchsorted(docs, pb))
        start = stop
    return a, b, jac


def near_duplicates(
    df: pl.DataFrame,
    text_columns: list[str],
    *,
    row_id: str = "row_id",
    threshold: float = 0.8,
    shingle_size: int = 5,
) -> NearDupResult:
    """Near-duplicate row pairs across different normalised texts (see module docstring)."""
    empty = pl.DataFrame(
        {"row_a": [], "row_b": [], "jaccard": []},
        schema={"row_a": pl.Int64, "row_b": pl.Int64, "jaccard": pl.Float64},
    )
    if df.height == 0 or not text_columns:
        return NearDupResult(empty, 0, 0, 0, 0)
    texts, rows, text_of = distinct_texts(df, text_columns, row_id)
    try:
        prefixes = _prefixes(texts, shingle_size, threshold)
        sizes = prefixes.sizes
        codes = _candidates(prefixes, threshold)
    except OSError as exc:
        from engine.context import StageInputError

        raise StageInputError(
            f"The near-duplicate search could not use its temporary folder {tempfile.gettempdir()}: "
            f"{exc.strerror or exc}. It needs room there for about 12 bytes per word of text "
            f"({texts.len():,} distinct texts). Free space there or set TMPDIR to a writable folder "
            "with room, then run the stage again."
        ) from exc
    del prefixes
    a, b, jac = _verify(texts, codes, sizes, shingle_size)
    hit = jac >= threshold - 1e-12
    a, b, jac = a[hit], b[hit], jac[hit]
    return NearDupResult(
        _expand(rows, text_of, a, b, jac, empty), texts.len(), int(codes.size), int(a.size), int(sizes.sum())
    )


def _expand(
    rows: np.ndarray, text_of: np.ndarray, a: np.ndarray, b: np.ndarray, jac: np.ndarray, empty: pl.DataFrame
) -> pl.DataFrame:
    """Text pairs → every row pair between their rows (rows grouped by text, in text order)."""
    if a.size == 0:
        return empty
    n_texts = int(text_of.max()) + 1
    per = np.bincount(text_of, minlength=n_texts)
    first = np.zeros(n_texts, dtype=np.int64)
    np.cumsum(per[:-1], out=first[1:])
    na, nb = per[a], per[b]
    combos = na * nb
    pair = np.repeat(np.arange(a.size, dtype=np.int64), combos)
    within = _ranges(np.zeros(a.size, dtype=np.int64), combos)
    left = rows[first[a][pair] + within // nb[pair]]
    right = rows[first[b][pair] + within % nb[pair]]
    return pl.DataFrame(
        {"row_a": np.minimum(left, right), "row_b": np.maximum(left, right), "jaccard": jac[pair]}
    ).sort(["row_a", "row_b"])


def cluster_summary(pairs: pl.DataFrame) -> dict[str, int]:
    """Connected clusters of near-duplicate rows: count, rows in them, largest cluster."""
    if pairs.height == 0:
        return {"clusters": 0, "rows_in_clusters": 0, "largest_cluster_rows": 0}
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    nodes, inv = _unique_inverse(np.concatenate([pairs["row_a"].to_numpy(), pairs["row_b"].to_numpy()]))
    m = pairs.height
    g = coo_matrix((np.ones(m, dtype=np.int8), (inv[:m], inv[m:])), shape=(nodes.size, nodes.size))
    k, labels = connected_components(g, directed=False)
    return {
        "clusters": int(k),
        "rows_in_clusters": int(nodes.size),
        "largest_cluster_rows": int(np.bincount(labels).max()),
    }


PAIRS_FILE = "near_duplicates.parquet"


def pairs_payload(pairs: pl.DataFrame) -> bytes:
    """The verified row pairs as parquet bytes (row_id_a < row_id_b, jaccard), written by the source stage."""
    import io

    buf = io.BytesIO()
    pairs.select(
        pl.col("row_a").alias("row_id_a"), pl.col("row_b").alias("row_id_b"), pl.col("jaccard")
    ).write_parquet(buf, statistics=False)
    return buf.getvalue()


def read_pairs(path: Path, sha256: str) -> pl.DataFrame:
    """Saved pairs back as (row_a, row_b, jaccard), after checking the file's sha256 against the record."""
    from engine.data import verify_pinned

    verify_pinned(path, sha256, "pairs_sha256", "near-duplicate pairs", "source")
    return pl.read_parquet(path).select(
        pl.col("row_id_a").alias("row_a"), pl.col("row_id_b").alias("row_b"), pl.col("jaccard")
    )
