"""The verdict shown in the app is the verdict recorded: on real records of a numeric-target claim
without fine-tuning (the sessions of tests/test_regression_verdict.py, one per claim verdict), the
app at 80×24 opens on the verdict, its banner states `artifact.verdict`'s claim line whole (wrapped,
never cut), the stage list says the same verdict word, and the verdict's Report button writes the
report set and shows report.md, whose headline states the same verdict and reason."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from claimcheck.engine.ledger.session import Session
from claimcheck.engine.report.render import md_escape
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from tests.test_regression_verdict import CRITERIA
from tests.test_regression_verdict import sessions as sessions  # the module-scoped fixture
from tests.test_tui_support import screen_text, wait_for

WORDS = {"met": "met", "not_met": "not met", "not_decided": "not decided"}


def _pane(app) -> str:
    """The right-hand pane's text (right of the stage list), its lines joined as one line."""
    lines = [line.split("▕", 1)[1] for line in screen_text(app).splitlines() if "▕" in line]
    return " ".join(" ".join(lines).split())


def _nav(app) -> str:
    """The stage list's text (left of the pane)."""
    return "\n".join(line.split("▕", 1)[0] for line in screen_text(app).splitlines() if "▕" in line)


@pytest.mark.parametrize("state", list(CRITERIA))
async def test_the_app_states_the_recorded_verdict_and_reports_it(
    sessions, state: str, tmp_path: Path
) -> None:
    from textual.widgets import Button, Markdown

    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.screens import ReportScreen, report_sections
    from claimcheck.tui.widgets import StageNavigator

    source, _ = sessions[state]
    ws = tmp_path / "ws"
    shutil.copytree(source.parent, ws, ignore=shutil.ignore_patterns(".lock"))
    path = ws / source.name
    for name in ("report.md", "report.html", "model-index.yaml"):
        (path / name).unlink(missing_ok=True)
    rec = Session.open(path).record("artifact")
    verdict = parse(rec.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict is not None and verdict.claim_word() == WORDS[state]
    line = verdict.claim_line()
    app = make_app(path, workspace=ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), timeout=60)
        screen = app.screen
        assert screen.current == "artifact"  # every stage frozen: the session opens on its verdict
        await wait_for(pilot, lambda: screen.view() is not None and screen.view()._ready, timeout=60)
        button = screen.view().query_one("#verdict-report", Button)
        await wait_for(pilot, lambda: button.display and " ".join(line.split()) in _pane(app), timeout=30)
        nav = screen.query_one(StageNavigator)
        item = next(i for i in nav.children if i.name == "artifact")
        said = str(item.query_one(".nav-state").render())
        assert " ".join(said.split()) == f"frozen · {WORDS[state]}"  # whole: on two lines when long
        assert f"· {WORDS[state]}" in " ".join(_nav(app).split())  # on screen, not cut
        button.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen), timeout=120)
        # the path of report.html, whole (a long path wraps inside the box)
        box = "".join(x.strip("│ ") for x in screen_text(app).splitlines())
        assert str(path / "report.html").replace(" ", "") in box.replace(" ", "")
        sections = report_sections((path / "report.md").read_text("utf-8"))
        summary = app.screen.query_one(Markdown).source
        assert summary == sections[0][1]
        head = next(x for x in summary.splitlines() if x.startswith(f"> **CLAIM {WORDS[state].upper()}** — "))
        assert f"{md_escape(verdict.reason().rstrip('.'))}." in head
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
    assert (path / "report.html").exists() and (path / "model-index.yaml").exists()


def test_the_freeze_dialog_names_each_warning_it_accepts(sessions) -> None:  # noqa: F811
    """On the real records: every warning of the stage, by id and with its finding, is in the
    question the freeze dialog asks; a stage without warnings lists none."""
    from claimcheck.tui.stage_words import freeze_question

    session_dir, _ = sessions["met"]
    records = Session.open(session_dir).records()
    warned = [r for r in records.values() if any(c.status == "warn" for c in r.checks)]
    assert warned, "the session's records hold no warning"
    for rec in records.values():
        body, _ = freeze_question(rec, [])
        warns = [c for c in rec.checks if c.status == "warn"]
        text = body.plain
        if not warns:
            assert "warning(s) accepted" not in text
            continue
        assert f"{len(warns)} warning(s) accepted with it:" in text
        for c in warns:
            assert f"▲ {c.id}: {c.summary[:60]}" in text


async def test_the_baseline_form_of_a_numeric_claim_leads_with_its_fields_and_cv_off_by_keyboard(
    sessions, tmp_path: Path
) -> None:
    """A session whose claim, source and split are those of a recorded numeric-target session: the
    baseline form leads with the regression learners' fields, and cv = "off" is chosen with the keys
    alone (Tab to the field, Enter opens its list, a letter picks, Enter closes), then ctrl+r records it."""
    from textual.widgets import Select

    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.form_checks import NUMERIC_BASELINE_FIELDS
    from claimcheck.tui.forms import StageForm

    source, _ = sessions["met"]
    done = Session.open(source)
    shutil.copy(source.parent / "panel.csv", tmp_path / "panel.csv")
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    for stage in ("claim", "source", "split"):
        session.run_stage(stage, dict(done.record(stage).inputs))
        session.freeze(stage)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), timeout=60)
        app.screen.go("baseline")
        await wait_for(
            pilot, lambda: app.screen.view("baseline") is not None and app.screen.view("baseline")._ready, 60
        )
        view = app.screen.view("baseline")
        form = view.query_one(StageForm)
        assert tuple(s.path for s in form.specs[: len(NUMERIC_BASELINE_FIELDS)]) == NUMERIC_BASELINE_FIELDS
        assert form.notice.startswith(
            "The claim's target is numeric: the regression learners' fields come first"
        )
        cv = form.query_one("#f-cv", Select)
        view.query_one("#f-learners").focus()
        await pilot.press("tab")
        await wait_for(pilot, lambda: app.focused is cv)
        await pilot.press("enter")
        await pilot.press("o", "f")  # type-to-search in the open list: "off"
        await pilot.press("enter")
        await wait_for(pilot, lambda: cv.value == "off")
        inputs, problem = form.collect()
        assert inputs is not None and inputs["cv"] == "off", problem
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: session.record("baseline") is not None, timeout=120)
    rec = Session.open(session.path).record("baseline")
    assert rec.inputs["cv"] == "off"
    assert rec.check("baseline.conventional").coverage.startswith("full: all ")
    assert "fell back" not in rec.check("baseline.conventional").coverage


async def test_the_artifact_visual_names_each_arm_and_never_compares_the_candidate_with_itself(
    sessions, tmp_path: Path
) -> None:
    """At 80×24, f4 on the artifact of a recorded numeric-target session without fine-tuning: the
    Visual tab says what each arm is (the trivial predictor the baseline named, fitted on the train
    split's rows), why best_baseline is not an arm, no candidate − best_baseline difference, and
    the errors on the locked test."""
    from textual.widgets import Static

    from claimcheck.tui.app import SessionScreen, make_app

    source, _ = sessions["not_decided"]
    ws = tmp_path / "ws"
    shutil.copytree(source.parent, ws, ignore=shutil.ignore_patterns(".lock"))
    path = ws / source.name
    rec = Session.open(path).record("artifact")
    arms = parse(rec.check("artifact.arms"), artifact_shapes.Arms)
    learn = Session.open(path).record("baseline").check("baseline.learnability").measured["reference"]
    app = make_app(path, workspace=ws)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), timeout=60)
        screen = app.screen
        await wait_for(pilot, lambda: screen.view() is not None and screen.view()._ready, timeout=60)
        await pilot.press("f4")
        body = screen.view().query_one("#visual-body", Static)
        await wait_for(pilot, lambda: "Locked test" in str(body.render()), timeout=30)
        text = str(body.render())
    flat = " ".join(text.split())
    what = arms.arms["trivial_baseline"].what
    assert f"trivial_baseline: {' '.join(what.split())}" in flat
    assert f"the {learn} of the train split's" in what
    assert "best_baseline not an arm: " in flat and "comparing a model with itself" in flat
    assert "candidate − best_baseline" not in flat
    assert "Error (predicted − actual) per arm" in flat and "Predicted vs actual, candidate" in flat
