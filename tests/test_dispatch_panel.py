"""The dispatch panel judges each job through the provider that runs it: a job on Ray is asked of
Ray (here a stand-in dashboard on 127.0.0.1), never taken for a dead local process."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import HeartbeatFile, PidFile, StatusFile

OP = "0123456789abcdef-a1"


class _Dashboard(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.server.gets += 1  # type: ignore[attr-defined]
        sid = self.path.rstrip("/").rsplit("/", 1)[-1]
        if sid == OP:
            start_ms = int((time.time() - 30) * 1000)
            body = json.dumps({"submission_id": OP, "status": "RUNNING", "start_time": start_ms}).encode()
            self.send_response(200)
        else:
            body = b"no such job"
            self.send_response(404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def dashboard() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    server.gets = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _address(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _running_job(jobs: Path) -> Path:
    """A job beating in training, with no local process (it runs on the cluster)."""
    jd = jobs / OP
    jd.mkdir(parents=True)
    jobfiles.write_status(jd, StatusFile(phase="training", step=7, total_steps=20))
    jobfiles.write_heartbeat(
        jd, HeartbeatFile(time=time.time(), beats=3, interval=60, step=7, phase="training")
    )
    return jd


def test_a_ray_job_is_judged_by_ray_from_its_own_record(tmp_path: Path, dashboard) -> None:
    from claimcheck.tui.panels import poll_jobs

    jd = _running_job(tmp_path / "jobs")
    (jd / jobfiles.RAY_RECORD).write_text(
        json.dumps({"provider": "ray", "address": _address(dashboard), "output_location": str(jd)})
    )
    [job] = poll_jobs(tmp_path / "jobs")
    assert job.phase == "training" and job.running and job.alive
    assert dashboard.gets >= 1  # asked of Ray


def test_the_dispatch_records_provider_is_used(tmp_path: Path, dashboard) -> None:
    from claimcheck.tui.panels import poll_jobs

    _running_job(tmp_path / "jobs")
    # judged as a local job, it has no process: not running
    [local] = poll_jobs(tmp_path / "jobs")
    assert local.phase == "not_found" and not local.running
    # the dispatch record names Ray: the same files are a running Ray job
    inputs = {"provider": "ray", "ray_address": _address(dashboard)}
    [ray] = poll_jobs(tmp_path / "jobs", inputs)
    assert ray.phase == "training" and ray.running


def test_an_earlier_local_attempt_stays_local(tmp_path: Path, dashboard) -> None:
    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.providers.ray_jobs import RayJobsProvider
    from claimcheck.engine.providers.registry import for_job

    jd = _running_job(tmp_path / "jobs")
    inputs = {"provider": "ray", "ray_address": _address(dashboard)}
    assert isinstance(for_job(jd, inputs), RayJobsProvider)
    jobfiles.write_pid(jd, PidFile(pid=0, host="elsewhere"))
    assert isinstance(for_job(jd, inputs), LocalProvider)  # its folder says where it ran
