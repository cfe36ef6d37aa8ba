"""Drive a session headless from an answers file: the stage inputs a person would enter, as TOML.

    [session]               title, recipe, id, workspace, stop_on_fail   (all optional)
    [claim] ... [artifact]  one table per stage: that stage's Inputs fields
    [[notes]]               stage, tag (fact / suspected_cause / untested_remedy / limitation), text

Stages run in order, each on the frozen records before it, and each is frozen right after it ran:
evidence of a failure is still evidence. Each stage runs through `Session.run_stage`, that is the
one core (`claimcheck.engine.pipeline.core.compute`) the app and replay use too. The result (`AnswersResult`) has the exit
codes of claimcheck.engine.errors: 0 when every stage answered was recorded and frozen with no failing check, 1
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

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from claimcheck.engine.errors import ClaimcheckError, Problem, validation_problem
from claimcheck.engine.evidence import EvidenceError, NoteTag, StageRecord, read_toml
from claimcheck.engine.headless.outcomes import (
    Progress,
    Row,
    RunResult,
    recorded_claim_verdict,
    stage_progress,
    timing,
)
from claimcheck.engine.ledger.lock import took_over_line
from claimcheck.engine.ledger.session import SESSION_FILE, Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.pipeline.core import InvalidInputs, runtime_knobs, split_runtime, validate

FIX = "see docs/answers-format.md"


class SessionAnswers(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str = Field(default="", max_length=500)
    recipe: str = Field(default="", max_length=200)
    # Session id; default: the session folder's name. Letters, digits, '.', '_' and '-' only.
    id: str = Field(default="", max_length=128, pattern=r"^([A-Za-z0-9][A-Za-z0-9._-]*)?$")
    # Folder that relative data paths resolve against, relative to the answers file's folder.
    workspace: str = Field(default="", max_length=4096)
    # Stop after the first stage with a failing check (later stages stay unrun).
    stop_on_fail: StrictBool = False

    @field_validator("title", "recipe", "workspace")
    @classmethod
    def _printable(cls, value: str) -> str:
        if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise ValueError("holds control characters (escape bytes, NUL, newlines)")
        return value


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
    # Per stage: runtime knobs its table gave (claimcheck.engine.pipeline.core.RUNTIME_KEYS); they go to the StageContext.
    runtime: dict[str, dict[str, Any]] = Field(default_factory=dict)


@dataclass
class AnswersResult(RunResult):
    """Was each answered stage recorded and frozen? Exit 0 when no check failed, 1 otherwise."""

    mode: str = "answers"

    VERDICT_OK: ClassVar[str] = "every stage recorded and frozen"
    VERDICT_DIFFERS: ClassVar[str] = "a check failed or a stage did not finish"


def _invalid(path: Path, prefix: str, problem: Problem | ValidationError) -> EvidenceError:
    if isinstance(problem, ValidationError):
        problem = validation_problem(problem)
    where = ".".join(p for p in (prefix, problem.field) if p) or prefix
    return EvidenceError(path, where, problem.problem, f"{problem.fix} ({FIX})")


# Levels of tables and arrays an answers file may nest (the deepest real field, a list in a stage's
# sub-table, is 4); deeper input is refused before any value is read into a model.
MAX_NESTING = 16


def _read_bounded(path: Path) -> dict[str, Any]:
    """The answers file's TOML, refused with one line when it nests deeper than MAX_NESTING levels."""
    line = _deep_key_line(path)
    try:
        data = None if line else read_toml(path)
    except RecursionError:
        data = None
    where = (f"line {line}" if line else "(file)") if data is None else _too_deep(data)
    if where:
        raise EvidenceError(
            path,
            where,
            f"nests tables or arrays more than {MAX_NESTING} levels deep",
            f"no answer is nested that deep; write the field as its stage's Inputs describe it ({FIX})",
        )
    return data  # type: ignore[return-value]


def _deep_key_line(path: Path) -> int:
    """1-based line of a table header or key with more than 4 × MAX_NESTING dots (the TOML reader
    takes minutes over 100,000 of them), 0 when none; unreadable files are left to read_toml."""
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return 0
    for n, line in enumerate(text.splitlines(), 1):
        key = line.split("=", 1)[0] if not line.lstrip().startswith("[") else line
        if key.count(".") > 4 * MAX_NESTING and '"' not in key and "'" not in key:
            return n
    return 0


def _too_deep(data: dict[str, Any]) -> str:
    """The dotted path (cut to 80 characters) of the first value nested past MAX_NESTING, or ""."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, where, depth = stack.pop()
        if depth > MAX_NESTING:
            return where[:80] + ("…" if len(where) > 80 else "")
        if isinstance(value, dict):
            stack += [(v, f"{where}.{k}" if where else str(k), depth + 1) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    return ""


def load_answers(answers_path: Path) -> Answers:
    """Read and validate the whole file before anything runs: every problem names the file and field."""
    path = Path(answers_path)
    data = _read_bounded(path)
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
        try:
            model = validate(spec.name, table)
            if knobs := runtime_knobs(spec.name, table):
                runtime[spec.name] = knobs
        except InvalidInputs as exc:
            raise _invalid(path, spec.name, exc.problem) from None
        except ValidationError as exc:
            raise _invalid(path, spec.name, exc) from None
        _required(path, spec.name, model)
        stages[spec.name] = split_runtime(spec.name, table)[0]
    raw_notes = data.get("notes", [])
    if not stages:
        raise EvidenceError(
            path,
            "(file)",
            "answers no stage: the file has no [claim] table",
            f"add a [claim] table and the stages after it that you want run ({FIX})",
        )
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
    return Answers(path=path, session=session, stages=stages, notes=notes, runtime=runtime)


def _required(path: Path, stage: str, model: BaseModel) -> None:
    """Fields a stage needs that its Inputs defaults leave empty (a form starts empty; a file may not)."""
    if stage == "source":
        for field, what in (("files", "at least one data file"), ("label_column", "the label column")):
            if not getattr(model, field):
                raise EvidenceError(path, f"source.{field}", "is empty", f"give {what} ({FIX})")


def _fail(path: Path, field: str, exc: BaseException, fix: str) -> EvidenceError:
    problem = " ".join(str(exc).split()) or type(exc).__name__
    return EvidenceError(path, field, problem, fix)


def _jsonl_objects(p: Path, name: str) -> None:
    """Every line of a JSONL file is a JSON object, named by line (as the source stage says it)."""
    from claimcheck.engine.audit.profile import malformed_records

    if p.is_file() and p.suffix.lower() in (".jsonl", ".ndjson") and p.stat().st_size:
        m = malformed_records(p, name)
        if m["malformed"]:
            where = ", ".join(f"line {loc['line']}" for loc in m["locations"] if loc["record"])[:200]
            raise StageInputError(
                f"data file {name}: {m['malformed']} line(s) are not JSON objects ({where}); fix or remove them"
            )


def _builtin(name: str) -> bool:
    """The stage is this claimcheck's own module (not replaced by a test double), so its files can be checked."""
    module = registry.get(name).module()
    return getattr(module, "__name__", "") == f"{registry.STAGES_PACKAGE}.{name}.run"


def _empty_or_interrupted(folder: Path) -> bool:
    """Empty, or holding only the temp files of a run killed before it wrote session.toml (taking
    the session's lock removes them): either way, nothing a person made is in it."""
    from claimcheck.engine.evidence import is_temp_name

    return all(p.is_file() and is_temp_name(p.name) for p in folder.iterdir())


def _new_folder(session_dir: Path) -> None:
    """A new session goes into a folder that is absent, empty, or left by a run killed before it
    wrote session.toml; a folder holding other files is refused (an existing session is continued)."""
    if session_dir.exists() and (not session_dir.is_dir() or not _empty_or_interrupted(session_dir)):
        raise FileExistsError(
            f"{session_dir} already exists and holds {'files' if session_dir.is_dir() else 'a file'} "
            "but no session.toml; give a new session folder, or the folder of a session to continue"
        )
    parent = session_dir.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise FileExistsError(f"{session_dir}: {parent} is a file, not a folder; give another session folder")


def preflight(answers: Answers, workspace: Path, session_dir: Path) -> None:
    """Everything checkable before a session is created or continued: the workspace, every data file
    (inside the workspace, readable, the columns named) and the model folder."""
    from claimcheck.engine.data.rows import apply_filters, refuse_same_file, require_columns, scan_files
    from claimcheck.engine.pipeline.context import StageContext

    path = answers.path
    if not workspace.is_dir():
        raise EvidenceError(
            path, "session.workspace", f"{workspace} is not a folder", f"give an existing folder ({FIX})"
        )
    session_dir = Path(session_dir)
    ctx = StageContext(session_dir=session_dir, workspace=workspace)
    src = answers.stages.get("source")
    if src is not None and _builtin("source"):
        inp = registry.get("source").module().Inputs.model_validate(src)
        fix = "fix the data file or the path in [source].files"
        try:
            paths = [ctx.resolve(f, inside=not inp.allow_outside_workspace) for f in inp.files]
            refuse_same_file(paths, list(inp.files))
            for p, name in zip(paths, inp.files, strict=True):
                _jsonl_objects(p, name)
            lf = scan_files(paths, names=list(inp.files))
            require_columns(lf, inp.named_columns(), text_columns=inp.text_columns)
            if lf.head(1).collect().height == 0:
                raise StageInputError(f"the data file(s) {list(inp.files)} hold no rows; give data with rows")
        except StageInputError as exc:
            raise _fail(path, "source.files", exc, fix) from None
        except Exception as exc:  # noqa: BLE001 - an OS or reader error on a data file: say which
            raise _fail(path, "source.files", exc, fix) from None
        try:
            apply_filters(lf, [f.model_dump() for f in inp.filters]).collect_schema()
        except Exception as exc:  # noqa: BLE001 - a filter Polars cannot plan is a user mistake
            raise _fail(
                path, "source.filters", exc, "correct the filter (its language: docs/answers-format.md)"
            ) from None
        _weights(path, inp, answers.stages.get("claim") or {}, ctx)
        for i, prep in enumerate(inp.preprocessing):
            for field, name in [("script", prep.script)] + [
                (f"reads[{j}]", r) for j, r in enumerate(prep.reads)
            ]:
                try:
                    found = ctx.resolve(name, inside=True, field="preprocessing").is_file()
                except StageInputError as exc:
                    raise _fail(
                        path, f"source.preprocessing[{i}].{field}", exc, "keep it in the workspace"
                    ) from None
                if not found:
                    why = StageInputError(f"{name!r} not found in the workspace {workspace}")
                    raise _fail(path, f"source.preprocessing[{i}].{field}", why, "fix the path") from None
    con = answers.stages.get("contract")
    if con is not None and _builtin("contract"):
        from claimcheck.engine.training.models import check_model_folder

        inp = registry.get("contract").module().Inputs.model_validate(con)
        _alarm_budget(path, con, inp)
        for field in ("model_path", "tokenizer_path"):
            spec = getattr(inp, field)
            if field == "tokenizer_path" and not spec:
                continue
            try:
                check_model_folder(spec, workspace, weights=field == "model_path")
            except StageInputError as exc:
                fix = "give a model folder inside the workspace with config.json and safetensors weights"
                raise _fail(path, f"contract.{field}", exc, fix) from None


def _weights(path: Path, inp: Any, claim: dict[str, Any], ctx: Any) -> None:
    """The sample weights refused before a session exists: weighted metrics without a weight column,
    weights a training job would not honour, a weight that is not a non-negative finite number."""
    from claimcheck.engine.data import rows, weights

    try:
        weights.refuse_unweightable(inp.model_dump(mode="json"), claim)
        if inp.weight_column:
            cols = [inp.weight_column, rows.SOURCE_FILE, rows.SOURCE_LINE]
            weights.validate(
                rows.load_dataset(inp.model_dump(mode="json"), ctx).select(cols).collect(), inp.weight_column
            )
    except StageInputError as exc:
        raise _fail(
            path, "source.weight_column", exc, "fix the weights in the data file, or the field"
        ) from None


def _alarm_budget(path: Path, table: dict[str, Any], inp: Any) -> None:
    """A worse-than-trivial alarm step the file sets past its max_steps could never fire: refused here
    (an epoch budget is known only from the train rows: the contract stage refuses it then)."""
    after = (table.get("alarms") or {}).get("worse_than_trivial_after_step")
    if after is None or inp.max_steps <= 0 or "worse_than_trivial" in inp.alarms.disabled:
        return
    if int(after) > inp.max_steps:
        raise EvidenceError(
            path,
            "contract.alarms.worse_than_trivial_after_step",
            f"is {after}, past the contract's {inp.max_steps}-step budget (max_steps): the "
            "worse_than_trivial alarm could never fire",
            f"choose a step ≤ {inp.max_steps}, -1 (from half-way), or disable the alarm ({FIX})",
        )


def _workspace(answers: Answers, override: Path | None) -> Path:
    if override is not None:
        return Path(override).resolve()
    if answers.session.workspace:
        return (answers.path.parent / answers.session.workspace).resolve()
    return Path.cwd().resolve()


def _open_or_create(answers: Answers, session_dir: Path, ws: Path) -> tuple[Session, bool]:
    """The session to run into, and whether it existed: an existing session is continued (the same
    id and workspace, else refused); otherwise a new one is created, after every preflight check."""
    if (session_dir / SESSION_FILE).is_file():
        session = Session.open(session_dir)
        wanted = answers.session.id or session_dir.name  # the id a new session here would get
        if wanted != session.meta.id:
            said = f"is {wanted!r}" if answers.session.id else f"is unset (so the folder name {wanted!r})"
            raise EvidenceError(
                answers.path,
                "session.id",
                f"{said}, but {session_dir} holds session {session.meta.id!r}",
                f"set id = {session.meta.id!r} to continue that session, or give a new folder",
            )
        if session.workspace != ws:
            raise EvidenceError(
                answers.path,
                "session.workspace",
                f"resolves to {ws}, but the session's workspace is {session.workspace}",
                "continue a session from its own workspace (or omit --workspace)",
            )
        preflight(answers, ws, session_dir)
        return session, True
    _new_folder(session_dir)
    preflight(answers, ws, session_dir)
    session = Session.create(
        session_dir,
        title=answers.session.title,
        recipe=answers.session.recipe,
        workspace=ws,
        session_id=answers.session.id or None,
    )
    return session, False


def run_answers(
    answers_path: Path,
    session_dir: Path,
    *,
    workspace: Path | None = None,
    progress: Progress | None = None,
    stop_on_fail: bool | None = None,
) -> AnswersResult:
    """Create a session from an answers file, or continue one, running and freezing every answered stage.

    Continuing (the folder holds a session): a stage whose frozen record has the same inputs and rests
    on the current upstream is kept as it is; any other answered stage is run again and frozen as a
    new revision, which makes the stages after it stale, as in the app, so they run again too.
    workspace: explicit argument, else [session].workspace (relative to the answers file), else the
    current folder. Raises EvidenceError (a bad answers file) or FileExistsError (a folder that holds
    files but no session) before anything is written. A refusal once stages ran (StageInputError, a
    lock held by a live process) ends the run with `result.error` set; the rows of the stages before it
    are kept. A lock left by a process that is provably gone is taken over, said in one progress line.
    """
    t_start = time.perf_counter()
    say = progress or (lambda _m: None)
    answers = load_answers(answers_path)
    stop = answers.session.stop_on_fail if stop_on_fail is None else stop_on_fail
    session_dir = Path(session_dir)
    session, existed = _open_or_create(answers, session_dir, _workspace(answers, workspace))
    if existed:
        say(f"continuing session {session.meta.id} in {session_dir}")
    result = AnswersResult(session_dir)
    per_stage: dict[str, float] = {}
    try:
        taken = session.lock.acquire(take_over_stale=True)
        if taken is not None:
            say(took_over_line(session_dir, taken))
        try:
            _run_stages(session, answers, result, per_stage, say, stop)
        finally:
            session.lock.release()
    except ClaimcheckError as exc:
        result.error = str(exc)
    result.claim_verdict = recorded_claim_verdict(session)
    result.timing = timing(time.perf_counter() - t_start, per_stage)
    return result


def _run_stages(
    session: Session,
    answers: Answers,
    result: AnswersResult,
    per_stage: dict[str, float],
    say: Progress,
    stop: bool,
) -> None:
    stopped = ""
    for name in answers.stages:
        if stopped:
            result.rows.append(Row(name, "(stage)", "not_run", "", stopped))
            continue
        t0 = time.perf_counter()
        rec = _kept(session, answers, name)
        if rec is not None:
            say(f"{name}: kept (frozen revision {rec.provenance.revision}; answers and upstream unchanged)")
            result.rows.append(Row(name, "(stage)", "kept", "", _KEPT.format(rec.provenance.revision)))
            result.rows += _check_rows(rec, "kept")
        else:
            rec = _run_and_freeze(session, answers, name, say)
            per_stage[name] = time.perf_counter() - t0
            result.rows += _check_rows(rec, "recorded")
        if stop and rec.worst_status() == "fail":
            stopped = f"not run: stopped after '{name}' failed a check (stop_on_fail)"


_KEPT = "kept frozen revision {}: its answers and upstream did not change"


def _check_rows(rec: StageRecord, outcome: str) -> list[Row]:
    return [
        Row(rec.stage, c.id, "failed" if c.status == "fail" else outcome, c.status, c.summary)
        for c in rec.checks
    ]


def _kept(session: Session, answers: Answers, name: str) -> StageRecord | None:
    """The stage's record, when continuing changes nothing: frozen on the current upstream (not
    stale), the same inputs as the answers (both read through today's Inputs, so a field added since
    compares at its default), and every answered note already in it."""
    rec = session.record(name)
    if rec is None or session.state(name) != "frozen":
        return None
    try:
        same = validate(name, rec.inputs).model_dump(mode="json") == validate(
            name, answers.stages[name]
        ).model_dump(mode="json")
    except InvalidInputs:
        return None
    have = {(n.tag, n.text) for n in rec.notes}
    wanted = {(n.tag, n.text) for n in answers.notes if n.stage == name}
    return rec if same and wanted <= have else None


def _run_and_freeze(session: Session, answers: Answers, name: str, say: Progress) -> StageRecord:
    """Run one answered stage (its runtime knobs on the context), attach its notes, freeze it."""
    say(f"{name}: running")
    ctx = session.context(name, progress=stage_progress(say, name), **answers.runtime.get(name, {}))
    try:
        session.run_stage(name, answers.stages[name], ctx=ctx)
    except StageInputError as exc:
        raise StageInputError(f"{answers.path}: [{name}]: {exc}") from None
    have = {(n.tag, n.text) for n in session.record(name).notes}  # a re-run keeps the person's notes
    for note in (n for n in answers.notes if n.stage == name and (n.tag, n.text) not in have):
        session.add_note(name, note.tag, note.text)
    rec = session.freeze(name)
    say(f"{name}: frozen ({len(rec.checks)} checks, worst status {rec.worst_status() or '-'})")
    return rec
