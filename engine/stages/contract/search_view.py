"""What a declared search's ledger says right now, for the app: one row per trial file, with a
running trial's step and latest dev evaluation read from its job's own files.

This module reads files; it decides nothing. The trial states, dev figures and the selection are the
ledger's and the contract record's (engine/stages/contract/tuning.py writes them); the app shows
them (tui/panels.py SearchPanel; its figures: engine/report/search_figures.py) and never computes
evidence of its own.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claimcheck.engine.shapes.tuning import TrialRecord, TrialState


class LiveTrial(BaseModel):
    """One ledger row as the app shows it (values from the trial file; step and the running trial's
    dev figure from its job's files)."""

    model_config = ConfigDict(extra="forbid")

    number: int
    kind: str
    seed: int
    state: TrialState
    settings: dict[str, float | int | str]
    value: float | None = None
    live_value: float | None = None  # a running trial's latest dev evaluation (not a result)
    live_step: int = 0
    total_steps: int = 0
    duration_s: float | None = None
    reason: str = ""
    digest: str = ""
    file: str = ""
    memory_bytes: int | None = None
    step_s: float | None = None
    resources_from: int | None = None
    resources_from_seed: int | None = None
    resources_from_digest: str | None = None


class SearchView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    revision: int
    hypothesis: str = ""
    metric: str = ""
    direction: str = ""
    n_trials: int = 0
    space: list[dict[str, Any]] = Field(default_factory=list)
    rows: list[LiveTrial] = Field(default_factory=list)
    problem: str = ""  # a file that could not be read: said, never guessed around


def revisions(session_dir: Path) -> list[int]:
    root = session_dir / "search"
    found = [re.fullmatch(r"r(\d+)", p.name) for p in root.iterdir()] if root.is_dir() else []
    return sorted(int(m.group(1)) for m in found if m is not None)


def _seconds(start: str, end: str, now: dt.datetime) -> float | None:
    try:
        a = dt.datetime.fromisoformat(start)
        b = dt.datetime.fromisoformat(end) if end else now
    except ValueError:
        return None
    return round(max(0.0, (b - a).total_seconds()), 3)


def _live(job_dir: Path) -> tuple[int, int, float | None]:
    """A running trial's step, its total and its latest dev evaluation, from the job's own files."""
    from claimcheck.engine.training import jobfiles

    status = jobfiles.read_status(job_dir)
    evals = [e for e in jobfiles.dev_evals(jobfiles.read_metrics(job_dir)) if math.isfinite(e.value)]
    step = status.step if status is not None else 0
    total = status.total_steps if status is not None else 0
    return step, total, (float(evals[-1].value) if evals else None)


def search_view(session_dir: Path, revision: int | None = None) -> SearchView | None:
    """The ledger of `revision` (the latest on disk when None); None when the session has no search."""
    from claimcheck.engine.stages.contract import tuning

    found = revisions(session_dir)
    if not found:
        return None
    rev = found[-1] if revision is None or revision not in found else revision
    rdir = tuning.revision_dir(session_dir, rev)
    view = SearchView(revision=rev)
    try:
        decl = tomllib.loads((rdir / tuning.DECLARATION).read_text())
        search = decl.get("search", {})
        view.hypothesis = str(search.get("hypothesis", ""))
        view.n_trials = int(search.get("n_trials", 0))
        view.space = list(search.get("space", []))
        ledger: list[TrialRecord] = tuning.read_ledger(rdir)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as exc:
        view.problem = f"{rdir}: {exc}"
        return view
    except Exception as exc:  # claimcheck's own error for a file that is not a trial record
        view.problem = str(exc)
        return view
    now = dt.datetime.now(dt.UTC)
    for r in ledger:
        row = LiveTrial(
            number=r.number,
            kind=r.kind,
            seed=r.seed,
            state=r.state,
            settings=r.settings,
            value=r.value,
            duration_s=_seconds(r.started_at, r.ended_at, now),
            reason=r.reason,
            digest=r.digest,
            file=tuning.trial_file(r.number, r.seed if r.kind == "repeat" else None),
            memory_bytes=r.memory_bytes,
            step_s=r.step_s,
            resources_from=r.resources_from,
            resources_from_seed=r.resources_from_seed,
            resources_from_digest=r.resources_from_digest,
        )
        if r.state == "running":
            row.live_step, row.total_steps, row.live_value = _live(rdir / tuning.JOBS / r.op_id)
        view.metric = view.metric or r.metric
        view.rows.append(row)
    return view
