"""Headless replay: re-run every stage from its recorded inputs and compare with what was recorded.

For each stage record on disk, in stage order:

1. integrity: the record's content digest, its exact bytes (records are written canonically, so any
   edited byte shows) and the session.toml stage table must agree — otherwise "tampered";
2. chain: the upstream digests the record was computed from must be the current upstream records'
   digests — otherwise "stale";
3. re-run: `module.run(Inputs(recorded inputs), recorded upstream, ctx)` with `ctx.replay = True`, and
   compare check by check: status, basis, coverage and every measured value exactly, or within the
   absolute tolerance the recorded check declares for that key. Observation checks are reported,
   never failed. A stage resting on one that did not reproduce is not re-run: its checks are "stale".

Replay never writes into the session; a stage that does is reported. Training is not re-run unless
`retrain=True`, which re-runs dispatch in a scratch copy of the session and compares within the
tolerances the records declare.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine import stages as registry
from engine.context import StageContext, StageInputError
from engine.evidence import Check, EvidenceError, StageRecord, load_record, record_to_toml
from engine.session import SESSION_FILE, Session, read_journal, read_repairs

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
    # answers-file runs: a check computed and frozen now, or computed with status "fail".
    "recorded",
    "failed",
)
FAILING = frozenset({"differs", "missing", "new", "stale", "tampered", "incomplete", "failed"})
EXIT_OK, EXIT_DIFFERS, EXIT_UNUSABLE = 0, 1, 2

# The job's own word for a finished run (engine.providers.base.TERMINAL_STAGES).
JOB_DONE = "done"
TRAINING_STAGES = ("dispatch",)


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
class ReplayResult:
    session_dir: Path
    rows: list[Row] = field(default_factory=list)
    # Set when the input cannot be used at all (no session, unreadable session.toml): exit 2.
    error: str = ""
    timing: dict[str, Any] = field(default_factory=dict)
    mode: str = "replay"

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
        }

    def render_table(self) -> str:
        if self.error:
            return f"claimcheck {self.mode}: unusable input: {self.error}"
        head = ("stage", "check", "status", "outcome", "detail")
        lines = [(r.stage, r.check, r.status or "-", r.outcome, _row_detail(r)) for r in self.rows]
        widths = [
            max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(head)
        ]
        widths[4] = len(head[4])  # the detail column is last and left ragged
        fmt = "  ".join(f"{{:<{w}}}" for w in widths[:4]) + "  {}"
        out = [fmt.format(*head), fmt.format(*("-" * w for w in widths[:4]), "-" * 6)]
        out += [fmt.format(*line).rstrip() for line in lines]
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.counts().items()))
        verdict = {
            EXIT_OK: "everything reproduced" if self.mode == "replay" else "every stage recorded and frozen",
            EXIT_DIFFERS: "NOT reproduced"
            if self.mode == "replay"
            else "a check failed or a stage did not finish",
        }[self.exit_code]
        out.append("")
        out.append(f"{self.mode}: {verdict} ({counts or 'nothing to do'}); exit {self.exit_code}")
        if self.timing.get("total_s") is not None:
            t = self.timing
            out.append(
                f"time: {t['total_s']:.2f}s in all, {t.get('compute_s', 0.0):.2f}s in stage computations"
                + (f" (ratio {t['ratio']:.2f})" if t.get("ratio") else "")
            )
        return "\n".join(out)


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


# ---------------------------------------------------------------- comparison


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def diff_values(old: Any, new: Any, tolerance: float | None = None, key: str = "") -> list[Difference]:
    """Differences between two TOML values; numbers within `tolerance` (absolute) count as equal."""
    if _is_number(old) and _is_number(new):
        if isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new):
            return []
        if tolerance is None:
            return [] if old == new else [Difference(key, old, new)]
        return [] if abs(old - new) <= tolerance else [Difference(key, old, new, tolerance)]
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[Difference] = []
        for k in list(old) + [k for k in new if k not in old]:
            sub = f"{key}.{k}" if key else k
            if k not in new:
                out.append(Difference(sub, old[k], "(absent)"))
            elif k not in old:
                out.append(Difference(sub, "(absent)", new[k]))
            else:
                out += diff_values(old[k], new[k], tolerance, sub)
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [Difference(key, old, new, tolerance)]
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += diff_values(a, b, tolerance, f"{key}[{i}]")
        return out
    if type(old) is not type(new) or old != new:
        return [Difference(key, old, new)]
    return []


def compare_check(stage: str, old: Check, new: Check) -> Row:
    """One recorded check against its re-computation; tolerances come from the recorded check."""
    diffs: list[Difference] = []
    for attr in ("status", "basis", "coverage"):
        if getattr(old, attr) != getattr(new, attr):
            diffs.append(Difference(attr, getattr(old, attr), getattr(new, attr)))
    for key in list(old.measured) + [k for k in new.measured if k not in old.measured]:
        if key not in new.measured:
            diffs.append(Difference(f"measured.{key}", old.measured[key], "(absent)"))
        elif key not in old.measured:
            diffs.append(Difference(f"measured.{key}", "(absent)", new.measured[key]))
        else:
            diffs += diff_values(
                old.measured[key], new.measured[key], old.tolerance.get(key), f"measured.{key}"
            )
    if old.replay == "observation":
        detail = "observation (not compared)" + ("; it changed since recorded" if diffs else "")
        return Row(stage, old.id, "observation", old.status, detail, diffs)
    within = any(d.tolerance is not None for d in diffs) or any(k in old.tolerance for k in old.measured)
    if diffs:
        return Row(stage, old.id, "differs", old.status, "", diffs)
    return Row(stage, old.id, "reproduced", old.status, "within declared tolerance" if within else "")


def compare_records(stage: str, old: StageRecord, new: StageRecord) -> list[Row]:
    rows: list[Row] = []
    in_diffs = diff_values(old.inputs, new.inputs, None, "inputs")
    if in_diffs:
        rows.append(
            Row(stage, "(inputs)", "differs", "", "the stage now records its inputs differently", in_diffs)
        )
    new_by_id = {c.id: c for c in new.checks}
    for chk in old.checks:
        now = new_by_id.pop(chk.id, None)
        if now is None:
            rows.append(Row(stage, chk.id, "missing", chk.status, "recorded, but not produced by the re-run"))
        else:
            rows.append(compare_check(stage, chk, now))
    for chk in new_by_id.values():
        rows.append(Row(stage, chk.id, "new", chk.status, "produced by the re-run, absent from the record"))
    return rows


# ---------------------------------------------------------------- integrity


def _integrity(session: Session, name: str, path: Path, rec: StageRecord, text: str) -> list[Row]:
    rel = path.name
    rows = []
    if rec.stage != name:
        rows.append(Row(name, "(record)", "tampered", "", f"{rel} says it is stage '{rec.stage}'"))
    actual = rec.compute_digest()
    if actual != rec.provenance.digest:
        rows.append(
            Row(
                name,
                "(record)",
                "tampered",
                "",
                f"{rel} was edited after it was sealed: its content digest is {actual[:19]}…, "
                f"its provenance says {rec.provenance.digest[:19]}…",
            )
        )
    elif record_to_toml(rec) != text:
        rows.append(
            Row(
                name,
                "(record)",
                "tampered",
                "",
                f"{rel}: bytes differ from what claimcheck wrote (edited by hand)",
            )
        )
    entry = session.meta.stages.get(name)
    recorded = entry.digest if entry is not None else ""
    journal = read_journal(session.path)
    if journal and journal.get("stage") == name and not rows:
        # A save claimcheck started and did not finish (killed, or still writing): not an edit.
        if rec.provenance.digest == journal.get("new") and recorded == journal.get("old", ""):
            rows.append(
                Row(
                    name,
                    "(record)",
                    "incomplete",
                    "",
                    f"interrupted write: claimcheck wrote {rel} ({rec.provenance.digest[:19]}…) at "
                    f"{journal.get('at', '?')} and was stopped before recording it in session.toml; "
                    "opening the session completes it",
                )
            )
            return rows
        if rec.provenance.digest == journal.get("old") == recorded:
            rows.append(
                Row(
                    name,
                    "(record)",
                    "incomplete",
                    "",
                    f"interrupted write: claimcheck was stopped before replacing {rel}, which still holds "
                    "the revision session.toml records; opening the session clears it",
                )
            )
            return rows
    for repair in read_repairs(session.path):
        if repair.get("stage") == name and repair.get("new") == rec.provenance.digest == recorded:
            rows.append(
                Row(
                    name,
                    "(record)",
                    "observation",
                    "",
                    f"interrupted write, repaired: claimcheck was stopped after writing {rel} at "
                    f"{repair.get('at', '?')}; reopening it on {repair.get('repaired_at', '?')} "
                    "recorded it in session.toml",
                )
            )
    if recorded and recorded != rec.provenance.digest:
        rows.append(
            Row(
                name,
                "(record)",
                "tampered",
                "",
                f"session.toml records digest {entry.digest[:19]}… for {rel}, the file holds "
                f"{rec.provenance.digest[:19]}…",
            )
        )
    return rows


def _chain(name: str, rec: StageRecord, records: dict[str, StageRecord]) -> list[Row]:
    rows = []
    for up in registry.upstream_names(name):
        recorded = rec.provenance.upstream.get(up, "")
        current = records.get(up)
        if current is None:
            rows.append(Row(name, "(chain)", "stale", "", f"rests on '{up}', whose record is missing"))
        elif recorded != current.provenance.digest:
            rows.append(
                Row(
                    name,
                    "(chain)",
                    "stale",
                    "",
                    f"computed from '{up}' {recorded[:19] or '(none)'}…, the current '{up}' is "
                    f"{current.provenance.digest[:19]}…",
                )
            )
    return rows


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
        status_file = job_dir / "status.json"
        try:
            status = json.loads(status_file.read_text())
        except FileNotFoundError:
            rows.append(Row(rec.stage, "(job)", "incomplete", "", f"jobs/{job_dir.name}: no status.json"))
            continue
        except (OSError, ValueError) as exc:
            rows.append(
                Row(
                    rec.stage, "(job)", "incomplete", "", f"jobs/{job_dir.name}/status.json unreadable: {exc}"
                )
            )
            continue
        stage = str(status.get("stage", "unknown"))
        if stage != JOB_DONE:
            step, total = status.get("step", "?"), status.get("total_steps", "?")
            rows.append(
                Row(
                    rec.stage,
                    "(job)",
                    "incomplete",
                    "",
                    f"job {job_dir.name} is '{stage}' at step {step} of {total}, not done: its evidence is incomplete",
                )
            )
    return rows


# ---------------------------------------------------------------- write guard


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for fn in filenames:
            if fn == ".lock":
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
class _Loaded:
    records: dict[str, StageRecord]
    texts: dict[str, str]
    rows: dict[str, list[Row]]


def _load(session: Session) -> _Loaded:
    loaded = _Loaded({}, {}, {n: [] for n in registry.STAGE_NAMES})
    for spec in registry.STAGES:
        path = session.path / spec.file_name
        entry = session.meta.stages.get(spec.name)
        if not path.exists():
            if entry is not None and (entry.digest or entry.state != "not_run"):
                loaded.rows[spec.name].append(
                    Row(
                        spec.name,
                        "(record)",
                        "missing",
                        "",
                        f"session.toml lists {spec.file_name}, which is gone",
                    )
                )
            continue
        try:
            text = path.read_text(encoding="utf-8")
            rec = load_record(path)
        except EvidenceError as exc:
            if exc.field.endswith("schema_version"):
                raise
            loaded.rows[spec.name].append(Row(spec.name, "(record)", "tampered", "", str(exc)))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            loaded.rows[spec.name].append(
                Row(spec.name, "(record)", "tampered", "", f"{spec.file_name}: {exc}")
            )
            continue
        loaded.records[spec.name], loaded.texts[spec.name] = rec, text
    return loaded


def _progress_adapter(say: Progress, stage: str) -> Callable[[float | None, str], None]:
    last = [0.0]

    def report(fraction: float | None, message: str) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 and fraction not in (None, 1.0):
            return  # progress on stderr, not a flood
        last[0] = now
        pct = f" {fraction:.0%}" if fraction is not None else ""
        say(f"  {stage}:{pct} {message}")

    return report


def _rerun(
    module: Any, name: str, rec: StageRecord, upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[StageRecord | None, list[Row]]:
    try:
        inputs = module.Inputs.model_validate(rec.inputs)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(inputs)"
        return None, [
            Row(name, "(inputs)", "differs", "", f"recorded inputs no longer valid: {where}: {err['msg']}")
        ]
    try:
        return module.run(inputs, upstream, ctx), []
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


def replay(session_dir: Path, *, retrain: bool = False, progress: Progress | None = None) -> ReplayResult:
    """Re-run every stage of a session from its recorded inputs and compare. Never writes into it."""
    t_start = time.perf_counter()
    say = progress or (lambda _m: None)
    session_dir = Path(session_dir)
    result = ReplayResult(session_dir)
    try:
        session = Session.open(session_dir)
        loaded = _load(session)
    except EvidenceError as exc:
        result.error = str(exc)
        return result
    records = loaded.records
    broken: dict[str, str] = {}  # stage -> why it did not reproduce
    per_stage: dict[str, float] = {}
    scratch: Path | None = None
    new_records: dict[str, StageRecord] = {}
    try:
        for spec in registry.STAGES:
            name = spec.name
            rows = list(loaded.rows[name])
            rec = records.get(name)
            if rec is None:
                if not rows:
                    rows.append(Row(name, "(stage)", "not_run", "", "no record: nothing to replay"))
                result.rows += rows
                if any(r.failing for r in rows):
                    broken[name] = "its record is missing or unreadable"
                continue
            say(f"{name}: checking record")
            rows += _integrity(session, name, session.path / spec.file_name, rec, loaded.texts[name])
            rows += _chain(name, rec, records)
            if not rec.provenance.frozen:
                rows.append(
                    Row(name, "(record)", "incomplete", "", "draft: never frozen, so not evidence yet")
                )
            if name == "dispatch":
                rows += _job_rows(session.path, rec)
            up_broken = [u for u in registry.upstream_names(name) if u in broken]
            module = spec.module()
            if up_broken:
                why = f"rests on '{up_broken[0]}', which did not reproduce ({broken[up_broken[0]]})"
                rows += [Row(name, c.id, "stale", c.status, why) for c in rec.checks]
            elif module is None:
                rows += [
                    Row(
                        name,
                        c.id,
                        "not_run",
                        c.status,
                        "stage not built in this claimcheck; record integrity only",
                    )
                    for c in rec.checks
                ]
            else:
                upstream = {u: new_records.get(u, records[u]) for u in registry.upstream_names(name)}
                run_dir = session.path
                replay_flag = True
                if retrain and (name in TRAINING_STAGES or scratch is not None):
                    scratch = scratch or _scratch_copy(session.path)
                    run_dir, replay_flag = scratch, name not in TRAINING_STAGES
                    say(f"{name}: re-running in a scratch copy ({'replay' if replay_flag else 'retrain'})")
                else:
                    say(f"{name}: re-running from recorded inputs")
                ctx = StageContext(
                    session_dir=run_dir,
                    workspace=session.workspace,
                    progress=_progress_adapter(say, name),
                    replay=replay_flag,
                    stage=name,
                )
                before = _snapshot(session.path)
                t0 = time.perf_counter()
                new, run_rows = _rerun(module, name, rec, upstream, ctx)
                per_stage[name] = time.perf_counter() - t0
                written = _written(before, _snapshot(session.path))
                rows += run_rows
                if new is not None:
                    rows += compare_records(name, rec, new)
                    if scratch is not None:
                        new_records[name] = new
                if written:
                    rows.append(
                        Row(
                            name,
                            "(session files)",
                            "differs",
                            "",
                            "replay must not write into the session, but this stage changed: "
                            + ", ".join(written[:5]),
                        )
                    )
            failing = [r for r in rows if r.failing]
            if failing:
                first = failing[0]
                broken[name] = f"{first.check} {first.outcome}"
            result.rows += rows
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    total = time.perf_counter() - t_start
    compute = sum(v for k, v in per_stage.items() if k not in TRAINING_STAGES or not retrain)
    result.timing = {
        "total_s": round(total, 4),
        "compute_s": round(compute, 4),
        "overhead_s": round(total - sum(per_stage.values()), 4),
        "ratio": round(total / compute, 3) if compute > 0 else None,
        "per_stage_s": {k: round(v, 4) for k, v in per_stage.items()},
        "retrain": retrain,
    }
    say(f"replay finished in {total:.2f}s ({compute:.2f}s in stage computations)")
    return result


def _scratch_copy(session_dir: Path) -> Path:
    """A copy of the session to retrain into: records, session.toml and data/, but no jobs."""
    scratch = Path(tempfile.mkdtemp(prefix="claimcheck-retrain-"))
    for item in session_dir.iterdir():
        if item.name in ("jobs", "history", ".lock") or item.name.startswith("report."):
            continue
        if item.is_dir():
            shutil.copytree(item, scratch / item.name)
        else:
            shutil.copy2(item, scratch / item.name)
    return scratch


def failing_rows(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r.failing]


__all__ = [
    "OUTCOMES",
    "Difference",
    "ReplayResult",
    "Row",
    "SESSION_FILE",
    "compare_check",
    "compare_records",
    "diff_values",
    "replay",
]
