"""Multi-label targets: a label column holding a set of labels per row (claim target_type = "multi_label").

The source stage declares how the column holds its labels (`label_format`): "json_list" (a JSON list
of strings, `["billing", "refund"]`) or "delimited" (one string split on `label_delimiter`,
`billing;refund`). Every later stage sees the row's label set in one canonical spelling as the target:
its distinct labels, stripped of surrounding white space, sorted and joined with SEP ("billing|refund";
the empty string is the empty set). The parse is a Polars expression, so it runs inside the lazy scans
of engine/data/rows.py. A value that is not a label list (bad JSON, a non-string element, a label
holding SEP) is malformed: its target is null, so the source stage counts and names it
(source.label_lists) and no later stage reads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

LABEL_FORMATS = ("json_list", "delimited")
# The canonical target joins a row's labels with this; a label holding it is malformed.
SEP = "|"
# A JSON list of strings (white space allowed between the tokens; escapes inside the strings).
_JSON_STRING = r'"(?:[^"\\]|\\.)*"'
JSON_LIST = rf"^\s*\[\s*(?:{_JSON_STRING}\s*(?:,\s*{_JSON_STRING}\s*)*)?\]\s*$"
# Whether a raw value parsed (a helper column the source stage reads to name malformed rows).
PARSED = "__labels_parsed"


def is_multi_label(source_inputs: dict[str, Any]) -> bool:
    """Whether the source declares a label-list column."""
    return str(source_inputs.get("label_format") or "") in LABEL_FORMATS


def _lists(label_column: str, label_format: str, delimiter: str) -> tuple[pl.Expr, pl.Expr]:
    """(the raw value parsed as a list of stripped, non-empty labels; whether the raw value is well formed)."""
    import polars as pl

    raw = pl.col(label_column).cast(pl.String)
    if label_format == "json_list":
        shaped = raw.str.contains(JSON_LIST)
        lists = pl.when(shaped).then(raw).otherwise(pl.lit("[]")).str.json_decode(pl.List(pl.String))
    else:
        shaped = raw.is_not_null()
        lists = raw.str.split(delimiter)
    lists = lists.list.eval(pl.element().str.strip_chars()).list.eval(pl.element().filter(pl.element() != ""))
    ok = shaped & ~lists.list.eval(pl.element().str.contains(SEP, literal=True)).list.any()
    return lists, ok


def target_expr(label_column: str, label_format: str, delimiter: str, target: str) -> pl.Expr:
    """The canonical label set of each row, named `target`; null where the value is null or malformed."""
    import polars as pl

    lists, ok = _lists(label_column, label_format, delimiter)
    canon = lists.list.unique().list.sort().list.join(SEP)
    return pl.when(pl.col(label_column).is_not_null() & ok).then(canon).otherwise(None).alias(target)


def parsed_expr(label_column: str, label_format: str, delimiter: str) -> pl.Expr:
    """Whether each row's raw value is a well-formed label list (null stays null)."""
    _, ok = _lists(label_column, label_format, delimiter)
    return ok.alias(PARSED)


def split_expr(target: str) -> pl.Expr:
    """The canonical target as a list of labels (the empty set as an empty list)."""
    import polars as pl

    col = pl.col(target)
    return pl.when(col == "").then(pl.lit([], dtype=pl.List(pl.String))).otherwise(col.str.split(SEP))


def split_one(value: str) -> list[str]:
    """One canonical target as its labels."""
    return [] if not value else value.split(SEP)


def vocabulary(targets: pl.Series) -> list[str]:
    """The labels that occur in the canonical targets, sorted."""
    import polars as pl

    frame = pl.DataFrame({"t": targets}).select(split_expr("t").alias("l")).explode("l").drop_nulls()
    return sorted(frame.get_column("l").unique().to_list())


def indicator(targets: pl.Series | list[str] | np.ndarray, labels: list[str]) -> np.ndarray:
    """(n, len(labels)) 0/1 matrix: row i holds label j. Labels outside `labels` are ignored."""
    import numpy as np

    index = {lab: j for j, lab in enumerate(labels)}
    values = targets.to_list() if hasattr(targets, "to_list") else list(targets)
    out = np.zeros((len(values), len(labels)), dtype=np.int8)
    for i, v in enumerate(values):
        for lab in split_one(str(v or "")):
            j = index.get(lab)
            if j is not None:
                out[i, j] = 1
    return out


def canonical(matrix: np.ndarray, labels: list[str]) -> list[str]:
    """The canonical targets of a 0/1 matrix (the inverse of `indicator` over `labels`)."""
    return [SEP.join(sorted(labels[j] for j in row.nonzero()[0])) for row in matrix]
