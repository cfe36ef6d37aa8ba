"""The contract of a claim without fine-tuning (claim.fine_tuning = false): a scikit-learn candidate.

The candidate is a learner of the frozen baseline stage (by default its best conventional learner
by the primary metric), rebuilt from the baseline's recorded settings and pinned: estimator class,
every parameter and their digest, seed, fitting rows, library versions; the contract stage adds the
data digests and seals the whole as the contract digest. Dispatch launches no job; the artifact
stage fits the candidate under this contract and compares it on the locked test (docs/contract.md).

Playbook: "Freeze one executable training contract".
"""

from __future__ import annotations

from typing import Any

from claimcheck.engine.artifact import sklearn_candidate
from claimcheck.engine.evidence import Check, StageRecord, digest_of
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.contract.checks import PB_PIN
from claimcheck.engine.training.resolve import Resolution
from claimcheck.engine.training.schema import Inputs

REQUIRED = ["contract.requested_vs_effective", "contract.candidate"]
# The contract inputs this contract reads (the stage form shows them first; the fine-tuning fields
# after them do not apply to a claim without fine-tuning).
FIELDS_READ = ("candidate", "task_kind", "seed", "on_required_fail")


def sklearn_contract(
    inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[dict[str, Any], Resolution, Check, int]:
    """The effective contract, its resolution table, the candidate check and the fitting row count."""
    from claimcheck.engine.baseline.learners import validate_learners
    from claimcheck.engine.stages.baseline import run as baseline

    if "baseline" not in upstream:
        raise StageInputError(
            "a claim without fine-tuning needs a frozen baseline stage: its learner is the candidate"
        )
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    res = Resolution()
    eff: dict[str, Any] = {"candidate_kind": "sklearn"}
    kind = str(claim.get("task_kind") or inputs.task_kind)
    eff["task_kind"] = (
        res.same("task_kind", kind)
        if inputs.task_kind == kind
        else res.resolved("task_kind", inputs.task_kind, kind, "the claim's task kind (no fine-tuning)")
    )
    settings = baseline.Inputs.model_validate(upstream["baseline"].inputs)
    recorded = baseline.best_conventional(upstream)
    req = inputs.candidate
    learner, c_value = recorded
    if req.learner == "best_baseline":
        res.resolved(
            "candidate.learner",
            req.learner,
            learner,
            "the baseline's best conventional learner by the primary metric",
        )
    elif req.learner == learner:
        res.same("candidate.learner", learner)
    else:
        learner, c_value = req.learner, None
        res.same("candidate.learner", learner)
    settings = settings.model_copy(update={"seed": res.same("seed", inputs.seed)})
    ctx.progress(None, "reading the baseline's rows to build the candidate")
    data = _load(settings, upstream, ctx)
    try:
        validate_learners([learner], data)
    except StageInputError as exc:
        res.refuse("candidate.learner", learner, str(exc))
    c = float(settings.C if c_value is None else c_value)
    planned = sklearn_candidate.plan(learner, c, settings, data) if not res.refused else None
    spec = {
        "task": data.task,
        "learner": learner,
        "estimator": planned.estimator if planned else "",
        "params": planned.params if planned else {},
        "params_sha256": digest_of(planned.params) if planned else "",
        "C": c,
        "seed": inputs.seed,
        "fit_rows": res.same("candidate.fit_rows", req.fit_rows),
        "baseline_settings": settings.model_dump(mode="json"),
        "versions": sklearn_candidate.versions(),
    }
    eff.update(
        sklearn=spec,
        seed=inputs.seed,
        label_classes=list(data.classes),
        required_checks=REQUIRED,
        on_required_fail=res.same("on_required_fail", inputs.on_required_fail),
    )
    rows = sklearn_candidate.fit_frame(data, req.fit_rows).height
    return eff, res, _candidate_check(spec, rows, bool(res.refused)), rows


def _load(settings: Any, upstream: dict[str, StageRecord], ctx: StageContext) -> Any:
    from claimcheck.engine.baseline.learners import load

    return load(settings, upstream, ctx)


def _candidate_check(spec: dict[str, Any], rows: int, refused: bool) -> Check:
    est = spec["estimator"].rsplit(".", 1)[-1] or "none"
    return Check(
        id="contract.candidate",
        status="fail" if refused else "pass",
        summary=(
            "no candidate: the requested learner was refused (see contract.requested_vs_effective)"
            if refused
            else f"{spec['learner']} ({est}, seed {spec['seed']}, {len(spec['params'])} parameters pinned, "
            f"sha256 {spec['params_sha256'][7:19]}…) fitted on {rows:,} {spec['fit_rows'].replace('_', '+')} rows "
            f"in the artifact stage; {sklearn_candidate.CANDIDATE_NOTE.split(': ', 1)[0]} is dispatched"
        ),
        measured={
            "candidate_kind": "sklearn",
            "learner": spec["learner"],
            "estimator": spec["estimator"],
            "params_sha256": spec["params_sha256"],
            "fit_rows": spec["fit_rows"],
            "fit_row_count": rows,
            "versions": spec["versions"],
        },
        why="Without fine-tuning, the claim's candidate is a conventional learner; it is pinned like any job.",
        playbook=PB_PIN,
    )
