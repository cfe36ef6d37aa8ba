"""Screens around the session: start (new / reopen), lock conflict, confirmation, help, coverage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Footer, Input, Label, ListItem, ListView, Select, Static

from claimcheck.tui.safe import LiteralInput, clean, literal

KEYS: tuple[tuple[str, str], ...] = (
    ("ctrl+r", "run the stage's checks (background; screen stays live)"),
    ("ctrl+g", "cancel the running checks"),
    ("ctrl+f", "freeze the stage (first shows what becomes stale)"),
    ("ctrl+n", "add a note: fact / suspected cause / remedy / limit"),
    ("ctrl+l", "stage list, then ↑ ↓ Enter — or 1 … 7 there"),
    ("f2 … f6", "Form / Checks / Visual / Notes / Data (source) tab"),
    ("tab", "next field or pane (shift+tab: previous)"),
    ("[  ]", "previous / next rows of a large table"),
    ("ctrl+t", "theme: dark, light, ANSI dark, ANSI light"),
    ("ctrl+y", "copy the selected check (OSC 52 where offered)"),
    ("f7", "checklist coverage: REFORMS, leakage, AI Act map"),
    ("f8", "write the report set; show report.md (print report.html)"),
    ("ctrl+p", "command palette: every action by name"),
    ("f1", "this help; Escape closes it"),
    ("ctrl+q", "quit (a training job keeps running)"),
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Text("claimcheck — keys", style="bold"))
            t = Text()
            for key, what in KEYS:
                t.append(f"{key:<10}", style="bold")
                t.append(what + "\n")
            t.append(
                "\nStage states: not run · draft (run, not accepted) · frozen (accepted, digest recorded) · "
                "STALE (an earlier stage changed: re-run) · n fail (failing checks) · running.\n"
            )
            t.append("Press Escape to close.", style="dim")
            yield Static(t)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


_LEVEL_STYLE = {"addressed": "green", "partly": "yellow", "not addressed": "red"}


def coverage_text(cov: Any) -> Text:
    """The coverage of a session (claimcheck.engine.report.coverage.Coverage) as rich Text, at most 74 columns wide."""
    from claimcheck.engine.report.coverage import LEVELS, LISTS

    t = Text()
    t.append(f"{'checklist':<42}{'items':>6}{'addr.':>7}{'partly':>7}{'not':>5}\n", style="bold")
    for name, items in cov.lists().items():
        c = cov.counts()[name]
        label = LISTS[name].split(" (")[0]
        t.append(f"{label:<42}{len(items):>6}{c[LEVELS[0]]:>7}{c[LEVELS[1]]:>7}{c[LEVELS[2]]:>5}\n")
    t.append("\nREFORMS modules\n", style="bold")
    for mid, title, c in cov.module_counts():
        t.append(
            f"{mid}. {title:<34} {c[LEVELS[0]]:>2} addr. {c[LEVELS[1]]:>2} partly {c[LEVELS[2]]:>2} not\n"
        )
    for name, items in cov.lists().items():
        t.append(f"\n{LISTS[name]}\n", style="bold")
        for it in items:
            t.append(f"{it.id:<6}")
            t.append(f"{it.level:<14}", style=_LEVEL_STYLE.get(it.level, ""))
            t.append_text(literal(it.text, limit=52))
            t.append("\n")
            found = [e.label() for e in it.evidence if e.found]
            if it.finding:
                t.append_text(literal(f"      finding: {it.finding}", "dim", limit=72))
                t.append("\n")
            if found:
                t.append_text(literal("      " + "; ".join(found), "dim", limit=144))
                t.append("\n")
            if it.gap:
                t.append_text(literal("      not covered: " + it.gap, "dim", limit=144))
                t.append("\n")
    return t


class CoverageScreen(ModalScreen[None]):
    """Checklist coverage computed from the session's records; reachable from every stage (f7)."""

    BINDINGS = [Binding("escape,f7,q", "dismiss", "Close")]

    def __init__(self, cov: Any) -> None:
        super().__init__()
        self.cov = cov

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="coverage-box"):
            yield Static(Text("Checklist coverage — computed from the records", style="bold"))
            yield Static(
                Text(
                    "The AI Act view is a map of evidence onto Annex IV headings: not legal advice, "
                    "not a conformity assessment. ↑ ↓ PgUp PgDn scroll; Escape closes.",
                    style="dim",
                )
            )
            yield Static(coverage_text(self.cov), id="coverage-body")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


def report_sections(markdown: str) -> list[tuple[str, str]]:
    """report.md cut at its `## ` headings: (title, text) in order, the opening part as "Summary".
    The anchor lines (`<a id=…></a>`, for report.html's links) are left out of what is shown."""
    sections: list[tuple[str, list[str]]] = [("Summary", [])]
    for line in markdown.splitlines():
        if line.startswith("<a id=") and line.endswith("</a>"):
            continue
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        sections[-1][1].append(line)
    return [(title, "\n".join(lines)) for title, lines in sections if any(ln.strip() for ln in lines)]


class ReportScreen(ModalScreen[None]):
    """The evidence report just written: report.md one section at a time in Textual's Markdown viewer
    (a whole report is hundreds of lines: drawn at once it would hold the screen for seconds), with
    where the set lies: report.html is the page to print."""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close"),
        Binding("right_square_bracket", "section(1)", "Next section"),
        Binding("left_square_bracket", "section(-1)", "Previous section"),
    ]

    def __init__(self, markdown: str, html_path: str, problems: list[str]) -> None:
        super().__init__()
        self.sections = report_sections(markdown) or [("Summary", "(empty report)")]
        self.html_path, self.problems = html_path, problems
        self.index = 0

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown

        with Vertical(id="report-box"):
            head = Text("Evidence report written", style="bold")
            head.append_text(Text(" — to print: ", style="dim"))
            head.append_text(literal(self.html_path))
            yield Static(head, id="report-head")
            for line in self.problems:
                yield Static(literal(f"INTEGRITY FAILED {line}", "bold red"), classes="report-problem")
            yield Static(id="report-where")
            with VerticalScroll(id="report-scroll"):
                yield Markdown(self.sections[0][1], id="report-body")

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        title = self.sections[self.index][0]
        where = literal(f"section {self.index + 1} of {len(self.sections)}: {title}", "bold", limit=60)
        where.append_text(Text("  ·  [ ] sections, ↑ ↓ scroll, Escape closes", style="dim"))
        self.query_one("#report-where", Static).update(where)

    async def action_section(self, step: int) -> None:
        from textual.widgets import Markdown

        self.index = (self.index + step) % len(self.sections)
        await self.query_one("#report-body", Markdown).update(self.sections[self.index][1])
        self.query_one("#report-scroll", VerticalScroll).scroll_home(animate=False)
        self._show()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A yes / no question; y / n / Escape answer it from the keyboard."""

    BINDINGS = [Binding("y", "answer(True)", "Yes"), Binding("n,escape", "answer(False)", "No")]

    def __init__(
        self, title: str, body: Text | str, yes: str = "Yes", no: str = "No", default_no: bool = False
    ) -> None:
        super().__init__()
        self._title, self._body, self._yes, self._no = title, body, yes, no
        # Enter answers the focused button: "No" when the answer should not be yes by habit.
        self.default_no = default_no

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Text(self._title, style="bold"))
            with VerticalScroll(id="confirm-body"):
                yield Static(self._body)
            with Horizontal(id="confirm-buttons"):
                yield Button(f"{self._yes} (y)", id="yes", variant="primary")
                yield Button(f"{self._no} (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no" if self.default_no else "#yes", Button).focus()

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class LockedScreen(ModalScreen[str]):
    """The session is open elsewhere: name the holder; offer take-over only when it is gone."""

    BINDINGS = [Binding("escape", "answer('back')", "Back")]

    def __init__(self, message: str, stale: bool) -> None:
        super().__init__()
        self._message, self._stale = message, stale

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(Text("Session locked", style="bold"))
            with VerticalScroll(id="confirm-body"):
                yield Static(literal(self._message))
            with Horizontal(id="confirm-buttons"):
                if self._stale:
                    yield Button("Take over", id="take_over", variant="warning")
                yield Button("Back", id="back")

    def on_mount(self) -> None:
        self.query_one(Button).focus()

    def action_answer(self, value: str) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "back")


class StartScreen(Screen):
    """No session given: start a new one from your data file or from the sample data, or reopen one.
    A session is created only from a data file picked on the next screen or from an explicit
    "sample data" choice: Enter alone creates nothing."""

    BINDINGS = [Binding("f1", "app.help", "Help"), Binding("ctrl+q", "app.quit", "Quit")]

    def __init__(
        self,
        recipes: list[tuple[str, str]],
        default_recipe: str,
        sessions: list[tuple[Path, str]],
        runs_root: Path,
        data_file: str = "",
    ) -> None:
        super().__init__()
        self.recipes, self.default_recipe = recipes, default_recipe
        self.sessions, self.runs_root, self.data_file = sessions, runs_root, data_file

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="start"):
            yield Static(Text("claimcheck — start a session", style="bold"))
            yield Label("New session on your data", classes="section")
            yield Label(
                "Data file (relative to the workspace; Enter or the button picks it)", classes="field-label"
            )
            data = LiteralInput(
                self.data_file, placeholder="empty: browse the workspace", compact=True, id="data-file"
            )
            data.cursor_blink = False
            yield data
            yield Label("Title", classes="field-label")
            title = LiteralInput("", placeholder="optional", compact=True, id="title")
            title.cursor_blink = False
            yield title
            yield Button("Your data file …", id="own-data", variant="primary")
            yield Label("New session on the sample data (support tickets)", classes="section")
            if self.recipes:
                options = [(clean(f"{n} — {d}", limit=70), n) for n, d in self.recipes]
                names = [n for n, _ in self.recipes]
                value = self.default_recipe if self.default_recipe in names else names[0]
                yield Select(options, value=value, allow_blank=False, compact=True, id="recipe")
            else:
                yield Label(
                    "(no recipes found: the forms start from each stage's own defaults)", id="no-recipes"
                )
            yield Button("The sample data", id="sample")
            yield Label(literal(f"either creates a folder under {self.runs_root}"), classes="hint")
            yield Label(
                f"Reopen a session ({len(self.sessions)} found under {clean(self.runs_root)})",
                classes="section",
            )
            if self.sessions:
                yield ListView(
                    *[
                        ListItem(Label(literal(f"{p.name} · {desc}", limit=76)), name=str(p))
                        for p, desc in self.sessions
                    ],
                    id="sessions",
                )
            else:
                yield Label("(none yet)", classes="hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#data-file", Input).focus()

    def _title(self) -> str:
        return self.query_one("#title", Input).value.strip()

    @on(Input.Submitted, "#data-file")
    @on(Button.Pressed, "#own-data")
    def _own(self, event: Any) -> None:
        event.stop()
        self.app.choose_data_file(  # type: ignore[attr-defined]
            self.query_one("#data-file", Input).value.strip(), self._title()
        )

    @on(Input.Submitted, "#title")
    def _title_entered(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#own-data", Button).focus()

    @on(Button.Pressed, "#sample")
    def _sample(self, event: Button.Pressed) -> None:
        event.stop()
        recipe = str(self.query_one("#recipe", Select).value) if self.recipes else ""
        self.app.create_session(recipe=recipe, title=self._title())  # type: ignore[attr-defined]

    @on(ListView.Selected, "#sessions")
    def _reopen(self, event: ListView.Selected) -> None:
        event.stop()
        if event.item.name:
            self.app.open_session(Path(event.item.name))  # type: ignore[attr-defined]
