"""The training alarms: one function per alarm, each judging the job's own records.

Thresholds come from the contract's typed model (claimcheck.engine.training.schema.Alarms), so the job, the
dispatch stage and the TUI judge with the same defaults as the contract and docs/contract.md.
Pure and cheap (no torch): the dispatch stage and the TUI call `evaluate` on a job's files.

Each alarm returns one entry: name, state (raised / clear / disabled / not_run / pending), detail,
step, and any extra measured value. "pending": the job still runs and what the alarm judges is not
yet due (a dev evaluation or a step the contract schedules later).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from claimcheck.engine.stats import registry
from claimcheck.engine.training.jobfiles import HEARTBEAT_SECONDS, dev_evals, latest_steps, trivial
from claimcheck.engine.training.jobrecords import EvalLine, HaltLine, MetricLine, StepLine
from claimcheck.engine.training.schema import Alarms, Effective, effective

# The stall alarm: no optimizer step for longer than STALL_STEP_MULTIPLE × the job's own median
# step time, and never less than the contract's floor (alarms.stall_heartbeats heartbeat intervals).
STALL_STEP_MULTIPLE = 5.0

ALARMS = ("non_finite", "divergence", "class_collapse", "train_dev_gap", "stall", "worse_than_trivial")


def config(contract: Effective | dict[str, Any]) -> Alarms:
    """The alarm thresholds of an effective contract (its table, a whole contract.toml, or typed)."""
    return effective(contract).alarms


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


@dataclass
class Observed:
    """What the alarms judge: a job's records (grouped once for all alarms) and its heartbeat count."""

    records: list[MetricLine]
    total_steps: int
    # The most heartbeats the job spent in training without an optimizer step (-1: none recorded).
    max_beats_without_step: int = -1
    # Seconds between heartbeats (what one beat without a step stands for).
    interval_s: float = HEARTBEAT_SECONDS
    # Whether the job has ended: on a running job an alarm whose evidence the contract schedules
    # later is "pending" (not yet due), never judged on what is missing so far.
    ended: bool = True
    steps: list[StepLine] = field(default_factory=list)
    evals: list[EvalLine] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.steps = latest_steps(self.records)
        self.evals = dev_evals(self.records)

    @property
    def median_step_s(self) -> float | None:
        """The median wall-clock seconds of the job's optimizer steps; None before a timed step."""
        secs = sorted(s.seconds for s in self.steps if _finite(s.seconds) and s.seconds > 0)
        if not secs:
            return None
        mid = len(secs) // 2
        return secs[mid] if len(secs) % 2 else (secs[mid - 1] + secs[mid]) / 2

    @property
    def higher_better(self) -> bool:
        return not any(registry.lower_is_better(e.metric) for e in self.evals[:1])


def _secs(x: float) -> str:
    return f"{x:.1f}s" if x < 10 else f"{x:.0f}s"


def _entry(name: str, state: str, detail: str, step: int = -1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "state": state, "detail": detail, "step": step, **extra}


def non_finite(obs: Observed, cfg: Alarms) -> dict[str, Any]:
    name = "non_finite"
    halts = [r for r in obs.records if isinstance(r, HaltLine)]
    bad = [s for s in obs.steps if not _finite(s.loss) or not _finite(s.grad_norm)]
    if halts:
        return _entry(name, "raised", halts[0].reason, halts[0].step)
    if bad:
        return _entry(name, "raised", "non-finite loss or gradient norm", bad[0].step)
    if obs.steps:
        return _entry(name, "clear", f"loss and gradient norm finite at all {len(obs.steps)} steps")
    return _entry(name, "not_run", "no optimizer step recorded")


def divergence(obs: Observed, cfg: Alarms) -> dict[str, Any]:
    name = "divergence"
    losses = [(s.step, s.loss) for s in obs.steps if _finite(s.loss)]
    if len(losses) < 10:
        if not obs.ended and obs.total_steps >= 10:
            return _entry(
                name, "pending", f"not yet due: {len(losses)} finite loss values so far; needs ≥ 10"
            )
        return _entry(name, "not_run", f"{len(losses)} finite loss values; divergence needs ≥ 10")
    factor = float(cfg.divergence_factor)
    window = max(3, len(losses) // 10)
    means = [
        (losses[i][0], sum(v for _, v in losses[i - window + 1 : i + 1]) / window)
        for i in range(window - 1, len(losses))
    ]
    best = math.inf
    for step, m in means:
        if m > factor * best:
            return _entry(name, "raised", f"rolling loss {m:.4g} > {factor}× best {best:.4g}", step)
        best = min(best, m)
    return _entry(name, "clear", f"rolling loss (window {window}) never exceeded {factor}× its best")


def class_collapse(obs: Observed, cfg: Alarms) -> dict[str, Any]:
    name = "class_collapse"
    dists = [e for e in obs.evals if e.pred_distribution]
    if not obs.evals:
        return _entry(name, "not_run", "no dev evaluation yet")
    if not dists:
        return _entry(name, "not_run", "no predicted-class distribution recorded (not a classification job?)")
    share = float(cfg.collapse_share)
    last = dists[-1]
    pred = last.pred_distribution or {}
    true = last.true_distribution or {}
    n = max(1, sum(pred.values()))
    top_cls, top_n = max(pred.items(), key=lambda kv: kv[1])
    true_top = max(true.values()) / max(1, sum(true.values())) if true else 0.0
    if top_n / n >= share and true_top < share:
        detail = f"{top_n / n:.1%} of dev predictions are '{top_cls}' (true top share {true_top:.1%})"
        return _entry(name, "raised", detail, last.step)
    return _entry(
        name, "clear", f"top predicted class '{top_cls}' at {top_n / n:.1%} < {share:.0%} at last eval"
    )


def train_dev_gap(obs: Observed, cfg: Alarms) -> dict[str, Any]:
    name = "train_dev_gap"
    pairs = [e for e in obs.evals if _finite(e.train_value) and _finite(e.value)]
    if not pairs:
        return _entry(name, "not_run", "no train-reference metric recorded")
    last = pairs[-1]
    gap = last.train_value - last.value
    gap = gap if obs.higher_better else -gap
    limit = float(cfg.gap_limit)
    state = "raised" if gap > limit else "clear"
    detail = f"train − dev {last.metric} gap {gap:.3f} vs limit {limit}"
    return _entry(name, state, detail, last.step, gap=gap)


def stall(obs: Observed, cfg: Alarms) -> dict[str, Any]:
    """Raised when the job went longer without an optimizer step than its own steps justify.

    The longest stretch in training without a step (heartbeats × interval; a dev evaluation between
    steps does not count, the heartbeat thread restarts its count after one) is compared with
    STALL_STEP_MULTIPLE × the median step time, never less than the contract's floor of
    `stall_heartbeats` intervals: a slow but steady job is not stalled.
    """
    name = "stall"
    worst = int(obs.max_beats_without_step)
    if worst < 0:
        return _entry(name, "not_run", "no heartbeat recorded during training")
    interval = float(obs.interval_s)
    gap_s = worst * interval
    floor_s = int(cfg.stall_heartbeats) * interval
    median = obs.median_step_s
    limit_s = max(floor_s, STALL_STEP_MULTIPLE * median) if median is not None else floor_s
    state = "raised" if gap_s > limit_s else "clear"
    basis = (
        f"{STALL_STEP_MULTIPLE:g}× median step {_secs(median)}, floor {_secs(floor_s)}"
        if median is not None
        else f"floor {_secs(floor_s)}: no timed step yet"
    )
    detail = (
        f"longest stretch without an optimizer step {_secs(gap_s)} ({worst} heartbeats of {interval:g}s) "
        f"vs limit {_secs(limit_s)} ({basis})"
    )
    extra = {"max_beats_without_step": worst, "longest_without_step_s": round(gap_s, 3)}
    extra["stall_limit_s"] = round(limit_s, 3)
    if median is not None:
        extra["median_step_s"] = round(median, 4)
    return _entry(name, state, detail, -1, **extra)


def worse_than_trivial(obs: Observed, cfg: Alarms) -> dict[str, Any]:
    name = "worse_than_trivial"
    after = int(cfg.worse_than_trivial_after_step)
    after = obs.total_steps // 2 if after < 0 else after  # -1: from the half-way step on
    base = trivial(obs.records)
    late = [e for e in obs.evals if e.step >= after and _finite(e.value)]
    if base is None or not _finite(base.value):
        return _entry(name, "not_run", "no trivial-baseline dev value recorded")
    if not late:
        if not obs.ended:
            at = max((s.step for s in obs.steps), default=0)
            return _entry(
                name, "pending", f"not yet due: judged from step {after} on (the job is at step {at})"
            )
        return _entry(name, "not_run", f"no dev evaluation at or after step {after}")
    tv = base.value
    higher = obs.higher_better
    worse = [e for e in late if (e.value < tv if higher else e.value > tv)]
    if worse:
        e = worse[0]
        detail = (
            f"dev {e.metric} {e.value:.4f} worse than trivial {tv:.4f} at step {e.step} (after step {after})"
        )
        return _entry(name, "raised", detail, e.step)
    return _entry(
        name, "clear", f"dev metric not worse than trivial {tv:.4f} at {len(late)} evals from step {after}"
    )


CHECKS: dict[str, Callable[[Observed, Alarms], dict[str, Any]]] = {
    "non_finite": non_finite,
    "divergence": divergence,
    "class_collapse": class_collapse,
    "train_dev_gap": train_dev_gap,
    "stall": stall,
    "worse_than_trivial": worse_than_trivial,
}


def evaluate(obs: Observed, contract: Effective | dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per alarm, in ALARMS order; a disabled alarm is reported as disabled."""
    cfg = config(contract)
    disabled = {str(x) for x in cfg.disabled}
    out = []
    for name in ALARMS:
        if name in disabled:
            out.append(_entry(name, "disabled", "disabled in the contract (alarms.disabled)"))
        else:
            out.append(CHECKS[name](obs, cfg))
    return out
