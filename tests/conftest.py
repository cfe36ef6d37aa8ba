"""Fixtures shared by the suite. `real_session` is the one real session (tests/real_session.py),
built once per test run (once in each worker process); readers of evidence (report, model-index, replay, TUI panels) are tested
on it rather than on hand-made records.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from claimcheck.engine.threads import usable_cores
from tests import real_session as rs
from tests.loopback_ray import started_head

# The audit's memory budget (engine/audit/budget.py) is written in coverage lines; the suite pins it,
# so that reports and snapshots do not depend on the memory of the machine that runs them.
os.environ.setdefault("CLAIMCHECK_MEMORY_BUDGET", "4G")

# `-n auto` (pyproject.toml) runs the suite on this many worker processes: one a core, at most two.
# Each test here trains, fits or drives a TUI on up to two threads, so more workers than that on a
# bigger machine would only crowd one another. The sessions below are built once per run and shared
# by the workers (built_once).
MAX_WORKERS = 2


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    return min(MAX_WORKERS, usable_cores())


# The longest files (per-file totals from --durations on this 2-core box, about a minute or more
# each on an idle one) are handed out first, so that the two workers finish together rather than one
# waiting on the other's last long file. Only the order changes: each file's tests keep theirs. The
# first worker gets the first and third files, the second the second and fourth: the tuned
# session's builder (test_tuning.py) then the real session's (test_tuning_runs.py) on one, files that
# need neither session (test_tui.py, test_crash.py) on the other; the tuned session's other reader
# (test_tui_tuning.py) comes late enough to find it built.
LONGEST_FIRST = (
    "test_tuning.py",
    "test_tui.py",
    "test_tuning_runs.py",
    "test_crash.py",
    "test_tui_walk.py",
    "test_kill_chain.py",
    "test_weighted_finetune.py",
    "test_integrity.py",
    "test_end_to_end.py",
    "test_untrusted_text.py",
    "test_tabular_end_to_end.py",
    "test_tui_guided.py",
    "test_tui_snapshots.py",
    "test_provenance.py",
    "test_retrieval_finetune.py",
    "test_sft_end_to_end.py",
    "test_packaging.py",
    "test_dispatch.py",
    "test_tui_forms.py",
    "test_contract_stage.py",
    "test_tui_tuning.py",
    "test_provider_local.py",
    "test_upgrades.py",
    "test_retrieval_end_to_end.py",
    "test_tui_panels.py",
    "test_provider_ray.py",
    "test_coverage.py",
    "test_multilabel_ft.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def _torch_on_one_thread() -> None:
    """Every test starts with torch (where this process has imported it) on one thread. Two workers
    share two cores, and torch's threads spin while they wait for each other: a replay of the real
    session took 36.8 / 38.2 s of CPU with torch on two threads and 26.7 s on one (the same replay,
    one after the other, 1-minute load 15-16). The real session's builders and the fitting fixtures
    set one thread themselves; this puts it back after a stage that set more (the artifact stage sets
    engine/threads.py's predict_torch_threads(), two on a 2-core machine that is not saturated, and
    keeps them)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """build(folder) once per test run, in a folder all xdist workers share: the first worker that
    needs it builds it under a file lock, a worker that comes later waits for that lock and reads
    the same folder. Without xdist, a folder of this process's own. A build that failed (no
    `.built` marker beside it) is removed and made again by the next worker, which fails the same way."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # this run's folder, above each worker's own
    folder, done = shared / name, shared / f"{name}.built"
    with FileLock(shared / f"{name}.lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def real_workspace(tmp_path_factory) -> Path:
    """The workspace of the real session (tests/real_session.py), built once per test run."""
    if not rs.SAMPLE.exists():
        pytest.skip("sample_data/tickets.csv is not generated")
    return built_once(tmp_path_factory, "real", rs.build)


@pytest.fixture(scope="session")
def real_session(real_workspace: Path) -> Path:
    """The session folder of the real session (read only: copy it with rs.copy_workspace to edit)."""
    return real_workspace / rs.SESSION


@pytest.fixture(scope="session")
def tuned_workspace(tmp_path_factory) -> Path:
    """The workspace of docs/answers-tuning.toml run CI-sized (tests/real_session.py build_tuned);
    read only: copy it with rs.copy_tuned to edit or to open in the app."""
    if not rs.SAMPLE.exists():
        pytest.skip("sample_data/tickets.csv is not generated")
    return built_once(tmp_path_factory, "tuned", rs.build_tuned)


@pytest.fixture(scope="session")
def ray_head() -> Any:
    """The loopback Ray head (tests/loopback_ray.py), one per worker process: the Ray tests of every
    file this worker runs share it."""
    yield from started_head()
