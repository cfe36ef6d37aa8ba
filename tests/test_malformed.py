"""A malformed or unknown-version record gives one clear error naming the file, field and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.evidence import EvidenceError, load_record, load_session_meta
from claimcheck.engine.ledger.session import Session
from claimcheck.tui.cli import main

GOOD_RECORD = """stage = "claim"
[inputs]
prediction_unit = "ticket"
[[checks]]
id = "claim.completeness"
status = "pass"
summary = "ok"
[provenance]
schema_version = 1
revision = 1
"""

RECORD_CASES = [
    # (name, content, field expected in the message)
    ("empty file", "", "stage"),
    ("syntax error", 'stage = "claim"\n[inputs\n', "(syntax)"),
    ("unterminated string", 'stage = "claim\n', "(syntax)"),
    ("duplicate key", 'stage = "claim"\nstage = "x"\n', "(syntax)"),
    ("unknown top-level field", GOOD_RECORD + 'colour = "red"\n', "colour"),
    (
        "unknown check field",
        GOOD_RECORD.replace('summary = "ok"', 'summary = "ok"\nscore = 3'),
        "checks[0].score",
    ),
    ("bad status", GOOD_RECORD.replace('status = "pass"', 'status = "great"'), "checks[0].status"),
    ("check without id", GOOD_RECORD.replace('id = "claim.completeness"\n', ""), "checks[0].id"),
    ("malformed check id", GOOD_RECORD.replace("claim.completeness", "Claim Completeness"), "checks[0].id"),
    (
        "future schema",
        GOOD_RECORD.replace("schema_version = 1", "schema_version = 99"),
        "provenance.schema_version",
    ),
    (
        "schema as text",
        GOOD_RECORD.replace("schema_version = 1", 'schema_version = "one"'),
        "provenance.schema_version",
    ),
    ("revision as text", GOOD_RECORD.replace("revision = 1", 'revision = "first"'), "provenance.revision"),
    ("inputs not a table", 'stage = "claim"\ninputs = 3\n', "inputs"),
    ("checks not an array", 'stage = "claim"\nchecks = "all good"\n', "checks"),
    ("bad note tag", GOOD_RECORD + '[[notes]]\ntag = "rumour"\ntext = "x"\n', "notes[0].tag"),
    ("note without text", GOOD_RECORD + '[[notes]]\ntag = "fact"\n', "notes[0].text"),
    ("unknown provenance field", GOOD_RECORD + "signed = true\n", "provenance.signed"),
]


@pytest.mark.parametrize("name,content,field", RECORD_CASES, ids=[c[0] for c in RECORD_CASES])
def test_malformed_record_names_file_field_and_fix(
    tmp_path: Path, name: str, content: str, field: str
) -> None:
    path = tmp_path / "01-claim.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(EvidenceError) as info:
        load_record(path)
    err = info.value
    assert err.file == str(path)
    assert field in err.field
    assert "Fix:" in str(err) and err.fix


def test_non_utf8_record(tmp_path: Path) -> None:
    path = tmp_path / "01-claim.toml"
    path.write_bytes(b'stage = "cl\xffaim"\n')
    with pytest.raises(EvidenceError, match="not UTF-8"):
        load_record(path)


def test_future_session_version(tmp_path: Path) -> None:
    path = tmp_path / "session.toml"
    path.write_text('schema_version = 7\nid = "x"\n')
    with pytest.raises(EvidenceError) as info:
        load_session_meta(path)
    assert info.value.field == "schema_version"
    assert "upgrade claimcheck" in str(info.value)


def test_session_without_id(tmp_path: Path) -> None:
    path = tmp_path / "session.toml"
    path.write_text('title = "x"\n')
    with pytest.raises(EvidenceError, match="'id'.*required"):
        load_session_meta(path)


def test_cli_reports_malformed_record_without_traceback(tmp_path: Path, capsys) -> None:
    s = Session.create(tmp_path / "s", workspace=tmp_path)
    (s.path / "01-claim.toml").write_text('stage = "claim"\n[inputs\n')
    code = main(["--replay", str(s.path)])
    out = capsys.readouterr()
    assert code == 1, "an unreadable record in a session is a broken record, not a reproduction"
    assert "01-claim.toml: field '(syntax)'" in out.out and "Fix:" in out.out
    assert "Traceback" not in out.out + out.err


def test_cli_unreadable_session_file_is_unusable_input(tmp_path: Path, capsys) -> None:
    s = Session.create(tmp_path / "s", workspace=tmp_path)
    (s.path / "session.toml").write_text("schema_version = 9\nid = 'x'\n")
    assert main(["--replay", str(s.path)]) == 2
    out = capsys.readouterr()
    assert "schema_version" in out.out + out.err and "Traceback" not in out.out + out.err


def test_cli_missing_session_dir(tmp_path: Path, capsys) -> None:
    assert main(["--replay", str(tmp_path / "nope")]) == 2
    out = capsys.readouterr()
    assert "no such session directory" in out.out + out.err
