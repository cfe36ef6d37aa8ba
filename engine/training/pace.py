"""A training job's pace, read from its own files: elapsed time, seconds per step, seconds per dev
evaluation, the ETA from both, and any dev evaluation under way (the live view's line; jobfiles
reads the files, this judges their timing)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from claimcheck.engine.training.jobfiles import Progress, latest_steps
from claimcheck.engine.training.jobrecords import (
    TERMINAL_PHASES,
    CheckpointLine,
    EvalLine,
    MetricLine,
    ResumeLine,
    StepLine,
)

# The step time is the mean of at most this many of the latest optimizer steps' own seconds (the
# evaluations between them are timed apart, so an evaluation never slows the step rate).
PACE_WINDOW = 20
# The evaluation time is the median of at most this many of the latest timed dev evaluations.
EVAL_WINDOW = 5
EVAL_PHASES = {"initial-eval": "initial", "final-eval": "final"}


class Pace(BaseModel):
    """How fast a job goes, from its own files: wall-clock, never recorded as evidence."""

    model_config = ConfigDict(extra="forbid")

    elapsed_s: float | None = None  # since this run of the job started (to its last word when ended)
    step_s: float | None = None  # seconds per optimizer step (evaluations not counted)
    eval_s: float | None = None  # seconds per dev evaluation (None: none timed yet)
    evals_left: int = 0  # dev evaluations still to start (the final one included)
    eta_s: float | None = None  # steps left × step_s + evaluations left × eval_s; None when not running
    eta_floor: bool = False  # eta_s leaves out evaluations no evaluation has been timed for yet
    evaluation: str = ""  # the dev evaluation under way: initial / periodic / final; "" when none
    evaluating_s: float | None = None  # how long it has run


def _epoch(iso: Any) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def step_seconds(records: list[MetricLine]) -> float | None:
    """Mean seconds of the latest optimizer steps, each step's own time (None: no step yet)."""
    secs = [r.seconds for r in latest_steps(records)[-PACE_WINDOW:] if r.seconds > 0]
    return sum(secs) / len(secs) if secs else None


def eval_seconds(records: list[MetricLine]) -> list[float]:
    """How long each timed dev evaluation took: from the record written just before it at the same
    step (the step, checkpoint or resume line the evaluation follows) to the evaluation's own line.
    The evaluation at step 0 follows no timed line and is left out."""
    out: list[float] = []
    before: StepLine | CheckpointLine | ResumeLine | None = None
    for r in records:
        if isinstance(r, StepLine | CheckpointLine | ResumeLine):
            before = r
        elif isinstance(r, EvalLine):
            if before is not None and before.step == r.step and r.time >= before.time:
                out.append(r.time - before.time)
            before = None
    return out


def evaluations_left(step: int, total: int, every: int, phase: str) -> int:
    """Dev evaluations still to start after `step`: the scheduled ones (every `every` steps, before the
    last step) and the final one (unless it is the one running)."""
    scheduled = len(range((step // every + 1) * every, total, every)) if every > 0 and total > step else 0
    return scheduled + (0 if phase == "final-eval" else 1)


def pace(files: Progress, records: list[MetricLine], now: float | None = None, eval_every: int = 0) -> Pace:
    """Elapsed time, step and evaluation times, ETA and any evaluation under way of the job whose status
    and heartbeat are `files` (`eval_every`: the contract's eval_every_steps)."""
    now = time.time() if now is None else now
    status = files.status
    phase = files.phase
    started = _epoch(status.started_at) if status is not None else None
    updated = _epoch(status.updated_at) if status is not None else None
    ended = phase in TERMINAL_PHASES
    out = Pace(step_s=step_seconds(records))
    timed = eval_seconds(records)[-EVAL_WINDOW:]
    out.eval_s = statistics.median(timed) if timed else None
    if started is not None:
        out.elapsed_s = max(0.0, ((updated or now) if ended else now) - started)
    if ended:
        return out
    hb = files.heartbeat
    since = None
    if phase in EVAL_PHASES:  # the heartbeat's start of the evaluation, else the phase's
        out.evaluation = EVAL_PHASES[phase]
        since = hb.evaluating_since if hb is not None and hb.evaluating else updated
    elif phase == "training" and hb is not None and hb.evaluating:
        out.evaluation, since = "periodic", hb.evaluating_since
    if out.evaluation and since is not None:
        out.evaluating_s = max(0.0, now - since)
    total, step = (status.total_steps, status.step) if status is not None else (0, 0)
    if phase in ("initial-eval", "training", "final-eval"):
        out.evals_left = evaluations_left(step, total, eval_every, phase)
        out.eta_s, out.eta_floor = _eta(out, total - step)
    return out


def _eta(p: Pace, steps_left: int) -> tuple[float | None, bool]:
    """Steps left at the step time, plus the evaluations left (and the rest of the running one) at
    the evaluation time; without a timed evaluation, the steps alone as a lower bound."""
    if steps_left > 0 and p.step_s is None:
        return None, False
    eta = max(0, steps_left) * (p.step_s or 0.0)
    running = p.evaluation != ""
    if p.eval_s is None:
        return (eta, True) if (p.evals_left or running) else (eta, False)
    eta += p.evals_left * p.eval_s
    if running:
        eta += max(0.0, p.eval_s - (p.evaluating_s or 0.0))
    return eta, False


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
