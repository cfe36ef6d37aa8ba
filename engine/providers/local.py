"""The local provider (default): the job is a detached process on this machine.

The process gets its own session and process group (start_new_session), no stdin, and its
output in log.txt, so closing the app or a dropped SSH connection (SIGHUP) does not stop it.
A pid file records the process; a launch lock makes two simultaneous launches of one identity
start at most one process. Liveness is pid + /proc command line (a recycled pid running
something else is not our job), and the job's own status.json + heartbeat decide its phase —
never the end of a log.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from claimcheck.engine.evidence import now_iso
from claimcheck.engine.providers.base import Handle, JobStatus, require_job_dir
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import PidFile

PID_FILE = jobfiles.PID_FILE
LAUNCH_LOCK = jobfiles.LAUNCH_LOCK


def proc_state(pid: int) -> str:
    """'' when no such process, else its /proc state letter (R, S, T: stopped, 'Z' = zombie…), '?' when
    unknown."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ""
    except PermissionError:
        return "?"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _runs_job(pid: int, job_dir: Path) -> bool:
    """The pid is alive and (where /proc exists) really runs this job directory."""
    if pid <= 0:
        return False
    state = proc_state(pid)
    if state in ("", "Z", "X"):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc: trust the signal probe
    args = [a.decode(errors="replace") for a in cmdline if a]
    return any(m in args for m in jobfiles.JOB_MODULES) and str(job_dir.resolve()) in args


class LocalProvider:
    name = "local"

    def __init__(self, jobs_root: Path):
        self.jobs_root = Path(jobs_root)
        # Children started by this instance; polled so a finished child is reaped, not a zombie.
        self._children: dict[str, subprocess.Popen] = {}

    # ------------------------------------------------------------ identity

    def job_dir(self, op_id: str) -> Path:
        return self.jobs_root / op_id

    def _pid_info(self, job_dir: Path) -> PidFile:
        return jobfiles.read_pid(job_dir) or PidFile(pid=0)

    def _alive(self, op_id: str, job_dir: Path) -> tuple[bool, int]:
        child = self._children.get(op_id)
        if child is not None and child.poll() is not None:
            self._children.pop(op_id, None)
        info = self._pid_info(job_dir)
        pid = info.pid
        if info.host not in ("", socket.gethostname()):
            return True, pid  # another host's process: cannot probe, do not declare it dead
        return _runs_job(pid, job_dir), pid

    def find(self, op_id: str) -> Handle | None:
        job_dir = self.job_dir(op_id)
        if not (job_dir / PID_FILE).exists() and not (job_dir / jobfiles.STATUS).exists():
            return None
        pid = self._pid_info(job_dir).pid
        return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref=str(pid), started=False)

    # ------------------------------------------------------------ launch

    def launch(self, job_dir: Path, op_id: str, *, resume: bool = False) -> Handle:
        """Start the job, or adopt the one already there under this identity.

        An existing job that is running or finished is adopted. A job whose process is gone
        before a terminal status ("lost") is adopted too unless `resume` is asked for: then it
        restarts in the same directory and continues from its last checkpoint.
        """
        job_dir = require_job_dir(job_dir, self.job_dir(op_id), op_id)
        lock = job_dir / LAUNCH_LOCK
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            # Another launcher holds the lock right now (or died holding it): look, do not launch.
            if time.time() - lock.stat().st_mtime < 30:
                return self._adopt(op_id, job_dir)
            lock.unlink(missing_ok=True)
            return self.launch(job_dir, op_id, resume=resume)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
            os.close(fd)
            existing = self.find(op_id)
            if existing is not None:
                st = self.status(existing)
                if not (resume and st.phase == "lost"):
                    return existing
            return self._start(job_dir, op_id, resumed=existing is not None)
        finally:
            lock.unlink(missing_ok=True)

    def _adopt(self, op_id: str, job_dir: Path) -> Handle:
        for _ in range(100):
            found = self.find(op_id)
            if found is not None:
                return found
            time.sleep(0.05)
        return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref="", started=False)

    def _start(self, job_dir: Path, op_id: str, resumed: bool) -> Handle:
        info = self._pid_info(job_dir)
        log = open(job_dir / jobfiles.LOG, "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", jobfiles.job_module(job_dir), str(job_dir.resolve())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # own session + process group: no SIGHUP from our terminal
                close_fds=True,
                cwd=str(job_dir.resolve()),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        finally:
            log.close()
        self._children[op_id] = proc
        starts = [*info.starts, now_iso()]
        jobfiles.write_pid(
            job_dir, PidFile(pid=proc.pid, pgid=proc.pid, host=socket.gethostname(), starts=starts)
        )
        return Handle(op_id=op_id, job_dir=job_dir, provider=self.name, ref=str(proc.pid), started=True)

    # ------------------------------------------------------------ status / cancel / fetch

    def status(self, handle: Handle) -> JobStatus:
        """The job's own status.json and heartbeat, and whether its process lives; judged by jobfiles."""
        job_dir = handle.job_dir
        files = jobfiles.read_progress(job_dir)
        alive, pid = self._alive(handle.op_id, job_dir)
        now = time.time()
        proc = jobfiles.Process(alive=alive, pid=pid, launched=(job_dir / PID_FILE).exists())
        derived, reason = jobfiles.local_phase(files, proc, now)
        return JobStatus(
            op_id=handle.op_id,
            phase=derived,
            reason=reason,
            alive=alive,
            pid=pid,
            **files.fields(now),
        )

    def cancel(self, handle: Handle) -> None:
        """SIGTERM to that job's process group only; the job writes "cancelled" itself."""
        alive, pid = self._alive(handle.op_id, handle.job_dir)
        if alive and pid:
            pgid = self._pid_info(handle.job_dir).pgid or pid
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            return
        # Nothing runs; record the person's decision so the job is not shown as running.
        jobfiles.record_phase(handle.job_dir, "cancelled", "cancelled while no process was running")

    def wait(self, handle: Handle, timeout: float, poll: float = 0.5) -> JobStatus:
        """Poll until the job is terminal and its process has exited (or the timeout passes)."""
        deadline = time.time() + timeout
        while True:
            st = self.status(handle)
            if (st.terminal and not st.alive) or time.time() >= deadline:
                return st
            time.sleep(poll)

    def fetch(self, handle: Handle, dest: Path | None = None) -> Path:
        """Local jobs already live in the session folder: nothing to copy."""
        return handle.job_dir
