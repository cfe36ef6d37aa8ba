"""Columns picked from the file's own columns: once the label (the target) is picked, no other
picker offers it, and choices made before of other columns are kept."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Select, SelectionList

from claimcheck.tui.app import make_app
from claimcheck.tui.data_screen import DataFileScreen
from tests.test_tui_newdata import SIZE, write_panel
from tests.test_tui_support import wait_for

COLUMNS = ["firm", "year", "region", "employees", "note", "sales"]


def _offered(screen, wid: str) -> list[str]:
    widget = screen.query_one("#" + wid)
    if isinstance(widget, SelectionList):
        return [widget.get_option_at_index(i).value for i in range(widget.option_count)]
    return [v for _, v in widget._options if isinstance(v, str) and v]


async def test_the_label_column_is_not_offered_again(tmp_path: Path) -> None:
    write_panel(tmp_path / "panel.csv")
    app = make_app(workspace=tmp_path, session_id="s-own", data_file="panel.csv")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen) and app.screen.peek is not None)
        screen = app.screen
        assert _offered(screen, "pick-inputs") == COLUMNS  # nothing picked yet: every column
        inputs = screen.query_one("#pick-inputs", SelectionList)
        inputs.select("employees")
        inputs.select("sales")
        screen.query_one("#pick-id", Select).value = "sales"
        screen.query_one("#pick-time", Select).value = "year"
        screen.query_one("#pick-label", Select).value = "sales"
        others = ("pick-inputs", "pick-id", "pick-entities", "pick-time")
        await wait_for(pilot, lambda: all("sales" not in _offered(screen, w) for w in others))
        assert _offered(screen, "pick-inputs") == [c for c in COLUMNS if c != "sales"]
        assert list(screen.query_one("#pick-inputs", SelectionList).selected) == ["employees"]
        assert screen.query_one("#pick-time", Select).value == "year"  # another column's choice kept
        dropped = screen.query_one("#pick-id", Select).value  # the label's choice is dropped
        assert not isinstance(dropped, str) or dropped == ""
        await wait_for(pilot, lambda: screen.suggestion is not None)
        # another label: the first one is offered again, the new one is not
        screen.query_one("#pick-label", Select).value = "employees"
        await wait_for(pilot, lambda: "employees" not in _offered(screen, "pick-inputs"))
        assert "sales" in _offered(screen, "pick-inputs")
        assert list(screen.query_one("#pick-inputs", SelectionList).selected) == []


async def test_the_source_forms_column_fields_pick_from_the_files_columns(tmp_path: Path) -> None:
    """A session made from the file: the source form's label, id and time column fields are choices
    among the file's own columns (and none); a column picked there goes to the inputs; a column the
    file lacks (typed in the TOML) is an error in the form, before ctrl+r."""
    from claimcheck.tui.app import SessionScreen
    from tests.test_tui_newdata import form_problem

    write_panel(tmp_path / "panel.csv")
    app = make_app(workspace=tmp_path, session_id="s-cols", data_file="panel.csv")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, DataFileScreen) and app.screen.peek is not None)
        screen = app.screen
        screen.query_one("#pick-label", Select).value = "sales"
        screen.query_one("#pick-inputs", SelectionList).select("employees")
        await wait_for(pilot, lambda: screen.suggestion is not None)
        screen.query_one("#own-create").press()
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        app.screen.go("source")
        await wait_for(
            pilot, lambda: app.screen.view("source") is not None and app.screen.view("source")._ready
        )
        view = app.screen.view("source")
        await wait_for(pilot, lambda: "inputs valid" in form_problem(app, "source"))
        for field in ("label_column", "id_column", "time_column"):
            widget = view.query_one(f"#f-{field}", Select)
            assert [v for _, v in widget._options] == ["", *COLUMNS], field
        assert view.query_one("#f-label_column", Select).value == "sales"
        view.query_one("#f-time_column", Select).value = "year"
        await wait_for(pilot, lambda: 'time_column = "year"' in view.query_one("#toml-editor").text)
        area = view.query_one("#toml-editor")
        area.text = area.text.replace('time_column = "year"', 'time_column = "yr"')
        await wait_for(pilot, lambda: "not in the data file" in form_problem(app, "source"))
        assert "time_column" in form_problem(app, "source") and view.form_values()[0] is None


def test_the_time_unit_rule_of_the_source_stage_is_said_in_the_form(tmp_path: Path) -> None:
    """The form's time-unit problem is the source stage's own refusal (resolve_time_unit), found
    before ctrl+r: a numeric time column with no unit, a numeric unit on a text column."""
    from claimcheck.engine.data.peek import time_unit_problem

    write_panel(tmp_path / "panel.csv")
    files = ["panel.csv"]
    assert "'time_unit' is empty but the time column 'year' holds numbers" in time_unit_problem(
        tmp_path, files, "year", ""
    )
    assert time_unit_problem(tmp_path, files, "year", "year") == ""
    assert "needs a numeric time column" in time_unit_problem(tmp_path, files, "firm", "year")
    assert time_unit_problem(tmp_path, files, "", "") == ""
