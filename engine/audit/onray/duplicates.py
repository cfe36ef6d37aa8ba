"""Duplicate model inputs, conflicting labels and the label-noise ceiling as Ray tasks: the same figures as
engine/audit/duplicates.py (its docstring defines them), with the grouping by key shuffled by Ray.

Map tasks over row shards: each row's compared inputs (and target) go to the partition its 64-bit hash
of those inputs names (texts.row_hashes: equal inputs, equal hash, so a group never spans two
partitions). Reduce task r takes partition r of every map task and groups it on the real values (a
hash collision only puts two groups in one partition): its groups, their rows, the largest, and for the
exact inputs the conflicting groups and the sum over groups of the most frequent target's count. The
driver adds the partitions' figures up; a row alone in its group counts one towards the ceiling, as in
the local check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.audit.duplicates import conflict_stats, duplicate_stats, key_exprs
from claimcheck.engine.audit.onray import Cluster, remote
from claimcheck.engine.audit.texts import row_hashes
from claimcheck.engine.data.rows import TARGET

SHARD_ROWS = 500_000  # rows per map task at most


def _map(part: pl.DataFrame, columns: list[str], normalisation: str, parts: int) -> tuple[pl.DataFrame, ...]:
    """A shard's compared inputs and target, split by the inputs' hash into `parts` frames."""
    keyed = part.select(*key_exprs(part.schema, columns, normalisation), pl.col(TARGET))
    h = row_hashes(part, key_exprs(part.schema, columns, normalisation)).to_numpy()
    which = pl.Series("p", (h % np.uint64(parts)).astype(np.int64))
    split = keyed.with_columns(which).partition_by("p", as_dict=True, include_key=False)
    empty = keyed.clear()
    return tuple(split.get((r,), empty) for r in range(parts))


def _reduce(columns: list[str], exact: bool, *frames: pl.DataFrame) -> dict[str, int]:
    """One partition's figures (module docstring)."""
    df = pl.concat(frames, how="vertical") if frames else pl.DataFrame()
    out = {"groups": 0, "rows": 0, "largest": 0, "conflict_groups": 0, "conflict_rows": 0, "best": 0}
    if df.height == 0:
        return out
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


def _shuffled(
    ray: Any, cluster: Cluster, df: pl.DataFrame, columns: list[str], normalisation: str, exact: bool
) -> dict[str, int]:
    parts = cluster.partitions
    step = max(1, min(SHARD_ROWS, -(-df.height // parts)))
    src = df.select(*columns, TARGET)
    mapper = remote(ray, _map, num_returns=parts)
    maps = [
        mapper.remote(src.slice(lo, step), columns, normalisation, parts) for lo in range(0, df.height, step)
    ]
    reducer = remote(ray, _reduce)
    done = ray.get([reducer.remote(columns, exact, *[m[r] for m in maps]) for r in range(parts)])
    total = {key: sum(d[key] for d in done) for key in done[0]}
    total["largest"] = max(d["largest"] for d in done)
    return total


def _dup(t: dict[str, int], height: int) -> dict[str, Any]:
    return {
        "groups": t["groups"],
        "rows": t["rows"],
        "share": round(t["rows"] / height, 6),
        "largest_group_rows": t["largest"],
    }


def identity_stats(
    ray: Any, cluster: Cluster, df: pl.DataFrame, columns: list[str], normalisation: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(duplicate_stats exact, duplicate_stats after `normalisation`, conflict_stats), by Ray tasks."""
    if df.height == 0 or not columns:
        exact = duplicate_stats(df, columns, "none")
        return exact, exact, conflict_stats(df, columns)
    t = _shuffled(ray, cluster, df, columns, "none", exact=True)
    exact = _dup(t, df.height)
    norm = (
        _dup(_shuffled(ray, cluster, df, columns, normalisation, False), df.height)
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
