"""A loopback Ray head for tests and the overhead benchmark: `ray start --head` on 127.0.0.1.

Needs the `ray` CLI (ray[default]); the app itself never does.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from filelock import FileLock

from claimcheck.engine.providers.local import proc_state
from claimcheck.engine.providers.ray_http import RAY_TERMINAL, RayJobsClient, RayJobsError


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


# Ray's Ray Client proxy gives each `ray://` driver a server of its own on a port of this range (fixed in
# ray.util.client.server.proxier), checked free by binding it. gRPC servers bind with SO_REUSEPORT, so
# a port two heads on one machine pick at once is bound by both servers, and a driver's calls can then
# reach the other head's server ("ClientObjectRef … is not found for client …", seen in CI with one
# head per test worker). Workers' ports stay out of the range, and drivers connect one at a time
# (connecting()).
CLIENT_SERVER_PORTS = range(23000, 24000)
CONNECT_LOCK = Path(tempfile.gettempdir()) / "claimcheck-ray-client-connect.lock"


# One lock object a process: taken again in the process (the same thread), it is held once.
_CONNECT = FileLock(CONNECT_LOCK, preserve_lock_file=True)


def connecting(timeout_s: float = 600.0) -> Any:
    """Held by a driver while it connects to a loopback head through Ray Client, until its server
    answers: every loopback head on this machine, in any process, picks that server's port from the
    same CLIENT_SERVER_PORTS, so the picks must not overlap. A context manager; filelock.Timeout (a
    TimeoutError) where another process holds it for `timeout_s`."""
    return _CONNECT.acquire(timeout=timeout_s)


def _free_range(width: int = 100, tries: int = 50) -> int:
    """A start port with `width` free ports above it on 127.0.0.1 (workers bind there), outside
    CLIENT_SERVER_PORTS."""
    import random

    rng = random.Random(os.getpid() ^ int(time.time()))
    for _ in range(tries):
        base = rng.randrange(CLIENT_SERVER_PORTS.stop, 30000 - width)
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

    def __init__(
        self,
        *,
        num_cpus: int = 2,
        ray_cli: str | None = None,
        start_timeout_s: float = 90.0,
        object_store_mb: int = 100,
    ):
        self.object_store_mb = object_store_mb
        self.num_cpus = num_cpus
        self.ray_cli = ray_cli or _find_ray_cli()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.temp_dir: Path | None = None
        self.address = ""
        self.gcs_address = ""  # host:port of the head's GCS (a driver on this machine)
        self.client_address = ""  # ray://host:port of its Ray Client server (a remote driver)
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
            "--object-store-memory", str(self.object_store_mb * 1024 * 1024),
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
        self.gcs_address = f"127.0.0.1:{ports['port']}"
        self.client_address = f"ray://127.0.0.1:{ports['ray-client-server-port']}"
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
        """Stop submitted jobs still running: their entrypoints run in sessions of their own, outside our
        group. A Ray Client driver's job (no submission id) ends with its server, below the head."""
        if not self.address or self.proc is None or self.proc.poll() is not None:
            return
        client = RayJobsClient(self.address, timeout=5.0, retries=1)
        try:
            live = [
                j["submission_id"]
                for j in client.list()
                if j.get("submission_id") and j.get("status") not in RAY_TERMINAL
            ]
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


def client_servers(head_pid: int) -> set[int]:
    """The pids of the Ray Client servers running below the head `head_pid`, one per connected `ray://`
    driver (Linux)."""
    out = set()
    for pid in _descendants(head_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"--mode=specific-server" in cmd and _proc_alive(pid):
            out.add(pid)
    return out


def _proc_alive(pid: int) -> bool:
    """Alive and not a zombie (a state that cannot be read counts as gone)."""
    return proc_state(pid) not in ("Z", "X", "", "?")


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
