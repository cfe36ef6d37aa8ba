"""Drive a session headless from an answers file: the stage inputs a person would enter, as TOML.

    [session]               title, recipe, id, workspace, stop_on_fail   (all optional)
    [claim] ... [artifact]  one table per stage: that stage's Inputs fields
    [[notes]]               stage, tag (fact / suspected_cause / untested_remedy / limitation), text

Stages run in order, each on the frozen records before it, and each is frozen right after it ran:
evidence of a failure is still evidence. The result has replay's exit codes: 0 when every stage
answered was recorded and frozen with no failing check, 1 when a check failed (or the run stopped
early), 2 for an unusable answers file. The format is documented in docs/answers-format.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import stages as registry
from engine.context import StageInputError
from engine.evidence import EvidenceError, NoteTag, read_toml
from engine.replay import Progress, ReplayResult, Row, _progress_adapter
from engine.session import Session

FIX = "see docs/answers-format.md"


class SessionAnswers(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = ""
    recipe: str = ""
    # Session id; default: the session folder's name.
    id: str = ""
    # Folder that relative data paths resolve against, relative to the answers file's folder.
    workspace: str = ""
    # Stop after the first stage with a failing check (later stages stay unrun).
    stop_on_fail: bool = False


class NoteAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    stage: str
    tag: NoteTag
    text: str = Field(min_length=1)


class Answers(BaseModel):
    """A validated answers file: session options, stage inputs in stage order, notes."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    path: Path
    session: SessionAnswers
    stages: dict[str, dict[str, Any]]
    notes: list[NoteAnswer]
    # Stages answered whose module is not built in this claimcheck: skipped, with later ones.
    unbuilt: list[str] = Field(default_factory=list)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _invalid(path: Path, prefix: str, exc: ValidationError) -> EvidenceError:
    err = exc.errors()[0]
    where = ".".join(p for p in (prefix, _loc(tuple(err["loc"]))) if p) or prefix
    if err["type"] == "extra_forbidden":
        return EvidenceError(path, where, "is not a known field", f"remove it or check its spelling ({FIX})")
    more = f" (and {len(exc.errors()) - 1} more problems)" if len(exc.errors()) > 1 else ""
    return EvidenceError(path, where, f"{err['msg']}{more}", f"correct the value ({FIX})")


def load_answers(answers_path: Path) -> Answers:
    """Read and validate the whole file before anything runs: every problem names the file and field."""
    path = Path(answers_path)
    data = read_toml(path)
    known = {"session", "notes", *registry.STAGE_NAMES}
    for key in data:
        if key not in known:
            raise EvidenceError(
                path,
                key,
                "is not a stage or a known table",
                f"use [session], [[notes]] or one of: {', '.join(registry.STAGE_NAMES)} ({FIX})",
            )
    try:
        session = SessionAnswers.model_validate(data.get("session", {}))
    except ValidationError as exc:
        raise _invalid(path, "session", exc) from None
    stages: dict[str, dict[str, Any]] = {}
    unbuilt: list[str] = []
    gap = ""
    for spec in registry.STAGES:
        table = data.get(spec.name)
        if table is None:
            gap = gap or spec.name
            continue
        if not isinstance(table, dict):
            raise EvidenceError(path, spec.name, "must be a table", f"write it as [{spec.name}] ({FIX})")
        if gap:
            raise EvidenceError(
                path,
                spec.name,
                f"answers '{spec.name}' but not the earlier stage '{gap}', which it rests on",
                f"add a [{gap}] table, or remove [{spec.name}]",
            )
        module = spec.module()
        if module is None:
            unbuilt.append(spec.name)
        else:
            try:
                module.Inputs.model_validate(table)
            except ValidationError as exc:
                raise _invalid(path, spec.name, exc) from None
        stages[spec.name] = table
    raw_notes = data.get("notes", [])
    if not isinstance(raw_notes, list):
        raise EvidenceError(
            path, "notes", "must be an array of tables", f"write each note as [[notes]] ({FIX})"
        )
    notes = []
    for i, raw in enumerate(raw_notes):
        try:
            note = NoteAnswer.model_validate(raw)
        except ValidationError as exc:
            raise _invalid(path, f"notes[{i}]", exc) from None
        if note.stage not in stages:
            raise EvidenceError(
                path,
                f"notes[{i}].stage",
                f"'{note.stage}' has no answers table",
                "note only stages the file answers",
            )
        notes.append(note)
    return Answers(path=path, session=session, stages=stages, notes=notes, unbuilt=unbuilt)


def _workspace(answers: Answers, override: Path | None) -> Path:
    if override is not None:
        return Path(override).resolve()
    if answers.session.workspace:
        return (answers.path.parent / answers.session.workspace).resolve()
    return Path.cwd().resolve()


def run_answers(
    answers_path: Path,
    session_dir: Path,
    *,
    workspace: Path | None = None,
    progress: Progress | None = None,
    stop_on_fail: bool | None = None,
) -> ReplayResult:
    """Create a session from an answers file, run and freeze every answered stage in order.

    workspace: explicit argument, else [session].workspace (relative to the answers file), else the
    current folder. Raises EvidenceError (bad answers file, before anything is created),
    FileExistsError (the session exists) or StageInputError (a stage refused its inputs, e.g. a
    missing data file; the stages before it stay frozen).
    """
    t_start = time.perf_counter()
    say = progress or (lambda _m: None)
    answers = load_answers(answers_path)
    stop = answers.session.stop_on_fail if stop_on_fail is None else stop_on_fail
    session_dir = Path(session_dir)
    session = Session.create(
        session_dir,
        title=answers.session.title,
        recipe=answers.session.recipe,
        workspace=_workspace(answers, workspace),
        session_id=answers.session.id or None,
    )
    result = ReplayResult(session_dir, mode="answers")
    per_stage: dict[str, float] = {}
    session.lock.acquire()
    try:
        stopped = ""
        for name, table in answers.stages.items():
            if stopped:
                result.rows.append(Row(name, "(stage)", "not_run", "", stopped))
                continue
            if name in answers.unbuilt:
                stopped = f"not run: '{name}' is not built in this claimcheck"
                result.rows.append(
                    Row(
                        name,
                        "(stage)",
                        "not_run",
                        "",
                        "stage not built in this claimcheck; answers for it unused",
                    )
                )
                continue
            say(f"{name}: running")
            ctx = session.context(name, progress=_progress_adapter(say, name))
            t0 = time.perf_counter()
            try:
                session.run_stage(name, table, ctx=ctx)
            except StageInputError as exc:
                raise StageInputError(f"{answers.path}: [{name}]: {exc}") from None
            per_stage[name] = time.perf_counter() - t0
            for note in (n for n in answers.notes if n.stage == name):
                session.add_note(name, note.tag, note.text)
            rec = session.freeze(name)
            say(f"{name}: frozen ({len(rec.checks)} checks, worst status {rec.worst_status() or '-'})")
            result.rows += [
                Row(name, c.id, "failed" if c.status == "fail" else "recorded", c.status, c.summary)
                for c in rec.checks
            ]
            if stop and rec.worst_status() == "fail":
                stopped = f"not run: stopped after '{name}' failed a check (stop_on_fail)"
    finally:
        session.lock.release()
    total = time.perf_counter() - t_start
    compute = sum(per_stage.values())
    result.timing = {
        "total_s": round(total, 4),
        "compute_s": round(compute, 4),
        "overhead_s": round(total - compute, 4),
        "ratio": round(total / compute, 3) if compute > 0 else None,
        "per_stage_s": {k: round(v, 4) for k, v in per_stage.items()},
    }
    return result
