"""Connected entity families: rows that share any entity id (customer, thread, case…) are one family.

Union-find over a bipartite graph (rows ↔ entity values) solved by scipy's connected_components, so
no Python loop runs over rows. Rows with no entity id form singleton families.

Playbook: "Where records connect multiple case/thread IDs, assess the connected family. Missing entity
IDs limit claims about unseen-entity performance."
"""

from __future__ import annotations

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


def duplicate_families(
    df: pl.DataFrame, columns: list[str], normalisation: str, pairs: pl.DataFrame | None
) -> np.ndarray:
    """The rows' families (FAMILY column) widened by duplicates: rows whose model inputs are identical
    after `normalisation`, and, with `pairs` (row_a, row_b), near-duplicate rows, join one family.

    Exact groups are formed on the real values of the rows whose input hash repeats (no hash collision
    can merge two inputs). Families are numbered by first row position, like compute_families.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from claimcheck.engine.audit.duplicates import key_exprs, key_hashes

    n = df.height
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, fam_code = np.unique(df.get_column(FAMILY).to_numpy(), return_inverse=True)
    src, dst = [np.arange(n)], [n + fam_code]
    offset = n + int(fam_code.max()) + 1
    if columns:
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
        src.append(idx[groups.get_column("__pos").to_numpy().astype(np.int64)])
        dst.append(offset + groups.get_column("__group").to_numpy().astype(np.int64))
        offset += groups.height
    if pairs is not None and pairs.height:
        pos = pl.DataFrame({ROW_ID: df.get_column(ROW_ID), "p": np.arange(n)})
        p = pairs.join(pos.rename({ROW_ID: "row_a", "p": "pa"}), on="row_a").join(
            pos.rename({ROW_ID: "row_b", "p": "pb"}), on="row_b"
        )
        src.append(p.get_column("pa").to_numpy())
        dst.append(p.get_column("pb").to_numpy())
    s, d = np.concatenate(src), np.concatenate(dst)
    graph = coo_matrix((np.ones(s.size, dtype=np.int8), (s, d)), shape=(offset, offset))
    _, labels = connected_components(graph, directed=False)
    _, first_idx, inverse = np.unique(labels[:n], return_index=True, return_inverse=True)
    order = np.argsort(first_idx, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse].astype(np.int64)
