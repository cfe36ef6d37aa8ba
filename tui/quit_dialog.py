"""Quitting with unsaved form edits asks first, as editors do: save a draft, discard, or stay."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

# The answers, also the buttons' ids.
SAVE, DISCARD, STAY = "save", "discard", "stay"


class QuitScreen(ModalScreen[str]):
    """s saves the drafts and quits, d discards them and quits, Escape (or n) stays."""

    BINDINGS = [
        Binding("s", f"answer('{SAVE}')", "Save draft"),
        Binding("d", f"answer('{DISCARD}')", "Discard"),
        Binding("escape,n", f"answer('{STAY}')", "Stay"),
    ]

    def __init__(self, stages: list[str]) -> None:
        super().__init__()
        self.stages = stages

    def compose(self) -> ComposeResult:
        body = Text("Unsaved form edits in: ")
        body.append(", ".join(self.stages), style="bold")
        body.append(
            ".\nSave draft keeps them beside the records (not evidence) and restores them when you "
            "reopen the session; Discard drops them; Stay goes back."
        )
        with Vertical(id="confirm-box"):
            yield Static(Text("Quit with unsaved edits?", style="bold"))
            with VerticalScroll(id="confirm-body"):
                yield Static(body)
            with Horizontal(id="confirm-buttons"):
                yield Button("Save draft (s)", id=SAVE, variant="primary")
                yield Button("Discard (d)", id=DISCARD, variant="error")
                yield Button("Stay (esc)", id=STAY)

    def on_mount(self) -> None:
        self.query_one(f"#{SAVE}", Button).focus()

    def action_answer(self, value: str) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or STAY)


__all__ = ["DISCARD", "SAVE", "STAY", "QuitScreen"]
