"""The source stage's check of a label-list column (claim target_type = "multi_label"): source.label_lists.

Computed with Polars on the kept rows (after the recorded filters), where `target` holds each row's
canonical label set and is null for a null or malformed value (engine/data/labelsets.py).
"""

from __future__ import annotations

from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.stages.source.checks import PB_MAPPING, RARE_COUNT
from claimcheck.engine.stages.source.inputs import Inputs

# How many malformed rows the record names (file and line), and how much of each value it keeps.
MALFORMED_NAMED = 20
VALUE_CHARS = 80


def label_lists(kept: Any, inp: Inputs, class_order: list[str], cov: str) -> Check:
    """Label vocabulary, rows per label, empty label sets, malformed rows named by file and line, and
    the labels that disagree with the claim's class_order."""
    import polars as pl

    from claimcheck.engine.data import labelsets
    from claimcheck.engine.data.rows import SOURCE_FILE, SOURCE_LINE, TARGET

    raw = pl.col(inp.label_column)
    bad = kept.filter(raw.is_not_null() & pl.col(TARGET).is_null())
    named = [
        {
            "file": str(r[SOURCE_FILE]),
            "line": int(r[SOURCE_LINE]),
            "value": str(r[inp.label_column])[:VALUE_CHARS],
        }
        for r in bad.head(MALFORMED_NAMED).iter_rows(named=True)
    ]
    good = kept.filter(pl.col(TARGET).is_not_null())
    exploded = good.select(labelsets.split_expr(TARGET).alias("l")).explode("l").drop_nulls()
    counts = exploded.group_by("l").len().sort("l")
    per_label = {str(k): int(v) for k, v in counts.iter_rows()}
    sizes = good.select(labelsets.split_expr(TARGET).list.len().alias("n")).get_column("n")
    unknown = sorted(set(per_label) - set(class_order))
    unseen = [c for c in class_order if c not in per_label]
    rare = [k for k, v in per_label.items() if v < RARE_COUNT]
    measured = {
        "label_format": inp.label_format,
        "label_delimiter": inp.label_delimiter,
        "rows": kept.height,
        "labelled_rows": good.height,
        "null_labels": int(kept.get_column(inp.label_column).null_count()),
        "malformed_rows": bad.height,
        "malformed_named": named,
        "empty_label_sets": int((sizes == 0).sum()),
        "labels": len(per_label),
        "rows_per_label": per_label,
        "mean_labels_per_row": float(sizes.mean()) if good.height else 0.0,
        "max_labels_per_row": int(sizes.max()) if good.height else 0,
        "distinct_label_sets": int(good.get_column(TARGET).n_unique()),
        "labels_not_in_class_order": unknown,
        "class_order_labels_unseen": unseen,
        "rare_limit_rows": RARE_COUNT,
        "rare_labels": rare,
    }
    return Check(
        id="source.label_lists",
        status=_status(measured),
        summary=_summary(measured),
        coverage=cov,
        measured=measured,
        why=(
            "A label-list column is parsed, not read as one class: every malformed row is named, empty "
            "label sets are counted, and each label needs rows of its own before a per-label claim."
        ),
        playbook=PB_MAPPING,
    )


def _status(m: dict[str, Any]) -> str:
    if m["malformed_rows"] or m["labels_not_in_class_order"] or m["labels"] < 1:
        return "fail"
    if m["empty_label_sets"] or m["class_order_labels_unseen"] or m["rare_labels"] or m["null_labels"]:
        return "warn"
    return "pass"


def _summary(m: dict[str, Any]) -> str:
    top = ", ".join(f"{k} {v}" for k, v in sorted(m["rows_per_label"].items(), key=lambda kv: -kv[1]))
    parts = [
        f"{m['labels']} label(s) over {m['labelled_rows']:,} rows ({m['mean_labels_per_row']:.2f} per row, "
        f"{m['distinct_label_sets']} distinct sets): {top or 'none'}"
    ]
    if m["malformed_rows"]:
        where = ", ".join(f"{x['file']} line {x['line']}" for x in m["malformed_named"][:5])
        parts.append(f"{m['malformed_rows']} malformed label value(s) ({where})")
    if m["null_labels"]:
        parts.append(f"{m['null_labels']} null label(s)")
    if m["empty_label_sets"]:
        parts.append(f"{m['empty_label_sets']} row(s) with an empty label set")
    if m["labels_not_in_class_order"]:
        parts.append(f"label(s) not in the claim's class_order: {', '.join(m['labels_not_in_class_order'])}")
    if m["class_order_labels_unseen"]:
        parts.append(f"class_order label(s) never seen: {', '.join(m['class_order_labels_unseen'])}")
    if m["rare_labels"]:
        parts.append(f"label(s) under {m['rare_limit_rows']} rows: {', '.join(m['rare_labels'])}")
    return "; ".join(parts)
