"""The entity families' shuffle (engine/audit/onray/families.py) without a cluster: its map and reduce
functions, run here over row shards and any number of partitions, give compute_families' families
exactly — whatever the order of the group ids each reducer returns, since the families are numbered
by first row position. tests/test_audit_ray.py runs the same functions as Ray tasks."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.audit.families import compute_families
from claimcheck.engine.audit.onray.families import _map, _reduce, assembled
from claimcheck.engine.data.rows import FAMILY, ROW_ID


def _frame(n: int, seed: int) -> pl.DataFrame:
    """Three entity columns with nulls, numbers as strings shared between columns (customer "17" and
    case "17" must not link), and a numeric column."""
    rng = np.random.default_rng(seed)

    def col(k: int, p_null: float) -> list[str | None]:
        v = rng.integers(0, k, size=n).astype(str).tolist()
        return [None if rng.random() < p_null else x for x in v]

    return pl.DataFrame(
        {
            ROW_ID: np.arange(10, 10 + n),
            "cust": col(n // 3, 0.2),
            "case": col(n // 2, 0.5),
            "thread": rng.integers(0, n // 4, size=n),
        }
    ).with_columns(pl.when(pl.col("thread") % 5 == 0).then(None).otherwise(pl.col("thread")).alias("thread"))


def _shuffled(
    df: pl.DataFrame, cols: list[str], parts: int, step: int, rng: np.random.Generator
) -> np.ndarray:
    """The Ray path's functions run in order here, each reducer's group ids permuted at random."""
    keyed = df.select(pl.col(c).cast(pl.String) for c in cols)
    mapped = [_map(keyed.slice(lo, step), lo, parts) for lo in range(0, df.height, step)]
    edges = []
    for r in range(parts):
        pos, group = _reduce(*[m[r] for m in mapped])
        if group.size:
            perm = rng.permutation(int(group.max()) + 1)
            group = perm[group]
        edges.append((pos, group))
    rng.shuffle(edges)  # the partitions' order does not matter either
    return assembled(df.height, edges)


@pytest.mark.parametrize(("parts", "step"), [(1, 10_000), (2, 333), (7, 97)])
def test_shuffled_families_are_the_local_ones_whatever_the_group_order(parts: int, step: int) -> None:
    df = _frame(3000, seed=parts)
    cols = ["cust", "case", "thread"]
    here = compute_families(df, cols)
    rng = np.random.default_rng(step)
    for _ in range(3):
        fam = _shuffled(df, cols, parts, step, rng)
        assert np.array_equal(fam, here.get_column(FAMILY).to_numpy())
    # There is something to find: multi-row families, and rows with no entity id at all.
    sizes = here.group_by(FAMILY).len().get_column("len")
    assert int(sizes.max()) > 3 and int((sizes == 1).sum()) > 0


def test_equal_strings_in_different_columns_do_not_link() -> None:
    df = pl.DataFrame({ROW_ID: [0, 1, 2, 3], "a": ["17", None, "17", "x"], "b": [None, "17", None, "y"]})
    fam = _shuffled(df, ["a", "b"], 1, 10, np.random.default_rng(0))
    assert fam.tolist() == [0, 1, 0, 2] == compute_families(df, ["a", "b"]).get_column(FAMILY).to_list()


def test_all_null_entity_ids_leave_every_row_alone() -> None:
    df = pl.DataFrame({ROW_ID: [5, 6, 7], "a": [None, None, None]}, schema={ROW_ID: pl.Int64, "a": pl.String})
    fam = _shuffled(df, ["a"], 3, 2, np.random.default_rng(0))
    assert fam.tolist() == [0, 1, 2] == compute_families(df, ["a"]).get_column(FAMILY).to_list()
