"""One stage's page: form, checks (table + detail), pictures and notes, plus the run bar.

The page never computes evidence: it hands the form's values to `Session.run_stage` in a thread
worker and shows the record that comes back. Progress and the result arrive as messages, so the
screen stays live; ctrl+g sets the run's cancel event, which the stage honours at its next
`ctx.check_cancelled()`.
"""

from __future__ import annotations

import threading
import time
import traceback
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Button, Label, ProgressBar, Static, TabbedContent, TabPane
from textual.widgets._tabbed_content import ContentTabs

from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.evidence import EvidenceError, StageRecord
from claimcheck.engine.ledger.drafts import draft_path, read_draft, remove_draft, write_draft
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline.context import Cancelled
from claimcheck.engine.pipeline.registry import StageSpec
from claimcheck.tui.form_checks import column_choices, form_check, form_order, own_placeholders
from claimcheck.tui.forms import FormSetup, StageForm
from claimcheck.tui.panels import DispatchPanel, VisualPanel
from claimcheck.tui.safe import clean, literal
from claimcheck.tui.search_panel import ContractPanel
from claimcheck.tui.stage_words import stage_banner, verdict_of
from claimcheck.tui.widgets import BoundedTable, CheckDetail, ChecksTable, Loader, NotesPanel

TABS = ("form", "checks", "visual", "notes", "data")
DRAFT_DELAY_S = 0.4  # a draft is written this long after the last edit
RUN_TEXT_LIMIT = 60  # a step's words, with the clock: two lines of the run bar at 80 columns
TAB_RETRIES, TAB_RETRY_S = 200, 0.05  # a tab asked for before the strip exists: retried for 10 s
REPORT_BUTTON = "f8 Report: write report.md and report.html, show report.md"


class RunProgress(Message):
    def __init__(self, stage: str, fraction: float | None, text: str) -> None:
        self.stage, self.fraction, self.text = stage, fraction, text
        super().__init__()


class RunEnded(Message):
    def __init__(self, stage: str, record: StageRecord | None, problem: str, cancelled: bool = False) -> None:
        self.stage, self.record, self.problem, self.cancelled = stage, record, problem, cancelled
        super().__init__()


def data_loader(files: list[str], workspace: Path) -> Loader:
    """Windows of the scanned data files (claimcheck.engine.data.rows.scan_files), row count computed once."""
    total: list[int] = []

    def load(start: int, count: int) -> tuple[list[str], list[Any], int]:
        import polars as pl

        from claimcheck.engine.data.rows import scan_files

        paths = [p if Path(p).is_absolute() else workspace / p for p in map(Path, files)]
        lf = scan_files(paths)
        if not total:
            total.append(int(lf.select(pl.len()).collect().item()))
        # row_id then the file's own columns; where each row came from is in row_id already.
        df = lf.slice(start, count).drop("source_file", "source_line", strict=False).collect()
        return list(df.columns), df.rows(), total[0]

    return load


class StageView(Vertical):
    """The page of one stage. Built once per stage and kept, so unsaved form edits survive navigation."""

    def __init__(
        self,
        spec: StageSpec,
        session: Session,
        initial: dict[str, Any],
        *,
        recipe: dict[str, Any] | None = None,
        source: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.session = session
        self.initial = initial
        self.recipe = recipe or {}
        self.source = source or {}  # the source stage's inputs: whose data the forms' examples speak of
        self.restored_draft = False
        self._order_note = ""  # why the form's first fields lead (form_order)
        self.form_on_pick = False  # set by the stage list: open_form shows the form unless f2..f6 came first
        self._draft_timer: Timer | None = None
        self._run_inputs: dict[str, Any] = {}
        self._show_checks_after = True
        self.module = spec.module()
        self.cancel_event: threading.Event | None = None
        self.running = False
        self._last_progress = 0.0
        self._run_started = 0.0
        self._run_text = ""
        self._pending_tab = ""
        # The tab last asked for (f2 … f6, a run's end, picking the stage): a late activation of the
        # strip's first tab while its page is still being built does not override it.
        self._wanted_tab = ""
        self._ready = False
        self.banner_note = ""  # a line the session screen adds under the state (when artifact can run)
        self.runs_finished = 0  # completed, failed or cancelled runs of this page (tests wait on it)

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        head = Text(f"{self.spec.index}/7 {self.spec.title}", style="bold")
        head.append(" — " + self.spec.question, style="italic")
        yield Static(head, classes="stage-head")
        yield Label("", classes="stage-state")
        if self.spec.name == "artifact":  # shown once the record holds a verdict
            report = Button(REPORT_BUTTON, id="verdict-report", compact=True, classes="verdict-report")
            report.display = False
            yield report
        with TabbedContent(initial="tab-form", classes="stage-tabs"):
            with TabPane("Form", id="tab-form"):
                yield from self._form()
            with TabPane("Checks", id="tab-checks"):
                yield ChecksTable(classes="checks-table")
                yield CheckDetail(classes="check-detail")
            with TabPane("Visual", id="tab-visual"):
                if self.spec.name == "dispatch":
                    yield DispatchPanel(self.session.path / "jobs", classes="visual")
                elif self.spec.name == "contract":  # with a declared search's trials, live
                    yield ContractPanel(self.session.path, classes="visual")
                else:
                    yield VisualPanel(self.spec.name, classes="visual")
            with TabPane("Notes", id="tab-notes"):
                yield NotesPanel(classes="notes")
            if self.spec.name == "source":
                with TabPane("Data", id="tab-data"):
                    yield BoundedTable(classes="data-rows")
        with Horizontal(classes="run-bar"):
            yield ProgressBar(total=100, show_eta=False, classes="run-progress")
            yield Label("", classes="run-text")

    def _form(self) -> ComposeResult:
        draft = read_draft(self.session.path, self.spec.name)
        notice = ""
        if draft is not None:
            self.restored_draft = True
            notice = (
                f"Restored unsaved edits ({draft_path(self.session.path, self.spec.name).name}); "
                "ctrl+r runs them, quitting asks to keep or discard them."
            )
        first, why = form_order(self.spec.name, self._claim_inputs())
        self._order_note = why
        notice = " ".join(n for n in (why, notice) if n)
        setup = FormSetup(
            self.module.Inputs,
            self.initial,
            recipe=self.recipe or {},
            draft=draft,
            notice=notice,
            check=form_check(self.spec.name, self.session.workspace),
            first=first,
            choices=column_choices(self.spec.name, self.session.workspace, self.initial),
            placeholders=own_placeholders(self.spec.name, self.session.workspace, self.source),
        )
        yield StageForm(setup, classes="stage-form")

    def _claim_inputs(self) -> dict[str, Any]:
        """The claim as recorded ({} before the claim stage has run)."""
        try:
            rec = self.session.record("claim")
        except EvidenceError:
            return {}
        return dict(rec.inputs) if rec is not None else {}

    def on_mount(self) -> None:
        self.query_one(".run-bar").display = False
        # the run bar's clock moves even while a stage step reports nothing (a long evaluation)
        self.set_interval(1.0, self._tick)
        self._ready = True
        self.refresh_record()
        if self._pending_tab:
            self.call_after_refresh(self.show_tab, self._pending_tab)
            self._pending_tab = ""

    # ------------------------------------------------------------ showing the record

    def refresh_record(self, states: dict[str, str] | None = None) -> None:
        if not self._ready:
            return  # on_mount draws it once the page is composed
        try:
            record = self.session.record(self.spec.name)
        except EvidenceError as exc:
            self.query_one(".stage-state", Label).update(literal(f"record unreadable: {exc}"))
            record = None
        else:
            state = (states or self.session.states())[self.spec.name]
            self.query_one(".stage-state", Label).update(self._state_line(state, record))
        for button in self.query("#verdict-report"):
            button.display = verdict_of(record) is not None
        self.query_one(ChecksTable).show(record)
        self.query_one(NotesPanel).show(record)
        visual = self.query_one(".visual")
        visual.show(record, self.session)  # type: ignore[attr-defined]

    def set_banner_note(self, note: str) -> None:
        """The line under the state (when the artifact stage can run), redrawn when it changes."""
        if note != self.banner_note:
            self.banner_note = note
            self.refresh_record()

    def _state_line(self, state: str, record: StageRecord | None) -> Text:
        t = stage_banner(state, record)
        if self.banner_note and record is None:
            t.append("\n")
            t.append_text(literal(self.banner_note, "italic", limit=200))
        return t

    @on(ChecksTable.Highlighted)
    def _highlighted(self, event: ChecksTable.Highlighted) -> None:
        event.stop()
        self.query_one(CheckDetail).show(event.check)

    def open_form(self) -> None:
        """The form, as picking the stage asks — unless a tab was asked for since (f4 typed right after)."""
        if self.form_on_pick:
            self.form_on_pick = False
            self.show_tab("form")

    def show_tab(self, tab: str, _tries: int = 0) -> None:
        if _tries == 0:
            self.form_on_pick = False
        if tab == "data" and self.spec.name != "source":
            return  # only the source page shows the data rows
        self._wanted_tab = tab
        tabs = self.query(TabbedContent)
        if not tabs:  # not composed yet: on_mount applies it
            self._pending_tab = tab
            return
        content = tabs.first()
        before = content.active
        try:
            content.active = f"tab-{tab}"
        except (ValueError, NoMatches):  # the tab strip is still being built: try again after a refresh
            # The value was stored before its watcher failed; put it back, or the retry is no change.
            content.set_reactive(TabbedContent.active, before)
            if _tries < TAB_RETRIES:  # a page with a large form can take seconds to build
                self.set_timer(TAB_RETRY_S, partial(self.show_tab, tab, _tries + 1))
            return
        target = {
            # Never an input or the editor: a stray key there would edit the stage's inputs.
            "form": ".stage-form .form-scroll" if self._fields_shown() else ".stage-form Tabs",
            "checks": "ChecksTable",
            "visual": ".visual",
            "notes": "#note-text",
            "data": ".data-rows DataTable",
        }[tab]
        found = self.query(target)
        if found:
            found.first().focus()

    def _fields_shown(self) -> bool:
        tabs = self.query(".form-tabs")
        return not tabs or tabs.first(TabbedContent).active == "form-fields"

    # ------------------------------------------------------------ the draft of unsaved edits

    @on(StageForm.Edited)
    def _edited(self, event: StageForm.Edited) -> None:
        event.stop()
        if self._draft_timer is not None:
            self._draft_timer.stop()
        self._draft_timer = self.set_timer(DRAFT_DELAY_S, self.save_draft)

    def save_draft(self) -> bool:
        """Keep the form's unsaved edits beside the record (or drop the draft when there are none)."""
        self._draft_timer = None
        forms = self.query(StageForm)
        if not forms:
            return False
        form = forms.first()
        if form.dirty:
            write_draft(self.session.path, self.spec.name, form.toml_text)
            return True
        remove_draft(self.session.path, self.spec.name)
        self._drop_restored_notice()
        return False

    def _drop_restored_notice(self) -> None:
        """The draft is gone (edits undone, or recorded by a run): its 'Restored …' notice goes too."""
        if self.restored_draft:
            self.restored_draft = False
            for form in self.query(StageForm):
                form.set_notice(self._order_note)

    def flush_draft(self) -> None:
        """Bring a draft still waiting for its timer up to date now (written, or removed where the
        form is back to its record): quitting must not leave one from a keystroke ago."""
        if self._draft_timer is not None:
            self._draft_timer.stop()
            self.save_draft()

    def discard_draft(self) -> None:
        if self._draft_timer is not None:
            self._draft_timer.stop()
            self._draft_timer = None
        remove_draft(self.session.path, self.spec.name)
        self._drop_restored_notice()

    @property
    def dirty(self) -> bool:
        forms = self.query(StageForm)
        return bool(forms) and forms.first().dirty

    @on(TabbedContent.TabActivated)
    def _tab(self, event: TabbedContent.TabActivated) -> None:
        if not event.tabbed_content.has_class("stage-tabs"):
            return  # the form's own Fields / TOML tabs
        strip = event.tabbed_content.query(ContentTabs)
        wanted = f"tab-{self._wanted_tab}"
        if self._wanted_tab and event.pane.id != wanted and not (strip and strip.first().has_focus):
            # The strip activates its first tab when it is mounted, which can come after a key that
            # asked for another tab (f3 pressed while the page was still being built): keep the key's.
            self.call_after_refresh(self.show_tab, self._wanted_tab)
            return
        if event.pane.id != wanted:
            self._wanted_tab = (event.pane.id or "").removeprefix("tab-")  # moved on the strip itself
        if event.pane.id == "tab-data":
            self._show_rows()

    def _show_rows(self) -> None:
        """The rows of the data files named in the form (else the record): a window, never all of them."""
        inputs, _ = self.form_values()
        if inputs is None:
            record = self.session.record(self.spec.name)
            inputs = record.inputs if record else {}
        files = [str(f) for f in inputs.get("files", [])]
        self.query_one(BoundedTable).set_loader(data_loader(files, self.session.workspace))

    # ------------------------------------------------------------ running

    def form_values(self) -> tuple[dict[str, Any] | None, str]:
        return self.query_one(StageForm).collect()

    def start_run(self, inputs: dict[str, Any], show_checks: bool = True) -> None:
        """Run the stage in a worker; `show_checks`: open the Checks tab when it ends (a run the
        person asked for), or leave the tab they are on (a run the app started by itself)."""
        self._run_inputs = inputs
        self._show_checks_after = show_checks
        self.cancel_event = threading.Event()
        self.running = True
        bar = self.query_one(".run-bar")
        bar.display = True
        # A determinate bar from the start: the indeterminate one animates non-stop, costly over SSH.
        self.query_one(ProgressBar).update(total=100, progress=0)
        self._run_started, self._run_text = time.monotonic(), "starting… (ctrl+g cancels)"
        self._tick()
        self._run(inputs, self.cancel_event)

    def cancel_run(self) -> bool:
        if not self.running or self.cancel_event is None:
            return False
        self.cancel_event.set()
        self._run_text = "cancelling… (the stage stops at its next checkpoint)"
        labels = self.query(".run-text")  # gone already when the app is closing
        if labels:
            labels.first(Label).update("cancelling… (the stage stops at its next checkpoint)")
        return True

    @work(thread=True, exclusive=True, group="stage-run")
    def _run(self, inputs: dict[str, Any], cancel: threading.Event) -> None:
        name = self.spec.name

        def progress(fraction: float | None, message: str) -> None:
            now = time.monotonic()
            # At most ~20 updates a second reach the screen; the stage may report far more often.
            if fraction is not None and fraction < 1.0 and now - self._last_progress < 0.05:
                return
            self._last_progress = now
            self.post_message(RunProgress(name, fraction, message))

        # wait=False: dispatch records the launch and returns; the Visual tab follows the job live.
        ctx = self.session.context(name, progress=progress, cancel_event=cancel, wait=False)
        try:
            record = self.session.run_stage(name, inputs, ctx)
        except Cancelled:
            self.post_message(RunEnded(name, None, "cancelled: nothing was saved", cancelled=True))
        except (ClaimcheckError, FileExistsError) as exc:
            self.post_message(RunEnded(name, None, str(exc)))
        except Exception as exc:  # a bug in a stage: show it plainly, keep the app alive
            tb = traceback.format_exc(limit=3)
            self.post_message(RunEnded(name, None, f"unexpected error {type(exc).__name__}: {exc}\n{tb}"))
        else:
            self.post_message(RunEnded(name, record, ""))

    def on_run_progress(self, event: RunProgress) -> None:
        if event.fraction is not None:  # no fraction: the message alone says what is happening
            self.query_one(ProgressBar).update(progress=max(0.0, min(1.0, event.fraction)) * 100)
        self._run_text = clean(event.text, limit=RUN_TEXT_LIMIT)
        self._tick()

    def _tick(self) -> None:
        """The run bar's text with how long the run has taken: '1 min 05 s · predicting the test'."""
        if not self.running:
            return
        from claimcheck.engine.training.pace import duration

        elapsed = duration(time.monotonic() - self._run_started)
        self.query_one(".run-text", Label).update(literal(f"{elapsed} · {self._run_text}"))

    def finish_run(self, event: RunEnded) -> None:
        self.runs_finished += 1
        self.running = False
        self.cancel_event = None
        self.query_one(".run-bar").display = False
        if event.record is not None:
            # The record holds these inputs now: they are no unsaved edit any more.
            forms = self.query(StageForm)
            if forms:
                forms.first().initial = dict(self._run_inputs)
            self.discard_draft()
            self.save_draft()  # edits typed while it ran are still unsaved
            if self._show_checks_after:
                self.show_tab("checks")
