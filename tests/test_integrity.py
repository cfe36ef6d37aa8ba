"""Tamperings on copies of the real session (tests/real_session.py): replay and the report must both
detect each one (exit 1, a row / banner naming the file), through engine/headless/integrity.py's one
`verify`. Also: an edited note with the whole chain re-sealed passes unsigned (digests are unkeyed,
docs/evidence-format.md says so) and fails once the session is signed; a report write stopped half
way leaves the previous set untouched, and each file names the session digest it describes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from claimcheck.engine.evidence import Note, load_record, record_to_toml
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.tui.cli import main
from tests import real_session as rs

pytestmark = pytest.mark.slow  # the real session trains a tiny model once per test run


def _job(s: Path) -> Path:
    return next(p for p in (s / "jobs").iterdir() if p.is_dir())


def _edit_digest(s: Path) -> str:
    meta = s / "session.toml"
    text = meta.read_text()
    digest = re.search(r'\[stages\.split\][^\[]*?digest = "sha256:([0-9a-f]{64})"', text).group(1)
    meta.write_text(text.replace(digest, ("0" if digest[0] != "0" else "1") + digest[1:]))
    return "03-split.toml"


def _delete_split(s: Path) -> str:
    (s / "data" / "split.parquet").unlink()
    return "data/split.parquet"


def _edit_title(s: Path) -> str:
    meta = s / "session.toml"
    meta.write_text(re.sub(r'(?m)^title = ".*"$', 'title = "A much better claim"', meta.read_text(), count=1))
    return "session.toml"


def _edit_checkpoint(s: Path) -> str:
    last = sorted((_job(s) / "checkpoints").iterdir())[-1]
    f = last / "trainable.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 0x01
    f.write_bytes(bytes(data))
    return f"checkpoints/{last.name}/trainable.safetensors"


def _edit_step0_dev_loss(s: Path) -> str:
    f = _job(s) / "metrics.jsonl"
    lines = f.read_text().splitlines()
    for i, line in enumerate(lines):
        doc = json.loads(line)
        if doc.get("kind") == "eval" and doc.get("step") == 0 and "loss" in doc:
            doc["loss"] = doc["loss"] * 0.5
            lines[i] = json.dumps(doc)
            break
    else:
        raise AssertionError("no step-0 dev loss in metrics.jsonl")
    f.write_text("\n".join(lines) + "\n")
    return "metrics.jsonl"


TAMPERINGS: dict[str, Callable[[Path], str]] = {
    "edited digest": _edit_digest,
    "deleted split.parquet": _delete_split,
    "edited session title": _edit_title,
    "edited last checkpoint trainable.safetensors": _edit_checkpoint,
    "edited metrics.jsonl step-0 dev loss": _edit_step0_dev_loss,
}


@pytest.fixture
def session_copy(real_workspace: Path, tmp_path: Path) -> Path:
    return rs.copy_workspace(real_workspace, tmp_path)


def test_untouched_session_verifies(real_session: Path) -> None:
    from claimcheck.engine.headless.integrity import verify

    rows = verify(Session.open(real_session))
    assert not [r for r in rows if r.failing]
    ident = [r for r in rows if r.check == "dispatch.identity"]
    assert not ident, "a new session pins its job files: no 'not pinned' observation"


@pytest.mark.parametrize("name", list(TAMPERINGS))
def test_replay_and_report_detect_tampering(session_copy: Path, name: str, capsys) -> None:
    named = TAMPERINGS[name](session_copy)
    result = replay(session_copy)
    assert result.exit_code == 1, result.render_table()
    failing = [r for r in result.rows if r.failing]
    assert any(named in r.detail or named in str(r.differences) for r in failing), result.render_table()

    assert main(["report", str(session_copy)]) == 1
    err = capsys.readouterr().err
    assert "INTEGRITY FAILED" in err and named in err
    md = (session_copy / "report.md").read_text()
    assert "INTEGRITY FAILED" in md
    assert "OK — Frozen" not in md.split("## 1.")[0] or "NOT CERTIFIED" in md
    assert "**OK** — Verdict" not in md


def _reseal_note(s: Path) -> None:
    """What anyone who can run the engine can do: edit a note (on the last stage, so no measured
    upstream digest changes), re-seal the record and bring session.toml up to it."""
    path = s / registry.get("artifact").file_name
    rec = load_record(path)
    rec.notes.append(Note(tag="limitation", text="Reviewed and approved by the data owner."))
    path.write_text(record_to_toml(rec.sealed()))
    Session.open(s)._sync_meta()


def test_resealed_note_passes_unsigned(session_copy: Path) -> None:
    """The documented limit of unkeyed digests: a consistent re-seal is not detectable without a key."""
    _reseal_note(session_copy)
    result = replay(session_copy)
    assert result.exit_code == 0, result.render_table()
    assert any(r.check == "(signature)" and "unsigned" in r.detail for r in result.rows)


def test_signature_detects_resealed_note(session_copy: Path, tmp_path: Path, capsys) -> None:
    """One full replay, of the signed copy once resealed: every re-run reproduces with signature.toml
    present and the signature alone fails. The signed copy before the reseal is checked by `verify`,
    which gives replay its session and record rows (the signature row among them) without re-running
    the stages the later replay re-runs."""
    from claimcheck.engine.headless.integrity import verify

    key = tmp_path / "key.pem"
    assert main(["sign", "--new-key", str(key)]) == 0
    assert main(["sign", str(session_copy), "--key", str(key)]) == 0
    fp = re.search(r"fingerprint (sha256:[0-9a-f]+)", capsys.readouterr().out).group(1)
    signed = verify(Session.open(session_copy, allow_links=True))
    assert not [r for r in signed if r.failing], signed
    assert any(r.check == "(signature)" and fp in r.detail and "valid" in r.detail for r in signed)

    _reseal_note(session_copy)
    result = replay(session_copy)
    assert result.exit_code == 1
    bad = [r for r in result.rows if r.failing]
    assert [(r.check, r.outcome) for r in bad] == [("(signature)", "tampered")], result.render_table()
    assert "signature.toml" in bad[0].detail
    assert main(["report", str(session_copy)]) == 1
    assert "signature.toml" in (session_copy / "report.md").read_text()


def test_sign_refuses_a_tampered_session(session_copy: Path, tmp_path: Path) -> None:
    key = tmp_path / "key.pem"
    assert main(["sign", "--new-key", str(key)]) == 0
    _delete_split(session_copy)
    assert main(["sign", str(session_copy), "--key", str(key)]) == 1
    assert not (session_copy / "signature.toml").exists()


def test_report_set_is_written_as_one(session_copy: Path, monkeypatch) -> None:
    """A report stopped before it finished (here: while rendering model-index.yaml) changes nothing."""
    import claimcheck.engine.report.build as report

    def stopped(_session):
        raise KeyboardInterrupt

    def outputs() -> dict[str, bytes]:
        names = ("report", "model-index")
        return {p.name: p.read_bytes() for p in session_copy.iterdir() if p.name.startswith(names)}

    before = outputs()  # a report written earlier, if any, must survive unchanged
    monkeypatch.setattr(report, "model_index_yaml", stopped)
    with pytest.raises(KeyboardInterrupt):
        report.write_report(session_copy)
    assert outputs() == before


def test_each_report_file_names_its_session_digest(session_copy: Path) -> None:
    import claimcheck.engine.report.build as report

    written = report.write_report_set(session_copy)
    assert written.digest.startswith("sha256:")
    for path in (written.md, written.html, written.model_index):
        assert written.digest in path.read_text(), path.name
    _edit_title(session_copy)  # a later run over a changed session names another digest
    assert report.write_report_set(session_copy).digest != written.digest
