"""The claimcheck Textual app and the one factory the CLI and the tests use.

    make_app(session_dir=None, *, recipe=None, workspace=None, new_session_root=None) -> App

Without a session the app opens on the start screen (new session from a recipe and a data file, or
reopen one found under the runs folder). A session is opened with its lock; a lock held by a live
process is reported with its holder, one left by a dead process can be taken over.

Start-up stays fast: no torch / transformers / scikit-learn here; stage modules are imported when
a stage page is first built.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Static

from engine import registry
from engine.core import split_runtime
from engine.evidence import EvidenceError, StageRecord
from engine.session import (
    Session,
    SessionLocked,
    StageOrderError,
    describe_holder,
    find_sessions,
    new_session_id,
)
from tui.safe import clean, literal
from tui.screens import ConfirmScreen, CoverageScreen, HelpScreen, LockedScreen, StartScreen
from tui.stage_view import TABS, RunEnded, StageView
from tui.widgets import NotesPanel, StageNavigator, state_words

DEFAULT_RECIPE = "text-classification-qlora"
THEMES = ("textual-dark", "textual-light", "ansi-dark", "ansi-light")


def _recipes() -> tuple[list[tuple[str, str]], Any]:
    """(recipes, loader) — guarded: a missing or broken recipes module leaves the forms on defaults."""
    try:
        from engine.recipes import list_recipes, load_recipe
    except ImportError:
        return [], None
    try:
        return list_recipes(), load_recipe
    except (OSError, EvidenceError):
        return [], load_recipe


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = (
            _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
        )
    return out


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


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
        Binding("ctrl+t", "app.next_theme", "Theme", show=False, priority=True),
        # Not priority: in the TOML editor ctrl+y stays "redo".
        Binding("ctrl+y", "copy_check", "Copy", show=False),
    ]

    def __init__(self, session: Session, initial_inputs: Callable[[Session, str], dict[str, Any]]) -> None:
        super().__init__()
        self.session = session
        self.initial_inputs = initial_inputs
        self.current = registry.STAGES[0].name
        # Which stage modules exist; learned in a background thread so start-up imports only the claim.
        self.built: dict[str, bool] = {}

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
        # After the first paint: importing every stage module must not delay the first usable screen.
        self.set_timer(0.3, self._probe_stages)

    @work(thread=True, group="probe")
    def _probe_stages(self) -> None:
        built = {spec.name: spec.module() is not None for spec in registry.STAGES}
        self.post_message(self.Probed(built))  # dropped quietly if the app closed meanwhile

    class Probed(Message):
        def __init__(self, built: dict[str, bool]) -> None:
            self.built = built
            super().__init__()

    def on_session_screen_probed(self, event: Probed) -> None:
        self.built = event.built
        self.refresh_states()

    # ------------------------------------------------------------ navigation

    def view(self, name: str | None = None) -> StageView | None:
        found = self.query(f"#page-{name or self.current}")
        return found.first(StageView) if found else None

    def go(self, name: str) -> None:
        self.current = name
        switcher = self.query_one("#pages", ContentSwitcher)
        if self.view(name) is None:
            spec = registry.get(name)
            switcher.mount(
                StageView(spec, self.session, self.initial_inputs(self.session, name), id=f"page-{name}")
            )
        switcher.current = f"page-{name}"
        nav = self.query_one(StageNavigator)
        nav.index = registry.get(name).index - 1

    @on(StageNavigator.Picked)
    def _picked(self, event: StageNavigator.Picked) -> None:
        self.go(event.name)
        view = self.view()
        if view is not None:
            self.call_after_refresh(view.show_tab, "form")

    def action_stages(self) -> None:
        self.query_one(StageNavigator).focus()

    def action_coverage(self) -> None:
        """Checklist coverage of the whole session, computed from the records as saved now."""
        from engine.coverage import compute

        if isinstance(self.app.screen, CoverageScreen):
            return
        cov = compute(self.session.records(), dict(self.session.states()))
        self.app.push_screen(CoverageScreen(cov))

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
            words[spec.name] = state_words(
                states[spec.name], records.get(spec.name), running, self.built.get(spec.name, True)
            )
        self.query_one(StageNavigator).set_states(words)
        for view in self.query(StageView):
            view.refresh_record(states)

    def _job_running(self) -> bool:
        panels = self.query("DispatchPanel")
        if panels:
            return any(j.get("running") for j in panels.first().jobs)  # type: ignore[attr-defined]
        from tui.panels import poll_jobs

        try:  # liveness as the provider judges it (pid + heartbeat), not the job's last word alone
            return any(j.get("running") for j in poll_jobs(self.session.path / "jobs"))
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
        later = self.session.would_stale(name)
        body = Text()
        body.append(
            f"Freezing '{name}' records that you accept its {len(record.checks)} checks as evidence.\n"
        )
        fails = [c.id for c in record.checks if c.status == "fail"]
        if fails:
            body.append(f"{len(fails)} check(s) FAIL: " + ", ".join(fails) + "\n", style="bold")
        body.append(
            "Later stages made stale by this: "
            + (", ".join(later) if later else "none (no later stage has a record)")
        )
        self.app.push_screen(
            ConfirmScreen(f"Freeze {name}?", body, yes="Freeze"), partial(self._confirmed_freeze, name)
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


class ClaimcheckApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "claimcheck"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("f1", "help", "Help", show=False),
        Binding("ctrl+t", "next_theme", "Theme", show=False),
    ]

    def __init__(
        self,
        session_dir: Path | None = None,
        *,
        recipe: str | None = None,
        workspace: Path | None = None,
        new_session_root: Path | None = None,
        session_id: str | None = None,
        data_file: str = "",
    ) -> None:
        super().__init__()
        self.session_dir = Path(session_dir) if session_dir else None
        self.recipe = recipe
        self.workspace = Path(workspace or Path.cwd()).resolve()
        self.runs_root = Path(new_session_root) if new_session_root else self.workspace / "runs"
        self.session_id = session_id
        self.data_file = data_file
        self.session: Session | None = None
        self.overrides: dict[str, dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Static("claimcheck", id="splash")

    def on_mount(self) -> None:
        if self.session_dir is not None:
            self.open_session(self.session_dir)
        else:
            self.show_start()

    def on_unmount(self) -> None:
        self.cancel_running()
        self.release()

    async def action_quit(self) -> None:
        # A stage thread still computing would keep the process alive after the screen closed:
        # ask it to stop at its next checkpoint (a training job is a separate process and goes on).
        self.cancel_running()
        await super().action_quit()

    def cancel_running(self) -> None:
        for screen in self.screen_stack:
            for view in screen.query(StageView):
                view.cancel_run()

    def release(self) -> None:
        if self.session is not None:
            self.session.lock.release()

    # ------------------------------------------------------------ start / open

    def show_start(self) -> None:
        recipes, _ = _recipes()
        sessions = []
        for path in find_sessions(self.runs_root):
            try:
                s = Session.open(path)
                states = s.states()
                frozen = sum(v == "frozen" for v in states.values())
                sessions.append(
                    (path, f"{frozen}/7 frozen · {s.meta.recipe or 'no recipe'} · {s.meta.title}")
                )
            except EvidenceError as exc:
                sessions.append((path, f"unreadable: {exc.problem}"))
        shown = self.runs_root
        if shown.resolve().is_relative_to(self.workspace):
            shown = shown.resolve().relative_to(self.workspace)
        self.push_screen(StartScreen(recipes, self.recipe or DEFAULT_RECIPE, sessions, shown, self.data_file))

    def create_session(self, recipe: str, data_file: str, title: str) -> None:
        sid = self.session_id or new_session_id()
        path = self.runs_root / sid
        try:
            Session.create(path, title=title, recipe=recipe, workspace=self.workspace, session_id=sid)
        except (FileExistsError, OSError, EvidenceError) as exc:
            self.notify(clean(str(exc)), title="session not created", severity="error", timeout=10)
            return
        if data_file:
            self.overrides["source"] = {"files": [data_file]}
            if not (self.workspace / data_file).exists():
                self.notify(
                    f"data file not found yet: {clean(data_file)} (relative to {self.workspace})",
                    severity="warning",
                )
        self.open_session(path)

    def open_session(self, path: Path, take_over: bool = False) -> None:
        try:
            session = Session.open(path)
        except EvidenceError as exc:
            self.notify(clean(str(exc)), title="cannot open", severity="error", timeout=10)
            if not isinstance(self.screen, StartScreen):
                self.show_start()
            return
        try:
            session.lock.acquire(take_over_stale=take_over)
        except SessionLocked as exc:
            self.push_screen(
                LockedScreen(self._locked_message(path, exc), exc.stale), partial(self._lock_answer, path)
            )
            return
        self.session = session
        self.push_screen(SessionScreen(session, self.initial_inputs))

    def _locked_message(self, path: Path, exc: SessionLocked) -> str:
        shown = path.resolve()
        if shown.is_relative_to(self.workspace):
            shown = shown.relative_to(self.workspace)
        who = describe_holder(exc.holder)
        if exc.stale:
            return f"Session {shown} was left locked by {who}, and that process is gone. Take it over to continue."
        return (
            f"Session {shown} is open in another claimcheck ({who}). Close that one first, "
            "or open a copy of the session folder."
        )

    def _lock_answer(self, path: Path, answer: str | None) -> None:
        if answer == "take_over":
            self.open_session(path, take_over=True)
        elif not isinstance(self.screen, StartScreen):
            self.show_start()

    def initial_inputs(self, session: Session, name: str) -> dict[str, Any]:
        """A stage's form start: its recorded inputs, else the recipe's defaults over the Inputs() defaults.

        Runtime knobs an older record or recipe still holds (dispatch's `wait`, ...) are left out: they
        are no stage input any more (engine/core.py), and the app never waits for a job.
        """
        try:
            rec: StageRecord | None = session.record(name)
        except EvidenceError:
            rec = None
        if rec is not None:
            return split_runtime(name, rec.inputs)[0]
        recipe_name = session.meta.recipe or self.recipe or ""
        recipe: dict[str, Any] = {}
        _, loader = _recipes()
        if recipe_name and loader is not None:
            try:
                recipe = loader(recipe_name).get(name, {})
            except (EvidenceError, OSError) as exc:
                self.notify(clean(str(exc)), title="recipe not loaded", severity="warning", timeout=8)
        module = registry.get(name).module()
        base = _drop_none(module.Inputs().model_dump(mode="json")) if module is not None else {}
        return split_runtime(name, _merge(_merge(base, recipe), self.overrides.get(name, {})))[0]

    # ------------------------------------------------------------ app-wide actions

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_next_theme(self) -> None:
        current = self.theme if self.theme in THEMES else THEMES[-1]
        self.theme = THEMES[(THEMES.index(current) + 1) % len(THEMES)]
        self.notify(f"theme: {self.theme}")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help: keys", "List every key", self.action_help)
        yield SystemCommand(
            "Next theme",
            "dark → light → ANSI dark → ANSI light (the terminal's 16 colours)",
            self.action_next_theme,
        )
        if isinstance(screen, SessionScreen):
            yield SystemCommand("Run checks", "Run the current stage's checks (ctrl+r)", screen.action_run)
            yield SystemCommand("Cancel run", "Cancel the running checks (ctrl+g)", screen.action_cancel)
            yield SystemCommand("Freeze stage", "Accept the current stage (ctrl+f)", screen.action_freeze)
            yield SystemCommand("Add note", "Tagged note on the current stage (ctrl+n)", screen.action_note)
            yield SystemCommand(
                "Copy check", "Copy the selected check via OSC 52 (ctrl+y)", screen.action_copy_check
            )
            yield SystemCommand("Stage list", "Focus the stage navigator (ctrl+l)", screen.action_stages)
            yield SystemCommand(
                "Coverage", "Checklist coverage: REFORMS, leakage, AI Act map (f7)", screen.action_coverage
            )
            for tab in TABS:
                yield SystemCommand(
                    f"Show {tab}", f"The {tab} tab of the current stage", partial(screen.action_tab, tab)
                )
            for spec in registry.STAGES:
                yield SystemCommand(
                    f"Go to {spec.index} {spec.title}", spec.question, partial(screen.go_tab, spec.name)
                )


def make_app(
    session_dir: Path | None = None,
    *,
    recipe: str | None = None,
    workspace: Path | None = None,
    new_session_root: Path | None = None,
    session_id: str | None = None,
    data_file: str = "",
) -> App:
    """The one way to build the app (CLI and tests). `session_id` / `data_file` pre-fill the start screen."""
    return ClaimcheckApp(
        session_dir,
        recipe=recipe,
        workspace=workspace,
        new_session_root=new_session_root,
        session_id=session_id,
        data_file=data_file,
    )
