"""A training job's pace, read from its own files: elapsed time, steps per second, ETA, and any dev
evaluation under way (the live view's line; jobfiles reads the files, this judges their timing)."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from claimcheck.engine.training.jobfiles import Progress, latest_steps
from claimcheck.engine.training.jobrecords import TERMINAL_PHASES, MetricLine

# Steps/s is measured over at most this many of the latest optimizer steps (evaluations between
# them included, so the ETA counts the evaluations still to come at the same rate).
PACE_WINDOW = 20
EVAL_PHASES = {"initial-eval": "initial", "final-eval": "final"}


class Pace(BaseModel):
    """How fast a job goes, from its own files: wall-clock, never recorded as evidence."""

    model_config = ConfigDict(extra="forbid")

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


def _rate(records: list[MetricLine]) -> float | None:
    last = latest_steps(records)[-PACE_WINDOW:]
    if len(last) >= 2 and last[-1].time > last[0].time:
        return (last[-1].step - last[0].step) / (last[-1].time - last[0].time)
    secs = [r.seconds for r in last if r.seconds > 0]
    return 1.0 / (sum(secs) / len(secs)) if secs else None


def pace(files: Progress, records: list[MetricLine], now: float | None = None) -> Pace:
    """Elapsed time, steps per second, ETA and any evaluation under way of the job whose status and
    heartbeat are `files`."""
    now = time.time() if now is None else now
    status = files.status
    phase = files.phase
    started = _epoch(status.started_at) if status is not None else None
    updated = _epoch(status.updated_at) if status is not None else None
    ended = phase in TERMINAL_PHASES
    out = Pace()
    if started is not None:
        out.elapsed_s = max(0.0, ((updated or now) if ended else now) - started)
    out.steps_per_s = _rate(records)
    total, step = (status.total_steps, status.step) if status is not None else (0, 0)
    if not ended and out.steps_per_s and total > step:
        out.eta_s = (total - step) / out.steps_per_s
    if ended:
        return out
    hb = files.heartbeat
    if phase in EVAL_PHASES:
        out.evaluation = EVAL_PHASES[phase]
        since = updated
    elif phase == "training" and hb is not None and hb.evaluating:
        out.evaluation = "periodic"
        since = hb.evaluating_since
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
