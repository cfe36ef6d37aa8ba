"""The job folder's state, decided in one place (claimcheck.engine.training.jobfiles), and each alarm on its own
(claimcheck.engine.training.alarms) — no torch, no process: files and records written through the
typed models of claimcheck.engine.training.jobrecords."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from claimcheck.engine.training import alarms, jobfiles, jobrecords
from claimcheck.engine.training.jobrecords import (
    EvalLine,
    HaltLine,
    HeartbeatFile,
    MetricLine,
    StatusFile,
    StepLine,
    TrivialLine,
)
from claimcheck.engine.training.schema import Alarms, Effective, Inputs, effective

# ---------------------------------------------------------------- state


def _job(
    tmp: Path, status: dict[str, Any] | None = None, hb: dict[str, Any] | None = None, name: str = "op-a1"
) -> Path:
    jd = tmp / name
    jd.mkdir(parents=True, exist_ok=True)
    if status is not None:
        jobfiles.write_status(jd, StatusFile(**status))
    if hb is not None:
        jobfiles.write_heartbeat(jd, _beat(**hb))
    return jd


def _beat(**fields: Any) -> HeartbeatFile:
    return HeartbeatFile(**{"phase": "training", **fields})


def _files(status: dict[str, Any] | None, hb: dict[str, Any] | None) -> jobfiles.Progress:
    return jobfiles.Progress(
        StatusFile(**status) if status is not None else None, _beat(**hb) if hb is not None else None
    )


def test_status_is_typed_and_checked_reads_say_why(tmp_path: Path) -> None:
    jd = _job(tmp_path)
    assert jobfiles.read_status(jd) is None
    assert jobfiles.read_status_checked(jd) == (None, "missing")
    (jd / jobfiles.STATUS).write_text('{"phase": "trai')
    doc, why = jobfiles.read_status_checked(jd)
    assert doc is None and why.startswith("unreadable: ") and "status.json: not JSON" in why
    (jd / jobfiles.STATUS).write_text("[1, 2]")
    with pytest.raises(jobrecords.JobFileError, match="status.json: a JSON list, not an object"):
        jobfiles.read_status(jd)
    (jd / jobfiles.STATUS).write_text('{"phase": "sleeping"}')
    with pytest.raises(jobrecords.JobFileError, match=r"status.json: field 'phase'"):
        jobfiles.read_status(jd)
    jobfiles.write_status(jd, StatusFile(phase="training", step=3))
    doc, why = jobfiles.read_status_checked(jd)
    assert why == "" and doc is not None and doc.phase == "training" and doc.updated_at


def test_one_vocabulary_for_the_evidence() -> None:
    assert jobrecords.job_state("done") == "finished"
    assert jobrecords.job_state("failed") == "failed"
    assert jobrecords.job_state("cancelled") == "cancelled"
    for stage in (*jobrecords.RUNNING_PHASES, *jobrecords.DERIVED_PHASES, "unreadable", "unknown", ""):
        assert jobrecords.job_state(stage) == "incomplete"
    assert set(map(jobrecords.job_state, jobrecords.TERMINAL_PHASES)) <= set(jobrecords.JOB_STATES)
    assert all(jobrecords.is_terminal(s) for s in (*jobrecords.TERMINAL_PHASES, "lost", "not_found"))
    assert all(jobrecords.is_running(s) for s in (*jobrecords.RUNNING_PHASES, "launching", "stalled"))
    assert not jobrecords.is_running("unconfirmed") and not jobrecords.is_terminal("unconfirmed")
    every = (*jobrecords.RUNNING_PHASES, *jobrecords.TERMINAL_PHASES, *jobrecords.DERIVED_PHASES)
    assert {s for s in every if jobrecords.is_bad(s)} == {"failed", "lost", "stalled"}


def test_providers_write_stages_through_jobfiles(tmp_path: Path) -> None:
    jd = _job(tmp_path, {"phase": "training", "step": 4, "runs": 1})
    assert jobfiles.record_phase(jd, "cancelled", "stopped by hand")
    st = jobfiles.read_status(jd)
    assert st is not None and (st.phase, st.reason, st.step, st.runs) == (
        "cancelled",
        "stopped by hand",
        4,
        1,
    )
    assert not jobfiles.record_phase(jd, "cancelled", "again")  # a terminal word stays
    assert jobfiles.record_phase(jd, "resubmitted", "to resume")  # … until the job is submitted again
    st = jobfiles.read_status(jd)
    assert st is not None and (st.phase, st.runs) == ("resubmitted", 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert not jobfiles.record_phase(empty, "cancelled", "x", only_if_written=True)
    assert jobfiles.read_status(empty) is None
    assert jobfiles.record_phase(empty, "cancelled", "x")
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        StatusFile(phase="canceled")  # type: ignore[arg-type]


def test_session_job_stages_reads_every_job(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    _job(jobs, {"phase": "done"}, name="a")
    _job(jobs, {"step": 1}, name="b")
    (jobs / "c").mkdir(parents=True)
    (jobs / "c" / jobfiles.STATUS).write_text("{")
    assert jobfiles.session_job_phases(jobs) == ["done", "unknown", "unreadable"]


def _local(status: dict[str, Any] | None, hb: dict[str, Any] | None, **proc: Any) -> tuple[str, str]:
    return jobfiles.local_phase(_files(status, hb), jobfiles.Process(**proc), now=1000.0)


def test_local_stage_from_files_and_liveness() -> None:
    beat = {"time": 999.0, "interval": 2.0}
    assert _local(None, None, alive=False)[0] == "not_found"
    assert _local({"phase": "done", "reason": "ok"}, None, alive=False, pid=5, launched=True) == (
        "done",
        "ok",
    )
    stage, why = _local({"phase": "training"}, beat, alive=False, pid=5, launched=True)
    assert stage == "lost" and "process 5 is gone" in why
    assert _local(None, None, alive=True, pid=5, launched=True)[0] == "launching"
    assert _local({"phase": "training"}, beat, alive=True, pid=5, launched=True)[0] == "training"
    # silent for more than STALL_INTERVALS heartbeat intervals: alive but not beating
    old = {"time": 1000.0 - jobfiles.STALL_INTERVALS * 2.0 - 1, "interval": 2.0}
    stage, why = _local({"phase": "training"}, old, alive=True, pid=5, launched=True)
    assert stage == "stalled" and "last heartbeat 11.0s ago" in why
    # a slow heartbeat interval is the job's own: not stalled within its intervals
    slow = {"time": 1000.0 - 50, "interval": 20.0}
    assert _local({"phase": "training"}, slow, alive=True, pid=5, launched=True)[0] == "training"


def test_ray_stage_judges_done_by_the_files(tmp_path: Path) -> None:
    jd = _job(tmp_path, {"phase": "done", "total_steps": 2})
    word = jobfiles.RayWord({"status": "SUCCEEDED"}, "SUCCEEDED", address="http://x")
    stage, why = jobfiles.ray_phase(jd, jobfiles.read_progress(jd), word, now=1000.0)
    assert stage == "failed" and "reaches step 0 of 2" in why
    for s in (1, 2):
        jobfiles.append_metric(jd, _step(s, 1.0))
    stage, why = jobfiles.ray_phase(jd, jobfiles.read_progress(jd), word, now=1000.0)
    assert stage == "failed" and jobfiles.MANIFEST in why
    (jd / jobfiles.FINAL).mkdir()
    (jd / jobfiles.FINAL / jobfiles.MANIFEST).write_text("{}")
    assert jobfiles.ray_phase(jd, jobfiles.read_progress(jd), word, now=1000.0)[0] == "done"


def test_ray_stage_from_rays_word(tmp_path: Path) -> None:
    st = {"phase": "training"}
    fresh: dict[str, Any] | None = {"time": 999.0, "interval": 2.0}

    def stage(word: jobfiles.RayWord, hb: dict[str, Any] | None = fresh) -> str:
        return jobfiles.ray_phase(tmp_path, _files(st, hb), word, now=1000.0)[0]

    assert stage(jobfiles.RayWord(None, "UNKNOWN", "down")) == "unconfirmed"
    assert stage(jobfiles.RayWord(None, "")) == "lost"
    assert (
        jobfiles.ray_phase(tmp_path, _files(None, None), jobfiles.RayWord(None, ""), now=1000.0)[0]
        == "not_found"
    )
    assert stage(jobfiles.RayWord({"status": "PENDING"}, "PENDING")) == "launching"
    running = {"status": "RUNNING", "start_time": 900_000}
    assert stage(jobfiles.RayWord(running, "RUNNING")) == "training"
    assert stage(jobfiles.RayWord(running, "RUNNING"), None) == "launching"  # no heartbeat yet, within grace
    assert stage(jobfiles.RayWord(running, "RUNNING", startup_grace_s=10), None) == "unconfirmed"
    assert stage(jobfiles.RayWord(running, "RUNNING"), {"time": 980.0, "interval": 2.0}) == "unconfirmed"
    assert stage(jobfiles.RayWord({"status": "STOPPED"}, "STOPPED")) == "cancelled"
    assert stage(jobfiles.RayWord({"status": "FAILED"}, "FAILED", "boom")) == "failed"


# ---------------------------------------------------------------- alarms


def test_alarm_defaults_are_the_contracts() -> None:
    assert alarms.config({}) == Inputs().alarms == Alarms()
    assert alarms.config({}).gap_limit == 0.5 and alarms.config({}).stall_heartbeats == 10
    # a whole job contract.toml document, or the typed contract, give the same thresholds
    doc = {"operation_id": "x", "effective": {"alarms": {"gap_limit": 0.1}}}
    assert alarms.config(doc).gap_limit == 0.1
    assert alarms.config(Effective(alarms=Alarms(stall_heartbeats=3))).stall_heartbeats == 3


def test_effective_is_typed_and_forbids_unknown_fields() -> None:
    from pydantic import ValidationError

    c = effective({"micro_batch": 4, "optimizer": {"lr": 0.1}})
    assert c.micro_batch == 4 and c.optimizer.lr == 0.1 and c.grad_accum == 1
    assert Effective().micro_batch == Inputs().micro_batch  # one default, the contract's
    with pytest.raises(ValidationError):
        effective({"micro_btach": 4})


def _obs(records: list[MetricLine], total: int = 20, beats: int = -1) -> alarms.Observed:
    return alarms.Observed(records, total, beats)


def _step(step: int, loss: float, grad: float = 1.0, seconds: float = 0.1) -> StepLine:
    return StepLine(
        kind="step",
        step=step,
        time=1000.0 + step,
        loss=loss,
        lr=1e-3,
        grad_norm=grad,
        seconds=seconds,
        epoch=0.1,
    )


def _steps(losses: list[float], grad: float = 1.0) -> list[MetricLine]:
    return [_step(i + 1, v, grad) for i, v in enumerate(losses)]


def _eval(step: int, value: float, **kw: Any) -> EvalLine:
    fields = {"metric": "macro_f1", "loss": 1.0, "train_value": float("nan"), **kw}
    return EvalLine(
        kind="eval",
        split="dev",
        step=step,
        time=1000.0 + step,
        value=value,
        train_rows=32,
        rows=40,
        phase="training",
        selected_step=-1,
        **fields,
    )


def _trivial(value: float) -> TrivialLine:
    return TrivialLine(kind="trivial", step=0, metric="macro_f1", value=value, majority_class="a")


def test_non_finite() -> None:
    cfg = Alarms()
    assert alarms.non_finite(_obs([]), cfg)["state"] == "not_run"
    assert alarms.non_finite(_obs(_steps([1.0, 0.9])), cfg)["state"] == "clear"
    bad = alarms.non_finite(_obs(_steps([1.0, float("nan")])), cfg)
    assert bad["state"] == "raised" and bad["step"] == 2
    halt: list[MetricLine] = [
        HaltLine(kind="halt", step=7, time=1.0, reason="non-finite gradient norm (inf) at step 7")
    ]
    got = alarms.non_finite(_obs(halt), cfg)
    assert got["state"] == "raised" and got["step"] == 7 and "gradient" in got["detail"]


def test_divergence() -> None:
    cfg = Alarms(divergence_factor=2.0)
    assert alarms.divergence(_obs(_steps([1.0] * 9)), cfg)["state"] == "not_run"
    assert alarms.divergence(_obs(_steps([1.0 / (i + 1) for i in range(30)])), cfg)["state"] == "clear"
    got = alarms.divergence(_obs(_steps([1.0] * 15 + [5.0] * 15)), cfg)
    assert got["state"] == "raised" and got["step"] > 15


def test_class_collapse() -> None:
    cfg = Alarms(collapse_share=0.9)
    assert alarms.class_collapse(_obs([]), cfg)["state"] == "not_run"
    even = _eval(5, 0.5, pred_distribution={"a": 11, "b": 9}, true_distribution={"a": 10, "b": 10})
    assert alarms.class_collapse(_obs([even]), cfg)["state"] == "clear"
    one = _eval(5, 0.3, pred_distribution={"a": 19, "b": 1}, true_distribution={"a": 10, "b": 10})
    assert alarms.class_collapse(_obs([one]), cfg)["state"] == "raised"
    # predicting the majority is no collapse when the truth is that skewed too
    skew = _eval(5, 0.3, pred_distribution={"a": 19, "b": 1}, true_distribution={"a": 19, "b": 1})
    assert alarms.class_collapse(_obs([skew]), cfg)["state"] == "clear"


def test_train_dev_gap() -> None:
    cfg = Alarms()  # limit 0.5, the contract's
    assert alarms.train_dev_gap(_obs([]), cfg)["state"] == "not_run"
    assert alarms.train_dev_gap(_obs([_eval(5, 0.6, train_value=0.9)]), cfg)["state"] == "clear"
    got = alarms.train_dev_gap(_obs([_eval(5, 0.3, train_value=0.9)]), cfg)
    assert got["state"] == "raised" and got["gap"] == pytest.approx(0.6)
    # lower-better metrics: dev loss above train loss is the gap
    loss = _eval(5, 2.0, metric="dev_loss", train_value=1.0)
    assert alarms.train_dev_gap(_obs([loss]), cfg)["state"] == "raised"


def test_worse_than_trivial() -> None:
    cfg = Alarms(worse_than_trivial_after_step=-1)  # from half-way (step 10 of 20)
    trivial = _trivial(0.3)
    assert alarms.worse_than_trivial(_obs([_eval(12, 0.2)]), cfg)["state"] == "not_run"
    assert alarms.worse_than_trivial(_obs([trivial, _eval(4, 0.2)]), cfg)["state"] == "not_run"
    assert alarms.worse_than_trivial(_obs([trivial, _eval(4, 0.2), _eval(12, 0.5)]), cfg)["state"] == "clear"
    got = alarms.worse_than_trivial(_obs([trivial, _eval(12, 0.2)]), cfg)
    assert got["state"] == "raised" and got["step"] == 12
    assert alarms.worse_than_trivial(_obs([trivial, _eval(12, 0.2)]), Alarms())["state"] == "not_run"  # 200


def test_stall_counts_heartbeats_without_a_step() -> None:
    cfg = Alarms()  # stall_heartbeats = 10
    assert alarms.stall(_obs([]), cfg)["state"] == "not_run"
    assert alarms.stall(_obs([], beats=10), cfg)["state"] == "clear"  # at the limit is within it
    got = alarms.stall(_obs([], beats=11), cfg)
    assert got["state"] == "raised" and got["max_beats_without_step"] == 11


class _FakeJob:
    """What the heartbeat thread looks at: the job's step, stage, whether it evaluates and since when."""

    def __init__(self, job_dir: Path) -> None:
        self.dir, self.step, self.phase, self.evaluating = job_dir, 0, "training", False
        self.eval_started = 0.0


def _beats(tmp: Path, steps_every: int, n_beats: int, evaluate_at: tuple[int, ...] = ()) -> HeartbeatFile:
    from claimcheck.engine.training.job import Heartbeat

    job = _FakeJob(tmp)
    hb = Heartbeat(job, interval=0.01)  # never started: beats are driven by hand
    for k in range(1, n_beats + 1):
        if steps_every and k % steps_every == 0:
            job.step += 1
        job.evaluating = k in evaluate_at
        hb.beat()
    beat = jobfiles.read_heartbeat(tmp)
    assert beat is not None
    return beat


def _judge(hb: HeartbeatFile, records: list[MetricLine] | None = None, total: int = 20) -> dict[str, Any]:
    obs = alarms.Observed(records or [], total, hb.max_beats_without_step, hb.interval)
    return {a["name"]: a for a in alarms.evaluate(obs, {})}


def test_slow_but_healthy_job_is_not_stalled(tmp_path: Path) -> None:
    # every step takes 9 heartbeats (slow), for 200 heartbeats: never more than 10 beats without a step
    hb = _beats(tmp_path, steps_every=9, n_beats=200)
    assert hb.max_beats_without_step == 8
    got = _judge(hb)["stall"]
    assert got["state"] == "clear"


def test_a_dev_evaluation_is_not_a_stall(tmp_path: Path) -> None:
    # 30 heartbeats of evaluation between two steps do not count as heartbeats without a step
    hb = _beats(tmp_path, steps_every=0, n_beats=30, evaluate_at=tuple(range(1, 31)))
    assert hb.max_beats_without_step == -1
    assert hb.evaluating is True and hb.evaluating_since == 0.0  # the app shows it running
    assert _judge(hb)["stall"]["state"] == "not_run"


def test_job_with_no_step_beyond_the_limit_is_stalled(tmp_path: Path) -> None:
    hb = _beats(tmp_path, steps_every=0, n_beats=12)  # 12 heartbeats in training, no step
    assert hb.max_beats_without_step == 11
    got = _judge(hb)["stall"]
    assert got["state"] == "raised" and "floor 0.1s: no timed step yet" in got["detail"]


def _job_files(tmp: Path, step_seconds: float, n_steps: int, beats_without_step: int) -> Path:
    """A job folder written as the job writes it: timed step records and a heartbeat file."""
    tmp.mkdir()
    for s in range(1, n_steps + 1):
        jobfiles.append_metric(tmp, _step(s, 1.0, seconds=step_seconds))
    jobfiles.write_heartbeat(
        tmp, _beat(time=time.time(), interval=2.0, max_beats_without_step=beats_without_step)
    )
    return tmp


def _read_beat(job_dir: Path) -> HeartbeatFile:
    beat = jobfiles.read_heartbeat(job_dir)
    assert beat is not None
    return beat


def test_stall_is_judged_against_the_jobs_own_step_time(tmp_path: Path) -> None:
    # ~20 s steps on a busy machine: 11 heartbeats of 2 s between steps is a healthy step, not a stall
    slow = _job_files(tmp_path / "slow", step_seconds=20.0, n_steps=12, beats_without_step=11)
    got = _judge(_read_beat(slow), jobfiles.read_metrics(slow), 300)
    stall = got["stall"]
    assert stall["state"] == "clear", stall["detail"]
    assert (
        stall["median_step_s"] == 20.0
        and stall["stall_limit_s"] == 100.0
        and stall["longest_without_step_s"] == 22.0
    )
    assert "vs limit 100s (5× median step 20s, floor 20s)" in stall["detail"]
    # the same job after 61 heartbeats (122 s) without a step: stalled
    stuck = _job_files(tmp_path / "stuck", step_seconds=20.0, n_steps=12, beats_without_step=61)
    got = _judge(_read_beat(stuck), jobfiles.read_metrics(stuck), 300)
    assert got["stall"]["state"] == "raised" and got["stall"]["longest_without_step_s"] == 122.0
    # fast steps: the contract's floor (10 heartbeats = 20 s) applies, not 5 × 0.1 s
    fast = _job_files(tmp_path / "fast", step_seconds=0.1, n_steps=12, beats_without_step=11)
    got = _judge(_read_beat(fast), jobfiles.read_metrics(fast), 300)
    assert got["stall"]["state"] == "raised" and got["stall"]["stall_limit_s"] == 20.0
    # the alarm's values fit its shape
    from claimcheck.engine.evidence import Check
    from claimcheck.engine.shapes import parse
    from claimcheck.engine.shapes.training import Alarm

    measured = {k: v for k, v in got["stall"].items() if k != "name"}
    chk = Check(id="dispatch.alarms.stall", status="warn", summary="x", measured=measured)
    assert parse(chk, Alarm).stall_limit_s == 20.0


def test_class_collapse_before_the_first_evaluation_says_so() -> None:
    got = alarms.class_collapse(_obs(_steps([1.0, 0.9])), Alarms())
    assert got["state"] == "not_run" and got["detail"] == "no dev evaluation yet"
    got = alarms.class_collapse(_obs([_eval(5, 0.4)]), Alarms())
    assert "not a classification job" in got["detail"]


def test_evaluate_reports_every_alarm_in_order_and_discloses_disabled() -> None:
    eff = {"alarms": {"disabled": ["divergence", "stall"]}}
    got = alarms.evaluate(_obs(_steps([1.0, 0.5]), total=2, beats=99), eff)
    assert [a["name"] for a in got] == list(alarms.ALARMS)
    states = {a["name"]: a["state"] for a in got}
    assert states["divergence"] == states["stall"] == "disabled"
    assert states["non_finite"] == "clear"


def test_heartbeat_age_and_interval() -> None:
    now = time.time()
    assert _files(None, None).heartbeat_age(now) == -1.0
    assert _files(None, {"time": now - 3}).heartbeat_age(now) == pytest.approx(3.0)
    assert _files({"heartbeat_seconds": 0.5}, None).heartbeat_interval() == 0.5
    assert _files(None, None).heartbeat_interval() == jobfiles.HEARTBEAT_SECONDS
    files = _files(
        {"step": 2, "max_beats_without_step": 7}, {"time": now, "beats": 3, "max_beats_without_step": 4}
    )
    assert json.loads(json.dumps(files.fields(now)))["heartbeats"] == 3
    assert files.max_beats_without_step() == 7  # the status the job last wrote can hold the longer stretch
