"""A training job's pace, read from its own files: elapsed time, steps per second, ETA, and any dev
evaluation under way (the live view's line; jobfiles reads the files, this judges their timing)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from claimcheck.engine.training.jobfiles import TERMINAL_STAGES, latest_by_step

# Steps/s is measured over at most this many of the latest optimizer steps (evaluations between
# them included, so the ETA counts the evaluations still to come at the same rate).
PACE_WINDOW = 20
EVAL_STAGES = {"initial-eval": "initial", "final-eval": "final"}


@dataclass
class Pace:
    """How fast a job goes, from its own files: wall-clock, never recorded as evidence."""

    elapsed_s: float | None = None  # since this run of the job started (to its last word when ended)
    steps_per_s: float | None = None
    eta_s: float | None = None  # to the last step, at the current rate; None when not running
    evaluation: str = ""  # the dev evaluation under way: initial / periodic / final; "" when none
    evaluating_s: float | None = None  # how long it has run


def _epoch(iso: Any) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def _rate(records: list[dict[str, Any]]) -> float | None:
    timed = [r for r in latest_by_step(records, "step") if isinstance(r.get("time"), int | float)]
    last = timed[-PACE_WINDOW:]
    if len(last) >= 2 and last[-1]["time"] > last[0]["time"]:
        return (int(last[-1]["step"]) - int(last[0]["step"])) / (
            float(last[-1]["time"]) - float(last[0]["time"])
        )
    secs = [
        float(r["seconds"]) for r in last if isinstance(r.get("seconds"), int | float) and r["seconds"] > 0
    ]
    return 1.0 / (sum(secs) / len(secs)) if secs else None


def pace(
    status: dict[str, Any], hb: dict[str, Any], records: list[dict[str, Any]], now: float | None = None
) -> Pace:
    """Elapsed time, steps per second, ETA and any evaluation under way of the job in `status`."""
    now = time.time() if now is None else now
    stage = str(status.get("stage", ""))
    started, updated = _epoch(status.get("started_at")), _epoch(status.get("updated_at"))
    ended = stage in TERMINAL_STAGES
    out = Pace()
    if started is not None:
        out.elapsed_s = max(0.0, ((updated or now) if ended else now) - started)
    out.steps_per_s = _rate(records)
    total, step = int(status.get("total_steps", 0) or 0), int(status.get("step", 0) or 0)
    if not ended and out.steps_per_s and total > step:
        out.eta_s = (total - step) / out.steps_per_s
    if ended:
        return out
    if stage in EVAL_STAGES:
        out.evaluation = EVAL_STAGES[stage]
        since = updated
    elif stage == "training" and hb.get("evaluating"):
        out.evaluation = "periodic"
        since = float(hb["evaluating_since"]) if isinstance(hb.get("evaluating_since"), int | float) else None
    else:
        since = None
    if out.evaluation and since is not None:
        out.evaluating_s = max(0.0, now - since)
    return out


def duration(seconds: float | None) -> str:
    """'13 min 30 s', '2 h 05 min', '42 s'; '?' when unknown."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"
