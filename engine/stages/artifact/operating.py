"""artifact.operating_point: the decision rule the baseline stage declared (a precision or recall
constraint, or error costs, for one class) carried to every arm of the locked-test comparison.

Each arm's threshold is chosen on that arm's own raw calibration-split scores — a threshold value
belongs to the model whose scores it cuts — and applied unchanged to the locked test, beside the
arm's arg-max decisions for the same class. The test rows never choose a threshold. Calibrated
figures stay in artifact.calibrated: these thresholds cut raw probabilities.
"""

from __future__ import annotations

import math
from typing import Any

from claimcheck.engine.artifact.common import PB_CAL
from claimcheck.engine.artifact.quality import Scored
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.stages.baseline.inputs import OperatingPoint

CHECK = "artifact.operating_point"
WHY = (
    "A decision threshold chosen for one model is a decision about error costs; every arm is judged under it."
)


def rule_words(op: OperatingPoint) -> str:
    if op.constraint == "cost":
        return f"min {op.cost_fp:g}·FP + {op.cost_fn:g}·FN"
    return f"{'precision' if op.constraint == 'min_precision' else 'recall'} ≥ {op.target:g}"


def declared_point(upstream: dict[str, StageRecord]) -> OperatingPoint:
    """The baseline stage's recorded operating point (its default, 'none', when it recorded none)."""
    rec = upstream.get("baseline")
    return OperatingPoint.model_validate((rec.inputs if rec else {}).get("operating_point") or {})


def _arm(sc: Scored, arm: str, j: int, op: OperatingPoint, shared: Any) -> dict[str, Any]:
    """One arm: the threshold chosen on its calibration rows, its test counts under it and under arg-max."""
    import numpy as np

    from claimcheck.engine.stats import calibration

    p = sc.preds[arm]
    cal_ok = np.asarray(p["cal_ok"], dtype=bool) & (sc.y_cal >= 0)
    threshold = math.inf
    out: dict[str, Any] = {"chosen_on_rows": int(cal_ok.sum())}
    if cal_ok.any():
        threshold = calibration.choose_threshold(
            sc.y_cal[cal_ok] == j,
            np.asarray(p["cal_proba"])[cal_ok, j],
            constraint=op.constraint,
            target=op.target,
            cost_fp=op.cost_fp,
            cost_fn=op.cost_fn,
        )["threshold"]
    proba = np.asarray(p["proba"])[shared]
    pos = sc.y[shared] == j
    out["feasible"] = math.isfinite(threshold)
    if out["feasible"]:
        out["threshold"] = float(threshold)
        out["test"] = calibration.binary_counts(pos, proba[:, j], threshold)
    else:
        out["reason"] = (
            "no threshold meets the rule on its calibration rows: it flags nothing"
            if cal_ok.any()
            else "no calibration row scored: it flags nothing"
        )
        out["test"] = calibration.binary_counts(pos, np.zeros(len(pos)), 1.0)
    out["argmax"] = calibration.binary_counts(pos, (proba.argmax(axis=1) == j).astype(float), 0.5)
    for key in ("test", "argmax"):
        out[key]["cost"] = float(op.cost_fp * out[key]["fp"] + op.cost_fn * out[key]["fn"])
    return out


def _missed(op: OperatingPoint, entry: dict[str, Any]) -> bool:
    """The candidate's rule does not hold on the locked test (or could not be set)."""
    if not entry["feasible"]:
        return True
    if op.constraint == "cost":
        return False
    got = entry["test"].get("precision" if op.constraint == "min_precision" else "recall", 0.0)
    return got < op.target


def operating_point(sc: Scored, upstream: dict[str, StageRecord]) -> Check:
    import numpy as np

    op = declared_point(upstream)
    if op.constraint == "none":
        return not_run(
            CHECK, "the baseline stage declared no operating point: decisions are arg-max", why=WHY
        )
    if op.positive_class not in sc.classes:
        return not_run(
            CHECK, f"the operating point's class {op.positive_class!r} is not in the class order", why=WHY
        )
    j = sc.classes.index(op.positive_class)
    shared = (sc.y >= 0) & np.logical_and.reduce(
        [np.asarray(sc.preds[a]["ok"], dtype=bool) for a in sc.preds]
    )
    if not shared.any():
        return not_run(CHECK, "no test row was scored by every arm", why=WHY)
    arms = {a: _arm(sc, a, j, op, shared) for a in sc.preds}
    words = [
        f"{a} "
        + (f"≥ {e['threshold']:.4f}" if "threshold" in e else "flags nothing")
        + f": precision {e['test']['precision']:.3f}, recall {e['test'].get('recall', 0.0):.3f}"
        + f" (arg-max {e['argmax']['precision']:.3f} / {e['argmax'].get('recall', 0.0):.3f})"
        for a, e in arms.items()
    ]
    cand = arms.get("candidate")
    missed = cand is not None and _missed(op, cand)
    return Check(
        id=CHECK,
        status="warn" if missed else "info",
        summary=f"'{op.positive_class}' under {rule_words(op)} (thresholds chosen per arm on raw calibration "
        f"scores, applied unchanged to the test): "
        + "; ".join(words)
        + ("; the candidate's rule does not hold on the locked test" if missed else ""),
        coverage=f"{int(shared.sum())} test rows scored by every arm"
        + ("" if sc.coverage == "full" else f" ({sc.coverage})"),
        measured={
            "positive_class": op.positive_class,
            "constraint": op.constraint,
            "rule": rule_words(op),
            "scores": "raw",
            "test_rows": int(shared.sum()),
            "arms": arms,
        },
        why=WHY,
        playbook=PB_CAL,
    )
