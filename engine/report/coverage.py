"""Checklist coverage computed from a session's records: REFORMS (32 items in 8 modules), the leakage
taxonomy of Kapoor & Narayanan (8 types) and a map onto the EU AI Act's Annex IV headings.

The mapping lives in one data file, `coverage_map.toml` beside this module, reviewed item by item.
Here it is only read and applied: for each item, which checks, decisions and notes of this session
answer it, with their status, their stage's state and the report section that holds them. An item
nothing answers is listed as 'not addressed by this session', never left out. Nothing reads the
clock: the same session gives the same result (and the same JSON bytes).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.report.render import Block, Heading, Para, Refs, Table, anchor, fmt_value

MAP_FILE = Path(__file__).with_name("coverage_map.toml")
ADDRESSED, PARTLY, NOT_ADDRESSED = "addressed", "partly", "not addressed"
LEVELS = (ADDRESSED, PARTLY, NOT_ADDRESSED)
LISTS = {
    "reforms": "REFORMS (Kapoor et al., Sci. Adv. 2024)",
    "leakage": "Leakage taxonomy (Kapoor & Narayanan, Patterns 2023)",
    "ai_act": "EU AI Act Annex IV (evidence map, not legal advice)",
}
NOT_ADDRESSED_TEXT = "not addressed by this session"


@cache
def load_map() -> dict[str, Any]:
    with MAP_FILE.open("rb") as fh:
        return tomllib.load(fh)


def mapped_refs() -> list[tuple[str, str, str]]:
    """Every (list, item id, evidence ref) in the map: what the tests validate against the registry."""
    m = load_map()
    out = []
    for name, items in (
        ("reforms", m["reforms"]["item"]),
        ("leakage", m["leakage"]["type"]),
        ("ai_act", m["ai_act"]["section"]),
    ):
        out += [
            (name, it["id"], r) for it in items for ref in it.get("evidence", []) for r in alternatives(ref)
        ]
    return out


def alternatives(ref: str) -> list[str]:
    """ "check:a|b" lists checks that answer the same thing for different targets (class coverage for
    a categorical target, the target's distribution for a numeric one): one ref per alternative."""
    kind, _, names = ref.partition(":")
    return [f"{kind}:{n}" for n in names.split("|")]


SECTION_PARTS = {"check": "Checks", "input": "Decisions recorded", "note": "Notes"}
CLAIM_SECTION = "The claim"
APPENDIX_ANCHOR = anchor("appendix", "coverage")


def section_of(stage: str, kind: str = "check") -> str:
    """The report section that shows a stage's checks, decisions or notes."""
    if stage == "claim" and kind == "input":
        return CLAIM_SECTION
    spec = registry.get(stage)
    return f"{spec.index}. {spec.title} › {SECTION_PARTS[kind]}"


def section_anchor(stage: str, kind: str = "check") -> str:
    """The id of that section in report.md / report.html (engine/report/build.py gives its headings these)."""
    if stage == "claim" and kind == "input":
        return anchor(CLAIM_SECTION)
    return anchor("stage", stage, SECTION_PARTS[kind])


@dataclass(frozen=True)
class Evidence:
    ref: str  # as written in the map: check:ID / input:stage.field / note:tag
    kind: str
    stage: str  # "" for a note tag found nowhere
    found: bool
    status: str  # a check's status; "recorded" for a decision or note; "absent" when not found
    state: str  # the stage's state (frozen / draft / stale / not_run)
    section: str
    summary: str = ""

    def label(self) -> str:
        if not self.found:
            return f"{self.ref} (absent)"
        where = self.stage if self.kind == "note" else ""
        extra = "" if self.state == "frozen" else f", {self.state}"
        name = self.ref.split(":", 1)[1]
        return f"{name}{' @' + where if where else ''} [{self.status}{extra}] §{self.section}"

    def anchor(self) -> str:
        return section_anchor(self.stage, self.kind) if self.found and self.stage else ""

    def to_json(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "kind": self.kind,
            "stage": self.stage,
            "found": self.found,
            "status": self.status,
            "state": self.state,
            "section": self.section,
            "anchor": self.anchor(),
            "summary": self.summary,
        }


@dataclass(frozen=True)
class Item:
    checklist: str
    id: str
    text: str
    level: str
    evidence: tuple[Evidence, ...]
    module: str = ""
    gap: str = ""
    finding: str = ""  # leakage only: the mapped checks that raise a warning or failure

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "level": self.level,
            "evidence": [e.to_json() for e in self.evidence],
            "gap": self.gap,
        }
        if self.module:
            out["module"] = self.module
        if self.checklist == "leakage":
            out["finding"] = self.finding
        return out


@dataclass
class Coverage:
    reforms: list[Item] = field(default_factory=list)
    leakage: list[Item] = field(default_factory=list)
    ai_act: list[Item] = field(default_factory=list)

    def lists(self) -> dict[str, list[Item]]:
        return {"reforms": self.reforms, "leakage": self.leakage, "ai_act": self.ai_act}

    def counts(self) -> dict[str, dict[str, int]]:
        return {
            name: {lv: sum(1 for it in items if it.level == lv) for lv in LEVELS}
            for name, items in self.lists().items()
        }

    def module_counts(self) -> list[tuple[str, str, dict[str, int]]]:
        out = []
        for mod in load_map()["reforms"]["module"]:
            items = [it for it in self.reforms if it.module == mod["id"]]
            out.append((mod["id"], mod["title"], {lv: sum(it.level == lv for it in items) for lv in LEVELS}))
        return out

    def to_json(self) -> dict[str, Any]:
        m = load_map()["meta"]
        return {
            "sources": {
                "reforms": m["reforms_source"],
                "leakage": m["leakage_source"],
                "ai_act": m["ai_act_source"],
            },
            "ai_act_disclaimer": m["ai_act_disclaimer"],
            "summary": self.counts(),
            "reforms_modules": [
                {"id": i, "title": t, **{k.replace(" ", "_"): v for k, v in c.items()}}
                for i, t, c in self.module_counts()
            ],
            **{name: [it.to_json() for it in items] for name, items in self.lists().items()},
        }

    def summary_rows(self) -> list[list[str]]:
        counts = self.counts()
        return [
            [LISTS[name], str(len(items)), *(str(counts[name][lv]) for lv in LEVELS)]
            for name, items in self.lists().items()
        ]


# ---------------------------------------------------------------- computing


def _evidence(ref: str, records: dict[str, StageRecord], states: dict[str, str]) -> list[Evidence]:
    kind, _, name = ref.partition(":")
    if "|" in name:  # the first alternative this session measured, else the first it holds at all
        found = [e for r in alternatives(ref) for e in _evidence(r, records, states) if e.found]
        measured = [e for e in found if e.status != "not_run"]
        return (measured or found or _evidence(alternatives(ref)[0], records, states))[:1]
    if kind == "check":
        stage = name.split(".", 1)[0]
        rec = records.get(stage)
        chk = rec.check(name) if rec else None
        state = states.get(stage, "not_run")
        sec = section_of(stage)
        if chk is None:
            return [Evidence(ref, kind, stage, False, "absent", state, sec)]
        return [Evidence(ref, kind, stage, True, chk.status, state, sec, fmt_value(chk.summary, 200))]
    if kind == "input":
        stage, _, key = name.partition(".")
        rec = records.get(stage)
        value = rec.inputs.get(key) if rec else None
        state = states.get(stage, "not_run")
        found = value not in (None, "", [], {})
        return [
            Evidence(
                ref,
                kind,
                stage,
                found,
                "recorded" if found else "absent",
                state,
                section_of(stage, "input"),
                fmt_value(value, 200) if found else "",
            )
        ]
    if kind == "note":
        out = [
            Evidence(
                ref,
                kind,
                stage,
                True,
                "recorded",
                states.get(stage, "not_run"),
                section_of(stage, "note"),
                fmt_value(n.text, 200),
            )
            for stage in registry.STAGE_NAMES
            for rec in [records.get(stage)]
            if rec is not None
            for n in rec.notes
            if n.tag == name
        ]
        return out or [Evidence(ref, kind, "", False, "absent", "not_run", "")]
    raise ValueError(f"coverage map: unknown evidence kind in {ref!r}")


def _level(evidence: list[Evidence], extent: str) -> str:
    found = [e for e in evidence if e.found]
    if not found:
        return NOT_ADDRESSED
    complete = (
        extent == "full"
        and len(found) == len(evidence)
        and all(e.state == "frozen" and e.status != "not_run" for e in found)
    )
    return ADDRESSED if complete else PARTLY


def _gap(evidence: list[Evidence], level: str, gap: str) -> str:
    if level == ADDRESSED:
        return ""
    parts = [gap] if gap else []
    if level == NOT_ADDRESSED and not gap:
        parts.append(NOT_ADDRESSED_TEXT.capitalize() + ".")
    absent = [e.ref.split(":", 1)[1] for e in evidence if not e.found]
    if absent and level != NOT_ADDRESSED:
        parts.append("Absent from this session: " + ", ".join(absent) + ".")
    unsettled = sorted({f"{e.stage} ({e.state})" for e in evidence if e.found and e.state != "frozen"})
    if unsettled:
        parts.append("Not established (stage not frozen): " + ", ".join(unsettled) + ".")
    not_run = [e.ref.split(":", 1)[1] for e in evidence if e.found and e.status == "not_run"]
    if not_run:
        parts.append("Not measured: " + ", ".join(not_run) + ".")
    return " ".join(parts)


def _item(
    checklist: str, raw: dict[str, Any], records: dict[str, StageRecord], states: dict[str, str]
) -> Item:
    evidence: list[Evidence] = []
    for ref in raw.get("evidence", []):
        evidence += _evidence(ref, records, states)
    extent = raw.get("extent", "partial" if raw.get("gap") else "full")
    level = _level(evidence, extent)
    finding = ""
    if checklist == "leakage":
        raised = [e.ref.split(":", 1)[1] for e in evidence if e.found and e.status in ("warn", "fail")]
        if level == NOT_ADDRESSED:
            finding = "not examined"
        elif raised:
            finding = "flagged by " + ", ".join(raised)
        else:
            finding = "no finding in the mapped checks"
    return Item(
        checklist,
        str(raw["id"]),
        raw["text"],
        level,
        tuple(evidence),
        module=str(raw.get("module", "")),
        gap=_gap(evidence, level, raw.get("gap", "")),
        finding=finding,
    )


def compute(records: dict[str, StageRecord], states: dict[str, str]) -> Coverage:
    m = load_map()
    return Coverage(
        reforms=[_item("reforms", it, records, states) for it in m["reforms"]["item"]],
        leakage=[_item("leakage", it, records, states) for it in m["leakage"]["type"]],
        ai_act=[_item("ai_act", it, records, states) for it in m["ai_act"]["section"]],
    )


def from_session(session_dir: Path) -> Coverage:
    session = Session.open(Path(session_dir))
    return compute(session.records(), dict(session.states()))


# ---------------------------------------------------------------- report blocks and text


def summary_table(cov: Coverage) -> Table:
    return Table(
        ["Checklist", "Items", "Addressed", "Partly", "Not addressed"],
        cov.summary_rows(),
        caption="Checklist coverage computed from the records (details in the appendix)",
    )


def _evidence_cell(item: Item) -> Refs:
    return Refs(tuple((e.label(), e.anchor()) for e in item.evidence if e.found), NOT_ADDRESSED_TEXT)


def appendix_blocks(cov: Coverage) -> list[Block]:
    m = load_map()["meta"]
    out: list[Block] = [
        Heading(2, "Appendix: checklist coverage", APPENDIX_ANCHOR),
        Para(
            "Computed from this session's records with the reviewed map engine/report/coverage_map.toml. "
            "'Addressed': every mapped check, decision or note is present, frozen and measured, and the "
            "map judges it a full answer; 'partly': some of it; 'not addressed by this session': none. "
            "Each piece of evidence names its status and the report section (§) that holds it."
        ),
        summary_table(cov),
        Heading(3, "REFORMS"),
        Para(m["reforms_source"]),
        Table(
            ["Module", "Items", "Addressed", "Partly", "Not addressed"],
            [
                [f"{i}. {t}", str(sum(c.values())), *(str(c[lv]) for lv in LEVELS)]
                for i, t, c in cov.module_counts()
            ],
        ),
    ]
    titles = {mod["id"]: mod["title"] for mod in load_map()["reforms"]["module"]}
    for mod_id, title in titles.items():
        rows = [
            [it.id, it.text, it.level, _evidence_cell(it), it.gap or "—"]
            for it in cov.reforms
            if it.module == mod_id
        ]
        out.append(
            Table(["Item", "Asks", "Coverage", "Evidence", "Not covered"], rows, caption=f"{mod_id}. {title}")
        )
    out += [
        Heading(3, "Leakage taxonomy"),
        Para(m["leakage_source"]),
        Table(
            ["Type", "Leakage", "Coverage", "Finding", "Evidence", "Not covered"],
            [[it.id, it.text, it.level, it.finding, _evidence_cell(it), it.gap or "—"] for it in cov.leakage],
        ),
        Heading(3, "EU AI Act, Annex IV — evidence map"),
        Para(m["ai_act_disclaimer"], lead="Not legal advice, not a conformity assessment"),
        Para(m["ai_act_source"]),
        Table(
            ["Section", "Heading", "Coverage", "Evidence", "Not covered"],
            [[it.id, it.text, it.level, _evidence_cell(it), it.gap or "—"] for it in cov.ai_act],
        ),
    ]
    return out


def render_text(cov: Coverage, width: int = 100) -> str:
    """Plain text for the terminal: the summary, then one line per item."""
    lines = ["Checklist coverage (computed from the records)", ""]
    lines.append(f"{'checklist':<56} {'items':>5} {'addr.':>5} {'partly':>6} {'not':>4}")
    for row in cov.summary_rows():
        lines.append(f"{row[0]:<56} {row[1]:>5} {row[2]:>5} {row[3]:>6} {row[4]:>4}")
    lines.append("")
    lines.append("REFORMS modules:")
    for mid, title, c in cov.module_counts():
        lines.append(
            f"  {mid}. {title:<36} addressed {c[ADDRESSED]}, partly {c[PARTLY]}, not addressed {c[NOT_ADDRESSED]}"
        )
    for name, items in cov.lists().items():
        lines += ["", LISTS[name] + ":"]
        for it in items:
            lines.append(f"  {it.id:<5} {it.level:<14} {fmt_value(it.text, width - 24)}")
            if it.finding:
                lines.append(f"        finding: {it.finding}")
    return "\n".join(lines)
