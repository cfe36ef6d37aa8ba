"""The session screen: the stage navigator, one StageView per stage, and the actions on them (run,
cancel, freeze, notes, coverage). Long work runs in the views' workers; this screen only routes
keys and messages and refreshes the stage states."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, ContentSwitcher, Footer, Static

from claimcheck.engine.evidence import EvidenceError, StageRecord
from claimcheck.engine.ledger.drafts import draft_path
from claimcheck.engine.ledger.session import Session, StageOrderError
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.core import split_runtime
from claimcheck.engine.providers.snapshot import JobSnapshot
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes.training import Progress
from claimcheck.engine.training.jobrecords import is_terminal
from claimcheck.tui.panels import DispatchPanel
from claimcheck.tui.safe import clean, literal
from claimcheck.tui.screens import ConfirmScreen, CoverageScreen, ReportScreen
from claimcheck.tui.stage_view import TABS, RunEnded, StageView
from claimcheck.tui.stage_words import artifact_readiness, freeze_question, state_words
from claimcheck.tui.widgets import NotesPanel, StageNavigator


def needs_attention(session: Session) -> str:
    """The stage a reopened session opens on: a job still running (dispatch), else the first stage
    not frozen, else the verdict (artifact)."""
    from claimcheck.engine.training.jobfiles import session_job_phases

    jobs = session_job_phases(session.path / "jobs") if (session.path / "jobs").is_dir() else []
    if any(not is_terminal(stage) for stage in jobs if stage not in ("unknown", "unreadable")):
        return "dispatch"
    states = session.states()
    return next((name for name in registry.STAGE_NAMES if states.get(name) != "frozen"), "artifact")


class SessionScreen(Screen):
    """Navigator on the left, the current stage's page on the right, keys in the footer."""

    # Priority: these work even while an editor has focus (TextArea binds f6 to "select line").
    BINDINGS = [
        Binding("ctrl+r", "run", "Run", priority=True),
        Binding("ctrl+f", "freeze", "Freeze", priority=True),
        Binding("ctrl+g", "cancel", "Cancel", priority=True),
        Binding("ctrl+n", "note", "Note", priority=True),
        Binding("ctrl+l", "stages", "Stages", priority=True),
        Binding("f1", "app.help", "Help", priority=True),
        Binding("f2", "tab('form')", "Form", show=False, priority=True),
        Binding("f3", "tab('checks')", "Checks", show=False, priority=True),
        Binding("f4", "tab('visual')", "Visual", show=False, priority=True),
        Binding("f5", "tab('notes')", "Notes", show=False, priority=True),
        Binding("f6", "tab('data')", "Data", show=False, priority=True),
        Binding("f7", "coverage", "Coverage", show=False, priority=True),
        Binding("f8", "report", "Report", show=False, priority=True),
        Binding("ctrl+t", "app.next_theme", "Theme", show=False, priority=True),
        # Not priority: in the TOML editor ctrl+y stays "redo".
        Binding("ctrl+y", "copy_check", "Copy", show=False),
        # Not priority: an open choice list or dialog takes Escape first; otherwise it clears messages.
        Binding("escape", "clear_messages", "Clear messages", show=False),
    ]

    def __init__(
        self,
        session: Session,
        initial_inputs: Callable[[Session, str], dict[str, Any]],
        recipe_inputs: Callable[[Session, str], dict[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.initial_inputs = initial_inputs
        self.recipe_inputs = recipe_inputs
        self.current = needs_attention(session)

    def compose(self) -> ComposeResult:
        title = Text("claimcheck · ", style="bold")
        title.append_text(literal(self.session.meta.title or self.session.meta.id, limit=40))
        title.append(" · ", style="dim")
        title.append_text(literal(self.session.meta.recipe or "no recipe", "dim", limit=30))
        yield Static(title, id="title-bar")
        with Horizontal(id="body"):
            yield StageNavigator([(s.name, s.title) for s in registry.STAGES], id="nav")
            yield ContentSwitcher(id="pages")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.refresh_states()
        self.go(self.current)
        drafts = [s.name for s in registry.STAGES if draft_path(self.session.path, s.name).exists()]
        if drafts:  # each form restores its own, with a notice; say so once, up front
            self.notify(f"unsaved edits kept from last time (drafts): {', '.join(drafts)}", timeout=8)
        self.set_timer(0.5, self._watch_jobs)

    def _watch_jobs(self) -> None:
        """Build the dispatch page (hidden) once the session has a job folder: its panel polls the
        job's files every second, so the navigator, the banners and the footer follow the job."""
        if self.view("dispatch") is not None or not (self.session.path / "jobs").is_dir():
            return
        page = StageView(
            registry.get("dispatch"),
            self.session,
            self.initial_inputs(self.session, "dispatch"),
            id="page-dispatch",
        )
        page.display = False
        self.query_one("#pages", ContentSwitcher).mount(page)

    @on(DispatchPanel.JobChanged)
    def _job_changed(self, event: DispatchPanel.JobChanged) -> None:
        """A job changed phase: redraw states and keys; a draft dispatch record that no longer says
        what the ended job did is recorded again (the job is adopted, never launched twice)."""
        self.refresh_states()
        self.refresh_bindings()
        ended = [op for op, phase in event.after.items() if is_terminal(phase)]
        if not ended or self._busy() is not None:
            return
        view = self.view("dispatch")
        record = self.session.record("dispatch")
        if view is None or record is None:
            return
        progress = (
            parse(record.check("dispatch.progress"), Progress) if record.check("dispatch.progress") else None
        )
        phase = clean(event.after.get(ended[-1], ""), limit=40)
        if progress is None or clean(progress.stage, limit=40) == phase:
            return
        if self.session.state("dispatch") != "draft":
            self.notify(
                f"the job ended ({phase}); the {self.session.state('dispatch')} dispatch record still says "
                f"'{clean(progress.stage, limit=40)}': re-run dispatch (ctrl+r) to record it",
                severity="warning",
                timeout=10,
            )
            return
        self.notify(f"the job ended ({phase}): recording the dispatch stage again")
        view.start_run(split_runtime("dispatch", record.inputs)[0], show_checks=False)  # stay on their tab
        self.refresh_states()

    @on(DispatchPanel.JobMoved)
    def _job_moved(self) -> None:
        """A step went by: the artifact's banner quotes it (the job view itself has redrawn)."""
        self._artifact_note()

    def _artifact_note(
        self, states: dict[str, str] | None = None, dispatch: StageRecord | None = None
    ) -> None:
        """The artifact page's banner line saying when it can run, from the latest job as polled."""
        artifact = self.view("artifact")
        if artifact is None:
            return
        try:
            state = (states or self.session.states())["dispatch"]
            record = dispatch if states is not None else self.session.record("dispatch")
        except EvidenceError:
            return  # refresh_states says why
        note = artifact_readiness(state, record, self._latest_job())
        if states is not None:  # refresh_states redraws every page next
            artifact.banner_note = note
        else:
            artifact.set_banner_note(note)

    # ------------------------------------------------------------ navigation

    def view(self, name: str | None = None) -> StageView | None:
        found = self.query(f"#page-{name or self.current}")
        return found.first(StageView) if found else None

    def go(self, name: str) -> None:
        self.current = name
        switcher = self.query_one("#pages", ContentSwitcher)
        if self.view(name) is None:
            spec = registry.get(name)
            recipe = self.recipe_inputs(self.session, name) if self.recipe_inputs else {}
            initial = self.initial_inputs(self.session, name)
            source = initial if name == "source" else self.initial_inputs(self.session, "source")
            switcher.mount(
                StageView(spec, self.session, initial, recipe=recipe, source=source, id=f"page-{name}")
            )
        switcher.current = f"page-{name}"
        if name == "artifact":
            self._artifact_note()
        nav = self.query_one(StageNavigator)
        nav.index = registry.get(name).index - 1

    @on(StageNavigator.Picked)
    def _picked(self, event: StageNavigator.Picked) -> None:
        self.go(event.name)
        view = self.view()
        if view is not None:
            view.form_on_pick = True
            self.call_after_refresh(view.open_form)

    def action_clear_messages(self) -> None:
        """Escape: the messages shown over the screen (errors too) are dismissed."""
        self.app.clear_notifications()

    def action_stages(self) -> None:
        self.query_one(StageNavigator).focus()

    def action_coverage(self) -> None:
        """Checklist coverage of the whole session, computed from the records as saved now."""
        from claimcheck.engine.report.coverage import compute

        if isinstance(self.app.screen, CoverageScreen):
            return
        cov = compute(self.session.records(), dict(self.session.states()))
        self.app.push_screen(CoverageScreen(cov))

    def action_report(self) -> None:
        """Write the report set (report.md, report.html, model-index.yaml) and show report.md."""
        if isinstance(self.app.screen, ReportScreen):
            return
        self.notify("writing the report…", timeout=3)
        self._write_report()

    @on(Button.Pressed, "#verdict-report")
    def _report_button(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_report()

    @work(thread=True, exclusive=True, group="report")
    def _write_report(self) -> None:
        from claimcheck.engine.report.build import write_report_set

        try:
            written = write_report_set(self.session.path)
            problems = [
                f"{stage} {row.check} {row.outcome}: {row.detail}"
                for stage, rows in written.failing.items()
                for row in rows
            ]
            self.post_message(self.ReportWritten(written.md.read_text("utf-8"), str(written.html), problems))
        except (OSError, EvidenceError) as exc:
            self.post_message(self.ReportWritten("", "", [], error=str(exc)))

    class ReportWritten(Message):
        def __init__(self, markdown: str, html: str, problems: list[str], error: str = "") -> None:
            super().__init__()
            self.markdown, self.html, self.problems, self.error = markdown, html, problems, error

    @on(ReportWritten)
    def _report_written(self, event: ReportWritten) -> None:
        if event.error:
            self.notify(clean(event.error), title="report not written", severity="error", timeout=10)
            return
        self.app.push_screen(ReportScreen(event.markdown, event.html, event.problems))

    def action_tab(self, tab: str) -> None:
        view = self.view()
        if view is not None and tab in TABS:
            view.show_tab(tab)

    def go_tab(self, name: str, tab: str = "form") -> None:
        self.go(name)
        self.call_after_refresh(self.action_tab, tab)

    # ------------------------------------------------------------ states

    def refresh_states(self) -> None:
        try:
            states = self.session.states()
            records = self.session.records()
        except EvidenceError as exc:
            self.notify(clean(str(exc)), severity="error", timeout=10)
            return
        words = {}
        for spec in registry.STAGES:
            view = self.view(spec.name)
            running = bool(view and view.running) or (spec.name == "dispatch" and self._job_running())
            words[spec.name] = state_words(states[spec.name], records.get(spec.name), running)
        self.query_one(StageNavigator).set_states(words)
        self._artifact_note(states, records.get("dispatch"))
        for view in self.query(StageView):
            view.refresh_record(states)

    def _latest_job(self) -> JobSnapshot | None:
        panels = self.query(DispatchPanel)
        jobs = panels.first().jobs if panels else []
        return jobs[-1] if jobs else None

    def _job_running(self) -> bool:
        panels = self.query("DispatchPanel")
        if panels:
            return any(j.running for j in panels.first().jobs)  # type: ignore[attr-defined]
        from claimcheck.tui.panels import poll_jobs

        try:  # liveness as the provider judges it (pid + heartbeat), not the job's last word alone
            return any(j.running for j in poll_jobs(self.session.path / "jobs"))
        except Exception:  # unreadable job files: the dispatch page says why
            return False

    # ------------------------------------------------------------ actions

    def _busy(self) -> StageView | None:
        return next((v for v in self.query(StageView) if v.running), None)

    def action_run(self) -> None:
        view = self.view()
        if view is None:
            return
        busy = self._busy()
        if busy is not None:
            self.notify(
                f"the {busy.spec.name} checks are still running: wait or cancel them (ctrl+g)",
                severity="warning",
            )
            return
        inputs, problem = view.form_values()
        if inputs is None:
            self.notify(clean(problem), title="cannot run", severity="error", timeout=8)
            return
        later = self.session.would_stale(view.spec.name)
        record = self.session.record(view.spec.name)
        if record is not None and record.provenance.frozen:
            body = Text(f"'{view.spec.name}' is frozen. Running it again starts a new revision.\n")
            body.append(
                "Later stages that become stale: "
                + (", ".join(later) if later else "none (none has a record yet)")
            )
            self.app.push_screen(
                ConfirmScreen("Run a frozen stage again?", body, yes="Run"),
                partial(self._confirmed_run, view, inputs),
            )
            return
        view.start_run(inputs)
        self.refresh_states()

    def _confirmed_run(self, view: StageView, inputs: dict[str, Any], yes: bool | None) -> None:
        if yes:
            view.start_run(inputs)
            self.refresh_states()

    def action_cancel(self) -> None:
        busy = self._busy()
        if busy is None or not busy.cancel_run():
            self.notify("nothing is running", severity="information")

    @on(RunEnded)
    def _run_ended(self, event: RunEnded) -> None:
        view = self.view(event.stage)
        if view is not None:
            view.finish_run(event)
        if event.record is not None:
            rec = event.record
            fails = sum(c.status == "fail" for c in rec.checks)
            self.notify(f"{event.stage}: {len(rec.checks)} checks, {fails} fail — draft saved", timeout=4)
        elif event.cancelled:
            self.notify(f"{event.stage}: {event.problem}", severity="warning")
        else:
            self.notify(
                clean(event.problem, limit=600),
                title=f"{event.stage} did not run",
                severity="error",
                timeout=12,
            )
        self.refresh_states()
        self._watch_jobs()

    def action_freeze(self) -> None:
        view = self.view()
        if view is None:
            return
        name = view.spec.name
        record = self.session.record(name)
        if record is None:
            self.notify(f"'{name}' has no record yet: run its checks first (ctrl+r)", severity="warning")
            return
        state = self.session.state(name)
        if state == "frozen":
            self.notify(f"'{name}' is already frozen", severity="information")
            return
        if state == "stale":  # refused before asking: freezing it would fail anyway
            self.notify(
                f"'{name}' is stale: an earlier stage changed. Re-run it (ctrl+r), then freeze.",
                title="not frozen",
                severity="error",
                timeout=10,
            )
            return
        body, risky = freeze_question(record, self.session.would_stale(name))
        self.app.push_screen(
            ConfirmScreen(f"Freeze {name}?", body, yes="Freeze", default_no=risky),
            partial(self._confirmed_freeze, name),
        )

    def _confirmed_freeze(self, name: str, yes: bool | None) -> None:
        if not yes:
            return
        try:
            self.session.freeze(name)
        except (StageOrderError, EvidenceError) as exc:
            self.notify(clean(str(exc)), title="not frozen", severity="error", timeout=10)
            return
        self.notify(f"{name} frozen")
        self.refresh_states()

    def action_note(self) -> None:
        self.action_tab("notes")

    @on(NotesPanel.Added)
    def _note(self, event: NotesPanel.Added) -> None:
        view = self.view()
        if view is None:
            return
        try:
            self.session.add_note(view.spec.name, event.tag, event.text)  # type: ignore[arg-type]
        except (StageOrderError, EvidenceError, ValueError) as exc:
            self.notify(clean(str(exc)), severity="error")
            return
        self.refresh_states()

    def action_copy_check(self) -> None:
        view = self.view()
        text = view.query_one("CheckDetail").copy_text if view else ""  # type: ignore[attr-defined]
        if not text:
            self.notify("no check selected to copy", severity="warning")
            return
        self.app.copy_to_clipboard(text)
        self.notify("check copied (OSC 52: works where the terminal allows it)")
