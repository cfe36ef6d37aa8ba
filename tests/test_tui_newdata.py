"""A new session from the person's own data file (issue 29, issue 35): the start screen creates
nothing without a file or the sample choice; the picker offers only the workspace's data files and
only the file's own columns; the suggested recipe follows the label; the forms hold no sample values;
a column not in the file, or an incomplete claim, is an error in the form before ctrl+r."""

from __future__ import annotations

import csv
import random
from pathlib import Path

from textual.widgets import Select, SelectionList

from claimcheck.engine.data.peek import peek
from claimcheck.engine.pipeline.recipes import load_recipe
from claimcheck.engine.stages.own_data import ColumnChoice, own_data_recipe, suggest
from claimcheck.engine.stages.own_sizing import CPU_TARGET_S, FIT_CHECK_TARGET_S, Machine, size_cpu
from claimcheck.engine.training.schema import Inputs as ContractInputs
from claimcheck.tui.app import SessionScreen, make_app
from claimcheck.tui.data_screen import DataFileScreen, DataTree
from claimcheck.tui.screens import StartScreen
from tests.test_tui_support import screen_text, wait_for

SIZE = (100, 40)
SAMPLE_WORDS = ("queue", "ticket_id", "customer_id", "make_tickets", "Ticket families")


def write_panel(path: Path, firms: int = 11, years: int = 20) -> None:
    """A firm × year panel with a numeric target and a free-text note, written row by row."""
    rng = random.Random(7)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(["firm", "year", "region", "employees", "note", "sales"])
        for f in range(firms):
            for y in range(2000, 2000 + years):
                emp = rng.randint(10, 500)
                note = rng.choice(["steady quarter", "new plant", "strike", "merger talks"])
                out.writerow(
                    [
                        f"F{f:02d}",
                        y,
                        rng.choice(["north", "south"]),
                        emp,
                        note,
                        round(emp * 1.7 + rng.gauss(0, 30), 2),
                    ]
                )


def form_problem(app, stage: str) -> str:
    return str(app.screen.view(stage).query_one(".form-problem").render())


def test_suggestion_follows_the_label_and_the_machine(tmp_path: Path) -> None:
    write_panel(tmp_path / "panel.csv")
    p = peek(tmp_path, "panel.csv")
    cpu, gpu = Machine(cuda=False, cores=2), Machine(cuda=True, cores=16, gpu="NVIDIA H100")
    numeric = suggest(p, ColumnChoice(file="panel.csv", label="sales", inputs=["employees"]), cpu)
    assert (numeric.recipe, numeric.target_type, numeric.metric) == ("tabular-sklearn", "numeric", "mae")
    assert "numeric" in numeric.reason
    texts = ColumnChoice(file="panel.csv", label="region", inputs=["note", "employees"], text=["note"])
    assert suggest(p, texts, cpu).recipe == "text-classification-lora"
    on_gpu = suggest(p, texts, gpu)
    assert on_gpu.recipe == "text-classification-qlora" and on_gpu.sizing is None
    assert "NVIDIA H100" in on_gpu.reason and "QLoRA" in on_gpu.reason
    assert "no GPU" in suggest(p, texts, cpu).reason
    assert ColumnChoice(file="panel.csv", label="queue", inputs=["note"]).problem(p).startswith("label:")


def test_the_cpu_text_recipe_is_sized_to_finish_and_says_so(tmp_path: Path) -> None:
    """On a CPU the text recipe's step budget, batch and input length come from the file's rows and the
    cores, the reason names them and the target, and the contract the session starts from holds them."""
    write_panel(tmp_path / "panel.csv", firms=40, years=50)  # 2,000 rows
    p = peek(tmp_path, "panel.csv")
    assert p.rows == 2000
    texts = ColumnChoice(file="panel.csv", label="region", inputs=["note", "employees"], text=["note"])
    idle, busy = Machine(cuda=False, cores=2), Machine(cuda=False, cores=2, load=18.0)
    s = suggest(p, texts, idle)
    z = s.sizing
    assert z is not None and z == size_cpu(2000, idle)
    # the whole train split once (1,400 rows / 16 a step) fits the 15 minutes on 2 idle cores
    assert (z.max_length, z.micro_batch, z.max_steps, z.eval_every_steps) == (128, 16, 88, 22)
    assert z.estimate_s <= CPU_TARGET_S
    assert z.fit_check_s == 30 * z.step_s  # the recipe's 30 fitting-check steps, each one like a job step
    for said in (
        "max_steps 88",
        "micro_batch 16",
        "max_length 128",
        "target 15 min",
        "2 CPU cores",
        "fitting check",
    ):
        assert said in s.reason, said
    # a busy machine gets shorter inputs so the budget still fits the target
    b = size_cpu(2000, busy)
    assert (b.max_length, b.micro_batch) < (z.max_length, z.micro_batch) and b.estimate_s <= CPU_TARGET_S
    assert b.max_steps >= 60 and b.step_s > z.step_s
    # a small file on a busy machine: one epoch is quick, but the fitting check (30 steps of the same
    # size) must stay within its 5 minutes, so the inputs are shortened for it
    small = size_cpu(189, busy)
    assert small.max_length < 128 and small.fit_check_s <= FIT_CHECK_TARGET_S
    # a large file on one core: the budget, not the epoch, bounds the steps, within the target
    big = size_cpu(200_000, Machine(cuda=False, cores=1))
    assert 60 <= big.max_steps < 200_000 * 0.7 / 16 and big.estimate_s <= CPU_TARGET_S
    # 16 cores but a job of 4 torch threads: planned on the 4 threads
    wide = Machine(cuda=False, cores=16, threads=4)
    assert size_cpu(200_000, wide) == size_cpu(200_000, Machine(cuda=False, cores=4))
    assert "16 CPU cores, 4 training threads" in wide.words()
    contract = own_data_recipe(load_recipe(s.recipe), texts, s)["contract"]
    assert {k: contract[k] for k in z.contract()} == z.contract()
    ContractInputs.model_validate(contract)  # the sized contract is one the contract stage accepts


def test_a_reopened_session_on_your_file_starts_from_the_sized_recipe(tmp_path: Path, monkeypatch) -> None:
    """The app keeps a new session's start values in memory; reopened (a new app) once the claim and
    source are recorded, the unrecorded stages start from the file's recipe again, the CPU text
    contract sized for this machine, not from the recipe's sample values and 300 steps."""
    from claimcheck.engine.ledger.session import Session

    write_panel(tmp_path / "panel.csv")
    p = peek(tmp_path, "panel.csv")
    choice = ColumnChoice(file="panel.csv", label="region", inputs=["note", "employees"], text=["note"])
    machine = Machine(cuda=False, cores=2, threads=2, load=1.0)
    s = suggest(p, choice, machine)
    own = own_data_recipe(load_recipe(s.recipe), choice, s)
    session = Session.create(tmp_path / "runs" / "own", recipe=s.recipe, workspace=tmp_path)
    said = {"prediction_unit": "one firm-year", "target_meaning": "the region", "population": "firms"}
    session.run_stage("claim", own["claim"] | said)
    session.freeze("claim")
    session.run_stage("source", own["source"])
    monkeypatch.setattr(Machine, "cpu", classmethod(lambda cls: machine))
    app = make_app(session.path, workspace=tmp_path)
    reopened = Session.open(session.path)
    contract = app.initial_inputs(reopened, "contract")
    assert s.sizing is not None and load_recipe(s.recipe)["contract"]["max_steps"] == 300
    assert {k: contract[k] for k in s.sizing.contract()} == s.sizing.contract()
    split = app.initial_inputs(reopened, "split")
    assert not split.get("rationale")  # the recipe's ticket rationale stays out
    # a session on the sample data still starts from its recipe as it is
    sample = Session.create(tmp_path / "runs" / "sample", recipe=s.recipe, workspace=tmp_path)
    assert app.initial_inputs(sample, "contract")["max_steps"] == 300


async def test_enter_alone_creates_nothing_and_the_picker_stays_in_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    write_panel(ws / "panel.csv")
    (ws / "notes.txt").write_text("not data\n")
    write_panel(tmp_path / "outside.csv")
    (ws / "link.csv").symlink_to(tmp_path / "outside.csv")
    app = make_app(workspace=ws, session_id="s-own")
    async with app.run_test(size=SIZE) as pilot:
        assert isinstance(app.screen, StartScreen)
        await pilot.press("enter")  # the data-file field is focused and empty: browse, create nothing
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen))
        assert not (ws / "runs").exists() or not any((ws / "runs").iterdir())
        tree = app.screen.query_one(DataTree)
        await wait_for(pilot, lambda: len(tree.root.children) > 0)
        shown = {str(node.label) for node in tree.root.children}
        assert shown == {"panel.csv"}, shown
        app.screen.load("link.csv")  # typed: a symlink out of the workspace is refused, named
        await wait_for(pilot, lambda: "outside the workspace" in screen_text(app))


async def test_a_session_from_the_file_holds_its_columns_and_no_sample_values(tmp_path: Path) -> None:
    write_panel(tmp_path / "panel.csv")
    app = make_app(workspace=tmp_path, session_id="s-own", data_file="panel.csv")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")  # the pre-filled file: its columns are read
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen) and app.screen.peek is not None)
        screen = app.screen
        label = screen.query_one("#pick-label", Select)
        offered = [value for _, value in label._options if isinstance(value, str)]
        assert offered == ["firm", "year", "region", "employees", "note", "sales"]
        assert "steady quarter" in screen_text(app)  # the preview shows the file's rows
        label.value = "sales"
        screen.query_one("#pick-inputs", SelectionList).select("employees")
        screen.query_one("#pick-inputs", SelectionList).select("region")
        screen.query_one("#pick-entities", SelectionList).select("firm")
        screen.query_one("#pick-time", Select).value = "year"
        await wait_for(pilot, lambda: screen.suggestion is not None)
        assert screen.suggestion.recipe == "tabular-sklearn"
        assert "regression" in str(screen.query_one("#data-suggestion").render())
        screen.query_one("#own-create").press()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert app.session.meta.recipe == "tabular-sklearn"
        source = app.initial_inputs(app.session, "source")
        assert (source["label_column"], source["entity_columns"], source["time_column"]) == (
            "sales",
            ["firm"],
            "year",
        )
        starts = {name: app.initial_inputs(app.session, name) for name in ("claim", "source", "split")}
        assert not [w for w in SAMPLE_WORDS if w in repr(starts)], starts
        assert starts["claim"]["primary_metric"] == "mae" and starts["claim"]["target_type"] == "numeric"
        app.screen.go("source")
        await wait_for(pilot, lambda: app.screen.view("source") is not None and "state:" in screen_text(app))
        view = app.screen.view("source")
        # a numeric time column: the form asks what its numbers are (the source stage's own rule)
        await wait_for(pilot, lambda: "'time_unit' is empty" in form_problem(app, "source"))
        view.query_one("#f-time_unit", Select).value = "year"
        await wait_for(pilot, lambda: "inputs valid" in form_problem(app, "source"))
        area = view.query_one("#toml-editor")
        area.text = area.text.replace('label_column = "sales"', 'label_column = "queue"')
        await wait_for(pilot, lambda: "not in the data file" in form_problem(app, "source"))
        problem = form_problem(app, "source")
        assert "inputs valid" not in problem and "label_column" in problem
        assert view.form_values()[0] is None  # ctrl+r would refuse it


async def test_the_claim_form_counts_completeness(tmp_path: Path) -> None:
    write_panel(tmp_path / "panel.csv")
    app = make_app(workspace=tmp_path, session_id="s-own", data_file="panel.csv")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen) and app.screen.peek is not None)
        app.screen.query_one("#pick-label", Select).value = "sales"
        app.screen.query_one("#pick-inputs", SelectionList).select("employees")
        await wait_for(pilot, lambda: app.screen.suggestion is not None)
        app.screen.query_one("#own-create").press()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        app.screen.go("claim")
        await wait_for(pilot, lambda: app.screen.view("claim") is not None and "state:" in screen_text(app))
        problem = form_problem(app, "claim")
        assert "inputs valid" not in problem and "claim.completeness" in problem, problem


async def test_the_contract_form_leads_with_the_candidate_without_fine_tuning(tmp_path: Path) -> None:
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.stages.contract.learner import FIELDS_READ
    from claimcheck.tui.forms import StageForm
    from tests.claim_answers import CLAIM

    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    claim = dict(CLAIM, fine_tuning=False, comparators=["trivial_baseline", "best_baseline"])
    session.run_stage("claim", claim)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        app.screen.go("contract")
        await wait_for(
            pilot,
            lambda: app.screen.view("contract") is not None and app.screen.view("contract")._ready,
            timeout=60,
        )
        form = app.screen.view("contract").query_one(StageForm)
        assert tuple(s.path for s in form.specs[: len(FIELDS_READ)]) == FIELDS_READ
        assert form.query_one(".form-scroll").children[0].id == "g-f-candidate"
        assert "fine_tuning = false" in screen_text(app)


async def test_switches_say_on_or_off_under_no_color_and_escape_clears_messages(
    tmp_path: Path, monkeypatch
) -> None:
    from claimcheck.engine.ledger.session import Session

    monkeypatch.setenv("NO_COLOR", "1")
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(
            pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view("claim") is not None
        )
        view = app.screen.view("claim")
        label = view.query_one("#l-f-fine_tuning")
        await wait_for(pilot, lambda: "Fine tuning: on" in str(label.render()))
        view.query_one("#f-fine_tuning").toggle()
        await wait_for(pilot, lambda: "Fine tuning: off" in str(label.render()))
        app.notify("stage 'artifact' rests on 'dispatch', which is draft", severity="error", timeout=60)
        await wait_for(pilot, lambda: len(app._notifications) == 1)
        app.screen.action_stages()
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app._notifications) == 0)
