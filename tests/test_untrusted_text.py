"""Untrusted text never reaches a terminal or a report as control bytes (issue 14, section 1).

A table of payload kinds (terminal escapes, C1 controls, bidi and zero-width characters, Rich /
Textual markup, HTML, Markdown, a 100 kB line) is placed in every place data enters: cell values,
column names, label values, a data file name, session titles made in the app (an answers file's
[session] refuses control characters, visibly), notes and every free-text claim field. Each output path a person reads is then checked byte for byte: the `run` table and its
progress lines under a pseudo-terminal, the error line naming a data file, `--replay` with a
`differs` row (measured keys are column names) as a table and as `--json`, report.md, report.html,
model-index.yaml and the TUI screens (title bar, claim form Inputs, source form, checks, data,
notes) through Pilot. The TOML records must keep the exact data.

The real claim / source / split / baseline stages run here (a few seconds each run), so the
payloads travel the same way a user's data does. The 100 kB line goes into a note, a cell and (its
last 200 characters) a label and a column name, and into a claim form Input on its own: tomlkit
escapes a string in time quadratic in its length for each distinct control character it holds
(tomlkit._utils.escape_string), so 100 kB strings in the claim made one `run` take minutes.
"""

from __future__ import annotations

import csv
import json
import os
import pty
import re
import select
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from claimcheck.engine.evidence import dump_toml
from claimcheck.engine.textsafe import HIDDEN_RANGES, MAX_MARKS, is_hidden, json_text, visible

ROOT = Path(__file__).resolve().parent.parent
ESC, BEL, ST = "\x1b", "\x07", "\x1b\\"

# kind -> payload. Every kind is distinct; `SIGNATURE` below is what must never appear raw.
PAYLOADS: dict[str, str] = {
    "csi_clear_red": f"{ESC}[2J{ESC}[41mred",
    "osc0_title": f"{ESC}]0;pwned-title{BEL}",
    "osc8_hyperlink": f"{ESC}]8;;http://evil.example/{ST}click{ESC}]8;;{ST}",
    "osc52_clipboard": f"{ESC}]52;c;cm0gLXJmIH4K{BEL}",
    "dcs": f"{ESC}P+q544e{ST}",
    "c1_csi": "\x9b31mc1red",
    "c1_osc": "\x9d0;c1title\x9c",
    "bel": f"ring{BEL}{BEL}",
    "backspace": "abc\x08\x08\x08xyz",
    "cr_overwrite": "harmless\rEVIL",
    "del": "de\x7fl",
    "rlo": "\u202eexe.txt",
    "lri_pdi": "\u2066isolated\u2069",
    "zero_width": "zw\u200bj\u200dn\u2060b\ufeff",
    "rich_markup": "[bold red]boom[/]",
    "rich_link": "[link=http://evil.example]linked[/link]",
    "textual_click": "[@click=app.quit]quit[/]",
    "textual_markup": "[$accent on $error]var[/] [b]bold[/b]",
    "html": "<script>alert(1)</script><img src=x onerror='alert(2)'>&amp;",
    "markdown_link": "[mdlink](http://evil.example/a)",
    "markdown_image": "![mdimg](http://evil.example/i.png)",
    "bare_autolinks": "see http://evil.example/x or www.evil.example or mail@evil.example",
    "long_line_100k": "L" * 100_000 + f"{ESC}[5mblink",
    "apc": f"{ESC}_apc-payload{ST}",
    "pm": f"{ESC}^pm-payload{ST}",
    "sos": f"{ESC}Xsos-payload{ST}",
    "c1_apc": "\x9fc1apc\x9c",
    "variation_selectors": "heart\ufe0f\ufe00 ideo\U000e0100\U000e01ef",
    "braille_blank": "blank\u2800\u2800here",
    "zalgo": "Z" + "\u0301" * 500 + "algo",
    "grapheme_10k": "g" + "\u0300" * 9_999,
    "markdown_js_link": "[x](javascript:alert(1))",
    "details_ontoggle": "<details open ontoggle=alert(1)>",
}

# The raw form that must not reach a terminal / report: the control-bearing core of each payload.
SIGNATURE: dict[str, str] = {
    "csi_clear_red": f"{ESC}[2J",
    "osc0_title": f"{ESC}]0;",
    "osc8_hyperlink": f"{ESC}]8;",
    "osc52_clipboard": f"{ESC}]52;",
    "dcs": f"{ESC}P",
    "c1_csi": "\x9b",
    "c1_osc": "\x9d",
    "bel": BEL,
    "backspace": "\x08",
    "cr_overwrite": "\rEVIL",
    "del": "\x7f",
    "rlo": "\u202e",
    "lri_pdi": "\u2066",
    "zero_width": "\u200d",
    "long_line_100k": f"{ESC}[5m",
    "apc": f"{ESC}_",
    "pm": f"{ESC}^",
    "sos": f"{ESC}X",
    "c1_apc": "\x9f",
    "variation_selectors": "\ufe0f",
    "braille_blank": "\u2800",
}
# Stacks of combining marks: visible keeps MAX_MARKS of them on one character. The TUI's inputs keep
# one cell per character and are not checked for these.
STACKS: dict[str, str] = {"zalgo": "\u0301" * (MAX_MARKS + 1), "grapheme_10k": "\u0300" * (MAX_MARKS + 1)}
MARKUP_KINDS = [k for k in PAYLOADS if k not in SIGNATURE and k not in STACKS]
assert len(PAYLOADS) >= 29 and len(MARKUP_KINDS) == 10
# Data that would be a live Markdown link or HTML element where it is rendered.
LIVE_MARKUP = ("[x](javascript:", "<details open ontoggle=")

# Claim fields that take free text (lists: every payload is one item).
TEXT_FIELDS = ("prediction_unit", "target_meaning", "population", "metric_averaging", "run_scope")
TEXT_FIELDS += ("label_quality_limits",)


def hidden(text: str, allowed: str = "\n") -> int:
    """How many hidden (control / bidi / zero-width / format) code points `text` holds."""
    return sum(1 for ch in text if ch not in allowed and is_hidden(ch))


def leaks(text: str) -> dict[str, int]:
    """Raw signature occurrences per payload kind (only kinds that occur)."""
    return {k: text.count(sig) for k, sig in SIGNATURE.items() if sig in text}


def stacks(text: str) -> dict[str, int]:
    """Stacks of more than MAX_MARKS combining marks, per payload kind (only kinds that occur)."""
    return {k: text.count(sig) for k, sig in STACKS.items() if sig in text}


# ---------------------------------------------------------------- the sanitiser itself


def test_hidden_table_covers_unicode_control_and_format_characters() -> None:
    wanted = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    missing = [
        f"U+{cp:04X}"
        for cp in range(0x110000)
        if unicodedata.category(chr(cp)) in wanted and not is_hidden(chr(cp))
    ]
    assert not missing, f"claimcheck.engine.textsafe.HIDDEN_RANGES misses {missing[:20]}"
    assert all(a <= b for a, b in HIDDEN_RANGES)


@pytest.mark.parametrize("kind", list(PAYLOADS))
def test_visible_leaves_no_hidden_character(kind: str) -> None:
    payload = PAYLOADS[kind]
    shown = visible(payload)
    assert hidden(shown, allowed="") == 0
    assert not leaks(shown) and not stacks(shown)
    if kind in MARKUP_KINDS:
        assert shown == payload  # markup is the renderer's business: the text itself is unchanged


def test_visible_names_each_character() -> None:
    assert visible(f"a{ESC}[2Jb") == "a␛[2Jb"
    assert visible("x\u202ey\u200dz\x9b\x07") == "x\\u202ey\\u200dz\\x9b\\x07"
    assert visible("one\ntwo\tend") == "one\\ntwo\\tend"
    assert visible("one\ntwo", keep_newlines=True) == "one\ntwo"
    assert visible("\U000e0041") == "\\U000e0041"  # tag characters smuggle invisible ASCII
    assert visible("plain café ✓ 中文") == "plain café ✓ 中文"
    assert visible(f"{ESC}_apc{ST}{ESC}^pm{ST}{ESC}Xsos{ST}") == "␛_apc␛\\␛^pm␛\\␛Xsos␛\\"
    assert visible("\x9fapc\x9c") == "\\x9fapc\\x9c"
    assert visible("a\ufe0fb\U000e0100c\u2800d\u180bz") == "a\\ufe0fb\\U000e0100c\\u2800d\\u180bz"


def test_visible_caps_combining_marks_on_one_character() -> None:
    assert visible("Z" + "\u0301" * 500 + "algo") == "Z" + "\u0301" * MAX_MARKS + "⟨+496 marks⟩algo"
    assert visible("g" + "\u0300" * 9_999) == "g" + "\u0300" * MAX_MARKS + "⟨+9995 marks⟩"
    # Written languages keep their marks: Vietnamese, Hindi, Hebrew with points.
    for word in ("Tiếng Việt", "हिन्दी", "שָׁלוֹם", "e\u0301\u0302\u0323\u0308"):
        assert visible(word) == word


def test_json_text_holds_no_markdown_link_or_html_and_parses_back_exactly() -> None:
    doc = {"k": [PAYLOADS["markdown_js_link"], PAYLOADS["details_ontoggle"], "a & b é ␛", {"x](y": 1}]}
    text = json_text(doc, indent=2)
    assert text.isascii() and not any(m in text for m in LIVE_MARKUP) and "<" not in text
    assert json.loads(text) == doc


# ---------------------------------------------------------------- a hostile session, built by the CLI

N_PER_CLASS = 8


LONG = PAYLOADS["long_line_100k"]
# Every payload but the 100 kB line, in one text. (The 100 kB line goes alone into a few places:
# writing a 100 kB string with several different control characters through tomlkit takes seconds
# per record; see the module docstring.)
SHORT_TEXT = " | ".join(f"{k}={p}" for k, p in PAYLOADS.items() if p is not LONG)


def _short(p: str) -> str:
    return p if len(p) < 1000 else p[-200:]


def _labels() -> list[str]:
    return [f"L{i:02d}:{_short(p)}" for i, p in enumerate(PAYLOADS.values())]


def _columns() -> list[str]:
    return [f"c{i:02d}:{_short(p)}" for i, p in enumerate(PAYLOADS.values())]


def _write_data(path: Path, blank_payload_columns: bool = False) -> None:
    labels, cols = _labels(), _columns()
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "queue", "text", *cols])
        n = 0
        for j, label in enumerate(labels):
            for r in range(N_PER_CLASS):
                payload = _short(list(PAYLOADS.values())[(j + r) % len(PAYLOADS)])
                if n == 1:
                    payload = LONG
                text = f"ticket {n} about topic{j} word{j}x{r % 3} {payload}"
                extra = ["" if blank_payload_columns and r == 0 else f"v{(n * 7) % 5}" for _ in cols]
                w.writerow([n, label, text, *extra])
                n += 1


def _answers(data_file: str) -> dict[str, Any]:
    claim: dict[str, Any] = {f: SHORT_TEXT for f in TEXT_FIELDS}
    claim.update(
        task_kind="text_classification",
        target_kind="recorded_workflow_label",
        inference_inputs=["text", *_columns()],
        primary_metric="macro_f1",
        class_order=_labels(),
        comparators=["trivial_baseline"],
        success={"metric": "macro_f1", "op": ">=", "value": 0.02, "relative_to": "trivial_baseline"},
    )
    return {
        # An answers file refuses control characters in [session] (test below); the app's own
        # session titles carry the payloads instead (test_start_screen_and_new_session_fields).
        "session": {"title": "hostile data", "id": "hostile", "workspace": "."},
        "claim": claim,
        "source": {
            "files": [data_file],
            "label_column": "queue",
            "input_columns": ["text", *_columns()],
            "text_columns": ["text"],
            "id_column": "id",
        },
        "split": {},
        "baseline": {},
        "notes": [{"stage": "source", "tag": "fact", "text": f"note {k}: {p}"} for k, p in PAYLOADS.items()],
    }


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(COLUMNS="100", LINES="40", TERM="xterm-256color")
    return env


def cli_pty(args: list[str], cwd: Path) -> tuple[int, str]:
    """Run `claimcheck ARGS` with stdout and stderr on a pseudo-terminal; the bytes the terminal got."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "claimcheck.tui.cli", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=_env(),
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError(
                "claimcheck did not finish: " + b"".join(chunks)[-2000:].decode("utf-8", "replace")
            )
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    rc = proc.wait(timeout=60)
    # The terminal's line discipline turns "\n" into "\r\n" (ONLCR); any other CR came from the program.
    return rc, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def cli_pipe(args: list[str], cwd: Path) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-m", "claimcheck.tui.cli", *args],
        cwd=cwd,
        capture_output=True,
        env=_env(),
        timeout=300,
    )
    return out.returncode, out.stdout.decode("utf-8")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return build_hostile(tmp_path_factory.mktemp("hostile"))


def build_hostile(ws: Path) -> dict[str, Any]:
    """Run every CLI path on the hostile data in `ws`; the text each one showed, by name."""
    _write_data(ws / "data.csv")
    (ws / "answers.toml").write_text(dump_toml(_answers("data.csv")), encoding="utf-8")
    out: dict[str, Any] = {"ws": ws, "session": ws / "s"}
    out["run_rc"], out["run"] = cli_pty(["run", "--answers", "answers.toml", "s"], ws)

    # The error line that names a data file: a missing file whose name carries every payload.
    bad_name = "missing " + " ".join(_short(p) for p in PAYLOADS.values()) + ".csv"
    (ws / "bad.toml").write_text(dump_toml(_answers(bad_name)), encoding="utf-8")
    out["error_rc"], out["error"] = cli_pty(["run", "--answers", "bad.toml", "s2"], ws)

    out["report_rc"], out["report"] = cli_pty(["report", "s"], ws)
    out["coverage_rc"], out["coverage"] = cli_pty(["coverage", "s"], ws)
    out["coverage_json_rc"], out["coverage_json"] = cli_pipe(["coverage", "s", "--json"], ws)
    # The exports, each through its library: what reaches the terminal, and what they write.
    out["exports"] = {
        kind: cli_pty(["export", kind, "s", *extra], ws)
        for kind, extra in (
            ("model-card", []),
            ("croissant", []),
            ("mlflow", ["--tracking-uri", (ws / "mlruns").as_uri()]),
        )
    }

    # A `differs` row: the same columns, some of their cells now blank, so the measured missingness
    # (keyed by column name) differs on replay.
    _write_data(ws / "data.csv", blank_payload_columns=True)
    out["replay_rc"], out["replay"] = cli_pty(["--replay", "s"], ws)
    out["json_rc"], out["json"] = cli_pipe(["--replay", "s", "--json"], ws)
    return out


def test_the_run_table_under_a_pty(hostile: dict[str, Any]) -> None:
    text = hostile["run"]
    assert hostile["run_rc"] in (0, 1), text[-3000:]
    assert "source.class_coverage" in text and "L00:␛[2J␛[41mred" in text  # label values, shown
    assert "c03:␛]52;c;" in text  # a column name, shown
    assert (hidden(text), leaks(text)) == (0, {})


def test_the_error_line_naming_a_data_file(hostile: dict[str, Any]) -> None:
    text = hostile["error"]
    assert hostile["error_rc"] == 2 and "missing " in text, text[-2000:]
    assert "␛]0;pwned-title\\x07" in text
    assert (hidden(text), leaks(text)) == (0, {})


def test_replay_table_with_a_differs_row(hostile: dict[str, Any]) -> None:
    text = hostile["replay"]
    assert hostile["replay_rc"] == 1, text[-3000:]
    differs = [line for line in text.splitlines() if " differs " in line]
    assert differs and any("c00:␛[2J" in line for line in differs), text[-3000:]
    assert (hidden(text), leaks(text)) == (0, {})


def test_replay_json_is_ascii_and_exact(hostile: dict[str, Any]) -> None:
    text = hostile["json"]
    assert hostile["json_rc"] == 1
    assert text.isascii() and (hidden(text), leaks(text)) == (0, {})
    data = json.loads(text)  # the JSON keeps the exact data, escaped
    keys = [d["key"] for r in data["rows"] for d in r.get("differences", [])]
    assert any(_columns()[0] in k for k in keys)


def test_reports_hold_no_hidden_bytes_and_no_live_markup(hostile: dict[str, Any]) -> None:
    s = hostile["session"]
    assert hostile["report_rc"] == 0 and (hidden(hostile["report"]), leaks(hostile["report"])) == (0, {})
    md = (s / "report.md").read_text(encoding="utf-8")
    html = (s / "report.html").read_text(encoding="utf-8")
    yml = (s / "model-index.yaml").read_text(encoding="utf-8")
    for name, text in (("report.md", md), ("report.html", html), ("model-index.yaml", yml)):
        assert (name, hidden(text), leaks(text)) == (name, 0, {})
    assert "pwned-title" in md and "pwned-title" in html  # the claim text is there, made visible
    # Markdown: no link, image, autolink or HTML formed from data.
    for raw in ("[mdlink](", "![mdimg](", "<script>", "[bold red]boom[/]"):
        assert raw not in md
    assert "!\\[mdimg\\](http" in md
    # Rendered as GitHub-flavoured Markdown (markdown-it with linkify, as Textual ships it): no
    # link, image or HTML element comes from the data, bare URLs and e-mail addresses included.
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("gfm-like", {"linkify": True}).render(md)
    for tag in ("<img", "<script"):
        assert tag not in rendered
    # The only anchors are the report's own section ids and links to them (made from stage names).
    anchors = re.findall(r"<a [^>]*>", rendered)
    assert anchors and all(re.fullmatch(r'<a (id="|href="#)[a-z0-9-]+">', a) for a in anchors), anchors
    assert "see http://evil.example/x or www.evil.example or mail@evil.example" in rendered
    # HTML: markup escaped.
    for raw in ("<script>", "<img src=x", "onerror='"):
        assert raw not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_no_stack_selector_or_live_markup_reaches_a_report_or_the_model_card(hostile: dict[str, Any]) -> None:
    s = hostile["session"]
    texts = {name: (s / name).read_text(encoding="utf-8") for name in ("report.md", "report.html")}
    texts["model card"] = (s / "exports" / "model-card" / "README.md").read_text(encoding="utf-8")
    for name, text in texts.items():
        assert (name, hidden(text), leaks(text), stacks(text)) == (name, 0, {}, {})
        assert "⟨+496 marks⟩" in text and re.search(r"heart\\+ufe0f\\+ufe00", text), name
        assert re.search(r"blank\\+u2800\\+u2800here", text), name
    from markdown_it import MarkdownIt

    for name in ("report.md", "model card"):  # Markdown: the link and the element are escaped
        assert "\\[x\\](javascript" in texts[name] and "\\<details open ontoggle" in texts[name], name
        rendered = MarkdownIt("gfm-like", {"linkify": True}).render(texts[name])
        assert "javascript:alert(1)" in rendered and "&lt;details open ontoggle=alert(1)&gt;" in rendered
        assert "<details" not in rendered and 'href="javascript' not in rendered, name
    assert "&lt;details open ontoggle=alert(1)&gt;" in texts["report.html"]


def test_json_outputs_hold_no_live_markup_and_keep_the_exact_data(hostile: dict[str, Any]) -> None:
    for name in ("json", "coverage_json"):
        text = hostile[name]
        assert text.isascii() and not any(m in text for m in LIVE_MARKUP) and "<" not in text, name
        assert (hidden(text), leaks(text), stacks(text)) == (0, {}, {})
    keys = [d["key"] for r in json.loads(hostile["json"])["rows"] for d in r.get("differences", [])]
    wanted = _columns()[list(PAYLOADS).index("details_ontoggle")]
    assert any(wanted in k for k in keys), keys[:5]


def test_the_exports_print_no_raw_escape(hostile: dict[str, Any]) -> None:
    """Column names with APC / PM / SOS strings (and every other kind) through model-card, croissant
    (mlcroissant's warnings included) and mlflow."""
    for kind, (rc, text) in hostile["exports"].items():
        assert rc == 0, (kind, text[-2000:])
        assert (kind, hidden(text), leaks(text), stacks(text)) == (kind, 0, {}, {})
    assert "mlcroissant warns:" in hostile["exports"]["croissant"][1]
    croissant = (hostile["session"] / "exports" / "croissant" / "croissant.json").read_text(encoding="utf-8")
    names = [f["name"] for f in json.loads(croissant)["recordSet"][0]["field"]]
    assert "c23:␛_apc-payload␛\\" in names and "c25:␛Xsos-payload␛\\" in names


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_any_terminal_encoding_gets_escapes_not_a_crash(hostile: dict[str, Any], encoding: str) -> None:
    """PYTHONIOENCODING=ascii / latin-1: the stand-ins ("␛", "⟨+496 marks⟩") and the data's own
    non-ASCII text are written as backslash escapes."""
    ws = hostile["ws"]
    env = {**_env(), "PYTHONIOENCODING": encoding}
    commands = [["coverage", "s"], ["--replay", "s"]]
    if encoding == "ascii":
        commands.append(["run", "--answers", "answers.toml", "s-ascii"])
    for args in commands:
        out = subprocess.run(
            [sys.executable, "-m", "claimcheck.tui.cli", *args],
            cwd=ws,
            capture_output=True,
            env=env,
            timeout=600,
        )
        text = (out.stdout + out.stderr).decode(encoding)
        assert "UnicodeEncodeError" not in text and "Traceback" not in text, (args, text[-2000:])
        assert out.returncode in (0, 1), (args, out.returncode, text[-2000:])
        assert args[0] == "coverage" or "\\u241b" in text, args  # "␛", escaped for this terminal
        assert (hidden(text, allowed="\n\r"), leaks(text), stacks(text)) == (0, {}, {})


def test_records_keep_the_exact_data(hostile: dict[str, Any]) -> None:
    from claimcheck.engine.ledger.session import Session

    s = Session.open(hostile["session"])
    claim = s.record("claim").inputs
    assert all(claim[f] == SHORT_TEXT for f in TEXT_FIELDS)
    assert claim["class_order"] == _labels()
    assert [n.text for n in s.record("source").notes if n.text.startswith("note ")] == [
        f"note {k}: {p}" for k, p in PAYLOADS.items()
    ]
    assert s.meta.title == "hostile data"


def test_an_answers_file_with_payloads_in_session_is_refused_visibly(tmp_path: Path) -> None:
    """[session] title / id with control characters: refused before anything is written, and the
    one-line error shows them visibly."""
    _write_data(tmp_path / "data.csv")
    answers = _answers("data.csv")
    answers["session"].update(title="title " + SHORT_TEXT, id="id " + SHORT_TEXT)
    (tmp_path / "answers.toml").write_text(dump_toml(answers), encoding="utf-8")
    rc, text = cli_pty(["run", "--answers", "answers.toml", "s"], tmp_path)
    assert rc == 2 and "session.title" in text and not (tmp_path / "s").exists()
    assert (hidden(text), leaks(text)) == (0, {})


# ---------------------------------------------------------------- the TUI, through Pilot


async def test_tui_screens_show_payloads_literally(hostile: dict[str, Any]) -> None:
    from textual.widgets import Input

    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.safe import INPUT_OTHER
    from tests.test_tui_support import screen_text, wait_for

    app = make_app(hostile["session"], workspace=hostile["ws"])
    seen: dict[str, str] = {}

    async with app.run_test(size=(120, 40)) as pilot:

        def ready() -> bool:
            screen = app.screen
            return isinstance(screen, SessionScreen) and screen.view() is not None and screen.view()._ready

        await wait_for(pilot, lambda: ready() and "state:" in screen_text(app), timeout=30)
        seen["title bar"] = screen_text(app)
        await pilot.press("1")  # the claim form
        await wait_for(
            pilot, lambda: app.screen.view("claim") is not None and app.screen.view("claim")._ready
        )
        await pilot.press("f2")
        await pilot.pause()
        inputs = [i for i in app.screen.view("claim").query(Input) if (i.id or "").startswith("f-")]
        assert len(inputs) >= 10
        # Every Input keeps the exact value and draws no hidden character.
        population = next(i for i in inputs if i.id == "f-population")
        assert population.value == SHORT_TEXT
        for widget in inputs:
            for y in range(max(1, widget.size.height)):
                line = "".join(seg.text for seg in widget.render_line(y))
                assert hidden(line, allowed="") == 0, (widget.id, line[:200])
        seen["claim form"] = screen_text(app)
        # The form says which field holds such characters, by name (the glyph ⍰ does not say which).
        problem = str(app.screen.view("claim").query_one(".form-problem").render())
        assert "field 'prediction_unit' holds \\x07 \\x08 \\r ␛" in problem, problem
        assert "(kept as entered)" in problem
        # Pasted text: the value is exactly what was pasted, the screen shows stand-ins.
        population.focus()
        population.value = ""
        await pilot.pause()
        paste = PAYLOADS["osc0_title"] + PAYLOADS["csi_clear_red"] + PAYLOADS["rlo"] + PAYLOADS["rich_markup"]
        population.insert_text_at_cursor(paste)
        await pilot.pause()
        assert population.value == paste
        drawn = "".join(seg.text for seg in population.render_line(0))
        assert "␛]0;pwned-title␇␛[2J␛[41mred" + INPUT_OTHER + "exe.txt[bold red]boom[/]" in drawn
        seen["claim form after paste"] = screen_text(app)

        await pilot.press("ctrl+l", "2")  # the source stage
        await wait_for(
            pilot, lambda: app.screen.view("source") is not None and app.screen.view("source")._ready
        )
        for key, name in (("f2", "source form"), ("f3", "checks"), ("f5", "notes"), ("f6", "data")):
            await pilot.press(key)
            await pilot.pause(0.3)
            seen[name] = screen_text(app)
    report = {name: (hidden(text), leaks(text)) for name, text in seen.items()}
    assert report == {name: (0, {}) for name in seen}, report
    assert "[bold red]boom[/]" in seen["claim form"] or "[bold red]boom[/]" in seen["claim form after paste"]


async def test_literal_input_draws_stand_ins_and_keeps_the_value() -> None:
    from textual.app import App

    from claimcheck.tui.safe import INPUT_OTHER, LiteralInput

    class Host(App):
        def compose(self):
            yield LiteralInput(PAYLOADS["long_line_100k"], id="long")
            yield LiteralInput("", id="typed")

    app = Host()
    async with app.run_test(size=(80, 6)) as pilot:
        long_input = app.query_one("#long", LiteralInput)
        typed = app.query_one("#typed", LiteralInput)
        assert long_input.value == PAYLOADS["long_line_100k"]
        long_input.focus()
        await pilot.press("end")
        await pilot.pause()
        drawn = "".join(seg.text for seg in long_input.render_line(0))
        assert "␛[5mblink" in drawn and hidden(drawn, allowed="") == 0
        typed.focus()
        await pilot.pause()
        pasted = [k for k in PAYLOADS if k != "long_line_100k" and k not in STACKS]  # marks take no cell
        for kind in pasted:
            typed.insert_text_at_cursor(PAYLOADS[kind])  # as a paste does
        await pilot.press(*"ok")
        await pilot.pause()
        expected = "".join(PAYLOADS[k] for k in pasted) + "ok"
        assert typed.value == expected
        # One cell per character: the cursor sits after the last one.
        assert typed.cursor_position == len(expected) and typed._cursor_offset == len(expected) + 1
        for y in range(3):
            line = "".join(seg.text for seg in app.screen._compositor.render_strips()[y])
            assert hidden(line, allowed="") == 0 and not leaks(line)
        drawn = "".join(seg.text for seg in typed.render_line(0))
        assert INPUT_OTHER in drawn or typed.scroll_offset.x > 0


def test_an_unexpected_traceback_is_made_visible(capsys: pytest.CaptureFixture[str]) -> None:
    from claimcheck.tui import cli

    try:
        raise ValueError("column " + PAYLOADS["osc52_clipboard"] + PAYLOADS["rlo"])
    except ValueError as exc:
        cli._safe_excepthook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert "ValueError: column ␛]52;c;cm0gLXJmIH4K\\x07\\u202eexe.txt" in err
    assert (hidden(err), leaks(err)) == (0, {})


async def test_start_screen_lists_and_fields_show_payloads_literally(tmp_path: Path) -> None:
    from claimcheck.engine.ledger.session import Session
    from claimcheck.tui.app import make_app
    from claimcheck.tui.safe import LiteralInput
    from claimcheck.tui.screens import StartScreen
    from tests.test_tui_support import screen_text, wait_for

    Session.create(tmp_path / "runs" / "old", title="title " + SHORT_TEXT, workspace=tmp_path)
    app = make_app(workspace=tmp_path, session_id="new")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StartScreen) and "Reopen" in screen_text(app))
        listed = screen_text(app)
        assert "title csi_clear_red=␛[2J␛[41mred" in listed
        data_file, title = (
            app.screen.query_one("#data-file", LiteralInput),
            app.screen.query_one("#title", LiteralInput),
        )
        data_file.insert_text_at_cursor(PAYLOADS["osc0_title"] + PAYLOADS["c1_csi"] + ".csv")
        title.insert_text_at_cursor(
            PAYLOADS["osc52_clipboard"] + PAYLOADS["rich_markup"] + PAYLOADS["lri_pdi"]
        )
        await pilot.pause()
        typed = screen_text(app)
        assert data_file.value == PAYLOADS["osc0_title"] + PAYLOADS["c1_csi"] + ".csv"
        assert "␛]0;pwned-title␇⍰31mc1red.csv" in typed and "[bold red]boom[/]" in typed
    report = {name: (hidden(text), leaks(text)) for name, text in (("list", listed), ("typed", typed))}
    assert report == {"list": (0, {}), "typed": (0, {})}, report


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("# heading", "\\# heading"),
        ("- item", "\\- item"),
        ("+ item", "\\+ item"),
        ("3. third", "3\\. third"),
    ],
)
def test_data_cannot_open_a_markdown_heading_or_list(text: str, shown: str) -> None:
    """Data that starts a report.md line or list item ("- [fact] # x" is a heading inside the item)."""
    from claimcheck.engine.report.render import md_block

    assert md_block(text) == shown
    assert md_block("-0.6642 and 0.0768") == "-0.6642 and 0.0768"  # numbers stay as they are
