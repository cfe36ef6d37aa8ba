"""The one error root, the one way to word a pydantic validation error, and the exit codes.

Every problem the person can fix (a bad file, a missing column, a stage run out of order, a lock
held by another process) is a `ClaimcheckError`: the CLI and the app show its message, never a
traceback. The classes themselves live beside the code that raises them (EvidenceError in
claimcheck.engine.evidence, StageInputError and Cancelled in claimcheck.engine.pipeline.context, StageOrderError in claimcheck.engine.ledger.session, SessionLocked in
claimcheck.engine.ledger.lock, LockedTestError in claimcheck.engine.data.splits, InvalidInputs in claimcheck.engine.pipeline.core).

This module imports nothing heavy: the CLI reads the exit codes before it parses its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Exit codes of `claimcheck --replay`, `claimcheck run --answers` and `claimcheck report`.
EXIT_OK = 0  # everything reproduced / recorded and frozen / written
EXIT_DIFFERS = 1  # something did not reproduce, a check failed, or a run stopped early
EXIT_UNUSABLE = 2  # the input cannot be used at all: a bad file, a missing session, a refused input
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): what was written is kept; the same command continues
EXIT_TERMINATED = 143  # SIGTERM (128 + SIGTERM): the same, the lock released


class ClaimcheckError(Exception):
    """A problem the person can fix: shown as its message, with no traceback."""


@dataclass(frozen=True)
class Problem:
    """The first problem of a pydantic ValidationError, in claimcheck's words.

    field:   where, as `a.b[0].c` ("" for the top level)
    problem: what is wrong ("not a known field", "required but missing", pydantic's message),
             with how many more problems there are
    fix:     what to do, in a few words
    """

    field: str
    problem: str
    fix: str

    def text(self, top: str = "(inputs)") -> str:
        """`field 'a.b': problem` — the form every surface shows (app, answers run, replay)."""
        return f"field '{self.field or top}': {self.problem}"


def field_path(loc: tuple[Any, ...] | list[Any], prefix: str = "") -> str:
    """A pydantic location as claimcheck writes a field: `a.b[0].c`, under `prefix` when given."""
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validation_problem(exc: Any, prefix: str = "") -> Problem:
    """Word a pydantic ValidationError: its first error, and a count of the others.

    `prefix` places the field inside a larger file (e.g. "source" for an answers file's [source]).
    """
    errors = exc.errors()
    if not errors:  # pydantic always gives one; be safe with hand-made errors
        return Problem(prefix, str(exc), "correct the value")
    more = len(errors) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return _word(errors[0], prefix, tail)


def validation_problems(exc: Any, prefix: str = "") -> list[Problem]:
    """Every error of a pydantic ValidationError, each worded as `validation_problem` words the first
    (the app's forms show each beside its own field)."""
    return [_word(err, prefix, "") for err in exc.errors()]


def _word(err: Any, prefix: str, tail: str) -> Problem:
    field = field_path(tuple(err.get("loc", ())), prefix)
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return Problem(field, "not a known field" + tail, "remove it or check its spelling")
    if kind == "missing":
        return Problem(field, "required but missing" + tail, "add it")
    # a validator's own message reads as a sentence: no "Value error, " prefix, one line
    msg = " ".join(str(err.get("msg", "invalid value")).removeprefix("Value error, ").split())
    return Problem(field, f"{msg}{tail}", "correct the value")


__all__ = [
    "EXIT_DIFFERS",
    "EXIT_OK",
    "EXIT_UNUSABLE",
    "ClaimcheckError",
    "Problem",
    "field_path",
    "validation_problem",
    "validation_problems",
]
