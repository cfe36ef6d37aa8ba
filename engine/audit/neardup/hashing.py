"""Word and shingle hashes of the near-duplicate search: what a text's shingle set is made of.

Each word is hashed by our own function of its bytes (word_hashes; Polars guarantees its own hash only
within one Polars version, and the search's figures would move with it); a shingle's hash is splitmix64
of the sum of its word hashes, each times an odd constant of its position. Where the compiled loops
were built (kernels.py) both run there, with the numpy path's values.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from claimcheck.engine.audit.neardup import kernels
from claimcheck.engine.audit.neardup.arrays import ranges
from claimcheck.engine.audit.texts import Texts
from claimcheck.engine.audit.textstore import TextStore
from claimcheck.engine.data.splits import splitmix64

_H0 = np.uint64(0x243F6A8885A308D3)
# The word hash (word_hashes; _kernels.c defines the same constants), named in the source record
# Row groups of the text store's file decoded per slice where the search reads every text (row hashes,
# text lengths): a 64 MB slice lifted the near-duplicate step ~240 MB at 1M tickets, a 16 MB one ~100 MB.
STORE_SLICE_BYTES = 16 << 20
SHINGLE_HASH = "words: 8-byte blocks + splitmix64 (claimcheck 1); shingles: splitmix64 of weighted sums"
_WORD_SEED = np.uint64(0x2545F4914F6CDD1D)
_WORD_LEN = np.uint64(0xC2B2AE3D27D4EB4F)
_WORD_BLOCK = np.uint64(0x9FB21C651E98DF25)
_LOW_BYTES = np.array([(1 << (8 * b)) - 1 for b in range(9)], dtype=np.uint64)  # the low b bytes set
_M1, _M2, _GOLDEN = (
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
    np.uint64(0x9E3779B97F4A7C15),
)


def _mix(z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """claimcheck.engine.data.splits.splitmix64 in place (same values, no temporaries)."""
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


def utf8(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """The texts' UTF-8 bytes and offsets (text i is data[offs[i]:offs[i + 1]]), through Arrow without
    a copy per text."""
    import pyarrow as pa

    arr = texts.cast(pl.String).fill_null("").rechunk().to_arrow()
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    _, off_buf, data_buf = arr.buffers()
    offs = np.frombuffer(off_buf, dtype=np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, dtype=np.uint8)
    return data, offs


def normalised_utf8(texts: Texts, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The normalised texts `idx` as UTF-8 bytes and offsets: utf8(texts.gather(idx)), byte for byte.

    With the compiled loops, rows whose text columns are all ASCII are normalised there (one pass over
    their bytes, a fraction of Polars' lowercase + strip + regex); only the other rows go through
    Polars (Unicode case and whitespace), and are spliced back in row order."""
    idx = np.asarray(idx, dtype=np.int64)
    if not kernels.available() or any(texts.schema()[c] != pl.String for c in texts.columns):
        return utf8(texts.gather(idx))
    rows = texts.rows(idx)
    out, offs, ok = kernels.normalise([utf8(rows.get_column(c)) for c in texts.columns])
    if ok.all():
        return out, offs
    return kernels.splice(ok, (out, offs), utf8(texts.gather(idx[~ok])))


_NULL_VALUE = np.uint64(0x8CB92BA72F3D8DD7)  # a null value's hash (an empty value hashes its no bytes)
_ROW_MIX = np.uint64(0xD6E8FEB86659FD93)  # odd: the row hash so far times it, plus the next column's


def normalised_row_hashes(
    df: pl.DataFrame, columns: list[str], store: TextStore | None = None
) -> pl.Series | None:
    """Per row, a 64-bit hash of its normalised text columns, each apart (equal values, equal hash; a
    null is not an empty value): the key texts.distinct_texts groups rows by, as texts.row_hashes makes
    it but without Polars' regex for the rows whose columns are all ASCII. A slice of rows at a time
    (texts.by_slices, or read from `store` where the text stays on disk); None without the compiled
    loops, or for a column that is not text."""
    got = row_hashes_and_bytes(df, columns, store)
    return None if got is None else got[0]


def row_hashes_and_bytes(
    df: pl.DataFrame, columns: list[str], store: TextStore | None = None
) -> tuple[pl.Series, np.ndarray] | None:
    """normalised_row_hashes, and each row's text bytes (its columns' bytes before normalisation, as
    shingles.build_prefixes sizes its chunks by), read in the same pass over the texts."""
    from claimcheck.engine.audit.texts import by_slices

    if not kernels.available() or any(df.schema[c] != pl.String for c in columns):
        return None
    if store is not None:
        parts = store.by_slices(columns, lambda part: _row_hashes(part, columns), STORE_SLICE_BYTES)
    else:
        parts = by_slices(df, lambda part: _row_hashes(part, columns))
    h = np.concatenate([np.zeros(0, dtype=np.uint64), *(x for x, _ in parts)])
    nbytes = np.concatenate([np.zeros(0, dtype=np.int64), *(b for _, b in parts)])
    return pl.Series("h", h), nbytes


def _row_hashes(part: pl.DataFrame, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    from claimcheck.engine.audit.texts import norm_text_expr

    h = np.zeros(part.height, dtype=np.uint64)
    nbytes = np.zeros(part.height, dtype=np.int64)
    with np.errstate(over="ignore"):
        for c in columns:
            col = part.get_column(c)
            nbytes += col.str.len_bytes().fill_null(0).cast(pl.Int64).to_numpy()
            out, offs, ok = kernels.normalise([utf8(col)])
            hc = kernels.bytes_hashes(out, offs)
            if not ok.all():
                rest = np.flatnonzero(~ok)
                hc[rest] = kernels.bytes_hashes(*utf8(part[rest].select(norm_text_expr(c)).to_series()))
            if col.null_count():
                hc[col.is_null().to_numpy()] = _NULL_VALUE
            h = splitmix64(h * _ROW_MIX + hc)
    return h, nbytes


def text_shingles(texts: Texts, idx: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """doc_shingles of the normalised texts `idx` (positions in `idx` as text indices)."""
    return shingles_of_words(*utf8_word_hashes(*normalised_utf8(texts, idx)), k)


def word_hashes(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Every word's 64-bit hash, text after text, and each text's number of words (utf8_word_hashes)."""
    return utf8_word_hashes(*utf8(texts))


def utf8_word_hashes(data: np.ndarray, offs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """word_hashes of the texts data[offs[i]:offs[i + 1]].

    Words are the runs between single spaces (normalised text has no other separators; an empty text is
    one empty word). A word of L bytes: h = WORD_SEED ^ L * WORD_LEN, then for each 8-byte block m of
    its bytes, little-endian, the last one zero-padded: h = (h ^ m) * WORD_BLOCK, h ^= h >> 29; its hash
    is splitmix64(h)."""
    if kernels.available():
        return kernels.word_hashes(data, offs)
    data, offs = data[int(offs[0]) : int(offs[-1])], offs - offs[0]
    n = offs.size - 1
    space = np.flatnonzero(data == 32)
    text_of = np.searchsorted(offs, space, side="right") - 1
    lens = np.bincount(text_of, minlength=n).astype(np.int64) + 1
    first = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=first[1:])
    # Word j of text i starts at the text or after its (j-1)th space; space g of text i ends word g + i
    # and starts word g + i + 1 (the words before text i: its spaces and one more per earlier text).
    g = np.arange(space.size, dtype=np.int64)
    starts, ends = np.empty(int(first[-1]), dtype=np.int64), np.empty(int(first[-1]), dtype=np.int64)
    starts[first[:-1]], starts[g + text_of + 1] = offs[:-1], space + 1
    ends[first[1:] - 1], ends[g + text_of] = offs[1:], space
    size = ends - starts
    h = _WORD_SEED ^ (size.astype(np.uint64) * _WORD_LEN)
    # The 8 bytes from every byte offset, as one little-endian uint64 each (a view: stride one byte)
    padded = np.concatenate([data, np.zeros(8, np.uint8)])
    blocks = np.ndarray(shape=(data.size,), dtype="<u8", buffer=padded, strides=(1,))
    act, j = np.flatnonzero(size > 0), 0
    with np.errstate(over="ignore"):
        while act.size:
            rest = size[act] - 8 * j
            m = blocks[starts[act] + 8 * j] & _LOW_BYTES[np.minimum(rest, 8)]
            x = (h[act] ^ m) * _WORD_BLOCK
            h[act] = x ^ (x >> np.uint64(29))
            j += 1
            act = act[rest > 8]
    return splitmix64(h), lens


def doc_shingles(texts: pl.Series, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every shingle's 64-bit hash and its text's index in `texts` (duplicates within a text kept)."""
    return shingles_of_words(*word_hashes(texts), k)


def shingles_of_words(flat: np.ndarray, lens: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """doc_shingles from the word hashes (text after text) and each text's number of words.

    A shingle of words w_0..w_{m-1} (m = k, or fewer for a short text) hashes to
    splitmix64(H0 + sum_j C_j * hash(w_j)) with wrapping arithmetic: one finaliser per shingle instead of
    one per word position.
    """
    weight = _position_weights(k)
    if kernels.available():
        return kernels.shingles(flat, lens, k, weight, _H0)
    offsets = np.zeros(lens.size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
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
            hs.append(h[ranges(offsets[docs], n_sh)])
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
