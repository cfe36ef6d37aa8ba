"""Time from launching `claimcheck` to its first usable screen, next to a bare Textual app's, in one run.

Each command runs in a real pseudo-terminal of 80x24; the clock stops when the screen's text
shows the marker of the first usable screen (the start screen's title, or an opened session's
stage state line), then ctrl+q closes it. No hook inside the app: what is timed is what a
person waits for.

    .venv/bin/python bench/first_screen.py [repeats]
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

BARE_APP = (
    "from textual.app import App\n"
    "from textual.widgets import Footer, Static\n"
    "class Bare(App):\n"
    "    BINDINGS = [('ctrl+q', 'quit', 'Quit')]\n"
    "    def compose(self):\n"
    "        yield Static('bare app ready')\n"
    "        yield Footer()\n"
    "Bare().run()\n"
)
_ANSI = re.compile(
    rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]"
)


def time_to_screen(cmd: list[str], marker: bytes, cwd: Path, timeout: float = 60.0) -> float:
    """Seconds from fork to the marker appearing on an 80x24 pseudo-terminal."""
    import fcntl
    import termios

    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "COLUMNS": "80",
        "LINES": "24",
        "TEXTUAL_ANIMATIONS": "none",
    }
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child: become the command
        os.chdir(cwd)
        os.execvpe(cmd[0], cmd, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    seen = b""
    elapsed = -1.0
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            if marker in _ANSI.sub(b"", seen):
                elapsed = time.perf_counter() - t0
                break
        os.write(fd, b"\x11")  # ctrl+q
        deadline = time.time() + 5
        while time.time() < deadline:
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:
                select.select([fd], [], [], 0.05)
                os.read(fd, 65536)
            except OSError:
                pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(fd)
    if elapsed < 0:
        raise RuntimeError(f"{' '.join(cmd)}: marker {marker!r} not seen within {timeout} s")
    return elapsed


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    py = sys.executable
    claimcheck = str(Path(py).with_name("claimcheck"))
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        from claimcheck.engine.ledger.session import Session

        session = Session.create(ws / "runs" / "bench", workspace=ws)
        cases = [
            ("bare Textual app", [py, "-c", BARE_APP], b"bare app ready"),
            ("claimcheck (start screen)", [claimcheck], b"start a session"),
            ("claimcheck SESSION_DIR", [claimcheck, str(session.path)], b"state: not run"),
        ]
        results: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        for _ in range(repeats):  # interleaved, so machine load hits every case alike
            for name, cmd, marker in cases:
                results[name].append(time_to_screen(cmd, marker, ws))
                (session.path / ".lock").unlink(missing_ok=True)
    bare = statistics.median(results["bare Textual app"])
    for name, times in results.items():
        med = statistics.median(times)
        print(
            f"{name:<28} median {med * 1000:7.0f} ms  (min {min(times) * 1000:.0f}, {repeats} runs)  "
            f"{med / bare:.2f}x bare"
        )


if __name__ == "__main__":
    main()
