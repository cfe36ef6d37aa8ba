"""Showing untrusted text literally.

Data cells, file names, notes and error messages can hold Rich markup ("[bold]"), ANSI / OSC
escape sequences or other control characters. None of that may reach the terminal as an escape:
every data string goes through `clean` (a plain str with controls made visible) or `literal`
(a rich Text built from it, never parsed as markup).
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

# Control characters shown as visible stand-ins. ESC gets the conventional "␛" symbol, the rest a
# \xNN / \uNNNN escape so the person can tell exactly which byte was in the data.
_NAMED = {"\x1b": "␛", "\t": "\\t", "\r": "\\r", "\n": "\\n"}


def _visible(ch: str, keep_newlines: bool) -> str:
    if keep_newlines and ch == "\n":
        return ch
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _is_control(ch: str) -> bool:
    code = ord(ch)
    # C0, DEL, C1 (0x80-0x9f holds CSI/OSC single-byte introducers), and bidi / zero-width
    # format characters that can reorder or hide what is shown.
    return (
        code < 0x20
        or code == 0x7F
        or 0x80 <= code <= 0x9F
        or 0x200B <= code <= 0x200F
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
        or code == 0xFEFF
    )


def clean(value: Any, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """A plain string with every control character replaced by a visible escape."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if not any(_is_control(ch) for ch in text):
        return text
    return "".join(_visible(ch, keep_newlines) if _is_control(ch) else ch for ch in text)


def literal(value: Any, style: str = "", *, keep_newlines: bool = False, limit: int | None = None) -> Text:
    """A rich Text showing `value` exactly as written: markup is not parsed, escapes are visible."""
    return Text(clean(value, keep_newlines=keep_newlines, limit=limit), style=style, no_wrap=False)
