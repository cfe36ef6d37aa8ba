"""The session lock: one app or run holds a session at a time. The lock file is written whole
(hard link of a complete temp file), names its holder (pid, host, since, and the process's start
time where the system tells it), and is stale when that process is provably gone — same host and
the pid is dead, or the pid now belongs to a process with another start time — or the file is
empty or unreadable. A stale lock can be taken over: the app asks first; the headless commands
(`run --answers`, `sign`) take it over and say so in one line (`took_over_line`)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.evidence import crash_point, now_iso

LOCK_FILE = ".lock"


class SessionLocked(ClaimcheckError):
    def __init__(self, path: Path, holder: dict[str, Any], stale: bool):
        self.path, self.holder, self.stale = path, holder, stale
        who = describe_holder(holder)
        hint = (
            f"that process is gone: take the lock over (claimcheck offers this; or delete {path / LOCK_FILE})"
            if stale
            else "close the other claimcheck first, or open a copy of the session"
        )
        super().__init__(f"session {path} is open in another process ({who}); {hint}")


def describe_holder(holder: dict[str, Any]) -> str:
    if not holder:
        return "an empty or unreadable lock file, left by a claimcheck killed while taking the lock"
    return f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since {holder.get('since', '?')}"


def took_over_line(path: Path, holder: dict[str, Any]) -> str:
    """What a headless command says when it took a stale lock over."""
    return f"took over the lock of session {path}, left by {describe_holder(holder)}: that process is gone"


def process_start(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, from /proc/PID/stat) with the boot id, so
    a pid reused by a later process, or after a reboot, is told apart; None where the system has no
    /proc or the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # after the command name, which may hold spaces
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_holder(file: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(file.read_text())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, OSError, UnicodeDecodeError):
        return {}
    return holder if isinstance(holder, dict) else {}


@dataclass
class SessionLock:
    path: Path
    # Called once the lock is taken: the session finishes what a killed holder left (Session.recover).
    on_acquire: Callable[[], Any] | None = None

    @property
    def file(self) -> Path:
        return self.path / LOCK_FILE

    def holder(self) -> dict[str, Any] | None:
        """The holder the lock names; {} when the lock is empty or unreadable; None when there is none."""
        return _read_holder(self.file)

    def holder_is_dead(self, holder: dict[str, Any]) -> bool:
        """Provably gone: an empty or unreadable lock, or a holder on this host whose pid is dead or
        now names a process with another start time. A holder on another host is never judged dead."""
        try:
            pid = int(holder["pid"])
        except (KeyError, TypeError, ValueError):
            return True
        if holder.get("host") != socket.gethostname():
            return False
        if not _pid_alive(pid):
            return True
        started = holder.get("started")
        return isinstance(started, str) and process_start(pid) not in (None, started)

    def _is_mine(self, holder: dict[str, Any], info: dict[str, Any]) -> bool:
        return all(holder.get(k) == info.get(k) for k in ("pid", "host", "started"))

    def _create(self, info: dict[str, Any]) -> bool:
        """Create the lock with its contents in one step (a full temp file hard-linked into place),
        so no crash leaves an empty lock. False when a lock exists."""
        fd, tmp = tempfile.mkstemp(prefix=f"{LOCK_FILE}.", suffix=".tmp", dir=self.path)
        try:
            os.fchmod(fd, 0o644)  # readable by others, so they can name the holder
            with os.fdopen(fd, "w") as fh:
                json.dump(info, fh)
            crash_point()
            try:
                os.link(tmp, self.file)
            except FileExistsError:
                return False
            except OSError:  # a file system without hard links: create exclusively, then fill
                try:
                    lock_fd = os.open(self.file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                except FileExistsError:
                    return False
                with os.fdopen(lock_fd, "w") as fh:
                    json.dump(info, fh)
            crash_point()
            return True
        finally:
            Path(tmp).unlink(missing_ok=True)

    def _info(self) -> dict[str, Any]:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}
        started = process_start(os.getpid())
        return info | ({"started": started} if started else {})

    def acquire(self, take_over_stale: bool = False) -> dict[str, Any] | None:
        """Take the lock. A stale lock is taken over when take_over_stale, else refused (SessionLocked,
        .stale set); a live holder is always refused. Returns the holder taken over, else None."""
        info = self._info()
        taken: dict[str, Any] | None = None
        for _ in range(3):
            if self._create(info):
                if self.on_acquire is not None:
                    self.on_acquire()
                return taken
            holder = self.holder()
            if holder is None:
                continue  # released between our try and our look
            if self._is_mine(holder, info):
                return None
            stale = self.holder_is_dead(holder)
            if not (stale and take_over_stale):
                raise SessionLocked(self.path, holder, stale)
            if self._remove_stale(holder):
                taken = holder
        raise SessionLocked(self.path, self.holder() or {}, False)

    def _remove_stale(self, holder: dict[str, Any]) -> bool:
        """Remove the lock, if it is still the stale one judged: moved aside in one step first, so a
        lock another process took meanwhile is put back, never deleted."""
        aside = self.path / f"{LOCK_FILE}.{os.getpid()}.stale.tmp"
        try:
            os.replace(self.file, aside)
        except FileNotFoundError:
            return False
        moved = _read_holder(aside)
        if moved and moved != holder:
            with contextlib.suppress(FileExistsError):
                os.link(aside, self.file)  # someone's fresh lock: back in place
            aside.unlink(missing_ok=True)
            return False
        aside.unlink(missing_ok=True)
        return True

    def release(self) -> None:
        holder = self.holder()
        if holder and self._is_mine(holder, self._info()):
            self.file.unlink(missing_ok=True)
