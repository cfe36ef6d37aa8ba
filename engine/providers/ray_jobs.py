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

import json
import os
import secrets
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.data.rows import sha256_file
from claimcheck.engine.evidence import atomic_write_text, now_iso
from claimcheck.engine.providers.base import Handle, JobStatus, require_job_dir
from claimcheck.engine.providers.ray_http import (
    RAY_TERMINAL,
    RayHTTPError,
    RayJobsClient,
    RayJobsError,
    RayUncertain,
    RayUnreachable,
)
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import RESUBMITTED

RECORD = jobfiles.RAY_RECORD
META_PREFIX = "claimcheck_"


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


@dataclass
class RaySettings:
    """Where and how the provider submits: the dashboard, resources, output location, patience."""

    address: str = "http://127.0.0.1:8265"
    resources: RayResources | dict[str, Any] | None = None
    # Shared storage the job writes to; None = the session's own job folder, read in place.
    output_root: Path | str | None = None
    python: str | None = None  # the interpreter on the cluster (default: the app's own)
    code_root: Path | str | None = (
        None  # PYTHONPATH on the cluster (default: none; its Python has claimcheck)
    )
    reconcile_s: float = 15.0  # how long an uncertain POST is looked for by id
    max_posts: int = 3
    startup_grace_s: float = 180.0  # RUNNING without a heartbeat for longer: unconfirmed
    fetch_wait_s: float = 30.0


class RayJobsProvider:
    name = "ray"

    def __init__(
        self,
        jobs_root: Path,
        settings: RaySettings | None = None,
        *,
        client: RayJobsClient | None = None,
        **options: Any,
    ):
        """`options` are RaySettings fields, for callers that name one or two of them."""
        s = settings or RaySettings(**options)
        self.jobs_root = Path(jobs_root)
        self.client = client or RayJobsClient(s.address)
        self.address = self.client.address
        resources = RayResources(**s.resources) if isinstance(s.resources, dict) else s.resources
        self.resources = resources or RayResources()
        self.output_root = Path(s.output_root).resolve() if s.output_root else None
        # Same-machine / shared-image clusters: the app's interpreter and code path are valid there.
        self.python = s.python or sys.executable
        self.code_root = Path(s.code_root) if s.code_root else None
        self.reconcile_s = s.reconcile_s
        self.max_posts = max(1, s.max_posts)
        self.startup_grace_s = s.startup_grace_s
        self.fetch_wait_s = s.fetch_wait_s

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
        return f"{shlex.quote(self.python)} -m claimcheck.engine.training.job {shlex.quote(str(out_dir))}"

    def runtime_env(self) -> dict[str, Any]:
        # No working_dir: Ray would upload it, and a session folder can hold large data.
        env = {"PYTHONUNBUFFERED": "1"}
        if self.code_root is not None:
            env["PYTHONPATH"] = str(self.code_root)
        return {"env_vars": env}

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
                if self.status(handle).phase != "done":
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
            jobfiles.copy_inputs(job_dir, out_dir)
        elif named and Path(named).resolve() != out_dir:
            raise ValueError(
                f"the contract names output location {named!r}; configure the provider's output_root"
            )
        return out_dir

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
        jobfiles.record_phase(out_dir, RESUBMITTED, "resubmitted to Ray to resume", only_if_written=True)
        return self._submit(job_dir, op_id, out_dir, posts_before=int(rec.get("posts", 0) or 0))

    # ------------------------------------------------------------ status

    def status(self, handle: Handle) -> JobStatus:
        """The job's own files first (mirrored home), Ray's word on the process; judged by jobfiles."""
        job_dir, op_id = handle.job_dir, handle.op_id
        out_dir = self._out(handle)
        jobfiles.mirror_progress(out_dir, job_dir)
        files = jobfiles.read_progress(out_dir)
        now = time.time()
        try:
            info = self.client.get(op_id)
            word = jobfiles.RayWord(
                info, str((info or {}).get("status", "")), str((info or {}).get("message", ""))
            )
        except RayJobsError as exc:
            info, word = None, jobfiles.RayWord(None, "UNKNOWN", str(exc))
        word.address, word.startup_grace_s = self.address, self.startup_grace_s
        derived, reason = jobfiles.ray_phase(out_dir, files, word, now)
        if info is not None and word.status in RAY_TERMINAL:
            self._note_final(job_dir, info)
        return JobStatus(
            op_id=op_id,
            phase=derived,
            reason=reason,
            alive=word.status in ("PENDING", "RUNNING"),
            pid=files.status.pid if files.status is not None else 0,
            **files.fields(now),
        )

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
        if not stopped and (info is None or info.get("status") in RAY_TERMINAL):
            # Nothing runs: record the person's decision so the job is not shown as running.
            jobfiles.record_phase(
                out_dir, "cancelled", "cancelled while Ray ran nothing", only_if_written=True
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
        jobfiles.mirror_progress(out_dir, dest)
        verified: dict[str, Any] = {"fetched_at": now_iso(), "phase": st.phase, "ray_terminal": ray_done}
        if st.phase == "done" and (out_dir / jobfiles.FINAL).is_dir():
            verified.update(_bring_artifact(out_dir / jobfiles.FINAL, dest / jobfiles.FINAL))
            self._update_record(handle.job_dir, fetch=verified)
            if not verified["ok"]:
                raise RayJobsError(
                    f"artifact of {handle.op_id} failed verification: {verified['problems'][:3]}"
                )
        else:
            self._update_record(handle.job_dir, fetch=verified)
        return dest


def _bring_artifact(src_final: Path, final: Path) -> dict[str, Any]:
    """Copy the artifact home (unless read in place) and verify its files against its manifest."""
    from claimcheck.engine.training.artifact_files import verify_artifact

    out: dict[str, Any] = {"copied_from": ""}  # "": read in place, the output location is the job folder
    if src_final.resolve() != final.resolve():
        tmp = final.with_name(final.name + ".fetch")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src_final, tmp)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        out["copied_from"] = str(src_final)
    result = verify_artifact(final)
    manifest = final / jobfiles.MANIFEST
    out.update(
        ok=bool(result.get("ok")),
        files=int(result.get("files", 0) or 0),
        problems=[str(p) for p in result.get("problems", [])],
        manifest_sha256=sha256_file(manifest) if manifest.exists() else "",
        source_manifest_sha256=sha256_file(src_final / jobfiles.MANIFEST),
    )
    if out["manifest_sha256"] != out["source_manifest_sha256"]:
        out["ok"] = False
        out["problems"].append("the fetched manifest differs from the one in the output location")
    return out
