"""Duplicate model inputs, conflicting labels and the label-noise ceiling as Ray tasks: the same figures as
engine/audit/duplicates.py (its docstring defines them), with the grouping by key shuffled by Ray.

Two shuffles by Ray over row shards, partitioned by each row's 64-bit hash of its compared inputs
(texts.row_hashes: equal inputs, equal hash, so a group never spans two partitions):
1. map tasks return the shard's hashes by partition; reduce task r finds the hashes of partition r that
   two rows or more hold (only rows with such a hash can be in a group: the local check's candidates);
2. map tasks send only their candidate rows' compared inputs and target, by partition; reduce task r
   groups them on the real values (a hash collision only puts two groups in one partition): its
   groups, their rows, the largest, and for the exact inputs the conflicting groups and the sum over
   groups of the most frequent target's count.
The driver adds the partitions' figures up; a row outside the candidates is alone in its group and
counts one towards the ceiling, as in the local check.

The shards are the frame's rows (compared inputs and target), SHARD_BYTES at most, put in the object
store one at a time. Where the text columns stay on disk (engine/audit/textstore.py; the frame holds
stand-ins), the driver reads the store's file a slice at a time (TextStore.by_slices) and puts each
slice as shards: it holds one slice's texts at a time, and the object store holds each shard until both
shuffles' map tasks ran. With `audit_ray_texts = "shared"` a shard is a slice of the spill file's
row groups that both map tasks read themselves (shared.py): the driver sends its row ids only.

On a cluster of one worker CPU, where the texts are in the frame or the tasks read the spill file
themselves, the shuffles can only add work: one task computes the local check's figures
(engine/audit/duplicates.py, reading the texts from the file where they stay on disk).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.audit.duplicates import conflict_stats, duplicate_stats, key_exprs
from claimcheck.engine.audit.onray import Cluster, remote, shared
from claimcheck.engine.audit.texts import row_hashes
from claimcheck.engine.audit.textstore import TextStore
from claimcheck.engine.data.rows import TARGET

SHARD_ROWS = 500_000  # rows per map task at most
# And about this many bytes at most: `ray.put` pickles a shard in the driver's memory before it copies
# it to the object store, so a shard's bytes are what the driver holds twice while it sends one.
SHARD_BYTES = 16 << 20


def _hash_map(
    part: pl.DataFrame | shared.FileSlice, columns: list[str], normalisation: str, parts: int
) -> tuple[np.ndarray, ...]:
    """A shard's rows' 64-bit hashes of their compared inputs, split by hash into `parts` arrays, then
    the hashes in row order (kept in the object store for _rows_map). `part`: the shard's rows, or the
    slice of the spill file to read them from (shared.py)."""
    part = shared.frame_of(part, [*columns, TARGET])
    h = row_hashes(part, key_exprs(part.schema, columns, normalisation)).to_numpy()
    which = (h % np.uint64(parts)).astype(np.int64)
    order = np.argsort(which, kind="stable")
    cuts = np.cumsum(np.bincount(which, minlength=parts))[:-1]
    return (*np.split(h[order], cuts), h)


def _repeated(*hashes: np.ndarray) -> np.ndarray:
    """Of one hash partition, the hashes two rows or more hold (sorted)."""
    h = np.sort(np.concatenate(hashes)) if hashes else np.empty(0, dtype=np.uint64)
    same = h[1:] == h[:-1]
    return np.unique(h[1:][same])


def _rows_map(
    part: pl.DataFrame | shared.FileSlice,
    h: np.ndarray,
    columns: list[str],
    normalisation: str,
    parts: int,
    *repeated: np.ndarray,
) -> tuple[pl.DataFrame, ...]:
    """A shard's rows whose hash repeats anywhere (the only rows a group can hold): their compared
    inputs and target, split by hash into `parts` frames (partition r holds only hashes of repeated[r])."""
    part = shared.frame_of(part, [*columns, TARGET])
    rep = np.concatenate(repeated) if repeated else np.empty(0, dtype=np.uint64)
    rep.sort()
    at = np.minimum(np.searchsorted(rep, h), max(rep.size - 1, 0))
    idx = np.flatnonzero(rep[at] == h) if rep.size else np.empty(0, dtype=np.int64)
    keyed = part[idx].select(*key_exprs(part.schema, columns, normalisation), pl.col(TARGET))
    which = pl.Series("p", (h[idx] % np.uint64(parts)).astype(np.int64))
    split = keyed.with_columns(which).partition_by("p", as_dict=True, include_key=False)
    empty = keyed.clear()
    return tuple(split.get((r,), empty) for r in range(parts))


def _reduce(columns: list[str], exact: bool, *frames: pl.DataFrame) -> dict[str, int]:
    """One partition's figures over its candidate rows (module docstring)."""
    df = pl.concat(frames, how="vertical") if frames else pl.DataFrame()
    out = {
        "groups": 0,
        "rows": 0,
        "largest": 0,
        "conflict_groups": 0,
        "conflict_rows": 0,
        "best": 0,
        "cand": 0,
    }
    if df.height == 0:
        return out
    out["cand"] = df.height
    g = df.group_by(columns).agg(pl.len().alias("n")).filter(pl.col("n") > 1)
    if g.height:
        out.update(groups=g.height, rows=int(g["n"].sum()), largest=int(g["n"].max()))  # type: ignore[arg-type]
    if exact:
        per = df.group_by([*columns, TARGET]).agg(pl.len().alias("n"))
        grp = per.group_by(columns).agg(
            pl.col("n").sum(), pl.col("n").max().alias("top"), pl.len().alias("k")
        )
        conflict = grp.filter(pl.col("k") > 1)
        out["conflict_groups"] = conflict.height
        out["conflict_rows"] = int(conflict["n"].sum()) if conflict.height else 0
        out["best"] = int(grp["top"].sum())
    return out


def _shards(
    ray: Any, cluster: Cluster, df: pl.DataFrame, columns: list[str], store: TextStore | None
) -> list:
    """The rows' compared inputs and target, one object-store shard at a time (module docstring); where
    the tasks read the spill file themselves (shared.py), its slices of SHARD_BYTES."""
    if shared.wanted(cluster, store):
        return shared.slices(store, SHARD_BYTES)  # type: ignore[arg-type]
    if store is not None:

        def put(part: pl.DataFrame) -> list:
            step = min(SHARD_ROWS, _shard_rows(part))
            return [ray.put(part.slice(lo, step)) for lo in range(0, part.height, step)]

        return [ref for refs in store.by_slices([*columns, TARGET], put) for ref in refs]
    return [ref for ref, _ in put_shards(ray, cluster, df.select(*columns, TARGET))]


def put_shards(ray: Any, cluster: Cluster, keyed: pl.DataFrame) -> list[tuple[Any, int]]:
    """`keyed` in object-store shards of SHARD_ROWS rows and SHARD_BYTES at most, at least one per
    partition where the rows allow: each shard's reference and its first row position."""
    step = max(1, min(SHARD_ROWS, -(-keyed.height // cluster.partitions), _shard_rows(keyed)))
    return [(ray.put(keyed.slice(lo, step)), lo) for lo in range(0, keyed.height, step)]


def _shard_rows(frame: pl.DataFrame) -> int:
    """Rows of `frame` in SHARD_BYTES (its mean bytes a row)."""
    return max(1, int(SHARD_BYTES * max(frame.height, 1) // max(frame.estimated_size(), 1)))


def _shuffled(
    ray: Any, cluster: Cluster, df: pl.DataFrame, columns: list[str], how: tuple[str, bool, TextStore | None]
) -> dict[str, int]:
    """Two shuffles by hash: the hashes alone (8 bytes a row) to find those that repeat, then only the
    rows that hold one (the local check's candidate rows), grouped on their real values. `how`: the
    normalisation, whether the exact figures (conflicts, ceiling) are wanted, and the store of the
    text columns left on disk (or None)."""
    normalisation, exact, store = how
    parts = cluster.partitions
    shard_refs = _shards(ray, cluster, df, columns, store)
    hmap = remote(ray, _hash_map, num_returns=parts + 1)
    hashed = [hmap.remote(ref, columns, normalisation, parts) for ref in shard_refs]
    rep = remote(ray, _repeated)
    repeated = [rep.remote(*[m[r] for m in hashed]) for r in range(parts)]
    rmap = remote(ray, _rows_map, num_returns=parts)
    rows = [
        rmap.remote(ref, m[-1], columns, normalisation, parts, *repeated)
        for ref, m in zip(shard_refs, hashed, strict=True)
    ]
    reducer = remote(ray, _reduce)
    del shard_refs, hashed
    done = ray.get([reducer.remote(columns, exact, *[m[r] for m in rows]) for r in range(parts)])
    total = {key: sum(d[key] for d in done) for key in done[0]}
    total["largest"] = max(d["largest"] for d in done)
    # A row outside the candidates is alone in its group: it counts one towards the ceiling.
    total["best"] += df.height - total["cand"]
    return total


def _one_task(
    keyed: pl.DataFrame, columns: list[str], normalisation: str, store: TextStore | None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The local check's figures in one task (a cluster of one worker CPU, module docstring): its
    candidate rows and groups, the texts read from the spill file where `store` is given."""
    from claimcheck.engine.audit.duplicates import candidate_rows, stored_key_hashes_each

    hashes: list[Any] = [None, None]
    if store is not None:
        shared.readable(store)
        ways = ["none"] if normalisation == "none" else ["none", normalisation]
        hashes = [*stored_key_hashes_each(keyed, columns, ways, store), None][:2]
    cand = candidate_rows(keyed, columns, "none", hashes[0], store)
    exact = duplicate_stats(keyed, columns, "none", cand)
    norm = exact
    if normalisation != "none":
        after = candidate_rows(keyed, columns, normalisation, hashes[1], store) if store is not None else None
        norm = duplicate_stats(keyed, columns, normalisation, after)
    return exact, norm, conflict_stats(keyed, columns, cand)


def _dup(t: dict[str, int], height: int) -> dict[str, Any]:
    return {
        "groups": t["groups"],
        "rows": t["rows"],
        "share": round(t["rows"] / height, 6),
        "largest_group_rows": t["largest"],
    }


def identity_stats(
    ray: Any,
    cluster: Cluster,
    df: pl.DataFrame,
    columns: list[str],
    normalisation: str,
    store: TextStore | None = None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(duplicate_stats exact, duplicate_stats after `normalisation`, conflict_stats), by Ray tasks.
    `store`: the text columns stay on disk and `df` holds stand-ins (engine/audit/textstore.py)."""
    if df.height == 0 or not columns:
        exact = duplicate_stats(df, columns, "none")
        return exact, exact, conflict_stats(df, columns)
    if shared.wanted(cluster, store):
        shared.check(ray, store)  # type: ignore[arg-type]
    if shared.one_task(cluster, store):
        task = store if store is None else shared.whole(store)
        one = remote(ray, _one_task).remote(df.select(*columns, TARGET), columns, normalisation, task)
        return ray.get(one)
    t = _shuffled(ray, cluster, df, columns, ("none", True, store))
    exact = _dup(t, df.height)
    norm = (
        _dup(_shuffled(ray, cluster, df, columns, (normalisation, False, store)), df.height)
        if normalisation != "none"
        else exact
    )
    conf = {
        "groups": t["conflict_groups"],
        "rows": t["conflict_rows"],
        "noise_ceiling_accuracy": round(t["best"] / df.height, 6),
        "rows_above_ceiling": df.height - t["best"],
    }
    return exact, norm, conf
