"""Single-feature predictive power: identifier shortcuts and suspected outcome / same-observation leakage.

Each column alone predicts the target by a cross-validated lookup classifier: the column is turned
into discrete cells (its categories when it has at most MAX_CATEGORIES distinct values, otherwise its
rank binned into RANK_BINS equal-count bins — which captures identifiers allocated in per-class
ranges), each cell predicts the most frequent target of the training folds (unseen cells predict the
training majority). This is what a depth-unlimited decision tree on that single discrete feature
learns, computed with Polars group-bys instead of refitting sklearn per fold.

Score: out-of-fold accuracy over 5 folds (seeded splitmix64 hash of row_id), compared with the trivial
rate (the majority class share); gain = (accuracy - trivial) / (1 - trivial), the same normalisation
as Deepchecks' predictive power score (anchor: PPS, FeatureLabelCorrelation flags PPS >= 0.8).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from engine.data import ROW_ID, TARGET
from engine.splits import unit_position

FOLDS = 5
MAX_CATEGORIES = 1000
RANK_BINS = 100
SAMPLE_ROWS = 100_000
SEED = 20240917


def sample(df: pl.DataFrame, limit: int = SAMPLE_ROWS) -> tuple[pl.DataFrame, str]:
    """A deterministic sample (lowest seeded hash of row_id) and its coverage text."""
    if df.height <= limit:
        return df, "full"
    pos = unit_position(df.get_column(ROW_ID).to_numpy(), SEED)
    keep = np.argsort(pos, kind="stable")[:limit]
    return df[np.sort(keep)], f"sample: {limit} of {df.height} rows"


def cells(df: pl.DataFrame, column: str) -> tuple[pl.Expr, str]:
    """The discrete cell of each row for a column, and how it was made."""
    n_unique = df.get_column(column).n_unique()
    if n_unique <= MAX_CATEGORIES:
        return pl.col(column).cast(pl.String).fill_null("<null>").alias("cell"), "categories"
    rank = pl.col(column).rank("ordinal")
    n = max(df.height, 1)
    binned = ((rank - 1) * RANK_BINS // n).cast(pl.Int64).cast(pl.String)
    return binned.fill_null("<null>").alias("cell"), f"rank bins ({RANK_BINS})"


def single_feature_score(df: pl.DataFrame, column: str) -> dict[str, Any]:
    """Out-of-fold accuracy of the single-column lookup classifier vs the trivial rate."""
    n = df.height
    if n < FOLDS * 2:
        return {"column": column, "accuracy": 0.0, "trivial": 0.0, "gain": 0.0, "encoding": "too few rows"}
    cell, how = cells(df, column)
    fold = (unit_position(df.get_column(ROW_ID).to_numpy(), SEED) % np.uint64(FOLDS)).astype(np.int64)
    data = df.select(cell, pl.col(TARGET)).with_columns(pl.Series("fold", fold))
    counts = data.group_by(["fold", "cell", TARGET]).agg(pl.len().alias("n"))
    correct = 0
    for f in range(FOLDS):
        train = counts.filter(pl.col("fold") != f).group_by(["cell", TARGET]).agg(pl.col("n").sum())
        majority = (
            train.group_by(TARGET)
            .agg(pl.col("n").sum())
            .sort(["n", TARGET], descending=[True, False])
            .row(0)[0]
        )
        best = (
            train.sort(["n", TARGET], descending=[True, False]).group_by("cell", maintain_order=True).first()
        )
        test = data.filter(pl.col("fold") == f).join(
            best.select("cell", pl.col(TARGET).alias("pred")), on="cell", how="left"
        )
        pred = test.get_column("pred").fill_null(majority)
        correct += int((pred == test.get_column(TARGET)).sum())
    acc = correct / n
    trivial = df.get_column(TARGET).value_counts().get_column("count").max() / n
    gain = (acc - trivial) / (1 - trivial) if trivial < 1 else 0.0
    return {
        "column": column,
        "accuracy": round(acc, 6),
        "trivial": round(float(trivial), 6),
        "gain": round(max(gain, 0.0), 6),
        "encoding": how,
        "distinct": int(df.get_column(column).n_unique()),
    }


def identifier_candidates(
    df: pl.DataFrame, columns: list[str], id_column: str, unique_share: float = 0.5
) -> list[str]:
    """Near-unique columns (distinct share >= unique_share) and the declared id column."""
    out = []
    for c in columns:
        if c == id_column:
            out.append(c)
            continue
        if df.height and df.get_column(c).n_unique() / df.height >= unique_share:
            out.append(c)
    return out
