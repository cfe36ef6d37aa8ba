"""The session lock: one app or run holds a session at a time. The lock file is written whole
(hard link of a complete temp file), names its holder (pid, host, since), and is stale when that
process is gone or the file is empty or unreadable — then it can be taken over."""

from __future__ import annotations

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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        try:
            holder = json.loads(self.file.read_text())
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, OSError, UnicodeDecodeError):
            return {}
        return holder if isinstance(holder, dict) else {}

    def holder_is_dead(self, holder: dict[str, Any]) -> bool:
        """An empty or unreadable lock names nobody alive: it is stale."""
        try:
            pid = int(holder["pid"])
        except (KeyError, TypeError, ValueError):
            return True
        return holder.get("host") == socket.gethostname() and not _pid_alive(pid)

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

    def acquire(self, take_over_stale: bool = False) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": now_iso()}
        for _ in range(3):
            if self._create(info):
                if self.on_acquire is not None:
                    self.on_acquire()
                return
            holder = self.holder()
            if holder is None:
                continue  # released between our try and our look
            if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
                return
            stale = self.holder_is_dead(holder)
            if stale and take_over_stale:
                self.file.unlink(missing_ok=True)
                continue
            raise SessionLocked(self.path, holder, stale)
        raise SessionLocked(self.path, self.holder() or {}, False)

    def release(self) -> None:
        holder = self.holder()
        if holder and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
            self.file.unlink(missing_ok=True)
