"""The report's account of where the data and its labels came from, read from the source record:
the preprocessing scripts (pinned, rebuilt), how the labels were made, their maturity and the
selection into the data set; and the qualifier every figure carries when a teacher model wrote the
labels."""

from __future__ import annotations

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.report.render import Block, Heading, Para, Table, fmt_value, status_text
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes.data import LabelProvenance, Preprocessing

SECTION = "Where the data and its labels came from"
IDS = ("source.preprocessing", "source.label_provenance", "source.label_maturity", "source.selection")


def teacher_qualifier(source: StageRecord | None) -> str:
    """The sentence set next to every figure when a teacher model wrote the labels ('' otherwise)."""
    chk = source.check("source.label_provenance") if source is not None else None
    lp = parse(chk, LabelProvenance) if chk is not None and chk.measured else None
    if lp is None or lp.method != "teacher_model":
        return ""
    return (
        f"Labels written by teacher model {lp.teacher_model}@{lp.teacher_revision}: this figure measures "
        "agreement with that model, not correctness."
    )


def provenance_blocks(source: StageRecord | None, state: str) -> list[Block]:
    """The section (empty for a source record that holds none of these checks, or none measured)."""
    if source is None:
        return []
    checks = [c for c in (source.check(i) for i in IDS) if c is not None]
    if not any(c.measured for c in checks):
        return []
    out: list[Block] = [Heading(2, SECTION)]
    pre = parse(source.check("source.preprocessing"), Preprocessing)
    if pre is not None and pre.scripts:
        rows = []
        for path, s in pre.scripts.items():
            rebuilt = "not asked"
            if s.rebuilt is not None:
                rebuilt = "byte-identical" if s.rebuilt.matches else f"DIFFERS (exit {s.rebuilt.returncode})"
            helpers = ", ".join(s.local_modules) or "—"
            rows.append([path, s.sha256[:16] + "…", s.output or "—", helpers, rebuilt])
        caption = "Preprocessing scripts, pinned by sha256 (replay fails if a byte of one changes)"
        out.append(Table(["Script", "sha256", "Writes", "Local modules (pinned)", "Rebuild"], rows, caption))
    for chk in checks:
        out.append(Para(f"{status_text(chk.status, state)}: {fmt_value(chk.summary, 400)}", lead=chk.id))
    return out
