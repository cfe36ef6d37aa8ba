"""The stop signals (SIGTERM, Ctrl-C) this process received during a headless command.

The CLI's handler (claimcheck.tui.cli) records each one here and raises in the main thread. That
exception does not always reach the top: a native library that was calling Python when the handler
ran hands back an error of its own (Polars a Rust panic or a TypeError, pydantic-core a SchemaError),
and the engine may report or record that error as if the data had caused it. So the session's commit
point asks here first (`refuse_after_stop`): nothing computed after a stop signal becomes evidence.

Imports nothing: the CLI reads it before it parses its arguments.
"""

from __future__ import annotations

_received: list[int] = []


class Stopped(BaseException):
    """A stop signal arrived during this command: raised by the CLI's SIGTERM handler, and where evidence
    would have been committed after any stop signal. A BaseException, as KeyboardInterrupt: `except
    Exception` blocks let it pass."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum} received")
        self.signum = signum


def received(signum: int) -> None:
    """Record a stop signal (from the signal handler)."""
    _received.append(signum)


def last() -> int | None:
    """The last stop signal received since `forget`, if any."""
    return _received[-1] if _received else None


def forget() -> None:
    """The command ended: this process commits again."""
    _received.clear()


def refuse_after_stop() -> None:
    """Raise Stopped where a stop signal arrived: nothing measured since is committed."""
    signum = last()
    if signum is not None:
        raise Stopped(signum)
