"""Connected entity families: rows that share any entity id (customer, thread, case…) are one family.

Union-find over a bipartite graph (rows ↔ entity values) solved by scipy's connected_components, so
no Python loop runs over rows. Rows with no entity id form singleton families.

Playbook: "Where records connect multiple case/thread IDs, assess the connected family. Missing entity
IDs limit claims about unseen-entity performance."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from claimcheck.engine.data.rows import FAMILY, ROW_ID


def compute_families(df: pl.DataFrame, entity_columns: list[str]) -> pl.DataFrame:
    """row_id → family_id (0..F-1, numbered by each family's smallest row id, so stable and deterministic)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = df.height
    row_ids = df.get_column(ROW_ID)
    if n == 0:
        return pl.DataFrame({ROW_ID: [], FAMILY: []}, schema={ROW_ID: pl.Int64, FAMILY: pl.Int64})
    src, dst, offset = [], [], n
    for col in entity_columns:
        values = df.get_column(col).cast(pl.String)
        # Dense codes per column; columns are namespaced by the offset so equal strings in
        # different columns (customer "17" vs case "17") never link.
        codes = values.rank("dense").cast(pl.Int64)
        present = codes.is_not_null().to_numpy()
        rows_idx = np.flatnonzero(present)
        if rows_idx.size == 0:
            continue
        code_arr = codes.to_numpy()[present] - 1
        src.append(rows_idx)
        dst.append(code_arr + offset)
        offset += int(code_arr.max()) + 1
    if src:
        s, d = np.concatenate(src), np.concatenate(dst)
        graph = coo_matrix((np.ones(s.size, dtype=np.int8), (s, d)), shape=(offset, offset))
        _, labels = connected_components(graph, directed=False)
        labels = labels[:n]
    else:
        labels = np.arange(n)
    # Renumber components by first appearance in row order → deterministic ids.
    _, first_idx, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first_idx, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    fam = rank[inverse].astype(np.int64)
    return pl.DataFrame({ROW_ID: row_ids, FAMILY: fam})


def family_summary(fam: pl.DataFrame, df: pl.DataFrame, entity_columns: list[str]) -> dict[str, Any]:
    """Family count, size distribution, largest family, rows with no entity id, multi-id linking."""
    sizes = fam.group_by(FAMILY).len().get_column("len")
    n = fam.height
    no_entity = (
        int(df.select(pl.all_horizontal(pl.col(c).is_null() for c in entity_columns)).to_series().sum())
        if entity_columns
        else n
    )
    out: dict[str, Any] = {
        "rows": n,
        "families": int(sizes.len()),
        "singleton_families": int((sizes == 1).sum()) if n else 0,
        "largest_family_rows": int(sizes.max()) if n else 0,
        "rows_in_multi_row_families": int(sizes.filter(sizes > 1).sum()) if n else 0,
        "rows_without_entity_id": no_entity,
    }
    if n:
        qs = {f"p{int(q * 100)}": float(sizes.quantile(q, "nearest")) for q in (0.5, 0.9, 0.99)}
        out["size_quantiles"] = {k: int(v) for k, v in qs.items()}
    # Families that several distinct ids of one column fall into: the "connected" part of the family.
    linked = {}
    joined = df.select([ROW_ID, *entity_columns]).join(fam, on=ROW_ID)
    for col in entity_columns:
        per = joined.filter(pl.col(col).is_not_null()).group_by(FAMILY).agg(pl.col(col).n_unique().alias("k"))
        linked[col] = int((per.get_column("k") > 1).sum())
    out["families_linking_several_ids"] = linked
    return out


@dataclass(frozen=True)
class DuplicateFamilies:
    """Per row: the family it is kept with (entity families widened by duplicates: the split's unit),
    and each part that widening joined: its exact-duplicate family and, with near-duplicate pairs,
    its near-duplicate family (a row with no copy is its own family in each part)."""

    family: np.ndarray
    exact: np.ndarray
    near: np.ndarray | None


def _numbered(labels: np.ndarray) -> np.ndarray:
    """Component labels renumbered by first row position (deterministic, like compute_families)."""
    _, first_idx, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(first_idx, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse].astype(np.int64)


def _components(n: int, src: list[np.ndarray], dst: list[np.ndarray], nodes: int) -> np.ndarray:
    """The connected component of each of the first n nodes of the graph given by its edges."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    s, d = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(s.size, dtype=np.int8), (s, d)), shape=(nodes, nodes))
    _, labels = connected_components(graph, directed=False)
    return _numbered(labels[:n])


def _exact_edges(df: pl.DataFrame, columns: list[str], normalisation: str) -> tuple[np.ndarray, np.ndarray]:
    """(row position, exact group) for the rows whose model inputs repeat: groups formed on the real
    values of the rows whose input hash repeats, so no hash collision can merge two inputs."""
    from claimcheck.engine.audit.duplicates import key_exprs, key_hashes

    idx = np.flatnonzero(key_hashes(df, columns, normalisation).is_duplicated().to_numpy())
    groups = (
        df[idx]
        .select(*key_exprs(df.schema, columns, normalisation))
        .with_row_index("__pos")
        .group_by(columns)
        .agg(pl.col("__pos"))
        .with_row_index("__group")
        .explode("__pos")
    )
    return (
        idx[groups.get_column("__pos").to_numpy().astype(np.int64)],
        groups.get_column("__group").to_numpy().astype(np.int64),
    )


def _pair_edges(df: pl.DataFrame, pairs: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The near-duplicate pairs (row_a, row_b) as row positions of df (pairs outside df dropped)."""
    pos = pl.DataFrame({ROW_ID: df.get_column(ROW_ID), "p": np.arange(df.height)})
    p = pairs.join(pos.rename({ROW_ID: "row_a", "p": "pa"}), on="row_a").join(
        pos.rename({ROW_ID: "row_b", "p": "pb"}), on="row_b"
    )
    return p.get_column("pa").to_numpy(), p.get_column("pb").to_numpy()


def duplicate_families(
    df: pl.DataFrame, columns: list[str], normalisation: str, pairs: pl.DataFrame | None
) -> DuplicateFamilies:
    """The rows' families (FAMILY column) widened by duplicates: rows whose model inputs are identical
    after `normalisation`, and, with `pairs` (row_a, row_b), near-duplicate rows, join one family.
    Families are numbered by first row position, like compute_families."""
    n = df.height
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return DuplicateFamilies(empty, empty, None if pairs is None else empty)
    own = [np.arange(n)]
    _, fam_code = np.unique(df.get_column(FAMILY).to_numpy(), return_inverse=True)
    src, dst = [np.arange(n)], [n + fam_code]
    offset = n + int(fam_code.max()) + 1
    exact = np.arange(n, dtype=np.int64)
    if columns:
        rows_e, group_e = _exact_edges(df, columns, normalisation)
        n_groups = int(group_e.max()) + 1 if group_e.size else 0
        exact = _components(n, [*own, rows_e], [*own, n + group_e], n + n_groups)
        src.append(rows_e)
        dst.append(offset + group_e)
        offset += n_groups
    near = None
    if pairs is not None:
        pa, pb = _pair_edges(df, pairs) if pairs.height else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        near = _components(n, [*own, pa], [*own, pb], n)
        src.append(pa)
        dst.append(pb)
    return DuplicateFamilies(_components(n, src, dst, offset), exact, near)
