"""Snapshot tests: every screen at 80x24, deterministic (fixed ids, no cursor blink, fixed recipes).

Regenerate after an intended change with:  .venv/bin/pytest tests/test_tui_snapshots.py --snapshot-update
The visual panels are drawn from the real session (tests/real_session.py), never from hand-made
records; tests/test_tui_panels.py checks their numbers against the record's typed shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import claimcheck.tui.app as tui_app
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.tui.app import make_app
from tests import real_session as rs
from tests.claim_answers import CLAIM
from tests.test_tui_support import patch_modules, toy_module

SIZE = (80, 24)
RECIPES = [
    ("text-classification-qlora", "encoder + LoRA head on ticket text"),
    ("tabular-sklearn", "scikit-learn only"),
]


@pytest.fixture(autouse=True)
def fixed_recipes(monkeypatch):
    monkeypatch.setattr(tui_app, "_recipes", lambda: (list(RECIPES), None))


async def ready(pilot) -> None:
    """Keys go to the session screen only once its first page is drawn."""
    from claimcheck.tui.app import SessionScreen
    from tests.test_tui_support import wait_for

    await wait_for(
        pilot,
        lambda: (
            isinstance(pilot.app.screen, SessionScreen)
            and pilot.app.screen.view() is not None
            and pilot.app.screen.view()._ready
        ),
        timeout=120,  # a reopened real session opens on its verdict page, the heaviest to draw
    )


def new_session(tmp_path: Path, claim: bool = True, freeze: bool = True) -> Session:
    session = Session.create(
        tmp_path / "runs" / "snap", workspace=tmp_path, session_id="snap", title="snapshot"
    )
    if claim:
        session.run_stage("claim", CLAIM)
        if freeze:
            session.freeze("claim")
    return session


def put(session: Session, name: str, checks: list[Check], inputs: dict | None = None) -> None:
    """A frozen record of `name` on the current upstream chain, without running the stage."""
    from claimcheck.engine.pipeline import registry

    upstream = {
        u: session.record(u).provenance.digest for u in registry.upstream_names(name) if session.record(u)
    }
    rec = StageRecord(stage=name, inputs=inputs or {}, checks=checks)
    rec.provenance.upstream = upstream
    session.save_record(rec)
    session.freeze(name)


def test_start_screen(snap_compare, tmp_path: Path) -> None:
    Session.create(tmp_path / "runs" / "earlier", workspace=tmp_path, title="first try")
    app = make_app(workspace=tmp_path, session_id="snap", data_file="sample_data/tickets.csv")
    assert snap_compare(app, terminal_size=SIZE)


def test_claim_form(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path, claim=False).path, workspace=tmp_path)
    assert snap_compare(app, press=["enter"], terminal_size=SIZE, run_before=ready)


def test_claim_checks(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path, freeze=False).path, workspace=tmp_path)
    assert snap_compare(app, press=["enter", "f3"], terminal_size=SIZE, run_before=ready)


def test_freeze_confirm(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path, freeze=False).path, workspace=tmp_path)
    assert snap_compare(app, press=["enter", "ctrl+f"], terminal_size=SIZE, run_before=ready)


def test_notes(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path, freeze=False).path, workspace=tmp_path)
    assert snap_compare(app, press=["enter", "ctrl+n"], terminal_size=SIZE, run_before=ready)


def test_help(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path, claim=False).path, workspace=tmp_path)
    assert snap_compare(app, press=["f1"], terminal_size=SIZE, run_before=ready)


def test_generic_toml_form(snap_compare, tmp_path: Path, monkeypatch) -> None:
    patch_modules(monkeypatch, {"source": toy_module("source")})
    app = make_app(new_session(tmp_path).path, workspace=tmp_path)
    assert snap_compare(app, press=["2"], terminal_size=SIZE, run_before=ready)


async def locked_shown(pilot) -> None:
    from claimcheck.tui.screens import LockedScreen
    from tests.test_tui_support import wait_for

    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LockedScreen))


def test_locked(snap_compare, tmp_path: Path) -> None:
    session = new_session(tmp_path, claim=False)
    (session.path / ".lock").write_text(
        json.dumps({"pid": 1, "host": "elsewhere", "since": "2026-01-01T00:00:00+00:00"})
    )
    app = make_app(session.path, workspace=tmp_path)
    assert snap_compare(app, terminal_size=SIZE, run_before=locked_shown)


# ---------------------------------------------------------------- visual panels
# On the real session (tests/real_session.py), not on hand-made records: only the panels whose
# figures come from the data and seeded scikit-learn (source, split, baseline), so the pictures
# are the same on every machine. Contract lengths depend on the tokenizer built on the spot and
# dispatch/artifact on training numbers: tests/test_tui_panels.py asserts those panels instead.


def _real_app(real_workspace: Path, tmp_path: Path):
    path = rs.copy_workspace(real_workspace, tmp_path)
    return make_app(path, workspace=path.parents[1])


def test_source_visual(snap_compare, real_workspace: Path, tmp_path: Path) -> None:
    app = _real_app(real_workspace, tmp_path)
    assert snap_compare(app, press=["ctrl+l", "2", "f4"], terminal_size=SIZE, run_before=ready)


def test_split_visual(snap_compare, real_workspace: Path, tmp_path: Path) -> None:
    app = _real_app(real_workspace, tmp_path)
    assert snap_compare(app, press=["ctrl+l", "3", "f4"], terminal_size=SIZE, run_before=ready)


def test_baseline_visual(snap_compare, real_workspace: Path, tmp_path: Path) -> None:
    app = _real_app(real_workspace, tmp_path)
    assert snap_compare(app, press=["ctrl+l", "4", "f4"], terminal_size=SIZE, run_before=ready)


def test_dispatch_visual_without_job(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path).path, workspace=tmp_path)
    assert snap_compare(app, press=["6", "f4"], terminal_size=SIZE, run_before=ready)


def _data_rows_session(tmp_path: Path) -> Session:
    rows = ["ticket_id,subject,queue"] + [f"{i},subject {i},billing" for i in range(500)]
    rows[3] = '2,"[b]markup[/b] \x1b[31mred",security'
    (tmp_path / "tickets.csv").write_text("\n".join(rows) + "\n")
    s = new_session(tmp_path)
    put(
        s,
        "source",
        [Check(id="source.class_coverage", status="pass", summary="ok")],
        {"files": ["tickets.csv"]},
    )
    return s


async def _rows_shown(pilot) -> None:
    from tests.test_tui_support import screen_text, wait_for

    await ready(pilot)
    await pilot.press("2", "f6")
    await wait_for(pilot, lambda: "of 500" in (t := screen_text(pilot.app)) and "billing" in t)


def test_source_data_rows(snap_compare, tmp_path: Path) -> None:
    app = make_app(_data_rows_session(tmp_path).path, workspace=tmp_path)
    assert snap_compare(app, terminal_size=SIZE, run_before=_rows_shown)


def test_data_rows_are_full_width_even_when_the_table_is_drawn_before_it_measures(
    tmp_path: Path, monkeypatch
) -> None:
    # DataTable measures auto-width columns on idle, and lines drawn before that stay cached at the
    # header's width ("billi" for "billing": a snapshot that failed now and then under load). Drawing
    # every line just before each idle makes that order certain; the widths must not depend on it.
    from textual.widgets import DataTable

    measure = DataTable._on_idle

    async def draw_then_measure(self, event) -> None:
        for y in range(self.size.height):
            self.render_line(y)
        await measure(self, event)

    monkeypatch.setattr(DataTable, "_on_idle", draw_then_measure)
    app = make_app(_data_rows_session(tmp_path).path, workspace=tmp_path)

    async def shown(pilot) -> None:
        await _rows_shown(pilot)
        pilot.app.exit("shown")

    assert app.run(headless=True, size=SIZE, auto_pilot=shown) == "shown"


@pytest.mark.parametrize("stage", [s.name for s in registry.STAGES])
def test_stage_form(snap_compare, tmp_path: Path, monkeypatch, stage: str) -> None:
    """Each stage's form as generated from its Inputs, pre-filled (and marked) from the default recipe."""
    from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE, load_recipe

    monkeypatch.setattr(tui_app, "_recipes", lambda: (list(RECIPES), load_recipe))
    session = Session.create(
        tmp_path / "runs" / "snap",
        workspace=tmp_path,
        session_id="snap",
        title="snapshot",
        recipe=DEFAULT_RECIPE,
    )
    app = make_app(session.path, workspace=tmp_path)
    index = str(registry.get(stage).index)
    assert snap_compare(app, press=["ctrl+l", index], terminal_size=SIZE, run_before=ready)
