"""Compiled loops of the near-duplicate search: `_kernels.c`, built with the package (pyproject.toml) and
loaded with ctypes — no Python API, no compiler at run time.

The numpy passes each walked every shingle (tens of millions on long documents) several times: here
one loop per text hashes its shingles, drops its repeats, orders its prefix and fills its sketches
while its shingles sit in cache, and one loop pairs the single-shingle path's entries. Rows whose text
is all ASCII are normalised here too (Polars' lowercase + strip + regex, byte for byte; the other rows
still go through Polars), and verification merges each candidate pair's sorted shingle sets. The
arrays are the numpy path's, value for value (tests/test_audit_perf.py compares them on the same
input), so the search and its figures stay the same. Where the library was not built (no C compiler at install) or is
stale (an older build without one of these functions), `available()` is False and the numpy path runs.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

_HERE = Path(__file__).resolve().parent
_I64 = ctypes.c_int64
_U64 = ctypes.c_uint64
_P = ctypes.c_void_p
SCATTER_BYTES = 4 << 20  # scatter's pass buffers, all together (each at least SCATTER_MIN signatures)
SCATTER_MIN = 512


@functools.cache
def _lib() -> ctypes.CDLL | None:
    import importlib.machinery

    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = _HERE / f"_kernels{suffix}"
        if path.exists():
            try:
                return _declare(ctypes.CDLL(str(path)))
            except (OSError, AttributeError):  # not loadable here, or built from an older _kernels.c
                return None
    return None


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    """The functions' C signatures (an AttributeError where one is missing)."""
    lib.cc_distinct.restype = _I64
    lib.cc_distinct.argtypes = [_P, _P, _I64, _P, _P]
    lib.cc_count.restype = None
    lib.cc_count.argtypes = [_P, _I64, _P, _U64]
    lib.cc_word_counts.restype = _I64
    lib.cc_word_counts.argtypes = [_P, _P, _I64, _P]
    lib.cc_word_hashes.restype = None
    lib.cc_word_hashes.argtypes = [_P, _P, _I64, _P]
    lib.cc_shingles.restype = _I64
    lib.cc_shingles.argtypes = [_P, _P, _I64, _I64, _P, _U64, _P, _P]
    lib.cc_prefixes.restype = _I64
    lib.cc_prefixes.argtypes = [
        *(_P, _P, _I64, _P, _U64, ctypes.c_double),
        *(ctypes.c_int, _I64, _P, _I64, ctypes.c_int, _I64, _P),
        *(_P, _P, _P, _P),
    ]
    lib.cc_single_pairs.restype = _I64
    lib.cc_single_pairs.argtypes = [
        *(_P, _P, _P, _P, _I64, _P, _P, _P, ctypes.c_double),
        ctypes.POINTER(ctypes.POINTER(ctypes.c_uint64)),
    ]
    lib.cc_normalise.restype = None
    lib.cc_normalise.argtypes = [_I64, _P, _P, _I64, _P, _P, _P]
    lib.cc_bytes_hashes.restype = None
    lib.cc_bytes_hashes.argtypes = [_P, _P, _I64, _P]
    lib.cc_splice.restype = None
    lib.cc_splice.argtypes = [_I64, _P, _P, _P, _P, _P, _P, _P]
    lib.cc_sort_segments.restype = None
    lib.cc_sort_segments.argtypes = [_P, _P, _I64]
    lib.cc_jaccard.restype = None
    lib.cc_jaccard.argtypes = [_P, _P, _P, _P, _I64, _P]
    lib.cc_sort_u64.restype = None
    lib.cc_sort_u64.argtypes = [_P, _P, _I64, _P]
    lib.cc_run_pairs.restype = _I64
    lib.cc_run_pairs.argtypes = [
        *(_P, ctypes.c_int, _P, _P, _I64, ctypes.c_double),
        *(_P, _I64, ctypes.c_int, ctypes.c_int, _P, _P, _I64),
    ]
    lib.cc_unpack_runs.restype = _I64
    lib.cc_unpack_runs.argtypes = [_P, _I64, ctypes.c_int, ctypes.c_int, _P, ctypes.c_int, _P, _P, _P, _P]
    lib.cc_bits_set.restype = None
    lib.cc_bits_set.argtypes = [_P, _I64, _P]
    lib.cc_bits_test.restype = _I64
    lib.cc_bits_test.argtypes = [_P, _I64, _P, _P]
    lib.cc_scatter.restype = _I64
    lib.cc_scatter.argtypes = [_P, _P, _I64, _I64, _P, _P, _P, _I64, ctypes.c_int]
    lib.cc_free.restype = None
    lib.cc_free.argtypes = [_P]
    return lib


def available() -> bool:
    """Whether the compiled loops were built (`pip install` compiles them where a C compiler exists)."""
    return _lib() is not None


def _ptr(a: np.ndarray) -> int:
    assert a.flags.c_contiguous
    return a.ctypes.data


def _lib_or_fail() -> ctypes.CDLL:
    lib = _lib()
    if lib is None:
        raise RuntimeError("engine/audit/neardup/_kernels was not built")
    return lib


def word_hashes(data: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every word's hash, text after text, and each text's number of words (hashing.word_hashes:
    the same arrays); text i is data[offs[i]:offs[i + 1]]."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offs = np.ascontiguousarray(offs, dtype=np.int64)
    assert offs.size and int(offs[-1]) <= data.size and (offs.size < 2 or int(offs[0]) >= 0)
    lib = _lib_or_fail()
    lens = np.empty(offs.size - 1, dtype=np.int64)
    out = np.empty(lib.cc_word_counts(_ptr(data), _ptr(offs), lens.size, _ptr(lens)), dtype=np.uint64)
    lib.cc_word_hashes(_ptr(data), _ptr(offs), lens.size, _ptr(out))
    return out, lens


def shingles(
    flat: np.ndarray, lens: np.ndarray, k: int, weight: np.ndarray, h0: np.uint64
) -> tuple[np.ndarray, np.ndarray]:
    """Shingle hashes and text indices from word hashes (hashing.doc_shingles: the same arrays)."""
    flat = np.ascontiguousarray(flat, dtype=np.uint64)
    lens = np.ascontiguousarray(lens, dtype=np.int64)
    weight = np.ascontiguousarray(weight, dtype=np.uint64)
    assert weight.size >= k and int(lens.sum()) == flat.size
    total = int(np.maximum(lens - k + 1, 0).sum() + (lens < k).sum())
    out_h = np.empty(total, dtype=np.uint64)
    out_d = np.empty(total, dtype=np.int64)
    _lib_or_fail().cc_shingles(
        _ptr(flat), _ptr(lens), lens.size, k, _ptr(weight), int(h0), _ptr(out_h), _ptr(out_d)
    )
    return out_h, out_d


def distinct(h: np.ndarray, per: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Texts in order with per[i] shingles each: each text's distinct shingles (first occurrences, in
    order) and their number."""
    h = np.ascontiguousarray(h, dtype=np.uint64)
    per = np.ascontiguousarray(per, dtype=np.int64)
    out = np.empty_like(h)
    sizes = np.empty(per.size, dtype=np.int64)
    w = _lib_or_fail().cc_distinct(_ptr(h), _ptr(per), per.size, _ptr(out), _ptr(sizes))
    if w < 0:
        raise MemoryError("near-duplicate search: no memory for a text's hash set")
    return out[:w], sizes


def count(h: np.ndarray, counts: np.ndarray) -> None:
    """Every shingle h (repeats too) counted in `counts` (uint32, a power of two long) at h & (size - 1)."""
    h = np.ascontiguousarray(h, dtype=np.uint64)
    assert counts.dtype == np.uint32 and counts.size & (counts.size - 1) == 0 and counts.flags.c_contiguous
    _lib_or_fail().cc_count(_ptr(h), h.size, _ptr(counts), counts.size - 1)


class Layout(NamedTuple):
    """The threshold and the sketches' shapes (bucket = hash >> (64 - log2(buckets)))."""

    threshold: float
    sketch_buckets: int
    wide_min: int
    wide_buckets: int


def long_prefixes(
    h: np.ndarray, sizes: np.ndarray, counts: np.ndarray, lay: Layout
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pass 2 for a chunk of texts (h: each text's distinct shingles, text after text): the prefix
    shingles another text may hold and their positions (uint16), per text how many of them and its
    extended prefix length, the narrow sketches, the wide texts' sketches (see shingles.Prefixes)."""
    h = np.ascontiguousarray(h, dtype=np.uint64)
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    n = sizes.size
    n_wide = int((sizes >= lay.wide_min).sum())
    sketch = np.zeros((n, lay.sketch_buckets), dtype=np.uint8)
    wide = np.zeros((n_wide, lay.wide_buckets), dtype=np.uint8)
    tok = np.empty(h.size, dtype=np.uint64)
    pos = np.empty(h.size, dtype=np.uint16)
    kept = np.empty(n, dtype=np.int64)
    ext = np.empty(n, dtype=np.int64)
    w = _lib_or_fail().cc_prefixes(
        *(_ptr(h), _ptr(sizes), n, _ptr(counts), counts.size - 1, float(lay.threshold)),
        *(_shift(lay.sketch_buckets), lay.sketch_buckets, _ptr(sketch)),
        *(lay.wide_min, _shift(lay.wide_buckets), lay.wide_buckets, _ptr(wide)),
        *(_ptr(tok), _ptr(pos), _ptr(kept), _ptr(ext)),
    )
    if w < 0:
        raise MemoryError("near-duplicate search: no memory for a text's shingles")
    return tok[:w].copy(), pos[:w].copy(), kept, ext, sketch, wide


def _shift(buckets: int) -> int:
    assert buckets & (buckets - 1) == 0
    return 64 - buckets.bit_length() + 1


def single_pairs(
    tok: np.ndarray,
    doc: np.ndarray,
    pos: np.ndarray,
    single: np.ndarray,
    sizes: np.ndarray,
    tiny: np.ndarray,
    big: np.ndarray,
    t: float,
) -> np.ndarray:
    """candidates.find_candidates' single-shingle path before its sketch bound: the pair codes that a
    tiny or big side needs and that share min(2, alpha) prefix entries (sorted, the numpy path's)."""
    arrays = [
        np.ascontiguousarray(tok, dtype=np.uint64),
        np.ascontiguousarray(doc, dtype=np.int32),
        np.ascontiguousarray(pos, dtype=np.uint16),
        np.ascontiguousarray(single, dtype=np.uint8),
    ]
    sizes = np.ascontiguousarray(sizes, dtype=np.int64)
    tiny8 = np.ascontiguousarray(tiny, dtype=np.uint8)
    big8 = np.ascontiguousarray(big, dtype=np.uint8)
    out = ctypes.POINTER(ctypes.c_uint64)()
    lib = _lib_or_fail()
    n = lib.cc_single_pairs(
        *(_ptr(a) for a in arrays),
        arrays[0].size,
        _ptr(sizes),
        _ptr(tiny8),
        _ptr(big8),
        float(t),
        ctypes.byref(out),
    )
    if n < 0:
        raise MemoryError("near-duplicate search: no memory for the candidate pairs")
    try:
        return np.ctypeslib.as_array(out, shape=(n,)).copy() if n else np.empty(0, dtype=np.uint64)
    finally:
        lib.cc_free(ctypes.cast(out, _P))


def run_pairs(
    runs: tuple[np.ndarray, np.ndarray, np.ndarray, int],
    t: float,
    sketch: tuple[np.ndarray, bool, bool] | None,
    block: int,
) -> Iterator[np.ndarray]:
    """candidates._run_pairs' pair codes of `runs` (candidates.Runs: combo, doc, pos, shift), with the
    sketch bound applied in the same loop where `sketch` is given (its rows; whether they hold two
    4-bit buckets a byte; whether row i is entry i's, else text i's): blocks of at most `block` kept
    codes, unsorted, repeats possible."""
    combo, doc, pos, shift = runs
    combo = combo.view(np.uint64) if combo.dtype == np.int64 else combo  # keys and sizes are >= 0
    assert combo.dtype == np.uint64 and combo.flags.c_contiguous and 1 <= shift < 64
    doc, pos = np.ascontiguousarray(doc, dtype=np.int64), np.ascontiguousarray(pos, dtype=np.int64)
    assert combo.size == doc.size == pos.size and block > 0
    rows, width, nibbles, per_entry = 0, 0, 0, 0
    if sketch is not None:
        held = sketch[0]  # held as it is (the in-memory sketches are large): rows in C order
        assert held.dtype == np.uint8 and held.flags.c_contiguous and held.ndim == 2
        per_entry = int(sketch[2])
        assert held.shape[0] > (doc.size - 1 if per_entry else int(doc.max(initial=0)))
        rows, width, nibbles = _ptr(held), held.shape[1], int(sketch[1])
    lib = _lib_or_fail()
    resume = np.zeros(2, dtype=np.int64)
    while int(resume[0]) < doc.size:
        out = np.empty(block, dtype=np.uint64)
        w = lib.cc_run_pairs(
            *(_ptr(combo), shift, _ptr(doc), _ptr(pos), doc.size, float(t)),
            *(rows or None, width, nibbles, per_entry, _ptr(resume), _ptr(out), block),
        )
        if w:
            yield out[:w]
        del out


def normalise(columns: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of text columns (each its UTF-8 bytes and offsets, nulls as empty values) → the rows all
    ASCII normalised and joined (texts._joined's bytes) with their offsets, and which rows those are;
    a row that is not all ASCII is left empty there (its case and whitespace follow Unicode rules)."""
    n = columns[0][1].size - 1
    data = [np.ascontiguousarray(d, dtype=np.uint8) for d, _ in columns]
    offs = [np.ascontiguousarray(o, dtype=np.int64) for _, o in columns]
    assert all(o.size == n + 1 and (n == 0 or int(o[-1]) <= d.size) for d, o in zip(data, offs, strict=True))
    room = sum(int(o[-1] - o[0]) for o in offs) + len(columns) * n
    out = np.empty(room, dtype=np.uint8)
    out_offs = np.empty(n + 1, dtype=np.int64)
    ok = np.empty(n, dtype=np.uint8)
    data_p = np.array([_ptr(d) for d in data], dtype=np.uint64)
    offs_p = np.array([_ptr(o) for o in offs], dtype=np.uint64)
    _lib_or_fail().cc_normalise(
        len(columns), _ptr(data_p), _ptr(offs_p), n, _ptr(out), _ptr(out_offs), _ptr(ok)
    )
    return out[: int(out_offs[-1])], out_offs, ok.view(bool)


def bytes_hashes(data: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each whole text data[offs[i]:offs[i + 1]] (the word hash of all its bytes)."""
    data = np.ascontiguousarray(data, dtype=np.uint8)
    offs = np.ascontiguousarray(offs, dtype=np.int64)
    assert offs.size and int(offs[-1]) <= data.size
    out = np.empty(offs.size - 1, dtype=np.uint64)
    _lib_or_fail().cc_bytes_hashes(_ptr(data), _ptr(offs), out.size, _ptr(out))
    return out


def splice(
    ok: np.ndarray, a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Rows in order as bytes and offsets: row i is a's row i where ok[i], else b's next row."""
    ok8 = np.ascontiguousarray(ok, dtype=np.uint8)
    (ad, ao), (bd, bo) = a, b
    ad, bd = np.ascontiguousarray(ad, dtype=np.uint8), np.ascontiguousarray(bd, dtype=np.uint8)
    ao, bo = np.ascontiguousarray(ao, dtype=np.int64), np.ascontiguousarray(bo, dtype=np.int64)
    assert ao.size == ok8.size + 1 and bo.size == int((ok8 == 0).sum()) + 1
    out = np.empty(int(np.diff(ao)[ok8 != 0].sum() + np.diff(bo).sum()), dtype=np.uint8)
    out_offs = np.empty(ok8.size + 1, dtype=np.int64)
    _lib_or_fail().cc_splice(
        ok8.size, _ptr(ok8), _ptr(ad), _ptr(ao), _ptr(bd), _ptr(bo), _ptr(out), _ptr(out_offs)
    )
    return out, out_offs


def jaccard(h: np.ndarray, offs: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Texts' distinct shingles in h[offs[t]:offs[t + 1]] (sorted here, in place): the exact Jaccard of
    each pair of texts (a[i], b[i])."""
    assert h.dtype == np.uint64 and h.flags.c_contiguous
    offs = np.ascontiguousarray(offs, dtype=np.int64)
    a, b = np.ascontiguousarray(a, dtype=np.int64), np.ascontiguousarray(b, dtype=np.int64)
    assert a.size == b.size and (a.size == 0 or max(int(a.max()), int(b.max())) < offs.size - 1)
    lib = _lib_or_fail()
    lib.cc_sort_segments(_ptr(h), _ptr(offs), offs.size - 1)
    out = np.empty(a.size, dtype=np.float64)
    lib.cc_jaccard(_ptr(h), _ptr(offs), _ptr(a), _ptr(b), a.size, _ptr(out))
    return out


def sort(a: np.ndarray) -> None:
    """Sorts uint64 keys in place, ascending (np.ndarray.sort's result; a cache-sized radix sort)."""
    assert a.dtype == np.uint64 and a.flags.c_contiguous and a.flags.writeable
    tmp = np.empty_like(a)
    count = np.empty(1 << 16, dtype=np.int64)
    _lib_or_fail().cc_sort_u64(_ptr(a), _ptr(tmp), a.size, _ptr(count))


def scatter(blocks: Iterable[tuple[np.ndarray, np.ndarray]], paths: list[Path]) -> None:
    """Generated blocks of (signatures, their hashes' high 32 bits) → each signature appended to the
    file of its pass, paths[(high * passes) >> 32] (candidates.shard_passes' split), through one buffer
    a pass (SCATTER_BYTES in all): one loop over a block, and one write a full buffer."""
    passes = len(paths)
    cap = max(SCATTER_MIN, SCATTER_BYTES // (8 * passes))
    buf = np.empty(passes * cap, dtype=np.uint64)
    fill = np.zeros(passes, dtype=np.int64)
    fds = np.full(passes, -1, dtype=np.int32)
    lib = _lib_or_fail()

    def done(err: int) -> None:
        if err:
            raise OSError(-err, os.strerror(-err))

    try:
        for r, path in enumerate(paths):
            fds[r] = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for sig, high in blocks:
            assert sig.dtype == high.dtype == np.uint64 and sig.size == high.size
            sig, high = np.ascontiguousarray(sig), np.ascontiguousarray(high)
            done(
                lib.cc_scatter(
                    _ptr(sig), _ptr(high), sig.size, passes, _ptr(fds), _ptr(buf), _ptr(fill), cap, 0
                )
            )
        done(lib.cc_scatter(None, None, 0, passes, _ptr(fds), _ptr(buf), _ptr(fill), cap, 1))
    finally:
        for fd in fds[fds >= 0].tolist():
            os.close(fd)


def unpack_runs(
    packed: np.ndarray, low: int, pos_bits: int, sizes: np.ndarray, shift: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """candidates.Packing.unpack then candidates._size_runs on sorted packed signatures, in one loop:
    (combo, doc, pos, shift) of the entries whose key two or more hold, each run sorted by size (ties
    by text, then position), combo = run << shift | size and shift the bits of the largest size (or the
    given `shift`, at least the bits of any size: the caller's, once for every pass)."""
    assert packed.dtype == np.uint64 and packed.flags.c_contiguous and sizes.dtype == np.int64
    assert 0 < pos_bits < low < 64 and sizes.flags.c_contiguous
    lib = _lib_or_fail()
    most = np.zeros(1, dtype=np.int64)
    asked = None if shift is not None else _ptr(most)
    m = lib.cc_unpack_runs(_ptr(packed), packed.size, low, pos_bits, _ptr(sizes), 1, None, None, None, asked)
    if shift is None:
        shift = max(int(most[0]).bit_length(), 1)  # the largest size of the entries kept (as _size_runs)
    assert 1 <= shift < 40
    combo, doc, pos = np.empty(m, dtype=np.uint64), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    args = (_ptr(packed), packed.size, low, pos_bits, _ptr(sizes), shift, _ptr(combo), _ptr(doc), _ptr(pos))
    if m and lib.cc_unpack_runs(*args, _ptr(most)) < 0:
        raise MemoryError("near-duplicate search: no memory to sort a run of prefix-pair entries")
    return combo, doc, pos, shift


def bits_set(bits: np.ndarray, idx: np.ndarray) -> None:
    """Sets bits idx of a bitmap held in uint64 words."""
    assert bits.dtype == idx.dtype == np.uint64 and bits.flags.c_contiguous and bits.flags.writeable
    assert idx.size == 0 or int(idx.max()) < 64 * bits.size
    idx = np.ascontiguousarray(idx)
    _lib_or_fail().cc_bits_set(_ptr(idx), idx.size, _ptr(bits))


def bits_test(bits: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Whether bits idx of a bitmap held in uint64 words are set."""
    assert bits.dtype == idx.dtype == np.uint64 and bits.flags.c_contiguous
    assert idx.size == 0 or int(idx.max()) < 64 * bits.size
    idx = np.ascontiguousarray(idx)
    keep = np.empty(idx.size, dtype=np.uint8)
    _lib_or_fail().cc_bits_test(_ptr(idx), idx.size, _ptr(bits), _ptr(keep))
    return keep.view(bool)
