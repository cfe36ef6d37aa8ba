"""A session directory: create, open, lock, run a stage, freeze, revisions and stale propagation.

Layout (docs/evidence-format.md):
    session.toml, 01-claim.toml .. 07-artifact.toml, history/ (older revisions), data/, jobs/

Crash consistency: a record file is the commit point of a save. Before it is written, `.journal.json`
names the stage and the digests before and after; session.toml is updated next and the journal
removed last. Whoever takes the lock next replays a journal a killed claimcheck left: the record
holds the new digest -> session.toml is brought up to it ("completed"); the old one -> nothing took
effect ("rolled back"); anything else is not claimcheck's write and is left for replay to name. Each
repair is logged in history/repairs.toml, so replay can tell an interrupted write from a hand edit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from claimcheck.engine import stops
from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.evidence import (
    EvidenceError,
    Note,
    NoteTag,
    SessionMeta,
    StageEntry,
    StageRecord,
    StageState,
    atomic_write_text,
    crash_point,
    dump_toml,
    is_temp_name,
    load_record,
    load_session_meta,
    now_iso,
    read_toml,
    record_to_toml,
    sha256_bytes,
)
from claimcheck.engine.ledger.lock import SessionLock
from claimcheck.engine.ledger.pins import (
    LINK_FIX,
    LINK_PROBLEM,
    file_sha256,
    find_links,
    history_name,
    journal_preimage_problem,
    pins_for,
)
from claimcheck.engine.pipeline import core, registry
from claimcheck.engine.pipeline.context import StageContext

SESSION_FILE = "session.toml"
JOURNAL_FILE = ".journal.json"
REPAIR_LOG = "history/repairs.toml"
# Folders whose temp files only the session's lock holder writes (jobs/ belongs to running jobs).
TEMP_DIRS = (".", "history", "data")


class StageOrderError(ClaimcheckError):
    """A stage was run or frozen before the stages it rests on were frozen."""


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"


class Session:
    """One session directory. Open it with `Session.create` or `Session.open`."""

    def __init__(self, path: Path, meta: SessionMeta):
        self.path = path
        self.meta = meta
        self.lock = SessionLock(path, on_acquire=self.recover)
        self._parsed: dict[str, tuple[tuple[int, int, int], StageRecord]] = {}

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
    def open(cls, path: Path, *, allow_links: bool = False) -> Session:
        """Open a session folder. A symbolic link anywhere inside it is refused, naming the link;
        integrity readers pass `allow_links` and report each link as a row instead."""
        path = Path(path)
        if not path.is_dir():
            raise EvidenceError(path, "(directory)", "no such session directory", "give a path to a session")
        meta_file = path / SESSION_FILE
        if not meta_file.exists() and not meta_file.is_symlink():
            raise EvidenceError(
                meta_file, "(file)", "this directory holds no session.toml", "give a session directory"
            )
        links = [] if allow_links else find_links(path)
        if links:
            raise EvidenceError(path / links[0], "(file)", LINK_PROBLEM, LINK_FIX)
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
        """The stage's record as on disk now (a fresh copy; parsed again only when the file changed)."""
        p = self.record_path(name)
        try:
            st = p.stat()
        except FileNotFoundError:
            return None
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        hit = self._parsed.get(name)
        if hit is None or hit[0] != key:
            hit = self._parsed[name] = (key, load_record(p))
        return hit[1].model_copy(deep=True)

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
        dest = self.path / history_name(rec.stage, rec.provenance.revision)
        atomic_write_text(dest, record_to_toml(rec))
        return dest

    def save_record(self, rec: StageRecord) -> StageRecord:
        """Write a record. Replacing a frozen one archives it and starts a new revision."""
        old = self.record(rec.stage)
        rec = rec.model_copy(deep=True)
        if old is not None:
            if old.provenance.frozen:
                rec.provenance.revision = old.provenance.revision + 1
            else:
                rec.provenance.revision = old.provenance.revision
        rec = rec.sealed()
        self._commit(rec, archive=old if old is not None and old.provenance.frozen else None)
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
        """Validate inputs, run the stage on its frozen upstream (claimcheck.engine.pipeline.core.compute), save as draft."""
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
        self._commit(sealed)
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
        self.meta.meta_digest = self.meta.compute_meta_digest()
        self.meta.seal = self.meta.compute_seal()
        atomic_write_text(self.path / SESSION_FILE, self.meta.to_toml())

    def _sync_meta(self, name: str | None = None, archived: dict[str, str] | None = None) -> None:
        """Bring session.toml up to the records: the digest, revision and byte pin of `name` (every
        stage when None), the history revisions `archived` for it, and the state of every stage,
        which is derived from the chain. A stage whose entry has no byte pins yet (a session.toml
        written before them) gets them for the files that verify (pins.pins_for)."""
        states = self.states()
        upgrade = not self.meta.seal
        for spec in registry.STAGES:
            old = self.meta.stages.get(spec.name)
            if name is not None and spec.name != name and old is not None:
                entry = old.model_copy(update={"state": states[spec.name]})
            else:
                rec = self.record(spec.name)
                entry = StageEntry(
                    state=states[spec.name],
                    revision=rec.provenance.revision if rec else 0,
                    digest=rec.provenance.digest if rec else "",
                    file=spec.file_name,
                    file_sha256=file_sha256(self.record_path(spec.name)) if rec else "",
                    history={**(old.history if old else {}), **(archived or {})},
                )
            self.meta.stages[spec.name] = pins_for(self.path, spec.name, entry) if upgrade else entry
        self._write_meta()

    # ------------------------------------------------------------ crash consistency

    def _commit(self, rec: StageRecord, archive: StageRecord | None = None) -> None:
        """Save a sealed record: journal the intent with its pre-image (what session.toml records for
        the stage now), archive the frozen revision it replaces, write the record (the commit point),
        update session.toml, drop the journal. Nothing is written after a stop signal (engine.stops):
        what was measured since may carry the signal's exception as a library's error."""
        stops.refuse_after_stop()
        entry = self.meta.stages.get(rec.stage) or StageEntry()
        intent: dict[str, Any] = {
            "stage": rec.stage,
            "file": registry.get(rec.stage).file_name,
            "old": entry.digest,
            "old_sha256": entry.file_sha256,
            "old_revision": entry.revision,
            "new": rec.provenance.digest,
            "at": now_iso(),
            "pid": os.getpid(),
        }
        archived: dict[str, str] = {}
        if archive is not None:
            name = Path(history_name(archive.stage, archive.provenance.revision)).name
            archived[name] = sha256_bytes(record_to_toml(archive).encode("utf-8"))
            intent["archive"] = archived
        atomic_write_text(self.path / JOURNAL_FILE, json.dumps(intent, sort_keys=True))
        if archive is not None:
            self._archive(archive)
        atomic_write_text(self.record_path(rec.stage), record_to_toml(rec))
        self._sync_meta(rec.stage, archived)
        (self.path / JOURNAL_FILE).unlink(missing_ok=True)
        crash_point()

    def recover(self) -> list[str]:
        """Finish what a killed claimcheck left, under the lock: replay its journal, remove its temp
        files. Returns what was done, one line each. A journal whose pre-image is not what session.toml
        records (not claimcheck's interrupted write) is refused: the lock is released and the error
        names the journal and the record."""
        try:
            done = self._replay_journal()
        except EvidenceError:
            self.lock.release()
            raise
        removed = remove_temp_files(self.path)
        if removed:
            done.append(f"removed {len(removed)} temp file(s) left by an interrupted write")
        return done

    def _replay_journal(self) -> list[str]:
        journal = read_journal(self.path)
        if journal is None:
            return []
        name = journal.get("stage")
        outcome = "left"  # the record is neither what was there nor what was being written
        if name in registry.STAGE_NAMES:
            outcome = self._journal_outcome(name, journal)
        if outcome == "completed":
            archived = journal.get("archive")
            self._sync_meta(name, archived if isinstance(archived, dict) else None)
        if outcome != "left":
            self._log_repair({**journal, "outcome": outcome, "repaired_at": now_iso()})
        (self.path / JOURNAL_FILE).unlink(missing_ok=True)
        crash_point()
        if outcome == "left":
            return [
                f"an interrupted write of '{name}' could not be matched to its record; left for replay to name"
            ]
        return [f"an interrupted write of '{name}' was {outcome.replace('_', ' ')}"]

    def _journal_outcome(self, name: str, journal: dict[str, Any]) -> str:
        """completed / rolled_back / left for the journaled stage; raises EvidenceError when the record
        holds the journal's `new` but the journal's pre-image is not what the write started from."""
        try:
            rec = self.record(name)
        except EvidenceError:
            rec = None
        digest = (
            rec.provenance.digest
            if rec is not None and rec.compute_digest() == rec.provenance.digest
            else None
        )
        if rec is not None and digest == journal.get("new"):
            problem = journal_preimage_problem(self.path, self.meta.stages.get(name), rec, journal)
            if problem:
                raise EvidenceError(
                    self.path / JOURNAL_FILE,
                    "old",
                    f"names {rec.stage}'s record {self.record_path(name).name} as an interrupted write, "
                    f"but {problem}: it is not claimcheck's write, so it is not completed",
                    f"run `claimcheck --replay` on the session to see what changed; remove {JOURNAL_FILE} "
                    "only once you know (the record then replays as tampered)",
                )
            return "completed"
        if (rec is None and not journal.get("old")) or (digest is not None and digest == journal.get("old")):
            return "rolled_back"
        return "left"

    def _log_repair(self, entry: dict[str, Any]) -> None:
        repairs = read_repairs(self.path)
        key = (entry.get("stage"), entry.get("at"), entry.get("new"))
        if any((r.get("stage"), r.get("at"), r.get("new")) == key for r in repairs):
            return
        clean = {k: v for k, v in entry.items() if isinstance(v, str | int)}
        atomic_write_text(self.path / REPAIR_LOG, dump_toml({"repairs": [*repairs, clean]}))


def read_journal(session_dir: Path) -> dict[str, Any] | None:
    """The write a claimcheck had started and not finished: None when there is none, {} when unreadable."""
    try:
        doc = json.loads((Path(session_dir) / JOURNAL_FILE).read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, OSError, UnicodeDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def read_repairs(session_dir: Path) -> list[dict[str, Any]]:
    """Interrupted writes finished or undone on reopen (history/repairs.toml)."""
    path = Path(session_dir) / REPAIR_LOG
    if not path.exists():
        return []
    try:
        repairs = read_toml(path).get("repairs", [])
    except EvidenceError:
        return []
    return [r for r in repairs if isinstance(r, dict)] if isinstance(repairs, list) else []


def remove_temp_files(session_dir: Path) -> list[Path]:
    """Temp files of interrupted atomic writes in the folders only the lock holder writes."""
    removed = []
    for sub in TEMP_DIRS:
        top = Path(session_dir) / sub
        if not top.is_dir():
            continue
        walk = os.walk(top) if sub != "." else [(str(top), [], os.listdir(top))]
        for dirpath, _dirs, files in walk:
            for fn in files:
                if is_temp_name(fn):
                    p = Path(dirpath) / fn
                    try:
                        p.unlink()
                    except OSError:
                        continue
                    removed.append(p)
    return removed


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
