"""Per-stage visual panels: what people would rather look at than read.

The pictures of each stage's record are drawn by tui/stage_panels.py from the typed evidence
(engine.shapes) and the figures of engine/figures.py: a value the stage did not record makes the
panel say "not measured" — it never draws a made-up figure. The dispatch panel also polls the job's
own files (status.json, heartbeat, metrics.jsonl) once a second through the engine's cheap
file-protocol helpers, so a job started in an earlier app run shows up live.
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
from textual.widgets import Sparkline, Static

from engine.evidence import StageRecord
from engine.shapes import ShapeError, parse
from engine.shapes.training import Progress
from tui.safe import clean, literal
from tui.stage_panels import NOT_MEASURED, PANEL_WIDTH, RENDERERS, render_dispatch_record

__all__ = ["NOT_MEASURED", "RENDERERS", "DispatchPanel", "VisualPanel", "poll_jobs", "render_dispatch_record"]


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    return None


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


def poll_jobs(jobs_root: Path, inputs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A snapshot of every job under jobs/: status, step, heartbeat age, losses, dev metric, alarms.

    Each job is judged by its own provider: the one the dispatch inputs name (`inputs`), or the
    one the job's folder records (a Ray job is asked of Ray, not taken for a dead local process).
    """
    if not jobs_root.is_dir():
        return []
    from engine.providers.base import Handle
    from engine.providers.registry import for_job
    from engine.training import alarms as job_alarms
    from engine.training import jobfiles

    out = []
    for job_dir in sorted(p for p in jobs_root.iterdir() if p.is_dir()):
        if not jobfiles.launched(job_dir):
            continue
        provider = for_job(job_dir, inputs)
        st = provider.status(Handle(op_id=job_dir.name, job_dir=job_dir, provider=provider.name))
        records = jobfiles.read_metrics(job_dir)
        steps = jobfiles.latest_by_step(records, "step")
        evals = jobfiles.dev_evals(records)
        try:
            effective = jobfiles.read_contract(job_dir)
        except (OSError, ValueError):
            effective = {}
        try:
            alarms = job_alarms.evaluate(records, effective, jobfiles.read_heartbeat(job_dir), st.total_steps)
        except Exception:  # alarms on a half-written file: show none rather than crash the view
            alarms = []
        out.append(
            {
                "op_id": st.op_id,
                "stage": st.stage,
                "reason": st.reason,
                "step": st.step,
                "total_steps": st.total_steps,
                "alive": st.alive,
                "heartbeat_age_s": st.heartbeat_age_s,
                "losses": [float(s["loss"]) for s in steps if _num(s.get("loss")) is not None],
                "dev": [float(e["value"]) for e in evals if _num(e.get("value")) is not None],
                "dev_metric": str(evals[-1].get("metric", "")) if evals else "",
                "alarms": alarms,
                "running": st.running,
            }
        )
    return out


class DispatchPanel(VerticalScroll):
    """Live view of the session's training jobs, refreshed every second from the job's files."""

    can_focus = True

    class Polled(Message):
        def __init__(self, jobs: list[dict[str, Any]], at: float) -> None:
            self.jobs, self.at = jobs, at
            super().__init__()

    def __init__(self, jobs_root: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs_root = jobs_root
        self.jobs: list[dict[str, Any]] = []
        self._record: StageRecord | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="job-head")
        yield Static("loss", classes="spark-label")
        yield Sparkline([], id="loss-spark")
        yield Static("dev metric", classes="spark-label")
        yield Sparkline([], id="dev-spark")
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
            jobs = [
                {
                    "op_id": "?",
                    "stage": "unreadable",
                    "reason": str(exc),
                    "losses": [],
                    "dev": [],
                    "alarms": [],
                }
            ]
        self.post_message(self.Polled(jobs, time.time()))

    def on_dispatch_panel_polled(self, event: Polled) -> None:
        was = any(j.get("running") for j in self.jobs)
        self.jobs = event.jobs
        self._draw()
        if was != any(j.get("running") for j in self.jobs):
            refresh = getattr(self.screen, "refresh_states", None)  # the navigator's "running" word
            if refresh is not None:
                refresh()

    def _draw(self) -> None:
        head = self.query_one("#job-head", Static)
        body = self.query_one("#job-body", Static)
        loss = self.query_one("#loss-spark", Sparkline)
        dev = self.query_one("#dev-spark", Sparkline)
        if not self.jobs:
            head.update(
                Text(
                    "No training job in this session yet: run the dispatch stage to launch one.", style="dim"
                )
            )
            loss.data, dev.data = [], []
            body.update(render_dispatch_record(self._record))
            return
        job = self.jobs[-1]
        t = Text()
        t.append("job ", style="bold")
        t.append_text(literal(job.get("op_id", "")))
        t.append(
            f" · {clean(job.get('stage', ''))}",
            style="bold red" if job.get("stage") in ("failed", "lost", "stalled") else "bold",
        )
        total = job.get("total_steps") or 0
        t.append(f"\nstep {job.get('step', 0)}" + (f" of {total}" if total else ""))
        age = job.get("heartbeat_age_s", -1)
        t.append(
            " · heartbeat "
            + (f"{age:.1f} s ago" if isinstance(age, int | float) and age >= 0 else "none yet")
        )
        if job.get("reason"):
            t.append("\n")
            t.append_text(literal(job["reason"], "dim", limit=200))
        if len(self.jobs) > 1:
            t.append(f"\n({len(self.jobs)} jobs in this session; showing the latest)", style="dim")
        recorded = parse(self._record.check("dispatch.progress"), Progress) if self._record else None
        if not job.get("running") and recorded and recorded.stage != job.get("stage"):
            t.append("\nThe job's state changed since the record: ctrl+r records it now.", style="bold")
        elif job.get("running"):
            t.append("\nThe job runs on its own: quitting claimcheck leaves it running.", style="dim")
        head.update(t)
        losses, devs = job.get("losses", []), job.get("dev", [])
        loss.data = losses[-200:]
        dev.data = devs[-200:]
        b = Text()
        b.append(
            f"loss: {len(losses)} steps"
            + (f", last {losses[-1]:.4g}, min {min(losses):.4g}" if losses else " (none yet)")
            + "\n"
        )
        b.append(
            f"dev {clean(job.get('dev_metric', '') or 'metric')}: "
            + (f"{len(devs)} evals, last {devs[-1]:.4g}" if devs else "no eval yet")
            + "\n\n"
        )
        b.append("alarms\n", style="bold")
        if not job.get("alarms"):
            b.append(NOT_MEASURED + "\n", style="dim")
        for a in job.get("alarms", []):
            state = str(a.get("state", ""))
            style = {"raised": "bold red", "clear": "green", "disabled": "yellow"}.get(state, "dim")
            b.append(
                f"{'✖' if state == 'raised' else '·'} {clean(a.get('name', '')):<18} {state:<9} ", style=style
            )
            b.append_text(literal(a.get("detail", ""), limit=120))
            b.append("\n")
        b.append("\n")
        b.append_text(render_dispatch_record(self._record))
        body.update(b)
