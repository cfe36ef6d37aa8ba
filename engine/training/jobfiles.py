"""A training job's folder: the one module that knows its file names, reads and writes them, and
decides what state the job is in.

The job (claimcheck.engine.training.job) reads only its own folder and writes its own progress there, so it
can run detached from the app and be reattached later:

    contract.toml   the frozen contract copy: identity, data files and hashes, runtime, [effective]
    data/           train.jsonl, dev.jsonl (never the test split; row files, engine/training/rowfiles.py)
    status.json     phase (loading / initial-eval / training / final-eval / done / failed /
                    cancelled), reason, step, total steps, resume points
    heartbeat       JSON written by a thread every `heartbeat_seconds`: time, beat count, the
                    optimizer step at that moment — a heartbeat is not a step
    metrics.jsonl   one JSON object a line: kind = step | eval | selected_eval | trivial |
                    checkpoint | resume | halt | early_stop
    runtime.json    the runtime stamp: library versions, the engine source digest, the device and
                    the base model's digest, written by the job process itself once its model is loaded
    log.txt         stdout / stderr of the process (written by the provider)
    pid.json        the local provider's process record; ray.json the Ray provider's
    checkpoints/    resumable state (claimcheck.engine.training.checkpoint); best/ the best-dev state
    final/          the artifact: trainable weights, tokenizer, config, dev predictions, manifest

The files' contents are typed in claimcheck.engine.training.jobrecords, with the state vocabulary:
  - the job's own phase (status.json): RUNNING_PHASES, then one of TERMINAL_PHASES; a provider
    writes a phase over the job's only through `record_phase`;
  - the phase a provider derives when the job's word is not the whole story (its process is gone,
    its heartbeat stopped, the cluster cannot be asked): DERIVED_PHASES, decided here by
    `local_phase` / `ray_phase`;
  - what the evidence says about the run: JOB_STATES, from `jobrecords.job_state`.

Cheap: no torch, no polars at import, so providers, stages, replay and the TUI can use it.
"""

from __future__ import annotations

import json
import os
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import atomic_write_text, dump_toml, now_iso
from claimcheck.engine.training import jobrecords
from claimcheck.engine.training.jobrecords import (
    TERMINAL_PHASES,
    CheckpointLine,
    EvalLine,
    HeartbeatFile,
    JobFileError,
    MetricLine,
    Phase,
    PidFile,
    ProviderPhase,
    RuntimeFile,
    StatusFile,
    StepLine,
    TrivialLine,
    dump_line,
    parse_file,
    parse_line,
)

# ---------------------------------------------------------------- names

CONTRACT = "contract.toml"
STATUS = "status.json"
HEARTBEAT = "heartbeat"
RUNTIME = "runtime.json"
METRICS = "metrics.jsonl"
LOG = "log.txt"
PID_FILE = "pid.json"
LAUNCH_LOCK = "launch.lock"
RAY_RECORD = "ray.json"
CHECKPOINTS = "checkpoints"
BEST = "best"
FINAL = "final"
DATA = "data"
TRAIN_FILE = "data/train.jsonl"
DEV_FILE = "data/dev.jsonl"
MANIFEST = "manifest.json"
# The row files' sample-weight column (a contract with loss_weighting = "sample_weight" only).
WEIGHT_COLUMN = "weight"
DEV_PREDICTIONS = "dev_predictions.jsonl"
# The same files in job folders recorded before row files (Parquet; read by rowfiles.read_rows).
LEGACY_DATA_FILES = ("data/train.parquet", "data/dev.parquet")
# Small files the job writes while it runs (a remote provider mirrors them home: on a Ray cluster the
# runtime stamp is the worker's own, written where the job runs).
PROGRESS_FILES = (STATUS, HEARTBEAT, METRICS, RUNTIME)

HEARTBEAT_SECONDS = jobrecords.HEARTBEAT_SECONDS
# A heartbeat older than this many intervals: the process is alive but not beating (local), or
# not confirmed alive (Ray).
STALL_INTERVALS = 5

# ---------------------------------------------------------------- readers and writers


def _read_json(path: Path) -> Any:
    """The file's JSON; None when it does not exist; a JobFileError when it is not JSON."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JobFileError(f"{path}: unreadable ({exc})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise JobFileError(f"{path}: not JSON ({exc})") from None


def _read(job_dir: Path, name: str, model: type[Any]) -> Any:
    """The job file `name` as `model`; None before anyone wrote it; a JobFileError when malformed."""
    path = Path(job_dir) / name
    doc = _read_json(path)
    return None if doc is None else parse_file(model, doc, str(path))


def _write(job_dir: Path, name: str, record: Any, indent: int | None = None) -> None:
    """What the writer set (defaults it left alone are not written), atomically."""
    atomic_write_text(Path(job_dir) / name, json.dumps(record.model_dump(exclude_unset=True), indent=indent))


def read_status(job_dir: Path) -> StatusFile | None:
    return _read(job_dir, STATUS, StatusFile)


def read_status_checked(job_dir: Path) -> tuple[StatusFile | None, str]:
    """(status, "") or (None, why not): "missing", or "unreadable: <error>"."""
    try:
        status = read_status(job_dir)
    except JobFileError as exc:
        return None, f"unreadable: {exc}"
    return (status, "") if status is not None else (None, "missing")


def write_status(job_dir: Path, status: StatusFile) -> None:
    status.updated_at = now_iso()
    _write(job_dir, STATUS, status, indent=1)


def record_phase(job_dir: Path, phase: ProviderPhase, reason: str, *, only_if_written: bool = False) -> bool:
    """A provider's word over the job's own, with `reason`: "cancelled" when nothing runs (never over
    a terminal word the job wrote), "resubmitted" over a failed run's terminal word before it runs
    again. With `only_if_written`, nothing when the job never wrote its status. True when written."""
    status = read_status(job_dir)
    if status is None and only_if_written:
        return False
    if phase == "cancelled" and status is not None and status.phase in TERMINAL_PHASES:
        return False
    status = status or StatusFile()
    status.phase, status.reason = phase, reason
    write_status(job_dir, status)
    return True


def read_heartbeat(job_dir: Path) -> HeartbeatFile | None:
    return _read(job_dir, HEARTBEAT, HeartbeatFile)


def write_heartbeat(job_dir: Path, beat: HeartbeatFile) -> None:
    _write(job_dir, HEARTBEAT, beat)


def read_runtime(job_dir: Path) -> RuntimeFile | None:
    """The job's runtime stamp; None before the job wrote it."""
    return _read(job_dir, RUNTIME, RuntimeFile)


def write_runtime(job_dir: Path, stamp: RuntimeFile) -> None:
    _write(job_dir, RUNTIME, stamp, indent=1)


def read_pid(job_dir: Path) -> PidFile | None:
    return _read(job_dir, PID_FILE, PidFile)


def write_pid(job_dir: Path, record: PidFile) -> None:
    _write(job_dir, PID_FILE, record)


def record_self(job_dir: Path) -> None:
    """The job's first act: name itself in pid.json, so a launcher killed before writing it still
    leaves a job folder that identifies the live process (pid, process group, host, starts)."""
    import socket

    try:
        info = read_pid(job_dir)
    except JobFileError:
        info = None  # rewritten below with this process
    if info is not None and info.pid == os.getpid():
        return  # the launcher was first
    starts = info.starts if info is not None else []
    record = PidFile(
        pid=os.getpid(), pgid=os.getpgid(0), host=socket.gethostname(), starts=[*starts, now_iso()]
    )
    try:
        write_pid(job_dir, record)
    except OSError:
        pass  # an unwritable job folder fails at the contract check that follows


def read_metrics(job_dir: Path) -> list[MetricLine]:
    """Every line of metrics.jsonl as its kind's model. A line that is not JSON was cut by a kill
    mid-write and is skipped; a JSON line that does not fit its kind is a JobFileError (file:line)."""
    path = Path(job_dir) / METRICS
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise JobFileError(f"{path}: unreadable ({exc})") from None
    out: list[MetricLine] = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        out.append(parse_line(doc, f"{path}:{number}"))
    return out


def append_metric(job_dir: Path, rec: MetricLine) -> None:
    line = json.dumps(dump_line(rec), allow_nan=True) + "\n"
    with open(Path(job_dir) / METRICS, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def latest_steps(records: list[MetricLine]) -> list[StepLine]:
    """Step records, the last written per step (a resumed run overwrites the lost tail)."""
    return _latest(r for r in records if isinstance(r, StepLine))


def dev_evals(records: list[MetricLine]) -> list[EvalLine]:
    """Scheduled dev evaluations, the last written per step."""
    return _latest(r for r in records if isinstance(r, EvalLine) and r.kind == "eval")


def checkpoints(records: list[MetricLine]) -> list[CheckpointLine]:
    return _latest(r for r in records if isinstance(r, CheckpointLine))


def _latest(records: Any) -> list[Any]:
    by_step = {r.step: r for r in records}
    return [by_step[s] for s in sorted(by_step)]


def trivial(records: list[MetricLine]) -> TrivialLine | None:
    return next((r for r in records if isinstance(r, TrivialLine)), None)


# The module each job kind runs as (`python -m MODULE JOB_DIR`): a retrieval contract's job, else the
# classification job. Providers launch `job_module(job_dir)` and recognise a live job by JOB_MODULES.
JOB_MODULE = "claimcheck.engine.training.job"
RETRIEVAL_JOB_MODULE = "claimcheck.engine.retrieval.job"
JOB_MODULES = (JOB_MODULE, RETRIEVAL_JOB_MODULE)


def job_module(job_dir: Path) -> str:
    """The module that runs the job whose frozen contract copy `job_dir` holds."""
    from claimcheck.engine.training.schema import effective

    return RETRIEVAL_JOB_MODULE if effective(read_contract(job_dir)).task_kind == "retrieval" else JOB_MODULE


def read_contract(job_dir: Path) -> dict[str, Any]:
    with open(Path(job_dir) / CONTRACT, "rb") as fh:
        return tomllib.load(fh)


def has_contract(job_dir: Path) -> bool:
    return (Path(job_dir) / CONTRACT).exists()


def launched(job_dir: Path) -> bool:
    """A provider launched the job or the job wrote its status (not only exported inputs)."""
    return any((Path(job_dir) / name).exists() for name in (PID_FILE, STATUS, RAY_RECORD))


@dataclass
class JobSpec:
    """What a job folder is written from: its identity, its effective contract and its rows."""

    effective: dict[str, Any]
    digest: str
    op_id: str
    attempt: int
    train: Any  # Polars frames (or RowTables) with row_id, text (or messages as a JSON string), target
    # and, under a weighted contract, WEIGHT_COLUMN
    dev: Any
    workspace: Path
    runtime: dict[str, Any] | None = None


def write_job_dir(job_dir: Path, spec: JobSpec | None = None, **fields: Any) -> dict[str, Any]:
    """Write contract.toml and the data files a job needs. Returns the contract document.

    Pass a JobSpec, or its fields as keywords. Re-writing an existing job directory with the same
    identity changes nothing.
    """
    from claimcheck.engine.data.rows import sha256_file
    from claimcheck.engine.training.rowfiles import write_rows

    spec = spec or JobSpec(**fields)
    job_dir = Path(job_dir)
    if (job_dir / CONTRACT).exists():
        return read_contract(job_dir)
    (job_dir / DATA).mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name, frame in (("train", spec.train), ("dev", spec.dev)):
        path = job_dir / (TRAIN_FILE if name == "train" else DEV_FILE)
        write_rows(path, frame)
        hashes[name] = sha256_file(path)
    doc = {
        "operation_id": spec.op_id,
        "attempt": spec.attempt,
        "digest": spec.digest,
        "written_at": now_iso(),
        "workspace": str(Path(spec.workspace).resolve()),
        "data": {
            "train": TRAIN_FILE,
            "dev": DEV_FILE,
            "train_sha256": hashes["train"],
            "dev_sha256": hashes["dev"],
            "train_rows": spec.train.height,
            "dev_rows": spec.dev.height,
        },
        "runtime": {
            "heartbeat_seconds": HEARTBEAT_SECONDS,
            "step_delay_seconds": 0.0,
            **(spec.runtime or {}),
        },
        "effective": spec.effective,
    }
    atomic_write_text(job_dir / CONTRACT, dump_toml(doc))
    return doc


def copy_inputs(job_dir: Path, out_dir: Path) -> None:
    """Copy contract.toml and data/ to another output location (the job reads only its own folder).

    The contract copy goes last, so its presence means "staged"; a different contract already
    there is refused: one identity, two contracts.
    """
    import shutil
    import tempfile

    from claimcheck.engine.data.rows import sha256_file

    src_contract, dst_contract = Path(job_dir) / CONTRACT, Path(out_dir) / CONTRACT
    if dst_contract.exists():
        if sha256_file(dst_contract) != sha256_file(src_contract):
            raise ValueError(
                f"{dst_contract} holds a different contract than {src_contract}: one identity, two contracts"
            )
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=out_dir))
    try:
        shutil.copytree(Path(job_dir) / DATA, tmp / DATA)
        shutil.copy2(src_contract, tmp / CONTRACT)
        shutil.rmtree(out_dir / DATA, ignore_errors=True)  # a staging cut short before the contract
        os.replace(tmp / DATA, out_dir / DATA)
        os.replace(tmp / CONTRACT, dst_contract)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def mirror_progress(src_dir: Path, dst_dir: Path) -> None:
    """Copy the progress files a job rewrites while it runs from where it writes them (a shared
    output location) to the session's job folder; nothing when they are the same folder."""
    src_dir, dst_dir = Path(src_dir), Path(dst_dir)
    if src_dir.resolve() == dst_dir.resolve():
        return
    for name in PROGRESS_FILES:
        _copy_if_changed(src_dir / name, dst_dir / name)


def _copy_if_changed(src: Path, dst: Path) -> None:
    try:
        data = src.read_bytes()
    except OSError:
        return
    try:
        if dst.read_bytes() == data:
            return
    except OSError:
        pass
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, dst)


def session_job_phases(jobs_root: Path) -> list[str]:
    """The phase each job under jobs/ last wrote ("unknown" when none, "unreadable")."""
    out = []
    for status_file in sorted(Path(jobs_root).glob(f"*/{STATUS}")):
        status, problem = read_status_checked(status_file.parent)
        out.append("unreadable" if status is None else (status.phase or "unknown"))
    return out


# ---------------------------------------------------------------- heartbeat


@dataclass
class Progress:
    """The two files a job rewrites while it runs: its status and its heartbeat (None: not written)."""

    status: StatusFile | None
    heartbeat: HeartbeatFile | None

    @property
    def phase(self) -> str:
        return self.status.phase if self.status is not None else ""

    @property
    def reason(self) -> str:
        return self.status.reason if self.status is not None else ""

    def heartbeat_age(self, now: float | None = None) -> float:
        """Seconds since the last heartbeat, -1 when none was written."""
        if self.heartbeat is None:
            return -1.0
        return (time.time() if now is None else now) - self.heartbeat.time

    def heartbeat_interval(self) -> float:
        if self.heartbeat is not None:
            return self.heartbeat.interval or HEARTBEAT_SECONDS
        return (self.status.heartbeat_seconds if self.status is not None else 0.0) or HEARTBEAT_SECONDS

    def max_beats_without_step(self) -> int:
        """The longest stretch without a step, from the heartbeat and the status the job last wrote."""
        beats = self.heartbeat.max_beats_without_step if self.heartbeat is not None else -1
        return max(beats, self.status.max_beats_without_step if self.status is not None else -1)

    def fields(self, now: float | None = None) -> dict[str, Any]:
        """The JobStatus fields every provider reads from the job's own files."""
        st = self.status or StatusFile()
        return {
            "step": st.step,
            "total_steps": st.total_steps,
            "heartbeat_age_s": round(self.heartbeat_age(now), 3),
            "heartbeats": self.heartbeat.beats if self.heartbeat is not None else 0,
            "resumed_from": list(st.resumed_from),
        }


def read_progress(job_dir: Path) -> Progress:
    return Progress(read_status(job_dir), read_heartbeat(job_dir))


def heartbeat_stale(age: float, interval: float) -> bool:
    return age > STALL_INTERVALS * interval


# ---------------------------------------------------------------- derived phase: local process


@dataclass
class Process:
    """What a provider knows about the job's process, apart from the job's own files."""

    alive: bool
    pid: int = 0
    launched: bool = False  # a launch was recorded (the local provider's pid file)


def local_phase(files: Progress, proc: Process, now: float | None = None) -> tuple[Phase, str]:
    """(phase, reason) of a job run as a local process: its own word unless the process says otherwise."""
    phase, reason = files.phase, files.reason
    age = files.heartbeat_age(now)
    interval = files.heartbeat_interval()
    if not proc.launched and files.status is None:
        return "not_found", reason
    if phase in TERMINAL_PHASES:
        return phase, reason
    if not proc.alive:
        # Started but the process is gone without writing a terminal status.
        if not proc.pid:
            return "not_found", reason
        return "lost", (
            f"process {proc.pid} is gone and the job never wrote a terminal status (last phase: {phase or 'none'})"
        )
    if not phase:
        return "launching", reason
    if heartbeat_stale(age, interval):
        return "stalled", f"process alive but last heartbeat {age:.1f}s ago (interval {interval:.1f}s)"
    return phase, reason


# ---------------------------------------------------------------- derived phase: Ray job


@dataclass
class RayWord:
    """What Ray said about the submission: its info (None = Ray has no such job), status, message."""

    info: dict[str, Any] | None
    status: str  # PENDING / RUNNING / STOPPED / SUCCEEDED / FAILED, "" when absent, UNKNOWN when not asked
    message: str = ""
    address: str = ""
    startup_grace_s: float = 180.0


def judge_done(out_dir: Path, files: Progress) -> tuple[Phase, str]:
    """A "done" counts only with metrics up to the last step and an artifact manifest."""
    phase, reason = files.phase, files.reason
    if phase != "done":
        return phase, reason
    total = files.status.total_steps if files.status is not None else 0
    steps = [r.step for r in latest_steps(read_metrics(out_dir))]
    if total <= 0 or not steps or max(steps) < total:
        return (
            "failed",
            f"status.json says done but metrics.jsonl reaches step {max(steps, default=0)} of {total}",
        )
    if not (Path(out_dir) / FINAL / MANIFEST).exists():
        return "failed", f"status.json says done but {FINAL}/{MANIFEST} is missing"
    return phase, reason


def ray_phase(out_dir: Path, files: Progress, ray: RayWord, now: float | None = None) -> tuple[Phase, str]:
    """(phase, reason) of a job run on Ray: the job's files first, Ray's word for the process."""
    phase = files.phase
    if phase in TERMINAL_PHASES:
        return judge_done(out_dir, files)
    if ray.status == "UNKNOWN":
        return "unconfirmed", f"Ray cannot be asked ({ray.message}); the job's last word: {phase or 'none'}"
    if ray.info is None:
        return ("lost" if phase else "not_found"), (
            f"Ray at {ray.address} has no job {Path(out_dir).name!r} and the job never wrote a terminal status "
            f"(last phase: {phase or 'none'})"
        )
    if ray.status == "PENDING":
        return "launching", f"Ray: PENDING {ray.message}".strip()
    if ray.status == "RUNNING":
        return _ray_running(files, ray, time.time() if now is None else now)
    # Ray says the process ended, and the job did not write a terminal status itself.
    last = phase or "none"
    if ray.status == "STOPPED":
        return "cancelled", f"Ray stopped the job at phase {last} before it wrote its own status"
    if ray.status == "FAILED":
        return "failed", f"Ray: FAILED: {ray.message} (the job's last phase: {last})"
    return "failed", f"Ray says {ray.status} but the job never wrote a terminal status (last phase: {last})"


def _ray_running(files: Progress, ray: RayWord, now: float) -> tuple[Phase, str]:
    age = files.heartbeat_age(now)
    interval = files.heartbeat_interval()
    started = float((ray.info or {}).get("start_time") or 0) / 1000.0
    if started and age >= 0 and age > now - started + 1.0:
        age = -1.0  # a heartbeat from before this Ray run (a resubmitted job) is not this run's
    if age < 0:
        waited = now - started if started else 0.0
        if waited > ray.startup_grace_s:
            return "unconfirmed", f"Ray says RUNNING for {waited:.0f}s but the job never wrote a heartbeat"
        return "launching", "Ray says RUNNING; waiting for the job's first heartbeat"
    if heartbeat_stale(age, interval):
        return "unconfirmed", (
            f"Ray says RUNNING but the job's last heartbeat is {age:.1f}s old (interval {interval:.1f}s)"
        )
    return files.phase or "launching", files.reason
