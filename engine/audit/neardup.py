"""Near-duplicate text inputs: MinHash-LSH over word shingles, every candidate verified by exact Jaccard.

Definitions (docs/checks.md#source-near-duplicates):
- a row's text = its text columns, each normalised (lowercase, strip, whitespace runs → one space),
  joined by one space, nulls and empty values skipped;
- shingles = the set of `k` consecutive words (k=5); a text shorter than k words is one shingle;
- rows with the same normalised text columns are one *text* (exact duplicates are another check);
  a near-duplicate pair is two rows of different texts whose shingle sets have Jaccard >= t (0.8).

Implementation: vectorised numpy. Shingles are hashed to 64 bits (Polars' seeded hash of each word,
combined in order with splitmix64) — exact Jaccard is computed on these 64-bit shingle hashes, where a
collision needs ~2^32 shingles. 128 MinHash values per text by multiply-shift hashing; 32 LSH bands of
4 rows give P(candidate) = 1 - (1 - J^4)^32, i.e. >= 0.99999995 at J = 0.8 (anchor: datasketch uses
128 permutations and picks bands/rows by minimising false negatives + positives at its threshold).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from engine.splits import splitmix64

NUM_PERM = 128
BANDS = 32
ROWS_PER_BAND = 4
_SEED = 20240917


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


def norm_text_expr(col: str) -> pl.Expr:
    """lower_strip_ws: lowercase, strip, collapse whitespace runs (null stays null)."""
    return pl.col(col).cast(pl.String).str.to_lowercase().str.strip_chars().str.replace_all(r"\s+", " ")


@dataclass
class NearDupResult:
    # Row-level pairs (row ids, a < b) with their exact Jaccard.
    pairs: pl.DataFrame
    texts: int
    candidates: int
    verified_text_pairs: int
    shingles: int

    def recall_at(self, threshold: float) -> float:
        """Probability a pair with Jaccard = threshold becomes a candidate under the banding used."""
        return 1.0 - (1.0 - threshold**ROWS_PER_BAND) ** BANDS


def _texts(df: pl.DataFrame, text_columns: list[str], row_id: str) -> tuple[pl.DataFrame, list[np.ndarray]]:
    """Unique normalised texts (joined string) and, per text, the row ids holding it."""
    norm = df.select(
        pl.col(row_id), *[norm_text_expr(c).alias(f"__n{i}") for i, c in enumerate(text_columns)]
    )
    keys = [f"__n{i}" for i in range(len(text_columns))]
    grouped = norm.group_by(keys, maintain_order=True).agg(pl.col(row_id))
    joined = (
        pl.concat_str([pl.col(k) for k in keys], separator=" ", ignore_nulls=True)
        .fill_null("")
        .str.strip_chars()
        .str.replace_all(r"\s+", " ")
    )
    texts = grouped.select(joined.alias("text"), pl.col(row_id).alias("rows"))
    rows = [np.asarray(r, dtype=np.int64) for r in texts.get_column("rows").to_list()]
    return texts.select("text"), rows


def _shingle_hashes(texts: pl.Series, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per text, the sorted unique 64-bit shingle hashes and their dense ids, as CSR (values, ids, offsets)."""
    words = pl.DataFrame({"w": texts.str.split(" ")}).with_row_index("d")
    lens = words.select(pl.col("w").list.len()).to_series().to_numpy().astype(np.int64)
    flat = words.select(pl.col("w").explode().hash(_SEED)).to_series().to_numpy()
    n_docs = lens.size
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    n_sh = np.maximum(lens - k + 1, 1)
    doc_of = np.repeat(np.arange(n_docs), n_sh)
    first = np.repeat(offsets[:-1] - np.concatenate([[0], np.cumsum(n_sh)[:-1]]), n_sh)
    starts = first + np.arange(doc_of.size)
    width = np.minimum(lens, k)[doc_of]
    h = np.full(starts.size, np.uint64(0x243F6A8885A308D3), dtype=np.uint64)
    for j in range(k):
        m = j < width
        if m.all():
            h = splitmix64(h ^ flat[starts + j])
        else:
            h[m] = splitmix64(h[m] ^ flat[starts[m] + j])
    # Dense shingle ids in hash order; one int64 sort gives each text's sorted unique set.
    uniq_vals, inv = _unique_inverse(h)
    key = _unique(doc_of * np.int64(uniq_vals.size) + inv)
    d, ids = np.divmod(key, np.int64(uniq_vals.size))
    counts = np.bincount(d, minlength=n_docs)
    offs = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=offs[1:])
    return uniq_vals[ids], ids, offs


def _minhash(values: np.ndarray, offsets: np.ndarray, num_perm: int) -> np.ndarray:
    """(n_docs, num_perm) uint32 MinHash signatures by multiply-shift hashing of 64-bit shingle hashes."""
    rng = np.random.default_rng(_SEED)
    a = rng.integers(1, 2**63, size=num_perm, dtype=np.uint64) | np.uint64(1)
    b = rng.integers(0, 2**63, size=num_perm, dtype=np.uint64)
    starts = offsets[:-1]
    sig = np.empty((starts.size, num_perm), dtype=np.uint32)
    x32 = (values ^ (values >> np.uint64(32))).astype(np.uint32).astype(np.uint64)
    tmp = np.empty(values.size, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for p in range(num_perm):
            np.multiply(x32, a[p], out=tmp)
            tmp += b[p]
            tmp >>= np.uint64(32)
            sig[:, p] = np.minimum.reduceat(tmp, starts).astype(np.uint32)
    return sig


def _pairs_in_runs(sorted_idx: np.ndarray, keys_sorted: np.ndarray) -> np.ndarray:
    """All (i, j) pairs of items sharing a key, given items sorted by key; as uint64 codes lo*2^32+hi."""
    n = keys_sorted.size
    if n < 2:
        return np.empty(0, dtype=np.uint64)
    boundary = np.flatnonzero(np.diff(keys_sorted) != 0) + 1
    run_start = np.concatenate([[0], boundary])
    run_len = np.diff(np.concatenate([run_start, [n]]))
    multi = run_len > 1
    if not multi.any():
        return np.empty(0, dtype=np.uint64)
    rs, rl = run_start[multi], run_len[multi]
    pos = np.repeat(rs, rl) + (np.arange(rl.sum()) - np.repeat(np.cumsum(rl) - rl, rl))
    run_end = np.repeat(rs + rl, rl)
    later = run_end - pos - 1
    left = np.repeat(pos, later)
    right = left + 1 + (np.arange(later.sum()) - np.repeat(np.cumsum(later) - later, later))
    a, b = sorted_idx[left].astype(np.uint64), sorted_idx[right].astype(np.uint64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    return (lo << np.uint64(32)) | hi


def _candidates(sig: np.ndarray) -> np.ndarray:
    codes = []
    for band in range(BANDS):
        block = sig[:, band * ROWS_PER_BAND : (band + 1) * ROWS_PER_BAND].astype(np.uint64)
        key = np.full(sig.shape[0], np.uint64(band), dtype=np.uint64)
        for j in range(ROWS_PER_BAND):
            key = splitmix64(key ^ block[:, j])
        order = np.argsort(key, kind="stable")
        codes.append(_pairs_in_runs(order, key[order]))
    return _unique(np.concatenate(codes)) if codes else np.empty(0, dtype=np.uint64)


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
        idx_a = np.repeat(offsets[pa], la) + (np.arange(la.sum()) - np.repeat(np.cumsum(la) - la, la))
        idx_b = np.repeat(offsets[pb], lb) + (np.arange(lb.sum()) - np.repeat(np.cumsum(lb) - lb, lb))
        # pair * span + id is globally sorted on the b side, so membership is one searchsorted.
        key_a = np.repeat(np.arange(pa.size, dtype=np.int64), la) * span + ids[idx_a]
        key_b = np.repeat(np.arange(pb.size, dtype=np.int64), lb) * span + ids[idx_b]
        pos = np.minimum(np.searchsorted(key_b, key_a), key_b.size - 1)
        found = key_b[pos] == key_a
        inter = np.bincount(key_a[found] // span, minlength=pa.size)
        out[start:stop] = inter / (la + lb - inter)
        start = stop
    return out


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
    texts, rows = _texts(df, text_columns, row_id)
    values, ids, offsets = _shingle_hashes(texts.get_column("text"), shingle_size)
    sig = _minhash(values, offsets, NUM_PERM)
    codes = _candidates(sig)
    a = (codes >> np.uint64(32)).astype(np.int64)
    b = (codes & np.uint64(0xFFFFFFFF)).astype(np.int64)
    sizes = np.diff(offsets)
    # Length filter: J <= min/max of the set sizes.
    keep = np.minimum(sizes[a], sizes[b]) >= threshold * np.maximum(sizes[a], sizes[b]) - 1e-9
    a, b = a[keep], b[keep]
    jac = _jaccard(ids, offsets, a, b)
    hit = jac >= threshold - 1e-12
    a, b, jac = a[hit], b[hit], jac[hit]
    return NearDupResult(
        _expand(rows, a, b, jac, empty), len(rows), int(codes.size), int(a.size), int(values.size)
    )


def _expand(
    rows: list[np.ndarray], a: np.ndarray, b: np.ndarray, jac: np.ndarray, empty: pl.DataFrame
) -> pl.DataFrame:
    if a.size == 0:
        return empty
    ra, rb, rj = [], [], []
    for x, y, j in zip(a.tolist(), b.tolist(), jac.tolist(), strict=True):
        xa, yb = rows[x], rows[y]
        left, right = np.repeat(xa, yb.size), np.tile(yb, xa.size)
        ra.append(np.minimum(left, right))
        rb.append(np.maximum(left, right))
        rj.append(np.full(left.size, j))
    return pl.DataFrame(
        {"row_a": np.concatenate(ra), "row_b": np.concatenate(rb), "jaccard": np.concatenate(rj)}
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
