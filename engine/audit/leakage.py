"""Single-feature predictive power: identifier shortcuts and suspected outcome / same-observation leakage.

Each column alone predicts the target by a cross-validated lookup on discrete cells. Numeric, temporal
and boolean columns are cut by order: each value's cell is its lowest rank binned into RANK_BINS
equal-count bins (ties share a cell), so a value unseen in training still lands in the cell of its
neighbours — an identifier allocated in per-class ranges is caught whatever its cardinality, and a
column whose values each hold at least 1/RANK_BINS of the rows keeps one cell per value (then the
encoding reads "categories"). Other columns use their categories when they have at most
MAX_CATEGORIES distinct values, otherwise their rank in text order binned the same way. Each cell
predicts, from the training folds, the most frequent class (classification) or the mean target
(numeric target); an empty cell predicts the training majority / mean. This is what a one-feature
decision tree with one leaf per cell learns, computed from count tables in numpy.

Score, out of fold over 5 folds (seeded splitmix64 hash of row_id). Categorical target: accuracy
against the trivial rate (the majority class share); gain = (accuracy - trivial) / (1 - trivial), the
same normalisation as Deepchecks' predictive power score (anchor: PPS, FeatureLabelCorrelation flags
PPS >= 0.8). Numeric target: out-of-fold R² (1 − SSE / SS around the mean), gain = max(R², 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.data.rows import ROW_ID, TARGET
from claimcheck.engine.data.splits import unit_position

FOLDS = 5
MAX_CATEGORIES = 1000
RANK_BINS = 100
SAMPLE_ROWS = 100_000
SEED = 20240917
DENSE_PAIRS = 1 << 16  # (cell, class) tables up to this size are counted densely


def sample(df: pl.DataFrame, limit: int = SAMPLE_ROWS) -> tuple[pl.DataFrame, str]:
    """A deterministic sample (lowest seeded hash of row_id) and its coverage text."""
    if df.height <= limit:
        return df, "full"
    pos = unit_position(df.get_column(ROW_ID).to_numpy(), SEED)
    keep = np.argsort(pos, kind="stable")[:limit]
    return df[np.sort(keep)], f"sample: {limit} of {df.height} rows"


def cell_codes(df: pl.DataFrame, column: str) -> tuple[np.ndarray, str, int]:
    """Each row's discrete cell as an integer code, how the cells were made, and the distinct count.

    Null is a cell of its own. Integer-like columns (identifiers, mostly) and NaN-free floats take one
    stable sort in numpy; other types take Polars' ranks of their text form.
    """
    col = df.get_column(column)
    n = max(df.height, 1)
    if col.dtype.is_float():
        return _sorted_cells(col.fill_nan(None), n)  # NaN is missing: the null cell
    if col.dtype.is_integer() or col.dtype.is_temporal() or col.dtype == pl.Boolean:
        return _sorted_cells(col, n)
    distinct = col.n_unique()
    if distinct <= MAX_CATEGORIES:
        codes = col.cast(pl.String).rank("dense").fill_null(0)
        return codes.to_numpy().astype(np.int64), "categories", distinct
    binned = (col.rank("ordinal").cast(pl.Int64) - 1) * RANK_BINS // n
    return binned.fill_null(RANK_BINS).to_numpy().astype(np.int64), f"rank bins ({RANK_BINS})", distinct


def _stable_argsort(v: np.ndarray) -> np.ndarray:
    """np.argsort(kind="stable"), by the faster unstable sort of (value, position) keys where they fit."""
    if v.size > 1 and v.dtype.kind in "iubf" and bool((v[1:] >= v[:-1]).all()):
        return np.arange(v.size)  # already in order, as identifiers allocated in sequence often are
    if v.size and v.dtype.kind in "iub":
        lo, hi = int(v.min()), int(v.max())
        if hi < 2**62 and (hi - lo + 1) * v.size < 2**62:
            keys = (v.astype(np.int64) - lo) * v.size + np.arange(v.size, dtype=np.int64)
            return np.argsort(keys)
    return np.argsort(v, kind="stable")


def _sorted_cells(col: pl.Series, n: int) -> tuple[np.ndarray, str, int]:
    """Order cells by one stable sort: a value's cell is its lowest rank (of n rows) binned into
    RANK_BINS; nulls take cell RANK_BINS."""
    nulls = col.null_count()
    v = col.drop_nulls() if nulls else col
    v = v.to_physical().to_numpy() if not col.dtype.is_float() else v.to_numpy()
    order = _stable_argsort(v)
    s = v[order]
    if nulls:
        order = np.flatnonzero(col.is_not_null().to_numpy())[order]  # positions in the full column
    new = np.empty(s.size, dtype=bool)
    new[:1] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    distinct = int(new.sum()) + (1 if nulls else 0)
    first = np.maximum.accumulate(np.where(new, np.arange(s.size, dtype=np.int64), 0))
    codes = np.full(col.len(), RANK_BINS, dtype=np.int64)
    codes[order] = first * RANK_BINS // n
    cells = len(np.unique(codes[order])) + (1 if nulls else 0)
    how = "categories" if cells == distinct else f"rank bins ({RANK_BINS})"
    return codes, how, distinct


def _target_codes(df: pl.DataFrame) -> np.ndarray:
    """Targets as codes in sort order, so argmax's first maximum breaks ties by class name."""
    t = df.get_column(TARGET).cast(pl.String)
    classes = t.drop_nulls().unique().sort()
    # Null (never present after load_dataset's filter) gets the code after every class.
    return t.cast(pl.Enum(classes)).to_physical().fill_null(len(classes)).to_numpy().astype(np.int64)


def single_feature_scores(
    df: pl.DataFrame, columns: list[str], *, numeric: bool = False
) -> dict[str, dict[str, Any]]:
    """Each column's out-of-fold score as a single-column lookup: accuracy vs the trivial rate, or
    (numeric target) R²; rows whose target is not a number are left out of a numeric score."""
    if numeric:
        from claimcheck.engine.audit.target import numeric_target

        df = df.with_columns(numeric_target(df).alias(TARGET)).drop_nulls(TARGET)
    n = df.height
    if n < FOLDS * 2:
        empty = {"r2": 0.0} if numeric else {"accuracy": 0.0, "trivial": 0.0}
        return {c: {"column": c, **empty, "gain": 0.0, "encoding": "too few rows"} for c in columns}
    fold = (unit_position(df.get_column(ROW_ID).to_numpy(), SEED) % np.uint64(FOLDS)).astype(np.int64)
    if numeric:
        y = df.get_column(TARGET).to_numpy().astype(np.float64)
    else:
        y = _target_codes(df)
        trivial = int(np.bincount(y).max()) / n
    out = {}
    for c in columns:
        cell, how, distinct = cell_codes(df, c)
        if numeric:
            r2 = _oof_r2(cell, y, fold)
            figures = {"r2": round(r2, 6), "gain": round(max(r2, 0.0), 6)}
        else:
            acc = _oof_correct(cell, y, fold) / n
            gain = (acc - trivial) / (1 - trivial) if trivial < 1 else 0.0
            figures = {
                "accuracy": round(acc, 6),
                "trivial": round(float(trivial), 6),
                "gain": round(max(gain, 0.0), 6),
            }
        out[c] = {"column": c, **figures, "encoding": how, "distinct": distinct}
    return out


def _oof_r2(cell: np.ndarray, y: np.ndarray, fold: np.ndarray) -> float:
    """Out-of-fold R² of the per-cell training mean (an empty cell predicts the training mean)."""
    _, cid = np.unique(cell, return_inverse=True)
    k = int(cid.max()) + 1
    key = fold * k + cid
    sums = np.bincount(key, weights=y, minlength=FOLDS * k).reshape(FOLDS, k)
    counts = np.bincount(key, minlength=FOLDS * k).reshape(FOLDS, k)
    t_sum, t_cnt = sums.sum(axis=0) - sums, counts.sum(axis=0) - counts  # training folds' totals
    fold_mean = t_sum.sum(axis=1) / np.maximum(t_cnt.sum(axis=1), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        table = np.where(t_cnt > 0, t_sum / np.where(t_cnt > 0, t_cnt, 1), fold_mean[:, None])
    pred = table[fold, cid]
    sst = float(((y - y.mean()) ** 2).sum())
    return 1.0 - float(((y - pred) ** 2).sum()) / sst if sst > 0 else 0.0


def _oof_correct(cell: np.ndarray, y: np.ndarray, fold: np.ndarray) -> int:
    """Out-of-fold correct predictions of the per-cell majority class, all folds at once.

    Counts per (cell, class) pair, in cell-then-class order: dense when the table is small, else only
    the pairs present (so a label with thousands of values costs no dense table). A fold's training
    counts are all counts minus its own; each cell predicts its first maximum (ties → the class that
    sorts first); a cell unseen in training predicts the training majority.
    """
    n_classes = int(y.max()) + 1
    key = cell * n_classes + y
    size = (int(cell.max()) + 1) * n_classes
    if size <= DENSE_PAIRS:
        pairs, pid = np.arange(size), key
    else:
        pairs, pid = np.unique(key, return_inverse=True)
    p_cell, p_class = pairs // n_classes, pairs % n_classes
    starts = np.flatnonzero(np.r_[True, p_cell[1:] != p_cell[:-1]])
    seg_of_cell = np.zeros(int(p_cell[-1]) + 1, dtype=np.int64)
    seg_of_cell[p_cell[starts]] = np.arange(starts.size)
    per_fold = np.bincount(fold * pairs.size + pid, minlength=FOLDS * pairs.size).reshape(FOLDS, -1)
    train = per_fold.sum(axis=0) - per_fold
    top = np.maximum.reduceat(train, starts, axis=1)
    is_top = train == np.repeat(top, np.diff(np.r_[starts, pairs.size]), axis=1)
    first = np.minimum.reduceat(np.where(is_top, np.arange(pairs.size), pairs.size), starts, axis=1)
    cls = np.bincount(fold * n_classes + y, minlength=FOLDS * n_classes).reshape(FOLDS, -1)
    majority = (cls.sum(axis=0) - cls).argmax(axis=1)
    table = np.where(top > 0, p_class[np.minimum(first, pairs.size - 1)], majority[:, None])  # (fold, cell)
    pred = table.ravel()[fold * starts.size + seg_of_cell[cell]]
    return int((pred == y).sum())


def identifier_candidates(
    df: pl.DataFrame, columns: list[str], id_column: str, unique_share: float = 0.5
) -> list[str]:
    """Near-unique columns (distinct share >= unique_share) and the declared id column. Float columns
    are measurements, near-unique by nature, never identifiers (their leakage is single_feature's)."""
    out = []
    for c in columns:
        if c == id_column:
            out.append(c)
            continue
        col = df.get_column(c)
        if df.height and not col.dtype.is_float() and col.n_unique() / df.height >= unique_share:
            out.append(c)
    return out
