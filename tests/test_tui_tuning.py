"""The contract page's view of a declared search, on real records: the tuned session
(docs/answers-tuning.toml run CI-sized, built once per test run: conftest.py's tuned_workspace) and a
search started from the app itself. The table's rows are the ledger's, the plot has a figure per varied
setting, and the seed-spread view states the selection the contract stage recorded; every expected
value is read from the ledger or the record, never written into the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes.tuning import SearchSelection
from claimcheck.engine.stages.contract import tuning
from claimcheck.engine.stages.contract.search_view import search_view
from claimcheck.tui.plots import num
from claimcheck.tui.search_panel import render_search, seed_spread, trials_table
from tests import real_session as rs

WIDTH = 76


def _session(ws: Path) -> Path:
    return ws / rs.TUNED


def _row_pattern(rec) -> str:
    """The table line of one ledger row: its name, state, each setting and its dev figure."""
    name = f"t{rec.number}" + (f" s{rec.seed}" if rec.kind == "repeat" else "")
    dev = f"{rec.value:.4f}" if rec.value is not None else "–"
    return rf"^{re.escape(name)}\s+{rec.state}\s+.*\s{re.escape(dev)}\s+(\d+ min )?[\d.]+ s$"


def _assert_rows_are_the_ledger(text: str, ledger) -> None:
    lines = text.splitlines()
    for rec in ledger:
        hits = [ln for ln in lines if re.match(_row_pattern(rec), ln.rstrip())]
        assert len(hits) == 1, (rec, text)
        for key, value in rec.settings.items():
            short = key.rsplit(".", 1)[-1]
            shown = num(value) if isinstance(value, float) else str(value)  # as the table writes it
            assert re.search(rf"\b{re.escape(short)} {re.escape(shown)}(\s|$)", hits[0]), (
                key,
                hits[0],
            )


@pytest.mark.slow
def test_the_trials_table_rows_are_the_ledger(tuned_workspace: Path) -> None:
    session = _session(tuned_workspace)
    ledger = tuning.read_ledger(tuning.revision_dir(session, 1))
    view = search_view(session)
    assert view is not None and view.problem == ""
    assert [(r.number, r.seed, r.state, r.value) for r in view.rows] == [
        (r.number, r.seed, r.state, r.value) for r in ledger
    ]
    text = trials_table(view, WIDTH).plain
    assert len([ln for ln in text.splitlines() if re.match(r"^t\d", ln)]) == len(ledger)  # one a row
    _assert_rows_are_the_ledger(text, ledger)
    assert all(r.duration_s is not None and r.duration_s > 0 for r in view.rows)


@pytest.mark.slow
def test_the_plot_has_a_figure_for_each_varied_setting(tuned_workspace: Path) -> None:
    from claimcheck.engine.report.search_figures import setting_figures

    session = _session(tuned_workspace)
    view = search_view(session)
    figs = setting_figures(view)
    varied = [s["name"] for s in view.space]
    assert varied == ["optimizer.lr", "lora.r"]
    assert [f.title for f in figs] == [f"dev {view.metric} against {name}" for name in varied]
    complete = [r for r in view.rows if r.kind == "trial" and r.state == "complete"]
    for fig in figs:  # every complete trial is one point of every figure, at its own dev figure
        points = sorted(y for pts in fig.series.values() for _, y in pts)
        assert points == sorted(float(r.value) for r in complete)
    # the learning rate spans a factor of 10: drawn on a log axis; the curves are the other setting's values
    assert figs[0].x_label == "log10 optimizer.lr"
    assert sorted(figs[0].series) == sorted({f"lora.r = {r.settings['lora.r']}" for r in complete})
    drawn = render_search(view, None, WIDTH).plain
    for fig in figs:
        assert fig.title in drawn


@pytest.mark.slow
def test_the_seed_spread_view_states_the_recorded_selection(tuned_workspace: Path) -> None:
    session = _session(tuned_workspace)
    record = Session.open(session).record("contract")
    sel = parse(record.check("contract.search_selection"), SearchSelection)
    text = seed_spread(search_view(session), record, WIDTH).plain
    verdict = "TIE" if sel.tie else "WINNER"
    assert f"margin {sel.margin:.4f} vs seed spread {sel.spread:.4f}: {verdict}" in text
    assert ("TIE" in text) == sel.tie
    assert f"rule: {sel.rule}" in text
    assert f"chosen: trial {sel.chosen_trial} (" in text
    for f in sel.finalists:
        assert re.search(rf"^t{f.number}\s.*mean {f.mean:.4f} spread {f.spread:.4f}$", text, re.M), text
    # no recorded selection (a search still running): said, not drawn
    assert "not measured" in seed_spread(search_view(session), None, WIDTH).plain


@pytest.mark.slow
async def test_the_contract_page_shows_the_search_from_the_ledger(
    tuned_workspace: Path, tmp_path: Path
) -> None:
    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.search_panel import ContractPanel
    from tests.test_tui_support import wait_for

    path = rs.copy_tuned(tuned_workspace, tmp_path)
    ledger = tuning.read_ledger(tuning.revision_dir(path, 1))
    app = make_app(path, workspace=path.parents[1])
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
        await pilot.press("ctrl+l", "5")
        await wait_for(
            pilot, lambda: app.screen.view("contract") is not None and app.screen.view("contract")._ready
        )
        await pilot.press("f4")
        panel = app.screen.view("contract").query_one(ContractPanel)

        def body() -> str:
            return str(panel.query_one("#search-body").render())

        await wait_for(pilot, lambda: "Seed spread of the finalists" in body(), timeout=20)
        text = body()
        _assert_rows_are_the_ledger(text, ledger)
        assert "dev macro_f1 against optimizer.lr" in text and "dev macro_f1 against lora.r" in text
        assert "rule: " in text and "not measured" not in text.split("Seed spread")[1]


SEARCH_TOML = """
[search]
hypothesis = "a higher learning rate helps the tiny encoder"
sampler = "random"
n_trials = 2
concurrency = 2
finalists = 1
seed_repeats = 0

[[search.space]]
name = "optimizer.lr"
low = 1e-3
high = 1e-2
log = true
"""


@pytest.mark.slow
async def test_a_search_started_from_the_app_shows_its_trials_live(
    real_workspace: Path, tmp_path: Path
) -> None:
    """The search declared in the contract form's TOML tab and run with the stage (ctrl+r): the
    contract page shows its trials while they run, and the recorded selection once the run ends."""
    from textual.widgets import TextArea

    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.forms import StageForm
    from claimcheck.tui.screens import ConfirmScreen
    from claimcheck.tui.search_panel import ContractPanel
    from tests.test_tui_support import wait_for

    path = rs.copy_workspace(real_workspace, tmp_path)
    app = make_app(path, workspace=path.parents[1])
    async with app.run_test(size=(100, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
        await pilot.press("ctrl+l", "5")
        await wait_for(
            pilot, lambda: app.screen.view("contract") is not None and app.screen.view("contract")._ready
        )
        view = app.screen.view("contract")
        editor = view.query_one(StageForm).query_one("#toml-editor", TextArea)
        editor.text = editor.text + SEARCH_TOML
        await pilot.pause()
        inputs, problem = view.form_values()
        assert inputs is not None and inputs["search"]["n_trials"] == 2, problem
        screen = app.screen
        screen.action_run()
        await pilot.pause()
        if isinstance(app.screen, ConfirmScreen):  # the contract is frozen: a new revision of it
            await pilot.press("y")
        await wait_for(pilot, lambda: view.running, timeout=20)
        await pilot.press("f4")
        panel = view.query_one(ContractPanel)
        seen: set[str] = set()

        def ended() -> bool:
            if panel.view is not None:
                seen.update(r.state for r in panel.view.rows)
            return view.runs_finished >= 1

        await wait_for(pilot, ended, timeout=900)
        assert "running" in seen, "no trial was shown while it ran"
        record = Session.open(path).record("contract")
        assert record.check("contract.search_trials").status == "pass", record.check(
            "contract.search_trials"
        ).summary
        ledger = tuning.read_ledger(tuning.revision_dir(path, 1))
        assert [r.state for r in ledger] == ["complete", "complete"]

        def body() -> str:
            return str(panel.query_one("#search-body").render())

        await wait_for(pilot, lambda: "rule: " in body(), timeout=20)
        _assert_rows_are_the_ledger(body(), ledger)
        sel = parse(record.check("contract.search_selection"), SearchSelection)
        assert f"rule: {sel.rule}" in body() and f"chosen: trial {sel.chosen_trial} (" in body()


def test_the_table_marks_a_running_trials_live_figure_and_a_reused_trials_attribution() -> None:
    from claimcheck.engine.stages.contract.search_view import LiveTrial, SearchView

    rows = [
        LiveTrial(number=0, kind="trial", seed=3, state="complete", settings={"optimizer.lr": 1e-3, "lora.r": 4},
                  value=0.5, duration_s=75.0, memory_bytes=2**30, step_s=0.5),
        LiveTrial(number=1, kind="trial", seed=3, state="running", settings={"optimizer.lr": 3e-3, "lora.r": 4},
                  live_value=0.25, live_step=6, total_steps=12, duration_s=5.0, memory_bytes=2**30, step_s=0.5,
                  resources_from=0, resources_from_seed=3, resources_from_digest="sha256:" + "a" * 64),
        LiveTrial(number=2, kind="trial", seed=3, state="pruned", settings={"optimizer.lr": 1e-2, "lora.r": 8},
                  duration_s=3.0, reason="behind the median of earlier trials at the same step"),
    ]  # fmt: skip
    text = trials_table(SearchView(revision=1, metric="macro_f1", rows=rows), WIDTH).plain
    lines = text.splitlines()
    assert re.match(r"^t0\s+complete\s+lr 0\.001 · r 4\s+0\.5000\s+1 min 15 s$", lines[1]), lines[1]
    assert re.match(r"^t1\s+6/12\s+lr 0\.003 · r 4\s+0\.2500\*\s+5\.0 s$", lines[2]), lines[2]
    assert lines[3] == "    memory 1 GiB, 0.5 s/step reused from t0 (sha256:aaaaaaaa…)"
    assert re.match(r"^t2\s+pruned\s+lr 0\.01 · r 8\s+–\s+3\.0 s$", lines[4]) and "median" in lines[5]
