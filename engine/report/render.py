"""The report's blocks and their two renderings: Markdown (report.md) and a self-contained, printable
HTML page (report.html, SVG figures inline, no script, nothing loaded from the network). Every data
string is escaped for its format here, in one place."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html import escape as _html_escape
from typing import Any

from claimcheck.engine.report import figures as F
from claimcheck.engine.report import svg as report_svg
from claimcheck.engine.textsafe import visible

STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "info": "INFO", "not_run": "NOT RUN"}
MAX_TABLE_ROWS = 25


# ---------------------------------------------------------------- blocks


def anchor(*parts: str) -> str:
    """The id of a report section, from claimcheck's own names (stage names, fixed words): lower-case
    ASCII letters, digits and hyphens, so it is the same in report.md and report.html."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


@dataclass
class Heading:
    level: int
    text: str
    # An id other blocks link to (see `anchor`); made by claimcheck from stage names, never from data.
    anchor: str = ""


@dataclass
class Para:
    text: str
    lead: str = ""


@dataclass
class Banner:
    kind: str  # ok / warn / draft / stale / not_run / fail: the colour
    text: str
    label: str = ""  # the bold word(s) in front; the kind, upper-cased, when empty

    def lead(self) -> str:
        return self.label or self.kind.replace("_", " ").upper()


@dataclass(frozen=True)
class Refs:
    """A table cell that lists pieces of evidence, each linked to the report section that holds it."""

    items: tuple[tuple[str, str], ...]  # (label, anchor); an empty anchor is plain text
    empty: str = ""

    def __str__(self) -> str:
        return "; ".join(label for label, _ in self.items) or self.empty


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str | Refs]]
    caption: str = ""
    note: str = ""


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Fig:
    figure: F.Figure


Block = Heading | Para | Banner | Table | Bullets | Fig


# ---------------------------------------------------------------- value formatting


def status_text(status: str, state: str) -> str:
    """A check's status word; outside a frozen stage it says it is not established."""
    mark = STATUS_MARK.get(status, status)
    return mark if state == "frozen" else f"{mark} ({state}, not established)"


def fmt_value(value: Any, limit: int = 160) -> str:
    if isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, str):
        text = value if value else "—"
    elif isinstance(value, list) and all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in value
    ):
        text = ", ".join(fmt_value(v) for v in value) if value else "—"
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------- Markdown


_MD_BREAKS = re.compile(r"[ \t\r\n]+")
# GitHub's Markdown links bare "scheme://...", "www." and e-mail text; "\:", "\." and "\@" (valid
# escapes that render as ":", "." and "@") stop it from recognising them.
_MD_AUTOLINK = re.compile(r"(?i):(?=//)|(?<=www)\.|(?<=\S)@(?=\S)")


_MD_LINE_START = re.compile(r"^(\d*)([#+-](?=\s|$)|(?<=\d)[.)](?=\s|$))")


def md_escape(text: str) -> str:
    """Text as Markdown that shows exactly that text: no markup, no link / image, no hidden bytes.

    Line breaks and tabs fold into one space (a table cell or list item stays one line); every other
    control, bidi or zero-width character becomes a visible stand-in (claimcheck.engine.textsafe.visible);
    the characters Markdown gives meaning to are backslash-escaped (escaped brackets cannot form a
    link or image, escaped angle brackets no autolink or HTML, "http\\://", "www\\." and "a\\@b"
    no bare URL or e-mail link).
    """
    out = visible(_MD_BREAKS.sub(" ", text)).replace("\\", "\\\\")
    for ch in "`|*[]<>":
        out = out.replace(ch, "\\" + ch)
    out = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(), out)
    return " ".join(out.split())


def md_block(text: str) -> str:
    """md_escape for text that starts a paragraph or list item, where "# ", "- ", "+ " and "1. "
    would open a heading or a list (">" is escaped by md_escape already)."""
    return _MD_LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), md_escape(text), count=1)


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            # an explicit anchor: renderers make their own ids from heading text, and differ
            out.append(
                (f'<a id="{b.anchor}"></a>\n\n' if b.anchor else "") + "#" * b.level + " " + md_escape(b.text)
            )
        elif isinstance(b, Para):
            out.append(f"**{md_escape(b.lead)}** — {md_escape(b.text)}" if b.lead else md_block(b.text))
        elif isinstance(b, Banner):
            out.append(f"> **{md_escape(b.lead())}** — {md_escape(b.text)}")
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {md_block(i)}" for i in b.items))
        elif isinstance(b, Table):
            out.append(_md_table(b))
        elif isinstance(b, Fig):
            fig = b.figure
            rows = fig.rows()
            t = Table(
                ["", "value"], [[lab, val] for lab, val in rows[:MAX_TABLE_ROWS]], f"Figure: {fig.title}"
            )
            if len(rows) > MAX_TABLE_ROWS:
                t.note = f"{len(rows) - MAX_TABLE_ROWS} more points; the plot is in report.html"
            out.append(_md_table(t))
    # Every text above went through md_escape; this guard keeps any other hidden byte out too.
    return visible("\n\n".join(out) + "\n", keep_newlines=True)


def _md_table(t: Table) -> str:
    lines = []
    if t.caption:
        lines.append(f"*{md_escape(t.caption)}*")
        lines.append("")
    lines.append("| " + " | ".join(md_escape(h) or " " for h in t.headers) + " |")
    lines.append("|" + "|".join(" --- " for _ in t.headers) + "|")
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines.append("")
        lines.append(f"({md_escape(t.note)})")
    return "\n".join(lines)


def _md_cell(cell: str | Refs) -> str:
    if isinstance(cell, str):
        return md_escape(cell)
    links = [f"[{md_escape(lab)}](#{a})" if a else md_escape(lab) for lab, a in cell.items]
    return "; ".join(links) or md_escape(cell.empty)


# ---------------------------------------------------------------- HTML

CSS = """
:root { --ink:#1a1a1a; --mute:#555; --line:#c8c8c8; --ok:#e8f3e8; --warn:#fff4d6; --bad:#fbe3e3; --off:#eeeeee; }
* { box-sizing: border-box; }
body { font: 10.5pt/1.45 "DejaVu Sans", Helvetica, Arial, sans-serif; color: var(--ink); margin: 0 auto;
       max-width: 180mm; padding: 8mm 0; }
h1 { font-size: 18pt; margin: 0 0 4pt; } h2 { font-size: 13.5pt; margin: 18pt 0 6pt; border-bottom: 1px solid var(--line); }
h3 { font-size: 11pt; margin: 10pt 0 4pt; color: var(--mute); }
h2, h3 { break-after: avoid; page-break-after: avoid; }
p { margin: 4pt 0; }
table { border-collapse: collapse; width: 100%; margin: 4pt 0 8pt; font-size: 9pt; page-break-inside: auto; }
thead { display: table-header-group; }
tr { break-inside: avoid; page-break-inside: avoid; }
th, td { border: 1px solid var(--line); padding: 2pt 4pt; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f2f2f2; }
caption { caption-side: top; text-align: left; font-style: italic; color: var(--mute); padding-bottom: 2pt; }
.banner { border-left: 4pt solid var(--mute); padding: 4pt 8pt; margin: 6pt 0; background: var(--off); }
.banner.ok { border-color: #548235; background: var(--ok); }
.banner.stale, .banner.draft, .banner.warn { border-color: #bf9000; background: var(--warn); }
.banner.fail { border-color: #c00000; background: var(--bad); }
.banner.not_run { border-color: #888; background: var(--off); }
.st-pass { background: var(--ok); } .st-warn { background: var(--warn); } .st-fail { background: var(--bad); }
.st-not_run, .st-info { background: var(--off); }
figure { margin: 6pt 0 10pt; break-inside: avoid; page-break-inside: avoid; }
svg.plot { max-width: 100%; height: auto; border: 1px solid var(--line); background: #fff; }
svg .plot-title { font-size: 12px; font-weight: bold; } svg .lab { font-size: 10px; } svg .val { font-size: 9px; fill: #333; }
svg .axis { stroke: #333; } svg .ideal { stroke: #999; stroke-dasharray: 4 3; }
.note { color: var(--mute); font-size: 9pt; }
@page { size: A4; margin: 15mm 14mm; }
@media print { body { max-width: none; padding: 0; } a { color: inherit; text-decoration: none; } }
"""


def escape(text: str) -> str:
    """HTML text for untrusted data: markup escaped, hidden characters made visible."""
    return _html_escape(visible(text))


def _html_cell(cell: str | Refs) -> str:
    if isinstance(cell, str):
        return escape(cell)
    links = [f'<a href="#{a}">{escape(lab)}</a>' if a else escape(lab) for lab, a in cell.items]
    return "; ".join(links) or escape(cell.empty)


def _html_status_cell(text: str) -> str:
    key = next((k for k, v in STATUS_MARK.items() if text.startswith(v)), "")
    cls = f' class="st-{key}"' if key else ""
    return f"<td{cls}>{escape(text)}</td>"


def to_html(blocks: list[Block], title: str) -> str:
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">",
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
    ]
    for b in blocks:
        if isinstance(b, Heading):
            ident = f' id="{b.anchor}"' if b.anchor else ""
            out.append(f"<h{b.level}{ident}>{escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            lead = f"<strong>{escape(b.lead)}</strong> — " if b.lead else ""
            out.append(f"<p>{lead}{escape(b.text)}</p>")
        elif isinstance(b, Banner):
            lead = f"<strong>{escape(b.lead())}</strong> — "
            out.append(f'<div class="banner {escape(b.kind)}">{lead}{escape(b.text)}</div>')
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            out.append(_html_table(b))
        elif isinstance(b, Fig):
            out.append(f"<figure>{report_svg.render(b.figure)}</figure>")
    out.append("</body></html>")
    # Figures are SVG built from data labels (escaped in report_svg): make sure no hidden character
    # in them, or anywhere else, leaves in the file either.
    return visible("\n".join(out) + "\n", keep_newlines=True)


def _html_table(t: Table) -> str:
    status_col = t.headers.index("Status") if "Status" in t.headers else -1
    parts = ["<table>"]
    if t.caption:
        parts.append(f"<caption>{escape(t.caption)}</caption>")
    parts.append("<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in t.headers) + "</tr></thead><tbody>")
    for row in t.rows:
        cells = [
            _html_status_cell(str(c)) if i == status_col else f"<td>{_html_cell(c)}</td>"
            for i, c in enumerate(row)
        ]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    if t.note:
        parts.append(f'<p class="note">({escape(t.note)})</p>')
    return "".join(parts)
