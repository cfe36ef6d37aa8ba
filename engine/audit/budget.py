"""The audit's memory budget: how much memory the source and split checks may plan for, and, per
check, whether it runs in memory or bounded (streamed / sharded through temporary files).

Where the budget comes from, first found wins:
1. the source input `memory_budget` (a size: "512M", "4G", "1.5GiB", or bytes), recorded with the
   source stage's inputs;
2. the environment variable CLAIMCHECK_MEMORY_BUDGET (`claimcheck run --memory-budget`,
   `claimcheck --replay … --memory-budget` and `claimcheck --memory-budget` set it), the same syntax;
3. DEFAULT_FRACTION of the machine's memory: physical memory, or the tightest memory limit of this
   process's own cgroup and those above it where that is smaller (machine_memory).

Each check that has two paths estimates what its in-memory path needs (`need_*` below, measured
factors: bench/README.md "bounded memory") and takes the bounded path when that exceeds the budget.
The figures do not depend on the path (tests/test_audit_memory.py); the choice and the budget are
written at the end of the check's coverage line (`note`), and replay does not compare that part:
another machine may choose otherwise and measure the same (engine/headless/compare.py).
The budget chooses paths; it is not a cap the process is held to (docs/audit-scale.md says what the
bounded paths still hold: the loaded frame, the near-duplicate search's per-text arrays).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.pipeline.context import StageInputError

ENV = "CLAIMCHECK_MEMORY_BUDGET"
DEFAULT_FRACTION = 0.5  # of the machine's memory, when neither the input nor the environment sets one
MIN_BUDGET = 1 << 20  # 1 MiB: the least a setting may ask (every check then takes its bounded path)
# Peak memory of reading a CSV / JSONL file into a frame, per byte of file: the parsed frame plus the
# parser's buffers (measured at 1M ticket rows: 890 MB peak for a 375 MB file, 2.4x; bench/memory.py).
PARSE_FACTOR = 2.4
# The in-memory near-duplicate search's working memory per byte of text (shingle hashes, counts,
# prefixes and one pass of signatures; 1M tickets: ~500 MB over ~250 MB of text).
NEARDUP_FACTOR = 2.0
# The coverage line's memory part starts with this; replay strips it before comparing coverage.
NOTE_MARK = " · memory: "
# The coverage line's Ray part (engine/audit/onray: the cluster a check ran on) starts with this; replay
# strips it too.
RAY_MARK = " · ray: "
IN_MEMORY = "in memory"
BOUNDED = "bounded"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class BudgetError(StageInputError):
    """A memory budget that cannot be read."""


def parse_size(text: str, where: str) -> int:
    """'512M', '4G', '1.5GiB', '1000000' → bytes (binary units); a clear error naming `where`."""
    m = _SIZE.match(str(text))
    if not m:
        raise BudgetError(
            f"{where} = {text!r} is not a size; write a number of bytes or one with K, M, G or T "
            "(e.g. 512M, 4G)"
        )
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value < MIN_BUDGET:
        raise BudgetError(f"{where} = {text!r} is below the least usable budget, {human(MIN_BUDGET)}")
    return value


def machine_memory(root: Path = Path("/")) -> int:
    """Bytes of memory this process may use: the tightest memory limit of its own cgroup and the
    cgroups above it (cgroup v2 `memory.max`, v1 `memory.limit_in_bytes`), else physical memory.
    `root` is where /proc and /sys are found (a test's fake tree)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limits = [int(raw) for raw in _cgroup_limits(root) if raw.isdigit()]
    return min([total, *limits])


def _cgroup_limits(root: Path) -> list[str]:
    """The raw limit files' contents ("max", a number) from this process's memory cgroup up to the
    top of its hierarchy, v2 and v1 alike."""
    found = []
    for top, own, name in _cgroup_dirs(root):
        here = own
        while True:
            try:
                found.append((here / name).read_text().strip())
            except OSError:
                pass
            if here == top or top not in here.parents:
                break
            here = here.parent
    return found


def _cgroup_dirs(root: Path) -> list[tuple[Path, Path, str]]:
    """(mount point, this process's cgroup folder, limit file) for each memory hierarchy: v2's unified
    one and v1's `memory` controller, found from /proc/self/cgroup and /proc/self/mountinfo. Without
    them (not Linux, or unreadable), the usual mount points with the process at their top."""
    try:
        groups = (root / "proc/self/cgroup").read_text().splitlines()
        mounts = (root / "proc/self/mountinfo").read_text().splitlines()
    except OSError:
        groups, mounts = [], []
    own = {}  # "v2" or "v1" -> the cgroup path /proc/self/cgroup gives
    for line in groups:
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            own["v2"] = parts[2]
        elif len(parts) == 3 and "memory" in parts[1].split(","):
            own["v1"] = parts[2]
    out = []
    for line in mounts:
        # mountinfo: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS... - FSTYPE SOURCE SUPER_OPTIONS
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or not tail:
            continue
        kind = {"cgroup2": "v2", "cgroup": "v1"}.get(tail[0])
        if kind == "v1" and "memory" not in (tail[2] if len(tail) > 2 else "").split(","):
            continue
        if kind is None or kind not in own:
            continue
        # mountinfo writes a space, tab, newline or backslash in a path as an octal escape.
        mount_root, at = (re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), f) for f in fields[3:5])
        point = root / at.lstrip("/")
        path = own[kind]
        # Inside a cgroup namespace the mount's root is the process's own cgroup: the path is relative
        # to it; a path outside the mount's root is not visible here, so the mount point stands for it.
        rel = Path(path).relative_to(mount_root) if Path(path).is_relative_to(mount_root) else Path()
        out.append((point, point / rel, "memory.max" if kind == "v2" else "memory.limit_in_bytes"))
    if not out:
        out = [
            (root / "sys/fs/cgroup", root / "sys/fs/cgroup", "memory.max"),
            (root / "sys/fs/cgroup/memory", root / "sys/fs/cgroup/memory", "memory.limit_in_bytes"),
        ]
    return out


def human(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class Budget:
    bytes: int
    origin: str  # "setting", "environment" or "default (50% of 16.0 GiB)"

    def choose(self, need: int) -> str:
        """The path for a check whose in-memory path needs about `need` bytes."""
        return IN_MEMORY if need <= self.bytes else BOUNDED

    def note(self, path: str) -> str:
        """The coverage line's memory part: the path taken and the budget it was chosen under."""
        return f"{NOTE_MARK}{path} (budget {human(self.bytes)}, {self.origin})"

    def covered(self, coverage: str, path: str) -> str:
        """`coverage` with the memory part added (alone when the check has no other coverage)."""
        note = self.note(path)
        return coverage + note if coverage else note[len(" · ") :]


def resolve(setting: str) -> Budget:
    """The budget in force: the input's setting, else the environment's, else the default fraction."""
    if str(setting).strip():
        return Budget(parse_size(setting, "source input 'memory_budget'"), "setting")
    env = os.environ.get(ENV, "").strip()
    if env:
        return Budget(parse_size(env, f"environment variable {ENV}"), "environment")
    total = machine_memory()
    return Budget(int(total * DEFAULT_FRACTION), f"default: {DEFAULT_FRACTION:.0%} of {human(total)}")


def need_parse(paths: list[Path]) -> int:
    """What reading the files into one frame needs in memory (Parquet: about its decoded size). A file
    that is not there counts nothing: the reader refuses it with its own message."""
    total = 0
    for p in paths:
        if not Path(p).is_file():
            continue
        size = Path(p).stat().st_size
        total += int(size * (3 if Path(p).suffix.lower() in (".parquet", ".pq") else PARSE_FACTOR))
    return total


def need_neardup(text_bytes: int) -> int:
    return int(text_bytes * NEARDUP_FACTOR)


def strip_note(coverage: str) -> str:
    """A coverage line without its memory part and its Ray part (what replay compares): both say where
    and how the check ran, not what it measured."""
    for mark in (NOTE_MARK, RAY_MARK):
        if coverage.startswith(mark[len(" · ") :]):
            return ""
    cuts = [at for at in (coverage.find(NOTE_MARK), coverage.find(RAY_MARK)) if at >= 0]
    return coverage[: min(cuts)] if cuts else coverage


def collect(lf: object, path: str) -> object:
    """A lazy frame collected by `path`: IN_MEMORY collects it at once (the reader's buffers and the
    frame together); BOUNDED streams it to a temporary Parquet file (TMPDIR) with Polars' streaming
    engine and reads that back, so the parse never holds more than a batch beside the frame. The same
    frame either way."""
    import tempfile

    import polars as pl

    assert isinstance(lf, pl.LazyFrame)
    if path == IN_MEMORY:
        return lf.collect()
    with tempfile.TemporaryDirectory(prefix="claimcheck-spill-") as tmp:
        spill = Path(tmp) / "frame.parquet"
        try:
            lf.sink_parquet(spill, compression="lz4", statistics=False, engine="streaming")
        except OSError as exc:
            raise StageInputError(
                f"the bounded-memory read could not write its temporary file in {tmp}: "
                f"{exc.strerror or exc}; free space there or set TMPDIR to a folder with room"
            ) from exc
        return pl.read_parquet(spill)


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim; nothing elsewhere).

    numpy's temporaries live on the C heap, Polars' frames in its own allocator: pages numpy freed
    stay in this process, unusable by Polars, unless they are handed back. The bounded path calls this
    between its steps. (Fixing glibc's mmap threshold as well, so that every freed block returns at
    once, was measured and left out: bench/README.md, "bounded memory".)"""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Any:
    """glibc's malloc_trim, looked up once (find_library runs ldconfig), or None."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)
