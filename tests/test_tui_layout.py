"""80×24 layout: the quit dialog is centred like the others; a restored draft's notice goes once the
edits are undone and the draft removed."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from claimcheck.engine.ledger.drafts import draft_path
from claimcheck.tui.app import make_app
from claimcheck.tui.quit_dialog import QuitScreen
from tests.test_tui_forms import SIZE, go, new_session, opened, retype
from tests.test_tui_support import wait_for


async def test_the_quit_dialog_is_centred_and_a_restored_notice_goes_with_its_draft(tmp_path: Path) -> None:
    session = new_session(tmp_path)
    draft = draft_path(session.path, "split")
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        form = await go(pilot, "split")
        before = form.query_one("#f-seed", Input).value
        await retype(pilot, form.query_one("#f-seed", Input), "21")
        await wait_for(pilot, draft.exists)
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitScreen))
        box = app.screen.query_one("#confirm-box").region
        width, height = SIZE
        assert abs(box.x - (width - box.right)) <= 1, box  # centred across
        assert abs(box.y - (height - box.bottom)) <= 1, box  # and down
        await pilot.press("s")
    assert draft.exists()
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        form = await go(pilot, "split")
        notice = form.query_one(".form-notice")
        assert "Restored unsaved edits" in str(notice.render()) and notice.display
        await retype(pilot, form.query_one("#f-seed", Input), before)  # the edit undone
        await wait_for(pilot, lambda: not draft.exists())
        await wait_for(pilot, lambda: not notice.display and "Restored" not in str(notice.render()))


async def test_the_toml_editor_wraps_long_lines_at_80_columns(tmp_path: Path) -> None:
    from tests.test_tui_support import screen_text

    session = new_session(tmp_path)
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        form = await go(pilot, "split")
        area = form.query_one("#toml-editor")
        long = 'rationale = "' + " ".join(f"word{i:02d}" for i in range(14)) + ' end-of-line"'
        area.text = "\n".join(
            long if x.startswith("rationale") else x for x in area.text.splitlines()
        )  # fmt: skip
        form.show_toml()
        await wait_for(pilot, lambda: "word00" in screen_text(app))
        assert len(long) > 80 and 'end-of-line"' in screen_text(app)
