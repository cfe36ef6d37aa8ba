"""Selection of a declared search, on dev figures only, recomputable from the ledger.

The finalists are the best complete trials of distinct contracts (by the declared dev metric and
its direction; ties by trial number). Each finalist's figures are its trial's and its seed repeats';
the seed spread of a finalist is max − min of its figures. The winner by mean is named only when its
margin over the runner-up exceeds the larger spread of the two; otherwise the selection is a TIE and
the declared tie-break names the chosen trial: `cheaper` (fewer trainable parameters, then the
earlier trial) or `first_trial`.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

from claimcheck.engine.shapes.tuning import Finalist, TrialRecord


def finalists(ledger: list[TrialRecord], n: int, lower_is_better: bool) -> list[TrialRecord]:
    """The n best complete trials of distinct contracts (first trial of a digest kept)."""
    done = [r for r in ledger if r.kind == "trial" and r.state == "complete" and r.value is not None]
    sign = 1.0 if lower_is_better else -1.0
    seen: set[str] = set()
    out = []
    for r in sorted(done, key=lambda r: (sign * float(r.value or 0.0), r.number)):
        if r.digest not in seen:
            seen.add(r.digest)
            out.append(r)
    return out[:n]


@dataclass
class Selection:
    finalists: list[Finalist]
    margin: float | None
    spread: float | None
    tie: bool
    chosen: Finalist
    rule: str


def select(
    ledger: list[TrialRecord], n: int, lower_is_better: bool, seed_repeats: int, tie_break: str
) -> Selection | None:
    """The selection the ledger supports (None when no trial completed)."""
    tops = finalists(ledger, n, lower_is_better)
    if not tops:
        return None
    rows = []
    for t in tops:
        reps = [r for r in ledger if r.kind == "repeat" and r.number == t.number and r.state == "complete"]
        values = [float(t.value or 0.0)] + [float(r.value or 0.0) for r in sorted(reps, key=lambda r: r.seed)]
        rows.append(
            Finalist(
                number=t.number,
                settings=t.settings,
                digest=t.digest,
                values=values,
                mean=round(fmean(values), 10),
                spread=round(max(values) - min(values), 10),
                trainable_params=t.trainable_params,
            )
        )
    sign = 1.0 if lower_is_better else -1.0
    rows.sort(key=lambda f: (sign * f.mean, f.number))
    best = rows[0]
    if len(rows) == 1:
        return Selection(rows, None, None, False, best, "the only complete trial")
    runner = rows[1]
    margin = round(abs(best.mean - runner.mean), 10)
    measured = seed_repeats > 0 and all(len(f.values) > 1 for f in rows[:2])
    spread = round(max(best.spread, runner.spread), 10) if measured else None
    if spread is None:
        rule = (
            "best dev figure; the seed spread was not measured (no seed repeats), so the margin is unweighed"
        )
        return Selection(rows, margin, None, False, best, rule)
    if margin > spread:
        rule = f"best mean dev figure: margin {margin:.4g} over trial {runner.number} exceeds the seed spread {spread:.4g}"
        return Selection(rows, margin, spread, False, best, rule)
    tied = [f for f in rows if abs(f.mean - best.mean) <= spread]
    if tie_break == "cheaper":
        chosen = min(tied, key=lambda f: (f.trainable_params or float("inf"), f.number))
        how = "the cheaper configuration (fewest trainable parameters, then the earlier trial)"
    else:
        chosen = min(tied, key=lambda f: f.number)
        how = "the earlier trial"
    rule = (
        f"TIE: margin {margin:.4g} between trials {best.number} and {runner.number} is inside the seed spread "
        f"{spread:.4g}; broken by {how}: trial {chosen.number}"
    )
    return Selection(rows, margin, spread, True, chosen, rule)
