"""Split membership: how rows are assigned, how later stages read a split, and the locked-test guard.

Assignment is deterministic given the seed: each unit (row or entity family) gets a position from a
seeded splitmix64 hash of its id — never Python's hash(), which changes between processes.

Playbook: "Separate training, development, calibration and locked final testing when applicable.
Development selects recipes/checkpoints; calibration fits temperatures/thresholds; final results do not
select either." and "Fit those only on training data and reuse the fitted state unchanged."
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.evidence import EvidenceError, StageRecord
from claimcheck.engine.pipeline.context import StageContext, StageInputError

if TYPE_CHECKING:
    import polars as pl

SPLITS = ("train", "dev", "calibration", "test")
SPLIT = "split"
FOLD = "fold"
MEMBERSHIP_FILE = "split.parquet"
LOCKED_READER = "artifact"  # the only stage allowed to see locked-test labels
# The independent unit a split grouping keeps together, as every later stage names it: the families
# saved with the membership (its family_id column) are the baseline's folds and every bootstrap, the
# artifact's intervals and McNemar pairing. The split's Inputs.grouping is the key.
UNIT_KINDS = {
    "entities": "family",
    "duplicates": "duplicate family",
    "duplicates_and_near": "near-duplicate family",
}
# The units whose families are copies of one text: their rows are not independent of each other, so
# the baseline refuses to resample them one by one (unit = "row").
DUPLICATE_UNITS = (UNIT_KINDS["duplicates"], UNIT_KINDS["duplicates_and_near"])
# The same units counted in words ("470 duplicate families").
UNIT_PLURALS = {
    "family": "entity families",
    "duplicate family": "duplicate families",
    "near-duplicate family": "near-duplicate families",
    "row": "rows",
}


class LockedTestError(ClaimcheckError):
    """A stage other than the artifact stage asked for the locked test labels."""


# ---------------------------------------------------------------- deterministic hashing


_M1, _M2, _GOLDEN = (
    np.uint64(0xBF58476D1CE4E5B9),
    np.uint64(0x94D049BB133111EB),
    np.uint64(0x9E3779B97F4A7C15),
)


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on uint64 arrays (wrapping arithmetic): a stable, well-mixed hash."""
    z = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += _GOLDEN
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def unit_position(ids: np.ndarray, seed: int) -> np.ndarray:
    """A seeded pseudo-random uint64 per id, identical across runs and processes."""
    salt = splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    return splitmix64(ids.astype(np.int64).view(np.uint64) ^ salt)


# ---------------------------------------------------------------- assignment


def _cut_counts(n: int, fractions: dict[str, float]) -> np.ndarray:
    """Cumulative boundaries (in units of n) for the splits in SPLITS order."""
    cum = np.cumsum([fractions.get(s, 0.0) for s in SPLITS])
    cum = cum / cum[-1] if cum[-1] > 0 else cum
    return np.round(cum * n).astype(np.int64)


def _labels_from_rank(rank: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    return np.searchsorted(bounds, rank, side="right")


def assign_rows(ids: np.ndarray, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Split index (0..3) per row: rows ordered by seeded hash, cut at exact fractions."""
    order = np.argsort(unit_position(ids, seed), kind="stable")
    rank = np.empty(ids.size, dtype=np.int64)
    rank[order] = np.arange(ids.size)
    return _labels_from_rank(rank, _cut_counts(ids.size, fractions))


def assign_stratified(
    ids: np.ndarray, labels: np.ndarray, fractions: dict[str, float], seed: int
) -> np.ndarray:
    """Like assign_rows, within each class separately, so every split keeps the class shares."""
    out = np.empty(ids.size, dtype=np.int64)
    for cls in np.unique(labels):
        idx = np.flatnonzero(labels == cls)
        out[idx] = assign_rows(ids[idx], fractions, seed)
    return out


def assign_ordered_units(
    unit_sizes: np.ndarray, order: np.ndarray, fractions: dict[str, float]
) -> np.ndarray:
    """Split index per unit: units taken in `order`, each to the split where its row-midpoint falls."""
    sizes = unit_sizes[order]
    mid = np.cumsum(sizes) - sizes / 2.0
    total = float(sizes.sum()) or 1.0
    cum = np.cumsum([fractions.get(s, 0.0) for s in SPLITS])
    cum = cum / cum[-1] if cum[-1] > 0 else cum
    lab = np.minimum(np.searchsorted(cum * total, mid, side="right"), len(SPLITS) - 1)
    out = np.empty(order.size, dtype=np.int64)
    out[order] = lab
    return out


def assign_groups(family_ids: np.ndarray, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Split index per row with whole families kept together (families in seeded-hash order)."""
    fams, inverse, sizes = np.unique(family_ids, return_inverse=True, return_counts=True)
    order = np.argsort(unit_position(fams, seed), kind="stable")
    return assign_ordered_units(sizes, order, fractions)[inverse]


def assign_time(
    times_us: np.ndarray, ids: np.ndarray, fractions: dict[str, float], cuts_us: list[int]
) -> np.ndarray:
    """Split index per row by time: explicit cut points (ascending) or, without them, row-count fractions."""
    if cuts_us:
        active = [i for i, s in enumerate(SPLITS) if fractions.get(s, 0.0) > 0] or list(range(len(SPLITS)))
        if len(cuts_us) != len(active) - 1:
            raise StageInputError(
                f"split: {len(cuts_us)} time cut point(s) given for {len(active)} non-empty splits; "
                f"give {len(active) - 1} ascending cut points"
            )
        period = np.searchsorted(np.asarray(cuts_us, dtype=np.int64), times_us, side="right")
        return np.asarray(active, dtype=np.int64)[period]
    order = np.lexsort((ids, times_us))
    rank = np.empty(ids.size, dtype=np.int64)
    rank[order] = np.arange(ids.size)
    return _labels_from_rank(rank, tie_free_bounds(times_us[order], _cut_counts(ids.size, fractions)))


def tie_free_bounds(sorted_times: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Each cut moved to the nearest place between two distinct timestamps (or an end), so rows that
    share a timestamp stay in one split; on equal distance the earlier place wins."""
    n = sorted_times.size
    if n == 0:
        return bounds
    # Places a cut may go: 0, n, and every i where sorted_times[i - 1] != sorted_times[i].
    places = np.concatenate(([0], np.flatnonzero(np.diff(sorted_times)) + 1, [n]))
    at = np.clip(np.searchsorted(places, bounds, side="left"), 1, places.size - 1)
    lower, upper = places[at - 1], places[at]
    return np.where(bounds - lower <= upper - bounds, lower, upper).astype(np.int64)


def family_first_split(family_ids: np.ndarray, row_labels: np.ndarray) -> np.ndarray:
    """Per row, the earliest split index any row of its family has (time splits are ordered)."""
    fams, inverse = np.unique(family_ids, return_inverse=True)
    first = np.full(fams.size, len(SPLITS), dtype=np.int64)
    np.minimum.at(first, inverse, row_labels)
    return first[inverse]


def assign_folds(family_ids: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Fold 0..k-1 per row, families kept whole, folds balanced by rows (seeded-hash order)."""
    fams, inverse, sizes = np.unique(family_ids, return_inverse=True, return_counts=True)
    order = np.argsort(unit_position(fams, seed + 1), kind="stable")
    s = sizes[order]
    mid = np.cumsum(s) - s / 2.0
    fold_sorted = np.minimum((mid / max(float(s.sum()), 1.0) * k).astype(np.int64), k - 1)
    fold = np.empty(fams.size, dtype=np.int64)
    fold[order] = fold_sorted
    return fold[inverse]


def to_datetime_us(value: str) -> int:
    """A cut point given as ISO date or datetime → naive-UTC microseconds."""
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise StageInputError(
            f"split: time cut point '{value}' is not an ISO date (e.g. 2024-06-01)"
        ) from None
    if t.tzinfo is not None:
        t = t.astimezone(dt.UTC).replace(tzinfo=None)
    return int((t - dt.datetime(1970, 1, 1)) / dt.timedelta(microseconds=1))


# ---------------------------------------------------------------- reading a split


def membership_path(ctx: StageContext) -> Path:
    return ctx.data_dir / MEMBERSHIP_FILE


def membership(split_record: StageRecord, ctx: StageContext) -> pl.DataFrame:
    """row_id → split (and fold) as the split stage saved it; raises EvidenceError if the file changed."""
    import polars as pl

    from claimcheck.engine.data.rows import verify_pinned
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    mem = parse(split_record.check("split.membership"), shapes.Membership)
    if mem is None:
        raise EvidenceError(
            "split record", "checks.split.membership", "has no membership file", "re-run the split stage"
        )
    path = ctx.session_dir / mem.path
    verify_pinned(path, mem.sha256, "sha256", "split membership", "split")
    return pl.read_parquet(path)


def unit_kind(split_record: StageRecord) -> str:
    """The independent unit the split kept together (UNIT_KINDS), which `rows` returns as family_id;
    a membership saved without it (older records): "family", the source's entity families."""
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    mem = parse(split_record.check("split.membership"), shapes.Membership)
    return mem.unit if mem is not None and mem.unit else UNIT_KINDS["entities"]


def locked_reads(ctx: StageContext) -> list[dict[str, Any]]:
    """Every successful read of the locked test through `rows` on this context: caller, rows, time."""
    return ctx.__dict__.setdefault("_locked_reads", [])


def rows(
    split: str, upstream: dict[str, StageRecord], ctx: StageContext, *, caller: str, labels: bool = True
) -> pl.DataFrame:
    """The dataset rows of one split: all columns + row_id + target + family_id (+ fold), sorted by row_id.

    family_id is the unit the split kept together (`unit_kind`), as the membership file saved it; a
    membership saved without one gives the source's entity families (rows outside them: null).

    The locked test's labels are for the artifact stage only; anyone else gets LockedTestError.
    With labels=False the target and the raw label column are left out.
    """
    import polars as pl

    from claimcheck.engine.data.rows import FAMILY, ROW_ID, TARGET, families, load_dataset
    from claimcheck.engine.evidence import now_iso

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; splits are {', '.join(SPLITS)}")
    if split == "test" and labels and caller != LOCKED_READER:
        raise LockedTestError(
            f"'{caller}' asked for the locked test labels; only the '{LOCKED_READER}' stage may read them "
            "(final results must not select recipes, checkpoints or thresholds)"
        )
    if "source" not in upstream or "split" not in upstream:
        raise StageInputError(f"'{caller}' needs frozen source and split records to read the '{split}' split")
    source_inputs = upstream["source"].inputs
    mem = membership(upstream["split"], ctx).filter(pl.col(SPLIT) == split)
    out = load_dataset(source_inputs, ctx).join(mem.lazy(), on=ROW_ID, how="inner")
    if FAMILY not in mem.columns:
        out = out.join(families(upstream["source"], ctx).lazy(), on=ROW_ID, how="left")
    out = out.sort(ROW_ID).collect()
    if not labels:
        out = out.drop([c for c in (TARGET, str(source_inputs.get("label_column", ""))) if c in out.columns])
    if split == "test":
        locked_reads(ctx).append({"caller": caller, "rows": out.height, "labels": labels, "time": now_iso()})
    return out


# ---------------------------------------------------------------- train-only fitting


@dataclass(frozen=True)
class FittedState:
    estimator: Any
    digest: str
    train_rows: int


def state_digest(obj: Any) -> str:
    """sha256 of an object's fitted state (arrays, dicts, nested estimators), stable across processes."""
    h = hashlib.sha256()
    _feed(h, obj, depth=0)
    return "sha256:" + h.hexdigest()


def _feed(h: Any, obj: Any, depth: int) -> None:
    if depth > 20:
        h.update(b"<deep>")
        return
    if obj is None or isinstance(obj, bool | int | float | str | bytes):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        h.update(f"nd:{arr.dtype.str}:{arr.shape};".encode())
        h.update(arr.tobytes() if arr.dtype != object else repr(arr.tolist()).encode())
    elif isinstance(obj, np.generic):
        _feed(h, obj.item(), depth + 1)
    elif isinstance(obj, dict):
        h.update(f"dict:{len(obj)};".encode())
        for k in sorted(obj, key=repr):
            _feed(h, k, depth + 1)
            _feed(h, obj[k], depth + 1)
    elif isinstance(obj, list | tuple | set | frozenset):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        h.update(f"{type(obj).__name__}:{len(items)};".encode())
        for v in items:
            _feed(h, v, depth + 1)
    elif hasattr(obj, "tocsr") and hasattr(obj, "nnz"):  # scipy sparse
        m = obj.tocsr()
        for part in (np.asarray(m.shape), m.data, m.indices, m.indptr):
            _feed(h, part, depth + 1)
    elif isinstance(obj, np.random.RandomState):
        _feed(h, obj.get_state(), depth + 1)
    elif callable(obj) and not hasattr(obj, "__dict__"):
        h.update(f"callable:{getattr(obj, '__qualname__', type(obj).__name__)};".encode())
    elif hasattr(obj, "__dict__"):
        h.update(f"obj:{type(obj).__module__}.{type(obj).__qualname__};".encode())
        _feed(h, {k: v for k, v in vars(obj).items()}, depth + 1)
    else:
        h.update(f"type:{type(obj).__qualname__};".encode())


def fit_on_train(
    fitter: Any,
    frame: pl.DataFrame,
    columns: str | list[str],
    *,
    y_column: str | None = None,
    split_column: str = SPLIT,
) -> FittedState:
    """Fit a vectorizer / scaler / encoder / imputer on the train rows of `frame` only; return it with its state digest.

    `frame` holds rows of several splits with a `split` column (or only train rows and no such
    column). A single column name gives the fitter a list of values (what text vectorizers take);
    a list gives a 2-D array. Reuse the returned estimator unchanged and check it with
    `verify_state(state)` before transforming dev / test rows.
    """
    import polars as pl

    train = frame.filter(pl.col(split_column) == "train") if split_column in frame.columns else frame
    if train.height == 0:
        raise StageInputError("fit_on_train: no train rows to fit on")
    if isinstance(columns, str):
        x: Any = train.get_column(columns).fill_null("").to_list()
    else:
        x = train.select(columns).to_numpy()
    if y_column is None:
        fitter.fit(x)
    else:
        fitter.fit(x, train.get_column(y_column).to_numpy())
    return FittedState(estimator=fitter, digest=state_digest(fitter), train_rows=train.height)


def verify_state(state: FittedState) -> None:
    """Raise if the fitted state changed since fit_on_train (it must be reused unchanged)."""
    now = state_digest(state.estimator)
    if now != state.digest:
        raise EvidenceError(
            "fitted state", "digest", f"changed from {state.digest} to {now}", "refit on train rows only"
        )
