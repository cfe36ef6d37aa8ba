"""Measured values as text for the check detail: same-shaped rows as one table fitted to a width,
anything else as indented TOML-like lines."""

from __future__ import annotations

from typing import Any

from claimcheck.tui.safe import clean


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
