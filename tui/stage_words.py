"""What the app says about a stage in words: status glyphs and words, the stage banner, the verdict
line, the freeze question and when the artifact stage can run. Read from the typed shapes; no widget."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.providers.snapshot import JobSnapshot
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes.artifact import Verdict
from claimcheck.engine.shapes.training import Progress
from claimcheck.tui.safe import clean, literal

# Status shown as glyph + word so it reads without colour (16-colour terminals, monochrome logs).
STATUS_GLYPH = {"pass": "✔", "warn": "▲", "fail": "✖", "info": "ℹ", "not_run": "·"}
STATUS_WORD = {"pass": "pass", "warn": "warn", "fail": "FAIL", "info": "info", "not_run": "not run"}
STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "info": "cyan", "not_run": "dim"}


WARNING_LIMIT = 160  # characters of one warning's line in the freeze dialog (it scrolls)

# Checks tables list failing checks first, then warnings; the rest keep the stage's own order.
STATUS_RANK = {"fail": 0, "warn": 1}


def failing_first(checks: Sequence[Check]) -> list[Check]:
    return sorted(checks, key=lambda c: STATUS_RANK.get(c.status, len(STATUS_RANK)))


def status_text(status: str) -> Text:
    return Text(
        f"{STATUS_GLYPH.get(status, '?')} {STATUS_WORD.get(status, status)}",
        style=STATUS_STYLE.get(status, ""),
    )


def verdict_of(record: StageRecord | None) -> Verdict | None:
    """The artifact record's verdict (engine/shapes/artifact.py), None when it has none."""
    check = record.check("artifact.verdict") if record is not None else None
    return parse(check, Verdict) if check is not None else None


VERDICT_GLYPH = {"met": "✔", "not met": "✖", "not decided": "▲"}
VERDICT_STYLE = {"met": "bold green", "not met": "bold red", "not decided": "bold yellow"}


def verdict_line(v: Verdict) -> tuple[bool, str]:
    """(claim met, the record's claim verdict and its reason, verbatim: Verdict.claim_line)."""
    return v.claim_met, f"{VERDICT_GLYPH[v.claim_word()]} {v.claim_line()}"


def stage_banner(state: str, record: StageRecord | None) -> Text:
    """The line under a stage's title: its state, and what its checks say (failing ones named).

    Its colour is the worst check's, whatever the state: a frozen stage with failing checks is red,
    never "OK". The artifact stage leads with its verdict.
    """
    word = {"not_run": "not run", "stale": "STALE — an earlier stage changed; re-run"}.get(state, state)
    if record is None:
        return Text(f"state: {word}", style="bold")
    counts: dict[str, int] = {}
    for c in record.checks:
        counts[c.status] = counts.get(c.status, 0) + 1
    fails = [c.id.split(".", 1)[-1] for c in record.checks if c.status == "fail"]
    worst = next((w for w in ("fail", "warn", "pass") if counts.get(w)), "not_run")
    t = Text()
    verdict = verdict_of(record)
    if verdict is not None:
        _, line = verdict_line(verdict)
        t.append_text(literal(line, VERDICT_STYLE[verdict.claim_word()], limit=600))
        t.append("\n")
    t.append(f"{STATUS_GLYPH[worst]} state: {word}", style=f"bold {STATUS_STYLE[worst]}")
    t.append(f" · r{record.provenance.revision} · ")
    if fails:  # the failing checks by name first: the counts may be cut at 80 columns
        t.append_text(literal(f"{len(fails)} FAIL: " + ", ".join(fails), STATUS_STYLE["fail"], limit=120))
        t.append(" · ")
    order = ("fail", "warn", "pass", "info", "not_run")
    t.append(
        ", ".join(f"{counts[s]} {s.replace('_', ' ')}" for s in order if counts.get(s) and s != "fail")
        or ("" if fails else "no checks")
    )
    return t  # one line each (the verdict, the state): app.tcss cuts them with …


def freeze_question(record: StageRecord, later: Sequence[str]) -> tuple[Text, bool]:
    """What the freeze dialog says, and whether "No" is its default: when any check fails, or a
    dispatch record holds a job that has not finished."""
    body = Text(
        f"Freezing '{record.stage}' records that you accept its {len(record.checks)} checks as evidence.\n"
    )
    fails = [c.id for c in failing_first(record.checks) if c.status == "fail"]
    if fails:
        body.append_text(literal(f"{len(fails)} check(s) FAIL: " + ", ".join(fails), "bold red", limit=400))
        body.append("\n")
    warns = [c for c in record.checks if c.status == "warn"]
    if warns:  # what is accepted along with the passes, each by name and what it found
        body.append(f"{len(warns)} warning(s) accepted with it:\n", style="bold yellow")
        for c in warns:
            body.append_text(literal(f"▲ {c.id}: {c.summary}", "yellow", limit=WARNING_LIMIT))
            body.append("\n")
    progress = (
        parse(record.check("dispatch.progress"), Progress) if record.check("dispatch.progress") else None
    )
    unfinished = False
    if progress is not None and progress.job_state != "finished":
        unfinished = True
        total = f" of {progress.total_steps}" if progress.total_steps else ""
        body.append_text(
            literal(
                f"The job has not finished: {progress.job_state}, phase {progress.stage}, step "
                f"{progress.last_step}{total}. Freezing records an unfinished run.",
                "bold yellow",
            )
        )
        body.append("\n")
    body.append(
        "Later stages made stale by this: "
        + (", ".join(later) if later else "none (no later stage has a record)")
    )
    return body, bool(fails) or unfinished


def artifact_readiness(dispatch_state: str, dispatch: StageRecord | None, job: JobSnapshot | None) -> str:
    """When the artifact stage can run: it needs a frozen dispatch record of a finished job. One short
    line (it fits the 80-column banner), refreshed with the job view."""
    live = ""
    if job is not None and job.running:
        total = f" of {job.total_steps}" if job.total_steps else ""
        live = f"{clean(job.phase, limit=20)}, step {job.step}{total}"
    if dispatch is None:
        return "Can run once dispatch has launched the job and is frozen."
    frozen_first = f"Can run once dispatch (now {dispatch_state}) is frozen: ^l 6, ^f."
    if dispatch.check("dispatch.no_job") is not None:  # no fine-tuning: no job to wait for
        if dispatch_state != "frozen":
            return frozen_first
        return "Can run now (^r): no job for this claim; fits the candidate."
    progress = (
        parse(dispatch.check("dispatch.progress"), Progress) if dispatch.check("dispatch.progress") else None
    )
    if progress is not None and progress.job_state != "finished":
        why = live or f"recorded as {progress.job_state} (phase {clean(progress.stage, limit=20)})"
        return f"Waits for the job: {why}."
    if dispatch_state != "frozen":
        return frozen_first
    return "Can run now (^r): the job finished and dispatch is frozen."


def state_words(state: str, record: StageRecord | None, running: bool = False) -> str:
    """The navigator's plain-words state of one stage: 'frozen', 'draft · 2 fail', 'stale', …;
    the artifact stage says whether the claim was met ('frozen · not met')."""
    word = {"not_run": "not run", "draft": "draft", "frozen": "frozen", "stale": "STALE"}.get(state, state)
    verdict = verdict_of(record)
    if verdict is not None:
        word += f" · {verdict.claim_word()}"
    elif record is not None:
        fails = sum(c.status == "fail" for c in record.checks)
        if fails:
            word += f" · {fails} fail"
    if running:  # the list is 16 columns wide: running replaces the record's own state word
        word = "running" + word[word.index(" · ") :] if " · " in word else "running"
    return word


# ---------------------------------------------------------------- navigator
