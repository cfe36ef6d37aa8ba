"""The contract page's view of a declared tuning search: the trials table (state, settings, dev
figure, duration), a text plot of the dev figure against each varied setting, and the finalists'
seed spread beside the winner's margin.

The table and the plot come from the engine's reading of the ledger
(claimcheck.engine.stages.contract.search_view), polled once a second in a thread worker, so a search
running in the contract stage's run shows up live; the seed-spread view is the recorded
contract.search_selection. Nothing here computes evidence: states, figures, the margin, the spread,
TIE or winner are the engine's.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.message import Message
from textual.widgets import Static

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.shapes import ShapeError, parse
from claimcheck.engine.shapes.tuning import SearchDeclaration, SearchSelection
from claimcheck.engine.stages.contract.search_view import LiveTrial, SearchView, search_view
from claimcheck.tui.panels import VisualPanel
from claimcheck.tui.plots import num, plot
from claimcheck.tui.safe import clean, literal

POLL_S = 1.0
STATE_STYLE = {
    "complete": "green",
    "running": "bold cyan",
    "failed": "bold red",
    "pruned": "yellow",
    "cancelled": "yellow",
}


def _duration(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60):02d} s"


def _settings(settings: dict[str, Any]) -> str:
    """'lr 0.003 · r 4': each setting by its last name part, its value short."""
    return " · ".join(
        f"{k.rsplit('.', 1)[-1]} {num(v) if isinstance(v, float) else v}" for k, v in settings.items()
    )


def _dev(row: LiveTrial) -> str:
    if row.value is not None:
        return f"{row.value:.4f}"
    if row.state == "running" and row.live_value is not None:
        return f"{row.live_value:.4f}*"
    return "–"


def trials_table(view: SearchView, width: int) -> Text:
    """One line per ledger row: trial (and seed for a repeat), state, settings, dev figure, duration."""
    heads = ("trial", "state", "settings", f"dev {view.metric}"[:14], "duration")
    widths = [8, 9, 0, max(9, len(heads[3])), 11]
    widths[2] = max(12, width - sum(widths) - 5)
    t = Text()
    for i, (h, w) in enumerate(zip(heads, widths, strict=True)):
        t.append((h.ljust(w) if i < 3 else h.rjust(w)) + " ", style="bold")
    t.append("\n")
    for r in view.rows:
        name = f"t{r.number}" + (f" s{r.seed}" if r.kind == "repeat" else "")
        state = r.state
        if r.state == "running" and r.total_steps:
            state = f"{r.live_step}/{r.total_steps}"
        t.append_text(literal(name.ljust(widths[0]) + " "))
        t.append(clean(state).ljust(widths[1]) + " ", style=STATE_STYLE.get(r.state, ""))
        cell = clean(_settings(r.settings))
        cell = cell if len(cell) <= widths[2] else cell[: widths[2] - 1] + "…"
        t.append_text(literal(cell.ljust(widths[2]) + " "))
        t.append(_dev(r).rjust(widths[3]) + " " + _duration(r.duration_s).rjust(widths[4]) + "\n")
        if r.reason and r.state != "complete":
            t.append_text(literal(f"         {r.reason}", "dim", limit=max(40, width - 2)))
            t.append("\n")
        if r.resources_from is not None:
            t.append_text(literal(f"    {_reuse(r)}", "dim", limit=max(40, width - 2)))
            t.append("\n")
    return t


def _reuse(r: LiveTrial) -> str:
    """'memory 0.021 GiB, 0.031 s/step reused from t1 (sha256:1a2b3c4d…)'"""
    mem = f"memory {r.memory_bytes / 1024**3:.3g} GiB" if r.memory_bytes else "memory –"
    step = f"{r.step_s:.3g} s/step" if r.step_s is not None else "– s/step"
    return f"{mem}, {step} reused from t{r.resources_from} ({(r.resources_from_digest or '')[:15]}…)"


def render_search(view: SearchView, record: StageRecord | None, width: int) -> Text:
    """The trials table, the dev figure against each varied setting, and the seed spread."""
    from claimcheck.engine.report.search_figures import setting_figures

    t = literal(f"Tuning search, revision {view.revision}", "bold")
    t.append(f"  (from search/r{view.revision}/)\n", style="dim")
    if view.hypothesis:
        t.append_text(literal(f"hypothesis: {view.hypothesis}", "italic", limit=300))
        t.append("\n")
    if view.problem:
        return t.append_text(literal(f"ledger unreadable: {view.problem}", "bold red")).append("\n")
    trials = [r for r in view.rows if r.kind == "trial"]
    counts = {s: sum(1 for r in trials if r.state == s) for s in STATE_STYLE}
    t.append(
        f"{len(trials)} of {view.n_trials} trial(s) in the ledger: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + f"; {len(view.rows) - len(trials)} seed repeat(s)\n\n"
    )
    t.append_text(trials_table(view, width))
    if any(r.state == "running" and r.live_value is not None for r in view.rows):
        t.append("* a running trial's latest dev evaluation, not its result\n", style="dim")
    t.append("\n")
    for fig in setting_figures(view):
        t.append_text(plot(fig, width))
        t.append("\n")
    t.append_text(seed_spread(view, record, width))
    return t


def _recorded(record: StageRecord | None) -> tuple[int | None, SearchSelection | None]:
    if record is None:
        return None, None
    decl = parse(record.check("contract.search_declaration"), SearchDeclaration)
    sel = parse(record.check("contract.search_selection"), SearchSelection)
    return (decl.revision if decl is not None else None), sel


def seed_spread(view: SearchView, record: StageRecord | None, width: int) -> Text:
    """The recorded selection: each finalist's seed figures on one axis, the margin against the spread."""
    t = literal("Seed spread of the finalists", "bold")
    t.append("  (from contract.search_selection)\n", style="dim")
    revision, sel = _recorded(record)
    if sel is None or revision != view.revision:
        why = "the contract stage has not recorded this revision's selection yet"
        return t.append(f"not measured: {why}\n", style="dim")
    values = [v for f in sel.finalists for v in f.values]
    lo, hi = min(values), max(values)
    if hi == lo:
        lo, hi = lo - 0.5, hi + 0.5
    bar_w = max(10, width - 34)

    def col(v: float) -> int:
        return min(bar_w - 1, max(0, round((v - lo) / (hi - lo) * (bar_w - 1))))

    for f in sel.finalists:
        cells = [" "] * bar_w
        for c in range(col(min(f.values)), col(max(f.values)) + 1):
            cells[c] = "─"
        for v in f.values:
            cells[col(v)] = "·"
        cells[col(f.mean)] = "●"
        chosen = f.number == sel.chosen_trial
        t.append(f"t{f.number:<4}", style="bold" if chosen else "")
        t.append("".join(cells), style="bold green" if chosen else "cyan")
        t.append(f" mean {f.mean:.4f} spread {f.spread:.4f}\n")
    t.append(
        f"     {num(round(lo, 4))}".ljust(bar_w + 5 - len(num(round(hi, 4)))) + num(round(hi, 4)) + "\n",
        style="dim",
    )
    t.append("     · a seed's dev figure  ● the mean\n", style="dim")
    if sel.margin is not None and sel.spread is not None:
        verdict = "TIE" if sel.tie else "WINNER"
        t.append(f"margin {sel.margin:.4f} vs seed spread {sel.spread:.4f}: ")
        t.append(verdict, style="bold yellow" if sel.tie else "bold green")
        t.append(" (margin inside the spread)\n" if sel.tie else " (margin beyond the spread)\n")
    elif sel.margin is not None:
        t.append(f"margin {sel.margin:.4f}; the seed spread was not measured\n", style="yellow")
    t.append_text(literal(f"rule: {sel.rule}", limit=400))
    t.append("\n")
    t.append_text(
        literal(
            f"chosen: trial {sel.chosen_trial} ({_settings(sel.chosen_settings)}), "
            f"digest {sel.chosen_digest[:23]}…",
            "bold",
        )
    )
    t.append("\n")
    return t


class ContractPanel(VisualPanel):
    """The contract stage's pictures, with the tuning search's live view above them when the session
    has a search."""

    class Polled(Message):
        def __init__(self, view: SearchView | None) -> None:
            self.view = view
            super().__init__()

    def __init__(self, session_dir: Any, **kwargs: Any) -> None:
        super().__init__("contract", **kwargs)
        self.session_dir = session_dir
        self.view: SearchView | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="search-body")
        yield Static(id="visual-body")

    def on_mount(self) -> None:
        self.query_one("#search-body").display = False
        self.poll()
        self.set_interval(POLL_S, self.poll)

    @work(thread=True, exclusive=True, group="search-poll")
    def poll(self) -> None:
        try:
            view = search_view(self.session_dir)
        except Exception as exc:  # unreadable files: say so instead of crashing
            view = SearchView(revision=0, problem=str(exc))
        self.post_message(self.Polled(view))

    def on_contract_panel_polled(self, event: Polled) -> None:
        if event.view != self.view:
            self.view = event.view
            self._draw_search()

    def _draw(self) -> None:
        super()._draw()
        self._draw_search()

    def _draw_search(self) -> None:
        body = self.query_one("#search-body", Static)
        body.display = self.view is not None
        if self.view is None:
            return
        record = self._shown[0] if self._shown is not None else None
        try:
            body.update(render_search(self.view, record, self._width()).append("\n"))
        except ShapeError as exc:
            body.update(literal(f"not measured: {exc}"))
