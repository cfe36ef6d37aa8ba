"""The Ray provider's decisions without a Ray cluster: HTTP failure classes, idempotent launch,
and how a Ray status plus the job's own files become a stage. (The real-cluster tests are in
test_provider_ray.py.)"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from claimcheck.engine.evidence import dump_toml
from claimcheck.engine.providers.base import Provider
from claimcheck.engine.providers.ray_http import (
    RayHTTPError,
    RayJobsClient,
    RayJobsError,
    RayUncertain,
    RayUnreachable,
)
from claimcheck.engine.providers.ray_jobs import RECORD, RayJobsProvider
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import HeartbeatFile, StatusFile, StepLine

OP = "0123456789abcdef-a1"


class FakeRay:
    """An in-memory stand-in for the Job Submission API with Ray's answers for each case."""

    address = "http://127.0.0.1:1"

    def __init__(self) -> None:
        self.jobs: dict[str, dict[str, Any]] = {}
        self.posts = 0
        # How each POST behaves: "ok", "lost" (accepted, reply dropped), "void" (never arrived).
        self.post_plan: list[str] = []
        self.unreachable = False

    def version(self) -> dict[str, Any]:
        return {"ray_version": "9.9.9"}

    def submit(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.posts += 1
        mode = self.post_plan.pop(0) if self.post_plan else "ok"
        if mode == "void":
            raise RayUncertain("POST /api/jobs/: no reply (simulated: never arrived)")
        sid = payload["submission_id"]
        if sid in self.jobs:
            raise RayHTTPError(
                500, f"ValueError: Job with submission_id {sid} already exists.", "POST /api/jobs/"
            )
        self.jobs[sid] = {
            **payload,
            "status": "PENDING",
            "message": "",
            "start_time": int(time.time() * 1000),
        }
        if mode == "lost":
            raise RayUncertain("POST /api/jobs/: no reply (simulated: accepted, reply dropped)")
        return {"submission_id": sid}

    def get(self, sid: str) -> dict[str, Any] | None:
        if self.unreachable:
            raise RayUnreachable("simulated: dashboard down")
        return self.jobs.get(sid)

    def list(self) -> list[dict[str, Any]]:
        return list(self.jobs.values())

    def logs(self, sid: str) -> str:
        return f"logs of {sid}\n"

    def stop(self, sid: str) -> bool:
        if sid not in self.jobs:
            return False
        self.jobs[sid]["status"] = "STOPPED"
        return True

    def delete(self, sid: str) -> bool:
        return self.jobs.pop(sid, None) is not None


def _job_dir(root: Path, runtime: dict[str, Any] | None = None) -> Path:
    job_dir = root / "jobs" / OP
    (job_dir / "data").mkdir(parents=True)
    (job_dir / "data" / "train.jsonl").write_bytes(b"x")
    doc = {
        "operation_id": OP,
        "digest": "sha256:" + "0" * 64,
        "runtime": runtime or {},
        "effective": {"seed": 0},
    }
    (job_dir / jobfiles.CONTRACT).write_text(dump_toml(doc))
    return job_dir


def _provider(root: Path, fake: FakeRay, **kw: Any) -> RayJobsProvider:
    return RayJobsProvider(root / "jobs", client=fake, reconcile_s=0.6, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- launch: one identity, one job


def test_lost_reply_is_reconciled_not_resubmitted(tmp_path: Path) -> None:
    fake = FakeRay()
    fake.post_plan = ["lost"]
    prov = _provider(tmp_path, fake)
    handle = prov.launch(_job_dir(tmp_path), OP)
    assert fake.posts == 1 and list(fake.jobs) == [OP]
    assert handle.started is True  # our nonce is on the job Ray holds
    rec = json.loads((handle.job_dir / RECORD).read_text())
    assert rec["outcome"] == "reconciled" and rec["posts"] == 1 and rec["uncertain_replies"]


def test_post_that_never_arrived_is_resent_with_the_same_id(tmp_path: Path) -> None:
    fake = FakeRay()
    fake.post_plan = ["void", "ok"]
    handle = _provider(tmp_path, fake).launch(_job_dir(tmp_path), OP)
    assert fake.posts == 2 and list(fake.jobs) == [OP] and handle.started


def test_every_reply_lost_gives_up_bounded(tmp_path: Path) -> None:
    fake = FakeRay()
    fake.post_plan = ["void"] * 10
    with pytest.raises(RayUncertain, match="nothing was started twice"):
        _provider(tmp_path, fake, max_posts=2).launch(_job_dir(tmp_path), OP)
    assert fake.posts == 2 and not fake.jobs


def test_already_exists_means_adopt(tmp_path: Path) -> None:
    fake = FakeRay()
    job_dir = _job_dir(tmp_path)
    prov = _provider(tmp_path, fake)
    first = prov.launch(job_dir, OP)
    # A second launcher that did not see the job on its GET (a race) gets "already exists" from Ray.
    real_get = fake.get
    misses = [True]
    fake.get = lambda sid: None if misses and misses.pop() else real_get(sid)  # type: ignore[method-assign]
    second = prov.launch(job_dir, OP)
    assert first.started and not second.started
    assert fake.posts == 2 and len(fake.jobs) == 1
    # And a plain relaunch adopts after its GET, without any POST.
    fake.get = real_get  # type: ignore[method-assign]
    third = prov.launch(job_dir, OP)
    assert not third.started and fake.posts == 2


def test_same_id_from_another_output_location_is_refused(tmp_path: Path) -> None:
    fake = FakeRay()
    fake.jobs[OP] = {
        "status": "RUNNING",
        "metadata": {"claimcheck_op_id": OP, "claimcheck_output": "/elsewhere"},
    }
    with pytest.raises(RayJobsError, match="was not submitted for this job directory"):
        _provider(tmp_path, fake).launch(_job_dir(tmp_path), OP)
    assert fake.posts == 0


def test_output_location_must_be_named_in_the_contract(tmp_path: Path) -> None:
    fake = FakeRay()
    prov = _provider(tmp_path, fake, output_root=tmp_path / "shared")
    with pytest.raises(ValueError, match="must name it before launch"):
        prov.launch(_job_dir(tmp_path), OP)
    assert fake.posts == 0


def test_inputs_staged_to_the_named_output_location(tmp_path: Path) -> None:
    fake = FakeRay()
    out = tmp_path / "shared" / OP
    job_dir = _job_dir(tmp_path, {"output_location": str(out)})
    prov = _provider(tmp_path, fake, output_root=tmp_path / "shared")
    assert isinstance(prov, Provider)  # the same interface as the local provider
    prov.launch(job_dir, OP)
    assert (out / jobfiles.CONTRACT).read_bytes() == (job_dir / jobfiles.CONTRACT).read_bytes()
    assert (out / "data" / "train.jsonl").exists()
    payload = fake.jobs[OP]
    assert payload["entrypoint"].endswith(f"-m claimcheck.engine.training.job {out}")
    assert "working_dir" not in payload["runtime_env"]  # the session folder is never uploaded
    rec = json.loads((job_dir / RECORD).read_text())
    assert rec["output_location"] == str(out) and rec["ray_version"] == "9.9.9"


# ---------------------------------------------------------------- status: Ray's word + the job's files


def _write_progress(
    job_dir: Path, stage: str, *, hb_age: float | None, step: int = 3, total: int = 4
) -> None:
    jobfiles.write_status(job_dir, StatusFile(phase=stage, step=step, total_steps=total, pid=1))
    if hb_age is not None:
        hb = HeartbeatFile(time=time.time() - hb_age, beats=7, interval=0.5, phase="training")
        jobfiles.write_heartbeat(job_dir, hb)
    for s in range(1, step + 1):
        jobfiles.append_metric(job_dir, _step(s))


def _step(s: int) -> StepLine:
    return StepLine(
        kind="step", step=s, time=float(s), loss=1.0, lr=1e-3, grad_norm=1.0, seconds=0.1, epoch=0.1
    )


@pytest.fixture()
def running(tmp_path: Path) -> tuple[RayJobsProvider, FakeRay, Any]:
    fake = FakeRay()
    prov = _provider(tmp_path, fake)
    handle = prov.launch(_job_dir(tmp_path), OP)
    fake.jobs[OP].update(status="RUNNING", start_time=int((time.time() - 100) * 1000))
    return prov, fake, handle


def test_running_with_fresh_heartbeat_shows_the_jobs_stage(running: Any) -> None:
    prov, _, handle = running
    _write_progress(handle.job_dir, "training", hb_age=0.1)
    st = prov.status(handle)
    assert (st.phase, st.step, st.alive) == ("training", 3, True)


def test_running_with_stopped_heartbeat_is_unconfirmed(running: Any) -> None:
    prov, _, handle = running
    _write_progress(handle.job_dir, "training", hb_age=30.0)
    st = prov.status(handle)
    assert st.phase == "unconfirmed" and not st.running and not st.terminal
    assert "heartbeat is 30" in st.reason


def test_running_without_any_heartbeat_past_the_grace_is_unconfirmed(running: Any) -> None:
    prov, fake, handle = running
    assert prov.status(handle).phase == "launching"
    # A heartbeat older than this Ray run (left by an earlier run) does not count for it.
    _write_progress(handle.job_dir, "training", hb_age=500.0)
    assert prov.status(handle).phase == "launching"
    fake.jobs[OP]["start_time"] = int((time.time() - 10_000) * 1000)
    assert prov.status(handle).phase == "unconfirmed"


def test_unreachable_dashboard_is_unconfirmed_not_running(running: Any) -> None:
    prov, fake, handle = running
    _write_progress(handle.job_dir, "training", hb_age=0.1)
    fake.unreachable = True
    st = prov.status(handle)
    assert st.phase == "unconfirmed" and "cannot be asked" in st.reason


def test_ray_succeeded_is_not_success_without_the_jobs_own_done(running: Any) -> None:
    prov, fake, handle = running
    _write_progress(handle.job_dir, "training", hb_age=0.1)
    fake.jobs[OP].update(status="SUCCEEDED", message="Job finished successfully.")
    st = prov.status(handle)
    assert st.phase == "failed" and "never wrote a terminal status" in st.reason


def test_done_needs_every_step_and_a_manifest(running: Any) -> None:
    prov, fake, handle = running
    fake.jobs[OP]["status"] = "SUCCEEDED"
    _write_progress(handle.job_dir, "done", hb_age=0.1, step=3, total=4)
    st = prov.status(handle)
    assert st.phase == "failed" and "step 3 of 4" in st.reason
    jobfiles.append_metric(handle.job_dir, _step(4))
    assert "manifest.json is missing" in prov.status(handle).reason
    (handle.job_dir / "final").mkdir()
    (handle.job_dir / "final" / "manifest.json").write_text("{}")
    assert prov.status(handle).phase == "done"


def test_ray_stopped_before_the_job_wrote_its_status_is_cancelled(running: Any) -> None:
    prov, fake, handle = running
    _write_progress(handle.job_dir, "training", hb_age=0.1)
    fake.jobs[OP]["status"] = "STOPPED"
    assert prov.status(handle).phase == "cancelled"
    rec = json.loads((handle.job_dir / RECORD).read_text())
    assert rec["ray_status"] == "STOPPED"  # Ray's last word kept in the record


def test_job_unknown_to_ray_is_lost(running: Any) -> None:
    prov, fake, handle = running
    _write_progress(handle.job_dir, "training", hb_age=0.1)
    fake.jobs.clear()
    assert prov.status(handle).phase == "lost"


# ---------------------------------------------------------------- the HTTP client against a socket


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path == "/api/jobs/missing":
            body = b"Job missing does not exist"
            self.send_response(404)
        else:
            body = json.dumps({"submission_id": self.path.rsplit("/", 1)[-1], "status": "RUNNING"}).encode()
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        self.server.posts += 1  # type: ignore[attr-defined]
        self.close_connection = True  # read the request, then hang up without a reply


def test_client_classifies_failures_over_a_real_socket() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.posts = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = RayJobsClient(f"http://127.0.0.1:{server.server_address[1]}", timeout=5, retries=1)
        assert client.get("missing") is None
        assert client.get("abc")["status"] == "RUNNING"
        with pytest.raises(RayUncertain):
            client.submit({"entrypoint": "true", "submission_id": "abc"})
        assert server.posts == 1  # it arrived: the caller must reconcile, not resend blindly
    finally:
        server.shutdown()
        server.server_close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    with pytest.raises(RayUnreachable):
        RayJobsClient(f"http://127.0.0.1:{closed_port}", timeout=2, retries=1).submit({"entrypoint": "true"})


def test_client_rejects_a_non_http_address() -> None:
    with pytest.raises(ValueError, match="not an http"):
        RayJobsClient("ftp://127.0.0.1:8265")


def test_provider_module_needs_neither_ray_nor_torch() -> None:
    import subprocess
    import sys

    code = "import claimcheck.engine.providers.ray_jobs, sys, json; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert not loaded & {"ray", "torch", "transformers", "requests", "httpx"}


def test_resume_resubmits_an_unfinished_job_under_the_same_id(running: Any) -> None:
    prov, fake, handle = running
    _write_progress(handle.job_dir, "cancelled", hb_age=50.0)
    fake.jobs[OP]["status"] = "STOPPED"
    adopted = prov.launch(handle.job_dir, OP)  # without resume: adopted as it is
    assert not adopted.started and fake.posts == 1
    resumed = prov.launch(handle.job_dir, OP, resume=True)
    assert resumed.started and fake.posts == 2 and list(fake.jobs) == [OP]
    st = prov.status(resumed)
    assert st.phase == "launching"  # the previous run's "cancelled" does not speak for this run
    rec = json.loads((handle.job_dir / RECORD).read_text())
    assert rec["previous_runs"] and rec["posts"] == 2
    assert "logs of" in (handle.job_dir / jobfiles.LOG).read_text()
