"""Small inline SVG plots for the HTML report: no plotting library, no network, print-friendly.

Every label is escaped; every function takes plain numbers and returns one <svg> element. Which
picture a check gets is decided by its typed shape (engine/report/figures.py); `render` draws one.
"""

from __future__ import annotations

from html import escape

W, H = 640, 260
PAD_L, PAD_R, PAD_T, PAD_B = 150, 20, 28, 36
PALETTE = ("#1f4e79", "#c55a11", "#548235", "#7030a0", "#bf9000", "#2e75b6")


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1000 or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:.3g}" if abs(v) < 0.01 else f"{v:.3f}".rstrip("0").rstrip(".")


def _svg(title: str, body: list[str], height: int = H) -> str:
    t = escape(title)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="100%" '
        f'role="img" aria-label="{t}" class="plot"><title>{t}</title>'
        f'<text x="{W / 2}" y="16" text-anchor="middle" class="plot-title">{t}</text>'
        + "".join(body)
        + "</svg>"
    )


def bar_chart(title: str, labels: list[str], values: list[float]) -> str:
    """Horizontal bars: one per label, value printed at the bar's end."""
    n = max(len(labels), 1)
    bar_h = min(22.0, (H - PAD_T - PAD_B) / n)
    height = int(PAD_T + PAD_B + bar_h * n)
    vmax = max([abs(v) for v in values] + [1e-12])
    span = W - PAD_L - PAD_R - 60
    body = []
    for i, (lab, val) in enumerate(zip(labels, values, strict=True)):
        y = PAD_T + i * bar_h
        w = span * abs(val) / vmax
        body.append(
            f'<text x="{PAD_L - 6}" y="{y + bar_h * 0.7:.1f}" text-anchor="end" class="lab">{escape(lab[:24])}</text>'
            f'<rect x="{PAD_L}" y="{y + 2:.1f}" width="{w:.1f}" height="{bar_h - 4:.1f}" fill="{PALETTE[0]}"/>'
            f'<text x="{PAD_L + w + 4:.1f}" y="{y + bar_h * 0.7:.1f}" class="val">{escape(_fmt(val))}</text>'
        )
    return _svg(title, body, height)


def grouped_bars(title: str, groups: dict[str, dict[str, float]]) -> str:
    """One row per category, one bar per group (e.g. prevalence per class in each split)."""
    cats: list[str] = []
    for g in groups.values():
        cats += [c for c in g if c not in cats]
    n_g = max(len(groups), 1)
    row_h = min(12.0 * n_g + 6, 60.0)
    height = int(PAD_T + PAD_B + row_h * len(cats) + 16)
    vmax = max([abs(v) for g in groups.values() for v in g.values()] + [1e-12])
    span = W - PAD_L - PAD_R - 60
    body = []
    bar_h = (row_h - 6) / n_g
    for i, cat in enumerate(cats):
        y0 = PAD_T + i * row_h
        body.append(
            f'<text x="{PAD_L - 6}" y="{y0 + row_h / 2 + 3:.1f}" text-anchor="end" class="lab">{escape(cat[:24])}</text>'
        )
        for j, (gname, g) in enumerate(groups.items()):
            v = g.get(cat)
            if v is None:
                continue
            w = span * abs(v) / vmax
            y = y0 + 3 + j * bar_h
            body.append(
                f'<rect x="{PAD_L}" y="{y:.1f}" width="{w:.1f}" height="{bar_h - 1:.1f}" '
                f'fill="{PALETTE[j % len(PALETTE)]}"><title>{escape(gname)}: {escape(_fmt(v))}</title></rect>'
                f'<text x="{PAD_L + w + 3:.1f}" y="{y + bar_h - 2:.1f}" class="val">{escape(_fmt(v))}</text>'
            )
    body.append(_legend(list(groups), height - 12))
    return _svg(title, body, height)


def _legend(names: list[str], y: float) -> str:
    out = []
    x = PAD_L
    for i, name in enumerate(names):
        out.append(
            f'<rect x="{x}" y="{y - 9}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="{y}" class="lab">{escape(name[:20])}</text>'
        )
        x += 24 + 7 * min(len(name), 20)
    return "".join(out)


def line_chart(
    title: str,
    series: dict[str, list[tuple[float, float]]],
    *,
    diagonal: bool = False,
    marks: list[float] | None = None,
    reference: float | None = None,
    events: list[float] | None = None,
) -> str:
    """Lines over a shared x axis (loss per step); `diagonal` adds y = x (a reliability curve's ideal),
    `marks` dashed verticals (checkpoint steps), `reference` a dashed horizontal (the trivial baseline),
    `events` small triangles under the axis (dev evaluation steps)."""
    pts = [p for s in series.values() for p in s]
    xs, ys = [p[0] for p in pts] or [0.0, 1.0], [p[1] for p in pts] or [0.0, 1.0]
    if reference is not None:
        ys = ys + [reference]
    if diagonal:
        xs, ys = xs + [0.0, 1.0], ys + [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    x1, y1 = (x1 if x1 > x0 else x0 + 1), (y1 if y1 > y0 else y0 + 1)
    left, right, top, bottom = 60, W - PAD_R, PAD_T, H - PAD_B

    def sx(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (right - left)

    def sy(y: float) -> float:
        return bottom - (y - y0) / (y1 - y0) * (bottom - top)

    body = [
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" class="axis"/>',
        f'<text x="{left - 4}" y="{top + 4}" text-anchor="end" class="val">{escape(_fmt(y1))}</text>',
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end" class="val">{escape(_fmt(y0))}</text>',
        f'<text x="{left}" y="{bottom + 14}" class="val">{escape(_fmt(x0))}</text>',
        f'<text x="{right}" y="{bottom + 14}" text-anchor="end" class="val">{escape(_fmt(x1))}</text>',
    ]
    if diagonal:
        body.append(f'<line x1="{sx(0)}" y1="{sy(0)}" x2="{sx(1)}" y2="{sy(1)}" class="ideal"/>')
    for m in marks or []:
        body.append(f'<line x1="{sx(m):.1f}" y1="{top}" x2="{sx(m):.1f}" y2="{bottom}" class="ideal"/>')
    for e in events or []:
        x = sx(e)
        body.append(
            f'<polygon points="{x:.1f},{bottom} {x - 4:.1f},{bottom + 7} {x + 4:.1f},{bottom + 7}" fill="#777"/>'
        )
    if reference is not None:
        body.append(
            f'<line x1="{left}" y1="{sy(reference):.1f}" x2="{right}" y2="{sy(reference):.1f}" class="ideal"/>'
            f'<text x="{right}" y="{sy(reference) - 3:.1f}" text-anchor="end" class="val">reference '
            f"{escape(_fmt(reference))}</text>"
        )
    for i, s in enumerate(series.values()):
        color = PALETTE[i % len(PALETTE)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        if len(s) <= 30:
            body += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{color}"/>' for x, y in s]
    body.append(_legend(list(series), H - 4))
    return _svg(title, body)


def interval_chart(title: str, rows: list[tuple[str, float, float, float]]) -> str:
    """Point estimates with interval whiskers, one row each; a zero line when the range spans zero."""
    n = max(len(rows), 1)
    row_h = min(26.0, (H - PAD_T - PAD_B) / n)
    height = int(PAD_T + PAD_B + row_h * n)
    lo = min(r[2] for r in rows)
    hi = max(r[3] for r in rows)
    hi = hi if hi > lo else lo + 1
    left, right = PAD_L, W - PAD_R - 40

    def sx(x: float) -> float:
        return left + (x - lo) / (hi - lo) * (right - left)

    body = [
        f'<text x="{left}" y="{height - 8}" class="val">{escape(_fmt(lo))}</text>',
        f'<text x="{right}" y="{height - 8}" text-anchor="end" class="val">{escape(_fmt(hi))}</text>',
    ]
    if lo < 0 < hi:
        body.append(
            f'<line x1="{sx(0):.1f}" y1="{PAD_T}" x2="{sx(0):.1f}" y2="{height - PAD_B + 6}" class="ideal"/>'
        )
    for i, (name, point, a, b) in enumerate(rows):
        y = PAD_T + i * row_h + row_h / 2
        body.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" class="lab">{escape(name[:24])}</text>'
            f'<line x1="{sx(a):.1f}" y1="{y:.1f}" x2="{sx(b):.1f}" y2="{y:.1f}" stroke="{PALETTE[0]}" stroke-width="2"/>'
            f'<line x1="{sx(a):.1f}" y1="{y - 5:.1f}" x2="{sx(a):.1f}" y2="{y + 5:.1f}" stroke="{PALETTE[0]}"/>'
            f'<line x1="{sx(b):.1f}" y1="{y - 5:.1f}" x2="{sx(b):.1f}" y2="{y + 5:.1f}" stroke="{PALETTE[0]}"/>'
            f'<circle cx="{sx(point):.1f}" cy="{y:.1f}" r="4" fill="{PALETTE[1]}"/>'
            f'<text x="{sx(b) + 6:.1f}" y="{y + 4:.1f}" class="val">{escape(_fmt(point))} '
            f"[{escape(_fmt(a))}, {escape(_fmt(b))}]</text>"
        )
    return _svg(title, body, height)


# ---------------------------------------------------------------- figures chosen by meaning


def heatmap(title: str, rows: list[str], cols: list[str], cells: list[list[float]]) -> str:
    """A count matrix (confusion: rows true, columns predicted), each cell shaded by its row share."""
    n_r, n_c = max(len(rows), 1), max(len(cols), 1)
    cell_w = min(60.0, (W - PAD_L - PAD_R) / n_c)
    cell_h = min(24.0, 200.0 / n_r)
    height = int(PAD_T + 30 + cell_h * n_r + 20)
    top = PAD_T + 24
    body = []
    for j, col in enumerate(cols):
        x = PAD_L + j * cell_w + cell_w / 2
        body.append(
            f'<text x="{x:.1f}" y="{top - 6}" text-anchor="middle" class="lab">{escape(col[:9])}</text>'
        )
    for i, (lab, row) in enumerate(zip(rows, cells, strict=False)):
        y = top + i * cell_h
        total = sum(row) or 1.0
        body.append(
            f'<text x="{PAD_L - 6}" y="{y + cell_h * 0.7:.1f}" text-anchor="end" class="lab">{escape(lab[:24])}</text>'
        )
        for j, v in enumerate(row):
            shade = int(255 - 180 * (v / total))
            body.append(
                f'<rect x="{PAD_L + j * cell_w:.1f}" y="{y:.1f}" width="{cell_w - 1:.1f}" height="{cell_h - 1:.1f}" '
                f'fill="rgb({shade},{shade},255)"/><text x="{PAD_L + j * cell_w + cell_w / 2:.1f}" '
                f'y="{y + cell_h * 0.7:.1f}" text-anchor="middle" class="val">{escape(_fmt(v))}</text>'
            )
    body.append(
        f'<text x="{PAD_L}" y="{height - 4}" class="val">rows: true class · columns: predicted</text>'
    )
    return _svg(title, body, height)


def histogram(title: str, bins: list[tuple[int, int, int]], marker: float | None, marker_label: str) -> str:
    """Bars per bin, with a dashed vertical line at the marker (the truncation length)."""
    left, right, top, bottom = 60, W - PAD_R, PAD_T, H - PAD_B
    lo, hi = (bins[0][0], bins[-1][1] + 1) if bins else (0, 1)
    cmax = max([c for _, _, c in bins] + [1])

    def sx(x: float) -> float:
        return left + (x - lo) / max(hi - lo, 1) * (right - left)

    body = [f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" class="axis"/>']
    for a, b, c in bins:
        h = (bottom - top) * c / cmax
        body.append(
            f'<rect x="{sx(a):.1f}" y="{bottom - h:.1f}" width="{max(sx(b + 1) - sx(a) - 1, 1):.1f}" height="{h:.1f}" '
            f'fill="{PALETTE[0]}"><title>{a}-{b}: {c}</title></rect>'
        )
    body.append(f'<text x="{left}" y="{bottom + 14}" class="val">{lo}</text>')
    body.append(f'<text x="{right}" y="{bottom + 14}" text-anchor="end" class="val">{hi - 1}</text>')
    if marker is not None:
        x = sx(min(max(marker, lo), hi))
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" class="ideal"/>')
        body.append(
            f'<text x="{x + 4:.1f}" y="{top + 10}" class="val">{escape(marker_label)} {escape(_fmt(marker))}</text>'
        )
    return _svg(title, body)


def render(fig) -> str:  # noqa: ANN001 - one of claimcheck.engine.report.figures.Figure
    """The SVG of one figure from engine/report/figures.py."""
    from claimcheck.engine.report import figures as F

    if isinstance(fig, F.Heatmap):
        return heatmap(fig.title, fig.row_labels, fig.col_labels, fig.cells)
    if isinstance(fig, F.Histogram):
        return histogram(fig.title, fig.bins, fig.marker, fig.marker_label)
    if isinstance(fig, F.Forest):
        return interval_chart(fig.title, fig.items)
    if isinstance(fig, F.Grouped):
        if len(fig.groups) == 1:
            (only,) = fig.groups.values()
            return bar_chart(fig.title, list(only), list(only.values()))
        return grouped_bars(fig.title, fig.groups)
    return line_chart(
        fig.title,
        fig.series,
        diagonal=fig.diagonal,
        marks=fig.marks,
        reference=fig.reference,
        events=fig.events,
    )
