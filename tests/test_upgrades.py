"""The named upgrades (claimcheck.engine.ledger.upgrade), each on a stored old record.

`job_phase_key`: tests/data/old-0.1.0-job/ is status.json, heartbeat, metrics.jsonl and pid.json of a
real job folder written by claimcheck 0.1.0 (the real session's job, before the job's phase had its
own name: they hold `stage`). Today's readers read them as `phase`, and leave the files' bytes alone.
A session whose job files hold 0.1.0's key still replays (exit 0).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from claimcheck.engine.ledger.upgrade import OLD_JOB_PHASE_KEY, job_phase_key
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import EvalLine, JobFileError, StatusFile, parse_file
from tests import real_session as rs

OLD_JOB = Path(__file__).resolve().parent / "data" / "old-0.1.0-job"


def test_the_stored_job_is_in_the_old_layout() -> None:
    status = json.loads((OLD_JOB / jobfiles.STATUS).read_text())
    beat = json.loads((OLD_JOB / jobfiles.HEARTBEAT).read_text())
    lines = [json.loads(line) for line in (OLD_JOB / jobfiles.METRICS).read_text().splitlines()]
    assert status[OLD_JOB_PHASE_KEY] == "done" and "phase" not in status
    assert beat[OLD_JOB_PHASE_KEY] == "done" and "phase" not in beat
    assert {line[OLD_JOB_PHASE_KEY] for line in lines if line["kind"] == "eval"} >= {
        "initial-eval",
        "training",
    }


def test_job_phase_key_reads_a_stored_0_1_0_job(tmp_path: Path) -> None:
    job = tmp_path / "job"
    shutil.copytree(OLD_JOB, job)
    before = {p.name: p.read_bytes() for p in job.iterdir()}
    status = jobfiles.read_status(job)
    assert status is not None and (status.phase, status.step, status.total_steps) == ("done", 12, 12)
    beat = jobfiles.read_heartbeat(job)
    assert beat is not None and beat.phase == "done"
    evals = [r for r in jobfiles.read_metrics(job) if isinstance(r, EvalLine)]
    assert evals and evals[0].phase == "initial-eval"
    assert {r.phase for r in evals} <= {"initial-eval", "training", "final-eval"}
    progress = jobfiles.read_progress(job)
    assert progress.phase == "done"
    assert {p.name: p.read_bytes() for p in job.iterdir()} == before  # read, never rewritten


def test_job_phase_key_changes_only_an_old_document() -> None:
    assert job_phase_key({"stage": "training", "step": 3}) == {"phase": "training", "step": 3}
    today = {"phase": "done", "step": 1}
    assert job_phase_key(today) is today
    both = {"phase": "done", "stage": "x"}
    assert job_phase_key(both) is both  # not an old document: its fields are judged as they are
    with pytest.raises(JobFileError, match=r"status.json: field 'stage': not a known field"):
        parse_file(StatusFile, both, "status.json")


def test_a_session_with_0_1_0_job_files_replays(real_workspace: Path, tmp_path: Path, capsys) -> None:
    """The real session with its jobs' status.json and heartbeat written back in 0.1.0's layout (its
    metrics.jsonl stays as recorded: the dispatch record pins its bytes; the stored old job above
    covers its lines) replays with exit 0."""
    from claimcheck.tui.cli import main

    session_dir = rs.copy_workspace(real_workspace, tmp_path)
    jobs = [p for p in (session_dir / "jobs").iterdir() if p.is_dir()]
    assert jobs
    for job in jobs:
        for name in (jobfiles.STATUS, jobfiles.HEARTBEAT):
            doc = json.loads((job / name).read_text())
            old = {(OLD_JOB_PHASE_KEY if k == "phase" else k): v for k, v in doc.items()}
            assert OLD_JOB_PHASE_KEY in old
            (job / name).write_text(json.dumps(old))
    assert main(["--replay", str(session_dir)]) == 0, capsys.readouterr().out
    assert "reproduced" in capsys.readouterr().out
