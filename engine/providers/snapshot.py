"""One look at a training job, built from its folder by `snapshot`: its state as its provider judges
it, its progress, its loss and dev-metric curves, its checkpoints and resumes, its pace and its
alarms. The dispatch stage records its checks from a snapshot; the TUI's live job view, the
navigator and the artifact banner draw one. Neither reads the job's files itself.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from claimcheck.engine.providers.base import Handle, Provider
from claimcheck.engine.providers.registry import for_job
from claimcheck.engine.training import alarms as job_alarms
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import (
    EvalLine,
    JobState,
    MetricLine,
    Phase,
    ResumeLine,
    StatusFile,
    StepLine,
    TrivialLine,
    is_bad,
    is_running,
    is_terminal,
    job_state,
)
from claimcheck.engine.training.pace import Pace, pace
from claimcheck.engine.training.schema import Effective, effective


class Redone(BaseModel):
    """A step a killed run logged past its checkpoint and the resumed run did again."""

    model_config = ConfigDict(extra="forbid")

    step: int
    first: StepLine
    last: StepLine


class JobSnapshot(BaseModel):
    """A job at one moment: what the provider says, what the job's files hold, what they mean."""

    model_config = ConfigDict(extra="forbid")

    op_id: str
    # The provider's phase (the job's own word or a derived one); "unreadable" when its files are not.
    phase: Literal[Phase, "unreadable"]
    reason: str = ""
    alive: bool = False
    pid: int = 0
    step: int = 0
    total_steps: int = 0
    resumed_from: list[int] = Field(default_factory=list)
    heartbeat_age_s: float = -1.0
    heartbeats: int = 0
    heartbeat_step: int = 0
    heartbeat_interval_s: float = 0.0
    # The alarms' inputs besides the records: the longest stretch without a step, in heartbeats.
    max_beats_without_step: int = -1
    status: StatusFile | None = None
    steps: list[StepLine] = Field(default_factory=list)  # the last record per step
    evals: list[EvalLine] = Field(default_factory=list)  # scheduled dev evaluations
    trivial: TrivialLine | None = None
    checkpoints: list[int] = Field(default_factory=list)
    resumes: list[ResumeLine] = Field(default_factory=list)
    redone: list[Redone] = Field(default_factory=list)
    pace: Pace = Field(default_factory=Pace)
    alarms: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def running(self) -> bool:
        return is_running(self.phase)

    @property
    def terminal(self) -> bool:
        return is_terminal(self.phase)

    @property
    def bad(self) -> bool:
        return is_bad(self.phase) or self.phase == "unreadable"

    @property
    def job_state(self) -> JobState:
        return job_state(self.phase)

    @property
    def dev_metric(self) -> str:
        return self.evals[-1].metric if self.evals else ""

    @property
    def loss_points(self) -> list[tuple[float, float]]:
        """(step, training loss) of every step with a finite loss."""
        return [(float(s.step), s.loss) for s in self.steps if math.isfinite(s.loss)]

    @property
    def dev_points(self) -> list[tuple[float, float]]:
        """(step, dev metric) of every evaluation with a finite value."""
        return [(float(e.step), e.value) for e in self.evals if math.isfinite(e.value)]

    @property
    def trivial_value(self) -> float | None:
        return self.trivial.value if self.trivial is not None and math.isfinite(self.trivial.value) else None


def _redone(records: list[MetricLine]) -> list[Redone]:
    first: dict[int, StepLine] = {}
    last: dict[int, StepLine] = {}
    for r in records:
        if isinstance(r, StepLine):
            first.setdefault(r.step, r)
            last[r.step] = r
    return [Redone(step=s, first=first[s], last=last[s]) for s in sorted(last) if first[s] is not last[s]]


def _contract(job_dir: Path) -> dict[str, Any]:
    try:
        return jobfiles.read_contract(job_dir)
    except (OSError, ValueError):
        return {}


def snapshot(
    job_dir: Path,
    provider: Provider,
    handle: Handle | None = None,
    contract: Effective | dict[str, Any] | None = None,
    now: float | None = None,
) -> JobSnapshot:
    """The job in `job_dir` as `provider` judges it, with everything its files say.

    `contract` gives the alarms' thresholds (the job's own contract.toml when None).
    """
    job_dir = Path(job_dir)
    handle = handle or Handle(op_id=job_dir.name, job_dir=job_dir, provider=provider.name)
    st = provider.status(handle)
    now = time.time() if now is None else now
    files = jobfiles.read_progress(job_dir)
    records = jobfiles.read_metrics(job_dir)
    hb = files.heartbeat
    obs = job_alarms.Observed(
        records,
        st.total_steps,
        files.max_beats_without_step(),
        hb.interval if hb else jobfiles.HEARTBEAT_SECONDS,
        ended=is_terminal(st.phase),
    )
    contract = _contract(job_dir) if contract is None else contract
    try:
        alarms = job_alarms.evaluate(obs, contract)
        eval_every = effective(contract).eval_every_steps if contract else 0
    except ValueError:  # a contract copy this engine cannot read: the dispatch stage says why
        alarms, eval_every = [], 0
    return JobSnapshot(
        op_id=st.op_id,
        phase=st.phase,
        reason=st.reason,
        alive=st.alive,
        pid=st.pid,
        step=st.step,
        total_steps=st.total_steps,
        resumed_from=list(st.resumed_from),
        heartbeat_age_s=st.heartbeat_age_s,
        heartbeats=st.heartbeats,
        heartbeat_step=hb.step if hb else 0,
        heartbeat_interval_s=hb.interval if hb else 0.0,
        max_beats_without_step=files.max_beats_without_step(),
        status=files.status,
        steps=obs.steps,
        evals=obs.evals,
        trivial=jobfiles.trivial(records),
        checkpoints=[r.step for r in jobfiles.checkpoints(records)],
        resumes=[r for r in records if isinstance(r, ResumeLine)],
        redone=_redone(records),
        pace=pace(files, records, now, eval_every),
        alarms=alarms,
    )


def poll(jobs_root: Path, inputs: dict[str, Any] | None = None) -> list[JobSnapshot]:
    """A snapshot of every launched job under jobs/, each judged by its own provider: the one the
    dispatch inputs name (`inputs`), or the one its folder records (a Ray job is asked of Ray)."""
    if not Path(jobs_root).is_dir():
        return []
    out = []
    for job_dir in sorted(p for p in Path(jobs_root).iterdir() if p.is_dir()):
        if jobfiles.launched(job_dir):
            out.append(snapshot(job_dir, for_job(job_dir, inputs)))
    return out
