"""Every edit to a session folder is caught (issue 28, section 5), on a real session: the documented
answers example cut to claim, source, split and baseline on 60 tickets (tests/test_crash.py's
workspace), run by `run_answers` with the real stages, plus one note added to the frozen baseline
and frozen again, so history/ holds a revision. Each edit is made on a copy; replay must exit 1
naming the file, the report must flag it (or refuse the session, naming the file) and the exports
must refuse it. Also: a session.toml written before the seal replays as before and is sealed by the
named upgrade, and a planted journal naming a re-sealed record is refused, not completed."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from claimcheck.engine.evidence import EvidenceError, Note, load_record, record_to_toml
from claimcheck.engine.exports.common import ExportRefused, verify_for_export
from claimcheck.engine.headless import integrity
from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger import upgrade
from claimcheck.engine.ledger.session import JOURNAL_FILE, Session
from claimcheck.tui.cli import main
from tests.test_crash import write_workspace

HISTORY = "history/04-baseline.r1.toml"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("folder")
    answers = write_workspace(ws)
    assert run_answers(answers, ws / "s").exit_code == 0
    session = Session.open(ws / "s")
    session.lock.acquire()
    session.add_note("baseline", "fact", "reviewed by the data owner")
    session.freeze("baseline")
    session.lock.release()
    return ws


@pytest.fixture
def ws(built: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "ws"
    shutil.copytree(built, dest)
    return dest


# ---------------------------------------------------------------- the edits


def _crlf(s: Path) -> str:
    p = s / "02-source.toml"
    p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n"))
    return "02-source.toml"


def _swap_inputs(s: Path) -> str:
    p = s / "01-claim.toml"
    lines = p.read_text().splitlines(keepends=True)
    i = lines.index("[inputs]\n")
    lines[i + 1], lines[i + 2] = lines[i + 2], lines[i + 1]
    p.write_text("".join(lines))
    return "01-claim.toml"


def _schema_version(s: Path) -> str:
    p = s / "session.toml"
    p.write_text(p.read_text().replace("schema_version = 2", "schema_version = 1", 1))
    return "session.toml"


def _edit_history(s: Path) -> str:
    p = s / HISTORY
    text = p.read_text()
    assert "bootstrap_resamples = 100" in text
    p.write_text(text.replace("bootstrap_resamples = 100", "bootstrap_resamples = 1000"))
    return HISTORY


def _resealed_history(s: Path) -> str:
    p = s / HISTORY
    rec = load_record(p)
    rec.notes.append(Note(tag="fact", text="approved"))
    p.write_text(record_to_toml(rec.sealed()))
    return HISTORY


def _extra_record(s: Path) -> str:
    shutil.copy(s / "04-baseline.toml", s / "08-extra.toml")
    return "08-extra.toml"


def _extra_parquet(s: Path) -> str:
    shutil.copy(s / "data" / "split.parquet", s / "data" / "extra.parquet")
    return "data/extra.parquet"


def _symlinked_record(s: Path) -> str:
    p = s / "03-split.toml"
    copy = s.parent / "identical-copy.toml"
    shutil.copy(p, copy)
    p.unlink()
    p.symlink_to(copy)
    assert p.read_bytes() == copy.read_bytes()
    return "03-split.toml"


def _meta_digest_removed_and_title(s: Path) -> str:
    p = s / "session.toml"
    text = re.sub(r"(?m)^meta_digest = .*\n", "", p.read_text())
    p.write_text(re.sub(r'(?m)^title = ".*"$', 'title = "A much better claim"', text, count=1))
    return "session.toml"


EDITS: dict[str, Callable[[Path], str]] = {
    "CRLF line endings in a record": _crlf,
    "two [inputs] keys swapped": _swap_inputs,
    "session.toml schema_version 2 -> 1": _schema_version,
    "an edited history/ revision": _edit_history,
    "a history/ revision edited and re-sealed": _resealed_history,
    "an extra 08-extra.toml": _extra_record,
    "an extra data/extra.parquet": _extra_parquet,
    "a record replaced by a symlink to an identical copy": _symlinked_record,
    "meta_digest removed and the title edited": _meta_digest_removed_and_title,
}


def test_the_untouched_session_verifies_with_every_pin(ws: Path) -> None:
    s = ws / "s"
    rows = integrity.verify(Session.open(s))
    assert not [r for r in rows if r.failing], [r.detail for r in rows if r.failing]
    assert not [r for r in rows if r.check in ("(meta)", "(history)", "(unaccounted files)")]
    meta = Session.open(s).meta
    assert meta.seal == meta.compute_seal()
    assert all(meta.stages[n].file_sha256 for n in ("claim", "source", "split", "baseline"))
    assert list(meta.stages["baseline"].history) == ["04-baseline.r1.toml"]
    assert replay(s).exit_code == 0


@pytest.mark.parametrize("name", list(EDITS))
def test_each_edit_is_caught_by_replay_report_and_export(ws: Path, name: str, capsys) -> None:
    s = ws / "s"
    named = EDITS[name](s)
    result = replay(s)
    assert result.exit_code == 1, result.render_table()
    assert any(named in r.detail for r in result.rows if r.failing), result.render_table()

    code = main(["report", str(s)])
    err = capsys.readouterr().err
    assert named in err
    if name.startswith("a record replaced by a symlink"):
        assert code == 2 and "symbolic link" in err  # the session is refused, naming the link
        with pytest.raises(EvidenceError, match="symbolic link"):
            verify_for_export(s)
        return
    assert code == 1 and "INTEGRITY FAILED" in err
    assert "NOT CERTIFIED" in (s / "report.md").read_text()
    with pytest.raises(ExportRefused, match=re.escape(named)):
        verify_for_export(s)


def test_a_session_with_a_link_is_refused_when_opened(ws: Path, capsys) -> None:
    s = ws / "s"
    (s / "data" / "split.parquet").rename(ws / "split.parquet")
    (s / "data" / "split.parquet").symlink_to(ws / "split.parquet")
    with pytest.raises(EvidenceError, match=re.escape("data/split.parquet")):
        Session.open(s)
    assert main(["run", "--answers", str(ws / "answers.toml"), str(s)]) == 2
    err = capsys.readouterr().err
    assert "data/split.parquet" in err and "symbolic link" in err and "Traceback" not in err
    result = replay(s)
    assert result.exit_code == 1
    assert any(r.outcome == "tampered" and "data/split.parquet" in r.detail for r in result.rows)


def _as_written_before_the_seal(s: Path) -> None:
    """session.toml as the claimcheck before the seal wrote it: the same content without seal and
    byte pins (that claimcheck wrote exactly SessionMeta.document() of its fields)."""
    meta = Session.open(s).meta
    old = meta.model_copy(update={"seal": ""})
    for entry in old.stages.values():
        entry.file_sha256, entry.history = "", {}
    (s / "session.toml").write_text(old.to_toml())
    assert "seal" not in (s / "session.toml").read_text()


def test_a_session_toml_written_before_the_seal_replays_and_the_upgrade_seals_it(ws: Path) -> None:
    s = ws / "s"
    _as_written_before_the_seal(s)
    result = replay(s)
    assert result.exit_code == 0, result.render_table()
    meta_rows = [r for r in result.rows if r.check == "(meta)"]
    assert [r.outcome for r in meta_rows] == ["observation"] and "not sealed" in meta_rows[0].detail
    history = [r for r in result.rows if r.check == "(history)"]
    assert [r.outcome for r in history] == ["observation"] and HISTORY in history[0].detail

    assert upgrade.main([str(s)]) == 0
    meta = Session.open(s).meta
    assert meta.seal and meta.stages["source"].file_sha256 and meta.stages["baseline"].history
    result = replay(s)
    assert result.exit_code == 0 and not [r for r in result.rows if r.check in ("(meta)", "(history)")]
    assert _swap_inputs(s) in next(r.detail for r in replay(s).rows if r.failing)


def test_the_upgrade_does_not_pin_a_record_that_does_not_verify(ws: Path) -> None:
    s = ws / "s"
    _as_written_before_the_seal(s)
    p = s / "02-source.toml"
    p.write_text(p.read_text().replace("[inputs]", "[inputs]\n# a comment", 1))
    assert upgrade.main([str(s)]) == 1  # 02-source.toml does not verify: left unpinned
    meta = Session.open(s).meta
    assert not meta.stages["source"].file_sha256 and meta.stages["claim"].file_sha256
    failing = [r for r in replay(s).rows if r.failing]
    assert any("02-source.toml" in r.detail for r in failing)


def _forge(s: Path, old: str) -> str:
    """Edit the frozen split record, re-seal it and plant a journal naming it as an interrupted write."""
    p = s / "03-split.toml"
    rec = load_record(p)
    rec.notes.append(Note(tag="fact", text="split checked by hand"))
    sealed = rec.sealed()
    p.write_text(record_to_toml(sealed))
    journal = {"stage": "split", "file": "03-split.toml", "old": old, "new": sealed.provenance.digest}
    (s / JOURNAL_FILE).write_text(json.dumps(journal))
    return sealed.provenance.digest


@pytest.mark.parametrize("pre_image", ["session.toml's digest", "another digest"])
def test_a_planted_journal_naming_a_resealed_record_is_refused(ws: Path, pre_image: str) -> None:
    s = ws / "s"
    recorded = Session.open(s).meta.stages["split"].digest
    _forge(s, recorded if pre_image == "session.toml's digest" else "sha256:" + "0" * 64)
    result = run_answers(ws / "answers.toml", s)
    assert result.exit_code == 2 and JOURNAL_FILE in result.error and "03-split.toml" in result.error
    assert "not completed" in result.error
    assert (s / JOURNAL_FILE).exists() and not (s / ".lock").exists()
    assert Session.open(s).meta.stages["split"].digest == recorded  # session.toml untouched
    rows = replay(s).rows
    split = [r for r in rows if r.stage == "split" and r.check == "(record)"]
    assert [r.outcome for r in split] == ["tampered"] and "03-split.toml" in split[0].detail
