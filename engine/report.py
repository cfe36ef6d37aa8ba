"""The printable evidence report: report.md and a self-contained report.html, plus a model-index block.

Both documents are rendered from one list of blocks built from the records, so they carry the same
content: the claim, each stage's decisions, checks, figures and notes, the final comparison with
counts and intervals, latency apart from quality, the verdict against the success criterion,
limitations, and what the evidence does not establish. Stages that are stale, draft or not run are
marked so and never shown as established. Nothing here reads the clock: the same session gives the
same bytes (the golden test relies on it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html import escape as _html_escape
from pathlib import Path
from typing import Any

from engine import __version__
from engine import stages as registry
from engine.evidence import Check, StageRecord, atomic_write_text
from engine.report_svg import Figure, figures_from_measured
from engine.session import Session
from engine.textsafe import visible

STATUS_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "info": "INFO", "not_run": "NOT RUN"}
COUNT_KEYS = ("requested", "scored", "failed", "missing")
CANDIDATE_WORDS = ("candidate", "fine_tuned", "finetuned", "trained", "adapter", "model")
MAX_TABLE_ROWS = 25

# Each line traces to the playbook; they hold whatever the records say.
DOES_NOT_ESTABLISH = (
    "Process success is not model improvement: a valid file, a completed job, a lower loss and a useful "
    "model are four different outcomes.",
    "A tiny fitting check is not a quality pilot: memorising a few training examples says nothing about "
    "generalisation.",
    "Calibrated scores on the data used to fit the calibration are in-sample; they are not final results.",
    "Zero exact overlap between splits is not proof of independence from near duplicates, pretraining data "
    "or identities the data does not record.",
    "Latency measured here is not a serving benchmark; timing and quality are separate experiments.",
    "Weight reload parity is not proof of optimizer resume or of exact stochastic reproducibility.",
    "Nothing here establishes production safety, readiness for activation, or ongoing monitoring.",
)
LABEL_LINE = "Predicting a recorded workflow label is not making a correct real-world decision."

HF_METRICS = {
    "macro_f1": ("f1", {"average": "macro"}),
    "weighted_f1": ("f1", {"average": "weighted"}),
    "accuracy": ("accuracy", {}),
    "balanced_accuracy": ("balanced_accuracy", {}),
    "auroc": ("roc_auc", {}),
    "auprc": ("average_precision", {}),
    "log_loss": ("log_loss", {}),
    "brier": ("brier_score", {}),
    "mae": ("mae", {}),
    "rmse": ("rmse", {}),
    "r2": ("r2", {}),
    "exact_match": ("exact_match", {}),
}
HF_TASKS = {
    "text_classification": ("text-classification", "Text Classification"),
    "causal_lm_sft": ("text-generation", "Text Generation"),
    "tabular": ("tabular-classification", "Tabular Classification"),
}


# ---------------------------------------------------------------- blocks


@dataclass
class Heading:
    level: int
    text: str


@dataclass
class Para:
    text: str
    lead: str = ""


@dataclass
class Banner:
    kind: str  # ok / draft / stale / not_run / fail
    text: str


@dataclass
class Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    note: str = ""


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Fig:
    figure: Figure


Block = Heading | Para | Banner | Table | Bullets | Fig


@dataclass
class _Ctx:
    session: Session
    records: dict[str, StageRecord]
    states: dict[str, str]
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks += blocks

    def established(self, stage: str) -> bool:
        return self.states.get(stage) == "frozen"


# ---------------------------------------------------------------- value formatting


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


def _is_row_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(r, dict) for r in value)


def rows_table(caption: str, rows: list[dict[str, Any]], max_cols: int = 9) -> Table:
    headers: list[str] = []
    for r in rows:
        headers += [k for k in r if k not in headers]
    headers = headers[:max_cols]
    body = [[fmt_value(r.get(h, ""), 80) for h in headers] for r in rows[:MAX_TABLE_ROWS]]
    note = f"{len(rows) - MAX_TABLE_ROWS} more rows in the record" if len(rows) > MAX_TABLE_ROWS else ""
    return Table(headers, body, caption, note)


# ---------------------------------------------------------------- building


def _load(session_dir: Path) -> _Ctx:
    session = Session.open(Path(session_dir))
    return _Ctx(session, session.records(), dict(session.states()))


def _status_text(status: str, state: str) -> str:
    mark = STATUS_MARK.get(status, status)
    return mark if state == "frozen" else f"{mark} ({state}, not established)"


def _claim_section(c: _Ctx) -> None:
    c.add(Heading(2, "The claim"))
    rec = c.records.get("claim")
    if rec is None:
        c.add(
            Banner(
                "not_run", "No claim has been recorded: nothing below can be read as evidence for a claim."
            )
        )
        return
    _state_banner(c, "claim")
    i = rec.inputs
    success = i.get("success", {}) if isinstance(i.get("success"), dict) else {}
    crit = rec.check("claim.success_criterion")
    criterion = str(crit.measured.get("criterion", "")) if crit else ""
    rows = [
        ("Task kind", i.get("task_kind", "")),
        ("Prediction unit", i.get("prediction_unit", "")),
        ("Target meaning", i.get("target_meaning", "")),
        ("Target kind", i.get("target_kind", "")),
        ("Inference-time inputs", i.get("inference_inputs", [])),
        ("Population", i.get("population", "")),
        (
            "Primary metric",
            f"{i.get('primary_metric', '')} ({i.get('metric_averaging', '') or 'no averaging stated'})",
        ),
        ("Class order", i.get("class_order", [])),
        ("Success criterion", criterion or fmt_value(success)),
        ("Comparators", i.get("comparators", [])),
        ("Run scope", i.get("run_scope", "")),
        ("Label-quality limits", i.get("label_quality_limits", "") or "not stated"),
    ]
    c.add(Table(["Field", "Value"], [[k, fmt_value(v, 400)] for k, v in rows]))


def _glance(c: _Ctx) -> None:
    c.add(Heading(2, "Stages at a glance"))
    rows = []
    for spec in registry.STAGES:
        rec = c.records.get(spec.name)
        state = c.states.get(spec.name, "not_run")
        counts = {s: 0 for s in STATUS_MARK}
        for chk in rec.checks if rec else []:
            counts[chk.status] += 1
        summary = ", ".join(f"{n} {STATUS_MARK[s].lower()}" for s, n in counts.items() if n) or "—"
        rows.append(
            [
                str(spec.index),
                spec.title,
                state,
                str(rec.provenance.revision) if rec else "—",
                summary,
                (rec.provenance.digest[:19] + "…") if rec else "—",
            ]
        )
    c.add(Table(["#", "Stage", "State", "Revision", "Checks", "Digest"], rows))


def _state_banner(c: _Ctx, name: str) -> None:
    rec = c.records.get(name)
    state = c.states.get(name, "not_run")
    if rec is None:
        c.add(Banner("not_run", "Not run: there is no evidence for this stage."))
    elif state == "stale":
        c.add(
            Banner(
                "stale",
                "STALE: this record rests on an upstream record that changed since. Nothing in this stage is "
                "established until it is re-run and frozen.",
            )
        )
    elif state == "draft":
        c.add(Banner("draft", "DRAFT: computed but never frozen. Nothing in this stage is established yet."))
    else:
        c.add(
            Banner(
                "ok",
                f"Frozen at {rec.provenance.frozen_at or '?'} (revision {rec.provenance.revision}, "
                f"digest {rec.provenance.digest[:19]}…).",
            )
        )


def _is_comparison(chk: Check) -> bool:
    return any(_is_row_list(v) and any(k in v[0] for k in COUNT_KEYS) for v in chk.measured.values())


def _is_latency(chk: Check) -> bool:
    return "latency" in chk.id


def _check_details(c: _Ctx, chk: Check, state: str) -> None:
    """Figures and tables of one check's measured values (its summary sits in the checks table)."""
    figs = figures_from_measured(chk.id, chk.measured)
    plotted = {f.title.split(" · ", 1)[1] for f in figs}
    for f in figs:
        c.add(Fig(f))
    for key, value in chk.measured.items():
        if key not in plotted and _is_row_list(value):
            c.add(rows_table(f"{chk.id} · {key}" + ("" if state == "frozen" else f" ({state})"), value))


def _stage_section(c: _Ctx, spec: registry.StageSpec) -> None:
    rec = c.records.get(spec.name)
    state = c.states.get(spec.name, "not_run")
    c.add(Heading(2, f"{spec.index}. {spec.title} — {state.replace('_', ' ')}"))
    c.add(Para(spec.question))
    _state_banner(c, spec.name)
    if rec is None:
        return
    if spec.name != "claim" and rec.inputs:
        c.add(Heading(3, "Decisions recorded"))
        c.add(Table(["Input", "Value"], [[k, fmt_value(v)] for k, v in rec.inputs.items()]))
    c.add(Heading(3, "Checks"))
    if not rec.checks:
        c.add(Para("This record holds no checks."))
    rows = [
        [_status_text(chk.status, state), chk.id, chk.basis, chk.coverage, fmt_value(chk.summary, 400)]
        for chk in rec.checks
    ]
    if rows:
        c.add(Table(["Status", "Check", "Basis", "Coverage", "Summary"], rows))
    for chk in rec.checks:
        if _is_comparison(chk) or _is_latency(chk):
            continue  # shown under "Final comparison" / "Latency"
        _check_details(c, chk, state)
    if rec.notes:
        c.add(Heading(3, "Notes"))
        c.add(Bullets([f"[{n.tag.replace('_', ' ')}] {n.text} ({n.at})" for n in rec.notes]))


def _comparison_section(c: _Ctx) -> None:
    c.add(Heading(2, "Final comparison on the locked test"))
    rec = c.records.get("artifact")
    if rec is None:
        c.add(Banner("not_run", "No final comparison exists: the artifact stage has no record."))
        return
    state = c.states.get("artifact", "not_run")
    if state != "frozen":
        c.add(Banner(state, f"The artifact stage is {state}: the comparison below is not established."))
    comps = [chk for chk in rec.checks if _is_comparison(chk)]
    if not comps:
        c.add(
            Para(
                "The artifact record holds no comparison table with requested / scored / failed / missing counts."
            )
        )
    for chk in comps:
        c.add(Para(f"{_status_text(chk.status, state)}: {chk.summary}", lead=chk.id))
        _check_details(c, chk, state)


def _latency_section(c: _Ctx) -> None:
    c.add(Heading(2, "Latency (a separate axis from quality)"))
    found = [(name, chk) for name, rec in c.records.items() for chk in rec.checks if _is_latency(chk)]
    if not found:
        c.add(Para("No latency was measured."))
        return
    c.add(Para("Timing is reported apart from quality; it is not a serving benchmark."))
    for name, chk in found:
        state = c.states.get(name, "not_run")
        c.add(Para(f"{_status_text(chk.status, state)}: {chk.summary}", lead=chk.id))
        _check_details(c, chk, state)


def _criterion(c: _Ctx) -> str:
    rec = c.records.get("claim")
    crit = rec.check("claim.success_criterion") if rec else None
    return str(crit.measured.get("criterion", "")) if crit else ""


def verdict(c: _Ctx) -> tuple[str, str]:
    """(kind, sentence): the verdict against the success criterion, only from a frozen artifact stage."""
    criterion = _criterion(c) or "(no success criterion recorded)"
    rec = c.records.get("artifact")
    state = c.states.get("artifact", "not_run")
    if rec is None:
        return (
            "not_run",
            f"No verdict: the locked-test comparison has not been run, so '{criterion}' is untested.",
        )
    chk = next((x for x in rec.checks if "verdict" in x.id or "success" in x.id), None)
    if state != "frozen":
        return (
            state,
            f"No established verdict: the artifact stage is {state}; '{criterion}' is not established.",
        )
    if chk is None:
        return "not_run", f"No verdict: the artifact record holds no check against '{criterion}'."
    word = {"pass": "MET", "fail": "NOT MET"}.get(chk.status, STATUS_MARK.get(chk.status, chk.status))
    return ("ok" if chk.status == "pass" else "fail"), f"{word}: {chk.summary} (criterion: {criterion})"


def _verdict_section(c: _Ctx) -> None:
    c.add(Heading(2, "Verdict against the success criterion"))
    kind, text = verdict(c)
    c.add(Banner(kind, text))


def _limitations(c: _Ctx) -> None:
    c.add(Heading(2, "Limitations"))
    items: list[str] = []
    unfinished = [f"{n} ({s})" for n, s in c.states.items() if s != "frozen"]
    if unfinished:
        items.append("Stages not established: " + ", ".join(unfinished) + ".")
    claim = c.records.get("claim")
    if claim is not None:
        limits = str(claim.inputs.get("label_quality_limits", "")).strip()
        items.append(
            f"Label quality: {limits}" if limits else "Label quality is unknown; that remains a limitation."
        )
    for name, rec in c.records.items():
        for n in rec.notes:
            if n.tag == "limitation":
                items.append(f"{name}: {n.text}")
        for chk in rec.checks:
            if chk.status in ("warn", "fail"):
                items.append(f"{chk.id} ({chk.status}): {fmt_value(chk.summary, 300)}")
            elif chk.status == "not_run":
                items.append(f"{chk.id} was not measured: {fmt_value(chk.summary, 300)}")
            if chk.coverage != "full" and chk.replay != "observation":
                items.append(f"{chk.id} covers {chk.coverage}, not the full data.")
    c.add(Bullets(items or ["None recorded."]))


def _not_established(c: _Ctx) -> None:
    c.add(Heading(2, "What this evidence does not establish"))
    items = list(DOES_NOT_ESTABLISH)
    claim = c.records.get("claim")
    if claim is None or claim.inputs.get("target_kind") != "real_world_decision":
        items.insert(1, LABEL_LINE)
    c.add(Bullets(items))


def build_blocks(session_dir: Path) -> tuple[_Ctx, list[Block]]:
    c = _load(session_dir)
    meta = c.session.meta
    c.add(Heading(1, f"Evidence report: {meta.title or meta.id}"))
    c.add(
        Para(
            f"Session {meta.id}, created {meta.created_at} with claimcheck {meta.tool_version}"
            + (f", recipe {meta.recipe}" if meta.recipe else "")
            + f"; report written by claimcheck {__version__} from the session's records."
        )
    )
    kind, text = verdict(c)
    c.add(Banner(kind, "Verdict: " + text))
    _claim_section(c)
    _glance(c)
    for spec in registry.STAGES:
        _stage_section(c, spec)
    _comparison_section(c)
    _latency_section(c)
    _verdict_section(c)
    _limitations(c)
    _not_established(c)
    return c, c.blocks


# ---------------------------------------------------------------- Markdown


_MD_BREAKS = re.compile(r"[ \t\r\n]+")
# GitHub's Markdown links bare "scheme://...", "www." and e-mail text; "\:", "\." and "\@" (valid
# escapes that render as ":", "." and "@") stop it from recognising them.
_MD_AUTOLINK = re.compile(r"(?i):(?=//)|(?<=www)\.|(?<=\S)@(?=\S)")


def md_escape(text: str) -> str:
    """Text as Markdown that shows exactly that text: no markup, no link / image, no hidden bytes.

    Line breaks and tabs fold into one space (a table cell or list item stays one line); every other
    control, bidi or zero-width character becomes a visible stand-in (engine.textsafe.visible);
    the characters Markdown gives meaning to are backslash-escaped (escaped brackets cannot form a
    link or image, escaped angle brackets no autolink or HTML, "http\\://", "www\\." and "a\\@b"
    no bare URL or e-mail link).
    """
    out = visible(_MD_BREAKS.sub(" ", text)).replace("\\", "\\\\")
    for ch in "`|*[]<>":
        out = out.replace(ch, "\\" + ch)
    out = _MD_AUTOLINK.sub(lambda m: "\\" + m.group(), out)
    return " ".join(out.split())


def to_markdown(blocks: list[Block]) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + md_escape(b.text))
        elif isinstance(b, Para):
            out.append((f"**{md_escape(b.lead)}** — " if b.lead else "") + md_escape(b.text))
        elif isinstance(b, Banner):
            out.append(f"> **{b.kind.replace('_', ' ').upper()}** — {md_escape(b.text)}")
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {md_escape(i)}" for i in b.items))
        elif isinstance(b, Table):
            out.append(_md_table(b))
        elif isinstance(b, Fig):
            fig = b.figure
            t = Table(
                ["", "value"], [[lab, val] for lab, val in fig.rows[:MAX_TABLE_ROWS]], f"Figure: {fig.title}"
            )
            if len(fig.rows) > MAX_TABLE_ROWS:
                t.note = f"{len(fig.rows) - MAX_TABLE_ROWS} more points; the plot is in report.html"
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
    lines += ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in t.rows]
    if t.note:
        lines.append("")
        lines.append(f"({md_escape(t.note)})")
    return "\n".join(lines)


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
.banner.stale, .banner.draft { border-color: #bf9000; background: var(--warn); }
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
            out.append(f"<h{b.level}>{escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            lead = f"<strong>{escape(b.lead)}</strong> — " if b.lead else ""
            out.append(f"<p>{lead}{escape(b.text)}</p>")
        elif isinstance(b, Banner):
            out.append(f'<div class="banner {escape(b.kind)}">{escape(b.text)}</div>')
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{escape(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Table):
            out.append(_html_table(b))
        elif isinstance(b, Fig):
            out.append(f"<figure>{b.figure.svg}</figure>")
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
            _html_status_cell(c) if i == status_col else f"<td>{escape(c)}</td>" for i, c in enumerate(row)
        ]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    if t.note:
        parts.append(f'<p class="note">({escape(t.note)})</p>')
    return "".join(parts)


# ---------------------------------------------------------------- model-index


def _source_revision(records: dict[str, StageRecord]) -> str:
    src = records.get("source")
    if src is None:
        return ""
    chk = src.check("source.checksum")
    for value in chk.measured.values() if chk else []:
        found = _find_sha(value)
        if found:
            return found
    return ""


def _find_sha(value: Any) -> str:
    if isinstance(value, str) and (value.startswith("sha256:") or (len(value) == 64 and value.isalnum())):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            if found := _find_sha(v):
                return found
    return ""


def _candidate_rows(rec: StageRecord) -> list[dict[str, Any]]:
    out = []
    for chk in rec.checks:
        if not _is_comparison(chk):
            continue
        for value in chk.measured.values():
            if not _is_row_list(value):
                continue
            for row in value:
                name = next((str(row[k]) for k in ("name", "arm", "comparator") if k in row), "")
                if any(w in name.lower() for w in CANDIDATE_WORDS) and "base" not in name.lower():
                    out.append(row)
    return out


def model_index(session: Session) -> dict[str, Any]:
    """A Hugging Face model-card `model-index` block from the frozen locked-test evaluation.

    Results are included only when the artifact stage is frozen and not stale; otherwise the block
    has no results (never a number that is not established).
    """
    records = session.records()
    states = session.states()
    claim = records.get("claim")
    ci = claim.inputs if claim else {}
    contract = records.get("contract")
    name = ""
    for key in ("model_name", "model", "base_model", "model_id"):
        if contract is not None and isinstance(contract.inputs.get(key), str) and contract.inputs[key]:
            name = f"{contract.inputs[key]} (fine-tuned, session {session.meta.id})"
            break
    entry: dict[str, Any] = {"name": name or f"claimcheck session {session.meta.id}", "results": []}
    artifact = records.get("artifact")
    if artifact is None or states.get("artifact") != "frozen":
        return {"model-index": [entry]}
    metric = str(ci.get("primary_metric", ""))
    hf_type, args = HF_METRICS.get(metric, (metric, {}))
    task_type, task_name = HF_TASKS.get(str(ci.get("task_kind", "")), ("other", "Other"))
    source = records.get("source")
    files = source.inputs.get("files", []) if source else []
    ds_name = Path(str(files[0])).stem if files else "unknown"
    dataset = {
        "name": ds_name,
        "type": ds_name,
        "split": "test",
        "revision": _source_revision(records) or "unknown",
    }
    metrics = []
    for row in _candidate_rows(artifact):
        value = next(
            (row[k] for k in ("value", "estimate", "metric", "score") if isinstance(row.get(k), int | float)),
            None,
        )
        if value is None or isinstance(value, bool):
            continue
        m: dict[str, Any] = {"type": hf_type, "value": float(value), "name": f"{metric} on the locked test"}
        if args:
            m["args"] = dict(args)
        metrics.append(m)
    if metrics:
        entry["results"].append(
            {"task": {"type": task_type, "name": task_name}, "dataset": dataset, "metrics": metrics}
        )
    return {"model-index": [entry]}


def model_index_yaml(session: Session) -> str:
    import yaml  # pyyaml comes with transformers; loaded only when the report is written

    block = _visible_strings(model_index(session))
    head = "# model-index block for a Hugging Face model card, written by claimcheck from frozen records.\n"
    if not block["model-index"][0]["results"]:
        head += "# No results: the artifact stage's locked-test evaluation is not frozen in this session.\n"
    return head + yaml.safe_dump(block, sort_keys=False, allow_unicode=True)


def _visible_strings(value: Any) -> Any:
    """Every string (keys too) with hidden characters made visible: the YAML is read by people."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {_visible_strings(k): _visible_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_visible_strings(v) for v in value]
    return value


# ---------------------------------------------------------------- entry point


def render(session_dir: Path) -> tuple[str, str]:
    c, blocks = build_blocks(session_dir)
    title = f"claimcheck evidence report: {c.session.meta.title or c.session.meta.id}"
    return to_markdown(blocks), to_html(blocks, title)


def write_report(session_dir: Path) -> tuple[Path, Path]:
    """Write report.md, report.html and model-index.yaml into the session; return the first two paths."""
    session_dir = Path(session_dir)
    md, html = render(session_dir)
    md_path, html_path = session_dir / "report.md", session_dir / "report.html"
    atomic_write_text(md_path, md)
    atomic_write_text(html_path, html)
    atomic_write_text(session_dir / "model-index.yaml", model_index_yaml(Session.open(session_dir)))
    return md_path, html_path
