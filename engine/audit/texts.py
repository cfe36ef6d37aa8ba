"""Normalised text and row hashes, shared by the duplicate, overlap and near-duplicate checks.

`lower_strip_ws` is the one text normalisation (docs/checks.md#source-duplicate-inputs). Rows are
hashed a slice at a time so normalised copies exist for one slice only; every user of a hash groups
the rows whose hash repeats on their real values, so a collision never merges two different rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import polars as pl

if TYPE_CHECKING:
    from claimcheck.engine.audit.textstore import TextStore

T = TypeVar("T")


def norm_text_expr(col: str) -> pl.Expr:
    """lower_strip_ws: lowercase, strip, collapse whitespace runs (null stays null)."""
    # "\s{2,}|[^\S ]" rewrites exactly what "\s+" → " " does (a lone space is left as it is), 5x faster.
    return (
        pl.col(col)
        .cast(pl.String)
        .str.to_lowercase()
        .str.strip_chars()
        .str.replace_all(r"\s{2,}|[^\S ]", " ")
    )


HASH_SLICE = 200_000  # rows normalised and hashed at a time


def by_slices(df: pl.DataFrame, fn: Callable[[pl.DataFrame], T]) -> list[T]:
    """fn over the frame a slice at a time, so that normalised copies of the text exist for a slice
    only: HASH_SLICE rows, or with w worker threads (claimcheck.engine.threads) w slices of HASH_SLICE / w rows at
    a time, the same memory. Results in row order."""
    from claimcheck.engine.threads import ordered_map, thread_cap

    workers = thread_cap()
    step = HASH_SLICE if workers < 2 else max(1, min(HASH_SLICE // workers, -(-df.height // workers)))
    return list(ordered_map(lambda off: fn(df.slice(off, step)), range(0, df.height, step), workers))


def row_hashes(df: pl.DataFrame, exprs: list[pl.Expr], store: TextStore | None = None) -> pl.Series:
    """A 64-bit hash of each row's values of `exprs` (equal values → equal hash), a slice at a time
    (by_slices); with `store`, the rows' slices are read from it (engine/audit/textstore.py)."""

    def fn(part: pl.DataFrame) -> pl.Series:
        return part.select(pl.struct(exprs).hash(seed=0).alias("h")).to_series()

    if store is not None:
        names = sorted({n for e in exprs for n in e.meta.root_names()})
        parts = store.by_slices(names, fn)
    else:
        parts = by_slices(df, fn)
    return pl.concat(parts) if parts else pl.Series("h", [], dtype=pl.UInt64)


def _joined(columns: list[str]) -> pl.Expr:
    """A row's text: its normalised text columns joined by one space, nulls and empty values skipped.

    Each part is already stripped and collapsed, so once empty parts are null the join has single
    spaces only: no second whitespace pass over the joined text.
    """
    parts = [norm_text_expr(c).replace("", None) for c in columns]
    return pl.concat_str(parts, separator=" ", ignore_nulls=True).fill_null("").alias("text")


@dataclass
class Texts:
    """The distinct normalised texts, made on demand from the rows that first hold them: no copy of
    every text is kept, only one chunk at a time."""

    frame: pl.DataFrame  # the text columns (shares the caller's buffers; stand-ins when `store` is set)
    columns: list[str]
    reps: np.ndarray  # row position of each text's first row, ascending
    # Where the text columns stay on disk (engine/audit/textstore.py): their rows are read from it.
    store: TextStore | None = None

    def len(self) -> int:
        return int(self.reps.size)

    def schema(self) -> pl.Schema:
        return self.store.schema if self.store is not None else self.frame.schema

    def rows(self, idx: np.ndarray) -> pl.DataFrame:
        """The text columns of the first rows of texts `idx`."""
        at = self.reps[np.asarray(idx, dtype=np.int64)]
        return self.store.rows(at, self.columns) if self.store is not None else self.frame[at]

    def gather(self, idx: np.ndarray) -> pl.Series:
        return self.rows(idx).select(_joined(self.columns)).to_series()

    def slice(self, lo: int, n: int) -> pl.Series:
        return self.gather(np.arange(lo, min(lo + n, self.len()), dtype=np.int64))


def distinct_texts(
    df: pl.DataFrame,
    text_columns: list[str],
    row_id: str,
    hashes: pl.Series | None = None,
    store: TextStore | None = None,
) -> tuple[Texts, np.ndarray, np.ndarray]:
    """Distinct normalised texts, and per row (grouped by text, in text order) its row id and text index.

    Rows are one text when their normalised text columns are equal. Rows whose hash is unique are
    texts of their own; rows whose hash repeats are grouped on their real normalised values (a hash
    collision splits there), each group's first row standing for the text. `hashes`: the rows' hashes
    of their normalised columns where the caller has them (any such hash gives the same texts), else
    row_hashes makes them. `store`: the text columns stay on disk (engine/audit/textstore.py) and
    `df` holds stand-ins for them.
    """
    keys = [f"__n{i}" for i in range(len(text_columns))]
    exprs = [norm_text_expr(c).alias(k) for c, k in zip(text_columns, keys, strict=True)]
    h = row_hashes(df, exprs, store) if hashes is None else hashes
    n = df.height
    rep_of = np.arange(n, dtype=np.int64)
    dup = np.flatnonzero(h.is_duplicated().to_numpy())
    if dup.size:
        # The rows read are dropped as soon as their normalised values are made: one copy held, not two.
        keyed = (store.rows(dup, text_columns) if store is not None else df[dup]).select(*exprs)
        keyed = keyed.with_columns(pl.Series("h", h.gather(dup)), pl.Series("i", dup))
        rep_of[dup] = keyed.select(pl.col("i").min().over(["h", *keys])).to_series().to_numpy()
    reps = np.flatnonzero(rep_of == np.arange(n, dtype=np.int64))
    text_id = np.searchsorted(reps, rep_of)
    order = np.argsort(text_id, kind="stable")
    rows = df.get_column(row_id).to_numpy().astype(np.int64)[order]
    return Texts(df.select(text_columns), list(text_columns), reps, store), rows, text_id[order]
