"""Showing untrusted text literally.

Data cells, file names, notes and error messages can hold Rich markup ("[bold]"), ANSI / OSC
escape sequences or other control characters. None of that may reach the terminal as an escape:
every data string goes through `clean` (a plain str with controls made visible) or `literal`
(a rich Text built from it, never parsed as markup), and every text field is a `LiteralInput`.

The sanitiser itself is `claimcheck.engine.textsafe.visible` (one implementation for the CLI, the report and
the TUI); this module only wraps it for Rich / Textual.
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Input, TextArea
from textual.widgets.text_area import Edit

from claimcheck.engine.textsafe import HIDDEN_RANGES, has_hidden, is_hidden, visible

__all__ = ["HIDDEN_RANGES", "LiteralInput", "TomlArea", "clean", "input_glyphs", "literal", "toml_escapes"]


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


# ---------------------------------------------------------------- the TOML editor


def _toml_escape(ch: str) -> str:
    code = ord(ch)
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def toml_escapes(text: str) -> str:
    """Hidden characters (but tab and line breaks) as TOML \\uXXXX escapes.

    Inside a TOML string (where such data can be: tomlkit writes C0 controls as escapes but leaves
    C1, bidi and zero-width characters raw) the escape is the same value, so the inputs parsed
    from the editor are exactly the recorded ones; anywhere else the raw character was a TOML
    syntax error already.
    """
    if not has_hidden(text):
        return text
    return "".join(_toml_escape(ch) if ch not in "\t\n\r" and is_hidden(ch) else ch for ch in text)


class TomlArea(TextArea):
    """The stage inputs' TOML editor: no hidden character ever reaches the document (or the screen).

    Loaded text and every edit (typing, paste, `insert` / `replace`) pass through `toml_escapes`.
    ctrl+home and ctrl+end go to the document's first and last line (TextArea binds neither).
    """

    BINDINGS = [
        Binding("ctrl+home", "document_start", "Document start", show=False),
        Binding("ctrl+end", "document_end", "Document end", show=False),
    ]

    def __init__(self, text: str = "", **kwargs: Any) -> None:
        super().__init__(toml_escapes(text), **kwargs)

    def action_document_start(self) -> None:
        self.move_cursor((0, 0))

    def action_document_end(self) -> None:
        self.move_cursor(self.document.end)

    def load_text(self, text: str) -> None:
        super().load_text(toml_escapes(text))

    def edit(self, edit: Edit) -> Any:
        edit.text = toml_escapes(edit.text)
        return super().edit(edit)
