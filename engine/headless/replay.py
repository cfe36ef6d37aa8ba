"""Headless replay: re-run every stage from its recorded inputs and compare with what was recorded.

First the session as a whole (engine/headless/integrity.py session_rows): session.toml's bytes, seal
and meta digest, the signature, and the folder (links, history/ revisions, unaccounted files).
Then for each stage record on disk, in stage order:

1. integrity: the record's content digest, its exact bytes (records are written canonically, so any
   edited byte shows) and the session.toml stage table (digest, byte pin) must agree — otherwise
   "tampered";
2. chain: the upstream digests the record was computed from must be the current upstream records'
   digests — otherwise "stale";
3. re-run: `claimcheck.engine.pipeline.core.compute(stage, recorded inputs, recorded upstream, ctx)` with
   `ctx.replay = True` (the same validation and run as the app's), and compare check by check:
   status, basis, coverage and every measured value exactly, or within the absolute tolerance the
   recorded check declares for that key. Observation checks are reported,
   never failed. A stage resting on one that did not reproduce is not re-run: its checks are "stale".

Replay never writes into the session; a stage that does is reported. Training is not re-run unless
`retrain=True`, which re-runs dispatch in a scratch copy of the session and compares within the
tolerances the records declare.

The comparisons themselves are in engine/headless/compare.py; the rows, table and exit codes in
engine/headless/outcomes.py (shared with the answers run).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from claimcheck.engine.errors import EXIT_DIFFERS, EXIT_OK, EXIT_UNUSABLE
from claimcheck.engine.evidence import REPORT_FILES, EvidenceError, StageRecord
from claimcheck.engine.headless.compare import compare_check, compare_records, diff_values
from claimcheck.engine.headless.integrity import Loaded, load, session_rows, stage_rows
from claimcheck.engine.headless.outcomes import (
    FAILING,
    OUTCOMES,
    Difference,
    Progress,
    Row,
    RunResult,
    failing_rows,
    recorded_claim_verdict,
    stage_progress,
    timing,
)
from claimcheck.engine.ledger.drafts import is_draft
from claimcheck.engine.ledger.session import SESSION_FILE, Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.pipeline.core import InvalidInputs, compute, split_runtime
from claimcheck.engine.pipeline.registry import StageSpec
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import job_state

TRAINING_STAGES = ("dispatch",)


@dataclass
class ReplayResult(RunResult):
    """Did each recorded check reproduce? Exit 0 when all did, 1 when one did not, 2 unusable input."""

    mode: str = "replay"

    VERDICT_OK: ClassVar[str] = "everything reproduced"
    VERDICT_DIFFERS: ClassVar[str] = "NOT reproduced"


# ---------------------------------------------------------------- jobs


def _job_rows(session_dir: Path, rec: StageRecord) -> list[Row]:
    """A job the dispatch record names that did not finish is incomplete evidence, whatever the checks say."""
    jobs = session_dir / "jobs"
    if not jobs.is_dir():
        return []
    blob = json.dumps(rec.model_dump(mode="json"), ensure_ascii=False)
    rows = []
    for job_dir in sorted(p for p in jobs.iterdir() if p.is_dir()):
        if job_dir.name not in blob:
            continue
        status, problem = jobfiles.read_status_checked(job_dir)
        if status is None:
            where = f"jobs/{job_dir.name}" + (
                f": no {jobfiles.STATUS}" if problem == "missing" else f"/{jobfiles.STATUS} {problem}"
            )
            rows.append(Row(rec.stage, "(job)", "incomplete", "", where))
            continue
        phase = status.phase or "unknown"
        if job_state(phase) != "finished":
            step, total = status.step, status.total_steps
            rows.append(
                Row(
                    rec.stage,
                    "(job)",
                    "incomplete",
                    "",
                    f"job {job_dir.name} is '{phase}' at step {step} of {total}, not done: its evidence is incomplete",
                )
            )
    return rows


# ---------------------------------------------------------------- write guard


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for fn in filenames:
            if fn == ".lock" or (dirpath == str(root) and fn in REPORT_FILES):
                continue
            p = os.path.join(dirpath, fn)
            try:
                st = os.stat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def _written(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    changed = [p for p, v in after.items() if before.get(p) != v]
    removed = [p for p in before if p not in after]
    return sorted(changed + removed)


# ---------------------------------------------------------------- replay


@dataclass
class _Pass:
    """One replay pass over a session: what is known so far, stage after stage."""

    session: Session
    loaded: Loaded
    retrain: bool
    say: Progress
    broken: dict[str, str] = field(default_factory=dict)  # stage -> why it did not reproduce
    per_stage: dict[str, float] = field(default_factory=dict)
    scratch: Path | None = None
    new_records: dict[str, StageRecord] = field(default_factory=dict)


def replay(session_dir: Path, *, retrain: bool = False, progress: Progress | None = None) -> ReplayResult:
    """Re-run every stage of a session from its recorded inputs and compare. Never writes into it."""
    t_start = time.perf_counter()
    say = progress or (lambda _m: None)
    session_dir = Path(session_dir)
    result = ReplayResult(session_dir)
    try:
        session = Session.open(session_dir, allow_links=True)  # each link is a row (integrity)
        loaded = load(session)
    except EvidenceError as exc:
        result.error = str(exc)
        return result
    run = _Pass(session, loaded, retrain, say)
    result.rows += session_rows(session, loaded)
    try:
        for spec in registry.STAGES:
            rows = _replay_stage(run, spec)
            failing = failing_rows(rows)
            if failing and spec.name not in run.broken:
                run.broken[spec.name] = f"{failing[0].check} {failing[0].outcome}"
            result.rows += rows
    finally:
        if run.scratch is not None:
            shutil.rmtree(run.scratch, ignore_errors=True)
    total = time.perf_counter() - t_start
    compute_s = sum(v for k, v in run.per_stage.items() if k not in TRAINING_STAGES or not retrain)
    result.claim_verdict = recorded_claim_verdict(session)
    result.timing = {**timing(total, run.per_stage, compute_s), "retrain": retrain}
    say(f"replay finished in {total:.2f}s ({compute_s:.2f}s in stage computations)")
    return result


def _replay_stage(run: _Pass, spec: StageSpec) -> list[Row]:
    """Every row of one stage: record integrity, chain, job state, then the re-run compared."""
    name = spec.name
    rows = stage_rows(run.session, run.loaded, name)
    rec = run.loaded.records.get(name)
    if rec is None:
        if not rows:
            rows.append(Row(name, "(stage)", "not_run", "", "no record: nothing to replay"))
        if any(r.failing for r in rows):
            run.broken[name] = "its record is missing or unreadable"
        return rows
    run.say(f"{name}: checking record")
    if not rec.provenance.frozen:
        rows.append(Row(name, "(record)", "incomplete", "", "draft: never frozen, so not evidence yet"))
    if name == "dispatch":
        rows += _job_rows(run.session.path, rec)
    up_broken = [u for u in registry.upstream_names(name) if u in run.broken]
    if up_broken:
        why = f"rests on '{up_broken[0]}', which did not reproduce ({run.broken[up_broken[0]]})"
        rows += [Row(name, c.id, "stale", c.status, why) for c in rec.checks]
    else:
        rows += _rerun_and_compare(run, name, rec)
    return rows


def _replay_context(run: _Pass, name: str) -> StageContext:
    """Replay in place (ctx.replay: look, never launch); with retrain, dispatch and later in a scratch copy."""
    run_dir, replay_flag = run.session.path, True
    if run.retrain and (name in TRAINING_STAGES or run.scratch is not None):
        run.scratch = run.scratch or _scratch_copy(run.session.path)
        run_dir, replay_flag = run.scratch, name not in TRAINING_STAGES
        run.say(f"{name}: re-running in a scratch copy ({'replay' if replay_flag else 'retrain'})")
    else:
        run.say(f"{name}: re-running from recorded inputs")
    return StageContext(
        session_dir=run_dir,
        workspace=run.session.workspace,
        progress=stage_progress(run.say, name),
        replay=replay_flag,
        stage=name,
    )


def _rerun_and_compare(run: _Pass, name: str, rec: StageRecord) -> list[Row]:
    upstream = {u: run.new_records.get(u, run.loaded.records[u]) for u in registry.upstream_names(name)}
    ctx = _replay_context(run, name)
    before = _snapshot(run.session.path)
    t0 = time.perf_counter()
    new, rows = _rerun(name, rec, upstream, ctx)
    run.per_stage[name] = time.perf_counter() - t0
    written = _written(before, _snapshot(run.session.path))
    if new is not None:
        if run.retrain and name in TRAINING_STAGES:
            rec, new = _without_job_files(rec), _without_job_files(new)
        rows += compare_records(name, _upgraded(name, rec), new)
        if run.scratch is not None:
            run.new_records[name] = new
    if written:
        rows.append(
            Row(
                name,
                "(session files)",
                "differs",
                "",
                "replay must not write into the session, but this stage changed: " + ", ".join(written[:5]),
            )
        )
    return rows


def _without_job_files(rec: StageRecord) -> StageRecord:
    """A retrained job writes its own metrics.jsonl (clock times) and checkpoints: their hashes pin the
    recorded job (checked by engine/headless/integrity.py), not the retrained one, so they are not compared."""
    chk = rec.check("dispatch.identity")
    if chk is None or "job_files" not in chk.measured:
        return rec
    out = rec.model_copy(deep=True)
    out.check("dispatch.identity").measured.pop("job_files")
    return out


def _upgraded(name: str, rec: StageRecord) -> StageRecord:
    """The record as compared: inputs without the runtime knobs older versions recorded (claimcheck.engine.pipeline.core)."""
    kept, knobs = split_runtime(name, rec.inputs)
    return rec.model_copy(update={"inputs": kept}) if knobs else rec


def _rerun(
    name: str, rec: StageRecord, upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[StageRecord | None, list[Row]]:
    try:
        return compute(name, rec.inputs, upstream, ctx), []
    except InvalidInputs as exc:
        return None, [
            Row(name, "(inputs)", "differs", "", f"recorded inputs no longer valid: {exc.problem.text()}")
        ]
    except EvidenceError as exc:
        return None, [Row(name, "(run)", "tampered", "", str(exc))]
    except StageInputError as exc:
        return None, [Row(name, "(run)", "missing", "", f"re-run could not start: {exc}")]
    except Exception as exc:  # a stage bug or an unusable file: say which, keep replaying the rest
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return None, [
            Row(
                name,
                "(run)",
                "differs",
                "",
                f"re-run raised {type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})",
            )
        ]


def _scratch_copy(session_dir: Path) -> Path:
    """A copy of the session to retrain into: records, session.toml and data/, but no jobs."""
    scratch = Path(tempfile.mkdtemp(prefix="claimcheck-retrain-"))
    for item in session_dir.iterdir():
        if (
            item.name in ("jobs", "history", ".lock")
            or item.name.startswith("report.")
            or is_draft(item.name)
        ):
            continue
        if item.is_dir():
            shutil.copytree(item, scratch / item.name)
        else:
            shutil.copy2(item, scratch / item.name)
    return scratch


__all__ = [
    "EXIT_DIFFERS",
    "EXIT_OK",
    "EXIT_UNUSABLE",
    "FAILING",
    "OUTCOMES",
    "Difference",
    "Progress",
    "ReplayResult",
    "Row",
    "SESSION_FILE",
    "compare_check",
    "compare_records",
    "diff_values",
    "failing_rows",
    "replay",
]
