"""The audit under a real memory limit (a cgroup): the default budget reads the process's own cgroup
limit (engine/audit/budget.machine_memory, on fake /proc and /sys trees and for real), and under a
limit the in-memory audit is killed where the default budget's bounded path finishes with the
unlimited run's figures and pairs file. bench/cgroup_limit.py makes the cgroups; where none can be
made here the real-limit tests are skipped with the reason (tests/test_audit_memory.py keeps the
RLIMIT_DATA test)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from claimcheck.engine.audit import budget as B

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import cgroup_limit  # noqa: E402
import limit as bench_limit  # noqa: E402

GiB = 1 << 30
UNLIMITED_V1 = "9223372036854771712"  # what cgroup v1 writes for "no limit"


def _tree(root: Path, cgroup: str, mountinfo: list[str], files: dict[str, str]) -> Path:
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/self/mountinfo").write_text("\n".join(mountinfo) + "\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    return root


V1_MOUNTS = [
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755",
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu",
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
]
V1_SELF = "4:memory:/process_api/abc\n1:cpu:/\n0::/\n"


def test_v1_child_cgroup_limit_is_found_and_the_tightest_wins(tmp_path: Path) -> None:
    """A process in a child of a child (as on this box): its own limit, or a parent's when tighter;
    the root's file (all the old reader looked at) says no limit."""
    mem = "sys/fs/cgroup/memory"
    files = {
        f"{mem}/memory.limit_in_bytes": UNLIMITED_V1,
        f"{mem}/process_api/memory.limit_in_bytes": str(2 * GiB),
        f"{mem}/process_api/abc/memory.limit_in_bytes": str(GiB),
    }
    root = _tree(tmp_path / "own", V1_SELF, V1_MOUNTS, files)
    assert B.machine_memory(root) == GiB
    files[f"{mem}/process_api/abc/memory.limit_in_bytes"] = UNLIMITED_V1
    root = _tree(tmp_path / "parent", V1_SELF, V1_MOUNTS, files)
    assert B.machine_memory(root) == 2 * GiB


def test_v2_limit_walks_up_and_max_means_none(tmp_path: Path) -> None:
    mounts = ["25 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate"]
    files = {
        "sys/fs/cgroup/user.slice/memory.max": str(3 * GiB),
        "sys/fs/cgroup/user.slice/app.scope/memory.max": "max",
    }
    root = _tree(tmp_path / "a", "0::/user.slice/app.scope\n", mounts, files)
    assert B.machine_memory(root) == 3 * GiB
    files["sys/fs/cgroup/user.slice/memory.max"] = "max"
    root = _tree(tmp_path / "b", "0::/user.slice/app.scope\n", mounts, files)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert B.machine_memory(root) == physical


def test_v2_inside_a_cgroup_namespace(tmp_path: Path) -> None:
    """A container: the mount's root is the container's cgroup and /proc/self/cgroup says "/" (or a
    path the mount does not show): the limit is the mount point's own file."""
    mounts = ["25 23 0:27 /kubepods/pod1/c1 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw"]
    files = {"sys/fs/cgroup/memory.max": str(512 << 20)}
    assert B.machine_memory(_tree(tmp_path / "a", "0::/\n", mounts, files)) == 512 << 20
    assert B.machine_memory(_tree(tmp_path / "b", "0::/../other\n", mounts, files)) == 512 << 20
    # Without the namespace: the full path below the mount's root.
    files = {"sys/fs/cgroup/c1/memory.max": str(256 << 20)}
    mounts = ["25 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw"]
    assert B.machine_memory(_tree(tmp_path / "c", "0::/c1\n", mounts, files)) == 256 << 20


def test_without_proc_the_usual_mount_points_are_read(tmp_path: Path) -> None:
    (tmp_path / "sys/fs/cgroup/memory").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/memory/memory.limit_in_bytes").write_text(str(GiB))
    assert B.machine_memory(tmp_path) == GiB
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert B.machine_memory(tmp_path / "nothing") == physical


def _cgroups() -> None:
    why = cgroup_limit.unavailable()
    if why:
        pytest.skip(why)


def test_default_budget_in_a_real_cgroup_is_half_its_limit() -> None:
    _cgroups()
    code = (
        "import os; os.environ.pop('CLAIMCHECK_MEMORY_BUDGET', None)\n"
        "from claimcheck.engine.audit import budget as B\n"
        "b = B.resolve(''); print(B.machine_memory(), b.bytes, b.origin)"
    )
    res = cgroup_limit.run_limited([sys.executable, "-c", code], 300 << 20, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    total, budget, origin = res.stdout.split(maxsplit=2)
    assert (int(total), int(budget)) == (300 << 20, 150 << 20)
    assert origin.strip() == "default: 50% of 300.0 MiB"
    assert not res.oom_killed and res.version in ("v1", "v2")


def test_harness_reports_an_oom_kill_and_removes_its_cgroup() -> None:
    _cgroups()
    grow = "b = bytearray(400 << 20); b[::4096] = b'x' * len(b[::4096]); print('survived')"
    res = cgroup_limit.run_limited([sys.executable, "-c", grow], 200 << 20, timeout=120)
    assert res.killed and res.oom_killed and res.returncode == -9 and "survived" not in res.stdout
    assert res.max_usage_bytes is None or res.max_usage_bytes <= 200 << 20
    _, own = cgroup_limit._own_cgroup()
    assert not [p for p in own.iterdir() if p.name.startswith(f"{cgroup_limit.PREFIX}{os.getpid()}-")]


ROWS = 75_000  # ~94 MB of conversations: the bounded run needs under 300 MB, the in-memory one over 340
LIMIT_MB = 340


def test_in_memory_audit_is_killed_where_the_default_budget_finishes(tmp_path: Path) -> None:
    """Under a cgroup limit of LIMIT_MB: the audit with every check in memory is killed by the kernel;
    the audit with no budget set reads the cgroup's limit, takes the bounded paths by itself and
    records the figures and the pairs file of an unlimited in-memory run (bench/limit.py's runs)."""
    _cgroups()
    bench_limit.generate(tmp_path / "convs.csv", rows=ROWS)
    limit = LIMIT_MB << 20
    killed = bench_limit.one_run(tmp_path, "convs", "limited-inmemory", bench_limit.BIG, limit)
    assert killed["returncode"] == -9 and killed["oom_killed"], killed
    done = bench_limit.one_run(tmp_path, "convs", "limited", "", limit)
    assert done["returncode"] == 0, done
    want = f"memory: bounded (budget {LIMIT_MB / 2:.1f} MiB, default: 50% of {LIMIT_MB:.1f} MiB)"
    for cid in ("source.schema", "source.near_duplicates", "split.membership"):
        assert done["coverage"][cid].endswith(want), done["coverage"]
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    ref = bench_limit.one_run(tmp_path, "convs", "unlimited", bench_limit.BIG, physical)
    assert ref["returncode"] == 0 and "memory: in memory" in ref["coverage"]["source.schema"]
    assert bench_limit.same_figures(tmp_path, "unlimited", "limited")
    assert ref["near_pairs"] > 1000 and ref["pairs_sha256"] == done["pairs_sha256"]
    figures = json.loads((tmp_path / "figures-limited.json").read_text())
    dup = figures["source.duplicate_inputs"]["measured"]["exact"]["groups"]
    assert dup > 0 and figures["source.conflicting_labels"]["status"] != "pass"


def test_cli_reports_without_cgroups() -> None:
    """The harness's command line says why where it cannot make a cgroup, else runs the command."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench/cgroup_limit.py"), "200M", "--", sys.executable, "-c", "print(7)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    why = cgroup_limit.unavailable()
    if why:
        assert done.returncode == 3 and "cannot make a child memory cgroup" in done.stderr
        return
    assert done.returncode == 0 and done.stdout.startswith("7\n")
    info = json.loads(done.stdout.splitlines()[-1])
    assert info["limit_bytes"] == 200 << 20 and info["returncode"] == 0 and not info["killed"]
