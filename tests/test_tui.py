"""Pilot tests of the app shell: keyboard only, at 80x24."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from textual.widgets import DataTable

import claimcheck.tui.app as tui_app
from claimcheck.engine.evidence import Check
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline.registry import STAGE_NAMES
from claimcheck.tui.app import SessionScreen, make_app
from claimcheck.tui.quit_dialog import QuitScreen
from claimcheck.tui.safe import clean, literal
from claimcheck.tui.screens import ConfirmScreen, HelpScreen, LockedScreen, StartScreen
from claimcheck.tui.stage_view import StageView
from claimcheck.tui.widgets import BoundedTable, StageNavigator, list_loader
from tests.claim_answers import CLAIM
from tests.test_tui_support import patch_modules, screen_text, toy_module, wait_for

SIZE = (80, 24)
CLASSES = "a,b,security"


async def opened(pilot) -> None:
    """The session screen is up and its first page drawn (keys sent earlier could be lost)."""

    def ready() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, SessionScreen) and screen.view() is not None and screen.view()._ready

    await wait_for(pilot, lambda: ready() and "state:" in screen_text(pilot.app))


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


def nav_words(app) -> dict[str, str]:
    nav = app.screen.query_one(StageNavigator)
    return {item.name: str(item.query_one(".nav-state").render()).strip() for item in nav.children}


async def fill_claim(pilot) -> None:
    """From the stage list: open the claim and fill every field with key presses."""
    await pilot.press("1")
    await pilot.pause()
    await pilot.press("tab")  # from the fields' pane to the task kind (it stays text_classification)
    await pilot.press("tab")  # the target type stays empty (derived: categorical)
    await pilot.press("tab", *"ticket")
    await pilot.press("tab", *"queue")
    await pilot.press("tab", "enter", "down", "enter")  # recorded_workflow_label
    await pilot.press("tab", *"subject, body")
    await pilot.press("tab", *"all")
    await pilot.press("tab", "enter", "down", "down", "down", "enter")  # macro_f1
    await pilot.press("tab", *"macro")
    await pilot.press("tab")  # metric weighting stays unweighted
    await pilot.press("tab")  # ranking_k stays at its default (read by a retrieval claim only)
    await pilot.press("tab")  # the positive class stays empty (not a binary AUROC / AUPRC claim)
    await pilot.press("tab", *CLASSES)
    await pilot.press("tab", "enter", "down", "down", "down", "enter")  # success metric macro_f1
    await pilot.press("tab")  # op stays >=
    await pilot.press("tab", "ctrl+u", *"0.05")
    await pilot.press("tab", "ctrl+u", *"trivial_baseline")
    await pilot.press("tab", *"trivial_baseline,base_model")
    await pilot.press("tab")  # fine-tuning stays yes
    await pilot.press("tab", *"one run")
    await pilot.press("tab", *"unaudited")
    await pilot.pause()


async def run_and_wait(pilot, stage: str) -> None:
    await pilot.press("ctrl+r")
    await wait_for(
        pilot,
        lambda: (
            not pilot.app.screen.view(stage).running
            and Session.open(pilot.app.session.path).record(stage) is not None
        ),
    )
    await pilot.pause()


async def test_create_fill_freeze_reopen(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tui_app, "_recipes", lambda: ([], None))  # every field typed from empty
    app = make_app(workspace=tmp_path, session_id="s-claim")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, StartScreen)
        await pilot.press("enter")  # Enter alone creates no session: it opens the data-file picker
        await wait_for(pilot, lambda: type(app.screen).__name__ == "DataFileScreen")
        assert not (tmp_path / "runs" / "s-claim").exists()
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, StartScreen))
        app.screen.query_one("#sample").press()  # the explicit sample choice (no recipes: empty forms)
        await opened(pilot)
        assert app.session.path == tmp_path / "runs" / "s-claim"
        assert (tmp_path / "runs" / "s-claim" / ".lock").exists()
        await fill_claim(pilot)
        assert "inputs valid" in screen_text(app)
        await run_and_wait(pilot, "claim")
        rec = app.session.record("claim")
        statuses = {c.id: c.status for c in rec.checks}
        assert statuses["claim.completeness"] == "pass", rec.check("claim.completeness").summary
        assert statuses["claim.success_criterion"] == "pass"
        assert rec.inputs["class_order"][-1] == "security"
        assert nav_words(app)["claim"] == "draft"
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "stale by this: none" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: nav_words(app)["claim"] == "frozen")
    assert not (tmp_path / "runs" / "s-claim" / ".lock").exists(), "lock released on exit"

    app2 = make_app(tmp_path / "runs" / "s-claim", workspace=tmp_path)
    async with app2.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert nav_words(app2)["claim"] == "frozen"
        assert app2.screen.current == "source", "reopened on the first stage that is not frozen"
        await pilot.press("ctrl+l", "1")
        await wait_for(pilot, lambda: "state: frozen" in screen_text(app2))


async def test_freeze_then_change_makes_later_stage_stale(tmp_path: Path, monkeypatch) -> None:
    patch_modules(monkeypatch, {"source": toy_module("source")})
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    session.run_stage("claim", CLAIM)  # the keyboard walk of the claim is test_create_fill_freeze_reopen
    session.freeze("claim")
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        assert nav_words(app)["claim"] == "frozen"
        # source: move in the navigator with keys, run, freeze
        await pilot.press("ctrl+l", "2")
        await wait_for(pilot, lambda: app.screen.current == "source")
        await run_and_wait(pilot, "source")
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: nav_words(app)["source"] == "frozen")
        # back to the claim: change the population, run again → the dialog names 'source'
        await pilot.press("ctrl+l", "1")
        await pilot.pause()
        for _ in range(5):
            await pilot.press("tab")
        await pilot.press(*" (revised)")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "become stale: source" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: nav_words(app)["source"].startswith("STALE"))
        assert nav_words(app)["claim"] == "draft"
        assert app.session.record("claim").provenance.revision == 2
        # a stale stage cannot be frozen: the app says why instead of crashing
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: nav_words(app)["claim"] == "frozen")
        await pilot.press("ctrl+l", "2")
        await wait_for(pilot, lambda: app.screen.current == "source")
        # refused before asking: no dialog whose "yes" could only fail
        await pilot.press("ctrl+f")
        await wait_for(pilot, lambda: any(n.title == "not frozen" for n in app._notifications))
        assert isinstance(app.screen, SessionScreen)
        refused = [n for n in app._notifications if n.title == "not frozen"]
        assert len(refused) == 1 and refused[0].severity == "error"
        assert "'source' is stale: an earlier stage changed. Re-run it (ctrl+r), then freeze." in str(
            refused[0].message
        )
        assert app.session.state("source") == "stale"
        assert nav_words(app)["source"].startswith("STALE")


async def test_cancel_running_check(tmp_path: Path, monkeypatch) -> None:
    patch_modules(monkeypatch, {"claim": toy_module("claim")})
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("enter")  # claim page, TOML form (toy inputs)
        view: StageView = app.screen.view("claim")
        editor = view.query_one("#toml-editor")
        editor.text = editor.text.replace("delay_steps = 0", "delay_steps = 5000")
        await pilot.pause()
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: "step " in screen_text(app))
        assert "running" in nav_words(app)["claim"]
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: not view.running)
        assert app.session.record("claim") is None, "a cancelled run saves nothing"
        assert nav_words(app)["claim"] == "not run"
        # the app is still usable: a short run works after the cancel
        editor.text = editor.text.replace("delay_steps = 5000", "delay_steps = 0")
        await pilot.pause()
        await run_and_wait(pilot, "claim")
        assert nav_words(app)["claim"] == "draft"


async def test_tab_switch_while_the_tab_strip_is_still_empty_retries(tmp_path: Path, monkeypatch) -> None:
    # A tab switch can land while TabbedContent has not composed its strip yet: Textual raises
    # NoMatches then (a full-suite run crashed the app on it). The switch must wait, not crash.
    from textual.css.query import NoMatches
    from textual.widgets import ContentSwitcher, TabbedContent

    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        tabs = app.screen.view().query_one(TabbedContent)
        real = TabbedContent._watch_active
        failures = [1, 1]

        def strip_still_empty(self, active: str) -> None:
            if failures:
                failures.pop()
                raise NoMatches("No immediate child of type ContentTabs")
            real(self, active)

        monkeypatch.setattr(TabbedContent, "_watch_active", strip_still_empty)
        app.screen.view().show_tab("checks")
        switcher = tabs.query_one(ContentSwitcher)
        await wait_for(pilot, lambda: switcher.current == "tab-checks")
        assert not failures and tabs.active == "tab-checks"


async def test_invalid_toml_shows_field_and_reason(tmp_path: Path, monkeypatch) -> None:
    patch_modules(monkeypatch, {"claim": toy_module("claim")})
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("enter")
        await pilot.pause()
        # From the fields to their tab strip, on to "TOML (advanced)", into the editor.
        await pilot.press("shift+tab", "right", "tab")
        await wait_for(pilot, lambda: app.focused is app.screen.view("claim").query_one("#toml-editor"))
        await pilot.press("ctrl+home", *"rowz = 1", "enter")
        await pilot.pause()
        assert "field 'rowz': not a known field" in screen_text(app)
        await pilot.press(
            "ctrl+z", "ctrl+z", "ctrl+z", "ctrl+z", "ctrl+z", "ctrl+z", "ctrl+z", "ctrl+z", "ctrl+z"
        )
        view = app.screen.view("claim")
        view.query_one("#toml-editor").text = "rows = 'many'\n"
        await pilot.pause()
        assert "field 'rows'" in screen_text(app)
        view.query_one("#toml-editor").text = "rows = [\n"
        await pilot.pause()
        assert "TOML syntax" in screen_text(app)
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert app.session.record("claim") is None


HOSTILE = "[bold red]boom[/] \x1b[31mred\x1b[0m \x1b]52;c;SGVsbG8=\x07 tab\there \x9b2J"


async def test_untrusted_text_is_shown_literally(tmp_path: Path, monkeypatch) -> None:
    def checks(inputs):
        counts = {"\x1b[31mred[b]x": 3, "ok": 2}
        coverage = {
            "rows": 5,
            "null_labels": 0,
            "unused_mapping_keys": [],
            "rare_classes": [],
            "rare_limit_rows": 1,
            "per_raw_label": counts,
            "per_target": counts,
            "unmapped_raw_values": {},
        }
        return [
            Check(
                id="source.hostile",
                status="warn",
                summary=HOSTILE,
                coverage="full",
                measured={"cell": HOSTILE},
                why=HOSTILE,
            ),
            # the visual panel reads the typed class coverage: the hostile class name rides there
            Check(id="source.class_coverage", status="info", summary="classes", measured=coverage),
        ]

    patch_modules(monkeypatch, {"source": toy_module("source", checks)})
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    session.run_stage("claim", CLAIM)
    session.freeze("claim")
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("2")
        await run_and_wait(pilot, "source")
        text = screen_text(app)
        assert "[bold red]boom[/]" in text
        assert "␛[31mred" in text
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
        # notes typed by the person are literal too
        await pilot.press("ctrl+n", *"[i]not italic[/i]", "enter")
        await pilot.pause()
        assert "[i]not italic[/i]" in screen_text(app)
        assert app.session.record("source").notes[-1].text == "[i]not italic[/i]"
        await pilot.press("f4")
        await pilot.pause()
        assert "␛[31mred[b]x" in screen_text(app)
    for seg in literal(HOSTILE).render(Console()):
        assert "\x1b" not in seg.text and "\x07" not in seg.text


def test_literal_escapes_every_control_character() -> None:
    for code in list(range(0x20)) + [0x7F] + list(range(0x80, 0xA0)) + [0x202E, 0x200B]:
        assert chr(code) not in clean("a" + chr(code) + "b"), hex(code)
    assert clean("plain [b]text[/b]") == "plain [b]text[/b]"
    assert literal("[b]x[/b]").plain == "[b]x[/b]"
    assert literal("line1\nline2", keep_newlines=True).plain == "line1\nline2"


async def test_large_table_shows_bounded_window(tmp_path: Path) -> None:
    from textual.app import App

    rows = [(i, f"ticket {i}", "\x1b[2Jbody") for i in range(100_000)]

    class Host(App):
        def compose(self):
            yield BoundedTable(list_loader(["row_id", "subject", "body"], rows))

    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: "rows 1–200 of 100,000" in screen_text(app))
        assert "␛[2Jbody" in screen_text(app)
        assert app.query_one(DataTable).row_count == 200
        app.query_one(DataTable).focus()
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: "rows 201–400 of 100,000" in screen_text(app))


async def test_source_data_tab_on_100k_rows_stays_responsive(tmp_path: Path) -> None:
    lines = ["ticket_id,subject,queue"] + [f"{i},subject {i},billing" for i in range(100_000)]
    lines[5] = '4,"[red]x[/red] \x1b]0;pwned\x07",billing'
    (tmp_path / "big.csv").write_text("\n".join(lines) + "\n")
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    session.run_stage("claim", CLAIM)
    session.freeze("claim")
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("2")
        await wait_for(
            pilot, lambda: app.screen.view("source") is not None and app.screen.view("source")._ready
        )
        view = app.screen.view("source")
        editor = view.query_one("#toml-editor")
        editor.text = editor.text.replace("files = []", 'files = ["big.csv"]')
        t0 = time.perf_counter()
        await pilot.press("f6")
        await wait_for(pilot, lambda: "of 100,000" in screen_text(app), timeout=20)
        assert time.perf_counter() - t0 < 15
        text = screen_text(app)
        assert "rows 1–200 of 100,000" in text
        assert "[red]x[/red] ␛]0;pwned" in text
        # the screen answered keys while the rows loaded in a thread
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: "rows 201–400 of 100,000" in screen_text(app), timeout=20)


async def test_help_theme_and_palette(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert "ctrl+r" in screen_text(app) and "ctrl+f" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert "^r Run" in screen_text(app) and "Freeze" in screen_text(app)
        themes = []
        for _ in range(4):
            await pilot.press("ctrl+t")
            themes.append(app.theme)
        assert themes == ["textual-light", "ansi-dark", "ansi-light", "textual-dark"]
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for needed in (
            "Run checks",
            "Cancel run",
            "Freeze stage",
            "Add note",
            "Help: keys",
            "Next theme",
            "Copy check",
            "Go to 7 Artifact",
            "Show visual",
        ):
            assert needed in titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"freeze stage")
        await pilot.pause(0.3)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: any("no record yet" in m for m in toasts(app)))


async def test_locked_session_names_holder_and_offers_take_over(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    lock = session.path / ".lock"
    lock.write_text(json.dumps({"pid": os.getppid(), "host": socket.gethostname(), "since": "earlier"}))
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LockedScreen))
        text = screen_text(app)
        assert f"pid {os.getppid()}" in text and "Take over" not in text
        await pilot.press("enter")  # Back → start screen
        await wait_for(pilot, lambda: isinstance(app.screen, StartScreen))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "since": "earlier"}))
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LockedScreen))
        assert "Take over" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()


async def test_reopen_lists_sessions(tmp_path: Path) -> None:
    Session.create(tmp_path / "runs" / "older", workspace=tmp_path)
    app = make_app(workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert "older · 0/7 frozen" in screen_text(app)
        for _ in range(6):
            if getattr(app.focused, "id", "") == "sessions":
                break
            await pilot.press("tab")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert app.session.path.name == "older"


@pytest.fixture
def running_job(tmp_path: Path):
    """A job directory whose process is alive and beating, as a detached job leaves it."""
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    job_dir = session.path / "jobs" / "0123456789abcdef-a1"
    job_dir.mkdir(parents=True)
    # A stand-in process whose command line names the job (what the local provider checks).
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; time.sleep(60)",
            "claimcheck.engine.training.job",
            str(job_dir.resolve()),
        ],
        start_new_session=True,
    )
    (job_dir / "pid.json").write_text(
        json.dumps({"pid": proc.pid, "pgid": proc.pid, "host": socket.gethostname()})
    )
    (job_dir / "status.json").write_text(json.dumps({"phase": "training", "step": 7, "total_steps": 20}))
    (job_dir / "heartbeat").write_text(
        json.dumps({"time": time.time(), "beats": 3, "interval": 60, "step": 7, "phase": "training"})
    )
    timing = {"lr": 1e-3, "grad_norm": 1.0, "seconds": 0.5, "epoch": 0.1}
    dev = {
        "kind": "eval",
        "split": "dev",
        "step": 5,
        "time": time.time(),
        "metric": "macro_f1",
        "value": 0.41,
    }
    dev.update(loss=1.2, train_value=0.5, train_rows=32, rows=40, phase="training", selected_step=-1)
    with open(job_dir / "metrics.jsonl", "w") as fh:
        for step in range(1, 8):
            fh.write(
                json.dumps({"kind": "step", "step": step, "time": time.time(), "loss": 2.0 / step, **timing})
            )
            fh.write("\n")
        fh.write(json.dumps(dev) + "\n")
    yield session
    proc.kill()
    proc.wait()


async def test_reopened_session_shows_running_job(running_job: Session, tmp_path: Path) -> None:
    app = make_app(running_job.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        # the stage list says so before the dispatch page is even opened
        await wait_for(pilot, lambda: nav_words(app)["dispatch"].startswith("running"))
        await pilot.press("6")
        await pilot.pause()
        await pilot.press("f4")
        await wait_for(pilot, lambda: "step 7 of 20" in screen_text(app))
        text = screen_text(app)
        assert "training" in text and "heartbeat" in text and "s ago" in text
        assert "0123456789abcdef-a1" in text
        await wait_for(pilot, lambda: nav_words(app)["dispatch"].startswith("running"))


async def test_default_recipe_prefills_valid_forms(tmp_path: Path) -> None:
    from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE, list_recipes

    if DEFAULT_RECIPE not in [name for name, _ in list_recipes()]:
        pytest.skip("no default recipe in this checkout")
    from claimcheck.engine.pipeline.examples import copy_sample_data

    copy_sample_data(tmp_path)  # as a session on the sample creates it: the source form checks its columns
    session = Session.create(tmp_path / "runs" / "r", workspace=tmp_path, recipe=DEFAULT_RECIPE)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        for i, stage in enumerate(STAGE_NAMES, start=1):
            await pilot.press("ctrl+l", str(i))
            await wait_for(
                pilot, lambda s=stage: app.screen.view(s) is not None and app.screen.view(s)._ready
            )
            problem = str(app.screen.view(stage).query_one(".form-problem").render())
            assert "inputs valid" in problem, f"stage {stage}: {problem}"


async def test_quitting_during_a_run_cancels_it(tmp_path: Path, monkeypatch) -> None:
    patch_modules(monkeypatch, {"claim": toy_module("claim")})
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press("enter")
        view: StageView = app.screen.view("claim")
        editor = view.query_one("#toml-editor")
        editor.text = editor.text.replace("delay_steps = 0", "delay_steps = 100000")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: view.running and "step " in screen_text(app))
        event = view.cancel_event
        await pilot.press("ctrl+q")  # the edited delay is no record yet: quitting asks first
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("d")
    assert event is not None and event.is_set(), "the stage thread was told to stop"
    assert session.record("claim") is None


async def test_a_new_workspace_gets_the_sample_data_for_the_sample_session(tmp_path: Path) -> None:
    """`claimcheck` in an empty folder: the recipes are offered, and a session on the sample (no data
    file given) copies the sample data into the workspace, where the recipe's source reads it."""
    from textual.widgets import Select

    app = make_app(workspace=tmp_path, session_id="s-sample")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, StartScreen)
        assert len(app.screen.query_one("#recipe", Select)._options) >= 4
        app.screen.query_one("#sample").press()
        await opened(pilot)
        assert app.session.path == tmp_path / "runs" / "s-sample"
    copied = tmp_path / "sample_data" / "tickets.csv"
    assert (
        copied.read_bytes()
        == (Path(__file__).resolve().parents[1] / "sample_data" / "tickets.csv").read_bytes()
    )
