"""What a training job's folder holds, typed: status.json, the heartbeat, pid.json and each line of
metrics.jsonl, and the job's state vocabulary with its classification.

One owner for these values: the job (claimcheck.engine.training.job) and the providers write them
through claimcheck.engine.training.jobfiles, and every reader (providers, the dispatch stage,
replay, the TUI) gets these models back. A file that does not fit its model is a `JobFileError`
naming the file, the line and the field.

Cheap: pydantic only, no torch, no polars.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from claimcheck.engine.errors import ClaimcheckError, validation_problem
from claimcheck.engine.ledger.upgrade import job_phase_key

HEARTBEAT_SECONDS = 2.0

# ---------------------------------------------------------------- the state vocabulary

# The phases a job passes through (a job's phase, never a claimcheck stage). Those the job itself
# writes into status.json:
RunningPhase = Literal["loading", "initial-eval", "training", "final-eval"]
TerminalPhase = Literal["done", "failed", "cancelled"]
# Written by the Ray provider over a failed run's terminal word before it submits it again.
Resubmitted = Literal["resubmitted"]
# The words a provider writes into status.json (claimcheck.engine.training.jobfiles.record_phase).
ProviderPhase = Literal["cancelled", "resubmitted"]
# Phases a provider derives when the job's own word is not the whole story.
DerivedPhase = Literal["launching", "lost", "stalled", "unconfirmed", "not_found"]
# Every word status.json may hold (StatusFile.phase is also "" before the job's first word).
WrittenPhase = Literal[RunningPhase, TerminalPhase, Resubmitted]
# Every word a provider reports (JobStatus.phase).
Phase = Literal[WrittenPhase, DerivedPhase]
# What the evidence says about a run (dispatch.progress.job_state, replay, the claim's review).
JobState = Literal["finished", "failed", "cancelled", "incomplete"]

RUNNING_PHASES: tuple[str, ...] = RunningPhase.__args__
TERMINAL_PHASES: tuple[str, ...] = TerminalPhase.__args__
RESUBMITTED: str = Resubmitted.__args__[0]
DERIVED_PHASES: tuple[str, ...] = DerivedPhase.__args__
JOB_STATES: tuple[str, ...] = JobState.__args__
# Derived phases that end the watch (nothing runs) and those that may still run.
ENDED_DERIVED = ("lost", "not_found")
LIVE_DERIVED = ("launching", "stalled")
# Phases a person must look at: the job failed, vanished, or stopped beating while alive.
BAD_PHASES = ("failed", "lost", "stalled")


def job_state(phase: str) -> JobState:
    """The evidence word for a phase: finished only when the job said done."""
    if phase == "done":
        return "finished"
    if phase == "failed":
        return "failed"
    if phase == "cancelled":
        return "cancelled"
    return "incomplete"


def is_terminal(phase: str) -> bool:
    """Nothing runs any more: the job's own terminal word, or a job that is gone / never was."""
    return phase in TERMINAL_PHASES or phase in ENDED_DERIVED


def is_running(phase: str) -> bool:
    return phase in RUNNING_PHASES or phase in LIVE_DERIVED


def is_bad(phase: str) -> bool:
    return phase in BAD_PHASES


# ---------------------------------------------------------------- the files


class JobFileError(ClaimcheckError):
    """A job file that cannot be read as its model: names the file (and line) and what is wrong."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StatusFile(_Record):
    """status.json: the job's own word on its phase, rewritten atomically as it runs."""

    phase: Literal[WrittenPhase, ""] = ""
    reason: str = ""
    step: int = 0
    total_steps: int = 0
    operation_id: str = ""
    digest: str = ""
    pid: int = 0
    started_at: str = ""
    updated_at: str = ""
    heartbeat_seconds: float = HEARTBEAT_SECONDS
    resumed_from: list[int] = Field(default_factory=list)
    runs: int = 0
    # The most heartbeats the job spent in training without an optimizer step (-1: none yet).
    max_beats_without_step: int = -1
    model_info: dict[str, int | float | str | bool] = Field(default_factory=dict)
    dev_metric_note: str = ""
    early_stopped_at: int | None = None


class HeartbeatFile(_Record):
    """heartbeat: written by the job's heartbeat thread every `interval` seconds — not a step."""

    time: float
    iso: str = ""
    beats: int = 0
    step: int = 0
    phase: WrittenPhase
    pid: int = 0
    interval: float = HEARTBEAT_SECONDS
    beats_since_step: int = 0
    max_beats_without_step: int = -1
    # a dev evaluation in progress and when it began (no step moves meanwhile)
    evaluating: bool = False
    evaluating_since: float | None = None


class PidFile(_Record):
    """pid.json: the local provider's (or the job's own) record of the process that runs the job."""

    pid: int
    pgid: int = 0
    host: str = ""
    starts: list[str] = Field(default_factory=list)


class RuntimeFile(_Record):
    """runtime.json: the process that ran the job, stamped by the job itself once its model is loaded
    (claimcheck.engine.training.stamp). Rewritten by each run of the job (`run` counts them)."""

    written_at: str
    run: int = 1
    host: str = ""
    pid: int = 0
    # Library versions (python, torch, transformers, ...; "not installed" when absent).
    versions: dict[str, str]
    # sha256 of each claimcheck.engine source file the job process had imported, by module name, and
    # the digest over them (engine/training/stamp.py `engine_digest`).
    engine_sha256: str
    engine_modules: dict[str, str]
    # The device it trained on: cpu_model, memory_bytes, and when a GPU: gpu, gpu_memory_bytes, cuda, driver.
    device: dict[str, str | int]
    # The digest of the base model's files it loaded, computed as the contract pins `model_sha256`.
    model_sha256: str
    model_files: int = 0


class StepLine(_Record):
    """One optimizer step: summed micro-batch loss, learning rate, gradient norm, its seconds."""

    kind: Literal["step"]
    step: int
    time: float
    loss: float
    lr: float
    grad_norm: float
    seconds: float
    epoch: float


class EvalLine(_Record):
    """A dev evaluation: on schedule ("eval") or of the selected best state ("selected_eval")."""

    kind: Literal["eval", "selected_eval"]
    split: Literal["dev"]
    step: int
    time: float
    metric: str
    value: float
    loss: float
    train_value: float
    train_rows: int
    rows: int
    phase: WrittenPhase
    selected_step: int
    pred_distribution: dict[str, int] | None = None
    true_distribution: dict[str, int] | None = None


class TrivialLine(_Record):
    """The trivial baseline's dev value (train's majority class), written once before step 1."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kind: Literal["trivial"]
    step: int
    metric: str
    value: float
    majority_class: str | None = Field(default=None, alias="class")
    detail: str = ""


class CheckpointLine(_Record):
    kind: Literal["checkpoint"]
    step: int
    time: float
    path: str


class ResumeLine(_Record):
    kind: Literal["resume"]
    step: int
    time: float
    checkpoint: str
    run: int


class HaltLine(_Record):
    """A required stop (non-finite loss or gradient norm)."""

    kind: Literal["halt"]
    step: int
    time: float
    reason: str


class EarlyStopLine(_Record):
    kind: Literal["early_stop"]
    step: int
    time: float
    reason: str


MetricLine = Annotated[
    StepLine | EvalLine | TrivialLine | CheckpointLine | ResumeLine | HaltLine | EarlyStopLine,
    Field(discriminator="kind"),
]
# Each kind's model, in the order the job first writes them.
_KINDS: dict[str, type[_Record]] = {
    "trivial": TrivialLine,
    "eval": EvalLine,
    "step": StepLine,
    "checkpoint": CheckpointLine,
    "resume": ResumeLine,
    "early_stop": EarlyStopLine,
    "halt": HaltLine,
    "selected_eval": EvalLine,
}
METRIC_KINDS = tuple(_KINDS)


def _problem(exc: ValidationError, where: str) -> JobFileError:
    return JobFileError(f"{where}: {validation_problem(exc).text('(the record)')}")


def parse_file(model: type[_Record], doc: Any, where: str) -> Any:
    """`doc` (a file's JSON) as `model`, or a JobFileError naming `where`. A file written before
    the job's phase had its own name is read through the named upgrade `job_phase_key`."""
    if not isinstance(doc, dict):
        raise JobFileError(f"{where}: a JSON {type(doc).__name__}, not an object")
    doc = job_phase_key(doc)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise _problem(exc, where) from None


def parse_line(doc: Any, where: str) -> MetricLine:
    """One metrics.jsonl line as its kind's model; an unknown kind or a missing field is a JobFileError."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if isinstance(doc, dict) and kind not in _KINDS:
        raise JobFileError(f"{where}: unknown record kind {kind!r} (known: {', '.join(METRIC_KINDS)})")
    return parse_file(_KINDS.get(str(kind), StepLine), doc, where)


def dump_line(rec: MetricLine) -> dict[str, Any]:
    """The JSON object of one metrics.jsonl line (fields the job did not set are left out)."""
    return rec.model_dump(mode="python", by_alias=True, exclude_unset=True)
