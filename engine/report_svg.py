"""Small inline SVG plots for the HTML report: no plotting library, no network, print-friendly.

Every label is escaped; every function takes plain numbers and returns one <svg> element. Figures
are found in a check's `measured` values by shape (see `figures_from_measured`), read defensively:
anything that does not have the expected shape is simply not plotted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Any

W, H = 640, 260
PAD_L, PAD_R, PAD_T, PAD_B = 150, 20, 28, 36
PALETTE = ("#1f4e79", "#c55a11", "#548235", "#7030a0", "#bf9000", "#2e75b6")

POINT_KEYS = ("value", "estimate", "delta", "mean", "metric", "score")
INTERVAL_KEYS = (("lo", "hi"), ("low", "high"), ("ci_low", "ci_high"), ("lower", "upper"))
NAME_KEYS = ("name", "arm", "comparator", "label", "class", "slice", "metric")
X_KEYS = ("step", "epoch", "bin")
CONF_KEYS = ("confidence", "mean_predicted", "predicted", "mean_confidence")
OBS_KEYS = ("accuracy", "observed", "fraction_positive", "empirical")


@dataclass
class Figure:
    title: str
    svg: str
    # The figure's data as rows, for the Markdown report (which cannot hold SVG).
    rows: list[tuple[str, str]]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v) if math.isfinite(v) else None


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


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], *, diagonal: bool = False) -> str:
    """Lines over a shared x axis (loss per step); `diagonal` adds y = x (a reliability curve's ideal)."""
    pts = [p for s in series.values() for p in s]
    xs, ys = [p[0] for p in pts] or [0.0, 1.0], [p[1] for p in pts] or [0.0, 1.0]
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


# ---------------------------------------------------------------- finding figures by shape


def _name(row: dict[str, Any], i: int) -> str:
    for k in NAME_KEYS:
        if isinstance(row.get(k), str) and row[k]:
            return row[k]
    return f"#{i + 1}"


def _first(row: dict[str, Any], keys: tuple[str, ...]) -> tuple[str, float] | None:
    for k in keys:
        v = _num(row.get(k))
        if v is not None:
            return k, v
    return None


def _numeric_dict(value: Any) -> dict[str, float] | None:
    if not isinstance(value, dict) or not 2 <= len(value) <= 40:
        return None
    out = {str(k): _num(v) for k, v in value.items()}
    return out if all(v is not None for v in out.values()) else None  # type: ignore[return-value]


def _intervals(value: list[Any]) -> list[tuple[str, float, float, float]] | None:
    rows = []
    for i, row in enumerate(value):
        if not isinstance(row, dict):
            return None
        point = _first(row, POINT_KEYS)
        bounds = next(
            ((_num(row.get(a)), _num(row.get(b))) for a, b in INTERVAL_KEYS if a in row and b in row), None
        )
        if point is None or bounds is None or None in bounds:
            return None
        rows.append((_name(row, i), point[1], bounds[0], bounds[1]))  # type: ignore[arg-type]
    return rows or None


def _series(value: list[Any]) -> dict[str, list[tuple[float, float]]] | None:
    if len(value) < 2 or not all(isinstance(r, dict) for r in value):
        return None
    xkey = next((k for k in X_KEYS if all(_num(r.get(k)) is not None for r in value)), None)
    if xkey is None:
        return None
    ykeys = [k for k, v in value[0].items() if k != xkey and _num(v) is not None][:3]
    series = {k: [(float(r[xkey]), float(r[k])) for r in value if _num(r.get(k)) is not None] for k in ykeys}
    return {k: s for k, s in series.items() if len(s) >= 2} or None


def _reliability(value: list[Any]) -> list[tuple[float, float]] | None:
    pts = []
    for r in value:
        if not isinstance(r, dict):
            return None
        c, o = _first(r, CONF_KEYS), _first(r, OBS_KEYS)
        if c is None or o is None:
            return None
        pts.append((c[1], o[1]))
    return sorted(pts) if len(pts) >= 2 else None


def figures_from_measured(check_id: str, measured: dict[str, Any], limit: int = 3) -> list[Figure]:
    """Plots a check's measured values support, by shape; never more than `limit`."""
    figs: list[Figure] = []
    for key, value in measured.items():
        if len(figs) >= limit:
            break
        title = f"{check_id} · {key}"
        if isinstance(value, dict):
            flat = _numeric_dict(value)
            if flat is not None:
                figs.append(
                    Figure(
                        title,
                        bar_chart(title, list(flat), list(flat.values())),
                        [(k, _fmt(v)) for k, v in flat.items()],
                    )
                )
                continue
            nested = {str(g): _numeric_dict(v) for g, v in value.items()}
            if 2 <= len(nested) <= 8 and all(v is not None for v in nested.values()):
                groups = {g: v for g, v in nested.items() if v is not None}
                rows = [(f"{g} / {c}", _fmt(v)) for g, d in groups.items() for c, v in d.items()]
                figs.append(Figure(title, grouped_bars(title, groups), rows))
        elif isinstance(value, list) and value:
            if all(_num(v) is not None for v in value) and len(value) >= 3:
                pts = [(float(i), float(v)) for i, v in enumerate(value)]
                figs.append(Figure(title, line_chart(title, {key: pts}), [(str(i), _fmt(v)) for i, v in pts]))
            elif (iv := _intervals(value)) is not None:
                figs.append(
                    Figure(
                        title,
                        interval_chart(title, iv),
                        [(n, f"{_fmt(p)} [{_fmt(a)}, {_fmt(b)}]") for n, p, a, b in iv],
                    )
                )
            elif (rel := _reliability(value)) is not None:
                figs.append(
                    Figure(
                        title,
                        line_chart(title, {"observed": rel}, diagonal=True),
                        [(_fmt(c), _fmt(o)) for c, o in rel],
                    )
                )
            elif (ser := _series(value)) is not None:
                rows = [(f"{k} @ {_fmt(x)}", _fmt(y)) for k, s in ser.items() for x, y in s]
                figs.append(Figure(title, line_chart(title, ser), rows))
    return figs
