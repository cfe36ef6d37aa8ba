"""Crash consistency of the ledger, one state at a time: an interrupted save is repaired when the
session is next opened and replay tells it from a hand edit; empty locks are stale; temp files do
not outlive a reopen; a job names itself. tests/test_crash.py kills whole runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from claimcheck.engine.evidence import dump_toml, load_record, record_to_toml
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.lock import SessionLocked
from claimcheck.engine.ledger.session import JOURNAL_FILE, Session, read_repairs
from tests.test_replay import build

ROOT = Path(__file__).resolve().parents[1]


class Killed(BaseException):
    """Stands in for SIGKILL: nothing after the point where it is raised runs, no cleanup in claimcheck catches it."""


def _kill_before_session_toml(monkeypatch: pytest.MonkeyPatch) -> None:
    def sync(self, name=None, archived=None):
        raise Killed()

    monkeypatch.setattr(Session, "_sync_meta", sync)


def _rows(session_dir: Path, stage: str):
    return [r for r in replay(session_dir).rows if r.stage == stage and r.check == "(record)"]


def test_freeze_killed_before_session_toml_is_an_interrupted_write_then_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = build(tmp_path, monkeypatch)
    session = Session.open(s)
    session.lock.acquire()
    session.add_note("baseline", "fact", "a late note")  # a new draft revision
    with monkeypatch.context() as m:
        _kill_before_session_toml(m)
        with pytest.raises(Killed):
            session.freeze("baseline")
    # What the killed process left: the frozen record, session.toml still naming the draft, the journal.
    assert (s / JOURNAL_FILE).exists()
    rows = _rows(s, "baseline")
    assert [r.outcome for r in rows] == ["incomplete"] and "interrupted write" in rows[0].detail
    assert not any(r.outcome == "tampered" for r in replay(s).rows)

    reopened = Session.open(s)
    assert reopened.recover() == ["an interrupted write of 'baseline' was completed"]
    rec = reopened.record("baseline")
    assert rec.provenance.frozen
    assert Session.open(s).meta.stages["baseline"].digest == rec.provenance.digest
    assert not (s / JOURNAL_FILE).exists()
    assert read_repairs(s)[0]["outcome"] == "completed"
    rows = _rows(s, "baseline")
    assert [r.outcome for r in rows] == ["observation"] and "interrupted write, repaired" in rows[0].detail
    assert replay(s).exit_code == 0


def test_a_save_killed_before_its_record_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = build(tmp_path, monkeypatch)
    session = Session.open(s)
    before = (s / "04-baseline.toml").read_bytes()
    with monkeypatch.context() as m:
        m.setattr(Session, "_archive", lambda self, rec: (_ for _ in ()).throw(Killed()))
        with pytest.raises(Killed):
            session.add_note("baseline", "fact", "never saved")
    assert (s / JOURNAL_FILE).exists() and (s / "04-baseline.toml").read_bytes() == before
    assert "interrupted write" in _rows(s, "baseline")[0].detail
    assert Session.open(s).recover() == ["an interrupted write of 'baseline' was rolled back"]
    assert replay(s).exit_code == 0


def test_a_resealed_hand_edit_is_still_tampered_and_reopening_does_not_hide_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = build(tmp_path, monkeypatch)
    path = s / "04-baseline.toml"
    rec = load_record(path)
    rec.inputs["noise"] = 0.5
    path.write_text(record_to_toml(rec.sealed()))
    session = Session.open(s)
    session.lock.acquire()
    session.lock.release()
    outcomes = [r.outcome for r in _rows(s, "baseline")]
    assert "tampered" in outcomes and "observation" not in outcomes


def test_a_journal_that_matches_neither_side_repairs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = build(tmp_path, monkeypatch)
    path = s / "04-baseline.toml"
    rec = load_record(path)
    rec.inputs["noise"] = 0.5
    path.write_text(record_to_toml(rec.sealed()))
    digest = Session.open(s).meta.stages["baseline"].digest
    (s / JOURNAL_FILE).write_text(json.dumps({"stage": "baseline", "old": digest, "new": "sha256:other"}))
    assert "could not be matched" in Session.open(s).recover()[0]
    assert Session.open(s).meta.stages["baseline"].digest == digest
    assert "tampered" in [r.outcome for r in _rows(s, "baseline")]


def test_a_drafts_first_write_reads_back_byte_for_byte(tmp_path: Path) -> None:
    # Written from memory with an array of tables before a plain value, as stages build them.
    data = {"checks": [{"id": "x.y", "measured": {"files": [{"path": "a"}], "total_bytes": 1}}]}
    import tomllib

    assert dump_toml(tomllib.loads(dump_toml(data))) == dump_toml(data)


@pytest.mark.parametrize("content", [b"", b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_an_empty_or_unreadable_lock_is_stale(tmp_path: Path, content: bytes) -> None:
    s = Session.create(tmp_path / "s", workspace=tmp_path)
    (s.path / ".lock").write_bytes(content)
    with pytest.raises(SessionLocked) as err:
        Session.open(s.path).lock.acquire()
    assert err.value.stale and "empty or unreadable lock" in str(err.value)
    other = Session.open(s.path)
    other.lock.acquire(take_over_stale=True)
    assert other.lock.holder()["pid"] == os.getpid()


def test_the_lock_is_never_seen_empty(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s", workspace=tmp_path)
    s.lock.acquire()
    assert json.loads((s.path / ".lock").read_text())["pid"] == os.getpid()
    assert [p.name for p in s.path.iterdir() if p.name.startswith(".lock")] == [".lock"]


def test_temp_files_are_removed_on_open_but_not_a_jobs(tmp_path: Path) -> None:
    s = Session.create(tmp_path / "s", workspace=tmp_path)
    leftovers = [
        ".session.toml.abc123.tmp",
        ".01-claim.toml.x.tmp",
        "history/.01-claim.r1.toml.y.tmp",
        "data/.split.parquet.z.tmp",
    ]
    for name in leftovers:
        (s.path / name).parent.mkdir(exist_ok=True)
        (s.path / name).write_text("partial")
    job_tmp = s.path / "jobs" / "op1" / ".heartbeat.q.tmp"
    job_tmp.parent.mkdir(parents=True)
    job_tmp.write_text("a live job's")
    opened = Session.open(s.path)
    opened.lock.acquire()
    assert not any((s.path / n).exists() for n in leftovers)
    assert job_tmp.exists()


def test_a_job_names_itself_so_a_lost_launcher_leaves_it_findable_and_cancellable(tmp_path: Path) -> None:
    from claimcheck.engine.providers.local import LocalProvider

    job_dir = tmp_path / "jobs" / "op1"
    job_dir.mkdir(parents=True)
    (job_dir / "pid.json").write_text(json.dumps({"pid": 1, "starts": ["2020-01-01T00:00:00+00:00"]}))
    # A stand-in for `python -m claimcheck.engine.training.job DIR` whose launcher died before writing pid.json:
    # the same command line, the job's first act, then a long wait.
    code = "import sys, time; from pathlib import Path; from claimcheck.engine.training.jobfiles import record_self; record_self(Path(sys.argv[2])); time.sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "claimcheck.engine.training.job", str(job_dir.resolve())],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        deadline = time.time() + 30
        while json.loads((job_dir / "pid.json").read_text()).get("pid") != proc.pid:
            assert time.time() < deadline, "the job never named itself"
            time.sleep(0.05)
        doc = json.loads((job_dir / "pid.json").read_text())
        assert doc["pgid"] == proc.pid and len(doc["starts"]) == 2
        provider = LocalProvider(tmp_path / "jobs")
        handle = provider.find("op1")
        st = provider.status(handle)
        assert st.alive and st.pid == proc.pid and st.phase != "not_found"
        provider.cancel(handle)
        assert proc.wait(timeout=10) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_the_app_offers_take_over_for_an_empty_lock(tmp_path: Path) -> None:
    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.screens import LockedScreen
    from tests.test_tui_support import screen_text, wait_for

    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    (session.path / ".lock").write_bytes(b"")  # killed between creating the lock and filling it
    app = make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, LockedScreen))
        assert "Take over" in screen_text(app)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        assert json.loads((session.path / ".lock").read_text())["pid"] == os.getpid()


def test_an_answers_run_killed_before_session_toml_can_be_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder holding only the temp file of an interrupted first write is not a person's folder:
    the answers run goes ahead (and the lock removes the leftover); any other file still refuses."""
    leftover = tmp_path / "s" / ".session.toml.k1ll3d.tmp"
    leftover.parent.mkdir()
    leftover.write_text("schema_version = 2\n")
    session = build(tmp_path, monkeypatch)
    assert (session / "session.toml").is_file() and not leftover.exists()

    from claimcheck.engine.headless.answers import run_answers

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="holds files"):
        run_answers(tmp_path / "answers.toml", tmp_path / "t")
