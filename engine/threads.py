"""The one place native thread pools (OpenMP, BLAS) are capped for scikit-learn / numpy fits, and the
one place the engine's own worker threads are sized (`ordered_map`, by the same cap).

scikit-learn's HistGradientBoosting starts one OpenMP thread per machine core by default, and its
threads spin while they wait for each other. On a loaded machine that is ruinous: the tabular
baseline took 450 s instead of 26 s (same figures), and a 50-round fit measured here took 73 s with
2 threads and 1.8 s with 1 while other work kept the 2-core machine at load 13. So every engine fit
runs inside `capped()`, whose cap is the cores this process may run on (`os.sched_getaffinity`),
lowered to 1 when other work already keeps all of those cores but one busy (the 1-minute load average
less this process's own part: `_load`).
The results do not depend on the cap (HistGradientBoosting and the linear models are deterministic
across thread counts); the cap is recorded in the environment check (`contract.environment`) and
the baseline's timing check.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_active: list[int] = []  # the cap in force while inside capped(); nested calls reuse it


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's core count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # platforms without sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


# Torch threads a training job runs on when its runtime names none (engine/training/job.py).
JOB_THREADS_MAX = 4


def job_threads() -> int:
    """Torch threads of a training job whose runtime names none: the machine's cores, at most
    `JOB_THREADS_MAX`."""
    return max(1, min(JOB_THREADS_MAX, os.cpu_count() or 1))


# Torch intra-op threads an in-process prediction (the artifact stage's arms) runs on, at most.
PREDICT_TORCH_THREADS_MAX = 2


def predict_torch_threads() -> int:
    """Torch threads for in-process prediction: `thread_cap()`, at most `PREDICT_TORCH_THREADS_MAX`.
    Torch's threads spin while they wait for each other as OpenMP's do: with the other core busy, a
    replay of the real session (tests/real_session.py) spent 17.4 s in its artifact stage on 2 threads
    and 8.9 s on 1, and reproduced every figure on either."""
    return max(1, min(PREDICT_TORCH_THREADS_MAX, thread_cap()))


def _load_average() -> float:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return 0.0


LOAD_WINDOW_S = 60.0  # the 1-minute load average's time constant (the kernel decays it exponentially)
# (when, this process's CPU seconds, its load) at the last look (_own_load)
_own = [time.monotonic(), time.process_time(), 0.0]
_own_lock = threading.Lock()


def _own_load() -> float:
    """This process's part of the 1-minute load average, estimated: the cores its threads kept busy
    since the last look (its CPU seconds over the seconds elapsed), averaged as the kernel averages
    the load. Without it a long audit on an idle machine sees its own threads as other work and drops
    to one thread after a minute or two."""
    with _own_lock:
        now, cpu = time.monotonic(), time.process_time()
        then, cpu_then, own = _own
        if now > then:
            decay = math.exp(-(now - then) / LOAD_WINDOW_S)
            own = own * decay + (cpu - cpu_then) / (now - then) * (1 - decay)
            _own[:] = [now, cpu, own]
        return own


def _load() -> float:
    """The other work's load: the 1-minute load average less this process's own part."""
    return max(0.0, _load_average() - _own_load())


def thread_cap() -> int:
    """The usable cores, or 1 when other work already keeps all of them but one busy."""
    cores = usable_cores()
    return 1 if _load() >= max(1, cores - 1) else cores


@contextlib.contextmanager
def capped() -> Iterator[int]:
    """Run the body with every native thread pool limited to `thread_cap()`; yields the cap.

    Nested calls (a fit inside a capped stage) reuse the outer cap without re-limiting, so a
    per-example prediction does not pay threadpoolctl's library scan each time."""
    if _active:
        yield _active[-1]
        return
    from threadpoolctl import threadpool_limits

    cap = thread_cap()
    with threadpool_limits(limits=cap):
        _active.append(cap)
        try:
            yield cap
        finally:
            _active.pop()


@contextlib.contextmanager
def single() -> Iterator[int]:
    """Run the body with every native thread pool at one thread, whatever the cap; yields 1.

    For a fit whose figures are evidence and must not move with the machine's load: a BLAS reduction
    sums in an order set by its thread count, so an lbfgs fit (the frozen probe's head) can end a few
    ulps apart under 1 and 2 threads, and a prediction near a tie then flips."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        _active.append(1)
        try:
            yield 1
        finally:
            _active.pop()


def record(cap: int | None = None) -> dict[str, int | float]:
    """What the environment / timing checks record: the cap (the one used, when given)."""
    return {
        "native_thread_cap": thread_cap() if cap is None else cap,
        "usable_cores": usable_cores(),
        "load_average_1m": round(_load_average(), 2),
        "cpu_count": os.cpu_count() or 0,
    }


def ordered_map(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None) -> Iterator[R]:
    """fn over items, results in order, on up to `workers` threads (default thread_cap()) with no more
    than that many items in flight (memory stays bounded by a few items' results). For work that
    releases the GIL (Polars, numpy, the compiled loops); one worker runs it inline, in this thread."""
    n = thread_cap() if workers is None else workers
    if n < 2:
        yield from map(fn, items)
        return
    from concurrent.futures import ThreadPoolExecutor

    it = iter(items)
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="claimcheck") as pool:
        pending = collections.deque(pool.submit(fn, x) for x in itertools.islice(it, n))
        while pending:
            done = pending.popleft().result()
            for x in itertools.islice(it, 1):
                pending.append(pool.submit(fn, x))
            yield done
