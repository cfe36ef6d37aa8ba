"""Subgroups: columns the source declares (`subgroup_columns`) whose values name groups the claim
must hold for. Not model inputs unless also declared so. Their support is counted per value × split ×
class at the split stage, and every arm's metric is measured per value at the artifact stage."""

from __future__ import annotations

from typing import Any

# A subgroup value with fewer rows than this in a split has no usable figure there (split.subgroup_support
# fails below it in the locked test and warns below it in another split; artifact.subgroups leaves it out).
SUBGROUP_MIN_SUPPORT = 5
# At most this many distinct values per subgroup column (a subgroup is a handful of groups, not an id).
MAX_SUBGROUP_VALUES = 50
NULL_VALUE = "(null)"


def values_of(series: Any) -> list[str]:
    """A subgroup column's values as the text every record uses (null as NULL_VALUE)."""
    return [NULL_VALUE if v is None else str(v) for v in series.to_list()]


def refuse_wide(df: Any, columns: list[str]) -> None:
    """Refuse a subgroup column with more than MAX_SUBGROUP_VALUES distinct values, naming it."""
    from claimcheck.engine.pipeline.context import StageInputError

    for col in columns:
        n = int(df.get_column(col).n_unique())
        if n > MAX_SUBGROUP_VALUES:
            raise StageInputError(
                f"source input 'subgroup_columns': {col!r} has {n:,} distinct values (at most "
                f"{MAX_SUBGROUP_VALUES}); a subgroup column names a few groups, not rows — bin it first"
            )


def support(joined: Any, columns: list[str], split_col: str, target_col: str) -> dict[str, Any]:
    """Per subgroup column → value → split: {"rows": n, "classes": {class: n}} (classes sorted)."""
    import polars as pl

    out: dict[str, Any] = {}
    for col in columns:
        counts = (
            joined.select(
                pl.col(col).cast(pl.String).fill_null(NULL_VALUE).alias("v"),
                pl.col(split_col).alias("s"),
                pl.col(target_col).cast(pl.String).alias("t"),
            )
            .group_by("v", "s", "t")
            .len()
            .sort("v", "s", "t")
        )
        per: dict[str, dict[str, Any]] = {}
        for v, s, t, n in counts.iter_rows():
            cell = per.setdefault(v, {}).setdefault(s, {"rows": 0, "classes": {}})
            cell["rows"] += int(n)
            cell["classes"][t] = int(n)
        out[col] = per
    return out


def below_floor(
    sup: dict[str, Any], splits: list[str], floor: int = SUBGROUP_MIN_SUPPORT
) -> list[dict[str, Any]]:
    """Every (column, value, split) with fewer than `floor` rows, for each split in `splits`."""
    low = []
    for col, per in sup.items():
        for v, by_split in per.items():
            for s in splits:
                n = by_split.get(s, {}).get("rows", 0)
                if n < floor:
                    low.append({"column": col, "value": v, "split": s, "rows": n})
    return low
