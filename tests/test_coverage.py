"""Checklist coverage (engine/report/coverage.py, engine/report/coverage_map.toml): the map's shape, every mapped
check id, decision and note tag validated against the stage registry and what the stages write, and
the coverage of the real session in the report, the CLI and JSON."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest

from claimcheck.engine.evidence import NoteTag
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.report import coverage
from claimcheck.engine.report.build import render
from claimcheck.tui.cli import main

ENGINE = Path(__file__).resolve().parent.parent / "engine"

# Mapped check ids the sample session does not write (each must still occur in the engine's source).
# written only for a numeric target (a regression session: tests/test_regression.py)
KNOWN_NOT_IN_SAMPLE: set[str] = {
    "source.target_distribution",
    "split.target_distribution",
    # a multi-label target's (tests/test_multilabel.py runs a session that writes them)
    "source.label_lists",
    "split.label_support",
    "artifact.per_label",
}


def _engine_source() -> str:
    return "\n".join(p.read_text() for p in ENGINE.rglob("*.py"))


def test_reforms_has_32_items_in_8_modules() -> None:
    m = coverage.load_map()
    mods = [mod["title"] for mod in m["reforms"]["module"]]
    assert mods == [
        "Study goals",
        "Computational reproducibility",
        "Data quality",
        "Data preprocessing",
        "Modelling",
        "Data leakage",
        "Metrics and uncertainty",
        "Generalisability and limitations",
    ]
    items = m["reforms"]["item"]
    assert len(items) == 32
    per_module = [sum(1 for it in items if it["module"] == str(i)) for i in range(1, 9)]
    assert per_module == [3, 5, 7, 3, 6, 3, 3, 2]
    assert len({it["id"] for it in items}) == 32
    for it in items:
        assert re.fullmatch(rf"{it['module']}[a-g]", it["id"]), it["id"]
        assert it["extent"] in ("full", "partial")
        assert it["extent"] == "full" or it.get("gap"), f"{it['id']}: a partial item says what is missing"
    leak = [t["id"] for t in m["leakage"]["type"]]
    assert leak == ["L1.1", "L1.2", "L1.3", "L1.4", "L2", "L3.1", "L3.2", "L3.3"]
    sections = [s["id"] for s in m["ai_act"]["section"]]
    assert sections[0] == "1" and "2(d)" in sections and "2(g)" in sections and sections[-1] == "9"
    assert "post-market" in m["ai_act"]["section"][-1]["text"].lower()
    assert "not legal advice" in m["meta"]["ai_act_disclaimer"]


def test_every_mapped_reference_exists_in_the_registry(real_session: Path) -> None:
    """Each check id names a registered stage and is written by the stages (the real session, or a
    listed id the engine's source writes); each decision is a field of the stage's Inputs; each
    note tag is a note tag."""
    written = {chk.id for rec in Session.open(real_session).records().values() for chk in rec.checks}
    source = _engine_source()
    tags = set(typing.get_args(NoteTag))
    unknown = []
    for checklist, item, ref in coverage.mapped_refs():
        kind, _, name = ref.partition(":")
        if kind == "check":
            stage = name.split(".", 1)[0]
            assert stage in registry.STAGE_NAMES, (checklist, item, ref)
            if name not in written and not (name in KNOWN_NOT_IN_SAMPLE and f'"{name}"' in source):
                unknown.append((checklist, item, ref))
        elif kind == "input":
            stage, _, field = name.partition(".")
            module = registry.get(stage).module()
            assert module is not None and field in module.Inputs.model_fields, (checklist, item, ref)
        elif kind == "note":
            assert name in tags, (checklist, item, ref)
        else:
            pytest.fail(f"unknown evidence kind in {ref}")
    assert not unknown, f"mapped check ids no stage writes: {unknown}"


def test_an_empty_session_lists_every_item_as_not_addressed() -> None:
    cov = coverage.compute({}, {})
    assert len(cov.reforms) == 32 and len(cov.leakage) == 8
    assert all(it.level == coverage.NOT_ADDRESSED for it in cov.reforms + cov.leakage + cov.ai_act)
    assert all(it.gap for it in cov.reforms)
    assert all(it.finding == "not examined" for it in cov.leakage)
    md = coverage.render_text(cov)
    assert "REFORMS" in md and "not addressed" in md


def test_real_session_coverage(real_session: Path) -> None:
    session = Session.open(real_session)
    records, states = session.records(), dict(session.states())
    cov = coverage.compute(records, states)
    by_module = {}
    for it in cov.reforms:
        by_module.setdefault(it.module, []).append(it)
    # The bar: study goals, data quality, leakage, metrics and uncertainty, limitations are
    # addressed from real checks (not only decisions or notes).
    for mod in ("1", "3", "6", "7", "8"):
        addressed = [it for it in by_module[mod] if it.level == coverage.ADDRESSED]
        assert addressed, mod
        assert any(e.kind == "check" and e.found for it in addressed for e in it.evidence), mod
    # Honest about what it does not address: every item not fully addressed says why.
    assert [it.id for it in cov.reforms if it.level == coverage.NOT_ADDRESSED] == ["2d"]
    assert all(it.gap for it in cov.reforms if it.level != coverage.ADDRESSED)
    post_market = cov.ai_act[-1]
    assert (
        post_market.level == coverage.NOT_ADDRESSED
        and "outside this session's scope" in post_market.gap.lower()
    )
    # Leakage: duplicates across splits are flagged by the split's overlap checks.
    dup = next(it for it in cov.leakage if it.id == "L1.4")
    assert "split.exact_overlap" in dup.finding
    # Deterministic JSON.
    a = json.dumps(cov.to_json(), sort_keys=True)
    assert a == json.dumps(coverage.compute(records, states).to_json(), sort_keys=True)
    assert cov.to_json()["summary"]["reforms"] == {"addressed": 22, "partly": 9, "not addressed": 1}


def test_a_stale_stage_makes_its_items_partly_at_most(real_session: Path) -> None:
    session = Session.open(real_session)
    records, states = session.records(), dict(session.states())
    states["split"] = "stale"
    cov = coverage.compute(records, states)
    item = next(it for it in cov.reforms if it.id == "6b")
    assert item.level == coverage.PARTLY and "split (stale)" in item.gap
    assert "stale" in str(coverage._evidence_cell(item))


def test_report_has_summary_on_first_page_and_appendix(real_session: Path) -> None:
    md, html = render(real_session)
    head = md.split("## The claim", 1)[0]
    assert "| Checklist | Items | Addressed | Partly | Not addressed |" in head
    assert "| REFORMS (Kapoor et al., Sci. Adv. 2024) | 32 | 22 | 9 | 1 |" in head
    appendix = md.split("## Appendix: checklist coverage", 1)[1]
    for text in ("### REFORMS", "### Leakage taxonomy", "EU AI Act, Annex IV", "not legal advice"):
        assert text in appendix, text
    assert appendix.count("| 2d |") == 1 and "not addressed by this session" in appendix
    assert "Appendix: checklist coverage" in html


def test_cli_coverage_json_and_text(real_session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coverage", str(real_session), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["reforms"]) == 32 and data["summary"]["leakage"]["addressed"] >= 1
    assert main(["coverage", str(real_session)]) == 0
    out = capsys.readouterr().out
    assert "REFORMS modules:" in out and "6. Data leakage" in out
    assert main(["coverage", str(real_session.parent / "nope")]) == 2


async def test_tui_coverage_view_from_every_stage(real_workspace: Path, tmp_path: Path) -> None:
    """f7 opens the coverage view at 80x24 from each stage; Escape returns to the same stage."""
    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.screens import CoverageScreen
    from tests import real_session as rs
    from tests.test_tui_support import screen_text, wait_for

    path = rs.copy_workspace(real_workspace, tmp_path)
    app = make_app(path, workspace=path.parents[1])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
        for i, stage in enumerate(registry.STAGE_NAMES, start=1):
            await pilot.press("ctrl+l", str(i))
            await wait_for(
                pilot, lambda s=stage: app.screen.view(s) is not None and app.screen.view(s)._ready
            )
            await pilot.press("f7")
            await wait_for(pilot, lambda: isinstance(app.screen, CoverageScreen))
            text = " ".join(screen_text(app).replace("│", " ").split())
            assert (
                "Checklist coverage" in text
                and "REFORMS" in text
                and "not legal" in text
                and "conformity assessment" in text
            ), text
            assert "32" in text
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
            assert app.screen.current == stage
        await pilot.press("f7")
        await wait_for(pilot, lambda: isinstance(app.screen, CoverageScreen))
        await pilot.press("pagedown", "pagedown")
        body = str(app.screen.query_one("#coverage-body").render())
        assert "2d    not addressed" in body and "L3.2" in body and "Post-market" in body
        app.save_screenshot(str(tmp_path / "coverage.svg"))
