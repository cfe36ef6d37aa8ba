"""Showing untrusted text literally.

Data cells, file names, notes and error messages can hold Rich markup ("[bold]"), ANSI / OSC
escape sequences or other control characters. None of that may reach the terminal as an escape:
every data string goes through `clean` (a plain str with controls made visible) or `literal`
(a rich Text built from it, never parsed as markup), and every text field is a `LiteralInput`.

The sanitiser itself is `engine.textsafe.visible` (one implementation for the CLI, the report and
the TUI); this module only wraps it for Rich / Textual.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Input

from engine.textsafe import HIDDEN_RANGES, has_hidden, is_hidden, visible

__all__ = ["HIDDEN_RANGES", "LiteralInput", "clean", "input_glyphs", "literal"]


def clean(value: Any, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """A plain string with every control character replaced by a visible escape."""
    return visible(value, keep_newlines=keep_newlines, limit=limit)


def literal(value: Any, style: str = "", *, keep_newlines: bool = False, limit: int | None = None) -> Text:
    """A rich Text showing `value` exactly as written: markup is not parsed, escapes are visible."""
    return Text(clean(value, keep_newlines=keep_newlines, limit=limit), style=style, no_wrap=False)


# ---------------------------------------------------------------- text fields

# An Input's cursor, selection and scrolling count characters of its value, so what it shows must
# have exactly one cell per character. A hidden character is shown as ONE stand-in glyph in reverse
# video: a C0 control as its Unicode "control picture" (ESC as ␛, BEL as ␇, CR as ␍, ...), DEL as
# ␡, and every other hidden character (C1 controls, bidi controls, zero-width and other format
# characters) as ⍰. The value itself is not changed: the record gets exactly what was typed or
# pasted (docs/tui.md, "Untrusted text").
INPUT_OTHER = "⍰"
INPUT_STYLE = "reverse"


def _input_glyph(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "␡"
    return INPUT_OTHER


def input_glyphs(value: str) -> str:
    """`value` with each hidden character replaced by one visible glyph (same length as `value`)."""
    if not has_hidden(value):
        return value
    return "".join(_input_glyph(ch) if is_hidden(ch) else ch for ch in value)


class LiteralInput(Input):
    """An Input that never sends its value's control / bidi / zero-width characters to the terminal.

    Textual's Input renders `value` as it is, so a pasted (or recorded) "ESC ] 0 ; … BEL" retitles
    the terminal and "ESC [ 2 J" clears it. This one shows each such character as one visible glyph
    (see `input_glyphs`) while `value` keeps exactly what was entered.
    """

    @property
    def _value(self) -> Text:
        if self.password:
            return super()._value
        value = self.value
        text = Text(input_glyphs(value), no_wrap=True, overflow="ignore", end="")
        if has_hidden(value):
            for i, ch in enumerate(value):
                if is_hidden(ch):
                    text.stylize(INPUT_STYLE, i, i + 1)
        if self.highlighter is not None:
            text = self.highlighter(text)
        return text

    def _position_to_cell(self, position: int) -> int:
        if self.password:
            return super()._position_to_cell(position)
        return cell_len(input_glyphs(self.value[:position]))

    def _cell_offset_to_index(self, offset: int) -> int:
        if self.password:
            return super()._cell_offset_to_index(offset)
        scroll_x, _ = self.scroll_offset
        offset += scroll_x
        cell = 0
        for index, ch in enumerate(input_glyphs(self.value)):
            width = cell_len(ch)
            if cell <= offset < cell + width:
                return index
            cell += width
        return max(0, min(offset, len(self.value)))
