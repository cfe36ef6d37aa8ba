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

Operation identity = contract digest + attempt number (`operation_id`). An uncertain reply is
reconciled by `find` / `status`, never by launching again with a new identity.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

# Stages the job itself writes into status.json.
RUNNING_STAGES = ("loading", "initial-eval", "training", "final-eval")
TERMINAL_STAGES = ("done", "failed", "cancelled")
# Stages a provider derives when the job's own word is not the whole story.
DERIVED_STAGES = ("launching", "lost", "stalled", "unconfirmed", "not_found")


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
    # The job's own stage (status.json), or a derived one: launching / lost / stalled / not_found.
    stage: str
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
        return self.stage in TERMINAL_STAGES or self.stage in ("lost", "not_found")

    @property
    def running(self) -> bool:
        return self.stage in RUNNING_STAGES or self.stage in ("launching", "stalled")

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


def get_provider(name: str, jobs_root: Path) -> Provider:
    """The provider named in the dispatch inputs, rooted at the session's jobs folder."""
    if name == "local":
        from engine.providers.local import LocalProvider

        return LocalProvider(jobs_root)
    raise ValueError(f"unknown provider {name!r}; available: local")


def require_job_dir(job_dir: Path, expected: Path, op_id: str) -> Path:
    """The folder a provider is asked to launch must be this operation's, already written."""
    from engine.training.job import CONTRACT

    job_dir = Path(job_dir)
    if job_dir.resolve() != Path(expected).resolve():
        raise ValueError(f"job dir {job_dir} is not {expected} (operation {op_id})")
    if not (job_dir / CONTRACT).exists():
        raise FileNotFoundError(f"{job_dir / CONTRACT} is missing: write the job directory first")
    return job_dir
