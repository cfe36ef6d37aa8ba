"""Pilot tests of the guided session at 80x24: keys right after a stage change, and the session on
a person's own file (sample data copied as a workspace holds it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual import events
from textual.widgets import TabbedContent

from claimcheck.engine.ledger.session import Session
from claimcheck.tui.app import SessionScreen, make_app
from claimcheck.tui.widgets import StageNavigator
from tests.test_tui_support import screen_text, wait_for

SIZE = (80, 24)


async def _open_page(pilot, app, key: str, stage: str, *, wait_screen: bool = False) -> None:
    """Waits for the session screen (with `wait_screen`), then opens stage page `key` by ctrl+l and waits
    until the page `stage` is built."""
    if wait_screen:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
    await pilot.press("ctrl+l", key)
    await wait_for(pilot, lambda: app.screen.view(stage) is not None and app.screen.view(stage)._ready)


@pytest.fixture
def sample_session(tmp_path: Path) -> Session:
    from claimcheck.engine.pipeline.examples import copy_sample_data
    from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE

    copy_sample_data(tmp_path)  # the source form reads its files' columns: its page is slow to build
    return Session.create(tmp_path / "runs" / "r", workspace=tmp_path, recipe=DEFAULT_RECIPE)


async def test_a_tab_key_pressed_while_the_stage_page_is_built_is_kept(
    sample_session: Session, monkeypatch
) -> None:
    """f3 pressed before a newly picked stage's page has finished building opens its Checks tab: the
    tab strip's own first activation, which comes once it is mounted, does not undo the key. The
    strip's mount is held back a little, as a loaded machine does while a large form is built."""
    from textual.widgets._tabbed_content import ContentTabs

    real_mount, real_validate = ContentTabs._on_mount, ContentTabs.validate_active
    mounted: set[int] = set()

    async def slow_mount(self, event) -> None:
        await asyncio.sleep(0.5)
        mounted.add(id(self))
        real_mount(self, event)

    def tabs_still_building(self, active: str) -> str:
        if id(self) not in mounted:  # what validate_active says while the strip has no tabs yet
            raise ValueError(f"No Tab with id {active!r}")
        return real_validate(self, active)

    monkeypatch.setattr(ContentTabs, "_on_mount", slow_mount)
    monkeypatch.setattr(ContentTabs, "validate_active", tabs_still_building)
    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
        for index, stage in ((1, "source"), (2, "split"), (4, "contract")):
            await pilot.press("ctrl+l")
            app.screen.query_one(StageNavigator).action_pick(index)  # as the digit key does
            while not (app.screen.current == stage and app.screen.view(stage) is not None):
                await asyncio.sleep(0.01)  # the pick is handled; its page is not built yet
            view = app.screen.view(stage)
            assert not view._ready  # the page is still being built when the key comes
            app.post_message(events.Key("f3", None))  # as the terminal sends it: no wait for the page
            await wait_for(pilot, lambda v=view: v._ready, timeout=30)
            tabs = view.query_one(".stage-tabs", TabbedContent)
            await wait_for(pilot, lambda t=tabs: t.active == "tab-checks")
            for _ in range(10):  # and it stays there once the strip has settled
                await pilot.pause()
            assert tabs.active == "tab-checks", screen_text(app)
            assert view.query_one("ChecksTable").has_focus


def test_the_limitations_name_only_checks_that_did_not_cover_the_full_data(real_session: Path) -> None:
    """A coverage line that says `full: all N dev rows` or `full dev split (N rows)` is the full
    data; a sample is named."""
    from claimcheck.engine.report.build import render

    markdown, _ = render(real_session)
    records = Session.open(real_session).records()
    fulls = [c.id for r in records.values() for c in r.checks if c.coverage.startswith("full:")]
    assert fulls, "the real session has no check whose coverage says 'full: …'"
    assert "covers full" not in markdown
    samples = [
        c.id
        for r in records.values()
        for c in r.checks
        if c.coverage.startswith("sample") and c.replay != "observation"
    ]
    assert samples and all(f"{cid} covers sample" in markdown for cid in samples)


def test_the_required_contract_checks_name_a_warning_as_a_warning(real_session: Path) -> None:
    """One required contract check that warned: the gate does not say all of them passed."""
    from claimcheck.engine.stages.dispatch.run import _required_checks, contract_of

    records = Session.open(real_session).records()
    eff, _ = contract_of(records)
    required = list(eff["required_checks"])
    assert len(required) >= 2

    def contract_with(statuses: dict[str, str]):
        rec = records["contract"]
        checks = [c.model_copy(update={"status": statuses.get(c.id, c.status)}) for c in rec.checks]
        return rec.model_copy(update={"checks": checks})

    all_pass = {cid: "pass" for cid in required}
    gate = _required_checks(eff, contract_with(all_pass))
    assert gate.summary == f"{len(required)} required contract checks passed"
    gate = _required_checks(eff, contract_with(all_pass | {required[0]: "warn"}))
    assert gate.status == "pass"
    assert gate.summary == (
        f"{len(required)} required contract checks without a failure: "
        f"{len(required) - 1} passed, 1 warned ({required[0]})"
    )


async def test_an_open_choice_list_stays_above_the_footer(sample_session: Session) -> None:
    """The claim's metric list (a dozen choices) opened low on the page is pushed up, and stops one
    line above the screen's bottom, where the footer's keys are."""
    from textual.widgets import Select
    from textual.widgets._select import SelectOverlay

    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view()._ready)
        metric = app.screen.view().query_one("#f-primary_metric", Select)
        metric.focus()
        await pilot.pause()
        await pilot.press("enter")
        overlay = metric.query_one(SelectOverlay)
        await wait_for(pilot, lambda: overlay.display and overlay.region.height >= 10)
        assert overlay.region.bottom <= SIZE[1] - 1, overlay.region  # the footer line stays
        assert "Dismiss menu" in screen_text(app).splitlines()[-1]


async def test_the_source_forms_column_lists_are_ticked_among_the_files_columns(
    sample_session: Session,
) -> None:
    """Input, text and entity columns are ticked in a list of the data file's own columns (read
    from its header); ticking one puts it in the inputs; a column the TOML names that the file
    lacks is listed, and the form refuses it before ctrl+r."""
    from textual.widgets import SelectionList, TextArea

    from claimcheck.engine.data.peek import file_columns

    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, "2", "source", wait_screen=True)
        view = app.screen.view("source")
        files = view.form_values()[0]["files"]
        have = file_columns(sample_session.workspace, files)
        for field in ("input_columns", "text_columns", "entity_columns"):
            picker = view.query_one(f"#f-{field}", SelectionList)
            offered = [picker.get_option_at_index(i).value for i in range(picker.option_count)]
            assert offered == list(have), field
        inputs = view.query_one("#f-input_columns", SelectionList)
        before = view.form_values()[0]["input_columns"]
        assert list(inputs.selected) and set(inputs.selected) == set(before)
        spare = next(c for c in have if c not in before and c != view.form_values()[0]["label_column"])
        inputs.focus()
        await pilot.pause()
        inputs.highlighted = list(have).index(spare)
        await pilot.press("space")  # tick it, as a person does
        await wait_for(pilot, lambda: spare in (view.form_values()[0] or {}).get("input_columns", []))
        assert view.form_values()[0]["input_columns"] == [c for c in have if c in {*before, spare}]
        editor = view.query_one("#toml-editor", TextArea)
        assert f'"{spare}"' in editor.text  # the TOML follows the ticks

        editor.text = editor.text.replace(f'"{spare}"', '"not_a_column"')
        await wait_for(
            pilot,
            lambda: (
                "not_a_column" in [inputs.get_option_at_index(i).value for i in range(inputs.option_count)]
            ),
        )
        assert "not_a_column" in inputs.selected
        values, problem = view.form_values()
        assert values is None and "not_a_column" in problem, problem
        await pilot.press("ctrl+r")
        await pilot.pause()
        assert Session.open(sample_session.path).record("source") is None  # refused in the form


async def test_the_focus_marker_follows_the_focused_field(sample_session: Session) -> None:
    """Tab from field to field: only the focused field's label is drawn reversed, and typing goes
    into the field whose label is."""
    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view()._ready)
        view = app.screen.view()
        labels = list(view.query(".form-label"))

        def reversed_labels() -> list[str]:
            return [str(label.id) for label in labels if label.rich_style.reverse]

        view.show_tab("form")
        await wait_for(pilot, lambda: app.focused is not None and app.focused.has_class("form-scroll"))
        assert reversed_labels() == []
        seen = []
        for _ in range(3):
            await pilot.press("tab")
            await wait_for(pilot, lambda: app.focused is not None and bool(app.focused.id))
            assert reversed_labels() == ["l-" + str(app.focused.id)], (app.focused.id, reversed_labels())
            seen.append(app.focused.id)
        assert len(set(seen)) == 3
        await pilot.press("ctrl+l")  # focus leaves the form: no label stays marked
        await pilot.pause()
        assert reversed_labels() == []


async def test_the_checks_tab_shows_seven_checks_at_80x24(real_workspace: Path, tmp_path: Path) -> None:
    """The source record of the real session (more than seven checks): one line per check at 80
    columns, so the table shows seven of them over the detail."""
    from claimcheck.tui.widgets import ChecksTable
    from tests import real_session as rs

    path = rs.copy_workspace(real_workspace, tmp_path)
    app = make_app(path, workspace=path.parents[1])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), timeout=60)
        await _open_page(pilot, app, "2", "source")
        await pilot.press("f3")
        table = app.screen.view("source").query_one(ChecksTable)
        await wait_for(pilot, lambda: table.row_count > 7 and table.size.height > 0)
        shown = table.size.height - 1  # under the header
        assert shown >= 7 and all(row.height == 1 for row in table.rows.values())
        text = screen_text(app)
        ids = [c.id.removeprefix("source.") for c in table._checks[:7]]
        assert all(i[:12] in text for i in ids), text


async def test_a_column_list_says_ticked_or_not_in_glyphs_under_no_color(
    sample_session: Session, monkeypatch
) -> None:
    """The source form's input columns under NO_COLOR: a ticked column's box holds ✔, another's is
    blank (the stock box draws the same X for both, told apart by colour alone)."""
    from textual.widgets import SelectionList

    from claimcheck.tui.widgets import TICKED

    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, "2", "source", wait_screen=True)
        picker = app.screen.view("source").query_one("#f-input_columns", SelectionList)
        picker.focus()
        await pilot.pause()
        shown = [picker.render_line(y).text for y in range(min(picker.option_count, picker.size.height))]
        values = [picker.get_option_at_index(i).value for i in range(len(shown))]
        assert (
            shown
            and any(v in picker.selected for v in values)
            and any(v not in picker.selected for v in values)
        )
        for line, value in zip(shown, values, strict=True):
            box = line.lstrip()[1]  # ▐✔▌ / ▐ ▌
            assert box == (TICKED if value in picker.selected else " "), (line, value)


async def test_an_emptied_toml_value_field_falls_back_to_its_default(sample_session: Session) -> None:
    """The source form's filters (a TOML value) emptied by ctrl+u: no 'not a TOML value' error; the
    key leaves the inputs and the stage's default (no filter) applies."""
    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, "2", "source", wait_screen=True)
        view = app.screen.view("source")
        field = view.query_one("#f-filters")
        field.focus()
        await pilot.press("end", *"x")  # not TOML: refused in the form
        await wait_for(pilot, lambda: view.form_values()[0] is None)
        assert "not a TOML value" in view.form_values()[1]
        await pilot.press("ctrl+u", "ctrl+k")  # emptied
        await wait_for(pilot, lambda: view.form_values()[0] is not None)
        values = view.form_values()[0]
        assert "filters" not in values and field.value == ""
        assert "filters" not in view.query_one("#toml-editor").text.split("[source")[0]


async def test_the_toml_editor_goes_to_its_first_and_last_line(sample_session: Session) -> None:
    """ctrl+end and ctrl+home in a stage's TOML editor (the contract's runs past the pane)."""
    from claimcheck.tui.safe import TomlArea

    app = make_app(sample_session.path, workspace=sample_session.workspace)
    async with app.run_test(size=SIZE) as pilot:
        await _open_page(pilot, app, "5", "contract", wait_screen=True)
        editor = app.screen.view("contract").query_one("#toml-editor", TomlArea)
        app.screen.view("contract").query_one(".stage-form").show_toml()
        await pilot.pause()
        editor.focus()
        await pilot.pause()
        assert editor.document.line_count > 40
        await pilot.press("ctrl+end")
        await wait_for(pilot, lambda: editor.cursor_location == editor.document.end)
        await pilot.press("ctrl+home")
        await wait_for(pilot, lambda: editor.cursor_location == (0, 0))


async def test_the_weight_column_is_picked_among_the_numeric_columns(tmp_path: Path) -> None:
    """The data screen's weight picker offers the file's numeric columns only; the pick becomes the
    source's weight_column; a weight also ticked as an input is refused before the session."""
    from textual.widgets import Select, SelectionList

    from claimcheck.tui.data_screen import DataFileScreen
    from tests.test_tui_newdata import write_panel

    write_panel(tmp_path / "panel.csv")
    app = make_app(workspace=tmp_path, session_id="s-w", data_file="panel.csv")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen) and app.screen.peek is not None)
        screen = app.screen
        weight = screen.query_one("#pick-weight", Select)
        offered = [value for _, value in weight._options if isinstance(value, str) and value]
        numeric = [c.name for c in screen.peek.columns if c.kind == "number"]
        assert offered == numeric and "region" not in offered and "note" not in offered
        screen.query_one("#pick-label", Select).value = "region"
        inputs = screen.query_one("#pick-inputs", SelectionList)
        inputs.select("employees")
        inputs.select("year")
        await wait_for(pilot, lambda: "weight" not in str(screen.query_one("#data-suggestion").render()))
        screen.query_one("#pick-weight", Select).value = "employees"
        await wait_for(pilot, lambda: screen.suggestion is None)
        assert "weight column 'employees' is also picked as an input" in str(
            screen.query_one("#data-suggestion").render()
        )
        inputs.deselect("employees")
        await wait_for(pilot, lambda: screen.suggestion is not None)
        screen.query_one("#own-create").press()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        source = app.initial_inputs(app.session, "source")
        assert source["weight_column"] == "employees" and source["input_columns"] == ["year"]


# Words of the sample's support tickets that its model examples (the forms' placeholders) use.
TICKET_WORDS = ("ticket", "triage", "queue", "billing", "technical", "security", "subject", "channel", "body")


def _placeholders(view) -> dict[str, str]:
    from textual.widgets import Input

    return {w.id or "": str(w.placeholder) for w in view.query(Input) if w.placeholder}


async def test_a_session_on_your_own_file_holds_no_sample_examples(tmp_path: Path, monkeypatch) -> None:
    """On a session made from a non-ticket CSV no form field's placeholder holds a ticket-sample word:
    the claim's examples come from the file (its label's values, the picked inputs) or are neutral.
    The CPU text suggestion's sized budget is what the contract form starts with."""
    from textual.widgets import Select, SelectionList

    from claimcheck.engine.stages.claim.inputs import Inputs as ClaimInputs
    from claimcheck.engine.stages.own_sizing import Machine
    from claimcheck.tui.data_screen import DataFileScreen
    from claimcheck.tui.form_fields import field_specs, leaves
    from tests.test_tui_newdata import write_panel

    # the hardware facts, not torch: a CPU box whatever this machine has
    monkeypatch.setattr(Machine, "probe", classmethod(lambda cls: cls(cuda=False, cores=2, threads=2)))
    sample = " ".join(s.placeholder for s in leaves(field_specs(ClaimInputs))).lower()
    assert [w for w in TICKET_WORDS if w in sample]  # the model's own examples do hold them
    write_panel(tmp_path / "panel.csv")
    app = make_app(workspace=tmp_path, session_id="s-ex", data_file="panel.csv")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen) and app.screen.peek is not None)
        screen = app.screen
        screen.query_one("#pick-label", Select).value = "region"
        inputs = screen.query_one("#pick-inputs", SelectionList)
        inputs.select("note")
        inputs.select("employees")
        screen.query_one("#pick-text", SelectionList).select("note")
        await wait_for(pilot, lambda: screen.suggestion is not None and screen.suggestion.sizing is not None)
        sizing = screen.suggestion.sizing
        assert f"max_steps {sizing.max_steps}" in str(screen.query_one("#data-suggestion").render())
        screen.query_one("#own-create").press()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        seen: dict[str, dict[str, str]] = {}
        for stage in ("claim", "source", "split", "baseline", "contract", "dispatch", "artifact"):
            app.screen.go(stage)
            await wait_for(
                pilot,
                lambda s=stage: app.screen.view(s) is not None and app.screen.view(s).query(".stage-form"),
            )
            await pilot.pause()
            seen[stage] = _placeholders(app.screen.view(stage))
        said = {stage: [w for w in TICKET_WORDS if w in repr(p).lower()] for stage, p in seen.items()}
        assert not any(said.values()), (said, seen)
        claim = seen["claim"]
        assert sorted(claim["f-class_order"].removeprefix("e.g. ").split(", ")) == ["north", "south"]
        assert claim["f-positive_class"] in ("e.g. north", "e.g. south")
        picked = app.initial_inputs(app.session, "source")["input_columns"]
        assert claim["f-inference_inputs"] == "e.g. " + ", ".join(picked) and "note" in picked
        assert "panel.csv" in claim["f-prediction_unit"]
        contract = app.initial_inputs(app.session, "contract")
        assert {k: contract[k] for k in sizing.contract()} == sizing.contract()
