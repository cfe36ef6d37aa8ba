"""What a headless run reports: one row per check with its outcome, a table, JSON and an exit code.

Both headless runs speak this language: replay (`claimcheck.engine.headless.replay.ReplayResult`: did each check
reproduce?) and the answers run (`claimcheck.engine.headless.answers.AnswersResult`: was each check recorded and
frozen?). The exit codes are claimcheck.engine.errors': 0 all well, 1 a failing row, 2 unusable input.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from claimcheck.engine.errors import EXIT_DIFFERS, EXIT_OK, EXIT_UNUSABLE
from claimcheck.engine.textsafe import visible

# A line of progress for the person (stderr in the CLI).
Progress = Callable[[str], None]

OUTCOMES = (
    "reproduced",
    "differs",
    "missing",
    "new",
    "stale",
    "tampered",
    "incomplete",
    "not_run",
    "observation",
    # answers-file runs: a check computed and frozen now, or computed with status "fail"; a check of
    # a stage kept as it was (continuing a session whose answers and upstream did not change).
    "recorded",
    "failed",
    "kept",
)
FAILING = frozenset({"differs", "missing", "new", "stale", "tampered", "incomplete", "failed"})


@dataclass
class Difference:
    key: str
    old: Any
    new: Any
    tolerance: float | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"key": self.key, "old": _jsonable(self.old), "new": _jsonable(self.new)}
        if self.tolerance is not None:
            out["tolerance"] = self.tolerance
        return out

    def text(self) -> str:
        tol = f" (tolerance ±{self.tolerance:g})" if self.tolerance is not None else ""
        return f"{self.key}: {_short(self.old)} → {_short(self.new)}{tol}"


@dataclass
class Row:
    stage: str
    check: str
    outcome: str
    # The check's recorded status (pass/warn/...), when there is one.
    status: str = ""
    detail: str = ""
    differences: list[Difference] = field(default_factory=list)

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.stage, "check": self.check, "outcome": self.outcome}
        if self.status:
            out["status"] = self.status
        if self.detail:
            out["detail"] = self.detail
        if self.differences:
            out["differences"] = [d.to_json() for d in self.differences]
        return out


@dataclass
class RunResult:
    """Rows of a headless run; subclasses name the mode and the words of the verdict."""

    session_dir: Path
    rows: list[Row] = field(default_factory=list)
    # Set when the input cannot be used at all (no session, unreadable session.toml): exit 2.
    error: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    mode: str = "run"
    # The session's recorded claim verdict (artifact.verdict, Verdict.claim_verdict); empty without one.
    claim_verdict: dict[str, str] = field(default_factory=dict)

    VERDICT_OK: ClassVar[str] = "every row passed"
    VERDICT_DIFFERS: ClassVar[str] = "a row failed"

    @property
    def exit_code(self) -> int:
        if self.error:
            return EXIT_UNUSABLE
        return EXIT_DIFFERS if any(r.failing for r in self.rows) else EXIT_OK

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            out[r.outcome] = out.get(r.outcome, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "session_dir": str(self.session_dir),
            "exit_code": self.exit_code,
            "error": self.error,
            "counts": self.counts(),
            "rows": [r.to_json() for r in self.rows],
            "timing": self.timing,
            "claim_verdict": self.claim_verdict or None,
        }

    def render_table(self) -> str:
        if self.error and not self.rows:
            return f"claimcheck {self.mode}: unusable input: {visible(self.error)}"
        head = ("stage", "check", "status", "outcome", "detail")
        # Every cell can carry data (label values, column names, file names): shown visible, never raw.
        lines = [
            tuple(visible(x) for x in (r.stage, r.check, r.status or "-", r.outcome, _row_detail(r)))
            for r in self.rows
        ]
        widths = [
            max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)
        ]
        widths[4] = len(head[4])  # the detail column is last and left ragged
        fmt = "  ".join(f"{{:<{w}}}" for w in widths[:4]) + "  {}"
        out = [fmt.format(*head), fmt.format(*("-" * w for w in widths[:4]), "-" * 6)]
        out += [fmt.format(*line).rstrip() for line in lines]
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.counts().items()))
        verdict = self.VERDICT_OK if self.exit_code == EXIT_OK else self.VERDICT_DIFFERS
        out.append("")
        if self.error:  # stopped part-way: what was done is above, what stopped it here
            verdict = f"stopped: {visible(self.error)}"
        out.append(f"{self.mode}: {verdict} ({counts or 'nothing to do'}); exit {self.exit_code}")
        if self.claim_verdict:
            out.append(f"recorded verdict: {visible(self.claim_verdict['line'])}")
        if self.timing.get("total_s") is not None:
            t = self.timing
            out.append(
                f"time: {t['total_s']:.2f}s in all, {t.get('compute_s', 0.0):.2f}s in stage computations"
                + (f" (ratio {t['ratio']:.2f})" if t.get("ratio") else "")
            )
        return "\n".join(out)


def recorded_claim_verdict(session: Any) -> dict[str, str]:
    """The claim verdict the session's artifact record holds (Verdict.claim_verdict); {} when it
    holds none or the record cannot be read (its own rows say why)."""
    from claimcheck.engine.errors import ClaimcheckError
    from claimcheck.engine.shapes import artifact as artifact_shapes
    from claimcheck.engine.shapes import parse

    try:
        record = session.record("artifact")
    except ClaimcheckError:
        return {}
    check = record.check("artifact.verdict") if record is not None else None
    v = parse(check, artifact_shapes.Verdict) if check is not None else None
    return v.claim_verdict() if v is not None else {}


def timing(total: float, per_stage: dict[str, float], compute: float | None = None) -> dict[str, Any]:
    """The `timing` table of a result: seconds in all, in stage computations, and their ratio."""
    compute = sum(per_stage.values()) if compute is None else compute
    return {
        "total_s": round(total, 4),
        "compute_s": round(compute, 4),
        "overhead_s": round(total - sum(per_stage.values()), 4),
        "ratio": round(total / compute, 3) if compute > 0 else None,
        "per_stage_s": {k: round(v, 4) for k, v in per_stage.items()},
    }


def stage_progress(say: Progress, stage: str) -> Callable[[float | None, str], None]:
    """A StageContext progress callback that prints `  stage: 40% message` lines, at most 2 a second."""
    last = [0.0]

    def report(fraction: float | None, message: str) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 and fraction not in (None, 1.0):
            return  # progress on stderr, not a flood
        last[0] = now
        pct = f" {fraction:.0%}" if fraction is not None else ""
        say(f"  {stage}:{pct} {message}")

    return report


def failing_rows(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r.failing]


def _row_detail(r: Row) -> str:
    parts = [d.text() for d in r.differences[:4]]
    if len(r.differences) > 4:
        parts.append(f"(+{len(r.differences) - 4} more)")
    if r.detail:
        parts.insert(0, r.detail)
    return "; ".join(parts)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(_jsonable(value), ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value
