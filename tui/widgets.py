"""Widgets shared by every stage: navigator, checks table, check detail, notes, bounded table, bars.
Their words come from tui/stage_words.py, measured values as text from tui/values.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.strip import Strip
from textual.widgets import DataTable, Input, Label, ListItem, ListView, Select, SelectionList, Static
from textual.widgets._toggle_button import ToggleButton
from textual.widgets.option_list import OptionDoesNotExist

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.tui.safe import LiteralInput, clean, literal
from claimcheck.tui.stage_words import STATUS_GLYPH, STATUS_STYLE, failing_first, status_text
from claimcheck.tui.values import format_value

NOTE_TAGS: tuple[tuple[str, str], ...] = (
    ("fact", "fact"),
    ("suspected cause", "suspected_cause"),
    ("untested remedy", "untested_remedy"),
    ("limitation", "limitation"),
)
TAG_WORD = {value: label for label, value in NOTE_TAGS}


NAV_STATE_WIDTH = 18  # the stage list's text width (#nav in app.tcss: 20 less its padding and border)

TICKED = "✔"  # a ticked box of a TickList


class TickList(SelectionList[str]):
    """A SelectionList whose box says its state as a glyph — `✔` ticked, blank not — rather than by
    colour alone (the same under NO_COLOR and on a 16-colour terminal)."""

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        segments = list(line)
        if len(segments) < 4 or segments[1].text != ToggleButton.BUTTON_INNER:
            return line  # not a line with a box (past the last option)
        try:
            option = self.get_option_at_index(self.scroll_offset.y + y)
        except OptionDoesNotExist:
            return line
        segments[1] = Segment(TICKED if option.value in self._selected else " ", segments[1].style)
        return Strip(segments, line.cell_length)


class StageNavigator(ListView):
    """The seven stages with their state in words; Enter (or moving the cursor) opens one."""

    BINDINGS = [Binding(str(i), f"pick({i - 1})", show=False) for i in range(1, 8)]

    class Picked(Message):
        def __init__(self, name: str) -> None:
            self.name = name
            super().__init__()

    def __init__(self, names: Sequence[tuple[str, str]], **kwargs: Any) -> None:
        self._names = list(names)
        items = [
            ListItem(
                Static(f"{i + 1} {title}", classes="nav-title"), Static("", classes="nav-state"), name=name
            )
            for i, (name, title) in enumerate(self._names)
        ]
        super().__init__(*items, **kwargs)

    def set_states(self, words: dict[str, str]) -> None:
        """Each stage's state in words; one too long for the list's width goes onto a second line
        after its ' · ' ('frozen ·' / 'not decided'), never cut."""
        for item in self.query(ListItem):
            word = words.get(item.name or "", "")
            shown = "  " + word
            if len(shown) > NAV_STATE_WIDTH and " · " in word:
                head, tail = word.split(" · ", 1)
                shown = f"  {head} ·\n  {tail}"
            label = item.query_one(".nav-state", Static)
            label.update(Text(shown, style="dim" if word.startswith("not ") else ""))

    def action_pick(self, index: int) -> None:
        if 0 <= index < len(self._names):
            self.index = index
            self.post_message(self.Picked(self._names[index][0]))

    @on(ListView.Selected)
    def _selected(self, event: ListView.Selected) -> None:
        event.stop()
        if event.item.name:
            self.post_message(self.Picked(event.item.name))


# ---------------------------------------------------------------- checks table + detail


def set_rows(
    table: DataTable,
    labels: Sequence[str | Text],
    rows: Sequence[Sequence[Text]],
    fixed: dict[int, int] | None = None,
) -> None:
    """Replace a table's columns and rows, each column as wide as its widest cell or label, or as
    `fixed` says for a column index (a steady width whatever the rows).

    Widths are set here rather than left to DataTable's auto width: that is measured on idle, and
    lines drawn before it stay cached at the header's width (seen as "billi" for "billing").
    """
    heads = [Text(label) if isinstance(label, str) else label for label in labels]
    table.clear(columns=True)
    for i, head in enumerate(heads):
        widest = max([head.cell_len, *(r[i].cell_len for r in rows if i < len(r))])
        table.add_column(head, width=(fixed or {}).get(i, widest))
    for row in rows:
        table.add_row(*row)


def fit_lines(text: Text, width: int, lines: int, console: Any) -> Text:
    """`text` wrapped at `width`, at most `lines` lines, the last ending in … when more was cut."""
    wrapped = text.wrap(console, max(1, width))
    if len(wrapped) <= lines:
        return Text("\n").join(wrapped)
    kept = list(wrapped[:lines])
    last = kept[-1]
    last.truncate(max(1, width - 1))
    last.append("…")
    return Text("\n").join(kept)


class ChecksTable(DataTable):
    """Every check of one stage record, failing checks first.

    Wide: status (icon and word), check, summary, basis and coverage, the summary in up to ROW_LINES
    lines. Below NARROW columns (an 80-column terminal): the status icon alone, the check id without
    its stage prefix, and the summary on one line over the rest of the width, so that seven checks
    show at 80x24; the summary in full, basis and coverage are in the detail below.
    """

    WIDE_LABELS = ("status", "check", "summary", "basis", "coverage")
    NARROW = 100
    ROW_LINES = 2
    NARROW_ROW_LINES = 1
    ID_WIDTH = 20  # the check column at narrow widths
    SUMMARY_MIN = 24

    class Highlighted(Message):
        def __init__(self, check: Check | None) -> None:
            self.check = check
            super().__init__()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self._checks: list[Check] = []
        self._drawn_width = -1

    def on_mount(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        if self._width() != self._drawn_width:
            self._draw(keep_cursor=True)

    def _width(self) -> int:
        """Columns the rows may use (the table less its scroll bar); 0 before layout."""
        return max(0, self.size.width - self.styles.scrollbar_size_vertical)

    @property
    def narrow(self) -> bool:
        return self._width() < self.NARROW

    def show(self, record: StageRecord | None) -> None:
        self._checks = failing_first(record.checks) if record else []
        self._draw()
        self.post_message(self.Highlighted(self._checks[0] if self._checks else None))

    def _draw(self, keep_cursor: bool = False) -> None:
        row = self.cursor_row
        self._drawn_width = width = self._width()
        if self.narrow:
            self._draw_narrow(width)
        else:
            self._draw_wide(width)
        if keep_cursor and 0 <= row < len(self._checks):
            self.move_cursor(row=row)

    def _draw_wide(self, width: int) -> None:
        status_w, basis_w = 9, max([5, *(len(c.basis) for c in self._checks)])
        cov = [literal(c.coverage, limit=40) for c in self._checks]
        cov_w = max([8, *(t.cell_len for t in cov)])
        ids = [literal(c.id) for c in self._checks]
        id_w = max([5, *(t.cell_len for t in ids)])
        # every column has one cell of padding either side
        summary_w = max(40, width - (status_w + id_w + basis_w + cov_w) - 10)
        widths = [status_w, id_w, summary_w, basis_w, cov_w]
        self.clear(columns=True)
        for label, w in zip(self.WIDE_LABELS, widths, strict=True):
            self.add_column(Text(label), width=w)
        for c, id_text, cov_text in zip(self._checks, ids, cov, strict=True):
            summary = fit_lines(literal(c.summary, limit=400), summary_w, self.ROW_LINES, self.app.console)
            self.add_row(
                status_text(c.status),
                id_text,
                summary,
                literal(c.basis),
                cov_text,
                height=len(summary.plain.splitlines()) or 1,
            )

    def _draw_narrow(self, width: int) -> None:
        prefix = _shared_prefix([c.id for c in self._checks])
        ids = [literal(c.id[len(prefix) :]) for c in self._checks]
        id_w = min(self.ID_WIDTH, max([5, *(t.cell_len for t in ids)]))
        summary_w = max(self.SUMMARY_MIN, width - 1 - id_w - 6)
        self.clear(columns=True)
        self.add_column(Text(""), width=1)
        self.add_column(Text("check"), width=id_w)
        self.add_column(Text("summary"), width=summary_w)
        for c, id_text in zip(self._checks, ids, strict=True):
            summary = fit_lines(
                literal(c.summary, limit=400), summary_w, self.NARROW_ROW_LINES, self.app.console
            )
            if id_text.cell_len > id_w:
                id_text.truncate(id_w - 1)
                id_text.append("…")
            glyph = Text(STATUS_GLYPH.get(c.status, "?"), style=STATUS_STYLE.get(c.status, ""))
            self.add_row(glyph, id_text, summary, height=len(summary.plain.splitlines()) or 1)

    @on(DataTable.RowHighlighted)
    def _row(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        idx = event.cursor_row
        self.post_message(self.Highlighted(self._checks[idx] if 0 <= idx < len(self._checks) else None))


def _shared_prefix(ids: Sequence[str]) -> str:
    """'stage.' when every id starts with the same stage name (the page says which stage it is)."""
    heads = {i.split(".", 1)[0] for i in ids if "." in i}
    if len(heads) == 1 and all("." in i for i in ids):
        return heads.pop() + "."
    return ""


class CheckDetail(VerticalScroll):
    """One check in full: measured values, why it matters, the playbook line it comes from."""

    can_focus = True

    def compose(self) -> ComposeResult:
        yield Static(id="detail-body")

    def show(self, check: Check | None) -> None:
        body = self.query_one("#detail-body", Static)
        if check is None:
            body.update(Text("No check selected. Run the stage's checks (ctrl+r), then pick a row."))
            return
        self.copy_text = self.plain(check)
        t = Text()
        t.append_text(status_text(check.status))
        t.append(" ")
        t.append_text(literal(check.id, "bold"))
        t.append("\n")
        t.append_text(literal(check.summary))
        t.append(f"\nbasis: {check.basis} · coverage: ", style="dim")
        t.append_text(literal(check.coverage, "dim"))
        t.append(f" · replay: {check.replay}", style="dim")
        t.append("\n\nmeasured\n", style="bold")
        width = self.content_region.width - self.styles.scrollbar_size_vertical - 2
        lines = (
            format_value(check.measured, width=width if width >= 40 else 76)
            if check.measured
            else ["(nothing measured)"]
        )
        t.append("\n".join("  " + ln for ln in lines[:200]))
        if len(lines) > 200:
            t.append(f"\n  … {len(lines) - 200} more lines")
        if check.tolerance:
            t.append(
                "\ntolerance: " + ", ".join(f"{clean(k)} ±{v:g}" for k, v in check.tolerance.items()), "dim"
            )
        t.append("\n\nwhy it matters\n", style="bold")
        t.append_text(literal(check.why or "(not stated)"))
        t.append("\n\nplaybook\n", style="bold")
        t.append_text(literal(check.playbook or "(no playbook line)", "italic"))
        body.update(t)

    @staticmethod
    def plain(check: Check) -> str:
        lines = [f"{check.status} {check.id}: {check.summary}", f"coverage: {check.coverage}", "measured:"]
        lines += ["  " + ln for ln in format_value(check.measured)]
        lines += [f"why: {check.why}", f"playbook: {check.playbook}"]
        return "\n".join(lines)

    copy_text: str = ""


# ---------------------------------------------------------------- notes


class NotesPanel(Vertical):
    """Tagged notes (fact / suspected cause / untested remedy / limitation): a form and the list."""

    class Added(Message):
        def __init__(self, tag: str, text: str) -> None:
            self.tag, self.text = tag, text
            super().__init__()

    def compose(self) -> ComposeResult:
        with Horizontal(classes="note-form"):
            yield Select(NOTE_TAGS, value="fact", allow_blank=False, compact=True, id="note-tag")
            yield LiteralInput(placeholder="note text, Enter adds it", compact=True, id="note-text")
        yield Label("", id="note-hint")
        with VerticalScroll(id="note-list"):
            yield Static("", id="note-body")

    def on_mount(self) -> None:
        self.query_one("#note-text", Input).cursor_blink = False

    def show(self, record: StageRecord | None) -> None:
        hint = self.query_one("#note-hint", Label)
        body = self.query_one("#note-body", Static)
        if record is None:
            hint.update("Run the stage first: notes attach to its record.")
            body.update("")
            return
        hint.update(
            "Adding a note to a frozen stage makes a new draft revision."
            if record.provenance.frozen
            else "Notes are evidence: tag each one honestly."
        )
        t = Text()
        if not record.notes:
            t.append("(no notes yet)", style="dim")
        for note in record.notes:
            t.append(f"[{TAG_WORD.get(note.tag, note.tag)}] ", style="bold")
            t.append_text(literal(note.text))
            t.append(f"  {note.at}\n", style="dim")
        body.update(t)

    @on(Input.Submitted, "#note-text")
    def _submit(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            self.query_one("#note-hint", Label).update("A note needs some text.")
            return
        tag = self.query_one("#note-tag", Select).value
        event.input.value = ""
        self.post_message(self.Added(str(tag), text))


# ---------------------------------------------------------------- bounded table (large previews)

# A window loader: (start, count) -> (column names, rows of that window, total row count).
Loader = Callable[[int, int], tuple[list[str], list[Sequence[Any]], int]]


def list_loader(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> Loader:
    def load(start: int, count: int) -> tuple[list[str], list[Sequence[Any]], int]:
        return [str(c) for c in columns], list(rows[start : start + count]), len(rows)

    return load


class BoundedTable(Vertical):
    """Rows of a table of any size: only a window of them is fetched (in a thread) and drawn,
    and the caption says how many rows exist."""

    BINDINGS = [
        Binding("right_square_bracket", "window(1)", "Next rows", show=False),
        Binding("left_square_bracket", "window(-1)", "Prev rows", show=False),
    ]
    WINDOW = 200

    class Loaded(Message):
        def __init__(
            self,
            columns: list[str],
            rows: list[Sequence[Any]],
            total: int,
            start: int,
            error: str,
            fetch: int,
        ) -> None:
            self.columns, self.rows, self.total, self.start, self.error = columns, rows, total, start, error
            self.fetch = fetch
            super().__init__()

    def __init__(self, loader: Loader | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._loader = loader
        self._start = 0
        self._total = 0
        self._fetches = 0  # a thread cannot be cancelled: only the newest fetch's rows are shown

    def compose(self) -> ComposeResult:
        yield Label("", classes="bounded-caption")
        yield DataTable(cursor_type="row", classes="bounded-table")

    def on_mount(self) -> None:
        if self._loader is not None:
            self._fetch(0)
        else:
            self.query_one(".bounded-caption", Label).update("no rows to show")

    def set_loader(self, loader: Loader) -> None:
        self._loader, self._start = loader, 0
        self._fetch(0)

    def _fetch(self, start: int) -> None:
        self.query_one(".bounded-caption", Label).update(f"loading rows from {start + 1:,}…")
        self._fetches += 1
        self._load(start, self._fetches)

    @work(thread=True, exclusive=True, group="bounded-load")
    def _load(self, start: int, fetch: int) -> None:
        try:
            columns, rows, total = self._loader(start, self.WINDOW)  # type: ignore[misc]
        except Exception as exc:  # a file that cannot be read: say so in the caption
            self.post_message(self.Loaded([], [], 0, start, f"{type(exc).__name__}: {exc}", fetch))
            return
        self.post_message(self.Loaded(columns, rows, total, start, "", fetch))

    def on_bounded_table_loaded(self, event: Loaded) -> None:
        event.stop()
        if event.fetch != self._fetches:
            return  # an older fetch that finished late
        caption = self.query_one(".bounded-caption", Label)
        if event.error:
            caption.update(literal("cannot show rows: " + event.error, limit=300))
            return
        set_rows(
            self.query_one(DataTable),
            [literal(c, limit=30) for c in event.columns],
            [[literal(v, limit=80) for v in row] for row in event.rows],
        )
        self._start, self._total = event.start, event.total
        end = event.start + len(event.rows)
        text = (
            f"rows {event.start + 1:,}–{end:,} of {event.total:,}"
            if event.rows
            else f"no rows (of {event.total:,})"
        )
        if event.total > self.WINDOW:
            text += "  ([ / ] other rows)"
        caption.update(text)

    def action_window(self, direction: int) -> None:
        start = self._start + direction * self.WINDOW
        if self._loader is not None and 0 <= start < max(self._total, 1):
            self._fetch(start)


# ---------------------------------------------------------------- bars (text-only charts)


def bar_lines(
    values: Sequence[tuple[str, float]], width: int = 30, fmt: str = "{:.3g}", scale: float | None = None
) -> Text:
    """Horizontal bars drawn with block characters; labels literal, numbers printed beside each bar."""
    t = Text()
    if not values:
        return t
    top = scale if scale is not None else max((abs(v) for _, v in values), default=0.0) or 1.0
    label_w = min(18, max(len(clean(k)) for k, _ in values))
    for label, v in values:
        n = int(round(width * min(abs(v) / top, 1.0))) if top else 0
        t.append_text(literal(clean(label)[:label_w].ljust(label_w)))
        t.append(" ")
        t.append("█" * n, style="cyan")
        t.append("░" * (width - n), style="dim")
        t.append(" " + fmt.format(v) + "\n")
    return t
