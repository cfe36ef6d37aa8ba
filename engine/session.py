"""A session directory: create, open, lock, run a stage, freeze, revisions and stale propagation.

Layout (docs/evidence-format.md):
    session.toml, 01-claim.toml .. 07-artifact.toml, history/ (older revisions), data/, jobs/
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from engine import core, registry
from engine.context import StageContext
from engine.errors import ClaimcheckError
from engine.evidence import (
    EvidenceError,
    Note,
    NoteTag,
    SessionMeta,
    StageEntry,
    StageRecord,
    StageState,
    atomic_write_text,
    load_record,
    load_session_meta,
    now_iso,
    record_to_toml,
    write_model,
)

SESSION_FILE = "session.toml"
LOCK_FILE = ".lock"


class SessionLocked(ClaimcheckError):
    def __init__(self, path: Path, holder: dict[str, Any], stale: bool):
        self.path, self.holder, self.stale = path, holder, stale
        who = f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('since')}"
        hint = (
            f"that process is gone: take the lock over (claimcheck offers this; or delete {path / LOCK_FILE})"
            if stale
            else "close the other claimcheck first, or open a copy of the session"
        )
        super().__init__(f"session {path} is open in another process ({who}); {hint}")


class StageOrderError(ClaimcheckError):
    """A stage was run or frozen before the stages it rests on were frozen."""


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class SessionLock:
    path: Path

    @property
    def file(self) -> Path:
        return self.path / LOCK_FILE

    def holder(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.file.read_text())
        except (FileNotFoundError, json.JSONDecodeError, OSError):
            return None

    def holder_is_dead(self, holder: dict[str, Any]) -> bool:
        return holder.get("host") == socket.gethostname() and not _pid_alive(int(holder.get("pid", -1)))

    def acquire(self, take_over_stale: bool = False) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}
        for _ in range(2):
            try:
                fd = os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self.holder() or {"pid": "?", "host": "?", "since": "?"}
                if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
                    return
                stale = self.holder_is_dead(holder)
                if stale and take_over_stale:
                    self.file.unlink(missing_ok=True)
                    continue
                raise SessionLocked(self.path, holder, stale) from None
            with os.fdopen(fd, "w") as fh:
                json.dump(info, fh)
            return

    def release(self) -> None:
        holder = self.holder()
        if holder and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
            self.file.unlink(missing_ok=True)


class Session:
    """One session directory. Open it with `Session.create` or `Session.open`."""

    def __init__(self, path: Path, meta: SessionMeta):
        self.path = path
        self.meta = meta
        self.lock = SessionLock(path)

    # ------------------------------------------------------------ create / open

    @classmethod
    def create(
        cls,
        path: Path,
        *,
        title: str = "",
        recipe: str = "",
        workspace: Path | None = None,
        session_id: str | None = None,
    ) -> Session:
        path = Path(path)
        if (path / SESSION_FILE).exists():
            raise FileExistsError(f"{path} already holds a session; open it instead")
        path.mkdir(parents=True, exist_ok=True)
        ws = Path(workspace or Path.cwd()).resolve()
        meta = SessionMeta(
            id=session_id or path.name,
            title=title,
            recipe=recipe,
            workspace=os.path.relpath(ws, path.resolve()),
            stages={s.name: StageEntry(file=s.file_name) for s in registry.STAGES},
        )
        session = cls(path, meta)
        session._write_meta()
        return session

    @classmethod
    def open(cls, path: Path) -> Session:
        path = Path(path)
        if not path.is_dir():
            raise EvidenceError(path, "(directory)", "no such session directory", "give a path to a session")
        meta_file = path / SESSION_FILE
        if not meta_file.exists():
            raise EvidenceError(
                meta_file, "(file)", "this directory holds no session.toml", "give a session directory"
            )
        return cls(path, load_session_meta(meta_file))

    @property
    def workspace(self) -> Path:
        return (self.path / self.meta.workspace).resolve()

    def context(self, stage: str = "", **kwargs: Any) -> StageContext:
        return StageContext(session_dir=self.path, workspace=self.workspace, stage=stage, **kwargs)

    # ------------------------------------------------------------ records

    def record_path(self, name: str) -> Path:
        return self.path / registry.get(name).file_name

    def record(self, name: str) -> StageRecord | None:
        p = self.record_path(name)
        return load_record(p) if p.exists() else None

    def records(self) -> dict[str, StageRecord]:
        return {n: r for n in registry.STAGE_NAMES if (r := self.record(n)) is not None}

    def states(self) -> dict[str, StageState]:
        """State of every stage, derived from the records and their digest chain."""
        recs = self.records()
        out: dict[str, StageState] = {}
        for name in registry.STAGE_NAMES:
            rec = recs.get(name)
            if rec is None:
                out[name] = "not_run"
                continue
            stale = False
            for up in registry.upstream_names(name):
                up_rec = recs.get(up)
                recorded = rec.provenance.upstream.get(up)
                if out[up] == "stale" or up_rec is None or recorded != up_rec.provenance.digest:
                    stale = True
                    break
            out[name] = "stale" if stale else ("frozen" if rec.provenance.frozen else "draft")
        return out

    def state(self, name: str) -> StageState:
        return self.states()[name]

    def would_stale(self, name: str) -> list[str]:
        """Later stages that have records and would become stale if `name` changed."""
        recs = self.records()
        return [n for n in registry.downstream_names(name) if n in recs]

    def _archive(self, rec: StageRecord) -> Path:
        spec = registry.get(rec.stage)
        dest = self.path / "history" / f"{spec.index:02d}-{spec.name}.r{rec.provenance.revision}.toml"
        atomic_write_text(dest, record_to_toml(rec))
        return dest

    def save_record(self, rec: StageRecord) -> StageRecord:
        """Write a record. Replacing a frozen one archives it and starts a new revision."""
        old = self.record(rec.stage)
        rec = rec.model_copy(deep=True)
        if old is not None:
            if old.provenance.frozen:
                self._archive(old)
                rec.provenance.revision = old.provenance.revision + 1
            else:
                rec.provenance.revision = old.provenance.revision
        rec = rec.sealed()
        atomic_write_text(self.record_path(rec.stage), record_to_toml(rec))
        self._sync_meta()
        return rec

    def upstream_records(self, name: str, require_frozen: bool = True) -> dict[str, StageRecord]:
        recs = self.records()
        states = self.states()
        out = {}
        for up in registry.upstream_names(name):
            if up not in recs:
                raise StageOrderError(f"stage '{name}' rests on '{up}', which has not been run yet")
            if require_frozen and states[up] != "frozen":
                raise StageOrderError(
                    f"stage '{name}' rests on '{up}', which is {states[up]}: freeze '{up}' first"
                )
            out[up] = recs[up]
        return out

    def validate_inputs(self, name: str, inputs: dict[str, Any]) -> BaseModel:
        """The stage's Inputs model; raises StageInputError (core.InvalidInputs) naming the field."""
        return core.validate(name, inputs)

    def run_stage(
        self, name: str, inputs: dict[str, Any], ctx: StageContext | None = None, save: bool = True
    ) -> StageRecord:
        """Validate inputs, run the stage on its frozen upstream (engine.core.compute), save as draft."""
        model = core.validate(name, inputs)
        upstream = self.upstream_records(name)
        rec = core.compute(name, model, upstream, ctx or self.context(name))
        old = self.record(name)
        if old is not None:
            # The person's notes outlive a re-run; notes the stage itself writes are regenerated, not stacked.
            fresh = {(n.tag, n.text) for n in rec.notes}
            rec.notes = [*(n for n in old.notes if (n.tag, n.text) not in fresh), *rec.notes]
        return self.save_record(rec) if save else rec.sealed()

    def freeze(self, name: str) -> StageRecord:
        rec = self.record(name)
        if rec is None:
            raise StageOrderError(f"stage '{name}' has no record to freeze: run it first")
        state = self.state(name)
        if state == "stale":
            raise StageOrderError(f"stage '{name}' is stale: re-run it on its current upstream, then freeze")
        if state == "frozen":
            return rec
        self.upstream_records(name)  # raises unless everything upstream is frozen
        rec.provenance.frozen = True
        rec.provenance.frozen_at = now_iso()
        sealed = rec.sealed()
        atomic_write_text(self.record_path(name), record_to_toml(sealed))
        self._sync_meta()
        return sealed

    def add_note(self, name: str, tag: NoteTag, text: str) -> StageRecord:
        """Notes are evidence too: adding one to a frozen stage makes a new draft revision."""
        rec = self.record(name)
        if rec is None:
            raise StageOrderError(f"stage '{name}' has no record yet: run it before adding notes")
        rec.notes.append(Note(tag=tag, text=text))
        rec.provenance.frozen = False
        rec.provenance.frozen_at = ""
        return self.save_record(rec)

    # ------------------------------------------------------------ meta

    def _write_meta(self) -> None:
        write_model(self.path / SESSION_FILE, self.meta)

    def _sync_meta(self) -> None:
        states = self.states()
        for spec in registry.STAGES:
            rec = self.record(spec.name)
            self.meta.stages[spec.name] = StageEntry(
                state=states[spec.name],
                revision=rec.provenance.revision if rec else 0,
                digest=rec.provenance.digest if rec else "",
                file=spec.file_name,
            )
        self._write_meta()


def find_sessions(root: Path, exclude: Path | None = None, max_depth: int = 3) -> list[Path]:
    """Session directories (holding session.toml) below root, sorted by path."""
    found: list[Path] = []
    root = Path(root)
    if not root.is_dir():
        return found
    skip = {".git", ".venv", "node_modules", "__pycache__", "history", "data", "jobs"}
    base_depth = len(root.resolve().parts)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if len(here.resolve().parts) - base_depth >= max_depth:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if d not in skip and not d.startswith("."))
        if SESSION_FILE in filenames:
            if exclude is None or here.resolve() != Path(exclude).resolve():
                found.append(here)
            dirnames[:] = []
    return sorted(found)
