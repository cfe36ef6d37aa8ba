"""A new session from the person's own data file: pick the file inside the workspace, see its columns
and first rows, pick the label, input, text, id, entity, time and weight columns from the file's own
columns,
and take the recipe suggested for the task and this machine (with the reason shown).

The screen computes nothing: the file's schema and preview come from claimcheck.engine.data.peek, the
suggestion and the stage values from claimcheck.engine.stages.own_data. Every cell, column name and
path is shown through tui/safe.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, DirectoryTree, Footer, Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection

from claimcheck.engine.data.peek import DATA_SUFFIXES, DataPeek, peek, workspace_file
from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.stages.own_data import ColumnChoice, Suggestion, suggest
from claimcheck.engine.stages.own_sizing import Machine
from claimcheck.tui.safe import LiteralInput, literal
from claimcheck.tui.widgets import TickList

NO_COLUMN = ""  # the Select value of "(none)"
# The pickers, each: (widget id, label, many columns, which column kinds it offers; () = every kind)
PICKERS: tuple[tuple[str, str, bool, tuple[str, ...]], ...] = (
    ("pick-label", "Label column (the target)", False, ()),
    ("pick-inputs", "Input columns (what the model reads at prediction time)", True, ()),
    ("pick-text", "Text columns (the free-text inputs)", True, ("text", "nested")),
    ("pick-id", "Id column (names each row; optional)", False, ()),
    ("pick-entities", "Entity columns (who or what a row is about; splits keep them together)", True, ()),
    ("pick-time", "Time column (optional)", False, ("date", "number", "text")),
    ("pick-weight", "Weight column (per-row sample weights, numeric; optional)", False, ("number",)),
)


class DataTree(DirectoryTree):
    """The workspace's folders and the data files the engine reads; nothing that leads out of it,
    and not the sessions' folder (`runs`: evidence, not data)."""

    def __init__(self, workspace: Path, runs: Path | None = None, **kwargs: Any) -> None:
        super().__init__(workspace, **kwargs)
        self.workspace = workspace.resolve()
        self.runs = runs.resolve() if runs is not None else None

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        for path in paths:
            if path.name.startswith("."):
                continue
            try:
                real = path.resolve()
            except OSError:
                continue
            if not real.is_relative_to(self.workspace) or real == self.runs:  # a symlink out of it
                continue
            if path.is_dir() or path.suffix.lower() in DATA_SUFFIXES:
                yield path


def column_prompt(c: Any) -> Text:
    """One column as a picker shows it: name · type · a few values (literal: a name is never markup)."""
    values = ", ".join(c.values[:3])
    return literal(f"{c.name} · {c.dtype} · {values}", limit=70)


def schema_text(p: DataPeek) -> Text:
    t = Text(f"{len(p.columns)} columns; values and counts from the first {p.rows_read:,} rows\n", "dim")
    for c in p.columns:
        t.append_text(literal(f"{c.name[:20]:<20} {c.dtype[:9]:<9} {c.distinct:>6} distinct  ", limit=60))
        t.append_text(literal(", ".join(c.values[:4]), "dim", limit=26))
        t.append("\n")
    return t


def preview_text(p: DataPeek) -> Text:
    t = Text("First rows (literal, cells cut at 14 characters)\n", "dim")
    t.append_text(literal(" | ".join(n[:14] for n in p.names()), "bold", limit=76))
    for row in p.preview:
        t.append("\n")
        t.append_text(literal(" | ".join(v.replace("\n", " ")[:14] for v in row), limit=76))
    return t


class DataFileScreen(Screen):
    """New session from a data file; Escape goes back to the start screen."""

    BINDINGS = [Binding("escape", "back", "Back"), Binding("f1", "app.help", "Help")]

    def __init__(
        self, workspace: Path, first_file: str = "", title: str = "", runs: Path | None = None
    ) -> None:
        super().__init__()
        self.workspace, self.runs = workspace.resolve(), runs
        self.first_file, self.title_text = first_file, title
        self.peek: DataPeek | None = None
        self.machine: Machine | None = None  # None until the hardware probe answers
        self.suggestion: Suggestion | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="data-start"):
            yield Static(Text("claimcheck — new session from your data file", style="bold"))
            kinds = " ".join(DATA_SUFFIXES)
            yield Label(
                literal(f"1. Pick the file ({kinds}) inside {self.workspace}", limit=76), classes="hint"
            )
            yield DataTree(self.workspace, self.runs, id="data-tree")
            yield Static("", id="data-problem")
            yield Vertical(id="data-columns")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#data-tree", DataTree).focus()
        self.run_worker(self._probe, thread=True, group="probe")
        if self.first_file:
            self.load(self.first_file)

    def _probe(self) -> None:
        self.app.call_from_thread(self._probed, Machine.probe())

    def _probed(self, machine: Machine) -> None:
        self.machine = machine
        self._suggest()

    # ------------------------------------------------------------ the file

    @on(DirectoryTree.FileSelected, "#data-tree")
    def _picked_file(self, event: DirectoryTree.FileSelected) -> None:
        event.stop()
        path = Path(event.path)
        shown = path.absolute()
        name = str(shown.relative_to(self.workspace)) if shown.is_relative_to(self.workspace) else str(path)
        self.load(name)

    def load(self, name: str) -> None:
        self._problem(f"reading {name} …")
        self.run_worker(lambda: self._read(name), thread=True, exclusive=True, group="peek")

    def _read(self, name: str) -> None:
        try:
            workspace_file(self.workspace, name)
            found: DataPeek | str = peek(self.workspace, name)
        except ClaimcheckError as exc:
            found = str(exc)
        self.app.call_from_thread(self._loaded, found)

    async def _loaded(self, found: DataPeek | str) -> None:
        box = self.query_one("#data-columns", Vertical)
        await box.remove_children()
        if isinstance(found, str):
            self.peek = None
            self._problem("✖ " + found)
            return
        self.peek = found
        self._problem("")
        await box.mount_all(list(self._column_widgets(found)))
        label = self.query_one("#pick-label", Select)
        label.focus()
        self.call_after_refresh(label.scroll_visible, animate=False)  # once the pickers are laid out
        self._suggest()

    def _column_widgets(self, p: DataPeek) -> Iterable[Any]:
        yield Label(literal(f"2. {p.file}", "bold"), classes="section")
        yield Static(schema_text(p), id="data-schema")
        yield Static(preview_text(p), id="data-preview")
        yield Label("3. Columns, from the file's own columns", classes="section")
        for wid, title, many, kinds in PICKERS:
            offered = [c for c in p.columns if not kinds or c.kind in kinds]
            yield Label(title, classes="field-label")
            if many:
                yield TickList(*[Selection(column_prompt(c), c.name) for c in offered], id=wid)
            else:
                options = [(column_prompt(c), c.name) for c in offered]
                blank = [] if wid == "pick-label" else [("(none)", NO_COLUMN)]
                yield Select(blank + options, prompt="(pick one)", compact=True, id=wid)
        yield Label("4. Suggested recipe", classes="section")
        yield Static("", id="data-suggestion")
        yield Label("Title", classes="field-label")
        title = LiteralInput(self.title_text, placeholder="optional", compact=True, id="own-title")
        title.cursor_blink = False
        yield title
        yield Button("Create session", id="own-create", variant="primary")

    # ------------------------------------------------------------ the choice

    def choice(self) -> ColumnChoice | None:
        if self.peek is None:
            return None

        def one(wid: str) -> str:
            value = self.query_one("#" + wid, Select).value
            return value if isinstance(value, str) else NO_COLUMN

        def many(wid: str) -> list[str]:
            return list(self.query_one("#" + wid, SelectionList).selected)

        return ColumnChoice(
            file=self.peek.file,
            label=one("pick-label"),
            inputs=many("pick-inputs"),
            text=many("pick-text"),
            id=one("pick-id"),
            entities=many("pick-entities"),
            time=one("pick-time"),
            weight=one("pick-weight"),
        )

    @on(Select.Changed)
    @on(SelectionList.SelectedChanged)
    def _changed(self, event: Any) -> None:
        event.stop()
        if isinstance(event, Select.Changed) and event.select.id == "pick-label":
            self._offer_all_but_label()
        self._suggest()

    def _offer_all_but_label(self) -> None:
        """The label column is the target: the other pickers no longer offer it (a choice of it made
        before is dropped); the rest of their choices stay."""
        if self.peek is None:
            return
        label = self.query_one("#pick-label", Select).value
        for wid, _, many, kinds in PICKERS[1:]:
            offered = [c for c in self.peek.columns if (not kinds or c.kind in kinds) and c.name != label]
            if many:
                picker = self.query_one("#" + wid, SelectionList)
                kept = [v for v in picker.selected if v != label]
                picker.clear_options()
                picker.add_options([Selection(column_prompt(c), c.name, c.name in kept) for c in offered])
            else:
                one = self.query_one("#" + wid, Select)
                before = one.value
                one.set_options([("(none)", NO_COLUMN)] + [(column_prompt(c), c.name) for c in offered])
                if isinstance(before, str) and before != label and any(c.name == before for c in offered):
                    one.value = before

    def _suggest(self) -> None:
        choice = self.choice()
        if choice is None or not self.query("#data-suggestion"):
            return
        box = self.query_one("#data-suggestion", Static)
        problem = choice.problem(self.peek)  # type: ignore[arg-type]
        if problem:
            self.suggestion = None
            box.update(literal("✖ " + problem, "bold"))
            return
        if self.machine is None:
            self.suggestion = None
            box.update(Text("looking for a GPU …", "dim"))
            return
        self.suggestion = suggest(self.peek, choice, self.machine)  # type: ignore[arg-type]
        t = literal(f"✔ {self.suggestion.recipe}", "bold")
        t.append_text(literal(f" — {self.suggestion.reason}"))
        box.update(t)

    def _problem(self, text: str) -> None:
        self.query_one("#data-problem", Static).update(literal(text))

    @on(Button.Pressed, "#own-create")
    def _create(self, event: Button.Pressed) -> None:
        event.stop()
        choice = self.choice()
        if choice is None or self.suggestion is None:
            self.notify("pick the label and input columns first", severity="error")
            return
        title = self.query_one("#own-title", LiteralInput).value.strip()
        self.app.create_own_session(choice, self.suggestion, title)  # type: ignore[attr-defined]

    def action_back(self) -> None:
        self.app.pop_screen()


__all__ = ["DataFileScreen", "DataTree"]
