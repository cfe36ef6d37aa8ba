"""Duplicate model inputs, conflicting labels and the label-noise ceiling.

Definitions (docs/checks.md#source-duplicate-inputs):
- a duplicate group is a set of >= 2 rows whose model-input columns are identical (nulls compare
  equal, as in Deepchecks DataDuplicates); 'normalised' applies lower_strip_ws to string columns first;
- a conflicting group is an exact duplicate group holding more than one target;
- the label-noise ceiling is the best accuracy any function of the inputs can reach on these rows:
  each input-identical group predicted as its most frequent target, i.e. sum(max count) / rows.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from engine.audit.neardup import norm_text_expr
from engine.data import TARGET


def _keys(df: pl.DataFrame, columns: list[str], normalisation: str) -> tuple[pl.DataFrame, list[str]]:
    if normalisation == "lower_strip_ws":
        exprs = [norm_text_expr(c).alias(c) if df.schema[c] == pl.String else pl.col(c) for c in columns]
        return df.select(*exprs, pl.col(TARGET)), columns
    return df.select(*columns, TARGET), columns


def duplicate_stats(df: pl.DataFrame, columns: list[str], normalisation: str = "none") -> dict[str, Any]:
    """Groups of input-identical rows and the rows in them."""
    if df.height == 0 or not columns:
        return {"groups": 0, "rows": 0, "share": 0.0, "largest_group_rows": 0}
    keyed, cols = _keys(df, columns, normalisation)
    g = keyed.group_by(cols).agg(pl.len().alias("n")).filter(pl.col("n") > 1)
    rows = int(g.get_column("n").sum()) if g.height else 0
    return {
        "groups": g.height,
        "rows": rows,
        "share": round(rows / df.height, 6),
        "largest_group_rows": int(g.get_column("n").max()) if g.height else 0,
    }


def conflict_stats(df: pl.DataFrame, columns: list[str]) -> dict[str, Any]:
    """Input-identical groups with more than one target, and the label-noise ceiling."""
    if df.height == 0 or not columns:
        return {"groups": 0, "rows": 0, "noise_ceiling_accuracy": 1.0, "rows_above_ceiling": 0}
    keyed = df.select(*columns, TARGET)
    per = keyed.group_by([*columns, TARGET]).agg(pl.len().alias("n"))
    grp = per.group_by(columns).agg(
        pl.col("n").sum().alias("n"), pl.col("n").max().alias("top"), pl.len().alias("k")
    )
    conflict = grp.filter(pl.col("k") > 1)
    best = int(grp.get_column("top").sum())
    return {
        "groups": conflict.height,
        "rows": int(conflict.get_column("n").sum()) if conflict.height else 0,
        "noise_ceiling_accuracy": round(best / df.height, 6),
        "rows_above_ceiling": df.height - best,
    }
