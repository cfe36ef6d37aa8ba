"""The Ray provider: the job runs on a Ray cluster through Ray's Job Submission REST API.

The app talks to the dashboard (`POST /api/jobs/`, `GET /api/jobs/{id}`, `/logs`, `/stop`) with
the standard library's HTTP client, so it never imports the 200 MB `ray` package; `ray[default]`
is needed only on the cluster (and by the tests, which start a head on 127.0.0.1).

Identity: the Ray submission id IS the operation id (contract digest + attempt). Ray refuses a
second job with the same submission id, so a launch can never start two jobs for one identity:
"already exists" means adopt; an uncertain reply (timeout, dropped connection) is reconciled with
`GET /api/jobs/{id}` before anything is sent again, and re-sending reuses the same id.

Shared storage: the job reads and writes one folder both the app and the cluster can see — the
output location. By default that is the session's job directory itself (same machine, or a
session folder on a shared mount). With `output_root` set, the inputs (contract.toml, data/) are
staged to `output_root/<op_id>/` before launch, progress files are mirrored back on each status
call, and the artifact is copied home and its checksums verified by `fetch`.

Success is never read from a log stream ending or an exit code: it is the job's own status.json
("done"), its metrics.jsonl reaching the last step and a verified artifact manifest. Ray's own
status only says whether the process can still be running. A RUNNING job whose heartbeat stopped
is "unconfirmed", not running.

Everything the provider did is kept in `<job_dir>/ray.json`: address, cluster Ray version,
submission id, entrypoint, runtime environment, resources, output location (written before the
first POST), how the launch ended (submitted / adopted / reconciled), and Ray's final word.
"""

from __future__ import annotations

import errno
import hashlib
import http.client
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.evidence import atomic_write_text, now_iso
from engine.providers.base import TERMINAL_STAGES, Handle, JobStatus, require_job_dir
from engine.training import job as jobfiles

RECORD = "ray.json"
# Small files the job rewrites while it runs; mirrored from the output location on each status.
PROGRESS_FILES = (jobfiles.STATUS, jobfiles.HEARTBEAT, jobfiles.METRICS)
RAY_TERMINAL = ("STOPPED", "SUCCEEDED", "FAILED")
# A heartbeat older than this many intervals means the job is not confirmed alive.
STALL_INTERVALS = 5
META_PREFIX = "claimcheck_"


# ---------------------------------------------------------------- HTTP client


class RayJobsError(RuntimeError):
    """A definite failure talking to Ray (the request was refused or answered with an error)."""


class RayUnreachable(RayJobsError):
    """The request never reached the dashboard (connection refused, bad host): safe to retry."""


class RayUncertain(RayJobsError):
    """The request may have reached the dashboard but no reply came (timeout, dropped connection)."""


class RayHTTPError(RayJobsError):
    def __init__(self, status: int, body: str, what: str):
        super().__init__(f"{what}: HTTP {status}: {_first_lines(body)}")
        self.status, self.body = status, body


def _first_lines(text: str, n: int = 3) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    # Ray answers errors with a Python traceback: its last line is the message.
    return " | ".join(lines[-n:])[:500]


class RayJobsClient:
    """Ray's Job Submission REST API over urllib (no proxies: the address is used as given)."""

    def __init__(self, address: str, *, timeout: float = 30.0, retries: int = 3):
        parsed = urllib.parse.urlparse(address if "://" in address else f"http://{address}")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"Ray dashboard address {address!r} is not an http(s)://host:port URL")
        self.address = f"{parsed.scheme}://{parsed.netloc}"
        self.timeout = float(timeout)
        self.retries = max(1, int(retries))
        # An empty ProxyHandler: an http_proxy variable must not reroute the cluster's traffic.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
        """One HTTP exchange. Returns (status, body) for every HTTP answer, 4xx/5xx included."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.address + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=self.timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except urllib.error.URLError as exc:
            # Raised while connecting / sending: refused means nothing arrived.
            reason = exc.reason
            if isinstance(reason, ConnectionRefusedError | socket.gaierror) or (
                isinstance(reason, OSError) and reason.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH)
            ):
                raise RayUnreachable(f"Ray dashboard {self.address} unreachable: {reason}") from None
            raise RayUncertain(
                f"{method} {path}: no complete exchange with {self.address}: {reason}"
            ) from None
        except (TimeoutError, http.client.HTTPException, ConnectionError, OSError) as exc:
            # Raised while waiting for the reply: the server may have acted on the request.
            raise RayUncertain(
                f"{method} {path}: no reply from {self.address}: {type(exc).__name__}: {exc}"
            ) from None

    def _get(self, path: str) -> tuple[int, bytes]:
        """GET with a bounded retry: reading is always safe to repeat."""
        last: RayJobsError | None = None
        for i in range(self.retries):
            try:
                return self._request("GET", path)
            except (RayUncertain, RayUnreachable) as exc:
                last = exc
                time.sleep(min(2.0, 0.25 * (2**i)))
        assert last is not None
        raise last

    @staticmethod
    def _json(status: int, raw: bytes, what: str) -> Any:
        text = raw.decode(errors="replace")
        if status != 200:
            raise RayHTTPError(status, text, what)
        try:
            return json.loads(text)
        except ValueError:
            raise RayHTTPError(status, text, f"{what} (reply is not JSON)") from None

    def version(self) -> dict[str, Any]:
        return self._json(*self._get("/api/version"), "GET /api/version")

    def submit(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST /api/jobs/ once (never retried here: the caller reconciles an uncertain reply)."""
        status, raw = self._request("POST", "/api/jobs/", payload)
        return self._json(status, raw, "POST /api/jobs/")

    def get(self, submission_id: str) -> dict[str, Any] | None:
        status, raw = self._get(f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}")
        if status == 404:
            return None
        return self._json(status, raw, f"GET /api/jobs/{submission_id}")

    def list(self) -> list[dict[str, Any]]:
        return self._json(*self._get("/api/jobs/"), "GET /api/jobs/")

    def logs(self, submission_id: str) -> str:
        status, raw = self._get(f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}/logs")
        return str(self._json(status, raw, f"GET /api/jobs/{submission_id}/logs").get("logs", ""))

    def stop(self, submission_id: str) -> bool:
        status, raw = self._request("POST", f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}/stop")
        if status == 404:
            return False
        return bool(self._json(status, raw, f"POST /api/jobs/{submission_id}/stop").get("stopped", False))

    def delete(self, submission_id: str) -> bool:
        status, raw = self._request("DELETE", f"/api/jobs/{urllib.parse.quote(submission_id, safe='')}")
        if status == 404:
            return False
        return bool(self._json(status, raw, f"DELETE /api/jobs/{submission_id}").get("deleted", False))


def _already_exists(exc: RayHTTPError) -> bool:
    return "already exists" in exc.body


# ---------------------------------------------------------------- provider


@dataclass
class RayResources:
    """What one job asks of the cluster (Ray schedules the entrypoint with these)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    memory_bytes: int = 0  # 0 = no memory reservation

    def payload(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entrypoint_num_cpus": self.num_cpus, "entrypoint_num_gpus": self.num_gpus}
        if self.memory_bytes > 0:
            out["entrypoint_memory"] = int(self.memory_bytes)
        return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _copy_if_changed(src: Path, dst: Path) -> None:
    try:
        data = src.read_bytes()
    except OSError:
        return
    try:
        if dst.read_bytes() == data:
            return
    except OSError:
        pass
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, dst)


class RayJobsProvider:
    name = "ray"

    def __init__(
        self,
        jobs_root: Path,
        *,
        address: str = "http://127.0.0.1:8265",
        resources: RayResources | dict[str, Any] | None = None,
        output_root: Path | str | None = None,
        python: str | None = None,
        code_root: Path | str | None = None,
        client: RayJobsClient | None = None,
        reconcile_s: float = 15.0,
        max_posts: int = 3,
        startup_grace_s: float = 180.0,
        fetch_wait_s: float = 30.0,
    ):
        self.jobs_root = Path(jobs_root)
        self.client = client or RayJobsClient(address)
        self.address = self.client.address
        if isinstance(resources, dict):
            resources = RayResources(**resources)
        self.resources = resources or RayResources()
        self.output_root = Path(output_root).resolve() if output_root else None
        # Same-machine / shared-image clusters: the app's interpreter and code path are valid there.
        self.python = python or sys.executable
        self.code_root = Path(code_root) if code_root else Path(__file__).resolve().parents[2]
        self.reconcile_s = reconcile_s
        self.max_posts = max(1, max_posts)
        self.startup_grace_s = startup_grace_s
        self.fetch_wait_s = fetch_wait_s

    # ------------------------------------------------------------ places and records

    def job_dir(self, op_id: str) -> Path:
        return self.jobs_root / op_id

    def output_dir(self, op_id: str) -> Path:
        """Where the job itself reads and writes (the shared-storage output location)."""
        if self.output_root is None:
            return self.job_dir(op_id).resolve()
        return self.output_root / op_id

    def _record(self, job_dir: Path) -> dict[str, Any]:
        try:
            doc = json.loads((job_dir / RECORD).read_text())
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _update_record(self, job_dir: Path, **fields: Any) -> dict[str, Any]:
        doc = {**self._record(job_dir), **fields}
        atomic_write_text(job_dir / RECORD, json.dumps(doc, indent=1, sort_keys=True))
        return doc

    def _out(self, handle: Handle) -> Path:
        rec = self._record(handle.job_dir)
        return Path(rec["output_location"]) if rec.get("output_location") else self.output_dir(handle.op_id)

    def entrypoint(self, out_dir: Path) -> str:
        return f"{shlex.quote(self.python)} -m engine.training.job {shlex.quote(str(out_dir))}"

    def runtime_env(self) -> dict[str, Any]:
        # No working_dir: Ray would upload it, and a session folder can hold large data.
        return {"env_vars": {"PYTHONPATH": str(self.code_root), "PYTHONUNBUFFERED": "1"}}

    # ------------------------------------------------------------ find / launch

    def find(self, op_id: str) -> Handle | None:
        """The Ray job with this submission id, or None (never launches)."""
        info = self.client.get(op_id)
        if info is None:
            return None
        return Handle(op_id=op_id, job_dir=self.job_dir(op_id), provider=self.name, ref=op_id, started=False)

    def launch(self, job_dir: Path, op_id: str, *, resume: bool = False) -> Handle:
        """Submit the job under its identity, or adopt the Ray job already holding it.

        A finished job is adopted as it is. With `resume`, a job that ended without "done"
        (lost, failed, stopped) is deleted from Ray's table — its logs kept first — and submitted
        again under the same id; the training job continues from its last checkpoint.
        """
        job_dir = require_job_dir(job_dir, self.job_dir(op_id), op_id)
        out_dir = self._named_output(job_dir, op_id)

        existing = self.client.get(op_id)
        if existing is not None:
            self._check_ours(existing, op_id, out_dir)
            if resume and existing.get("status") in RAY_TERMINAL:
                handle = Handle(op_id, job_dir, self.name, op_id, False)
                if self.status(handle).stage != "done":
                    return self._resubmit(job_dir, op_id, out_dir)
            self._ensure_record(job_dir, op_id, out_dir, existing, outcome="adopted")
            return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref=op_id, started=False)
        return self._submit(job_dir, op_id, out_dir)

    def _named_output(self, job_dir: Path, op_id: str) -> Path:
        """The output location, as the contract copy names it; staged inputs when it is elsewhere."""
        out_dir = self.output_dir(op_id)
        runtime = jobfiles.read_contract(job_dir).get("runtime", {}) or {}
        named = str(runtime.get("output_location", "") or "")
        if self.output_root is not None:
            if not named:
                raise ValueError(
                    f"{job_dir / jobfiles.CONTRACT} does not name an output location; the contract must name "
                    f"it before launch (runtime.output_location = {str(out_dir)!r})"
                )
            if Path(named).resolve() != out_dir.resolve():
                raise ValueError(
                    f"the contract names output location {named!r} but the ray provider writes to {out_dir}"
                )
            self._stage_inputs(job_dir, out_dir)
        elif named and Path(named).resolve() != out_dir:
            raise ValueError(
                f"the contract names output location {named!r}; configure the provider's output_root"
            )
        return out_dir

    def _stage_inputs(self, job_dir: Path, out_dir: Path) -> None:
        """Copy contract.toml and data/ to the output location (the job reads only its own folder)."""
        src_contract = job_dir / jobfiles.CONTRACT
        dst_contract = out_dir / jobfiles.CONTRACT
        if dst_contract.exists():
            if _sha256(dst_contract) != _sha256(src_contract):
                raise ValueError(
                    f"{dst_contract} holds a different contract than {src_contract}: one identity, two contracts"
                )
            return
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=out_dir))
        try:
            shutil.copytree(job_dir / "data", tmp / "data")
            shutil.copy2(src_contract, tmp / jobfiles.CONTRACT)
            shutil.rmtree(out_dir / "data", ignore_errors=True)  # a staging cut short before the contract
            os.replace(tmp / "data", out_dir / "data")
            os.replace(tmp / jobfiles.CONTRACT, dst_contract)  # last: its presence means "staged"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def _check_ours(self, info: dict[str, Any], op_id: str, out_dir: Path) -> None:
        meta = info.get("metadata") or {}
        theirs = meta.get(META_PREFIX + "output", "")
        if meta.get(META_PREFIX + "op_id") != op_id or Path(theirs).resolve() != out_dir.resolve():
            raise RayJobsError(
                f"Ray job {op_id!r} on {self.address} was not submitted for this job directory "
                f"(its output location: {theirs or 'not a claimcheck job'}; ours: {out_dir}); "
                "use another attempt number"
            )

    def _payload(self, op_id: str, out_dir: Path, nonce: str) -> dict[str, Any]:
        return {
            "entrypoint": self.entrypoint(out_dir),
            "submission_id": op_id,
            "runtime_env": self.runtime_env(),
            "metadata": {
                META_PREFIX + "op_id": op_id,
                META_PREFIX + "output": str(out_dir),
                META_PREFIX + "nonce": nonce,
            },
            **self.resources.payload(),
        }

    def _ensure_record(
        self, job_dir: Path, op_id: str, out_dir: Path, info: dict[str, Any], outcome: str
    ) -> None:
        rec = self._record(job_dir)
        if rec.get("submission_id") == op_id and rec.get("outcome"):
            return  # the launching instance's record stays as written
        self._update_record(
            job_dir,
            provider=self.name,
            address=self.address,
            submission_id=op_id,
            entrypoint=str(info.get("entrypoint", "")),
            runtime_env=info.get("runtime_env") or {},
            output_location=str(out_dir),
            ray_version=self._ray_version(),
            outcome=outcome,
            adopted_at=now_iso(),
        )

    def _ray_version(self) -> str:
        try:
            return str(self.client.version().get("ray_version", ""))
        except RayJobsError:
            return ""

    def _submit(self, job_dir: Path, op_id: str, out_dir: Path, posts_before: int = 0) -> Handle:
        nonce = secrets.token_hex(8)
        payload = self._payload(op_id, out_dir, nonce)
        version = self._ray_version()
        # The record names the output location, entrypoint and runtime env BEFORE the first POST.
        self._update_record(
            job_dir,
            provider=self.name,
            address=self.address,
            submission_id=op_id,
            entrypoint=payload["entrypoint"],
            runtime_env=payload["runtime_env"],
            resources=self.resources.payload(),
            output_location=str(out_dir),
            ray_version=version,
            nonce=nonce,
            outcome="submitting",
            posts=posts_before,
            submitted_at=now_iso(),
        )
        posts = posts_before
        uncertain: list[str] = []
        while posts < posts_before + self.max_posts:
            posts += 1
            self._update_record(job_dir, posts=posts)
            try:
                self.client.submit(payload)
                self._update_record(job_dir, outcome="submitted")
                return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref=op_id, started=True)
            except RayHTTPError as exc:
                if not _already_exists(exc):
                    self._update_record(job_dir, outcome="refused", error=str(exc))
                    raise
                info = self.client.get(op_id) or {}
                self._check_ours(info, op_id, out_dir)
                mine = (info.get("metadata") or {}).get(META_PREFIX + "nonce") == nonce
                self._update_record(job_dir, outcome="submitted" if mine else "adopted")
                return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref=op_id, started=mine)
            except RayUnreachable as exc:
                self._update_record(job_dir, outcome="unreachable", error=str(exc))
                raise
            except RayUncertain as exc:
                uncertain.append(str(exc))
                info = self._reconcile(op_id)
                if info is not None:
                    self._check_ours(info, op_id, out_dir)
                    mine = (info.get("metadata") or {}).get(META_PREFIX + "nonce") == nonce
                    self._update_record(
                        job_dir, outcome="reconciled" if mine else "adopted", uncertain_replies=uncertain
                    )
                    return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref=op_id, started=mine)
                # Ray does not know the id after the whole window: the POST never arrived; resend it.
        self._update_record(job_dir, outcome="uncertain", uncertain_replies=uncertain)
        raise RayUncertain(
            f"submitting {op_id} to {self.address}: {len(uncertain)} replies lost and Ray does not list the job; "
            "nothing was started twice — launch again later to reconcile"
        )

    def _reconcile(self, op_id: str) -> dict[str, Any] | None:
        """After an uncertain POST: look for the job by id, bounded in time and count."""
        deadline = time.monotonic() + self.reconcile_s
        for _ in range(200):
            try:
                info = self.client.get(op_id)
            except (RayUncertain, RayUnreachable):
                info = None
            if info is not None:
                return info
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.5)
        return None

    def _resubmit(self, job_dir: Path, op_id: str, out_dir: Path) -> Handle:
        """Resume a job that ended without "done": keep its logs, free the id, submit again."""
        self._save_logs(job_dir, op_id, append=True)
        self.client.delete(op_id)
        rec = self._record(job_dir)
        runs = list(rec.get("previous_runs", [])) + [
            {k: rec.get(k) for k in ("submitted_at", "outcome", "ray_status", "ray_message") if k in rec}
        ]
        self._update_record(job_dir, previous_runs=runs)
        # The old terminal word must not stand for the new run; resume points and run count stay.
        st = jobfiles.read_status(out_dir)
        if st:
            jobfiles.write_status(
                out_dir, {**st, "stage": "resubmitted", "reason": "resubmitted to Ray to resume"}
            )
        return self._submit(job_dir, op_id, out_dir, posts_before=int(rec.get("posts", 0) or 0))

    # ------------------------------------------------------------ status

    def status(self, handle: Handle) -> JobStatus:
        job_dir, op_id = handle.job_dir, handle.op_id
        out_dir = self._out(handle)
        if out_dir.resolve() != job_dir.resolve():
            for name in PROGRESS_FILES:
                _copy_if_changed(out_dir / name, job_dir / name)
        st = jobfiles.read_status(out_dir)
        hb = jobfiles.read_heartbeat(out_dir)
        stage = str(st.get("stage", ""))
        age = time.time() - float(hb["time"]) if "time" in hb else -1.0
        interval = float(hb.get("interval", st.get("heartbeat_seconds", 2.0)) or 2.0)
        try:
            info = self.client.get(op_id)
            ray_status, ray_msg = (
                (str(info.get("status", "")), str(info.get("message", ""))) if info else ("", "")
            )
        except RayJobsError as exc:
            info, ray_status, ray_msg = None, "UNKNOWN", str(exc)
        derived, reason = self._derive(out_dir, st, stage, age, interval, info, ray_status, ray_msg)
        if info is not None and ray_status in RAY_TERMINAL:
            self._note_final(job_dir, info)
        return JobStatus(
            op_id=op_id,
            stage=derived,
            reason=reason,
            step=int(st.get("step", 0) or 0),
            total_steps=int(st.get("total_steps", 0) or 0),
            alive=ray_status in ("PENDING", "RUNNING"),
            pid=int(st.get("pid", 0) or 0),
            heartbeat_age_s=round(age, 3),
            heartbeats=int(hb.get("beats", 0) or 0),
            resumed_from=[int(x) for x in st.get("resumed_from", [])],
        )

    def _derive(
        self,
        out_dir: Path,
        st: dict[str, Any],
        stage: str,
        age: float,
        interval: float,
        info: dict[str, Any] | None,
        ray_status: str,
        ray_msg: str,
    ) -> tuple[str, str]:
        reason = str(st.get("reason", ""))
        if ray_status == "UNKNOWN":
            if stage in TERMINAL_STAGES:
                return self._judge_terminal(out_dir, st, stage, reason)
            return "unconfirmed", f"Ray cannot be asked ({ray_msg}); the job's last word: {stage or 'none'}"
        if info is None:
            if stage in TERMINAL_STAGES:
                return self._judge_terminal(out_dir, st, stage, reason)
            return ("lost" if stage else "not_found"), (
                f"Ray at {self.address} has no job {out_dir.name!r} and the job never wrote a terminal status "
                f"(last stage: {stage or 'none'})"
            )
        if stage in TERMINAL_STAGES:
            return self._judge_terminal(out_dir, st, stage, reason)
        if ray_status == "PENDING":
            return "launching", f"Ray: PENDING {ray_msg}".strip()
        if ray_status == "RUNNING":
            started = float(info.get("start_time") or 0) / 1000.0
            if started and age >= 0 and age > time.time() - started + 1.0:
                age = -1.0  # a heartbeat from before this Ray run (a resubmitted job) is not this run's
            if age < 0:
                waited = time.time() - started if started else 0.0
                if waited > self.startup_grace_s:
                    return (
                        "unconfirmed",
                        f"Ray says RUNNING for {waited:.0f}s but the job never wrote a heartbeat",
                    )
                return "launching", "Ray says RUNNING; waiting for the job's first heartbeat"
            if age > STALL_INTERVALS * interval:
                return "unconfirmed", (
                    f"Ray says RUNNING but the job's last heartbeat is {age:.1f}s old (interval {interval:.1f}s)"
                )
            return stage or "launching", reason
        # Ray says the process ended, and the job did not write a terminal status itself.
        last = stage or "none"
        if ray_status == "STOPPED":
            return "cancelled", f"Ray stopped the job at stage {last} before it wrote its own status"
        if ray_status == "FAILED":
            return "failed", f"Ray: FAILED: {ray_msg} (the job's last stage: {last})"
        return (
            "failed",
            f"Ray says {ray_status} but the job never wrote a terminal status (last stage: {last})",
        )

    def _judge_terminal(self, out_dir: Path, st: dict[str, Any], stage: str, reason: str) -> tuple[str, str]:
        """A "done" counts only with metrics up to the last step and an artifact manifest."""
        if stage != "done":
            return stage, reason
        total = int(st.get("total_steps", 0) or 0)
        steps = [int(r.get("step", 0)) for r in jobfiles.read_metrics(out_dir) if r.get("kind") == "step"]
        if total <= 0 or not steps or max(steps) < total:
            return (
                "failed",
                f"status.json says done but metrics.jsonl reaches step {max(steps, default=0)} of {total}",
            )
        if not (out_dir / jobfiles.FINAL / jobfiles.MANIFEST).exists():
            return "failed", f"status.json says done but {jobfiles.FINAL}/{jobfiles.MANIFEST} is missing"
        return stage, reason

    def _note_final(self, job_dir: Path, info: dict[str, Any]) -> None:
        rec = self._record(job_dir)
        if rec.get("ray_status") == info.get("status") and rec.get("ray_end_time") == info.get("end_time"):
            return
        self._update_record(
            job_dir,
            ray_status=str(info.get("status", "")),
            ray_message=str(info.get("message", "") or ""),
            ray_start_time=info.get("start_time") or 0,
            ray_end_time=info.get("end_time") or 0,
            driver_exit_code=info.get("driver_exit_code") if info.get("driver_exit_code") is not None else "",
        )

    def wait(self, handle: Handle, timeout: float, poll: float = 0.5) -> JobStatus:
        deadline = time.time() + timeout
        while True:
            st = self.status(handle)
            if st.terminal or time.time() >= deadline:
                return st
            time.sleep(poll)

    # ------------------------------------------------------------ cancel / fetch

    def cancel(self, handle: Handle) -> None:
        """Ask Ray to stop this submission id only; the job writes "cancelled" from its SIGTERM handler."""
        try:
            stopped = self.client.stop(handle.op_id)
        except RayUncertain:
            stopped = False  # the status call that follows tells whether it stopped
        out_dir = self._out(handle)
        info = self.client.get(handle.op_id)
        st = jobfiles.read_status(out_dir)
        if not stopped and (info is None or info.get("status") in RAY_TERMINAL):
            if st and st.get("stage") not in TERMINAL_STAGES:
                # Nothing runs: record the person's decision so the job is not shown as running.
                jobfiles.write_status(
                    out_dir, {**st, "stage": "cancelled", "reason": "cancelled while Ray ran nothing"}
                )

    def _save_logs(self, job_dir: Path, op_id: str, *, append: bool = False) -> bool:
        try:
            text = self.client.logs(op_id)
        except RayJobsError as exc:
            self._update_record(job_dir, logs_error=str(exc))
            return False
        if append and (job_dir / jobfiles.LOG).exists():
            text = (job_dir / jobfiles.LOG).read_text(errors="replace") + "\n" + text
        atomic_write_text(job_dir / jobfiles.LOG, text)
        return True

    def fetch(self, handle: Handle, dest: Path | None = None) -> Path:
        """After the job ends: logs (whole), progress files and the artifact, checksums verified.

        Returns the folder holding the job's files on this machine. Raises RayJobsError when the
        artifact's files do not match its manifest (the artifact stage must not run on it).
        """
        from engine.training.evaluate import verify_artifact

        dest = Path(dest) if dest else handle.job_dir
        # Wait (bounded) for the job's own terminal status AND Ray's, so the logs are whole.
        deadline = time.monotonic() + self.fetch_wait_s
        while True:
            st = self.status(handle)
            info = self.client.get(handle.op_id)
            ray_done = info is None or info.get("status") in RAY_TERMINAL
            if (st.terminal and ray_done) or time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        if info is not None:
            self._save_logs(dest, handle.op_id)
        out_dir = self._out(handle)
        if out_dir.resolve() != dest.resolve():
            for name in PROGRESS_FILES:
                _copy_if_changed(out_dir / name, dest / name)
        verified: dict[str, Any] = {"fetched_at": now_iso(), "stage": st.stage, "ray_terminal": ray_done}
        src_final = out_dir / jobfiles.FINAL
        if st.stage == "done" and src_final.is_dir():
            final = dest / jobfiles.FINAL
            if src_final.resolve() != final.resolve():
                tmp = dest / (jobfiles.FINAL + ".fetch")
                shutil.rmtree(tmp, ignore_errors=True)
                shutil.copytree(src_final, tmp)
                shutil.rmtree(final, ignore_errors=True)
                os.replace(tmp, final)
                verified["copied_from"] = str(src_final)
            else:
                verified["copied_from"] = ""  # read in place: the output location is the job folder
            result = verify_artifact(final)
            verified.update(
                ok=bool(result.get("ok")),
                files=int(result.get("files", 0) or 0),
                problems=[str(p) for p in result.get("problems", [])],
                manifest_sha256=_sha256(final / jobfiles.MANIFEST)
                if (final / jobfiles.MANIFEST).exists()
                else "",
                source_manifest_sha256=_sha256(src_final / jobfiles.MANIFEST),
            )
            if verified["manifest_sha256"] != verified["source_manifest_sha256"]:
                verified["ok"] = False
                verified["problems"].append(
                    "the fetched manifest differs from the one in the output location"
                )
            self._update_record(handle.job_dir, fetch=verified)
            if not verified["ok"]:
                raise RayJobsError(
                    f"artifact of {handle.op_id} failed verification: {verified['problems'][:3]}"
                )
        else:
            self._update_record(handle.job_dir, fetch=verified)
        return dest


# ---------------------------------------------------------------- a loopback head (tests, benchmarks)


def _free_ports(names: tuple[str, ...]) -> dict[str, int]:
    """Distinct free ports on 127.0.0.1 (all held open while choosing, so none repeats)."""
    socks = []
    try:
        for _ in names:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return {name: int(s.getsockname()[1]) for name, s in zip(names, socks, strict=True)}
    finally:
        for s in socks:
            s.close()


def _free_range(width: int = 100, tries: int = 50) -> int:
    """A start port with `width` free ports above it on 127.0.0.1 (workers bind there)."""
    import random

    rng = random.Random(os.getpid() ^ int(time.time()))
    for _ in range(tries):
        base = rng.randrange(20000, 30000 - width)
        ok = True
        for p in range(base, base + width, 10):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port range for Ray workers on 127.0.0.1")


class LoopbackHead:
    """A single-node Ray head bound to 127.0.0.1 only, for tests and the overhead benchmark.

    Runs `ray start --head --block` in its own process group, so stopping it ends exactly the
    processes it started (SIGTERM to that group, then SIGKILL) — never other Ray processes on
    the machine, which `ray stop --force` would kill too. Needs the `ray` CLI (ray[default]).
    """

    def __init__(self, *, num_cpus: int = 2, ray_cli: str | None = None, start_timeout_s: float = 90.0):
        self.num_cpus = num_cpus
        self.ray_cli = ray_cli or _find_ray_cli()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.temp_dir: Path | None = None
        self.address = ""
        self.log_path: Path | None = None
        self.ray_version = ""

    def start(self) -> str:
        if not self.ray_cli:
            raise RuntimeError("the `ray` command is not installed (pip install 'ray[default]')")
        # Short path: Ray's unix sockets live under it and must stay under 107 characters.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="ccray-", dir="/tmp"))
        ports = _free_ports((
            "port", "dashboard-port", "ray-client-server-port", "dashboard-agent-listen-port",
            "dashboard-agent-grpc-port", "runtime-env-agent-port", "metrics-export-port",
            "node-manager-port", "object-manager-port",
        ))  # fmt: skip
        workers = _free_range()
        args = [
            self.ray_cli, "start", "--head", "--block", "--node-ip-address", "127.0.0.1",
            "--dashboard-host", "127.0.0.1", "--include-dashboard", "true", "--disable-usage-stats",
            "--num-cpus", str(self.num_cpus), "--num-gpus", "0", "--temp-dir", str(self.temp_dir),
            "--object-store-memory", str(100 * 1024 * 1024),
            "--min-worker-port", str(workers), "--max-worker-port", str(workers + 99),
        ]  # fmt: skip
        for name, port in ports.items():
            args += [f"--{name}", str(port)]
        env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
        env.pop("RAY_ADDRESS", None)
        self.log_path = self.temp_dir / "head.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, env=env, cwd=str(self.temp_dir),
            )  # fmt: skip
        self.address = f"http://127.0.0.1:{ports['dashboard-port']}"
        client = RayJobsClient(self.address, timeout=5.0, retries=1)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                tail = self.log_path.read_text(errors="replace")[-1500:]
                self.stop()
                raise RuntimeError(f"ray start exited with {code}: {tail}")
            try:
                self.ray_version = str(client.version().get("ray_version", ""))
                client.list()  # the job module answers, not only the dashboard shell
                return self.address
            except RayJobsError:
                time.sleep(0.5)
        tail = self.log_path.read_text(errors="replace")[-1500:]
        self.stop()
        raise RuntimeError(f"Ray dashboard did not answer within {self.start_timeout_s:.0f}s: {tail}")

    def stop(self, timeout_s: float = 3.0) -> None:
        """End what this head started: its process group, then any descendant that left the group
        (Ray workers take groups of their own), each by its pid."""
        if self.proc is None:
            return
        self._stop_jobs()
        leader = self.proc.pid
        started = _descendants(leader)
        for sig, wait in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(leader, sig)  # start_new_session: the group id is the leader's pid
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            end = time.monotonic() + wait
            while time.monotonic() < end and _group_alive(leader):
                time.sleep(0.2)
            if not _group_alive(leader):
                break
        started |= _descendants(leader)
        for pid in sorted(started):
            if _proc_alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.proc = None
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _stop_jobs(self, wait_s: float = 15.0) -> None:
        """Stop jobs still running: their entrypoints run in sessions of their own, outside our group."""
        if not self.address or self.proc is None or self.proc.poll() is not None:
            return
        client = RayJobsClient(self.address, timeout=5.0, retries=1)
        try:
            live = [j["submission_id"] for j in client.list() if j.get("status") not in RAY_TERMINAL]
            for sid in live:
                client.stop(sid)
            deadline = time.monotonic() + wait_s
            while live and time.monotonic() < deadline:
                time.sleep(0.5)
                live = [s for s in live if (client.get(s) or {}).get("status") not in (*RAY_TERMINAL, None)]
        except RayJobsError:
            pass


def _descendants(root: int) -> set[int]:
    """Pids below `root` in the process tree (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _proc_alive(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _group_alive(pgid: int) -> bool:
    """Some member of the process group is alive (zombies left to an unreaping init do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def _find_ray_cli() -> str:
    beside = Path(sys.executable).parent / "ray"
    if beside.exists():
        return str(beside)
    return shutil.which("ray") or ""
