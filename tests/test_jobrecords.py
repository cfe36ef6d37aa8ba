"""The typed job files (claimcheck.engine.training.jobrecords) and the one job snapshot
(claimcheck.engine.providers.snapshot): every metrics.jsonl kind round-trips, a malformed file or
line is a clear error naming it, and the files a real run wrote read into the snapshot the dispatch
stage recorded from."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from claimcheck.engine.ledger.session import Session
from claimcheck.engine.providers.registry import for_job
from claimcheck.engine.providers.snapshot import JobSnapshot, poll, snapshot
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import (
    METRIC_KINDS,
    EarlyStopLine,
    HaltLine,
    HeartbeatFile,
    JobFileError,
    MetricLine,
    PidFile,
    ResumeLine,
    StatusFile,
    dump_line,
    parse_line,
)


def _job_dir(session: Path) -> Path:
    [job_dir] = [p for p in (session / "jobs").iterdir() if p.is_dir()]
    return job_dir


def _copy_job(session: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "jobs" / _job_dir(session).name
    shutil.copytree(_job_dir(session), dest)
    return dest


def _lines(job_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (job_dir / jobfiles.METRICS).read_text().splitlines()]


def _unwritten_kinds() -> list[MetricLine]:
    """The kinds a CI-sized uninterrupted run does not write: a resume, a halt, an early stop."""
    return [
        ResumeLine(kind="resume", step=6, time=1.0, checkpoint="step-00000006", run=2),
        HaltLine(kind="halt", step=3, time=1.0, reason="non-finite loss (nan) at step 3"),
        EarlyStopLine(kind="early_stop", step=9, time=1.0, reason="no dev improvement in 3 evaluations"),
    ]


def test_every_kind_round_trips(real_session: Path) -> None:
    job_dir = _job_dir(real_session)
    written = jobfiles.read_metrics(job_dir)
    records = written + _unwritten_kinds()
    assert {r.kind for r in records} == set(METRIC_KINDS)
    for rec in records:
        again = parse_line(json.loads(json.dumps(dump_line(rec), allow_nan=True)), "x")
        assert again == rec and type(again) is type(rec)
    # the lines the job wrote come back byte for byte
    text = (job_dir / jobfiles.METRICS).read_text().splitlines()
    assert [json.dumps(dump_line(r), allow_nan=True) for r in written] == text


def test_the_files_a_real_run_wrote_read_as_their_models(real_session: Path) -> None:
    job_dir = _job_dir(real_session)
    status = jobfiles.read_status(job_dir)
    beat = jobfiles.read_heartbeat(job_dir)
    pid = jobfiles.read_pid(job_dir)
    assert isinstance(status, StatusFile) and status.phase == "done" and status.step == status.total_steps > 0
    assert isinstance(beat, HeartbeatFile) and beat.beats > 0 and beat.phase == "done"
    assert isinstance(pid, PidFile) and pid.pid > 0 and pid.starts
    for model, name in ((status, jobfiles.STATUS), (beat, jobfiles.HEARTBEAT), (pid, jobfiles.PID_FILE)):
        doc = json.loads((job_dir / name).read_text())
        assert model.model_dump(exclude_unset=True) == doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: {**d, "kind": "alarm"}, "unknown record kind 'alarm'"),
        (lambda d: {k: v for k, v in d.items() if k != "loss"}, "field 'loss': required but missing"),
        (lambda d: {**d, "los": 1.0}, "field 'los': not a known field"),
        (lambda d: {**d, "step": "seven"}, "field 'step': "),
        (lambda d: [d], "a JSON list, not an object"),
    ],
)
def test_a_malformed_line_names_the_file_and_line(
    real_session: Path, tmp_path: Path, edit: Any, message: str
) -> None:
    job_dir = _copy_job(real_session, tmp_path)
    lines = _lines(job_dir)
    k = next(i for i, d in enumerate(lines) if d["kind"] == "step")
    lines[k] = edit(lines[k])
    (job_dir / jobfiles.METRICS).write_text("".join(json.dumps(d) + "\n" for d in lines))
    with pytest.raises(JobFileError) as info:
        jobfiles.read_metrics(job_dir)
    assert f"{job_dir / jobfiles.METRICS}:{k + 1}: " in str(info.value) and message in str(info.value)


def test_a_line_cut_by_a_kill_is_skipped(real_session: Path, tmp_path: Path) -> None:
    job_dir = _copy_job(real_session, tmp_path)
    whole = jobfiles.read_metrics(job_dir)
    with open(job_dir / jobfiles.METRICS, "a") as fh:
        fh.write('{"kind": "step", "step": 13, "ti')
    assert jobfiles.read_metrics(job_dir) == whole


def test_malformed_status_and_heartbeat_name_the_file(real_session: Path, tmp_path: Path) -> None:
    job_dir = _copy_job(real_session, tmp_path)
    doc = json.loads((job_dir / jobfiles.STATUS).read_text())
    (job_dir / jobfiles.STATUS).write_text(json.dumps({**doc, "phase": "canceled"}))
    with pytest.raises(JobFileError, match=r"status.json: field 'phase': Input should be"):
        jobfiles.read_status(job_dir)
    beat = json.loads((job_dir / jobfiles.HEARTBEAT).read_text())
    (job_dir / jobfiles.HEARTBEAT).write_text(json.dumps({k: v for k, v in beat.items() if k != "time"}))
    with pytest.raises(JobFileError, match=r"heartbeat: field 'time': required but missing"):
        jobfiles.read_heartbeat(job_dir)
    # the person sees it as one line, not a traceback: it is a ClaimcheckError
    from claimcheck.engine.errors import ClaimcheckError

    assert issubclass(JobFileError, ClaimcheckError)


def test_the_snapshot_is_what_the_dispatch_stage_recorded(real_session: Path) -> None:
    job_dir = _job_dir(real_session)
    snap = snapshot(job_dir, for_job(job_dir, None))
    assert isinstance(snap, JobSnapshot)
    assert snap.phase == "done" and snap.job_state == "finished" and snap.terminal and not snap.running
    assert not snap.bad and snap.step == snap.total_steps
    record = Session.open(real_session).record("dispatch")
    assert record is not None
    loss = record.check("dispatch.loss_curve").measured
    assert [s.step for s in snap.steps] == loss["step"] and [s.loss for s in snap.steps] == loss["loss"]
    assert snap.loss_points == [(float(s), v) for s, v in zip(loss["step"], loss["loss"], strict=True)]
    dev = record.check("dispatch.dev_metric").measured
    assert snap.dev_metric == dev["metric"] and [e.value for e in snap.evals] == dev["value"]
    assert snap.trivial_value == dev["trivial_value"] or not math.isfinite(dev["trivial_value"])
    alarms = {
        c.id.removeprefix("dispatch.alarms."): c for c in record.checks if c.id.startswith("dispatch.alarms.")
    }
    for alarm in snap.alarms:
        if alarm["name"] != "stall":  # wall-clock heartbeats: an observation, not compared
            assert alarms[alarm["name"]].measured["state"] == alarm["state"]
    assert snap.checkpoints == record.check("dispatch.checkpoints").measured["steps"]
    assert snap.pace.elapsed_s is not None and snap.pace.eta_s is None  # ended: no ETA
    assert [s.op_id for s in poll(real_session / "jobs")] == [snap.op_id]


def test_the_kinds_are_exactly_those_the_engine_writes() -> None:
    """Every metrics.jsonl kind has a model, and every model is a kind some engine code writes."""
    root = Path(__file__).resolve().parents[1] / "engine"
    writers = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*.py")
        if "append_metric(" in p.read_text() and p.name != "jobfiles.py"
    )
    assert writers == ["retrieval/job.py", "training/job.py"]
    written = set()
    for writer in writers:
        source = (root / writer).read_text()
        for first, second in re.findall(r'kind="(\w+)"(?: if [^\n]* else "(\w+)")?', source):
            written |= {first, second} - {""}
    assert written == set(METRIC_KINDS)
