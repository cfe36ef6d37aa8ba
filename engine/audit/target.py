"""A numeric target's distribution (count, range, quantiles, mean, std) and its coverage across splits:
the regression counterparts of class counts, prevalence, class support and label coverage.

The target column (claimcheck.engine.data.rows.TARGET) holds the label as text; a numeric target is read as Float64
here, and values that are not numbers are counted and shown, never dropped silently.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from claimcheck.engine.data.rows import TARGET

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
EXAMPLES = 5


def numeric_target(frame: pl.DataFrame) -> pl.Expr:
    """The target as Float64; null where it is null or not a number."""
    return pl.col(TARGET).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)


def summary(values: pl.Series) -> dict[str, Any]:
    """count, min, p05 … p95 (linear interpolation), max, mean, std (n − 1) of the non-null values."""
    # One chunk: Polars sums a float column chunk by chunk, so the mean and std would follow the
    # reader's chunks (the bounded and in-memory reads chunk differently) in their last digits.
    v = values.drop_nulls().drop_nans().rechunk()
    out: dict[str, Any] = {"count": int(v.len())}
    if v.len() == 0:
        return out
    out["min"], out["max"] = float(v.min()), float(v.max())
    for q in QUANTILES:
        out[f"p{round(q * 100):02d}"] = float(v.quantile(q, interpolation="linear"))
    out["mean"] = float(v.mean())
    out["std"] = float(v.std()) if v.len() > 1 else 0.0
    return out


def distribution(frame: pl.DataFrame) -> dict[str, Any]:
    """The whole source's numeric target: rows, null labels, values that are not numbers, distinct values."""
    t = frame.select(pl.col(TARGET).alias("raw"), numeric_target(frame).alias("y"))
    bad = t.filter(pl.col("raw").is_not_null() & pl.col("y").is_null()).get_column("raw")
    y = t.get_column("y")
    return {
        "rows": frame.height,
        "null_labels": int(t.get_column("raw").null_count()),
        "non_numeric": int(bad.len()),
        "non_numeric_examples": [str(s) for s in bad.unique(maintain_order=True).head(EXAMPLES)],
        "distinct": int(y.drop_nulls().n_unique()),
        "summary": summary(y),
    }


def per_split(joined: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """summary() of the target in each split present in `joined` (a `split` column), in split order."""
    from claimcheck.engine.data.splits import SPLITS

    y = joined.select(pl.col("split"), numeric_target(joined).alias("y"))
    return {
        s: summary(y.filter(pl.col("split") == s).get_column("y"))
        for s in SPLITS
        if (y.get_column("split") == s).any()
    }


def range_coverage(joined: pl.DataFrame) -> dict[str, Any]:
    """Held-out targets below the train minimum or above the train maximum, counted per split."""
    y = joined.select(pl.col("split"), numeric_target(joined).alias("y")).drop_nulls("y")
    train = y.filter(pl.col("split") == "train").get_column("y")
    out: dict[str, Any] = {"below_train_min": {}, "above_train_max": {}, "share_outside": {}}
    if train.len() == 0:
        return out
    lo, hi = float(train.min()), float(train.max())
    out["train_min"], out["train_max"] = lo, hi
    for s in ("dev", "calibration", "test"):
        part = y.filter(pl.col("split") == s).get_column("y")
        if part.len() == 0:
            continue
        below, above = int((part < lo).sum()), int((part > hi).sum())
        out["below_train_min"][s], out["above_train_max"][s] = below, above
        out["share_outside"][s] = round((below + above) / part.len(), 6)
    return out
