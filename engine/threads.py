"""The one place native thread pools (OpenMP, BLAS) are capped for scikit-learn / numpy fits.

scikit-learn's HistGradientBoosting starts one OpenMP thread per *machine* core by default; on a
loaded machine where this process may use only a few cores, that oversubscription made the tabular
baseline take 450 s instead of 26 s (same figures). Every engine fit runs inside `capped()`, whose
cap is the number of cores this process may run on (`os.sched_getaffinity`), and the cap is
recorded in the environment check (`contract.environment`) and the baseline's timing check.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's core count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # platforms without sched_getaffinity (macOS, Windows)
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def capped() -> Iterator[int]:
    """Run the body with every native thread pool limited to `usable_cores()`; yields the cap."""
    from threadpoolctl import threadpool_limits

    cap = usable_cores()
    with threadpool_limits(limits=cap):
        yield cap


def record() -> dict[str, int]:
    """What the environment check records about the cap."""
    return {"native_thread_cap": usable_cores(), "cpu_count": os.cpu_count() or 0}
