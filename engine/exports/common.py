"""What every export shares: the integrity gate, the frozen records it reads, and the capture of
the libraries' warnings (made visible, handed to the caller, never printed raw)."""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path

from claimcheck.engine.errors import ClaimcheckError
from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.textsafe import visible


class ExportRefused(ClaimcheckError):
    """The session fails its integrity checks: nothing is exported from it."""


# ---------------------------------------------------------------- integrity


def verify_for_export(session_dir: Path) -> Session:
    """Open the session and refuse it when a record was edited, a pinned file changed, a write was
    half done or a signature does not verify (claimcheck.engine.headless.integrity.verify, the checks replay and the
    report run). A stale chain is not refused: stale stages are shown as such and give no figures."""
    from claimcheck.engine.headless import integrity

    session = Session.open(Path(session_dir))
    problems = [
        f"{r.stage} {r.check}: {r.detail}"
        for r in integrity.verify(session)
        if r.outcome in ("tampered", "incomplete", "missing")
    ]
    if problems:
        raise ExportRefused(
            "the session fails its integrity checks, so nothing is exported: "
            + "; ".join(problems)
            + ". Run `claimcheck --replay` on it for the full table."
        )
    return session


def frozen_record(session: Session, records: dict[str, StageRecord], name: str) -> StageRecord | None:
    """The stage's record where the stage is frozen (an export shows no figure of another), else None."""
    rec = records.get(name)
    return rec if rec is not None and session.states().get(name) == "frozen" else None


# ---------------------------------------------------------------- library warnings


class _Captured(logging.Handler):
    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(visible(record.getMessage(), keep_newlines=True))


@contextlib.contextmanager
def library_warnings(into: list[str], logger_name: str) -> Iterator[None]:
    """A library's warnings (its logger `logger_name`, and Python warnings) appended to `into`, made
    visible: data in them (column names, file names) never reaches a terminal raw."""
    logger = logging.getLogger(logger_name)
    handler, propagate = _Captured(into), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
        into += [visible(f"{w.category.__name__}: {w.message}", keep_newlines=True) for w in caught]
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
