"""Facts about metric names and target types that the claim, the source and split audits, the baseline,
the artifact stage and the report share. Plain constants and one pure function, standard library only:
importing them never loads numpy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Metrics where a smaller value is better.
LOWER_IS_BETTER = frozenset({"log_loss", "brier", "mae", "rmse"})

# Metrics of a numeric (regression) target.
REGRESSION_METRICS = frozenset({"mae", "rmse", "r2"})

# What the claim's target is: classes, or a number. "" in a claim means "derive it" (target_type below).
TARGET_TYPES = ("categorical", "numeric")


def target_type(claim: Mapping[str, Any]) -> str:
    """The claim's target type: its `target_type` when stated; otherwise categorical, except a tabular
    claim whose primary metric is a regression metric (how claims written before the field said it)."""
    stated = str(claim.get("target_type") or "")
    if stated:
        return stated
    if claim.get("task_kind") == "tabular" and claim.get("primary_metric") in REGRESSION_METRICS:
        return "numeric"
    return "categorical"


def code_points(label: str) -> str:
    """A label spelled as code points ('U+0065 U+0301'): two labels that look alike show how they differ."""
    return " ".join(f"U+{ord(ch):04X}" for ch in label[:40]) + (" …" if len(label) > 40 else "")


def nfc_twins(labels: list[str], known: list[str]) -> dict[str, str]:
    """Labels not in `known` that equal a label of `known` under Unicode NFC normalisation (the same
    text in other code points, e.g. 'e' + U+0301 against U+00E9): label → the spelling `known` uses."""
    import unicodedata

    by_nfc = {unicodedata.normalize("NFC", k): k for k in known}
    return {
        lab: by_nfc[unicodedata.normalize("NFC", lab)]
        for lab in labels
        if lab not in known and unicodedata.normalize("NFC", lab) in by_nfc
    }
