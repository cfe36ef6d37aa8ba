"""The Ray provider against a real Ray head on 127.0.0.1 (conftest.py's `ray_head`, one per worker process).

Proves: a tiny training job runs through Ray's Job Submission API end to end to a verified
artifact; a relaunch with the same identity adopts the job; a POST whose reply is dropped on the
wire (the server accepted it) does not make a second job; stop ends only that job. Skips with
the reason when `ray[default]` is not installed or the head cannot start.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from claimcheck.engine.evidence import digest_of
from claimcheck.engine.providers.base import operation_id
from claimcheck.engine.providers.ray_http import RayJobsError
from claimcheck.engine.providers.ray_jobs import RECORD, RayJobsProvider
from claimcheck.engine.providers.ray_testhead import LoopbackHead
from claimcheck.engine.training import jobfiles

pytestmark = pytest.mark.ray

CLASSES = ["billing", "login"]
WORDS = {"billing": "refund invoice charge card payment", "login": "password login reset account locked"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from claimcheck.engine.training.tiny import make_tiny_encoder

    ws = tmp_path_factory.mktemp("ray-ws")
    make_tiny_encoder(ws / "enc", num_labels=len(CLASSES))
    return ws


def _effective(max_steps: int) -> dict[str, Any]:
    return {
        "task_kind": "text_classification",
        "model_path": "enc",
        "adapter_mode": "head",
        "label_classes": CLASSES,
        "optimizer": {"name": "adamw", "lr": 1e-3, "head_lr": 0.0, "weight_decay": 0.0},
        "schedule": {"name": "linear", "warmup_ratio": 0.0},
        "micro_batch": 4,
        "grad_accum": 1,
        "dp_replicas": 1,
        "precision": "fp32",
        "max_length": 32,
        "max_steps": max_steps,
        "epochs": 1,
        "seed": 0,
        "text_template": "{text}",
        "eval_every_steps": 0,
        "checkpoint_every_steps": 0,
        "checkpoint_selection": "last",
        "device": "cpu",
    }


def make_job(
    root: Path,
    workspace: Path,
    attempt: int,
    *,
    max_steps: int = 4,
    output_root: Path | None = None,
    step_delay: float = 0.0,
) -> tuple[Path, str]:
    """A job directory as the dispatch stage writes it: contract copy + train/dev row files."""
    import polars as pl

    eff = _effective(max_steps)
    digest = digest_of(eff)
    op = operation_id(digest, attempt)
    rows = [{"row_id": i, "text": f"{WORDS[c]} {i}", "target": c} for i, c in enumerate(CLASSES * 12)]
    runtime: dict[str, Any] = {"heartbeat_seconds": 0.5, "threads": 1, "step_delay_seconds": step_delay}
    if output_root is not None:
        runtime["output_location"] = str(output_root.resolve() / op)
    job_dir = root / "jobs" / op
    jobfiles.write_job_dir(
        job_dir,
        effective=eff,
        digest=digest,
        op_id=op,
        attempt=attempt,
        train=pl.DataFrame(rows[:16]),
        dev=pl.DataFrame(rows[16:]),
        workspace=workspace,
        runtime=runtime,
    )
    return job_dir, op


def _ours(provider: RayJobsProvider, op: str) -> list[dict[str, Any]]:
    return [j for j in provider.client.list() if j.get("submission_id") == op]


def test_tiny_job_end_to_end_to_a_verified_artifact(
    ray_head: LoopbackHead, workspace: Path, tmp_path: Path
) -> None:
    from claimcheck.engine.training.artifact_files import verify_artifact

    shared = tmp_path / "shared"  # the "shared storage" output location, apart from the session
    job_dir, op = make_job(tmp_path, workspace, attempt=1, output_root=shared)
    prov = RayJobsProvider(tmp_path / "jobs", address=ray_head.address, output_root=shared)

    handle = prov.launch(job_dir, op)
    assert handle.started and handle.ref == op
    rec = json.loads((job_dir / RECORD).read_text())
    assert rec["ray_version"] == ray_head.ray_version != ""
    assert rec["entrypoint"].endswith(f"-m claimcheck.engine.training.job {shared.resolve() / op}")
    assert (
        "PYTHONPATH" not in rec["runtime_env"]["env_vars"]  # the cluster's Python has claimcheck installed
        and rec["outcome"] == "submitted"
        and rec["posts"] == 1
    )

    st = prov.wait(handle, timeout=150, poll=0.5)
    assert st.phase == "done", st.reason
    assert st.step == st.total_steps == 4
    dest = prov.fetch(handle)
    assert dest == job_dir
    assert verify_artifact(job_dir / "final")["ok"]
    rec = json.loads((job_dir / RECORD).read_text())
    assert rec["fetch"]["ok"] and rec["fetch"]["copied_from"] == str(shared.resolve() / op / "final")
    assert rec["ray_status"] == "SUCCEEDED"
    assert f"Running entrypoint for job {op}" in (job_dir / jobfiles.LOG).read_text()
    steps = jobfiles.latest_steps(jobfiles.read_metrics(job_dir))
    assert [r.step for r in steps] == [1, 2, 3, 4]  # mirrored home from the output location

    # The same identity again: adopted, never a second Ray job.
    again = prov.launch(job_dir, op)
    assert not again.started
    assert len(_ours(prov, op)) == 1
    assert json.loads((job_dir / RECORD).read_text())["outcome"] == "submitted"

    # A changed byte in the output location's artifact is caught when it is fetched.
    weights = shared / op / "final" / "trainable.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")
    with pytest.raises(RayJobsError, match="failed verification"):
        prov.fetch(handle)


class _DroppingProxy(BaseHTTPRequestHandler):
    """Forwards to Ray; for the first `drop` POSTs to /api/jobs/ it forwards, then hangs up."""

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self, method: str) -> None:
        srv = self.server
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0)) or None
        target = urllib.parse.urlparse(srv.upstream)  # type: ignore[attr-defined]
        conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
        headers = {"Content-Type": "application/json"} if body else {}
        conn.request(method, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if method == "POST" and self.path == "/api/jobs/" and srv.drop > 0:  # type: ignore[attr-defined]
            srv.drop -= 1  # type: ignore[attr-defined]
            srv.dropped.append(resp.status)  # type: ignore[attr-defined]
            self.close_connection = True  # Ray accepted it; the caller never hears so
            return
        self.send_response(resp.status)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Content-Type", resp.getheader("Content-Type", "application/json"))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._forward("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._forward("POST")


def test_lost_reply_adopts_and_stop_ends_only_that_job(
    ray_head: LoopbackHead, workspace: Path, tmp_path: Path
) -> None:
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _DroppingProxy)
    proxy.upstream, proxy.drop, proxy.dropped = ray_head.address, 1, []  # type: ignore[attr-defined]
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    direct = RayJobsProvider(tmp_path / "jobs", address=ray_head.address)
    bystander = f"bystander-{os.getpid()}-{time.time_ns()}"
    try:
        # In place: the session's job folder is the output location.
        job_dir, op = make_job(tmp_path, workspace, attempt=2, max_steps=40, step_delay=0.5)
        prov = RayJobsProvider(tmp_path / "jobs", address=f"http://127.0.0.1:{proxy.server_address[1]}")
        handle = prov.launch(job_dir, op)
        assert proxy.dropped == [200]  # the POST reached Ray and was accepted; its reply was lost
        rec = json.loads((job_dir / RECORD).read_text())
        assert rec["outcome"] == "reconciled" and rec["posts"] == 1 and rec["uncertain_replies"]
        assert handle.started
        assert len(_ours(direct, op)) == 1

        # Another job on the same cluster, not ours to stop.
        direct.client.submit(
            {"entrypoint": "sleep 120", "submission_id": bystander, "entrypoint_num_cpus": 0}
        )
        deadline = time.monotonic() + 120
        st = direct.status(handle)
        while st.phase != "training" and time.monotonic() < deadline:
            assert not st.terminal, st.reason
            time.sleep(0.5)
            st = direct.status(handle)
        assert st.phase == "training", st.reason

        direct.cancel(handle)
        st = direct.wait(handle, timeout=60, poll=0.5)
        assert st.phase == "cancelled", st.reason
        assert "SIGTERM" in st.reason  # the job wrote it itself from its signal handler
        assert st.step < st.total_steps
        # The job's own word comes first; Ray marks it STOPPED once the process has exited.
        deadline = time.monotonic() + 30
        while (direct.client.get(op) or {}).get("status") == "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (direct.client.get(op) or {}).get("status") == "STOPPED"
        assert (direct.client.get(bystander) or {}).get("status") in ("PENDING", "RUNNING")
        direct.fetch(handle)
        assert not (job_dir / "final").exists()
        assert json.loads((job_dir / RECORD).read_text())["fetch"]["phase"] == "cancelled"
    finally:
        proxy.shutdown()
        proxy.server_close()
        try:
            direct.client.stop(bystander)
        except RayJobsError:
            pass
    shutil.rmtree(tmp_path / "jobs", ignore_errors=True)


def test_heads_on_one_machine_keep_off_the_ray_client_server_ports_and_connect_one_at_a_time() -> None:
    """Workers' ports stay out of the range Ray's proxy gives its Ray Client servers, and a driver
    connecting holds a lock another process waits for (ray_testhead.CLIENT_SERVER_PORTS' comment)."""
    import subprocess
    import sys

    from claimcheck.engine.providers import ray_testhead as H

    for _ in range(20):
        base = H._free_range()
        assert not set(range(base, base + 100)) & set(H.CLIENT_SERVER_PORTS)
    probe = (
        "import sys; from claimcheck.engine.providers.ray_testhead import connecting\n"
        "try:\n    with connecting(timeout_s=float(sys.argv[1])): print('took it')\n"
        "except TimeoutError as exc: print('waited:', exc)"
    )

    def other(timeout_s: float) -> str:
        run = subprocess.run([sys.executable, "-c", probe, str(timeout_s)], capture_output=True, text=True)
        return run.stdout.strip() + run.stderr.strip()

    with H.connecting():
        assert other(1.0).startswith("waited:")
    assert other(60.0) == "took it"
