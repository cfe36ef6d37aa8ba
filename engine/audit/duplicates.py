"""Duplicate model inputs, conflicting labels and the label-noise ceiling.

Definitions (docs/checks.md#source-duplicate-inputs):
- a duplicate group is a set of >= 2 rows whose model-input columns are identical (nulls compare
  equal, as in Deepchecks DataDuplicates); 'normalised' applies lower_strip_ws to string columns first;
- a conflicting group is an exact duplicate group holding more than one target;
- the label-noise ceiling is the best accuracy any function of the inputs can reach on these rows:
  each input-identical group predicted as its most frequent target, i.e. sum(max count) / rows.

How, exactly and in bounded memory: each row's (normalised) input columns are hashed to 64 bits a
slice at a time, so normalised copies of the text exist for one slice only. Rows with distinct hashes
have distinct inputs, so only rows whose hash repeats can be in a group; those candidates alone are
grouped on their real values, which removes any hash collision. The figures are the exact ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.audit.texts import norm_text_expr, row_hashes
from claimcheck.engine.audit.textstore import TextStore
from claimcheck.engine.data.rows import TARGET


def key_exprs(schema: pl.Schema, columns: list[str], normalisation: str) -> list[pl.Expr]:
    """The model-input columns as compared: lower_strip_ws applies to string columns only."""
    if normalisation == "lower_strip_ws":
        return [norm_text_expr(c).alias(c) if schema[c] == pl.String else pl.col(c) for c in columns]
    return [pl.col(c) for c in columns]


def key_hashes(df: pl.DataFrame, columns: list[str], normalisation: str) -> pl.Series:
    """A 64-bit hash of each row's compared inputs (equal inputs → equal hash), one slice at a time."""
    return row_hashes(df, key_exprs(df.schema, columns, normalisation))


def stored_key_hashes(
    df: pl.DataFrame, columns: list[str], normalisation: str, store: TextStore
) -> pl.Series:
    """key_hashes where the text columns stay on disk (engine/audit/textstore.py) and `df` holds
    stand-ins for them: the file's compared columns read a slice of row groups (STORE_SLICE_BYTES of
    decoded text) at a time, the hashes (8 bytes a row) kept (a streaming scan of the whole file holds
    several row groups per thread in flight: +270 MB on conversations of 1.3 KB, against +60 MB).
    Equal inputs give equal hashes; the hashes are compared only with each other."""
    return stored_key_hashes_each(df, columns, [normalisation], store)[0]


def stored_key_hashes_each(
    df: pl.DataFrame, columns: list[str], normalisations: list[str], store: TextStore
) -> list[pl.Series]:
    """stored_key_hashes for each of `normalisations`, the same hashes, from one read of the file: each
    slice's compared columns are decoded once and hashed under every normalisation, the slices on up to
    thread_cap() threads (Polars' hashing and the Parquet decode release the GIL) with STORE_SLICE_BYTES
    decoded in all."""
    from claimcheck.engine.audit.neardup.hashing import STORE_SLICE_BYTES
    from claimcheck.engine.threads import thread_cap

    exprs = [  # texts.row_hashes' expression, one a normalisation
        pl.struct(key_exprs(df.schema, columns, n)).hash(seed=0).alias(f"h{i}")
        for i, n in enumerate(normalisations)
    ]
    names = sorted({n for e in exprs for n in e.meta.root_names()})
    parts = store.by_slices(names, lambda part: part.select(exprs), STORE_SLICE_BYTES, thread_cap())
    if not parts:
        return [pl.Series("h", [], dtype=pl.UInt64) for _ in exprs]
    both = pl.concat(parts)
    return [both.get_column(f"h{i}").alias("h") for i in range(len(exprs))]


def candidate_rows(
    df: pl.DataFrame,
    columns: list[str],
    normalisation: str,
    hashes: pl.Series | None = None,
    store: TextStore | None = None,
) -> pl.DataFrame:
    """The compared inputs and target of the rows whose hash repeats: the only rows a group can hold."""
    if hashes is not None:
        h = hashes
    elif store is not None:
        h = stored_key_hashes(df, columns, normalisation, store)
    else:
        h = key_hashes(df, columns, normalisation)
    idx = np.flatnonzero(h.is_duplicated().to_numpy())
    rows = store.rows(idx, [*columns, TARGET]) if store is not None else df[idx]
    return rows.select(*key_exprs(df.schema, columns, normalisation), pl.col(TARGET))


def duplicate_stats(
    df: pl.DataFrame, columns: list[str], normalisation: str = "none", cand: pl.DataFrame | None = None
) -> dict[str, Any]:
    """Groups of input-identical rows and the rows in them."""
    if df.height == 0 or not columns:
        return {"groups": 0, "rows": 0, "share": 0.0, "largest_group_rows": 0}
    cand = candidate_rows(df, columns, normalisation) if cand is None else cand
    g = cand.group_by(columns).agg(pl.len().alias("n")).filter(pl.col("n") > 1)
    rows = int(g.get_column("n").sum()) if g.height else 0
    return {
        "groups": g.height,
        "rows": rows,
        "share": round(rows / df.height, 6),
        "largest_group_rows": int(g.get_column("n").max()) if g.height else 0,
    }


def conflict_stats(df: pl.DataFrame, columns: list[str], cand: pl.DataFrame | None = None) -> dict[str, Any]:
    """Input-identical groups with more than one target, and the label-noise ceiling.

    `cand` is candidate_rows(df, columns, "none"), when the caller already has it.
    """
    if df.height == 0 or not columns:
        return {"groups": 0, "rows": 0, "noise_ceiling_accuracy": 1.0, "rows_above_ceiling": 0}
    cand = candidate_rows(df, columns, "none") if cand is None else cand
    per = cand.group_by([*columns, TARGET]).agg(pl.len().alias("n"))
    grp = per.group_by(columns).agg(
        pl.col("n").sum().alias("n"), pl.col("n").max().alias("top"), pl.len().alias("k")
    )
    conflict = grp.filter(pl.col("k") > 1)
    # A row outside the candidates is alone in its group: always predictable.
    best = df.height - cand.height + (int(grp.get_column("top").sum()) if grp.height else 0)
    return {
        "groups": conflict.height,
        "rows": int(conflict.get_column("n").sum()) if conflict.height else 0,
        "noise_ceiling_accuracy": round(best / df.height, 6),
        "rows_above_ceiling": df.height - best,
    }
