"""Drive a session headless from an answers file: the stage inputs a person would enter, as TOML.

    [session]               title, recipe, id, workspace, stop_on_fail   (all optional)
    [claim] ... [artifact]  one table per stage: that stage's Inputs fields
    [[notes]]               stage, tag (fact / suspected_cause / untested_remedy / limitation), text

Stages run in order, each on the frozen records before it, and each is frozen right after it ran:
evidence of a failure is still evidence. Each stage runs through `Session.run_stage`, that is the
one core (`engine.core.compute`) the app and replay use too. The result (`AnswersResult`) has the exit
codes of engine.errors: 0 when every stage answered was recorded and frozen with no failing check, 1
when a check failed (or the run stopped early), 2 for an unusable answers file. The format is
documented in docs/answers-format.md.

Runtime knobs (dispatch's `wait`, `poll_seconds`, `wait_timeout_seconds`) may still be given in a
stage's table: they are validated, kept out of the stage's inputs and set on its StageContext.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine import registry
from engine.context import StageInputError
from engine.core import InvalidInputs, runtime_knobs, split_runtime, validate
from engine.errors import Problem, validation_problem
from engine.evidence import EvidenceError, NoteTag, StageRecord, read_toml
from engine.outcomes import Progress, Row, RunResult, stage_progress, timing
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
    # Per stage: runtime knobs its table gave (engine.core.RUNTIME_KEYS); they go to the StageContext.
    runtime: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Stages answered whose module is not built in this claimcheck: skipped, with later ones.
    unbuilt: list[str] = Field(default_factory=list)


@dataclass
class AnswersResult(RunResult):
    """Was each answered stage recorded and frozen? Exit 0 when no check failed, 1 otherwise."""

    mode: str = "answers"

    VERDICT_OK: ClassVar[str] = "every stage recorded and frozen"
    VERDICT_DIFFERS: ClassVar[str] = "a check failed or a stage did not finish"


def _invalid(path: Path, prefix: str, problem: Problem | ValidationError) -> EvidenceError:
    if isinstance(problem, ValidationError):
        problem = validation_problem(problem)
    where = ".".join(p for p in (prefix, problem.field) if p)
    return EvidenceError(path, where, problem.problem, f"{problem.fix} ({FIX})")


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
    runtime: dict[str, dict[str, Any]] = {}
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
        if spec.module() is None:
            unbuilt.append(spec.name)
        else:
            try:
                validate(spec.name, table)
                if knobs := runtime_knobs(spec.name, table):
                    runtime[spec.name] = knobs
            except InvalidInputs as exc:
                raise _invalid(path, spec.name, exc.problem) from None
            except ValidationError as exc:
                raise _invalid(path, spec.name, exc) from None
        stages[spec.name] = split_runtime(spec.name, table)[0]
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
    return Answers(path=path, session=session, stages=stages, notes=notes, unbuilt=unbuilt, runtime=runtime)


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
) -> AnswersResult:
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
    result = AnswersResult(session_dir)
    per_stage: dict[str, float] = {}
    session.lock.acquire()
    try:
        stopped = ""
        for name in answers.stages:
            if stopped:
                result.rows.append(Row(name, "(stage)", "not_run", "", stopped))
                continue
            if name in answers.unbuilt:
                stopped = f"not run: '{name}' is not built in this claimcheck"
                why = "stage not built in this claimcheck; answers for it unused"
                result.rows.append(Row(name, "(stage)", "not_run", "", why))
                continue
            t0 = time.perf_counter()
            rec = _run_and_freeze(session, answers, name, say)
            per_stage[name] = time.perf_counter() - t0
            result.rows += [
                Row(name, c.id, "failed" if c.status == "fail" else "recorded", c.status, c.summary)
                for c in rec.checks
            ]
            if stop and rec.worst_status() == "fail":
                stopped = f"not run: stopped after '{name}' failed a check (stop_on_fail)"
    finally:
        session.lock.release()
    result.timing = timing(time.perf_counter() - t_start, per_stage)
    return result


def _run_and_freeze(session: Session, answers: Answers, name: str, say: Progress) -> StageRecord:
    """Run one answered stage (its runtime knobs on the context), attach its notes, freeze it."""
    say(f"{name}: running")
    ctx = session.context(name, progress=stage_progress(say, name), **answers.runtime.get(name, {}))
    try:
        session.run_stage(name, answers.stages[name], ctx=ctx)
    except StageInputError as exc:
        raise StageInputError(f"{answers.path}: [{name}]: {exc}") from None
    for note in (n for n in answers.notes if n.stage == name):
        session.add_note(name, note.tag, note.text)
    rec = session.freeze(name)
    say(f"{name}: frozen ({len(rec.checks)} checks, worst status {rec.worst_status() or '-'})")
    return rec
