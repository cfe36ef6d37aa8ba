"""Start-up time of `claimcheck --help` against `python -c "import textual.app"`, in one run.

Run: .venv/bin/python bench/startup.py [repeats]
The goal (issue 2): --help within 1.5x of a bare textual.app import.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable
CLAIMCHECK = str(Path(PY).with_name("claimcheck"))


def _median_seconds(cmd: list[str], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    _median_seconds([PY, "-c", "pass"], 2)  # warm the file cache for both
    ours = _median_seconds([CLAIMCHECK, "--help"], repeats)
    textual = _median_seconds([PY, "-c", "import textual.app"], repeats)
    bare = _median_seconds([PY, "-c", "pass"], repeats)
    print(f"python -c pass               median {bare * 1000:7.1f} ms")
    print(f"claimcheck --help            median {ours * 1000:7.1f} ms")
    print(f"python -c 'import textual.app' median {textual * 1000:7.1f} ms")
    print(f"ratio claimcheck/textual.app  {ours / textual:.2f}x (goal <= 1.5x), {repeats} runs each")


if __name__ == "__main__":
    main()
