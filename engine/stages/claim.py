"""Claim stage: what is claimed, for whom, measured how, against what — plus a review of earlier sessions.

Playbook: "Establish the claim and scope".
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from engine import registry
from engine.context import StageContext
from engine.evidence import Check, EvidenceError, StageRecord
from engine.metric_names import LOWER_IS_BETTER, REGRESSION_METRICS, target_type

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

TRIVIAL = "trivial_baseline"
BASE_MODEL = "base_model"
# The arms the artifact stage scores on the locked test beside the candidate.
KNOWN_COMPARATORS = (TRIVIAL, "best_baseline", BASE_MODEL)

# Metrics the later stages know how to compute; the claim must name one of them.
KNOWN_METRICS = (
    "accuracy",
    "balanced_accuracy",
    "macro_f1",
    "weighted_f1",
    "auroc",
    "auprc",
    "log_loss",
    "brier",
    "mae",
    "rmse",
    "r2",
    "ndcg_at_k",
    "recall_at_k",
    "exact_match",
)


class SuccessCriterion(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    metric: str = Field(
        default="",
        description="The metric the success criterion is stated in.",
        json_schema_extra={"suggestions": list(KNOWN_METRICS)},
    )
    op: Literal[">=", ">", "<=", "<"] = Field(
        default=">=", description="How the metric compares to the value."
    )
    value: float = Field(
        default=0.0,
        ge=-1e12,
        le=1e12,
        description="The threshold (or margin, when relative to a comparator).",
    )
    # "absolute": metric op value. A comparator name: metric - comparator's metric op value.
    relative_to: str = Field(
        default="absolute",
        description="'absolute' (metric op value), or a comparator: metric minus its metric op value.",
        examples=["trivial_baseline"],
    )


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    task_kind: Literal["text_classification", "causal_lm_sft", "tabular"] = Field(
        default="text_classification", description="The kind of model the claim is about."
    )
    # What the target is: classes ("categorical") or a number ("numeric", a regression). Empty: derived
    # (engine.metric_names.target_type): categorical, except a tabular claim with a regression metric.
    target_type: Literal["categorical", "numeric", ""] = Field(
        default="",
        description="Classes (categorical) or a number (numeric: a regression); empty = derived from the task and metric.",
    )
    prediction_unit: str = Field(
        default="",
        description="One thing the model predicts for, and when.",
        examples=["one ticket at triage"],
    )
    target_meaning: str = Field(
        default="", description="What the label means in the world.", examples=["the queue it was routed to"]
    )
    target_kind: Literal["recorded_workflow_label", "real_world_decision", ""] = Field(
        default="", description="Is the label what a workflow recorded, or the decision that was right?"
    )
    inference_inputs: list[str] = Field(
        default_factory=list,
        description="What the model may see at prediction time (comma-separated).",
        examples=["subject, body, channel"],
    )
    population: str = Field(
        default="", description="Who or what the claim covers.", examples=["tickets from all channels"]
    )
    primary_metric: str = Field(
        default="",
        description="The one metric the claim is judged on.",
        json_schema_extra={"suggestions": list(KNOWN_METRICS)},
    )
    metric_averaging: str = Field(
        default="", description="How per-class scores are averaged (macro, weighted, …).", examples=["macro"]
    )
    class_order: list[str] = Field(
        default_factory=list,
        description="The label values, in the order reports show them (comma-separated).",
        examples=["billing, technical, security"],
    )
    success: SuccessCriterion = Field(
        default_factory=SuccessCriterion, description="What result counts as success, stated before any run."
    )
    comparators: list[str] = Field(
        default_factory=list,
        description="What the model must beat (comma-separated).",
        examples=["trivial_baseline, best_baseline, base_model"],
    )
    fine_tuning: StrictBool = Field(default=True, description="Is a fine-tuned model part of the claim?")
    run_scope: str = Field(
        default="", description="How many runs the claim rests on.", examples=["one LoRA fine-tune, no sweep"]
    )
    label_quality_limits: str = Field(
        default="", description="What is known to be wrong with the labels.", examples=["never audited"]
    )
    # Where the review of earlier sessions looked, relative to the workspace.
    review_scope: list[str] = Field(
        default_factory=lambda: ["runs"],
        description="Where earlier sessions were looked for, relative to the workspace (comma-separated).",
        examples=["runs"],
    )


REQUIRED_TEXT = (
    "prediction_unit",
    "target_meaning",
    "target_kind",
    "population",
    "primary_metric",
    "run_scope",
)


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
    missing = [f for f in REQUIRED_TEXT if not str(getattr(inp, f)).strip()]
    if not inp.inference_inputs:
        missing.append("inference_inputs")
    categorical = target_type(inp.model_dump()) == "categorical"
    if (
        inp.task_kind == "text_classification"
        and inp.primary_metric not in LOWER_IS_BETTER
        and not inp.metric_averaging
    ):
        missing.append("metric_averaging")
    # Class order is asked of categorical targets only: a numeric target has no classes.
    if inp.task_kind != "causal_lm_sft" and categorical and not inp.class_order:
        missing.append("class_order")
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
    s = inp.success
    problems = []
    if inp.primary_metric and inp.primary_metric not in KNOWN_METRICS:
        problems.append(f"primary metric '{inp.primary_metric}' is not one claimcheck computes")
    problems += _metric_fits_target(inp)
    if not s.metric:
        problems.append("no success metric")
    elif s.metric != inp.primary_metric:
        problems.append(f"success metric '{s.metric}' is not the primary metric '{inp.primary_metric}'")
    if s.relative_to != "absolute" and s.relative_to not in inp.comparators:
        problems.append(f"success is relative to '{s.relative_to}', which is not a listed comparator")
    lower = s.metric in LOWER_IS_BETTER
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
    return Check(
        id="claim.success_criterion",
        status="fail" if problems else "pass",
        basis="decided",
        summary="; ".join(problems) if problems else f"success means {text}",
        measured={"criterion": text, "problems": problems},
        why="A success criterion fixed before fitting cannot be moved to fit the result.",
        playbook="Define task-specific go/no-go rules before a pilot, not after seeing its result.",
    )


def _metric_fits_target(inp: Inputs) -> list[str]:
    """A numeric target needs a regression metric, a categorical one a class metric; text classification
    is categorical."""
    kind = target_type(inp.model_dump())
    if inp.task_kind == "causal_lm_sft" or not inp.primary_metric:
        return []
    if kind == "numeric" and inp.task_kind == "text_classification":
        return [
            'a text_classification claim has a categorical target; use task_kind = "tabular" for a numeric one'
        ]
    regression = inp.primary_metric in REGRESSION_METRICS
    if kind == "numeric" and not regression:
        return [
            f"target_type is numeric but '{inp.primary_metric}' is not a regression metric ({', '.join(sorted(REGRESSION_METRICS))})"
        ]
    if kind == "categorical" and regression:
        return [
            f"'{inp.primary_metric}' is a regression metric; set target_type = \"numeric\" for a numeric target"
        ]
    return []


def _comparators(inp: Inputs) -> Check:
    need = [TRIVIAL] + ([BASE_MODEL] if inp.fine_tuning else [])
    absent = [c for c in need if c not in inp.comparators]
    unmeasured = [c for c in inp.comparators if c not in KNOWN_COMPARATORS]
    if absent:
        status, summary = "fail", "add comparators: " + ", ".join(absent)
    elif unmeasured:
        status = "warn"
        summary = (
            f"{', '.join(unmeasured)}: not a comparator the artifact stage measures "
            f"({', '.join(KNOWN_COMPARATORS)}); it would stay unmeasured"
        )
    else:
        status, summary = "pass", "comparators: " + ", ".join(inp.comparators)
    return Check(
        id="claim.comparators",
        status=status,
        basis="decided",
        summary=summary,
        measured={"comparators": list(inp.comparators), "required_absent": absent, "unmeasured": unmeasured},
        why="Without the trivial baseline and the unchanged base model, 'better' has no reference.",
        playbook=PB_SCOPE,
    )


def _session_status(path: Path) -> dict[str, object]:
    from engine.session import Session

    try:
        session = Session.open(path)
        states = session.states()
    except EvidenceError as exc:
        return {"path": str(path), "status": "unreadable", "detail": str(exc)}
    failing = [n for n, r in session.records().items() if r.worst_status() == "fail"]
    from engine.training import jobfiles

    job_states = jobfiles.session_job_stages(path / "jobs")
    if any(jobfiles.job_state(s) == "failed" for s in job_states) or failing:
        status = "failed"
    elif any(jobfiles.job_state(s) == "cancelled" for s in job_states):
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
    if job_states:
        detail += "; jobs: " + ", ".join(job_states)
    return {"path": str(path), "id": session.meta.id, "status": status, "detail": detail}


def _review(inp: Inputs, ctx: StageContext) -> Check:
    from engine.session import find_sessions

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
