"""Per-stage visual panels: what people would rather look at than read.

The pictures of each stage's record are drawn by tui/stage_panels.py from the typed evidence
(claimcheck.engine.shapes) and the figures of engine/report/figures.py: a value the stage did not record makes the
panel say "not measured" — it never draws a made-up figure. The dispatch panel also polls the job's
own files once a second through the engine's job snapshot (claimcheck.engine.providers.snapshot),
so a job started in an earlier app run shows up live; the curves and alarms it draws are the
snapshot's, the same the dispatch stage records.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.providers.snapshot import JobSnapshot
from claimcheck.engine.shapes import ShapeError, parse
from claimcheck.engine.shapes.training import Progress
from claimcheck.engine.training.pace import Pace, duration
from claimcheck.tui.safe import clean, literal
from claimcheck.tui.stage_panels import NOT_MEASURED, PANEL_WIDTH, RENDERERS, render_dispatch_record

__all__ = ["NOT_MEASURED", "RENDERERS", "DispatchPanel", "VisualPanel", "poll_jobs", "render_dispatch_record"]


class VisualPanel(VerticalScroll):
    """A stage's pictures at the panel's own width, redrawn when its record or its width changes."""

    can_focus = True

    def __init__(self, stage: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stage = stage
        self._shown: tuple[StageRecord | None, Any] | None = None
        self._drawn_width = 0

    def compose(self) -> ComposeResult:
        yield Static(id="visual-body")

    def show(self, record: StageRecord | None, session: Any) -> None:
        self._shown = (record, session)
        self._draw()

    def on_resize(self) -> None:
        if self._shown is not None and self._width() != self._drawn_width:
            self._draw()

    def _width(self) -> int:
        """Columns the pictures may use: the panel less its scroll bar; PANEL_WIDTH before layout."""
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        return width if width >= 30 else PANEL_WIDTH

    def _draw(self) -> None:
        if self._shown is None:
            return
        record, session = self._shown
        render = RENDERERS.get(self.stage)
        body = self.query_one("#visual-body", Static)
        self._drawn_width = width = self._width()
        try:
            body.update(render(record, session, width) if render else Text(NOT_MEASURED))
        except ShapeError as exc:  # a record whose values do not fit their typed shape: say which
            body.update(literal(f"{NOT_MEASURED}: {exc}"))
        except Exception as exc:  # a record shape we did not expect must not take the screen down
            body.update(literal(f"{NOT_MEASURED}: this record's values have an unexpected shape ({exc})"))


# ---------------------------------------------------------------- dispatch: live job view


def poll_jobs(jobs_root: Path, inputs: dict[str, Any] | None = None) -> list[JobSnapshot]:
    """The engine's snapshot of every job under jobs/ (claimcheck.engine.providers.snapshot.poll)."""
    from claimcheck.engine.providers.snapshot import poll

    return poll(jobs_root, inputs)


class DispatchPanel(VerticalScroll):
    """Live view of the session's training jobs, refreshed every second from the job's files."""

    can_focus = True

    class Polled(Message):
        def __init__(self, jobs: list[JobSnapshot], at: float) -> None:
            self.jobs, self.at = jobs, at
            super().__init__()

    def __init__(self, jobs_root: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs_root = jobs_root
        self.jobs: list[JobSnapshot] = []
        self._record: StageRecord | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="job-head")
        yield Static(id="job-curves")
        yield Static(id="job-body")

    def on_mount(self) -> None:
        self.poll()
        self.set_interval(1.0, self.poll)

    def show(self, record: StageRecord | None, session: Any) -> None:
        self._record = record
        self._draw()

    @work(thread=True, exclusive=True, group="job-poll")
    def poll(self) -> None:
        try:
            jobs = poll_jobs(self.jobs_root, self._record.inputs if self._record else None)
        except Exception as exc:  # unreadable files: say so instead of crashing
            jobs = [JobSnapshot(op_id="?", stage="unreadable", reason=str(exc))]
        self.post_message(self.Polled(jobs, time.time()))

    class JobChanged(Message):
        """A job's phase changed (training → done, …): the screen re-reads states and records."""

        def __init__(self, before: dict[str, str], after: dict[str, str]) -> None:
            self.before, self.after = before, after
            super().__init__()

    class JobMoved(Message):
        """A job's step moved, its stage did not: the lines that quote the step are redrawn."""

    def on_dispatch_panel_polled(self, event: Polled) -> None:
        before = {j.op_id: j.phase for j in self.jobs}
        steps = {j.op_id: j.step for j in self.jobs}
        self.jobs = event.jobs
        self._draw()
        after = {j.op_id: j.phase for j in self.jobs}
        if before != after:
            self.post_message(self.JobChanged(before, after))
        elif steps != {j.op_id: j.step for j in self.jobs}:
            self.post_message(self.JobMoved())

    def _draw(self) -> None:
        head = self.query_one("#job-head", Static)
        curves = self.query_one("#job-curves", Static)
        body = self.query_one("#job-body", Static)
        if not self.jobs:
            no_job = self._record is not None and self._record.check("dispatch.no_job") is not None
            head.update(
                Text(
                    "No training job for this claim: no fine-tuning, the scikit-learn candidate is "
                    "fitted in the artifact stage (dispatch.no_job)."
                    if no_job
                    else "No training job in this session yet: run the dispatch stage to launch one.",
                    style="dim",
                )
            )
            curves.update("")
            body.update(render_dispatch_record(self._record, self._width()))
            return
        job = self.jobs[-1]
        head.update(self._head(job))
        curves.update(job_curves(job, self._width()))
        b = Text()
        b.append("alarms\n", style="bold")
        if not job.alarms:
            b.append(NOT_MEASURED + "\n", style="dim")
        for a in job.alarms:
            state = str(a.get("state", ""))
            style = {"raised": "bold red", "clear": "green", "disabled": "yellow"}.get(state, "dim")
            b.append(
                f"{'✖' if state == 'raised' else '·'} {clean(a.get('name', '')):<18} {state:<9} ", style=style
            )
            b.append_text(literal(a.get("detail", ""), limit=160))
            b.append("\n")
        b.append("\n")
        b.append_text(render_dispatch_record(self._record, self._width()))
        body.update(b)

    def _width(self) -> int:
        width = self.content_region.width - self.styles.scrollbar_size_vertical
        return width if width >= 30 else PANEL_WIDTH

    def _head(self, job: JobSnapshot) -> Text:
        t = Text()
        t.append("job ", style="bold")
        t.append_text(literal(job.op_id))
        phase = job.phase
        t.append(
            f" · {clean(phase)}",
            style="bold red" if job.bad else ("bold green" if job.job_state == "finished" else "bold"),
        )
        total = job.total_steps
        t.append(f"\nstep {job.step}" + (f" of {total}" if total else ""))
        age = job.heartbeat_age_s
        if job.running:
            beat = f"{age:.1f} s ago" if age >= 0 else "none yet"
            t.append(f" · heartbeat {beat}")
        t.append_text(pace_line(job.pace, job.running))
        if job.reason:
            t.append("\n")
            t.append_text(literal(job.reason, "dim", limit=200))
        if len(self.jobs) > 1:
            t.append(f"\n({len(self.jobs)} jobs in this session; showing the latest)", style="dim")
        recorded = parse(self._record.check("dispatch.progress"), Progress) if self._record else None
        if not job.running and recorded and recorded.stage != phase:
            t.append(
                f"\nThe record says '{clean(recorded.stage)}', the job '{clean(phase)}': a draft dispatch record "
                "is recorded again on its own, a frozen one with ctrl+r.",
                style="bold",
            )
        elif job.running:
            t.append("\nThe job runs on its own: quitting claimcheck leaves it running.", style="dim")
        return t


def pace_line(pace: Pace | None, running: bool) -> Text:
    """'elapsed 4 min 10 s · 12.4 s/step · 41 s/evaluation · ETA 1 h 20 min (196 steps, 4 evaluations)'
    and, during an evaluation, which one and for how long (no step moves then, so the step count alone
    would look stuck). One unit for each pace: seconds per step, seconds per evaluation."""
    t = Text()
    if pace is None:
        return t
    bits = [f"elapsed {duration(pace.elapsed_s)}"] if pace.elapsed_s is not None else []
    if pace.step_s:
        bits.append(f"{pace.step_s:.3g} s/step")
    if pace.eval_s is not None:
        bits.append(f"{pace.eval_s:.3g} s/evaluation")
    if running:
        bits.append(eta_words(pace))
    if bits:
        t.append("\n" + " · ".join(bits))
    if pace.evaluation:
        what = "final evaluation" if pace.evaluation == "final" else f"{pace.evaluation} dev evaluation"
        since = f" for {duration(pace.evaluating_s)}" if pace.evaluating_s is not None else ""
        t.append(f"\n◆ {what} running{since}", style="bold cyan")
    return t


def eta_words(pace: Pace) -> str:
    """'ETA 3 min 10 s', 'ETA ≥ 2 min 00 s (no evaluation timed yet)', 'ETA ? (no timed step yet)'."""
    if pace.eta_s is None:
        return "ETA ? (no timed step yet)"
    if pace.eta_floor:
        return f"ETA ≥ {duration(pace.eta_s)} (no evaluation timed yet)"
    if pace.evaluation == "final" and pace.evals_left == 0:
        return f"ETA {duration(pace.eta_s)} (final evaluation)"
    return f"ETA {duration(pace.eta_s)}"


def job_curves(job: JobSnapshot, width: int) -> Text:
    """The job's loss (checkpoints ┆ and dev evaluations ▲ marked) and dev metric (the trivial
    baseline ┄ as reference), as its snapshot holds them; one point is shown as a point with its value."""
    from claimcheck.engine.report.figures import Lines
    from claimcheck.tui.plots import plot

    t = Text()
    evals = job.dev_points
    losses = job.loss_points
    loss_fig = Lines(
        "live loss per optimizer step",
        {"loss": losses},
        "step",
        marks=[float(s) for s in job.checkpoints],
        mark_label="checkpoints",
        events=[x for x, _ in evals],
        event_label="dev evaluations",
    )
    t.append_text(
        plot(loss_fig, width) if losses else literal("live loss: no optimizer step yet", "dim").append("\n")
    )
    metric = clean(job.dev_metric or "metric")
    dev_fig = Lines(
        f"live dev {metric} at each evaluation",
        {f"dev {metric}": evals},
        "step",
        reference=job.trivial_value,
        reference_label="trivial baseline",
    )
    t.append_text(
        plot(dev_fig, width)
        if evals
        else literal(f"live dev {metric}: no evaluation yet", "dim").append("\n")
    )
    return t
