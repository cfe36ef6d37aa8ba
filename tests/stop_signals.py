"""A stop signal that a library hands back as an error of its own, for tests/test_kill_chain.py.

Run in a fresh process: this module imports nothing that loads Polars, so Ctrl-C's handler there is
claimcheck's own (Polars puts its handler in front of the one set before it loads).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable


def _signal_self(sig: int) -> None:
    os.kill(os.getpid(), sig)
    for _ in range(1000):  # Python runs a pending handler between bytecodes
        time.sleep(0.001)
    raise AssertionError("the handler never ran")


class _Dropped:
    """Sends the signal from __del__: Python reports what the handler raised there as unraisable
    ("Exception ignored in") and goes on, as Polars did with one raised in its dtype conversion."""

    def __init__(self, sig: int) -> None:
        self.sig = sig

    def __del__(self) -> None:
        _signal_self(self.sig)


def _signalled(sig: int, how: str) -> Callable[[], int]:
    """A command that sends itself `sig` where a native library would hand the handler's exception on
    as something else: `wrapped` raises an error of its own around it (Polars turns it into a Rust
    panic or a TypeError, pydantic-core into a SchemaError), `reported` reports it as a failure and
    returns 2, `swallowed` loses it (unraisable) and returns 2."""

    def command() -> int:
        if how == "swallowed":
            _Dropped(sig)  # dropped at once: __del__ runs here
            return 2
        try:
            _signal_self(sig)
        except BaseException as exc:  # noqa: BLE001 - what the library does with it is the point
            if how == "wrapped":
                raise RuntimeError(f"a library's own error around {type(exc).__name__}") from None
            return 2
        raise AssertionError("unreachable")

    return command


def check_stop(sig: int, how: str) -> None:
    """Check that _interruptible ends a command stopped by `sig` with its line, whatever came back."""
    from claimcheck.tui import cli

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    hook = sys.unraisablehook
    code, said = (143, "terminated") if sig == signal.SIGTERM else (130, "interrupted")
    assert cli._interruptible(_signalled(sig, how)) == code
    assert {s: signal.getsignal(s) for s in before} == before  # the handlers it replaced are back
    assert sys.unraisablehook is hook
    # Without a signal a failure is the command's own: raised or returned as it is.
    assert cli._interruptible(lambda: 2) == 2
    try:
        cli._interruptible(lambda: int("not a number"))
    except ValueError:
        pass
    else:
        raise AssertionError("the command's own error was not raised")
    print(f"said {said}", flush=True)


def check_ctrl_c_in_a_query() -> None:
    """Ctrl-C while Polars runs a query: Polars ends the query with a KeyboardInterrupt of its own and
    then passes the signal on to the handler set before it loaded (claimcheck's), which must not
    raise a second one into the first one's handling (a traceback)."""
    import threading

    from claimcheck.tui import cli

    def command() -> int:
        import polars as pl  # loaded after the handler is set, as in a `claimcheck run`

        rows = pl.LazyFrame({"a": pl.int_range(0, 20_000_000, eager=True)})
        query = rows.group_by((pl.col("a") % 1_000_003).alias("b")).agg(pl.col("a").sum()).sort("b")
        threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # queries until the signal ends one (most of the time is in them)
            query.collect()
        return 0

    assert cli._interruptible(command) == 130
    print("said interrupted", flush=True)
