"""Pilot tests of the generated stage forms (tui/forms.py): keys at 80x24, the real stage modules
and the repository's default recipe.

Every stage's form is built from its `Inputs` model (one widget per field, its description as help),
shows a field's problem under that field as the person types, marks recipe values and shows the
recipe's value once changed, keeps the TOML tab in sync both ways; quitting with unsaved edits asks
(save draft / discard / stay) and a draft survives a restart.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.widgets import Input, Select, Switch, TextArea
from textual.widgets._toast import Toast

from claimcheck.engine.ledger.drafts import draft_path
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.recipes import DEFAULT_RECIPE, load_recipe
from claimcheck.tui.app import SessionScreen, make_app
from claimcheck.tui.form_fields import MISSING, field_specs, get_path, leaves, to_text
from claimcheck.tui.forms import RECIPE_CHANGED, RECIPE_MARK, FormScroll, StageForm
from claimcheck.tui.quit_dialog import QuitScreen
from tests.test_tui_support import screen_text, wait_for

SIZE = (80, 24)
# One number field per stage: typing a word there must show its error under it.
NUMBER_FIELD = {
    "claim": "success.value",
    "source": "preview_rows",
    "split": "seed",
    "baseline": "max_features",
    "contract": "micro_batch",
    "dispatch": "ray_num_cpus",
    "artifact": "bootstrap_resamples",
}
WIDGET = {"select": Select, "switch": Switch}


def new_session(tmp_path: Path, sid: str = "f") -> Session:
    return Session.create(tmp_path / "runs" / sid, workspace=tmp_path, recipe=DEFAULT_RECIPE)


async def opened(pilot) -> None:
    def ready() -> bool:
        screen = pilot.app.screen
        return isinstance(screen, SessionScreen) and screen.view() is not None and screen.view()._ready

    await wait_for(pilot, ready)


async def go(pilot, stage: str) -> StageForm:
    app = pilot.app
    await pilot.press("ctrl+l", str(registry.get(stage).index))
    await wait_for(pilot, lambda: app.screen.view(stage) is not None and app.screen.view(stage)._ready)
    await wait_for(pilot, lambda: isinstance(app.focused, FormScroll))
    return app.screen.view(stage).query_one(StageForm)


async def retype(pilot, widget: Input, text: str) -> None:
    widget.focus()
    await pilot.press("end", "ctrl+u", *text)
    await pilot.pause()


def shown(form: StageForm, label_id: str) -> str:
    return str(form.query_one("#" + label_id).render())


async def test_every_stage_form_is_generated_from_its_inputs(tmp_path: Path) -> None:
    """Each field of each stage's Inputs: its widget, its help, a number's error under it as typed;
    a recipe value marked, and shown beside the field once changed (one app: seven pages)."""
    recipe = load_recipe(DEFAULT_RECIPE)
    app = make_app(new_session(tmp_path).path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        for spec in registry.STAGES:
            form = await go(pilot, spec.name)
            # ctrl+l + digit lands on the fields' pane, never in a field a stray key would edit
            assert not isinstance(app.focused, Input | TextArea)
            model = spec.module().Inputs
            assert form.model is model
            for field in leaves(field_specs(model)):
                widget = form.query_one("#" + field.wid)
                assert isinstance(widget, WIDGET.get(field.kind, Input)), (spec.name, field.path)
                assert field.help, f"{spec.name}.{field.path} has no description"
                helps = [str(lbl.render()) for lbl in widget.parent.query(".field-help")]
                assert helps == [field.help], (spec.name, field.path, helps)
            # a word in a number field: its own error, under it, as typed; the summary says the same
            path = NUMBER_FIELD[spec.name]
            wid = "f-" + path.replace(".", "--")
            before = form.query_one("#" + wid, Input).value
            await retype(pilot, form.query_one("#" + wid, Input), "lots")
            await wait_for(pilot, lambda f=form, w=wid: f.query_one("#e-" + w).display)
            error = shown(form, "e-" + wid)
            assert "valid" in error and ("number" in error or "integer" in error), error
            assert f"field '{path}'" in str(form.query_one(".form-problem").render())
            inputs, problem = form.collect()
            assert inputs is None and path in problem
            await retype(pilot, form.query_one("#" + wid, Input), before)
            await wait_for(pilot, lambda f=form, w=wid: not f.query_one("#e-" + w).display)
            await recipe_value_changed(pilot, form, recipe.get(spec.name, {}))


async def recipe_value_changed(pilot, form: StageForm, stage_recipe: dict) -> None:
    """The first text / number field the recipe filled: marked; changed, it shows the recipe's value."""
    texts = [
        f
        for f in leaves(form.specs)
        if f.kind in ("text", "int", "float") and get_path(stage_recipe, f.path) is not MISSING
    ]
    if not texts:  # the default recipe leaves dispatch and artifact on their defaults
        assert not any(RECIPE_MARK in shown(form, "l-" + f.wid) for f in leaves(form.specs))
        return
    field = texts[0]
    label = "l-" + field.wid
    value = get_path(stage_recipe, field.path)
    assert RECIPE_MARK in shown(form, label), field.path
    await retype(pilot, form.query_one("#" + field.wid, Input), "7")
    await wait_for(pilot, lambda: RECIPE_CHANGED in shown(form, label))
    assert RECIPE_CHANGED + to_text(field, value)[:20] in shown(form, label)
    # the TOML tab follows the field
    toml = tomllib.loads(form.query_one("#toml-editor", TextArea).text)
    assert get_path(toml, field.path) in (7, 7.0, "7")


async def test_toml_tab_and_fields_stay_in_sync(tmp_path: Path) -> None:
    app = make_app(new_session(tmp_path).path, workspace=tmp_path)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await opened(pilot)
        form = await go(pilot, "split")
        await pilot.press("shift+tab", "right", "tab")  # the tab strip, "TOML (advanced)", the editor
        editor = form.query_one("#toml-editor", TextArea)
        await wait_for(pilot, lambda: app.focused is editor)
        before = editor.text
        editor.text = before.replace("seed = 13", "seed = 99")
        await wait_for(pilot, lambda: form.query_one("#f-seed", Input).value == "99")
        assert form.collect()[0]["seed"] == 99
        # Tab leaves the editor (it never inserts spaces there)
        await pilot.press("tab")
        assert app.focused is not editor and editor.text == before.replace("seed = 13", "seed = 99")
        # a toast never draws over the focused editor
        editor.focus()
        app.notify("split: 12 checks, 0 fail — draft saved", title="a title", timeout=30)
        await wait_for(pilot, lambda: bool(app.screen.query(Toast)))
        for toast in app.screen.query(Toast):
            assert not toast.region.overlaps(editor.region), (toast.region, editor.region)


async def test_quit_asks_and_a_draft_survives_a_restart(tmp_path: Path) -> None:
    session = new_session(tmp_path)
    draft = draft_path(session.path, "split")

    async def edit_seed(pilot, value: str) -> StageForm:
        await opened(pilot)
        form = await go(pilot, "split")
        await retype(pilot, form.query_one("#f-seed", Input), value)
        return form

    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await edit_seed(pilot, "21")
        await wait_for(pilot, draft.exists)  # written as the person types, before any quit
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        text = screen_text(app)
        assert "split" in text and "Save draft" in text and "Discard" in text and "Stay" in text
        await pilot.press("escape")  # stay
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert app.is_running
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("s")  # save draft and quit
    assert not app.is_running and "seed = 21" in draft.read_text(encoding="utf-8")
    assert session.record("split") is None, "a draft is never a record"

    # reopened: the draft is restored with a notice
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        form = await go(pilot, "split")
        assert form.query_one("#f-seed", Input).value == "21"
        assert "Restored unsaved edits" in str(form.query_one(".form-notice").render())
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("d")  # discard and quit
    assert not draft.exists()

    # nothing unsaved: ctrl+q quits at once, and takes away the draft of a keystroke ago
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        form = await edit_seed(pilot, "1")
        await wait_for(pilot, draft.exists)  # "seed = 1", written when the typing paused
        await pilot.press("3")  # 13, the recipe's own value: no edit, and quit before its timer
        assert not form.dirty
        await pilot.press("ctrl+q")
    assert not app.is_running and not draft.exists()
