"""Evidence records: pydantic models of a session and its stage records, TOML read/write.

Records are read with tomllib and written with tomlkit. Every write is atomic (temp file,
fsync, rename). Every read error names the file, the field and the fix.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Literal

import tomlkit
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from claimcheck.engine import __version__
from claimcheck.engine.errors import ClaimcheckError, validation_problem
from claimcheck.engine.shapes import Shape, ShapeError, validate_measured

# 2: the measured values of every check id with a shape (engine/shapes) conform to it. Version-1
# records have the same layout and are read by the same shapes; nothing is rewritten.
SCHEMA_VERSION = 2

Status = Literal["pass", "warn", "fail", "info", "not_run"]
# Where a status came from: an engine measurement, a person's recorded decision, or nothing yet.
Basis = Literal["measured", "decided", "not_run"]
NoteTag = Literal["fact", "suspected_cause", "untested_remedy", "limitation"]
StageState = Literal["not_run", "draft", "frozen", "stale"]

STATUS_ORDER: dict[str, int] = {"fail": 0, "warn": 1, "not_run": 2, "info": 3, "pass": 4}


class EvidenceError(ClaimcheckError):
    """A record that cannot be used: says which file, which field and what to do."""

    def __init__(self, file: Path | str, field: str, problem: str, fix: str):
        self.file, self.field, self.problem, self.fix = str(file), field, problem, fix
        super().__init__(f"{file}: field '{field}': {problem}. Fix: {fix}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_toml_value(value: Any, path: str = "") -> Any:
    """TOML has no null; reject it (and other non-TOML types) where the record is built."""
    if value is None:
        raise ValueError(f"{path or 'value'} is None; TOML has no null — omit the key or use a sentinel")
    if isinstance(value, bool | int | str | dt.datetime | dt.date):
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, list | tuple):
        return [_check_toml_value(v, f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{path}: key {k!r} is not a string")
            out[k] = _check_toml_value(v, f"{path}.{k}" if path else k)
        return out
    # numpy scalars and the like: convert through their Python value
    if hasattr(value, "item"):
        return _check_toml_value(value.item(), path)
    raise ValueError(f"{path or 'value'} has type {type(value).__name__}, which TOML cannot hold")


class Check(Strict):
    id: str = Field(pattern=r"^[a-z_]+\.[a-z0-9_.]+$")
    status: Status
    summary: str
    basis: Basis = "measured"
    # Which part of the data the figures cover: "full", or "sample: 1000 of 20000 rows".
    coverage: str = "full"
    measured: dict[str, Any] = Field(default_factory=dict)
    # Per measured key: absolute tolerance replay allows (stochastic values only).
    tolerance: dict[str, float] = Field(default_factory=dict)
    # "compare": replay must reproduce it. "observation": a point-in-time look at the world
    # outside the session (other sessions, a running job); replay reports it, never fails on it.
    replay: Literal["compare", "observation"] = "compare"
    why: str = ""
    playbook: str = ""

    @field_validator("measured", mode="before")
    @classmethod
    def _toml_only(cls, v: Any) -> dict[str, Any]:
        if isinstance(v, Shape):
            v = v.dump()
        return _check_toml_value(v, "measured")

    @model_validator(mode="after")
    def _shaped(self) -> Check:
        try:
            validate_measured(self.id, self.measured)
        except ShapeError as exc:
            raise ValueError(str(exc)) from None
        return self


class Note(Strict):
    tag: NoteTag
    text: str
    at: str = Field(default_factory=lambda: now_iso())


class Provenance(Strict):
    schema_version: int = SCHEMA_VERSION
    engine_version: str = __version__
    computed_at: str = Field(default_factory=lambda: now_iso())
    revision: int = 1
    frozen: bool = False
    frozen_at: str = ""
    # Digest of each upstream stage record this one was computed from.
    upstream: dict[str, str] = Field(default_factory=dict)
    digest: str = ""


class StageRecord(Strict):
    stage: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    checks: list[Check] = Field(default_factory=list)
    notes: list[Note] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)

    @field_validator("inputs")
    @classmethod
    def _toml_only(cls, v: dict[str, Any]) -> dict[str, Any]:
        return _check_toml_value(v, "inputs")

    def check(self, check_id: str) -> Check | None:
        return next((c for c in self.checks if c.id == check_id), None)

    def worst_status(self) -> Status | None:
        if not self.checks:
            return None
        return min((c.status for c in self.checks), key=lambda s: STATUS_ORDER[s])

    def compute_digest(self) -> str:
        return digest_of(self.model_dump(mode="json", exclude={"provenance": {"digest"}}))

    def sealed(self) -> StageRecord:
        """A copy whose provenance.digest matches its content."""
        rec = self.model_copy(deep=True)
        rec.provenance.digest = rec.compute_digest()
        return rec


class StageEntry(Strict):
    state: StageState = "not_run"
    revision: int = 0
    digest: str = ""
    file: str = ""
    # sha256 (hex) of the record file's exact bytes, and of each revision archived in history/
    # (file name -> sha256): the byte pins a sealed session.toml holds (docs/evidence-format.md).
    file_sha256: str = ""
    history: dict[str, str] = Field(default_factory=dict)


class SessionMeta(Strict):
    schema_version: int = SCHEMA_VERSION
    id: str
    title: str = ""
    tool_version: str = __version__
    recipe: str = ""
    # Relative paths in stage inputs resolve against this folder, relative to the session dir.
    workspace: str = "../.."
    created_at: str = Field(default_factory=lambda: now_iso())
    stages: dict[str, StageEntry] = Field(default_factory=dict)
    # Digest of the fields above that are evidence (META_FIELDS), set on every write since
    # claimcheck pinned them; "" in older sessions, which replay reads as "not pinned" (one-way rule).
    meta_digest: str = ""
    # Digest of everything else in session.toml (schema_version, tool_version, meta_digest, the stage
    # table with its byte pins), set on every write; "" in sessions written before it existed.
    seal: str = ""

    def compute_meta_digest(self) -> str:
        return digest_of({k: getattr(self, k) for k in META_FIELDS})

    def document(self) -> dict[str, Any]:
        """session.toml's content as written: fields a claimcheck added since are left out while empty,
        so a session.toml an earlier claimcheck wrote reads back to the same bytes."""
        doc = self.model_dump(mode="python")
        for key in ("meta_digest", "seal"):
            if not doc[key]:
                doc.pop(key)
        for entry in doc["stages"].values():
            for key in ("file_sha256", "history"):
                if not entry[key]:
                    entry.pop(key)
        return doc

    def compute_seal(self) -> str:
        return digest_of({k: v for k, v in self.document().items() if k != "seal"})

    def to_toml(self) -> str:
        return dump_toml(self.document())


# The session fields that are evidence: they name the session and say where its data paths resolve.
META_FIELDS = ("id", "title", "recipe", "workspace", "created_at")


# ---------------------------------------------------------------- canonical digest


def _canonical(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)  # repr round-trips exactly; json's float formatting is not ours to trust
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value


def digest_of(value: Any) -> str:
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()


# ---------------------------------------------------------------- atomic IO


# Test hook for the crash test: with CLAIMCHECK_CRASH_AFTER_WRITES=N the process ends itself
# (os._exit, no cleanup, as a SIGKILL would) at the Nth write or rename point. Unset: nothing happens.
CRASH_ENV = "CLAIMCHECK_CRASH_AFTER_WRITES"
CRASH_EXIT = 137
_points_passed = 0


def crash_point() -> None:
    global _points_passed
    limit = os.environ.get(CRASH_ENV)
    if not limit:
        return
    _points_passed += 1
    if _points_passed >= int(limit):
        os._exit(CRASH_EXIT)


TEMP_SUFFIX = ".tmp"

# What `claimcheck report` writes into a session folder for people to read. They are outputs, never
# evidence: nothing reads them back, and replay does not count them as files a stage wrote (a report
# written while a replay runs is not a difference).
REPORT_MD, REPORT_HTML, MODEL_INDEX = "report.md", "report.html", "model-index.yaml"
REPORT_FILES = (REPORT_MD, REPORT_HTML, MODEL_INDEX)


def _umask() -> int:
    """The process umask, read without changing it where Linux says it (/proc), else set back at once."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# What a plainly created file would get (0666 less the user's umask): mkstemp makes its temp files
# 0600, so every file written through a temp name is given this mode before it is renamed into place.
FILE_MODE = 0o666 & ~_umask()


def temp_beside(path: Path) -> tuple[int, str]:
    """An open temp file next to `path` (same folder, so the rename is atomic), with FILE_MODE."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    os.fchmod(fd, FILE_MODE)
    return fd, tmp


def is_temp_name(name: str) -> bool:
    """A temp file atomic_write_bytes makes (".NAME.RANDOM.tmp"): a leftover once its writer is gone."""
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = temp_beside(path)
    try:
        crash_point()
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        crash_point()
        os.replace(tmp, path)
        crash_point()
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def sha256_bytes(data: bytes) -> str:
    """The byte pin of a record or session file: sha256 of its exact bytes, hex."""
    return hashlib.sha256(data).hexdigest()


def _is_table(value: Any) -> bool:
    return isinstance(value, dict) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
    )


def _toml_order(data: dict[str, Any]) -> list[tuple[str, Any]]:
    """Plain values first, then tables and arrays of tables: the order a TOML file reads back in,
    so writing a record and writing it again after reading it give the same bytes."""
    return sorted(data.items(), key=lambda kv: _is_table(kv[1]))


def _to_toml_doc(data: dict[str, Any]) -> tomlkit.TOMLDocument:
    doc = tomlkit.document()
    for key, value in _toml_order(data):
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            aot = tomlkit.aot()
            for item in value:
                aot.append(_table(item))
            doc.add(key, aot)
        elif isinstance(value, dict):
            doc.add(key, _table(value))
        else:
            doc.add(key, value)
    return doc


def _table(data: dict[str, Any]) -> tomlkit.items.Table:
    tbl = tomlkit.table()
    for key, value in _toml_order(data):
        if isinstance(value, dict):
            tbl.add(key, _table(value))
        else:
            tbl.add(key, value)
    return tbl


def dump_toml(data: dict[str, Any]) -> str:
    return tomlkit.dumps(_to_toml_doc(data))


def write_model(path: Path, model: BaseModel) -> None:
    atomic_write_text(path, dump_toml(model.model_dump(mode="python", exclude_defaults=False)))


# ---------------------------------------------------------------- reading with clear errors


def read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise EvidenceError(path, "(file)", "the file does not exist", "check the session path") from None
    except OSError as exc:
        raise EvidenceError(path, "(file)", f"cannot be read ({exc.strerror})", "check permissions") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvidenceError(
            path, "(file)", f"byte {exc.start} is not UTF-8", "re-save the file as UTF-8 text"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EvidenceError(
            path, "(syntax)", f"not valid TOML: {exc}", "correct the TOML syntax at that line"
        ) from None


def _validation_to_error(path: Path, exc: ValidationError) -> EvidenceError:
    p = validation_problem(exc)
    return EvidenceError(path, p.field or "(top level)", p.problem, f"{p.fix} (see docs/evidence-format.md)")


def _check_version(path: Path, data: dict[str, Any], where: str) -> None:
    container = data.get("provenance", {}) if where == "provenance" else data
    if not isinstance(container, dict):
        return
    version = container.get("schema_version", SCHEMA_VERSION)
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        field = "provenance.schema_version" if where == "provenance" else "schema_version"
        raise EvidenceError(
            path,
            field,
            f"schema version {version!r} is not one this claimcheck ({__version__}) reads (1..{SCHEMA_VERSION})",
            "upgrade claimcheck, or restore the file written by the version that made it",
        )


def load_record(path: Path) -> StageRecord:
    data = read_toml(path)
    _check_version(path, data, "provenance")
    try:
        return StageRecord.model_validate(data)
    except ValidationError as exc:
        raise _validation_to_error(path, exc) from None


def load_session_meta(path: Path) -> SessionMeta:
    data = read_toml(path)
    _check_version(path, data, "top")
    try:
        return SessionMeta.model_validate(data)
    except ValidationError as exc:
        raise _validation_to_error(path, exc) from None


def record_to_toml(record: StageRecord) -> str:
    return dump_toml(record.model_dump(mode="python"))
