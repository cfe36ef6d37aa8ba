"""artifact.ordinal: an ordinal claim's figures on the locked test (claim target_type = "ordinal").

Per arm, on the rows every arm scored: quadratic-weighted kappa (scikit-learn's
cohen_kappa_score(weights="quadratic") over the class order), the mean absolute difference of ranks
and macro-F1 beside them, and the confusion matrix with rows and columns in the class order (lowest
first). Weighted like the comparison when the claim's metric is weighted.

Playbook: "Preserve option order, soft targets, weights, ties and ordinal semantics when present."
"""

from __future__ import annotations

from typing import Any

from claimcheck.engine.data.weights import PB_WEIGHTS
from claimcheck.engine.evidence import Check

ORDINAL_FIGURES = ("quadratic_weighted_kappa", "mae_rank", "macro_f1")


def ordinal_check(sc: Any) -> Check:
    """The ordinal figures per arm; `sc` is engine/artifact/quality.py's Scored."""
    import numpy as np

    from claimcheck.engine.pipeline.checks import not_run
    from claimcheck.engine.shapes.artifact import Ordinal
    from claimcheck.engine.stats import registry
    from claimcheck.engine.stats.metrics import confusion_counts

    arms = list(sc.preds)
    shared = (sc.y >= 0) & np.logical_and.reduce([sc.preds[a]["ok"] for a in arms])
    if not shared.any():
        return not_run("artifact.ordinal", "no test row was scored by every arm")
    ys = sc.y[shared]
    w = None if sc.weights is None else sc.weights[shared]
    scoring = registry.Scoring(tuple(sc.classes), -1, tuple(sorted(set(ys.tolist()))), weights=w)
    figures: dict[str, dict[str, float]] = {}
    confusion: dict[str, list[list[int]]] = {}
    for a in arms:
        proba = np.asarray(sc.preds[a]["proba"][shared], dtype=np.float64)
        figures[a] = {f: registry.get(f).value(ys, proba, scoring) for f in ORDINAL_FIGURES}
        confusion[a] = confusion_counts(ys, proba.argmax(axis=1), len(sc.classes)).astype(int).tolist()
    cand = figures["candidate"]
    return Check(
        id="artifact.ordinal",
        status="info",
        summary="; ".join(
            f"{a}: QWK {f['quadratic_weighted_kappa']:.4f}, MAE on ranks {f['mae_rank']:.4f}, "
            f"macro-F1 {f['macro_f1']:.4f}"
            for a, f in figures.items()
        )
        + f" (class order {' < '.join(sc.classes)}"
        + (")" if w is None else "; weighted)"),
        coverage=f"{int(shared.sum())} test rows scored by every arm",
        measured=Ordinal(
            class_order=list(sc.classes),
            figures=figures,
            confusion=confusion,
            weighted=w is not None,
            candidate_qwk=cand["quadratic_weighted_kappa"],
        ),
        why="Ordered classes: a near miss is not a far miss. QWK and rank error weigh the distance; "
        "macro-F1 beside them treats every miss alike.",
        playbook=PB_WEIGHTS,
    )
