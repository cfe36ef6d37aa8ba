"""Artifact stage: is the saved model the one trained, and is it better on the locked test?

Identity (sha256 of every saved file, tensors, LoRA B norms, reload keys), reload parity in a
fresh process on the retained dev rows, then the final comparison on the locked test — the first
time its labels are read, and the read is recorded. Four outcomes are kept apart: the job
finished, the artifact is verified, the candidate beats its comparators, the claim is met.

Playbook: "Verify the artifact and report the evidence".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.artifact.arms import (
    arm_counts,
    arm_predict,
    base_model_identity,
    chosen_arms,
    claimed_arms,
    latency,
    locked_read,
    locked_test,
    torch_arm,
)
from claimcheck.engine.artifact.common import ARM_NAMES, PB_IDENTITY, PB_OUTCOMES, PB_PARITY
from claimcheck.engine.artifact.coverage import arms_coverage
from claimcheck.engine.artifact.ordinal import ordinal_check
from claimcheck.engine.artifact.quality import Scored, quality
from claimcheck.engine.data import weights
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.shapes import artifact as shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import training as upstream_shapes
from claimcheck.engine.stages.artifact import probe as frozen_probe
from claimcheck.engine.stages.artifact.inputs import Inputs
from claimcheck.engine.stages.artifact.operating import operating_point
from claimcheck.engine.stats import registry as metric_registry
from claimcheck.engine.training.schema import effective

TITLE = "Artifact"


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    from claimcheck.engine.stages.dispatch.run import contract_of

    bad = [c for c in inputs.comparators if c not in ARM_NAMES]
    if bad:
        raise StageInputError(f"unknown comparator(s) {bad}; choose from {', '.join(ARM_NAMES)}")
    given = inputs  # recorded as given; the arms scored are the claim's comparators it selects
    try:
        inputs = inputs.model_copy(
            update={"comparators": chosen_arms(inputs.comparators, _claimed(upstream))}
        )
    except ValueError as exc:
        raise StageInputError(str(exc)) from None
    eff, _ = contract_of(upstream)
    disp = upstream.get("dispatch")
    if disp is None:
        raise StageInputError("the artifact stage needs a frozen dispatch stage")
    if disp.check("dispatch.no_job") is not None and eff.get("candidate_kind") == "encoder":
        from claimcheck.engine import threads
        from claimcheck.engine.retrieval.stages import artifact_checks

        with threads.capped():
            checks, comparison = artifact_checks(inputs, eff, upstream, ctx)
        return _record(given, checks, comparison, upstream)
    if disp.check("dispatch.no_job") is not None:
        checks = _sklearn_candidate(inputs, eff, upstream, ctx)
        comparison = {"checks": checks} if any(c.id == "artifact.comparison" for c in checks) else None
        return _record(given, checks, comparison, upstream)
    if disp.check("dispatch.identity") is None:
        gate = disp.check("dispatch.required_checks")
        raise StageInputError(
            "the dispatch stage launched no job"
            + (f" ({gate.summary})" if gate else "")
            + ": there is no artifact to verify"
        )
    op_id = parse(disp.check("dispatch.identity"), upstream_shapes.DispatchIdentity).operation_id
    job_dir = ctx.session_dir / "jobs" / op_id
    final = job_dir / "final"
    checks: list[Check] = [_job_finished(disp)]
    if not final.is_dir():
        checks.append(
            Check(
                id="artifact.identity",
                status="fail",
                summary=f"no artifact at jobs/{op_id}/final",
                measured={"path": f"jobs/{op_id}/final"},
                playbook=PB_IDENTITY,
            )
        )
        return _record(given, checks, None, upstream)
    if eff.get("task_kind") == "retrieval":  # the contrastive LoRA job's adapters (engine/retrieval)
        from claimcheck.engine import threads
        from claimcheck.engine.retrieval.artifact import finetuned_checks

        with threads.capped():
            checks += finetuned_checks(inputs, eff, final, upstream, ctx)
        return _record(given, checks, {"checks": checks}, upstream)
    ctx.progress(0.05, "artifact identity")
    checks.append(_identity(final, ctx))
    ctx.progress(0.15, "reload parity in a fresh process")
    checks.append(_parity(final, job_dir, ctx, inputs.parity_tolerance))
    ctx.check_cancelled()
    if eff.get("task_kind") == "causal_lm_sft":
        from claimcheck.engine.artifact import sft

        comparison = sft.compare(inputs, eff, final, upstream, ctx)
    elif eff.get("task_kind") != "text_classification":
        checks.append(
            not_run(
                "artifact.comparison", f"no locked-test comparison for task kind {eff.get('task_kind')!r}"
            )
        )
        return _record(given, checks, None, upstream)
    else:
        comparison = compare(inputs, eff, final, upstream, ctx)
    checks.extend(comparison["checks"])
    return _record(given, checks, comparison, upstream)


def _claimed(upstream: dict[str, StageRecord]) -> list[str]:
    """The claim's frozen comparators: the arms the artifact stage scores beside the candidate."""
    return [str(c) for c in _claim(upstream).get("comparators", [])]


def _record(
    inputs: Inputs, checks: list[Check], comparison: dict[str, Any] | None, upstream: dict[str, StageRecord]
) -> StageRecord:
    """The stage record: the arms check held against the claim's comparators, then the verdict."""
    checks = [claimed_arms(c, _claimed(upstream)) if c.id == "artifact.arms" else c for c in checks]
    checks.append(_outcomes(checks, comparison, upstream))
    return StageRecord(stage="artifact", inputs=inputs.model_dump(mode="json"), checks=checks)


def _sklearn_candidate(
    inputs: Inputs, eff: dict[str, Any], upstream: dict[str, StageRecord], ctx: StageContext
) -> list[Check]:
    """claim.fine_tuning = false: the contracted scikit-learn candidate (engine/stages/artifact/learner.py)."""
    from claimcheck.engine import threads
    from claimcheck.engine.stages.artifact import learner as artifact_sklearn

    with threads.capped():  # every fit and prediction of the stage under one native-thread cap
        return artifact_sklearn.checks(inputs, eff, upstream, ctx, compare_arms)


def _job_finished(disp: StageRecord) -> Check:
    prog = parse(disp.check("dispatch.progress"), upstream_shapes.Progress)
    state = prog.job_state if prog else ""
    return Check(
        id="artifact.job_finished",
        status="pass" if state == "finished" else "fail",
        summary=f"the training job {'finished' if state == 'finished' else 'did not finish: ' + (state or 'unknown')}",
        measured={"job_state": state or "unknown"},
        why="A finished job is the first of four outcomes, not evidence of the other three.",
        playbook=PB_OUTCOMES,
    )


def _identity(final: Path, ctx: StageContext) -> Check:
    from claimcheck.engine.training.artifact_files import verify_artifact

    v = verify_artifact(final)
    rel = final.relative_to(ctx.session_dir).as_posix()
    m = v.get("manifest", {})
    measured = {
        "path": rel,
        "file_sha256": v.get("file_sha256", {}),
        "files": int(v.get("files", 0)),
        "tensor_count": int(v.get("tensor_count", 0)),
        "tensor_count_recorded": int(v.get("tensor_count_recorded", -1)),
        "tensor_shapes": {k: list(s) for k, s in m.get("tensors", {}).items()},
        "lora_b_matrices": int(v.get("lora_b_matrices", 0)),
        "lora_b_min_norm": float(v.get("lora_b_min_norm", -1.0)),
        "selected_step": int(m.get("selected_step", -1)),
        "checkpoint_selection": str(m.get("checkpoint_selection", "")),
        "problems": list(v["problems"]),
    }
    ok = v["ok"]
    summary = (
        f"{measured['files']} files match their recorded sha256; {measured['tensor_count']} tensors"
        + (
            f"; {measured['lora_b_matrices']} LoRA B matrices, min norm {measured['lora_b_min_norm']:.3g}"
            if measured["lora_b_matrices"]
            else ""
        )
        if ok
        else "; ".join(v["problems"][:3])
    )
    return Check(
        id="artifact.identity",
        status="pass" if ok else "fail",
        summary=summary,
        measured=measured,
        why="A truncated or partial adapter loads silently in some tools; hashes and shapes catch it.",
        playbook=PB_IDENTITY,
    )


def _parity(final: Path, job_dir: Path, ctx: StageContext, tolerance: float) -> Check:
    from claimcheck.engine.training.artifact_files import parity_in_fresh_process

    r = parity_in_fresh_process(final, job_dir, ctx.workspace, tolerance)
    if "error" in r:
        return Check(
            id="artifact.reload_parity",
            status="fail",
            summary=f"reload failed: {r['error'][-200:]}",
            measured={"error": r["error"][-400:]},
            playbook=PB_PARITY,
        )
    keys_ok = not r["missing_keys"] and not r["unexpected_keys"]
    ok = r["ok"] and keys_ok
    summary = (
        f"fresh-process reload: {r['compared']} retained dev rows, {r['prediction_mismatches']} prediction "
        f"mismatches, max |Δp| {r['max_abs_proba_diff']:.2e} (tolerance {tolerance}); "
        f"missing keys {len(r['missing_keys'])}, unexpected {len(r['unexpected_keys'])}"
    )
    return Check(
        id="artifact.reload_parity",
        status="pass" if ok else "fail",
        summary=summary,
        coverage=f"dev rows retained at the end of training ({r['rows']})",
        measured={k: v for k, v in r.items() if k != "ok"} | {"keys_ok": keys_ok},
        tolerance={"max_abs_proba_diff": 1e-6},
        why="Predictions recorded at the end of training and after a reload in a new process must agree.",
        playbook=PB_PARITY,
    )


# ---------------------------------------------------------------- the locked-test comparison


def _claim(upstream: dict[str, StageRecord]) -> dict[str, Any]:
    return upstream["claim"].inputs if "claim" in upstream else {}


def compare(
    inputs: Inputs, eff: dict[str, Any], final: Path, upstream: dict[str, StageRecord], ctx: StageContext
) -> dict[str, Any]:
    import torch

    from claimcheck.engine import threads
    from claimcheck.engine.training.artifact_files import build_base, load_artifact, recorded_mode

    torch.set_num_threads(threads.predict_torch_threads())
    classes = [str(c) for c in eff["label_classes"]]
    fns: dict[str, Any] = {}
    notes: dict[str, str] = {}
    ctx.progress(0.3, "loading the candidate and the unchanged base model")
    cand_model, cand_tok, _, _ = load_artifact(final, ctx.workspace)
    mode = recorded_mode(final)  # both arms predict as the artifact's dev predictions were made
    fns["candidate"], _ = torch_arm(cand_model, cand_tok, eff, classes, mode)
    notes["candidate"] = (
        "the saved artifact reloaded (trainable tensors into the contracted model, saved tokenizer)"
    )
    if effective(eff).is_multi_label:
        return _multi_label(inputs, fns["candidate"], notes["candidate"], upstream, ctx)
    base_id = base_model_identity(eff, ctx.workspace) if "base_model" in inputs.comparators else None
    if base_id is not None and base_id.status != "pass":
        notes["base_model"] = f"not scored: {base_id.summary}"
    elif base_id is not None:
        base_model, base_tok = build_base(eff, ctx.workspace)
        fns["base_model"], _ = torch_arm(base_model, base_tok, eff, classes, mode)
        notes["base_model"] = (
            "the unchanged base model under the identical template, tokenizer and inference mode; "
            f"its classification head is untrained (seed {eff.get('seed', 0)}), so it is a "
            "chance-level comparator — what 'unchanged base' means for a native decision head"
        )
    probe = None
    if frozen_probe.ARM in inputs.comparators:
        classes_scoring = metric_registry.Scoring(
            tuple(classes), metric_registry.positive_index(_claim(upstream), classes)
        )
        probe = frozen_probe.fit(eff, final.parent, mode, ctx, (_primary_metric(upstream), classes_scoring))
        fns[frozen_probe.ARM], notes[frozen_probe.ARM] = probe.fn, probe.note
    result = compare_arms(inputs, eff, upstream, ctx, (fns, notes))
    if base_id is not None:
        result["checks"].insert(0, base_id)
    if probe is not None:
        result["checks"].append(frozen_probe.pin(probe, result["preds"].get(frozen_probe.ARM)))
    return result


def _multi_label(
    inputs: Inputs, fn: Any, note: str, upstream: dict[str, StageRecord], ctx: StageContext
) -> dict[str, Any]:
    """A fine-tuned multi-label head: its per-label sigmoid scores compared with the baseline arms as
    a scikit-learn multi-label candidate's are (engine/stages/artifact/multilabel.py: per-label
    thresholds on calibration, the claim's metric with paired intervals, per-label F1)."""
    from claimcheck.engine import threads
    from claimcheck.engine.baseline.learners import load
    from claimcheck.engine.stages.artifact import multilabel
    from claimcheck.engine.stages.baseline import run as baseline

    if "baseline" not in upstream:
        raise StageInputError("a multi-label comparison needs a frozen baseline stage (its labels and arms)")
    data = load(baseline.Inputs.model_validate(upstream["baseline"].inputs), upstream, ctx)
    with threads.capped():
        checks = multilabel.compare(inputs, data, fn, note, upstream, ctx)
    return {"checks": checks}


def compare_arms(
    inputs: Inputs,
    eff: dict[str, Any],
    upstream: dict[str, StageRecord],
    ctx: StageContext,
    arms: tuple[dict[str, Any], dict[str, str]],
) -> dict[str, Any]:
    """The locked-test comparison of the given arms (the candidate's predict function, and any
    model comparator) with the baseline comparators the inputs ask for; classification."""
    import numpy as np

    from claimcheck.engine.data import splits
    from claimcheck.engine.stages.baseline import run as baseline

    fns, notes = arms
    classes = [str(c) for c in eff["label_classes"]]
    lt = locked_test(inputs.max_test_rows, inputs.seed, upstream, ctx)
    test, reads, total_test, coverage = lt.rows, lt.reads, lt.total, lt.coverage
    cal = splits.rows("calibration", upstream, ctx, caller="artifact")
    y = np.asarray([classes.index(str(t)) if str(t) in classes else -1 for t in test["target"].to_list()])
    y_cal = np.asarray([classes.index(str(t)) if str(t) in classes else -1 for t in cal["target"].to_list()])
    units = lt.units
    unit_kind = lt.unit_kind

    arms_wanted = list(dict.fromkeys(["candidate", *inputs.comparators]))
    if "best_baseline" in arms_wanted:
        try:
            fns["best_baseline"], best = baseline.refit_best(upstream, ctx)
            notes["best_baseline"] = (
                f"{best}, refitted on its fitting rows with the baseline stage's recorded settings"
            )
        except StageInputError as exc:
            notes["best_baseline"] = f"not available: {exc}"
    metric = _primary_metric(upstream)
    if "trivial_baseline" in arms_wanted:
        fns["trivial_baseline"], notes["trivial_baseline"] = _trivial(metric, classes, upstream, ctx)

    preds: dict[str, dict[str, Any]] = {}
    for i, arm in enumerate(a for a in arms_wanted if a in fns):
        ctx.check_cancelled()
        ctx.progress(0.35 + 0.4 * i / len(fns), f"predicting the locked test: {arm}")
        r = arm_predict(fns[arm], {"test": test, "calibration": cal})
        preds[arm] = {**r["test"], "cal_proba": r["calibration"]["proba"], "cal_ok": r["calibration"]["ok"]}
    checks = [locked_read(reads, total_test, coverage)]
    checks.append(arm_counts(arms_wanted, preds, notes, test.height, y, coverage))
    checks.append(arms_coverage(test, y >= 0, preds, inputs, upstream, coverage))
    positive = metric_registry.positive_index(_claim(upstream), classes)
    scored = Scored(inputs, preds, y, y_cal, units, unit_kind, classes, metric, test, coverage, positive)
    scored.weights = weights.for_metrics(test, upstream)
    scored.weight_column = weights.column(upstream["source"].inputs)
    scored.subgroups = list(upstream["source"].inputs.get("subgroup_columns", []))
    checks.extend(quality(scored))
    if metric_registry.is_ordinal(_claim(upstream)):
        checks.append(ordinal_check(scored))
    checks.append(operating_point(scored, upstream))
    ctx.progress(0.85, "latency")
    checks.append(latency(inputs.latency_examples, fns, test))
    return {"checks": checks, "metric": metric, "preds": preds}


def _trivial(
    metric: str, classes: list[str], upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[Any, str]:
    """The metric registry's trivial predictor (registry.trivial_for) fitted on the train split only:
    train's majority class (most_frequent); for a metric scored from probabilities, train's class
    shares (prior)."""
    import numpy as np

    from claimcheck.engine.data import splits

    train = splits.rows("train", upstream, ctx, caller="artifact", labels=True)
    train_y = train["target"].to_list()
    # with a weight column, the class shares are weight mass (DummyClassifier fitted with sample_weight)
    w = weights.of(train, upstream["source"].inputs)
    known = [i for i, t in enumerate(train_y) if str(t) in classes]
    prior = np.bincount(
        [classes.index(str(train_y[i])) for i in known],
        weights=None if w is None else w[known],
        minlength=len(classes),
    )
    if metric_registry.is_ordinal(_claim(upstream)):  # an ordinal target: train's median class
        from claimcheck.engine.baseline.ordinal import median_rank

        med = median_rank(prior)
        onehot = np.eye(len(classes))[med]
        by = "" if w is None else f", by weight mass of '{weights.column(upstream['source'].inputs)}'"
        return (lambda frame: np.tile(onehot, (frame.height, 1))), (
            f"always '{classes[med]}' (train's median class in the class order{by})"
        )
    major = classes[int(prior.argmax())]
    by = "" if w is None else f" by weight mass of '{weights.column(upstream['source'].inputs)}'"
    if metric_registry.trivial_for(metric) == "prior":  # the registry's named trivial predictor
        shares = prior / prior.sum() if prior.sum() > 0 else prior
        return (lambda frame: np.tile(shares, (frame.height, 1))), (
            f"train's class shares{by} as probabilities (majority '{major}')"
        )
    onehot = np.eye(len(classes))[int(prior.argmax())]
    return (
        lambda frame: np.tile(onehot, (frame.height, 1))
    ), f"always '{major}' (train's majority class{by})"


def _primary_metric(upstream: dict[str, StageRecord]) -> str:
    """The claim's primary metric (the claim stage refuses one the registry cannot compute for a
    categorical target); macro_f1 for a claim that states none."""
    m = str(_claim(upstream).get("primary_metric") or metric_registry.DEFAULTS["categorical"])
    kind = metric_registry.ORDINAL if metric_registry.is_ordinal(_claim(upstream)) else "categorical"
    if m not in metric_registry.computed_for("tabular", kind):
        raise StageInputError(
            f"claim.primary_metric '{m}' is not computed for a categorical target; "
            "re-run the claim stage (it refuses such a claim)"
        )
    return m


# ---------------------------------------------------------------- the four outcomes


@dataclass(frozen=True)
class _Judged:
    """The success criterion judged: its state, its rule and the measured value kept apart."""

    state: str  # met / not_met / not_run
    rule: str = ""  # what the claim needs, e.g. "macro_f1: candidate − best_baseline ≥ 0.02 (…)"
    value: float | None = None  # the measured value the rule is applied to
    why: str = ""  # why there is no judgement (state not_run)
    # The one-line form records have always held in `criterion` (rule and value run together); kept
    # byte-identical so sessions recorded earlier replay unchanged. Readers use rule and value.
    legacy: str = ""

    def text(self) -> str:
        if self.state == "not_run":
            return self.why
        shown = "undefined" if self.value is None or math.isnan(self.value) else f"{self.value:+.4f}"
        return f"needs {self.rule}; measured {shown}"


_OPS = {">=": "≥", ">": ">", "<=": "≤", "<": "<"}


def _criterion(
    upstream: dict[str, StageRecord], comparison: dict[str, Any] | None, checks: list[Check]
) -> _Judged:
    claim = _claim(upstream)
    s = claim.get("success", {}) or {}
    if not s.get("metric") or comparison is None:
        return _Judged("not_run", why="no success criterion or no comparison")
    comp = parse(next((c for c in checks if c.id == "artifact.comparison"), None), shapes.Comparison)
    if comp is None:
        return _Judged("not_run", why="no comparison")
    metric = str(s["metric"])
    if metric != comp.metric:
        return _Judged(
            "not_run", why=f"the criterion's metric {metric} is not the compared metric {comp.metric}"
        )
    op, target, rel = (
        str(s.get("op", ">=")),
        float(s.get("value", 0.0)),
        str(s.get("relative_to", "absolute")),
    )
    if rel == "absolute":
        value, rule = comp.values["candidate"], f"candidate {metric} {_OPS[op]} {target:g}"
        legacy = f"candidate {metric} {value:.4f} {op} {target}"
    elif rel in comp.differences:
        d = comp.differences[rel]
        if d.refused:  # the session's one interval rule (engine/stats/uncertainty.py unit_rule)
            return _Judged(
                "not_run", why=f"too few units for an interval; the verdict is not decided ({d.refused})"
            )
        # the interval's conservative end must meet the criterion, not just the point estimate
        upper = op in ("<=", "<")
        end = d.hi if upper else d.lo
        value = math.nan if end is None else end
        rule = (
            f"{metric}: candidate − {rel} {_OPS[op]} {target:g}, judged on the "
            f"{'upper' if upper else 'lower'} end of its {d.level:.0%} paired interval (point {d.estimate:+.4f})"
        )
        legacy = f"candidate − {rel} interval end {value:+.4f} {op} {target}"
    elif rel in comp.excluded:
        return _Judged("not_run", why=f"the criterion is relative to {rel!r}: {comp.excluded[rel]}")
    else:
        return _Judged("not_run", why=f"the criterion is relative to {rel!r}, which was not compared")
    met = {">=": value >= target, ">": value > target, "<=": value <= target, "<": value < target}[op]
    return _Judged("met" if met else "not_met", rule, value, legacy=legacy)


def _outcomes(
    checks: list[Check], comparison: dict[str, Any] | None, upstream: dict[str, StageRecord]
) -> Check:
    by = {c.id: c for c in checks}
    finished = by["artifact.job_finished"].status == "pass"
    verified = all(
        by.get(i) is not None and by[i].status == "pass"
        for i in ("artifact.identity", "artifact.reload_parity")
    )
    comp = by.get("artifact.comparison")
    better = bool(comp and comp.status == "pass")
    judged = _criterion(upstream, comparison, checks)
    limitations = [n.text for rec in upstream.values() for n in rec.notes if n.tag == "limitation"]
    disabled = [
        c.id
        for rec in upstream.values()
        for c in rec.checks
        if c.id.startswith("dispatch.alarms.") and _alarm_state(c) == "disabled"
    ]
    outcomes = {
        "job_finished": finished,
        "artifact_verified": verified,
        "candidate_better": better,
        "claim_met": judged.state == "met",
    }
    status = "pass" if all(outcomes.values()) else ("fail" if not (finished and verified) else "warn")
    return Check(
        id="artifact.verdict",
        status=status,
        summary=(
            f"job finished: {'yes' if finished else 'no'}; artifact verified: {'yes' if verified else 'no'}; "
            f"candidate better than every comparator: {'yes' if better else 'no'}; claim met: "
            f"{ {'met': 'yes', 'not_met': 'no'}.get(judged.state, 'not decided') } ({judged.text()})"
        ),
        measured=shapes.Verdict(
            **outcomes,
            claim_state=judged.state,
            criterion=judged.legacy or judged.why,
            rule=judged.rule,
            measured_value=None if judged.value is None or math.isnan(judged.value) else judged.value,
            limitations=limitations,
            disabled_alarms=disabled,
        ),
        why="Four different outcomes: a finished job, a verified artifact, a better model and a met claim.",
        playbook=PB_OUTCOMES,
    )


def _alarm_state(check: Check) -> str:
    alarm = parse(check, upstream_shapes.Alarm)
    return alarm.state if alarm else ""
