"""Widgets shared by every stage: navigator, checks table, check detail, notes, bounded table, bars."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Input, Label, ListItem, ListView, Select, Static

from engine.evidence import Check, StageRecord
from engine.shapes import parse
from engine.shapes.artifact import Verdict
from engine.shapes.training import Progress
from tui.safe import LiteralInput, clean, literal

# Status shown as glyph + word so it reads without colour (16-colour terminals, monochrome logs).
STATUS_GLYPH = {"pass": "✔", "warn": "▲", "fail": "✖", "info": "ℹ", "not_run": "·"}
STATUS_WORD = {"pass": "pass", "warn": "warn", "fail": "FAIL", "info": "info", "not_run": "not run"}
STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "info": "cyan", "not_run": "dim"}

NOTE_TAGS: tuple[tuple[str, str], ...] = (
    ("fact", "fact"),
    ("suspected cause", "suspected_cause"),
    ("untested remedy", "untested_remedy"),
    ("limitation", "limitation"),
)
TAG_WORD = {value: label for label, value in NOTE_TAGS}


def status_text(status: str) -> Text:
    return Text(
        f"{STATUS_GLYPH.get(status, '?')} {STATUS_WORD.get(status, status)}",
        style=STATUS_STYLE.get(status, ""),
    )


def verdict_of(record: StageRecord | None) -> Verdict | None:
    """The artifact record's verdict (engine/shapes/artifact.py), None when it has none."""
    check = record.check("artifact.verdict") if record is not None else None
    return parse(check, Verdict) if check is not None else None


def verdict_line(v: Verdict) -> tuple[bool, str]:
    """(claim met, the verdict in plain words: what failed, in the order the evidence builds up)."""
    if v.claim_met:
        return True, f"✔ CLAIM MET: {v.judgement()}"
    failed = [
        words
        for ok, words in (
            (v.job_finished, "job not finished"),
            (v.artifact_verified, "artifact not verified"),
            (v.candidate_better, "candidate not better than comparators"),
        )
        if not ok
    ]
    if not failed:  # everything held up to the criterion itself
        failed.append(f"criterion {v.claim_state.replace('_', ' ')}: {v.judgement()}")
    return False, "✖ CLAIM NOT MET: " + "; ".join(failed)


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
        met, line = verdict_line(verdict)
        t.append_text(literal(line, "bold green" if met else "bold red", limit=200))
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
    progress = (
        parse(record.check("dispatch.progress"), Progress) if record.check("dispatch.progress") else None
    )
    unfinished = False
    if progress is not None and progress.job_state != "finished":
        unfinished = True
        total = f" of {progress.total_steps}" if progress.total_steps else ""
        body.append_text(
            literal(
                f"The job has not finished: {progress.job_state}, stage {progress.stage}, step "
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


def artifact_readiness(dispatch_state: str, dispatch: StageRecord | None, job: dict[str, Any] | None) -> str:
    """When the artifact stage can run: it needs a frozen dispatch record of a finished job."""
    live = ""
    if job is not None and job.get("running"):
        total = f" of {job['total_steps']}" if job.get("total_steps") else ""
        live = f"the job is {clean(job.get('stage', ''))}, step {job.get('step', 0)}{total}"
    if dispatch is None:
        return "Can run once dispatch has launched the job and its record is frozen."
    progress = (
        parse(dispatch.check("dispatch.progress"), Progress) if dispatch.check("dispatch.progress") else None
    )
    if progress is not None and progress.job_state != "finished":
        why = live or f"dispatch recorded the job as {progress.job_state} (stage {progress.stage})"
        return f"Waits for the job: {why}; the artifact needs a finished job recorded by dispatch."
    if dispatch_state != "frozen":
        return f"Can run once dispatch (now {dispatch_state}) is frozen: ctrl+l 6, then ctrl+f."
    return "Can run now (ctrl+r): the job finished and dispatch is frozen."


def state_words(
    state: str, record: StageRecord | None, running: bool = False, implemented: bool = True
) -> str:
    """The navigator's plain-words state of one stage: 'frozen', 'draft · 2 fail', 'stale', …;
    the artifact stage says whether the claim was met ('frozen · not met')."""
    if not implemented:
        return "not built yet"
    word = {"not_run": "not run", "draft": "draft", "frozen": "frozen", "stale": "STALE"}.get(state, state)
    verdict = verdict_of(record)
    if verdict is not None:
        word += " · met" if verdict.claim_met else " · not met"
    elif record is not None:
        fails = sum(c.status == "fail" for c in record.checks)
        if fails:
            word += f" · {fails} fail"
    if running:  # the list is 16 columns wide: running replaces the record's own state word
        word = "running" + word[word.index(" · ") :] if " · " in word else "running"
    return word


# ---------------------------------------------------------------- navigator


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
        for item in self.query(ListItem):
            label = item.query_one(".nav-state", Static)
            label.update(
                Text(
                    "  " + words.get(item.name or "", ""),
                    style="dim" if "not" in words.get(item.name or "", "") else "",
                )
            )

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


# Checks tables list failing checks first, then warnings; the rest keep the stage's own order.
STATUS_RANK = {"fail": 0, "warn": 1}


def failing_first(checks: Sequence[Check]) -> list[Check]:
    return sorted(checks, key=lambda c: STATUS_RANK.get(c.status, len(STATUS_RANK)))


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

    Wide: status (icon and word), check, summary, basis and coverage. Below NARROW columns (an
    80-column terminal): the status icon alone, the check id without its stage prefix, and the
    summary wrapped over the rest of the width in up to ROW_LINES lines; basis and coverage are in
    the detail below.
    """

    WIDE_LABELS = ("status", "check", "summary", "basis", "coverage")
    NARROW = 100
    ROW_LINES = 2
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
            summary = fit_lines(literal(c.summary, limit=400), summary_w, self.ROW_LINES, self.app.console)
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


def _is_records(v: Any) -> bool:
    """A list of two or more tables with the same flat keys: shown as one table, a row each."""
    if not isinstance(v, list) or len(v) < 2 or not all(isinstance(x, dict) and x for x in v):
        return False
    keys = list(v[0])
    return all(list(x) == keys and not any(isinstance(y, dict | list) for y in x.values()) for x in v)


def _cell(v: Any) -> str:
    if isinstance(v, str):  # an empty setting is shown as –, whether stored empty or as ""
        return clean(v, limit=300) if v not in ("", '""') else "–"
    return _scalar(v)


TABLE_LAST_COL = 12  # the last (wrapped) column keeps this much while others can be cut
TABLE_MIN_COL = 6  # a table column is never cut narrower; a table that cannot fit is not drawn as one


def table_widths(natural: list[int], heads: list[int], width: int) -> list[int] | None:
    """Column widths within `width` (two spaces between columns), or None when they cannot fit.

    The widest column after the first is cut first, never below its header (up to 10 characters)
    or TABLE_MIN_COL; the last column wraps, so it keeps TABLE_LAST_COL for a phrase; the first
    (the row's name) takes at most 3/10 of the room and is cut last.
    """
    widths = [min(w, 40) for w in natural]
    room = width - 2 * (len(widths) - 1)
    least = [max(TABLE_MIN_COL, min(h, 10, n)) for h, n in zip(heads, natural, strict=True)]
    least[-1] = max(least[-1], min(TABLE_LAST_COL, natural[-1]))
    widths[0] = min(widths[0], max(least[0], room * 3 // 10))
    while sum(widths) > room:
        rest = [k for k in range(1, len(widths)) if widths[k] > least[k]]
        rest = rest or [k for k in range(len(widths)) if widths[k] > TABLE_MIN_COL]
        if not rest:
            return None
        widths[max(rest, key=lambda k: widths[k])] -= 1
    return widths


def table_lines(rows: list[dict[str, Any]], width: int, max_items: int = 40) -> list[str] | None:
    """Rows of one shape as an aligned table within `width` columns: columns cut with … (the last
    wrapped under itself instead), empty text shown as –; None when the columns cannot fit."""
    import textwrap

    keys = list(rows[0])
    cells = [[_cell(r[k]) for k in keys] for r in rows[:max_items]]
    natural = [max(len(clean(k)), *(len(c[i]) for c in cells)) for i, k in enumerate(keys)]
    widths = table_widths(natural, [len(clean(k)) for k in keys], width)
    if widths is None:
        return None

    def fit(text: str, w: int) -> str:
        return text if len(text) <= w else text[: w - 1] + "…"

    out = ["  ".join(fit(clean(k), w).ljust(w) for k, w in zip(keys, widths, strict=True)).rstrip()]
    out.append("  ".join("─" * w for w in widths))
    lead = sum(w + 2 for w in widths[:-1])
    for row in cells:
        wrapped = textwrap.wrap(row[-1], widths[-1]) or [""]
        first = [*(fit(c, w).ljust(w) for c, w in zip(row[:-1], widths[:-1], strict=True)), wrapped[0]]
        out.append("  ".join(first).rstrip())
        out.extend(" " * lead + more for more in wrapped[1:])
    if len(rows) > max_items:
        out.append(f"… {len(rows) - max_items} more rows (of {len(rows)})")
    return out


def format_value(value: Any, indent: int = 0, max_items: int = 40, width: int = 200) -> list[str]:
    """Measured values as readable indented lines (lists and tables bounded, with a count); a list
    of same-shaped tables (requested vs effective settings, …) as one aligned table."""
    pad = "  " * indent
    lines: list[str] = []
    table = table_lines(value, width - len(pad), max_items) if _is_records(value) else None
    if table is not None:
        return [pad + ln for ln in table]
    if isinstance(value, dict):
        items = list(value.items())
        for k, v in items[:max_items]:
            if _is_records(v) and table_lines(v, width - len(pad) - 2, max_items) is not None:
                lines.append(f"{pad}{clean(k)}:")
                lines.extend(format_value(v, indent + 1, max_items, width))
            elif isinstance(v, dict | list) and v and not _is_flat_list(v):
                lines.append(f"{pad}{clean(k)}:")
                lines.extend(format_value(v, indent + 1, max_items, width))
            else:
                lines.append(f"{pad}{clean(k)} = {_scalar(v)}")
        if len(items) > max_items:
            lines.append(f"{pad}… {len(items) - max_items} more keys (of {len(items)})")
    elif isinstance(value, list):
        for i, v in enumerate(value[:max_items]):
            if isinstance(v, dict | list) and v and not _is_flat_list(v):
                lines.append(f"{pad}[{i}]")
                lines.extend(format_value(v, indent + 1, max_items, width))
            else:
                lines.append(f"{pad}- {_scalar(v)}")
        if len(value) > max_items:
            lines.append(f"{pad}… {len(value) - max_items} more items (of {len(value)})")
    else:
        lines.append(pad + _scalar(value))
    return lines


def _is_flat_list(v: Any) -> bool:
    return isinstance(v, list) and len(v) <= 12 and all(not isinstance(x, dict | list) for x in v)


def _scalar(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, str):
        return '"' + clean(v, limit=300) + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    if isinstance(v, dict) and not v:
        return "{}"
    return clean(v, limit=300)


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
