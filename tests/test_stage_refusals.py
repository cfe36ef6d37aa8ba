"""Data that used to crash a later stage gets a failing check that says why (issue 28, section 4).

Each case runs the real CLI (`claimcheck run --answers`) through the baseline stage on a small CSV and
reads the records it wrote: a single class is a failing `split.train_classes` check and the baseline
is not run (one line, no scikit-learn traceback); NaN, inf, 1e999 and 1e308 in a numeric input are
counted per column by `source.non_finite`, refused by default, or left out and counted with
`non_finite = "exclude_rows"`, which the later stages then honour. Labels that differ only by Unicode
normalisation are shown by code points, with the label mapping that records the NFC spelling.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from claimcheck.tui.cli import main
from tests.test_bad_inputs import BASE, ROWS, _csv, set_key

THROUGH_BASELINE = BASE + "\n[baseline]\n"


def _run(ws: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, Path]:
    (ws / "answers.toml").write_text(text, encoding="utf-8")
    session = ws.parent / "session"
    rc = main(["run", "--answers", str(ws / "answers.toml"), str(session)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, out + err
    return rc, out, err, session


def _check(session: Path, stage: str, check_id: str) -> dict:
    index = {"source": 2, "split": 3, "baseline": 4}[stage]
    rec = tomllib.loads((session / f"{index:02d}-{stage}.toml").read_text(encoding="utf-8"))
    return next(c for c in rec["checks"] if c["id"] == check_id)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


def _one_class(ws: Path) -> str:
    (ws / "data.csv").write_text(_csv().replace(",b,", ",a,"), encoding="utf-8")
    return THROUGH_BASELINE


def _mapped_to_one(ws: Path) -> str:
    (ws / "data.csv").write_text(_csv(), encoding="utf-8")
    return set_key(THROUGH_BASELINE, "source", "label_mapping", '{ a = "x", b = "x" }')


def _one_row_repeated(ws: Path) -> str:
    lines = _csv().splitlines()
    body = [lines[0]] + [lines[1].replace("1,", f"{i},", 1) for i in range(ROWS)]
    (ws / "data.csv").write_text("\n".join(body) + "\n", encoding="utf-8")
    return THROUGH_BASELINE


@pytest.mark.parametrize(
    "make",
    [_one_class, _mapped_to_one, _one_row_repeated],
    ids=["one label", "mapped to one", "one row repeated"],
)
def test_a_single_class_fails_the_split_and_the_baseline_is_not_run(ws, make, capsys) -> None:
    rc, out, err, session = _run(ws, make(ws), capsys)
    assert rc == 2
    lines = [line for line in (out + err).splitlines() if "not run —" in line]
    assert len(lines) == 1 and "split.train_classes" in lines[0] and "baseline" in lines[0], out + err
    assert _check(session, "source", "source.class_coverage")["status"] == "fail"
    check = _check(session, "split", "split.train_classes")
    assert check["status"] == "fail" and check["measured"]["train_classes"] == 1
    assert "nothing to learn" in check["summary"]
    assert not (session / "04-baseline.toml").exists()


def _numbers(ws: Path) -> None:
    """`amount` holds NaN, inf and 1e999 (three rows); `scale` holds 1e308 (one more row)."""
    special = {3: ("NaN", "1"), 5: ("inf", "1"), 7: ("1e999", "1"), 9: ("2.5", "1e308")}
    lines = _csv().splitlines()
    out = [lines[0] + ",amount,scale"]
    for i, line in enumerate(lines[1:]):
        amount, scale = special.get(i, (f"{i}.5", "2.0"))
        out.append(f"{line},{amount},{scale}")
    (ws / "data.csv").write_text("\n".join(out) + "\n", encoding="utf-8")


def _numeric_answers(treatment: str = "") -> str:
    text = set_key(THROUGH_BASELINE, "source", "input_columns", '["text", "amount", "scale"]')
    return set_key(text, "source", "non_finite", f'"{treatment}"') if treatment else text


def test_non_finite_numbers_are_counted_per_column_and_refused_by_default(ws, capsys) -> None:
    _numbers(ws)
    rc, out, err, session = _run(ws, _numeric_answers(), capsys)
    assert rc == 2
    check = _check(session, "source", "source.non_finite")
    assert check["status"] == "fail" and check["measured"]["treatment"] == "refuse"
    assert check["measured"]["by_column"] == {
        "amount": {"nan": 1, "inf": 2, "too_large": 0},
        "scale": {"nan": 0, "inf": 0, "too_large": 1},
    }
    assert check["measured"]["rows"] == 4
    assert "exclude_rows" in check["summary"]
    said = [line for line in (out + err).splitlines() if "not run —" in line]
    assert len(said) == 1 and "source.non_finite" in said[0]
    assert not (session / "03-split.toml").exists()


def test_excluded_non_finite_rows_are_counted_and_left_out_downstream(ws, capsys) -> None:
    _numbers(ws)
    rc, out, err, session = _run(ws, _numeric_answers("exclude_rows"), capsys)
    assert rc in (0, 1), out + err
    check = _check(session, "source", "source.non_finite")
    assert check["status"] == "warn" and check["measured"]["rows"] == 4
    steps = _check(session, "source", "source.transformations")["measured"]["steps"]
    assert [s["removed"] for s in steps if "non_finite" in s["reason"]] == [4]
    assert _check(session, "split", "split.membership")["measured"]["rows"] == ROWS - 4
    assert (session / "04-baseline.toml").is_file()


NFC, NFD = "\u00e9", "e\u0301"


def test_labels_differing_only_by_normalisation_show_code_points_and_the_mapping(ws, capsys) -> None:
    (ws / "data.csv").write_text(_csv().replace(",a,", f",{NFD},"), encoding="utf-8")
    claim_only = BASE.split("[split]")[0]
    text = set_key(claim_only, "claim", "class_order", f'["{NFC}", "b"]')
    rc, out, err, session = _run(ws, text, capsys)
    check = _check(session, "source", "source.class_order")
    assert check["status"] == "fail" and check["measured"]["unicode_twins"] == {NFD: NFC}
    assert "U+0065 U+0301" in check["summary"] and "U+00E9" in check["summary"]
    mapping = check["summary"].split("label_mapping = ", 1)[1]
    # The offered mapping, recorded as it is offered, makes the labels match the class order.
    fixed = set_key(text, "source", "label_mapping", mapping)
    rc, out, err, again = _run(ws, fixed, capsys)
    assert _check(again, "source", "source.class_order")["status"] == "pass", out + err
    assert _check(again, "source", "source.transformations")["measured"]["label_mapping"] == {
        NFD: NFC,
        "b": "b",
    }


def _refused_numbers(ws: Path) -> str:
    _numbers(ws)
    return _numeric_answers()


# (name, setup writing data.csv and returning the answers, the failing check that stops the run), for
# bench/bad_inputs.py.
BENCH_CASES = [
    ("one label", _one_class, "split.train_classes"),
    ("label_mapping to one class", _mapped_to_one, "split.train_classes"),
    ("one row repeated", _one_row_repeated, "split.train_classes"),
    ("NaN, inf, 1e999, 1e308 in numeric inputs", _refused_numbers, "source.non_finite"),
]


def test_nfc_twins_are_found_against_the_class_order_spelling_either_way() -> None:
    from claimcheck.engine.stats.names import code_points, nfc_twins

    assert nfc_twins([NFD, "b"], [NFC, "b"]) == {NFD: NFC}
    assert nfc_twins([NFC], [NFD]) == {NFC: NFD}
    assert nfc_twins(["e", "b"], [NFC, "b"]) == {}
    assert code_points(NFD) == "U+0065 U+0301" and code_points(NFC) == "U+00E9"
