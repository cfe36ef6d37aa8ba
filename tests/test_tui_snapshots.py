"""Snapshot tests: every screen at 80x24, deterministic (fixed ids, no cursor blink, fixed recipes).

Regenerate after an intended change with:  .venv/bin/pytest tests/test_tui_snapshots.py --snapshot-update
Records for the visual panels are written here in the shape each stage records, so the pictures do
not move when a stage's numbers change; the stages' own tests check the numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tui.app as tui_app
from engine.evidence import Check, StageRecord
from engine.session import Session
from tests.claim_answers import CLAIM
from tests.test_tui_support import patch_modules, toy_module
from tui.app import make_app

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
    from tests.test_tui_support import wait_for
    from tui.app import SessionScreen

    await wait_for(
        pilot,
        lambda: (
            isinstance(pilot.app.screen, SessionScreen)
            and pilot.app.screen.view() is not None
            and pilot.app.screen.view()._ready
            and bool(pilot.app.screen.built)
        ),
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
    from engine import stages as registry

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


def test_not_built(snap_compare, tmp_path: Path, monkeypatch) -> None:
    patch_modules(monkeypatch, {"artifact": None})
    app = make_app(new_session(tmp_path).path, workspace=tmp_path)
    assert snap_compare(app, press=["7"], terminal_size=SIZE, run_before=ready)


async def locked_shown(pilot) -> None:
    from tests.test_tui_support import wait_for
    from tui.screens import LockedScreen

    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LockedScreen))


def test_locked(snap_compare, tmp_path: Path) -> None:
    session = new_session(tmp_path, claim=False)
    (session.path / ".lock").write_text(
        json.dumps({"pid": 1, "host": "elsewhere", "since": "2026-01-01T00:00:00+00:00"})
    )
    app = make_app(session.path, workspace=tmp_path)
    assert snap_compare(app, terminal_size=SIZE, run_before=locked_shown)


# ---------------------------------------------------------------- visual panels


def test_source_visual(snap_compare, tmp_path: Path) -> None:
    s = new_session(tmp_path)
    put(
        s,
        "source",
        [
            Check(
                id="source.class_coverage",
                status="warn",
                summary="security is rare",
                measured={
                    "per_target": {
                        "billing": 6100,
                        "technical": 5200,
                        "account": 3900,
                        "shipping": 2500,
                        "returns": 2000,
                        "security": 300,
                    },
                    "rows": 20000,
                },
            ),
            Check(
                id="source.missingness",
                status="info",
                summary="3 columns have nulls",
                measured={
                    "null_share": {
                        "subject": 0.0,
                        "body": 0.004,
                        "case_id": 0.61,
                        "thread_id": 0.35,
                        "queue": 0.0,
                    }
                },
            ),
        ],
    )
    app = make_app(s.path, workspace=tmp_path)
    assert snap_compare(app, press=["2", "f4"], terminal_size=SIZE, run_before=ready)


def _upto_split(tmp_path: Path) -> Session:
    s = new_session(tmp_path)
    put(
        s,
        "source",
        [Check(id="source.class_coverage", status="pass", summary="ok", measured={"per_target": {"a": 1}})],
    )
    put(
        s,
        "split",
        [
            Check(
                id="split.prevalence",
                status="info",
                summary="sizes",
                measured={
                    "sizes": {"train": 12000, "dev": 3000, "calibration": 2000, "test": 3000},
                    "per_split": {
                        sp: {"billing": 0.305, "security": 0.015, "technical": 0.26}
                        for sp in ("train", "dev", "calibration", "test")
                    },
                },
            ),
        ],
    )
    return s


def test_split_visual(snap_compare, tmp_path: Path) -> None:
    app = make_app(_upto_split(tmp_path).path, workspace=tmp_path)
    assert snap_compare(app, press=["3", "f4"], terminal_size=SIZE, run_before=ready)


def test_baseline_visual(snap_compare, tmp_path: Path) -> None:
    s = _upto_split(tmp_path)
    per = [
        {"class": c, "precision": p, "recall": r, "f1": f, "support": n}
        for c, p, r, f, n in (
            ("billing", 0.81, 0.84, 0.825, 900),
            ("security", 0.5, 0.2, 0.286, 45),
            ("technical", 0.7, 0.72, 0.71, 780),
        )
    ]
    put(
        s,
        "baseline",
        [
            Check(
                id="baseline.conventional",
                status="info",
                summary="tfidf_logreg: macro_f1 0.607",
                measured={
                    "primary_metric": "macro_f1",
                    "learners": {
                        "tfidf_logreg": {
                            "macro_f1": 0.607,
                            "accuracy": 0.74,
                            "per_class": per,
                            "confusion": [[756, 4, 140], [20, 9, 16], [210, 8, 562]],
                        }
                    },
                },
            ),
        ],
    )
    app = make_app(s.path, workspace=tmp_path)
    assert snap_compare(app, press=["4", "f4"], terminal_size=SIZE, run_before=ready)


def test_contract_visual(snap_compare, tmp_path: Path) -> None:
    s = _upto_split(tmp_path)
    put(s, "baseline", [Check(id="baseline.trivial", status="info", summary="floor")])
    hist = [
        f"{i * 26:>6}-{(i + 1) * 26 - 1:<6} {'█' * c:<30} {c * 10}" + (" ← max_length" if i == 4 else "")
        for i, c in enumerate((3, 12, 30, 18, 7, 4, 2, 1, 0, 1))
    ]
    put(
        s,
        "contract",
        [
            Check(
                id="contract.prepared_lengths",
                status="warn",
                summary="p95 140",
                measured={
                    "count": 780,
                    "p50": 70,
                    "p95": 140,
                    "p99": 190,
                    "max": 250,
                    "histogram": hist,
                    "max_length": 128,
                    "truncated": 62,
                    "truncated_share": 0.0795,
                },
            ),
            Check(
                id="contract.prepared_samples",
                status="info",
                summary="2 examples",
                measured={
                    "samples": [
                        {
                            "id": "17",
                            "tokens": 12,
                            "supervised_tokens": 4,
                            "masked_tokens": 8,
                            "decoded": "<user> where is my parcel [b]?</user><assistant>⟦shipping⟧</assistant>",
                        },
                        {
                            "id": "42",
                            "tokens": 30,
                            "label": "billing",
                            "label_id": 0,
                            "truncated": True,
                            "decoded": "refund not received \x1b[31m card declined",
                        },
                    ]
                },
            ),
        ],
    )
    app = make_app(s.path, workspace=tmp_path)
    assert snap_compare(app, press=["5", "f4"], terminal_size=SIZE, run_before=ready)


def test_dispatch_visual_without_job(snap_compare, tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path).path, workspace=tmp_path)
    assert snap_compare(app, press=["6", "f4"], terminal_size=SIZE, run_before=ready)


def test_artifact_visual(snap_compare, tmp_path: Path) -> None:
    s = _upto_split(tmp_path)
    for name in ("baseline", "contract", "dispatch"):
        put(s, name, [Check(id=f"{name}.x", status="info", summary="-")])
    put(
        s,
        "artifact",
        [
            Check(
                id="artifact.comparison",
                status="warn",
                summary="macro_f1",
                measured={
                    "metric": "macro_f1",
                    "values": {
                        "candidate": 0.655,
                        "base_model": 0.166,
                        "best_baseline": 0.607,
                        "trivial_baseline": 0.08,
                    },
                    "differences": {
                        "base_model": {"estimate": 0.489, "lo": 0.46, "hi": 0.52},
                        "best_baseline": {"estimate": 0.048, "lo": -0.004, "hi": 0.1},
                    },
                    "candidate_better": {"base_model": True, "best_baseline": False},
                },
            ),
            Check(
                id="artifact.calibrated",
                status="info",
                summary="ece",
                measured={
                    "method": "temperature",
                    "arms": {"candidate": {"raw": {"ece": 0.081}, "calibrated": {"ece": 0.031}}},
                },
            ),
        ],
    )
    app = make_app(s.path, workspace=tmp_path)
    assert snap_compare(app, press=["7", "f4"], terminal_size=SIZE, run_before=ready)


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
