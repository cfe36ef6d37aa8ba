"""Claim stage: what is claimed, for whom, measured how, against what — plus a review of earlier sessions.

Playbook: "Establish the claim and scope".
"""

from __future__ import annotations

from pathlib import Path

from claimcheck.engine.evidence import Check, EvidenceError, StageRecord
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.claim.inputs import (
    BASE_MODEL,
    FROZEN_PROBE,
    REQUIRED_TEXT,
    TRIVIAL,
    Inputs,
    missing_fields,
)
from claimcheck.engine.stats import registry as metric_registry

TITLE = "Claim"

PB_CLAIM = (
    "State prediction unit, target meaning, inference-time inputs, intended population, primary task "
    "metric, success criterion and comparators."
)
PB_LABEL = "Unknown label quality remains a limitation, even if the target is called gold."
PB_REVIEW = (
    "Review relevant accessible runs, including successful, failed, cancelled and incomplete attempts. "
    "Record the review's scope; absence from a listing is not proof of no run."
)
PB_SCOPE = "Preserve the requested model and run scope. Recommend a simpler baseline when informative."


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    checks = [
        _completeness(inputs),
        _target_semantics(inputs),
        _success_criterion(inputs),
        _comparators(inputs),
        _review(inputs, ctx),
    ]
    return StageRecord(stage="claim", inputs=inputs.model_dump(mode="json"), checks=checks)


def _completeness(inp: Inputs) -> Check:
    missing = missing_fields(inp)
    filled = len(REQUIRED_TEXT) + 3 - len(missing)
    return Check(
        id="claim.completeness",
        status="fail" if missing else "pass",
        basis="decided",
        summary=("missing: " + ", ".join(missing)) if missing else "every claim field is stated",
        measured={"missing": missing, "fields_filled": filled},
        why="A claim that leaves its unit, target, population or metric open cannot be checked later.",
        playbook=PB_CLAIM,
    )


def _target_semantics(inp: Inputs) -> Check:
    limits = inp.label_quality_limits.strip()
    if inp.target_kind == "recorded_workflow_label":
        meaning = "predicts a recorded workflow label, not a verified real-world decision"
    elif inp.target_kind == "real_world_decision":
        meaning = "claims a correct real-world decision"
    elif inp.target_kind == "measured_quantity":
        meaning = "predicts a measured quantity as it was recorded, measurement error included"
    else:
        meaning = "target kind not stated"
    status = "info" if limits else "warn"
    summary = meaning + (
        "; label-quality limits stated" if limits else "; label quality unknown — a limitation"
    )
    return Check(
        id="claim.target_semantics",
        status=status,
        basis="decided",
        summary=summary,
        measured={"target_kind": inp.target_kind or "unstated", "label_quality_limits_stated": bool(limits)},
        why="Predicting what a workflow recorded is a different claim from making the right decision.",
        playbook=PB_LABEL,
    )


def _success_criterion(inp: Inputs) -> Check:
    """The criterion as stated. What the artifact stage could not judge (a metric the registry does
    not compute for the claim, a comparator it does not list) is refused when the inputs are validated
    (Inputs._judgeable); what is left is a missing or mismatched metric and a criterion pointing the
    wrong way."""
    s = inp.success
    problems = []
    if not s.metric:
        problems.append("no success metric")
    elif s.metric != inp.primary_metric:
        problems.append(f"success metric '{s.metric}' is not the primary metric '{inp.primary_metric}'")
    lower = metric_registry.lower_is_better(s.metric)
    if (
        s.metric
        and s.relative_to == "absolute"
        and ((lower and s.op in (">=", ">")) or (not lower and s.op in ("<=", "<")))
    ):
        problems.append(f"'{s.metric} {s.op} {s.value}' points the wrong way for this metric")
    text = (
        f"{s.metric} {s.op} {s.value}"
        if s.relative_to == "absolute"
        else f"{s.metric} − {s.relative_to} {s.op} {s.value}"
    )
    if inp.positive_class and not problems:
        text += f" (positive class '{inp.positive_class}')"
    return Check(
        id="claim.success_criterion",
        status="fail" if problems else "pass",
        basis="decided",
        summary="; ".join(problems) if problems else f"success means {text}",
        measured={"criterion": text, "problems": problems},
        why="A success criterion fixed before fitting cannot be moved to fit the result.",
        playbook=declaration("claim.success_criterion").playbook,
    )


def _comparators(inp: Inputs) -> Check:
    """The required comparators are listed (unknown ones are refused by Inputs._judgeable)."""
    # A multi-label fine-tune has no unchanged-base arm (a head per label on the frozen encoder is
    # not built; the claim refuses base_model and frozen_probe): it is judged against the baselines.
    multi_label_ft = inp.fine_tuning and inp.target_type == "multi_label"
    need = [TRIVIAL] + ([BASE_MODEL] if inp.fine_tuning and not multi_label_ft else [])
    # A fine-tuned text classifier's unchanged-base comparator may be the linear probe on the frozen
    # base (what fine-tuning added) instead of the random-head base model (a chance-level check).
    present = set(inp.comparators) | ({BASE_MODEL} if FROZEN_PROBE in inp.comparators else set())
    absent = [c for c in need if c not in present]
    if absent:
        status, summary = "fail", "add comparators: " + ", ".join(absent)
    elif multi_label_ft:
        status = "warn"
        summary = (
            "comparators: " + ", ".join(inp.comparators) + "; no unchanged-base arm for a multi-label "
            "fine-tune (a head per label on the frozen encoder is not built): what fine-tuning added "
            "over the base encoder is not measured"
        )
    else:
        status, summary = "pass", "comparators: " + ", ".join(inp.comparators)
    return Check(
        id="claim.comparators",
        status=status,
        basis="decided",
        summary=summary,
        measured={"comparators": list(inp.comparators), "required_absent": absent, "unmeasured": []},
        why="Without the trivial baseline and the unchanged base model, 'better' has no reference; the artifact stage scores exactly these arms.",
        playbook=PB_SCOPE,
    )


def _session_status(path: Path) -> dict[str, object]:
    from claimcheck.engine.ledger.session import Session

    try:
        session = Session.open(path)
        states = session.states()
    except EvidenceError as exc:
        return {"path": str(path), "status": "unreadable", "detail": str(exc)}
    failing = [n for n, r in session.records().items() if r.worst_status() == "fail"]
    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.jobrecords import job_state

    job_phases = jobfiles.session_job_phases(path / "jobs")
    if any(job_state(p) == "failed" for p in job_phases) or failing:
        status = "failed"
    elif any(job_state(p) == "cancelled" for p in job_phases):
        status = "cancelled"
    elif any(v == "stale" for v in states.values()):
        status = "stale"
    elif all(v == "frozen" for v in states.values()):
        status = "complete"
    else:
        status = "incomplete"
    done = sum(v == "frozen" for v in states.values())
    detail = f"{done}/{len(registry.STAGES)} stages frozen"
    if failing:
        detail += "; failing checks in " + ", ".join(failing)
    if job_phases:
        detail += "; jobs: " + ", ".join(job_phases)
    return {"path": str(path), "id": session.meta.id, "status": status, "detail": detail}


def _review(inp: Inputs, ctx: StageContext) -> Check:
    from claimcheck.engine.ledger.session import find_sessions

    scanned, sessions = [], []
    for scope in inp.review_scope:
        root = ctx.resolve(scope)
        scanned.append(str(scope))
        for found in find_sessions(root, exclude=ctx.session_dir):
            entry = _session_status(found)
            entry["path"] = str(Path(scope) / found.relative_to(root))
            sessions.append(entry)
    counts: dict[str, int] = {}
    for s in sessions:
        counts[str(s["status"])] = counts.get(str(s["status"]), 0) + 1
    summary = (
        f"{len(sessions)} earlier session(s) in {', '.join(scanned)}: "
        + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "none")
        + "; sessions outside this scope were not reviewed"
    )
    return Check(
        id="claim.prior_sessions",
        status="info",
        basis="measured",
        summary=summary,
        coverage="scope: " + ", ".join(scanned),
        measured={"scope": scanned, "sessions": sessions, "counts": counts},
        replay="observation",
        why="Earlier failed or cancelled attempts hold lessons; an empty listing is not proof that none ran.",
        playbook=PB_REVIEW,
    )
