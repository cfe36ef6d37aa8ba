"""Entity families as Ray tasks: the same families as engine/audit/families.py `compute_families` (its
docstring defines them), with the grouping of each entity column's values shuffled by Ray.

One shuffle by Ray over row shards, partitioned by each present value's 64-bit hash:
- map tasks are sent only their shard's entity columns (as strings; the columns are never left on
  disk, engine/audit/textstore.py) and the shard's first row position; each returns, by partition,
  its present values as (column index, row position, value);
- reduce task r groups partition r on the real (column, value) — so no hash collision merges two
  values, and equal strings in different columns never link — and returns (row position, group)
  edges, the groups numbered 0..G-1 within the partition.
The driver offsets each partition's groups past the rows and the partitions before it, and runs the
same connected components and renumbering by first row position (families.py `_components`), so the
families file and every measured value are the local run's: the numbering does not depend on the
order of the group ids (tests/test_audit_families_ray.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.audit.families import _components
from claimcheck.engine.audit.onray import Cluster, remote
from claimcheck.engine.audit.onray.duplicates import put_shards
from claimcheck.engine.data.rows import FAMILY, ROW_ID

_COL, _POS, _VAL = "__col", "__pos", "__val"
_SCHEMA = {_COL: pl.Int32, _POS: pl.Int64, _VAL: pl.String}


def _map(part: pl.DataFrame, lo: int, parts: int) -> tuple[pl.DataFrame, ...]:
    """A shard's present entity values as (column index, row position, value), split by the value's
    hash into `parts` frames."""
    long = pl.concat(
        [
            part.select(
                pl.lit(k, pl.Int32).alias(_COL),
                (pl.int_range(pl.len(), dtype=pl.Int64) + lo).alias(_POS),
                pl.col(c).alias(_VAL),
            ).filter(pl.col(_VAL).is_not_null())
            for k, c in enumerate(part.columns)
        ],
        how="vertical",
    )
    which = (pl.col(_VAL).hash(seed=0) % parts).cast(pl.Int64).alias("p")
    split = long.with_columns(which).partition_by("p", as_dict=True, include_key=False)
    empty = pl.DataFrame(schema=_SCHEMA)
    return tuple(split.get((r,), empty) for r in range(parts))


def _reduce(*frames: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One partition's (row position, group) edges: a group per distinct (column, value)."""
    df = pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=_SCHEMA)
    if df.height == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    g = df.group_by(_COL, _VAL).agg(pl.col(_POS)).with_row_index("__g").explode(_POS)
    return g.get_column(_POS).to_numpy().astype(np.int64), g.get_column("__g").to_numpy().astype(np.int64)


def _shards(ray: Any, cluster: Cluster, df: pl.DataFrame, columns: list[str]) -> list[tuple[Any, int]]:
    """The entity columns as strings, one object-store shard (and its first row position) at a time."""
    return put_shards(ray, cluster, df.select(pl.col(c).cast(pl.String) for c in columns))


def compute_families(ray: Any, cluster: Cluster, df: pl.DataFrame, entity_columns: list[str]) -> pl.DataFrame:
    """row_id → family_id, as families.compute_families gives it, the values grouped by Ray tasks."""
    from claimcheck.engine.audit.families import compute_families as here

    n = df.height
    if n == 0 or not entity_columns:
        return here(df, entity_columns)
    parts = cluster.partitions
    shards = _shards(ray, cluster, df, entity_columns)
    mapper = remote(ray, _map, num_returns=parts)
    mapped = [mapper.remote(ref, lo, parts) for ref, lo in shards]
    reducer = remote(ray, _reduce)
    del shards  # each shard's object is freed once its map task ran
    refs = [reducer.remote(*[m[r] for m in mapped]) for r in range(parts)]
    del mapped
    fam = assembled(n, ray.get(refs))
    return pl.DataFrame({ROW_ID: df.get_column(ROW_ID), FAMILY: fam})


def assembled(n: int, edges: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The family of each of n rows from the partitions' (row position, group) edges: each partition's
    groups offset past the rows and the partitions before it, then connected components numbered by
    first row position (so the order of the group ids within a partition does not matter)."""
    own = np.arange(n, dtype=np.int64)
    src, dst, offset = [own], [own], n
    for pos, group in edges:
        if pos.size:
            src.append(pos)
            dst.append(offset + group)
            offset += int(group.max()) + 1
    return _components(n, src, dst, offset)
