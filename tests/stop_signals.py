"""A stop signal that a library hands back as an error of its own, for tests/test_kill_chain.py.

Run in a fresh process: this module imports nothing that loads Polars, so Ctrl-C's handler there is
claimcheck's own (Polars puts its handler in front of the one set before it loads).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable


def _signalled(sig: int, wrap: bool) -> Callable[[], int]:
    """A command that sends itself `sig` and hands the exception its handler raised on as a native
    library does when the handler ran while it was calling Python (Polars turns it into a Rust
    panic, pydantic-core into a SchemaError): `wrap` raises an error of its own around it, else
    the command reports it as an error and returns 2."""

    def command() -> int:
        try:
            os.kill(os.getpid(), sig)
            for _ in range(1000):  # Python runs a pending handler between bytecodes
                time.sleep(0.001)
        except BaseException as exc:  # noqa: BLE001 - what the library does with it is the point
            if wrap:
                raise RuntimeError(f"a library's own error around {type(exc).__name__}") from None
            return 2
        raise AssertionError("the handler never ran")

    return command


def check_stop(sig: int, wrap: bool) -> None:
    """Check that _interruptible ends a command stopped by `sig` with its line, whatever came back."""
    from claimcheck.tui import cli

    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    code, said = (143, "terminated") if sig == signal.SIGTERM else (130, "interrupted")
    assert cli._interruptible(_signalled(sig, wrap)) == code
    assert {s: signal.getsignal(s) for s in before} == before  # the handlers it replaced are back
    # Without a signal a failure is the command's own: raised or returned as it is.
    assert cli._interruptible(lambda: 2) == 2
    try:
        cli._interruptible(lambda: int("not a number"))
    except ValueError:
        pass
    else:
        raise AssertionError("the command's own error was not raised")
    print(f"said {said}", flush=True)
