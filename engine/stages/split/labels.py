"""The split stage's check of a multi-label target (claim target_type = "multi_label"): split.label_support.

Per label, the rows holding it in each split. A label with no train rows fails (no learner can learn
it; a label found only in test is one of them), a label missing from a held-out split warns (that
split says nothing of it). The record also says how far the split got in keeping each label's
prevalence: the largest per-split difference from the whole, and how the rows were placed.
"""

from __future__ import annotations

from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.stages.split.checks import PB_RARE

HOW_ITERATIVE = "iterative stratification by label sets (iterstrat MultilabelStratifiedShuffleSplit)"


def label_support(joined: Any, labels: list[str], strategy: str) -> Check:
    """split.label_support over `joined` (the assigned rows with their split and canonical target)."""
    import numpy as np

    from claimcheck.engine.data import label_split, labelsets
    from claimcheck.engine.data.rows import TARGET
    from claimcheck.engine.data.splits import SPLITS

    observed = labelsets.vocabulary(joined.get_column(TARGET).drop_nulls())
    order = list(dict.fromkeys([*labels, *observed]))
    matrix = labelsets.indicator(joined.get_column(TARGET), order)
    where = joined.get_column("split").to_numpy()
    index = np.asarray([SPLITS.index(str(s)) for s in where], dtype=np.int64)
    present = [s for s in SPLITS if (where == s).any()]
    support = {lab: {s: int(matrix[where == s, j].sum()) for s in present} for j, lab in enumerate(order)}
    no_train = [lab for lab in order if support[lab].get("train", 0) == 0]
    only_test = [
        lab
        for lab in no_train
        if support[lab].get("test", 0) and all(v == 0 for s, v in support[lab].items() if s != "test")
    ]
    held_out = [s for s in present if s != "train"]
    missing = {
        s: [lab for lab in order if support[lab].get(s, 0) == 0 and lab not in no_train] for s in held_out
    }
    missing = {s: v for s, v in missing.items() if v}
    deviation = label_split.prevalence_deviation(matrix, index)
    how = HOW_ITERATIVE if strategy == "stratified" else f"not stratified by labels (strategy '{strategy}')"
    measured = {
        "labels": order,
        "support": support,
        "labels_without_train_rows": no_train,
        "labels_only_in_test": only_test,
        "labels_missing_from_held_out": missing,
        "placement": how,
        "max_prevalence_deviation": deviation["max"],
        "prevalence_deviation_per_split": deviation["per_split"],
    }
    status = "fail" if no_train else ("warn" if missing else "pass")
    parts = [
        f"{len(order)} label(s); largest per-label prevalence difference from the whole {deviation['max']:.3f} ({how})"
    ]
    if no_train:
        parts.append(
            f"no train rows: {', '.join(no_train)}"
            + (f" (only in test: {', '.join(only_test)})" if only_test else "")
        )
    for s, labs in missing.items():
        parts.append(f"absent from {s}: {', '.join(labs)}")
    tight = min((min(v.values()) for v in support.values() if v), default=0)
    parts.append(f"smallest per-split support {tight}")
    return Check(
        id="split.label_support",
        status=status,
        summary="; ".join(parts),
        measured=measured,
        why=(
            "Each label is a decision of its own: one with no train rows cannot be learned, one absent "
            "from a held-out split has no evidence there; per-label support is what a per-label claim rests on."
        ),
        playbook=PB_RARE,
    )
