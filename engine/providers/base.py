"""Where a training job runs: the small interface every provider implements.

A provider knows how to start a job directory, find it again by operation identity, tell its
state, cancel it and bring its files home. Everything else (what a job writes, how progress is
judged) lives in the job directory itself, so a cluster provider (Ray Jobs) fits beside the
local one without changing the stages:

    launch(job_dir, op_id, resume=False) -> Handle   idempotent: an existing job is adopted
    find(op_id) -> Handle | None                     reattach by identity, never by relaunch
    status(handle) -> JobStatus                      from status.json + heartbeat age + liveness
    cancel(handle) -> None                           stops that job only
    fetch(handle, dest) -> Path                      the job's files on this machine

Which provider serves a job is claimcheck.engine.providers.registry's business; this module imports none.

Operation identity = contract digest + attempt number (`operation_id`). An uncertain reply is
reconciled by `find` / `status`, never by launching again with a new identity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from claimcheck.engine.training import jobfiles, jobrecords
from claimcheck.engine.training.jobrecords import Phase


def operation_id(digest: str, attempt: int) -> str:
    """Stable identity of one deliberate launch: the contract digest plus the attempt number."""
    hex_part = digest.split(":", 1)[-1]
    if len(hex_part) < 16 or attempt < 1:
        raise ValueError(
            f"operation identity needs a sha256 digest and attempt ≥ 1 (got {digest!r}, {attempt})"
        )
    return f"{hex_part[:16]}-a{attempt}"


@dataclass
class Handle:
    """A reference to one job: enough to find it again after the app restarts."""

    op_id: str
    job_dir: Path
    provider: str
    # Provider-side reference: the pid for the local provider, the submission id for Ray.
    ref: str = ""
    # True when this call started the process; False when it adopted an existing job.
    started: bool = False


@dataclass
class JobStatus:
    op_id: str
    # The job's own phase (status.json), or a derived one: launching / lost / stalled / not_found.
    phase: Phase
    reason: str = ""
    step: int = 0
    total_steps: int = 0
    alive: bool = False
    pid: int = 0
    heartbeat_age_s: float = -1.0
    heartbeats: int = 0
    resumed_from: list[int] = field(default_factory=list)

    @property
    def terminal(self) -> bool:
        return jobrecords.is_terminal(self.phase)

    @property
    def running(self) -> bool:
        return jobrecords.is_running(self.phase)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@runtime_checkable
class Provider(Protocol):
    name: str

    def launch(self, job_dir: Path, op_id: str, *, resume: bool = False) -> Handle: ...

    def find(self, op_id: str) -> Handle | None: ...

    def status(self, handle: Handle) -> JobStatus: ...

    def cancel(self, handle: Handle) -> None: ...

    def fetch(self, handle: Handle, dest: Path | None = None) -> Path: ...


def require_job_dir(job_dir: Path, expected: Path, op_id: str) -> Path:
    """The folder a provider is asked to launch must be this operation's, already written."""
    job_dir = Path(job_dir)
    contract = job_dir / jobfiles.CONTRACT
    if job_dir.resolve() != Path(expected).resolve():
        raise ValueError(f"job dir {job_dir} is not {expected} (operation {op_id})")
    if not contract.exists():
        raise FileNotFoundError(f"{contract} is missing: write the job directory first")
    return job_dir
