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
import os
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from claimcheck.engine.evidence import EvidenceError, StageRecord
from claimcheck.engine.ledger.lock import SessionLocked, describe_holder
from claimcheck.engine.ledger.session import Session, find_sessions, new_session_id
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.core import split_runtime
from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE
from claimcheck.engine.stages.own_data import ColumnChoice, Suggestion
from claimcheck.tui.data_screen import DataFileScreen
from claimcheck.tui.quit_dialog import DISCARD, SAVE, QuitScreen
from claimcheck.tui.safe import clean
from claimcheck.tui.screens import HelpScreen, LockedScreen, StartScreen
from claimcheck.tui.session_screen import SessionScreen
from claimcheck.tui.stage_view import TABS, StageView

__all__ = ["ClaimcheckApp", "SessionScreen", "make_app"]

THEMES = ("textual-dark", "textual-light", "ansi-dark", "ansi-light")
# The theme a terminal starts with, by how many colours it draws. In 16 colours textual-dark's
# amber warning (#ffa62b) comes out as bright red, the same as a failure: the ANSI theme names the
# terminal's own yellow and red instead. 256 colours and truecolor keep amber apart from red.
THEME_FOR_COLOURS = {"16": "ansi-dark", "256": "textual-dark", "truecolor": "textual-dark"}


def colour_depth(environ: dict[str, str]) -> str:
    """'16', '256' or 'truecolor', the way Textual and Rich read the environment."""
    forced = environ.get("TEXTUAL_COLOR_SYSTEM", "").strip().lower()
    if forced in ("standard", "256", "truecolor"):
        return {"standard": "16"}.get(forced, forced)
    if environ.get("COLORTERM", "").strip().lower() in ("truecolor", "24bit"):
        return "truecolor"
    colours = environ.get("TERM", "").strip().lower().rpartition("-")[2]
    return "256" if colours == "256color" else ("truecolor" if colours in ("direct", "truecolor") else "16")


def _recipes() -> tuple[list[tuple[str, str]], Any]:
    """(recipes, loader) — guarded: a missing or broken recipes module leaves the forms on defaults."""
    try:
        from claimcheck.engine.pipeline.recipes import list_recipes, load_recipe
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
        # session folder -> the stage values of a session on the person's own data (its recipe
        # without the sample's values, the picked columns); they replace the recipe's in the forms
        self.own_recipes: dict[Path, dict[str, dict[str, Any]]] = {}

    def compose(self) -> ComposeResult:
        yield Static("claimcheck", id="splash")

    def on_mount(self) -> None:
        if not self.is_headless:  # tests and snapshots keep the default theme
            self.theme = THEME_FOR_COLOURS[colour_depth(dict(os.environ))]
        if self.session_dir is not None:
            self.open_session(self.session_dir)
        else:
            self.show_start()

    def on_unmount(self) -> None:
        self.cancel_running()
        self.release()

    async def action_quit(self) -> None:
        if isinstance(self.screen, QuitScreen):
            return
        dirty = [v for screen in self.screen_stack for v in screen.query(StageView) if v.dirty]
        if dirty:  # ask, as editors do: save a draft, discard, or stay
            self.push_screen(QuitScreen([v.spec.name for v in dirty]), partial(self._quit_answer, dirty))
            return
        await self._quit()

    async def _quit_answer(self, views: list[StageView], answer: str | None) -> None:
        if answer == SAVE:
            for view in views:
                view.save_draft()
        elif answer == DISCARD:
            for view in views:
                view.discard_draft()
        else:
            return
        await self._quit()

    async def _quit(self) -> None:
        # A stage thread still computing would keep the process alive after the screen closed:
        # ask it to stop at its next checkpoint (a training job is a separate process and goes on).
        self.cancel_running()
        for screen in self.screen_stack:
            for view in screen.query(StageView):
                view.flush_draft()
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

    def choose_data_file(self, data_file: str, title: str) -> None:
        """The new-session flow from a data file: its columns, the pickers, the suggested recipe."""
        self.push_screen(DataFileScreen(self.workspace, data_file, title, runs=self.runs_root))

    def _new_session(self, recipe: str, title: str) -> Path | None:
        sid = self.session_id or new_session_id()
        path = self.runs_root / sid
        try:
            Session.create(path, title=title, recipe=recipe, workspace=self.workspace, session_id=sid)
        except (FileExistsError, OSError, EvidenceError) as exc:
            self.notify(clean(str(exc)), title="session not created", severity="error", timeout=10)
            return None
        return path

    def create_session(self, recipe: str, title: str) -> None:
        """A session on the sample data: the recipe's files are copied into the workspace where missing."""
        path = self._new_session(recipe, title)
        if path is None:
            return
        self._bring_sample_data(recipe)
        self.open_session(path)

    def create_own_session(self, choice: ColumnChoice, suggestion: Suggestion, title: str) -> None:
        """A session on the person's file: the suggested recipe without its sample values, the
        picked columns in the forms (engine/stages/own_data.py)."""
        from claimcheck.engine.stages.own_data import own_data_recipe

        _, loader = _recipes()
        try:
            recipe = loader(suggestion.recipe) if loader else {}
        except EvidenceError as exc:
            self.notify(clean(str(exc)), title="recipe not loaded", severity="error", timeout=10)
            return
        path = self._new_session(suggestion.recipe, title)
        if path is None:
            return
        self.own_recipes[path.resolve()] = own_data_recipe(recipe, choice, suggestion)
        self.notify(clean(f"recipe {suggestion.recipe}: {suggestion.reason}"), title="suggested recipe")
        while isinstance(self.screen, DataFileScreen):
            self.pop_screen()
        self.open_session(path)

    def _bring_sample_data(self, recipe: str) -> None:
        """A session on the sample data: its files copied into the workspace where they are missing."""
        from claimcheck.engine.pipeline.examples import SAMPLE_FOLDER, copy_sample_data, needs_sample_data

        _, load = _recipes()
        try:
            files = load(recipe).get("source", {}).get("files", []) if load and recipe else []
        except EvidenceError:
            return
        if not needs_sample_data(files, self.workspace):
            return
        try:
            copied = copy_sample_data(self.workspace)
        except OSError as exc:
            self.notify(clean(str(exc)), title="sample data not copied", severity="error", timeout=10)
            return
        self.notify(
            f"copied the sample data into {clean(str(self.workspace / SAMPLE_FOLDER))} "
            f"({len(copied.written)} files)"
        )

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
        self.push_screen(SessionScreen(session, self.initial_inputs, self.recipe_inputs))

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
        are no stage input any more (engine/pipeline/core.py), and the app never waits for a job.
        """
        try:
            rec: StageRecord | None = session.record(name)
        except EvidenceError:
            rec = None
        if rec is not None:
            return split_runtime(name, rec.inputs)[0]
        recipe = self.recipe_inputs(session, name)
        module = registry.get(name).module()
        base = _drop_none(module.Inputs().model_dump(mode="json"))
        return split_runtime(name, _merge(_merge(base, recipe), self.overrides.get(name, {})))[0]

    def _own_recipe_again(self, session: Session) -> dict[str, dict[str, Any]] | None:
        """A reopened session on the person's file: its start values rebuilt from the recorded claim
        and source (None for a session on the sample data, or before both are recorded)."""
        from claimcheck.engine.data.peek import peek
        from claimcheck.engine.errors import ClaimcheckError
        from claimcheck.engine.stages.own_data import on_own_data, own_data_recipe, reopened

        try:
            claim, source = session.record("claim"), session.record("source")
        except EvidenceError:
            return None
        _, loader = _recipes()
        if claim is None or source is None or loader is None or not session.meta.recipe:
            return None
        files = [str(f) for f in source.inputs.get("files") or []]
        if not on_own_data(files):
            return None
        try:
            seen = peek(session.workspace, files[0])
            picked = reopened(session.meta.recipe, dict(claim.inputs), dict(source.inputs), seen)
            recipe = loader(session.meta.recipe)
        except (ClaimcheckError, OSError, ValueError):
            return None  # the forms fall back to the recipe; the source check says what is wrong
        if picked is None:
            return None
        own = own_data_recipe(recipe, *picked)
        self.own_recipes[session.path.resolve()] = own
        return own

    def recipe_inputs(self, session: Session, name: str) -> dict[str, Any]:
        """The values the session's recipe gives a stage ({} without a recipe): the form marks them."""
        own = self.own_recipes.get(session.path.resolve()) or self._own_recipe_again(session)
        if own is not None:
            stage = own.get(name, {})
            return split_runtime(name, stage)[0] if isinstance(stage, dict) else {}
        recipe_name = session.meta.recipe or self.recipe or ""
        _, loader = _recipes()
        if not recipe_name or loader is None:
            return {}
        try:
            recipe = loader(recipe_name).get(name, {})
        except (EvidenceError, OSError) as exc:
            self.notify(clean(str(exc)), title="recipe not loaded", severity="warning", timeout=8)
            return {}
        return split_runtime(name, recipe)[0] if isinstance(recipe, dict) else {}

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
                "Report",
                "Write report.md, report.html and model-index.yaml; show report.md (f8)",
                screen.action_report,
            )
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
