"""The source stage's checks against the claim and the person's decisions: the label set against the
claim's class order (found here, before the source, split and baseline stages are frozen on it)."""

from __future__ import annotations

from typing import Any

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.stages.source.checks import PB_MAPPING
from claimcheck.engine.stages.source.inputs import Inputs
from claimcheck.engine.stats.names import code_points, nfc_twins


def _whole_number_twins(extra: list[str], order: list[str]) -> dict[str, str]:
    """Data labels like '1.0' whose integer form ('1') is in the class order."""
    twins = {}
    for label in extra:
        try:
            value = float(label)
        except ValueError:
            continue
        if value.is_integer() and str(int(value)) in order:
            twins[label] = str(int(value))
    return twins


def _toml_text(label: str) -> str:
    """A TOML basic string that spells every non-ASCII character as an escape (the reader sees the code points)."""
    out = []
    for ch in label:
        if ch in '"\\' or not (32 <= ord(ch) < 127):
            out.append(f"\\u{ord(ch):04X}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _nfc_advice(twins: dict[str, str], seen: list[str], inp: Inputs) -> str:
    """What to do about labels that differ from a class only by Unicode normalisation: the code points,
    and the label mapping to the class's spelling (NFC when class_order is); it covers every label,
    since a non-empty mapping leaves the labels it does not cover out."""
    from claimcheck.engine.textsafe import visible

    spelled = "; ".join(
        f"'{visible(k)}' is {code_points(k)}, the class '{visible(v)}' is {code_points(v)}"
        for k, v in twins.items()
    )
    head = f"they differ from a class only by Unicode normalisation ({spelled}); "
    if inp.label_mapping or len(seen) > 20:
        return head + "map each to the class's spelling in the source stage's label_mapping"
    pairs = ", ".join(f"{_toml_text(lab)} = {_toml_text(twins.get(lab, lab))}" for lab in seen)
    return head + f"record the class's spelling in the source stage: label_mapping = {{ {pairs} }}"


def class_order(dataset: Any, inp: Inputs, upstream: dict[str, StageRecord]) -> Check:
    """Every mapped label must be one of the claim's class_order; class_order names no absent class."""
    from claimcheck.engine.data.rows import TARGET
    from claimcheck.engine.textsafe import visible

    claim = upstream.get("claim")
    order = [str(c) for c in (claim.inputs.get("class_order") or [])] if claim is not None else []
    if not order:
        return not_run(
            "source.class_order",
            "no claim class_order to check the labels against"
            + (" (the claim stage is not frozen)" if claim is None else ""),
            why="A label outside the claimed classes is found here, or only after three stages are frozen.",
        )
    seen = sorted(str(v) for v in dataset.get_column(TARGET).drop_nulls().unique().to_list())
    extra = [lab for lab in seen if lab not in order]
    absent = [c for c in order if c not in seen]
    twins = _whole_number_twins(extra, order)
    unicode_twins = nfc_twins(extra, order)
    shown = ", ".join(repr(visible(x)) for x in extra[:10]) + (" …" if len(extra) > 10 else "")
    if unicode_twins:
        summary = f"label(s) {shown} are not in the claim's class_order {order}; " + _nfc_advice(
            unicode_twins, seen, inp
        )
    elif twins:
        mapping = ", ".join(f"'{visible(k)}' = '{v}'" for k, v in twins.items())
        summary = (
            f"label(s) {shown} are not in the claim's class_order {order}; {', '.join(map(repr, twins))} are "
            f"whole numbers written as floats that match class_order as integers — map them in the source "
            f"stage's label_mapping ({mapping}) or fix class_order"
        )
    elif extra:
        summary = (
            f"label(s) {shown} occur in the data but not in the claim's class_order {order}; add them to "
            "class_order (claim stage) or map them in the source stage's label_mapping"
        )
    else:
        summary = f"every label is in the claim's class_order ({len(order)} classes)"
    if absent and not extra:
        summary += f"; class_order names class(es) with no rows: {', '.join(map(repr, absent))}"
    return Check(
        id="source.class_order",
        status="fail" if extra else ("warn" if absent else "pass"),
        summary=summary,
        measured={
            "class_order": order,
            "labels": seen,
            "not_in_class_order": extra,
            "whole_number_floats": twins,
            "unicode_twins": unicode_twins,
            "classes_without_rows": absent,
        },
        why="A label outside the claimed classes is found here, or only after three stages are frozen.",
        playbook=PB_MAPPING,
    )
