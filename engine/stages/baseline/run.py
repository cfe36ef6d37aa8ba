"""Baseline stage: is the task learnable from the recorded inputs, and what must a model beat?

Trivial and conventional scikit-learn learners are fitted on train and measured on dev (or on
pooled out-of-fold predictions for small data, with folds that respect the split's groups / time).
Calibration and thresholds are fitted on the calibration split (or cross-fitted out-of-fold), never
on the locked test, which this stage cannot read (claimcheck.engine.data.splits.rows refuses it and the refusal is
probed and recorded).

Playbook: "Establish learnability and comparison evidence".
"""

from __future__ import annotations

import time
from typing import Any

from claimcheck.engine import threads
from claimcheck.engine.baseline.classification import classification_checks
from claimcheck.engine.baseline.evaluation import Evaluation, evaluated
from claimcheck.engine.baseline.learners import (
    Fitted,
    default_learners,
    features,
    fit_model,
    import_learner_libraries,
    load,
    make_model,
    predict,
    run_learner,
    target,
    validate_learners,
)
from claimcheck.engine.baseline.other_tasks import generation_checks, most_frequent_answer, regression_checks
from claimcheck.engine.baseline.records import (
    PREDICTIONS_FILE,
    locked_test_check,
    predictions_check,
    sample_weights_check,
    timing_check,
)
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.baseline.inputs import Inputs, OperatingPoint
from claimcheck.engine.stats import registry

TITLE = "Baseline"
__all__ = ["PREDICTIONS_FILE", "TITLE", "Inputs", "OperatingPoint", "best_conventional", "refit_best", "run"]


def best_conventional(upstream: dict[str, StageRecord]) -> tuple[str, float | None]:
    """The recorded best conventional learner by the primary metric, and the C it chose (if any)."""
    import math

    from claimcheck.engine.shapes import baseline as shapes
    from claimcheck.engine.shapes import parse

    rec = upstream.get("baseline")
    conv = parse(rec.check("baseline.conventional"), shapes.Conventional) if rec else None
    learners = conv.learners if conv else {}
    if not learners:
        raise StageInputError("the baseline stage recorded no conventional learner to compare against")
    metric = conv.primary_metric or "macro_f1"
    lower = registry.lower_is_better(metric)
    worst = math.inf if lower else -math.inf

    def score(name: str) -> float:
        value = learners[name].metric(metric)
        return (worst if value is None else value) * (1 if lower else -1)

    best = sorted(learners, key=score)[0]
    return best, learners[best].C


def refit_best(upstream: dict[str, StageRecord], ctx: StageContext) -> tuple[Any, str]:
    """Refit the recorded best conventional learner on its own fitting rows (train, or train+dev for
    K-fold) with its recorded settings, for a later stage's comparison. Returns (predict(frame), name)."""
    best, chosen_c = best_conventional(upstream)
    rec = upstream["baseline"]
    inputs = Inputs.model_validate(rec.inputs)
    data = load(inputs, upstream, ctx)
    c_value = float(inputs.C if chosen_c is None else chosen_c)
    if data.task == "multilabel":  # one-vs-rest, as the baseline stage fitted it
        from claimcheck.engine.baseline.multilabel import make_multilabel

        model = make_multilabel(best, data, inputs, c_value)
    else:
        model = make_model(best, data, inputs, c_value)
    with threads.capped():
        fit_model(model, features(best, data.fit, data), data.fit, data)

    def predict_frame(frame: Any) -> Any:
        return predict(model, features(best, frame, data), data)

    return predict_frame, best


# ---------------------------------------------------------------- the stage


def _metric_key(claim: dict[str, Any], data: Any) -> str:
    """The claim's metric under the key the baseline's reports hold it: AUROC / AUPRC of a binary
    claim by its name (the positive class's figure), macro one-vs-rest by the report key."""
    if data.task == "generation":
        return registry.DEFAULTS["text"]
    if data.task == "multilabel":
        return str(claim.get("primary_metric") or registry.DEFAULTS["multi_label"])
    kind = "numeric" if data.task == "regression" else "categorical"
    entry = registry.get(str(claim.get("primary_metric") or registry.DEFAULTS[kind]))
    if registry.positive_index(claim, data.classes) >= 0:
        return entry.name
    return entry.key


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    from claimcheck.engine.retrieval import stages as retrieval

    if retrieval.is_retrieval(upstream):
        return retrieval.baseline_record(inputs, upstream, ctx)
    t_start = time.perf_counter()
    ctx.progress(0.0, "reading train / dev / calibration rows")
    data = load(inputs, upstream, ctx)
    claim = upstream["claim"].inputs
    learners = inputs.learners or default_learners(data.task, claim, data.text_cols)
    validate_learners(learners, data, inputs.trivial_reference)
    metric = _metric_key(claim, data)
    t_load = time.perf_counter() - t_start
    t_imports = import_learner_libraries()
    if data.task == "multilabel":
        return _multilabel(inputs, upstream, ctx, data, (learners, metric, t_start, t_load, t_imports))

    fitted: dict[str, Fitted] = {}
    with threads.capped() as cap:
        for i, name in enumerate(learners):
            ctx.check_cancelled()
            ctx.progress(0.1 + 0.6 * i / len(learners), f"fitting {name}")
            if data.task == "generation":
                fitted[name] = most_frequent_answer(data)
            else:
                fitted[name] = run_learner(name, data, inputs, metric)
    ctx.progress(0.75, "bootstrap intervals and comparisons")
    mask = evaluated(data)
    ev = Evaluation(
        inputs, data, fitted, target(data.eval, data)[mask], data.units[mask], mask, metric, upstream
    )
    task_checks = {"classification": classification_checks, "regression": regression_checks}
    checks: list[Check] = task_checks.get(data.task, generation_checks)(ev)
    checks.append(predictions_check(data, fitted, mask, ctx))
    checks.append(locked_test_check(upstream, ctx))
    if data.weight_column:
        checks.append(sample_weights_check(data, learners))
    checks.append(timing_check(data, fitted, (t_load, t_imports, cap), time.perf_counter() - t_start))
    ctx.progress(1.0, "done")
    return StageRecord(stage="baseline", inputs=inputs.model_dump(mode="json"), checks=checks, notes=ev.notes)


def _multilabel(
    inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext, data: Any, how: tuple[Any, ...]
) -> StageRecord:
    """A multi-label target: one-vs-rest learners and their checks (engine/baseline/multilabel.py)."""
    import numpy as np

    from claimcheck.engine.baseline import multilabel

    learners, metric, t_start, t_load, t_imports = how
    with threads.capped() as cap:
        fitted = multilabel.run_learners(learners, data, inputs, metric, ctx)
    ctx.progress(0.75, "bootstrap intervals and comparisons")
    checks = multilabel.checks(data, fitted, inputs, metric)
    mask = np.ones(data.eval.height, dtype=bool)
    checks.append(predictions_check(data, fitted, mask, ctx))
    checks.append(locked_test_check(upstream, ctx))
    checks.append(timing_check(data, fitted, (t_load, t_imports, cap), time.perf_counter() - t_start))
    ctx.progress(1.0, "done")
    return StageRecord(stage="baseline", inputs=inputs.model_dump(mode="json"), checks=checks)
