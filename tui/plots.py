"""The figures of engine/report/figures.py drawn in the terminal, as rich Text.

The HTML report draws the same figure data as SVG (engine/report/svg.py); here each kind becomes
text that fits `width` columns (78 by default: an 80-column terminal; the TUI's visual panel
passes its own width): a heat map with the count in every cell, a
character chart of curves with checkpoint steps and the reference value marked, a forest plot of
intervals around a zero mark, a histogram with the max_length bin marked, and grouped bars.
Every data string (labels, titles) goes through tui/safe.py, so none is parsed as markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text

from claimcheck.engine.report.figures import Figure, Forest, Grouped, Heatmap, Histogram, Lines
from claimcheck.tui.safe import clean, literal

WIDTH = 78


def plot(fig: Figure, width: int = WIDTH) -> Text:
    """One figure as terminal text, its title first."""
    draw = {
        Heatmap: heatmap,
        Lines: lines,
        Forest: forest,
        Histogram: histogram,
        Grouped: grouped,
    }.get(type(fig))
    if draw is None:  # a figure kind this module does not know: say so instead of guessing
        return literal(f"(no terminal drawing for {type(fig).__name__})\n", "dim")
    return draw(fig, width)  # type: ignore[operator]


def title(text: str) -> Text:
    return literal(text, "bold underline").append("\n")


def num(v: float) -> str:
    """A figure value, short: integers as integers, the rest to 4 significant digits."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if float(v) == int(v) and abs(v) < 1e12:
        return f"{int(v):,}"
    return f"{v:.4g}"


# ---------------------------------------------------------------- labels


def abbreviate(labels: Sequence[str], limit: int) -> list[str]:
    """Labels cut to `limit` characters, each still different from every other one.

    A label that fits is kept whole. A longer one is cut to a prefix; when two cuts would read the
    same, they end in a distinguishing number instead ("acc1", "acc2"). The caller prints a legend
    for every label that was cut, so no abbreviation is ever ambiguous on screen.
    """
    full = [clean(x) for x in labels]
    limit = max(1, limit)
    out = [x if len(x) <= limit else x[: max(1, limit - 1)] + "…" for x in full]
    groups: dict[str, list[int]] = {}
    for i, a in enumerate(out):
        groups.setdefault(a, []).append(i)
    for idx in groups.values():
        cut = [i for i in idx if out[i] != full[i]]
        if len(idx) > 1:
            for k, i in enumerate(cut, start=1):
                out[i] = full[i][: max(0, limit - len(str(k)))] + str(k)
    if len(set(out)) < len(out):  # still the same somewhere (pathological): plain numbers
        out = [str(i + 1) for i in range(len(out))]
    return out


def legend(labels: Sequence[str], shown: Sequence[str], what: str, width: int = WIDTH) -> Text:
    """'what: a = full label, …' for every label that was shortened (one a line when they do not
    fit on one); empty when none was."""
    pairs = [f"{s} = {clean(x)}" for x, s in zip(labels, shown, strict=False) if s != clean(x)]
    t = Text()
    if not pairs:
        return t
    one = f"  {what}: " + ", ".join(pairs)
    lines = [one] if len(one) <= width else [f"  {what}:"] + [f"    {p}" for p in pairs]
    for line in lines:
        t.append_text(literal(line, "dim"))
        t.append("\n")
    return t


# ---------------------------------------------------------------- heat map


def heatmap(fig: Heatmap, width: int = WIDTH) -> Text:
    """The matrix with the count in every cell: rows true, columns predicted; the diagonal bold.

    Column labels are shown whole when they fit. When they do not and the columns are the rows'
    classes (a confusion matrix), rows are numbered and the columns carry the numbers: the row
    labels are then the legend. Otherwise the columns are cut and a legend names them.
    """
    t = title(fig.title)
    n_cols = len(fig.col_labels)
    values = [v for row in fig.cells for v in row]
    digits = max((len(num(v)) for v in values), default=1)
    row_w = min(14, max((len(clean(r)) for r in fig.row_labels), default=4), max(4, width // 4))
    longest = max((len(clean(c)) for c in fig.col_labels), default=1)
    fits = (longest + 1) * n_cols <= width - row_w - 2 and longest < 12
    numbered = not fits and list(fig.col_labels) == list(fig.row_labels)
    if numbered:
        tag_w = len(str(n_cols)) + 1
        row_w = min(row_w, max(4, width - tag_w - 2 - (digits + 1) * n_cols))
        rows = [f"{i + 1:>{tag_w - 1}} {r}" for i, r in enumerate(abbreviate(fig.row_labels, row_w))]
        row_w += tag_w
        cell_w = max(digits + 1, len(str(n_cols)) + 1, min(6, (width - row_w - 2) // max(1, n_cols)))
        cols = [str(i + 1) for i in range(n_cols)]
    else:
        rows = abbreviate(fig.row_labels, row_w)
        room = width - row_w - 2
        # wide enough for the whole column labels when the row allows it, never narrower than a count
        cell_w = max(digits + 1, min(longest + 1, room // max(1, n_cols), 12))
        cols = abbreviate(fig.col_labels, max(1, cell_w - 1))
    top = max(values, default=0.0) or 1.0
    t.append(" " * (row_w + 1) + "predicted →\n", style="dim")
    t.append("true ↓".ljust(row_w + 1), style="dim")
    for c in cols:
        t.append_text(literal(c.rjust(cell_w), "bold"))
    t.append("\n")
    for i, (r, row) in enumerate(zip(rows, fig.cells, strict=False)):
        t.append_text(literal(r.ljust(row_w) + " ", "bold"))
        for j, v in enumerate(row):
            style = "dim" if v == 0 else ("bold green" if i == j else ("red" if v / top > 0.2 else "yellow"))
            t.append(num(v).rjust(cell_w), style=style)
        t.append("\n")
    if numbered:
        t.append_text(legend(fig.row_labels, [r.split(" ", 1)[1] for r in rows], "rows", width))
        t.append("  columns are numbered as the rows\n", style="dim")
    else:
        t.append_text(legend(fig.row_labels, rows, "rows", width))
        t.append_text(legend(fig.col_labels, cols, "columns", width))
    return t


# ---------------------------------------------------------------- curves

GLYPHS = "●○◆◇▲△"


def lines(fig: Lines, width: int = WIDTH, height: int = 8) -> Text:
    """Curves on a character grid; a curve of one point is named with its value, never drawn as a chart."""
    t = title(fig.title)
    series = {
        name: [(x, y) for x, y in pts if math.isfinite(x) and math.isfinite(y)]
        for name, pts in fig.series.items()
    }
    glyph = {name: GLYPHS[i % len(GLYPHS)] for i, name in enumerate(series)}
    xs = [x for pts in series.values() for x, _ in pts]
    multi = any(len(pts) > 1 for pts in series.values())
    x_name = clean(fig.x_label) or "x"
    if not xs:
        t.append("  no finite point recorded\n", style="dim")
    elif multi:
        t.append_text(_grid(fig, series, glyph, width, height))
    for name, pts in series.items():
        t.append(f"  {glyph[name]} ", style="bold cyan" if glyph[name] == GLYPHS[0] else "bold magenta")
        t.append_text(literal(name, "bold"))
        if len(pts) == 1:
            x, y = pts[0]
            detail = f"one point, {num(y)} at {x_name} {num(x)}"
        elif pts:
            ys = [y for _, y in pts]
            detail = (
                f"{len(pts)} points ({x_name} {num(pts[0][0])}–{num(pts[-1][0])}), "
                f"first {num(ys[0])}, last {num(ys[-1])}"
            )
            if 4 + len(clean(name)) + 2 + len(detail) > width:
                detail = f"{len(pts)} points, first {num(ys[0])}, last {num(ys[-1])}"
        else:
            detail = "no finite point"
        # on a narrow panel the details go on their own line rather than wrap anywhere
        fits = 4 + len(clean(name)) + 2 + len(detail) <= width
        t.append(": " + detail + "\n" if fits else ":\n    " + detail + "\n")
    if fig.marks:
        t.append("  ┆ ", style="bold yellow")
        t.append_text(
            literal(f"{fig.mark_label or 'marked'} at {x_name} " + ", ".join(num(m) for m in fig.marks))
        )
        t.append("\n")
    if fig.events:
        t.append("  ▲ ", style="bold cyan")
        t.append_text(
            literal(
                f"{fig.event_label or 'events'} at {x_name} " + ", ".join(num(m) for m in fig.events),
                limit=200,
            )
        )
        t.append("\n")
    if fig.reference is not None:
        t.append("  ┄ ", style="bold red")
        t.append_text(literal(f"{fig.reference_label or 'reference'} {num(fig.reference)}"))
        t.append("\n")
    if fig.diagonal and multi:
        t.append("  · ideal (y = x)\n", style="dim")
    return t


def _grid(
    fig: Lines, series: dict[str, list[tuple[float, float]]], glyph: dict[str, str], width: int, height: int
) -> Text:
    xs = [x for pts in series.values() for x, _ in pts] + list(fig.marks) + list(fig.events)
    ys = [y for pts in series.values() for _, y in pts]
    if fig.reference is not None and math.isfinite(fig.reference):
        ys.append(fig.reference)
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if fig.diagonal:
        x0, x1, y0, y1 = min(x0, y0, 0.0), max(x1, y1, 1.0), min(x0, y0, 0.0), max(x1, y1, 1.0)
    if y1 == y0:
        y0, y1 = y0 - 0.5, y1 + 0.5
    if x1 == x0:
        x0, x1 = x0 - 0.5, x1 + 0.5
    lab_w = max(len(num(y0)), len(num(y1)))
    cols = max(10, min(60, width - lab_w - 4))
    grid = [[(" ", "")] * cols for _ in range(height)]

    def cx(x: float) -> int:
        return min(cols - 1, max(0, round((x - x0) / (x1 - x0) * (cols - 1))))

    def ry(y: float) -> int:
        return min(height - 1, max(0, height - 1 - round((y - y0) / (y1 - y0) * (height - 1))))

    if fig.diagonal:
        for c in range(cols):
            x = x0 + (x1 - x0) * c / (cols - 1)
            grid[ry(x)][c] = ("·", "dim")
    if fig.reference is not None and math.isfinite(fig.reference):
        r = ry(fig.reference)
        for c in range(cols):
            grid[r][c] = ("┄", "red")
    for m in fig.marks:
        c = cx(m)
        for r in range(height):
            grid[r][c] = ("┆", "yellow")
    # the first series last, so it stays visible where curves meet
    for i, (name, pts) in reversed(list(enumerate(series.items()))):
        style = "cyan" if i % 2 == 0 else "magenta"
        # the line between points, one cell per column, under the points themselves
        for (xa, ya), (xb, yb) in zip(pts, pts[1:], strict=False):
            ca, cb = cx(xa), cx(xb)
            for c in range(ca + 1, cb):
                y = ya + (yb - ya) * (c - ca) / (cb - ca)
                grid[ry(y)][c] = ("·", style)
        for x, y in pts:
            grid[ry(y)][cx(x)] = (glyph[name], "bold " + style)
    t = Text()
    for r, row in enumerate(grid):
        label = num(y1) if r == 0 else (num(y0) if r == height - 1 else "")
        t.append(label.rjust(lab_w) + " ┤" if label else " " * lab_w + " │", style="dim")
        for ch, style in row:
            t.append(ch, style=style)
        t.append("\n")
    axis_line = ["─"] * cols
    for e in fig.events:
        axis_line[cx(e)] = "▲"
    t.append(" " * lab_w + " └", style="dim")
    for ch in axis_line:
        t.append(ch, style="bold cyan" if ch == "▲" else "dim")
    t.append("\n")
    left, right = num(x0), num(x1)
    x_name = clean(fig.x_label)
    axis = (
        left + (f" {x_name} " if x_name else " ").center(max(1, cols - len(left) - len(right)), " ") + right
    )
    t.append_text(literal(" " * (lab_w + 2) + axis, "dim"))
    t.append("\n")
    return t


# ---------------------------------------------------------------- forest plot


def forest(fig: Forest, width: int = WIDTH) -> Text:
    """Each interval as a bar on one shared axis, the point estimate ●, zero as ┃.

    Label, bar and numbers share a line when that leaves the bar 20 columns; on a narrower panel
    the label and numbers go on one line and the bar on the next, so nothing is cut.
    """
    t = title(fig.title)
    if not fig.items:
        return t.append("  no bounded interval\n", style="dim")
    full = [n for n, *_ in fig.items]
    nums = [f"{p:+.4f} [{a:+.4f}, {b:+.4f}]" for _, p, a, b in fig.items]
    num_w = max(len(x) for x in nums)
    lab_w = min(30, max(len(clean(n)) for n in full))
    one_line = width - lab_w - num_w - 3 >= 20
    if one_line:
        bar_w, indent = width - lab_w - num_w - 3, lab_w + 1
    else:
        bar_w, indent = max(10, width - 4), 2
    names = abbreviate(full, lab_w) if one_line else [clean(n) for n in full]
    lo = min(0.0, *(a for _, _, a, _ in fig.items))
    hi = max(0.0, *(b for _, _, _, b in fig.items))
    if hi == lo:
        lo, hi = lo - 1.0, hi + 1.0

    def col(v: float) -> int:
        return min(bar_w - 1, max(0, round((v - lo) / (hi - lo) * (bar_w - 1))))

    zero = col(0.0)
    for name, (_, p, a, b), text in zip(names, fig.items, nums, strict=False):
        cells = [" "] * bar_w
        for c in range(col(a), col(b) + 1):
            cells[c] = "─"
        cells[col(a)], cells[col(b)] = "├", "┤"
        cells[zero] = "┃" if cells[zero] == " " else "╋"
        cells[col(p)] = "●"
        excludes = a > 0 or b < 0
        if one_line:
            t.append_text(literal(name.ljust(lab_w) + " "))
        else:
            # the label whole, the numbers beside it when they fit, else under it; the bar below
            t.append_text(literal(name))
            t.append(("  " if len(name) + 2 + len(text) <= width else "\n  ") + text + "\n" + " " * indent)
        for ch in cells:
            t.append(ch, style="bold" if ch in "┃╋" else ("bold green" if excludes else "yellow"))
        t.append((" " + text if one_line else "") + "\n")
    left, right = (f"{v:+.3g}" if v else "0" for v in (lo, hi))
    axis = list(left.ljust(bar_w - len(right)) + right)
    if lo < 0 < hi and len(left) < zero - 1 and zero + 1 < bar_w - len(right):
        axis[zero] = "0"
    t.append(" " * indent + "".join(axis) + "\n", style="dim")
    t.append_text(legend(full, names, "rows", width))
    t.append("  ┃ zero difference; a bar clear of it excludes zero\n", style="dim")
    return t


# ---------------------------------------------------------------- histogram


def histogram(fig: Histogram, width: int = WIDTH) -> Text:
    """One bar per bin; the bin holding the marker (max_length) marked, the bins past it in red."""
    t = title(fig.title)
    if not fig.bins:
        return t.append("  no bins\n", style="dim")
    lab = [f"{lo}-{hi}" for lo, hi, _ in fig.bins]
    lab_w = max(len(x) for x in lab)
    cnt_w = max(len(f"{n:,}") for _, _, n in fig.bins)
    marker = fig.marker
    mark_text = f" ← {clean(fig.marker_label or 'marker')} {num(marker)}" if marker is not None else ""
    bar_w = max(8, min(40, width - lab_w - cnt_w - len(mark_text) - 4))
    top = max(n for _, _, n in fig.bins) or 1
    marked = False
    for text, (lo, hi, n) in zip(lab, fig.bins, strict=False):
        inside = marker is not None and lo <= marker <= hi
        past = marker is not None and lo > marker
        k = round(bar_w * n / top)
        if n and not k:
            k = 1
        style = "red" if past else ("bold yellow" if inside else "cyan")
        t.append(text.rjust(lab_w) + " │", style="bold" if inside else "")
        t.append("█" * k, style=style)
        t.append(" " * (bar_w - k) + f" {n:,}".rjust(cnt_w + 1))
        if inside:
            t.append(mark_text, style="bold yellow")
            marked = True
        t.append("\n")
    if marker is not None and not marked:
        where = "below every bin" if marker < fig.bins[0][0] else "past every bin"
        t.append_text(literal(f"  {fig.marker_label or 'marker'} {num(marker)} lies {where}", "bold yellow"))
        t.append("\n")
    if marker is not None and any(lo > marker for lo, _, _ in fig.bins):
        t.append_text(literal(f"  red: bins wholly past {fig.marker_label or 'the marker'}", "dim"))
        t.append("\n")
    return t


# ---------------------------------------------------------------- grouped bars


def grouped(fig: Grouped, width: int = WIDTH) -> Text:
    """One row per category and a bar per group: side by side when they fit, else one line each."""
    t = title(fig.title)
    groups = {clean(g): v for g, v in fig.groups.items()}
    cats: list[str] = []
    for g in fig.groups.values():
        cats += [c for c in g if c not in cats]
    values = [v for g in fig.groups.values() for v in g.values() if math.isfinite(v)]
    if not cats or not values:
        return t.append("  nothing to draw\n", style="dim")
    top = max(abs(v) for v in values) or 1.0
    texts = {(g, c): _short(v) for g, vals in fig.groups.items() for c, v in vals.items()}
    val_w = max(len(s) for s in texts.values())
    cat_w = min(16, max(len(clean(c)) for c in cats))
    names = abbreviate(cats, cat_w)
    n = len(fig.groups)
    cell_w = (width - cat_w - 1) // n
    bar_w = cell_w - val_w - 3
    if n == 1 or bar_w >= 1:
        if n == 1:
            bar_w = max(8, min(40, width - cat_w - val_w - 3))
            cell_w = bar_w + val_w + 2
        else:
            gnames = abbreviate(list(fig.groups), cell_w - 1)
            t.append(" " * (cat_w + 1))
            for k, g in enumerate(gnames):
                t.append_text(literal(g.ljust(cell_w) if k < n - 1 else g, "bold"))
            t.append("\n")
        for cat, name in zip(cats, names, strict=False):
            t.append_text(literal(name.ljust(cat_w) + " ", "bold"))
            for k, vals in enumerate(fig.groups.values()):
                t.append("  " if k else "")
                t.append_text(_bar(vals.get(cat), top, bar_w, val_w))
            t.append("\n")
        if n > 1:
            t.append_text(legend(list(fig.groups), gnames, "columns", width))
    else:
        g_w = min(14, max(len(g) for g in groups))
        gnames = abbreviate(list(fig.groups), g_w)
        bar_w = max(8, min(40, width - g_w - val_w - 6))
        for cat, name in zip(cats, names, strict=False):
            t.append_text(literal(name, "bold"))
            t.append("\n")
            for gname, vals in zip(gnames, fig.groups.values(), strict=False):
                t.append_text(literal("  " + gname.ljust(g_w) + " "))
                t.append_text(_bar(vals.get(cat), top, bar_w, val_w))
                t.append("\n")
        t.append_text(legend(list(fig.groups), gnames, "groups", width))
    t.append_text(legend(cats, names, "rows", width))
    return t


def _bar(v: float | None, top: float, bar_w: int, val_w: int) -> Text:
    t = Text()
    if v is None or not math.isfinite(v):
        return t.append(" " * bar_w + " " + "–".rjust(val_w), style="dim")
    if bar_w == 1:  # a narrow panel: one cell whose height is the value
        level = round(8 * min(abs(v) / top, 1.0))
        if v and not level:
            level = 1
        t.append(" ▁▂▃▄▅▆▇█"[level], style="cyan")
        return t.append(" " + _short(v).rjust(val_w))
    eighths = round(bar_w * 8 * min(abs(v) / top, 1.0))
    if v and not eighths:
        eighths = 1
    full, part = divmod(eighths, 8)
    drawn = "█" * full + (_EIGHTHS[part] if part else "")
    t.append(drawn, style="cyan")
    t.append("░" * (bar_w - len(drawn)), style="dim")
    t.append(" " + _short(v).rjust(val_w))
    return t


_EIGHTHS = " ▏▎▍▌▋▊▉"


def _short(v: float) -> str:
    """A bar's value: counts whole, fractions (shares, F1) to three decimals."""
    if float(v) == int(v):
        return f"{int(v):,}"
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.4g}"
