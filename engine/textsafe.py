"""Untrusted text made safe to show to a person: the one sanitiser for everything that leaves the program.

Data cells, column names, label values, file names, session titles, notes and free-text claim fields
can hold terminal escape sequences (CSI, OSC 0/8/52, DCS, APC, PM, SOS), single C1 controls, BEL,
backspace, CR, bidi overrides (U+202E), zero-width characters, variation selectors or stacks of
combining marks ("Zalgo" text). Printed raw they retitle the window, write the clipboard, clear the
screen, hide / reorder what is shown or draw over the lines around them. `visible` replaces every
hidden character with a visible stand-in (ESC as "␛", the rest as a \\xNN / \\uNNNN / \\UNNNNNNNN
escape) so a person can tell exactly which code point was in the data, and keeps at most
MAX_MARKS combining marks on one character (the rest are counted: "⟨+496 marks⟩").

Used by every output for a human: the CLI tables and messages (tui/cli.py, engine/headless/replay.py), the
report (engine/report/build.py: report.md, report.html, model-index.yaml) and the TUI (tui/safe.py builds
on it). The TOML records keep the exact data; only what is shown is changed.

Plain str in, plain str out: the engine must not import textual or rich.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

# Every code point of Unicode categories Cc (C0, DEL, C1), Cf (format: bidi controls, zero-width
# space / joiners, word joiner, BOM, soft hyphen, tag characters, ...), Zl / Zp (line / paragraph
# separator) and Cs (lone surrogates, e.g. an undecodable file name byte), as of Unicode 14
# (tests/test_untrusted_text.py checks this table against the running Python's unicodedata), plus
# characters that are not format characters but draw nothing: the combining grapheme joiner, the
# Hangul fillers, the Khmer inherent vowels, the Mongolian free variation selectors, the braille
# blank (U+2800) and the variation selectors (U+FE00-U+FE0F, U+E0100-U+E01EF), which change how
# the character before them is drawn and are invisible themselves.
HIDDEN_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0x2800, 0x2800),
    (0x3164, 0x3164),
    (0xD800, 0xDFFF),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
    (0xE0100, 0xE01EF),
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> str:
    def one(cp: int) -> str:
        return f"\\x{cp:02x}" if cp < 0x100 else (f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}")

    return "[" + "".join(one(a) if a == b else f"{one(a)}-{one(b)}" for a, b in ranges) + "]"


_HIDDEN = re.compile(_char_class(HIDDEN_RANGES))
_HIDDEN_BUT_NEWLINE = re.compile(_char_class(HIDDEN_RANGES).replace("\\x00-\\x1f", "\\x00-\\x09\\x0b-\\x1f"))

# ESC gets the conventional "␛" symbol; a few C0 controls their usual backslash names.
_NAMED = {"\x1b": "␛", "\t": "\\t", "\r": "\\r", "\n": "\\n"}


def stand_in(ch: str) -> str:
    """The visible text shown in place of one hidden character."""
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def is_hidden(ch: str) -> bool:
    """True for a character `visible` replaces (control, format, bidi, zero-width, separator)."""
    return _HIDDEN.match(ch) is not None


def has_hidden(text: str) -> bool:
    return _HIDDEN.search(text) is not None


# Combining marks kept on one character; the rest of a longer stack is shown as a count. Four cover
# the stacks of written languages (Vietnamese, Hebrew points, Indic vowel signs and virama).
MAX_MARKS = 4
# A stack longer than MAX_MARKS needs a run of that many + 1 code points at or above U+0300 (every
# combining mark is): text without one is returned at once.
_MAYBE_STACK = re.compile(f"[^\\x00-\\u02ff]{{{MAX_MARKS + 1},}}")


def _stacks_capped(text: str) -> str:
    """At most MAX_MARKS combining marks (categories Mn, Mc, Me) in a row; the rest counted."""
    if _MAYBE_STACK.search(text) is None:
        return text
    marks = sorted(ch for ch in set(text) if unicodedata.category(ch)[0] == "M")
    if not marks:
        return text
    stack = re.compile("[" + "".join(re.escape(ch) for ch in marks) + f"]{{{MAX_MARKS + 1},}}")
    return stack.sub(lambda m: m.group()[:MAX_MARKS] + f"⟨+{len(m.group()) - MAX_MARKS} marks⟩", text)


def visible(value: Any, *, keep_newlines: bool = False, limit: int | None = None) -> str:
    """`value` as a plain string with every hidden character replaced by a visible stand-in and
    stacks of combining marks cut to MAX_MARKS (the rest counted).

    keep_newlines: leave "\\n" as a line break (multi-line views); otherwise it shows as "\\n".
    limit: cut the text to this many characters (plus "…") before making it visible.
    Markup of any kind ("[bold]", "<b>", "[x](y)") is left as it is: escaping it is the renderer's job.
    """
    text = value if isinstance(value, str) else str(value)
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if not text.isascii():
        text = _stacks_capped(text)
    pattern = _HIDDEN_BUT_NEWLINE if keep_newlines else _HIDDEN
    if pattern.search(text) is None:
        return text
    return pattern.sub(lambda m: stand_in(m.group()), text)


# Characters that Markdown or HTML give meaning to, escaped in JSON text (\\u003c ...): a document
# that holds data stays exact when parsed, but a Markdown link ("[x](javascript:...)") or an HTML
# element ("<details ontoggle=...>") never appears in its bytes. Outside strings JSON has none of
# them ("](" never occurs between values).
_JSON_MARKUP = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "](": "]\\u0028"}


def json_text(doc: Any, **dumps: Any) -> str:
    """`doc` as JSON with every non-ASCII and control character escaped (ensure_ascii) and no
    Markdown link or HTML tag formed from data; json.loads gives back the exact data."""
    text = json.dumps(doc, ensure_ascii=True, **dumps)
    for raw, escaped in _JSON_MARKUP.items():
        text = text.replace(raw, escaped)
    return text
