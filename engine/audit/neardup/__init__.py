"""Near-duplicate text inputs: exact all-pairs Jaccard over word shingles by prefix filtering.

Definitions (docs/checks.md#source-near-duplicates):
- a row's text = its text columns, each normalised (lowercase, strip, whitespace runs → one space),
  joined by one space, nulls and empty values skipped;
- shingles = the set of `k` consecutive words (k=5); a text shorter than k words is one shingle;
- rows with the same normalised text columns are one *text* (exact duplicates are another check);
  a near-duplicate pair is two rows of different texts whose shingle sets have Jaccard >= t (0.8).

Shingles are hashed to 64 bits (our own hash of each word's bytes, stable across library releases; a
shingle's hash is splitmix64 of the sum of its word hashes, each times an odd constant of its position);
Jaccard is computed exactly on these 64-bit shingle hashes (a collision needs ~2^32 shingles).

Search — exact, no false negatives and no false positives: prefix filtering (Chaudhuri et al. 2006,
Bayardo et al. 2007). Put all shingles in one global order; if J(x, y) >= t then x and y share one of
the first |x| - ceil(t|x|) + 1 shingles of x and of y. Any fixed total order keeps this exact; ordering
rarest-first (by a hashed count table, which can only over-count) makes prefixes hold the rare
shingles, so templated text yields few candidates — unlike MinHash-LSH, which is probabilistic and
floods such text with false candidates. Candidates sharing a prefix shingle that pass the length
filter t·max(|x|,|y|) <= min(|x|,|y|) and the sketch bounds are verified by exact Jaccard. A sketch
counts a text's shingles per hash bucket; common shingles share a bucket, so the sum of the per-bucket
minima bounds |x & y| exactly. 64 buckets for every text; texts of 256 shingles or more (long documents,
where the prefixes of templated text hold shared, common shingles) also get 2,048 buckets (2 KB each).

Memory is bounded by a chunk of texts, not by the data: pass 1 hashes the shingles and fills the count
table, pass 2 keeps only each text's prefix (a few shingles), verification re-hashes just the texts that
appear in candidates. What would not fit that bound goes to temporary files (tempfile's folder, TMPDIR),
removed as soon as they are read: pass 1's shingle hashes for pass 2 (8 bytes a shingle, 12 in chunks
with texts shorter than k words) and the prefix-pair signatures, one file per matching pass (8 bytes a
signature) — about 0.6 GB at most for a million ticket-length texts. On the bounded path (`bounded`)
pass 2 also writes each text's prefix entries and sketches to temporary files and keeps only four
numbers a text and an 8-byte coarse sketch (ondisk.py); candidates are then found shard by shard from
those files (sharded.py), those the coarse sketches allow are written to cell files by the ranges of
their two texts, and the sketch bounds read each range's sketches once per cell (blockjoin.py): the
same candidates and pairs.

One module per step: hashing.py (word and shingle hashes), shingles.py (passes 1 and 2: prefixes), candidates.py (signatures and
the length, positional and sketch bounds), verify.py (exact Jaccard); arrays.py holds their helpers;
ondisk.py, sharded.py and blockjoin.py are the bounded path's per-text files, its shard-by-shard
candidates and its sketch bounds by ranges of texts.
kernels.py loads the compiled loops (_kernels.c, built by `pip install`) that normalise ASCII rows, hash
words and shingles, do passes 1 and 2 one text at a time and merge the verified pairs' sets; they give the
numpy path's arrays value for value, and where they were not built the numpy path runs. numpy's huge
pages are off while the search runs (arrays.small_pages).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from claimcheck.engine.audit.neardup import ondisk, sharded
from claimcheck.engine.audit.neardup.arrays import ranges, small_pages, unique_inverse
from claimcheck.engine.audit.neardup.candidates import find_candidates
from claimcheck.engine.audit.neardup.hashing import row_hashes_and_bytes
from claimcheck.engine.audit.neardup.shingles import build_prefixes
from claimcheck.engine.audit.neardup.verify import BOUNDED_VERIFY_SHINGLES, VERIFY_SHINGLES, verify_pairs
from claimcheck.engine.audit.texts import Texts, distinct_texts
from claimcheck.engine.audit.textstore import TextStore

METHOD = "prefix filtering (exact)"


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


def near_duplicates(
    df: pl.DataFrame,
    text_columns: list[str],
    *,
    row_id: str = "row_id",
    threshold: float = 0.8,
    shingle_size: int = 5,
    bounded: bool = False,
    store: TextStore | None = None,
) -> NearDupResult:
    """Near-duplicate row pairs across different normalised texts (see module docstring). `bounded`:
    the candidate search in small shards, one at a time (the same pairs; engine/audit/budget.py).
    `store`: the text columns stay on disk and `df` holds stand-ins (engine/audit/textstore.py)."""
    if df.height == 0 or not text_columns:
        return NearDupResult(_no_pairs(), 0, 0, 0, 0)
    with small_pages():
        return _search(df, text_columns, row_id, threshold, shingle_size, (bounded, store))


def _no_pairs() -> pl.DataFrame:
    return pl.DataFrame(schema={"row_a": pl.Int64, "row_b": pl.Int64, "jaccard": pl.Float64})


def _search(
    df: pl.DataFrame,
    text_columns: list[str],
    row_id: str,
    threshold: float,
    k: int,
    how: tuple[bool, TextStore | None],
) -> NearDupResult:
    bounded, store = how
    got = row_hashes_and_bytes(df, text_columns, store)
    hashes = None if got is None else got[0]
    texts, rows, text_of = distinct_texts(df, text_columns, row_id, hashes, store)
    # Each text's bytes, from the row hashes' read of the texts (not a second read of the store).
    nbytes = None if got is None else got[1][texts.reps]
    del got
    try:
        sizes, codes = _candidates(texts, k, threshold, (bounded, nbytes))
    except OSError as exc:
        from claimcheck.engine.pipeline.context import StageInputError

        raise StageInputError(
            f"The near-duplicate search could not use its temporary folder {tempfile.gettempdir()}: "
            f"{exc.strerror or exc}. It needs room there for about 12 bytes per word of text "
            f"({texts.len():,} distinct texts). Free space there or set TMPDIR to a writable folder "
            "with room, then run the stage again."
        ) from exc
    a, b, jac = verify_pairs(texts, codes, sizes, k, BOUNDED_VERIFY_SHINGLES if bounded else VERIFY_SHINGLES)
    hit = jac >= threshold - 1e-12
    a, b, jac = a[hit], b[hit], jac[hit]
    return NearDupResult(
        _expand(rows, text_of, a, b, jac), texts.len(), int(codes.size), int(a.size), int(sizes.sum())
    )


def _candidates(
    texts: Texts, k: int, threshold: float, how: tuple[bool, np.ndarray | None]
) -> tuple[np.ndarray, np.ndarray]:
    """Each text's set size and the candidate pairs: on the bounded path from the per-text arrays
    written to disk (ondisk.py, sharded.py), else held in memory. `how`: (bounded, each text's bytes)."""
    bounded, nbytes = how
    if not bounded:
        prefixes = build_prefixes(texts, k, threshold, nbytes=nbytes)
        return prefixes.sizes, find_candidates(prefixes, threshold)
    on_disk = build_prefixes(texts, k, threshold, gather=ondisk.spill, nbytes=nbytes)
    try:
        return on_disk.sizes, sharded.find_candidates(on_disk, threshold)
    finally:
        on_disk.close()


def _expand(
    rows: np.ndarray, text_of: np.ndarray, a: np.ndarray, b: np.ndarray, jac: np.ndarray
) -> pl.DataFrame:
    """Text pairs → every row pair between their rows (rows grouped by text, in text order)."""
    if a.size == 0:
        return _no_pairs()
    n_texts = int(text_of.max()) + 1
    per = np.bincount(text_of, minlength=n_texts)
    first = np.zeros(n_texts, dtype=np.int64)
    np.cumsum(per[:-1], out=first[1:])
    na, nb = per[a], per[b]
    combos = na * nb
    pair = np.repeat(np.arange(a.size, dtype=np.int64), combos)
    within = ranges(np.zeros(a.size, dtype=np.int64), combos)
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

    nodes, inv = unique_inverse(np.concatenate([pairs["row_a"].to_numpy(), pairs["row_b"].to_numpy()]))
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
    from claimcheck.engine.data.rows import verify_pinned

    verify_pinned(path, sha256, "pairs_sha256", "near-duplicate pairs", "source")
    return pl.read_parquet(path).select(
        pl.col("row_id_a").alias("row_a"), pl.col("row_id_b").alias("row_b"), pl.col("jaccard")
    )
