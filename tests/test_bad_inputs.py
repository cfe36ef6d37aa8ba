"""Bad input gives a clear error before anything is written (issue 14, section 2).

Each case of the table feeds `claimcheck run --answers` one bad input — an answers file, a data file,
a model folder or a session folder — and asserts: exit code 2, one line on stderr that names the file
and the field, no traceback, and no session folder (or no new file in an existing one). Every case is
refused before a stage runs, so the table needs no training and no audit.
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from claimcheck.tui.cli import main

ROWS = 40
BASE = """[session]
workspace = "."

[claim]
task_kind = "text_classification"
prediction_unit = "one row"
target_meaning = "the label"
target_kind = "recorded_workflow_label"
population = "all rows"
primary_metric = "accuracy"
run_scope = "bad-input table"

[claim.success]
metric = "accuracy"
op = ">="
value = 0.5

[source]
files = ["data.csv"]
label_column = "label"
input_columns = ["text"]
text_columns = ["text"]
id_column = "id"

[split]
strategy = "random"
seed = 0
"""
LATER = ("baseline", "contract", "dispatch", "artifact")


def _csv(rows: int = ROWS) -> str:
    lines = ["id,text,label,grp"]
    lines += [
        f"{i},ticket number {i} says {'yes' if i % 2 else 'no'},{'a' if i % 2 else 'b'},g{i % 7}"
        for i in range(rows)
    ]
    return "\n".join(lines) + "\n"


def set_key(text: str, table: str, key: str, raw: str) -> str:
    """Set `key = raw` in [table] (added at the end when missing); raw is TOML as written."""
    head = f"[{table}]\n"
    if head not in text:
        text = text.rstrip("\n") + f"\n\n{head}"
    start = text.index(head) + len(head)
    nxt = re.search(r"^\[", text[start:], flags=re.M)
    end = start + nxt.start() if nxt else len(text)
    body = re.sub(rf"^{re.escape(key)} = .*\n", "", text[start:end], flags=re.M)
    return text[:start] + f"{key} = {raw}\n" + body + text[end:]


def later(text: str, upto: str) -> str:
    """Add empty tables for the stages after split, up to and including `upto`."""
    for name in LATER[: LATER.index(upto) + 1]:
        if f"[{name}]\n" not in text:
            text = text.rstrip("\n") + f"\n\n[{name}]\n"
    return text


@dataclass
class Case:
    name: str
    setup: Callable[[Path], str | bytes | None]  # writes extra files in the workspace; returns answers
    expect: tuple[str, ...]  # substrings of the one-line message (besides the answers file name)
    answers_name: str = "answers.toml"


def k(table: str, key: str, raw: str, *expect: str) -> Case:
    """A case that sets one answers field; the message must name `table.key` (or what is given)."""
    stage = table.split(".")[0]

    def setup(ws: Path) -> str:
        text = BASE if stage not in LATER else later(BASE, stage)
        return set_key(text, table, key, raw)

    return Case(f"{table}.{key}={raw}"[:60], setup, expect or (f"{table}.{key}",))


def text(name: str, body: str | bytes, *expect: str) -> Case:
    return Case(name, lambda ws: body, expect)


def data(
    name: str, file: str, content: str | bytes | Callable[[Path], None], *expect: str, files: str = ""
) -> Case:
    """A case that writes a data file into the workspace and points [source].files at it."""

    def setup(ws: Path) -> str:
        if callable(content):
            content(ws)
        elif isinstance(content, bytes):
            (ws / file).write_bytes(content)
        else:
            (ws / file).write_text(content, encoding="utf-8")
        return set_key(BASE, "source", "files", files or f'["{file}"]')

    return Case(name, setup, ("source.files", *expect))


def src(key: str, raw: str, *expect: str) -> Case:
    return k("source", key, raw, *expect)


def _outside(ws: Path) -> Path:
    out = ws.parent / "outside.csv"
    out.write_text(_csv(), encoding="utf-8")
    return out


def _symlink_to(target: Callable[[Path], Path], name: str) -> Callable[[Path], None]:
    def make(ws: Path) -> None:
        (ws / name).symlink_to(target(ws))

    return make


def _linked_dir(ws: Path) -> None:
    outside = ws.parent / "elsewhere"
    outside.mkdir()
    (outside / "d.csv").write_text(_csv(), encoding="utf-8")
    (ws / "link").symlink_to(outside)


def _model(files: dict[str, bytes]) -> Callable[[Path], str]:
    def setup(ws: Path) -> str:
        folder = ws / "model"
        folder.mkdir()
        for name, content in files.items():
            (folder / name).write_bytes(content)
        return set_key(later(BASE, "contract"), "contract", "model_path", '"model"')

    return setup


def _model_elsewhere(ws: Path) -> str:
    """A complete model folder next to the workspace, named by a relative path that leaves it."""
    folder = ws.parent / "outmodel"
    folder.mkdir()
    (folder / "config.json").write_bytes(b"{}")
    (folder / "model.safetensors").write_bytes(b"x")
    return set_key(later(BASE, "contract"), "contract", "model_path", '"../outmodel"')


def _model_folder_linked_out(ws: Path) -> str:
    """model_path names a folder inside the workspace that is a symlink to a folder outside it."""
    _model_elsewhere(ws)
    (ws / "model").symlink_to(ws.parent / "outmodel")
    return set_key(later(BASE, "contract"), "contract", "model_path", '"model"')


def _absolute_model_with_pickle(ws: Path) -> str:
    """An absolute model path (not bound to the workspace) is still refused for a pickled file."""
    _model_elsewhere(ws)
    (ws.parent / "outmodel" / "training_args.bin").write_bytes(b"\x80\x04N.")
    return set_key(later(BASE, "contract"), "contract", "model_path", f'"{ws.parent / "outmodel"}"')


def _weights_linked_out(ws: Path) -> str:
    """A model folder inside the workspace whose weights file is a symlink to a file outside it."""
    (ws.parent / "weights.safetensors").write_bytes(b"x")
    text = _model({"config.json": b"{}"})(ws)
    (ws / "model" / "model.safetensors").symlink_to(ws.parent / "weights.safetensors")
    return text


def _same_file_linked(ws: Path) -> None:
    (ws / "same.csv").symlink_to(ws / "data.csv")


def _nested(depth: int) -> str:
    return set_key(BASE, "claim", "population", "[" * depth + "]" * depth)


def _jsonl(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


GOOD_JSONL = [f'{{"id": {i}, "text": "t {i}", "label": "{"ab"[i % 2]}"}}' for i in range(ROWS)]
WIDE = (
    ",".join(["id", "text", "label", *(f"c{i}" for i in range(998))])
    + "\n"
    + "".join(",".join([str(r), "t", "a", *("1" * 998)]) + "\n" for r in range(5))
)
NUL_LINE = _csv().replace("ticket number 3 says", "ticket\0number 3 says").encode()

CASES: list[Case] = [
    # ---------------------------------------------------------------- the answers file itself
    text("empty answers file", "", "(file)", "[claim]"),
    text("comments only", "# nothing here\n", "(file)", "[claim]"),
    text("session table only", '[session]\ntitle = "x"\n', "(file)", "[claim]"),
    text("binary answers file", b"\x00\x01\xff\xfe[claim]", "(file)", "UTF-8"),
    text("latin-1 answers file", '[claim]\npopulation = "caf\xe9"\n'.encode("latin-1"), "(file)", "UTF-8"),
    text("syntax error", "[claim\n", "(syntax)"),
    text("duplicate key", '[claim]\npopulation = "a"\npopulation = "b"\n', "(syntax)"),
    text("unknown table", BASE + "\n[trainer]\nx = 1\n", "trainer"),
    text("stage not a table", "claim = 3\n", "claim"),
    text(
        "baseline without split",
        BASE.replace("[split]", "[baseline]").replace('strategy = "random"\nseed = 0\n', ""),
        "baseline",
        "split",
    ),
    text("split without source", BASE[: BASE.index("[source]")] + '[split]\nstrategy = "random"\n', "split"),
    text("source without claim", BASE[BASE.index("[source]") :], "source"),
    text("notes not an array", BASE.replace("[session]\n", 'notes = "x"\n[session]\n'), "notes"),
    text(
        "note on an unanswered stage",
        BASE + '\n[[notes]]\nstage = "artifact"\ntag = "fact"\ntext = "x"\n',
        "notes[0].stage",
    ),
    text(
        "note with an unknown tag",
        BASE + '\n[[notes]]\nstage = "claim"\ntag = "hunch"\ntext = "x"\n',
        "notes[0].tag",
    ),
    text(
        "note with empty text",
        BASE + '\n[[notes]]\nstage = "claim"\ntag = "fact"\ntext = ""\n',
        "notes[0].text",
    ),
    k("session", "colour", '"red"'),
    k("session", "stop_on_fail", '"yes"'),
    k("session", "stop_on_fail", "1"),
    k("session", "id", '"../../evil"'),
    k("session", "id", '"ok\\u001b[31mred"'),
    k("session", "id", '"a/b"'),
    k("session", "id", '"' + "x" * 200 + '"'),
    k("session", "title", '"clear\\u001b[2Jscreen"'),
    k("session", "title", '"nul\\u0000byte"'),
    k("session", "workspace", '"no-such-folder"'),
    k("session", "workspace", '"data.csv"'),
    # ---------------------------------------------------------------- claim
    k("claim.success", "value", "nan"),
    k("claim.success", "value", "inf"),
    k("claim.success", "value", "-inf"),
    k("claim.success", "value", "1e400"),
    k("claim.success", "value", "1e300"),
    k("claim.success", "op", '"=="'),
    k("claim", "task_kind", '"regression"'),
    k("claim", "fine_tuning", '"yes"'),
    k("claim", "comparators", '"all"'),
    k("claim", "class_order", "[1, 2]", "claim.class_order[0]"),
    k("claim", "populaton", '"typo"'),
    # ---------------------------------------------------------------- source: fields
    src("files", "[]"),
    src("files", '"data.csv"'),
    src("files", '[""]'),
    src("files", '["data.csv", "data.csv"]'),
    src("label_column", '""'),
    src("input_columns", '["text", "label"]', "source.input_columns", "label column"),
    src("text_columns", '["grp"]', "source.text_columns"),
    src("availability", '{ grp = "yes" }', "source.availability"),
    src("availability", '{ text = "maybe" }', "source.availability.text"),
    src("filters", "[{ where = \"grp = 'g1'\" }]", "source.filters", "reason"),
    src("preview_rows", "-1"),
    src("preview_rows", "9223372036854775807"),
    src("near_dup_threshold", "nan"),
    src("near_dup_threshold", "1.5"),
    src("shingle_size", "0"),
    src("as_of", '"yesterday"'),
    src("normalisation", '"upper"'),
    src("allow_outside_workspace", '"yes"'),
    src("filters", '[{ reason = "bad sql", where = "text ==== 1" }]', "source.filters"),
    src("filters", '[{ reason = "no such column", where = "nosuch > 1" }]', "source.filters"),
    # ---------------------------------------------------------------- source: data files
    data("missing file", "x", "", "nope.csv", "not found", files='["nope.csv"]'),
    data(
        "parent folder path",
        "x",
        lambda ws: _outside(ws),
        "outside the workspace",
        files='["../outside.csv"]',
    ),
    data(
        "deep parent path",
        "x",
        lambda ws: _outside(ws.parent),
        "outside the workspace",
        files='["../../outside.csv"]',
    ),
    data("absolute /etc/passwd", "x", lambda ws: None, "outside the workspace", files='["/etc/passwd"]'),
    data("absolute path outside", "x", lambda ws: _outside(ws), "outside the workspace", files=""),
    data(
        "symlink to /etc/passwd", "pw.csv", _symlink_to(lambda ws: Path("/etc/passwd"), "pw.csv"), "symlink"
    ),
    data("symlink to an outside csv", "ln.csv", _symlink_to(_outside, "ln.csv"), "symlink"),
    data("folder symlink outside", "x", _linked_dir, "outside the workspace", files='["link/d.csv"]'),
    data(
        "glob brackets", "x", lambda ws: (ws / "ab.csv").write_text(_csv()), "a[b].csv", files='["a[b].csv"]'
    ),
    data("glob star", "x", lambda ws: None, "not found", files='["*.csv"]'),
    data("spreadsheet suffix", "data.xlsx", _csv(), "unsupported file type"),
    data("no suffix", "datafile", _csv(), "unsupported file type"),
    data("empty data file", "empty.csv", "", "empty"),
    data("folder named .csv", "dir.csv", lambda ws: (ws / "dir.csv").mkdir(), "not found"),
    data("binary named .csv", "bin.csv", bytes(range(256)) * 64, "NUL"),
    data("NUL byte in a row", "nul.csv", NUL_LINE, "line 5", "NUL"),
    data("UTF-16 csv", "u16.csv", _csv().encode("utf-16"), "NUL"),
    data("gzip named .csv", "gz.csv", gzip.compress(_csv().encode()), "gz.csv"),
    data("NUL in a tsv", "nul.tsv", NUL_LINE.replace(b",", b"\t"), "NUL"),
    data(
        "NUL in jsonl",
        "nul.jsonl",
        _jsonl(GOOD_JSONL).replace('"t 2"', '"t\\u0000"').replace("\\u0000", "\0").encode(),
        "NUL",
    ),
    data(
        "duplicate header",
        "dup.csv",
        _csv().replace("id,text,label,grp", "id,text,label,text"),
        "more than once",
    ),
    data("header only", "head.csv", "id,text,label,grp\n", "no rows"),
    data("label column missing", "nolab.csv", _csv().replace(",label,", ",queue,"), "label"),
    data("input column missing", "notext.csv", _csv().replace(",text,", ",body,"), "text"),
    data("reserved column name", "res.csv", _csv().replace(",grp", ",row_id"), "reserves"),
    data("jsonl line not an object", "bad.jsonl", _jsonl([*GOOD_JSONL, "[1, 2]"]), "not JSON objects"),
    data("jsonl garbage line", "bad2.jsonl", _jsonl([*GOOD_JSONL, "{oops"]), "not JSON objects"),
    data(
        "jsonl nested label",
        "nest.jsonl",
        _jsonl([f'{{"id": {i}, "text": "t", "label": ["a"]}}' for i in range(ROWS)]),
        "label",
    ),
    data("parquet that is text", "fake.parquet", _csv(), "cannot be read"),
    data(
        "jsonl nested extra column",
        "nest2.jsonl",
        _jsonl([f'{{"id": {i}, "text": "t", "label": "a", "meta": {{"k": [1]}}}}' for i in range(ROWS)]),
        "meta",
        "nested",
    ),
    data(
        "jsonl nested list column",
        "nest3.jsonl",
        _jsonl([f'{{"id": {i}, "text": "t", "label": "a", "tags": ["x"]}}' for i in range(ROWS)]),
        "tags",
        "nested",
    ),
    data("too many columns", "wide.csv", WIDE, "1,001 columns", "1,000"),
    # ---------------------------------------------------------------- split
    k("split.fractions", "train", "nan", "split.fractions.train"),
    k("split.fractions", "train", "inf", "split.fractions.train"),
    k("split", "fractions", "{ train = 0.5, test = 0.4 }", "split.fractions", "add up"),
    k("split", "fractions", "{ train = 1.2, test = -0.2 }", "split.fractions", ">= 0"),
    k("split", "fractions", "{ train = 0.7, holdout = 0.3 }", "split.fractions", "holdout"),
    k("split", "fractions", "{ train = 0.0, test = 1.0 }", "split.fractions", "train"),
    k("split", "fractions", "{ train = 1.0, test = 0.0 }", "split.fractions", "test"),
    k("split", "seed", "-1"),
    k("split", "seed", "18446744073709551616"),
    k("split", "seed", "4294967296"),
    k("split", "seed", "1.5"),
    k("split", "gap_days", "inf"),
    k("split", "gap_days", "nan"),
    k("split", "gap_days", "1e9"),
    k("split", "k", "1"),
    k("split", "k", "1000"),
    k("split", "time_cuts", '["2024-06-01", "2024-01-01"]', "split.time_cuts", "ascending"),
    k("split", "time_cuts", '["soon"]', "split.time_cuts", "soon"),
    k("split", "strategy", '"magic"'),
    k("split", "class_support_floor", "-1"),
    k("split", "near_dup_threshold", "0"),
    # ---------------------------------------------------------------- baseline
    k("baseline", "seed", "-1"),
    k("baseline", "bootstrap_seed", "1099511627776"),
    k("baseline", "bootstrap_resamples", "9223372036854775807"),
    k("baseline", "bootstrap_resamples", "99"),
    k("baseline", "C", "nan"),
    k("baseline", "C", "inf"),
    k("baseline", "C", "0"),
    k("baseline", "C_grid", "[nan]", "baseline.C_grid[0]"),
    k("baseline", "C_grid", "[-1.0]", "baseline.C_grid[0]"),
    k("baseline", "ngram_max", "4"),
    k("baseline", "cv_folds", "1"),
    k("baseline", "cv_folds", "1000000"),
    k("baseline", "max_iter", "1000000000000"),
    k("baseline", "ece_bins", "1"),
    k("baseline", "hgb_max_iter", "1000000000"),
    k("baseline", "calibration", '"magic"'),
    k("baseline.operating_point", "target", "nan"),
    k("baseline.operating_point", "target", "1.5"),
    k("baseline.operating_point", "cost_fp", "-1.0"),
    k("baseline.operating_point", "cost_fn", "inf"),
    # ---------------------------------------------------------------- contract
    k("contract.optimizer", "lr", "nan"),
    k("contract.optimizer", "lr", "inf"),
    k("contract.lora", "r", "0"),
    k("contract.lora", "dropout", "1.0"),
    k("contract", "micro_batch", "0"),
    k("contract", "micro_batch", "1000000000000"),
    k("contract", "max_length", "4"),
    k("contract", "epochs", "1000000000"),
    k("contract", "seed", "-1"),
    k("contract.schedule", "warmup_ratio", "nan"),
    k("contract.alarms", "divergence_factor", "nan"),
    k("contract.alarms", "collapse_share", "2.0"),
    k("contract", "target_device_memory_gb", "inf"),
    k("contract", "packing", '"yes"'),
    k("contract.fit_check", "rows", "1000000000000"),
    Case(
        "pickled model weights",
        _model({"config.json": b"{}", "pytorch_model.bin": b"\x80\x04N."}),
        ("contract.model_path", "pytorch_model.bin", "safetensors"),
    ),
    Case(
        "model folder without config",
        _model({"model.safetensors": b"x"}),
        ("contract.model_path", "config.json"),
    ),
    k("contract", "model_path", '"no-such-model"', "contract.model_path", "does not exist"),
    k("contract", "model_path", '""', "contract.model_path", "empty"),
    # ---------------------------------------------------------------- dispatch
    k("dispatch", "poll_seconds", "nan"),
    k("dispatch", "poll_seconds", "0"),
    k("dispatch", "wait_timeout_seconds", "inf"),
    k("dispatch", "attempt", "0"),
    k("dispatch", "provider", '"slurm"'),
    k("dispatch", "wait", '"yes"'),
    # ---------------------------------------------------------------- artifact
    k("artifact", "bootstrap_resamples", "9223372036854775807"),
    k("artifact", "seed", "-1"),
    k("artifact", "comparators", '["oracle"]', "artifact.comparators", "oracle"),
    k("artifact", "parity_tolerance", "nan"),
    k("artifact", "latency_examples", "0"),
    k("artifact", "reliability_bins", "1"),
    # ---------------------------------------------------------------- issue 28: filters (section 1)
    *[
        src("filters", f'[{{ reason = "peek", where = "{w}" }}]', "source.filters", why)
        for w, why in (
            ("id IN (SELECT id FROM read_csv('../secret.csv'))", "subquery"),
            ("read_csv('../secret.csv') IS NULL", "table function 'read_csv'"),
            ("read_parquet('/no/such/file') IS NULL", "table function 'read_parquet'"),
            ("read_json('../secret.csv') IS NULL", "table function 'read_json'"),
            ("read_ipc('../secret.csv') IS NULL", "table function 'read_ipc'"),
            ("read_ndjson('../secret.csv') IS NULL", "table function 'read_ndjson'"),
            ("id = (SELECT 1)", "subquery"),
            ("id > 1 UNION SELECT 1", "subquery"),
            ("EXISTS (SELECT 1)", "subquery"),
            ("id; DROP TABLE x", "';'"),
            ("grp = 1", "compares column 'grp'"),
            ("eval(text)", "function 'eval'"),
        )
    ],
    # ---------------------------------------------------------------- issue 28: earlier checks (section 6)
    src("files", '["data.csv", "./data.csv"]', "source.files", "./data.csv"),
    data("same file through a symlink", "x", _same_file_linked, "twice", files='["data.csv", "same.csv"]'),
    k("split", "fractions", "{ train = 0.7, test = 0.300001 }", "split.fractions", "1.000001"),
    k("split", "fractions", "{ train = 0.7, test = 0.299999 }", "split.fractions", "0.999999"),
    k("split", "seed", "1.0"),
    k("baseline", "seed", "1.0"),
    k("baseline", "bootstrap_seed", "2.0"),
    k("contract", "seed", "1.0"),
    k("artifact", "seed", "1.0"),
    k("claim", "class_order", '["a", "b", "a"]', "claim.class_order", "twice"),
    k("claim", "class_order", '["\u00e9", "e\u0301"]', "claim.class_order", "U+00E9", "U+0065 U+0301"),
    src("id_column", '"label"', "source.id_column", "label column"),
    src("entity_columns", '["grp", "label"]', "source.entity_columns", "label column"),
    src("non_finite", '"drop"', "source.non_finite"),
    Case(
        "model folder without weights",
        _model({"config.json": b"{}"}),
        ("contract.model_path", "no *.safetensors"),
    ),
    Case(
        "model folder outside the workspace",
        _model_elsewhere,
        ("contract.model_path", "outside the workspace"),
    ),
    Case("model weights symlinked out", _weights_linked_out, ("contract.model_path", "symlink")),
    Case(
        "model folder symlinked out",
        _model_folder_linked_out,
        ("contract.model_path", "outside the workspace"),
    ),
    Case(
        "absolute model path with a pickle", _absolute_model_with_pickle, ("contract.model_path", "pickled")
    ),
    Case(
        "pickle beside safetensors",
        _model({"config.json": b"{}", "model.safetensors": b"x", "optimizer.pt": b"\x80\x04N."}),
        ("contract.model_path", "optimizer.pt", "pickled"),
    ),
    Case("claim field nested 100,000 deep", lambda ws: _nested(100_000), ("(file)", "nests")),
    Case("claim field nested 17 deep", lambda ws: _nested(17), ("claim.population", "nests")),
    text(
        "table header 100,000 keys deep",
        BASE + "\n[claim." + ".".join(["x"] * 100_000) + "]\ny = 1\n",
        "line",
        "nests",
    ),
]


def _absolute_outside(case: Case) -> Case:
    def setup(ws: Path) -> str:
        return set_key(BASE, "source", "files", f'["{_outside(ws)}"]')

    return Case(case.name, setup, case.expect)


CASES = [_absolute_outside(c) if c.name == "absolute path outside" else c for c in CASES]


def _snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


def _one_clear_line(err: str, expect: tuple[str, ...]) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith("claimcheck"), line
    for part in expect:
        assert part in line, f"{part!r} not in {line!r}"
    return line


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "top" / "ws"
    ws.mkdir(parents=True)
    (ws / "data.csv").write_text(_csv(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return ws


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 90
    assert len({c.name for c in CASES}) == len(CASES), "case names must be unique"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_clear_line_and_writes_nothing(
    case: Case, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answers = workspace / case.answers_name
    content = case.setup(workspace)
    if isinstance(content, bytes):
        answers.write_bytes(content)
    else:
        answers.write_text(content, encoding="utf-8")
    before = _snapshot(workspace.parent)
    session = workspace.parent / "session"
    rc = main(["run", "--answers", str(answers), str(session)])
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    _one_clear_line(err, (case.answers_name, *case.expect))
    assert not session.exists()
    assert _snapshot(workspace.parent) == before


# ---------------------------------------------------------------- session folders


def _good_answers(ws: Path) -> Path:
    path = ws / "answers.toml"
    path.write_text(BASE.split("[source]")[0], encoding="utf-8")  # the claim stage only: fast
    return path


SESSION_CASES: list[tuple[str, Callable[[Path], Path], str]] = [
    ("another session's id", lambda root: _existing_session(root, 'id = "someone-else"'), "holds session"),
    ("a folder with files", lambda root: _folder_with(root, "notes.txt"), "already"),
    ("a file", lambda root: _file(root / "sess"), "already"),
    ("under a file", lambda root: _file(root / "f") / "sess", "is a file"),
]


def _file(path: Path) -> Path:
    path.write_text("x")
    return path


def _folder_with(root: Path, name: str) -> Path:
    (root / "sess").mkdir()
    (root / "sess" / name).write_text("mine")
    return root / "sess"


def _existing_session(root: Path, session_line: str = "") -> Path:
    """A session made by an answers run; with `session_line`, made under other [session] options (the
    test's own answers then disagree with it)."""
    ws = root / "ws"
    answers = _good_answers(ws)
    if session_line:
        answers = ws / "other.toml"
        text = _good_answers(ws).read_text().replace("[session]\n", f"[session]\n{session_line}\n", 1)
        answers.write_text(text, encoding="utf-8")
    assert main(["run", "--answers", str(answers), str(root / "sess")]) in (0, 1)
    return root / "sess"


def test_rerunning_the_same_answers_continues_and_changes_nothing(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace.parent
    target = _existing_session(root)
    record = (target / "01-claim.toml").read_bytes()
    before = _snapshot(root)
    rc = main(["run", "--answers", str(_good_answers(workspace)), str(target)])
    out, _ = capsys.readouterr()
    assert rc in (0, 1) and "kept frozen revision 1" in out
    assert _snapshot(root) == before and (target / "01-claim.toml").read_bytes() == record


@pytest.mark.parametrize("name,make,expect", SESSION_CASES, ids=[c[0] for c in SESSION_CASES])
def test_bad_session_folder_is_refused_untouched(
    name: str, make, expect: str, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = workspace.parent
    target = make(root)
    answers = _good_answers(workspace)
    capsys.readouterr()
    before = _snapshot(root)
    rc = main(["run", "--answers", str(answers), str(target)])
    _, err = capsys.readouterr()
    assert rc == 2
    _one_clear_line(err, ("sess", expect))
    assert _snapshot(root) == before


REPLAY_CASES: list[tuple[str, Callable[[Path], Path]]] = [
    ("no such folder", lambda root: root / "missing"),
    ("folder without session.toml", lambda root: _folder_with(root, "notes.txt")),
    ("garbage session.toml", lambda root: _folder_with(root, "session.toml").parent / "sess"),
    ("binary session.toml", lambda root: _binary_session(root)),
]


def _binary_session(root: Path) -> Path:
    (root / "sess").mkdir()
    (root / "sess" / "session.toml").write_bytes(b"\x00\xff\xfe")
    return root / "sess"


@pytest.mark.parametrize("name,make", REPLAY_CASES, ids=[c[0] for c in REPLAY_CASES])
def test_replay_of_unusable_input_says_so_on_stderr(
    name: str, make, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = make(workspace.parent)
    before = _snapshot(workspace.parent)
    rc = main(["--replay", str(target)])
    out, err = capsys.readouterr()
    assert rc == 2
    assert out == ""
    _one_clear_line(err, ("sess" if "missing" not in str(target) else "missing",))
    assert _snapshot(workspace.parent) == before


# ---------------------------------------------------------------- inputs that now work as documented


def _source_only(ws: Path, files: str, extra: str = "") -> Path:
    path = ws / "answers.toml"
    text = set_key(BASE.split("[split]")[0], "source", "files", files) + extra
    path.write_text(text, encoding="utf-8")
    return path


def _recorded_rows(session: Path) -> int:
    import tomllib

    rec = tomllib.loads((session / "02-source.toml").read_text())
    check = next(c for c in rec["checks"] if c["id"] == "source.transformations")
    return int(check["measured"]["rows_read"])


def test_a_path_is_a_path_not_a_glob(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workspace / "a[b].csv").write_text(_csv(12), encoding="utf-8")
    (workspace / "ab.csv").write_text(_csv(30), encoding="utf-8")
    session = workspace.parent / "s"
    rc = main(["run", "--answers", str(_source_only(workspace, '["a[b].csv"]')), str(session)])
    assert rc in (0, 1), capsys.readouterr()
    assert _recorded_rows(session) == 12  # the rows of the file hashed, not of ab.csv


def test_a_10_mb_field_is_read(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = _csv().splitlines()
    body[3] = f'2,"{"x" * (10 << 20)}",b,g2'
    (workspace / "big.csv").write_text("\n".join(body) + "\n", encoding="utf-8")
    session = workspace.parent / "s"
    rc = main(["run", "--answers", str(_source_only(workspace, '["big.csv"]')), str(session)])
    _, err = capsys.readouterr()
    assert rc in (0, 1) and "Traceback" not in err, err
    assert _recorded_rows(session) == ROWS


def test_outside_the_workspace_when_allowed_and_recorded(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tomllib

    _outside(workspace)
    session = workspace.parent / "s"
    answers = _source_only(workspace, '["../outside.csv"]', "allow_outside_workspace = true\n")
    rc = main(["run", "--answers", str(answers), str(session)])
    assert rc in (0, 1), capsys.readouterr()
    rec = tomllib.loads((session / "02-source.toml").read_text())
    assert rec["inputs"]["allow_outside_workspace"] is True


def test_source_stage_refuses_outside_paths_itself(tmp_path: Path) -> None:
    """The TUI path (no answers file): the stage applies the same workspace rule."""
    from claimcheck.engine.pipeline.context import StageContext, StageInputError
    from claimcheck.engine.stages.source import run as source

    ws = tmp_path / "ws"
    ws.mkdir()
    _outside(ws)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=ws)
    inputs = source.Inputs(files=["../outside.csv"], label_column="label", input_columns=["text"])
    with pytest.raises(StageInputError, match="outside the workspace"):
        source.run(inputs, {}, ctx)


@pytest.mark.parametrize(
    "content",
    [
        bytes(range(256)) * 64,
        b'id,text,label\r\n1,"a\rb"x\r\n\x81\x82,\rz"\r',
        _csv().replace("ticket", "tic\0ket").encode(),
    ],
    ids=["binary", "stray carriage returns", "NUL bytes"],
)
def test_source_stage_gives_a_clear_error_on_unreadable_csv(tmp_path: Path, content: bytes) -> None:
    """The TUI path: the source stage itself says what is wrong, never a csv.Error traceback."""
    from claimcheck.engine.pipeline.context import StageContext, StageInputError
    from claimcheck.engine.stages.source import run as source

    (tmp_path / "d.csv").write_bytes(content)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    inputs = source.Inputs(files=["d.csv"], label_column="label", input_columns=["text"])
    try:
        source.run(inputs, {}, ctx)
    except StageInputError as exc:
        assert "d.csv" in str(exc) and "\n" not in str(exc)
    else:  # read as text: then the record must say what was altered, which the schema check does
        pass


def test_seed_bounds_keep_records_valid_toml() -> None:
    from pydantic import ValidationError

    from claimcheck.engine.stages.baseline import run as baseline
    from claimcheck.engine.stages.split import run as split

    for module in (split, baseline):
        module.Inputs(seed=2**32 - 1)
        with pytest.raises(ValidationError):
            module.Inputs(seed=2**32)


def test_defaults_still_validate() -> None:
    from claimcheck.engine.pipeline import registry

    for spec in registry.STAGES:
        model = spec.module().Inputs
        defaults = model()
        # the defaults survive their own round trip through the recorded form
        assert model.model_validate(defaults.model_dump(mode="json")) == defaults, spec.name


if os.name != "posix":  # symlink cases need POSIX
    CASES = [c for c in CASES if "symlink" not in c.name]
