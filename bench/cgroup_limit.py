"""Run a command under a real memory limit: a fresh child memory cgroup of this process's own cgroup.

    from cgroup_limit import run_limited, unavailable
    why = unavailable()            # "" where a child cgroup can be made here, else the reason
    res = run_limited(["python", "x.py"], limit_bytes=512 << 20)
    res.returncode, res.oom_killed, res.max_usage_bytes, res.maxrss_bytes

    .venv/bin/python bench/cgroup_limit.py 512M -- COMMAND ARGS...   # prints the result as JSON

cgroup v1 (this box): a folder under the process's own `memory` cgroup with `memory.limit_in_bytes`
(and `memory.memsw.limit_in_bytes`, where swap accounting is on, so that swap cannot stretch the limit);
cgroup v2: a folder under the process's own cgroup with `memory.max` and `memory.swap.max = 0` (the
parent must have the memory controller in `cgroup.subtree_control`). The child process moves itself
into the cgroup before it execs, so the command and everything it starts are held to the limit. A
process that passes the limit is killed by the kernel's OOM killer (exit -9, i.e. 137 from a shell).
The cgroup is removed afterwards, whatever the outcome.

What is counted: a cgroup charges the process's resident memory and the page cache of the files it
reads and writes; the cache is reclaimed under pressure, so only resident memory (plus what cannot be
reclaimed) makes the kernel kill. `max_usage_bytes` is the cgroup's high-water mark, cache included
(v1 `memory.max_usage_in_bytes`, v2 `memory.peak`; None where the kernel has no peak file);
`maxrss_bytes` is the command's own peak resident set (ru_maxrss of the process the harness waited for).

Where no child cgroup can be written (no cgroup file system, not root, a read-only mount), `unavailable`
names the reason and `run_limited` raises `CgroupUnavailable` with it: callers fall back to a process
limit (`prlimit --data=BYTES`, RLIMIT_DATA), which counts address space rather than resident memory.
Nothing in claimcheck depends on this module; tests and benches import it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "claimcheck-limit-"


class CgroupUnavailable(RuntimeError):
    """No child memory cgroup can be made here; the message says why."""


@dataclass(frozen=True)
class Limited:
    returncode: int  # as subprocess gives it: negative for a signal (-9: killed)
    oom_killed: bool  # the kernel's OOM killer killed a process of the cgroup
    max_usage_bytes: int | None  # the cgroup's high-water mark, page cache included
    maxrss_bytes: int  # the command's own peak resident set
    limit_bytes: int
    version: str  # "v1" or "v2"
    wall_s: float
    timed_out: bool  # the harness killed it at `timeout`
    stdout: str
    stderr: str

    @property
    def killed(self) -> bool:
        """Killed by the kernel for memory (the OOM killer's count, or SIGKILL without a timeout)."""
        return self.oom_killed or (self.returncode in (-9, 137) and not self.timed_out)


def _own_cgroup() -> tuple[str, Path]:
    """("v1" | "v2", this process's memory cgroup folder)."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    for line in lines:
        num, ctrls, path = line.split(":", 2)
        if "memory" in ctrls.split(","):
            base = CGROUP_ROOT / "memory"
            if base.is_dir():
                return "v1", base / path.lstrip("/")
    for line in lines:
        num, ctrls, path = line.split(":", 2)
        if num == "0" and ctrls == "":
            for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                if (base / "cgroup.controllers").exists():
                    return "v2", base / path.lstrip("/")
    raise CgroupUnavailable("no memory cgroup in /proc/self/cgroup with a mount under /sys/fs/cgroup")


def unavailable() -> str:
    """'' where run_limited can make a child memory cgroup here, else the reason it cannot."""
    try:
        version, own = _own_cgroup()
        probe = own / f"{PREFIX}probe-{os.getpid()}"
        probe.mkdir()
        try:
            name = "memory.limit_in_bytes" if version == "v1" else "memory.max"
            if not (probe / name).exists():
                raise CgroupUnavailable(
                    f"{own} does not give its children a memory controller ({name} missing)"
                )
            (probe / name).write_text(str(1 << 30))
        finally:
            probe.rmdir()
    except (OSError, CgroupUnavailable) as exc:
        return f"cannot make a child memory cgroup: {exc}"
    return ""


def _make(limit_bytes: int) -> tuple[str, Path]:
    version, own = _own_cgroup()
    cg = own / f"{PREFIX}{os.getpid()}-{time.monotonic_ns()}"
    try:
        cg.mkdir()
    except OSError as exc:
        raise CgroupUnavailable(f"cannot make a child memory cgroup in {own}: {exc}") from exc
    try:
        if version == "v1":
            (cg / "memory.limit_in_bytes").write_text(str(limit_bytes))
            if (cg / "memory.memsw.limit_in_bytes").exists():  # memsw >= limit: written after it
                (cg / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
        else:
            (cg / "memory.max").write_text(str(limit_bytes))
            if (cg / "memory.swap.max").exists():
                (cg / "memory.swap.max").write_text("0")
    except OSError as exc:
        cg.rmdir()
        raise CgroupUnavailable(f"cannot set the memory limit of {cg}: {exc}") from exc
    return version, cg


def _oom_kills(version: str, cg: Path) -> int:
    """How many processes the OOM killer killed in the cgroup (v1: memory.oom_control's oom_kill,
    kernel 4.13+, else memory.failcnt's hits are not kills and count 0)."""
    name = "memory.oom_control" if version == "v1" else "memory.events"
    try:
        for line in (cg / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except OSError:
        pass
    return 0


def _peak(version: str, cg: Path) -> int | None:
    name = "memory.max_usage_in_bytes" if version == "v1" else "memory.peak"
    try:
        return int((cg / name).read_text().strip())
    except (OSError, ValueError):
        return None


def _remove(cg: Path) -> None:
    """rmdir the cgroup once its processes are gone (the last ones may still be exiting)."""
    for _ in range(100):
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)
    print(f"cgroup_limit: could not remove {cg}; remove it with rmdir", file=sys.stderr)


def run_limited(
    cmd: list[str],
    limit_bytes: int,
    env: dict | None = None,
    cwd: str | os.PathLike | None = None,
    timeout: float | None = None,
    echo: bool = False,
) -> Limited:
    """Run `cmd` in a fresh memory cgroup limited to `limit_bytes`; wait for it; remove the cgroup.
    `echo` passes the command's output through (to this process's stdout/stderr) instead of capturing
    it. A timeout kills the command (returncode -9, oom_killed False)."""
    version, cg = _make(limit_bytes)
    procs = str(cg / "cgroup.procs")

    def enter() -> None:  # in the child, before exec: everything it runs is in the cgroup
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        try:
            p = subprocess.Popen(
                cmd,
                env=env,
                cwd=cwd,
                stdout=None if echo else out,
                stderr=None if echo else err,
                preexec_fn=enter,
            )
        except BaseException:
            _remove(cg)
            raise
        try:
            code, rusage, timed_out = _wait(p, timeout)
            wall = time.perf_counter() - t
            res = Limited(
                returncode=code,
                oom_killed=_oom_kills(version, cg) > 0,
                max_usage_bytes=_peak(version, cg),
                maxrss_bytes=rusage.ru_maxrss * 1024,
                limit_bytes=limit_bytes,
                version=version,
                wall_s=round(wall, 2),
                timed_out=timed_out,
                stdout=_read(out),
                stderr=_read(err),
            )
        finally:
            if p.returncode is None:
                p.kill()
                p.wait()
            _remove(cg)
    return res


def _wait(p: subprocess.Popen, timeout: float | None):
    """The child's exit code (negative for a signal), its own resource usage (os.wait4), and whether
    the timeout killed it."""
    deadline = None if timeout is None else time.monotonic() + timeout
    timed_out = False
    while True:
        pid, status, rusage = os.wait4(p.pid, os.WNOHANG if deadline else 0)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            p.returncode = code  # Popen must not wait for it again
            return code, rusage, timed_out
        if time.monotonic() > deadline:
            p.kill()
            deadline, timed_out = None, True
        time.sleep(0.05)


def _read(f) -> str:
    f.seek(0)
    return f.read().decode("utf-8", "replace")


def evict(path: str | os.PathLike) -> None:
    """Drop one file's clean pages from the page cache (posix_fadvise DONTNEED). A page in the cache
    stays charged to the cgroup that read it first; a limited run that should pay for reading a file
    is given it uncached."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def parse_limit(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    return int(float(t[:-1]) * units[t[-1]]) if t[-1:] in units else int(t)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    why = unavailable()
    if why:
        print(why, file=sys.stderr)
        return 3
    res = run_limited(argv[2:], parse_limit(argv[0]), echo=True)
    info = {k: v for k, v in asdict(res).items() if k not in ("stdout", "stderr")}
    print(json.dumps({**info, "killed": res.killed}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
