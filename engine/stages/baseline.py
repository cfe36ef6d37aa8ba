"""Baseline stage: is the task learnable from the recorded inputs, and what must a model beat?

Trivial and conventional scikit-learn learners are fitted on train and measured on dev (or on
pooled out-of-fold predictions for small data, with folds that respect the split's groups / time).
Calibration and thresholds are fitted on the calibration split (or cross-fitted out-of-fold), never
on the locked test, which this stage cannot read (engine.splits.rows refuses it and the refusal is
probed and recorded).

Playbook: "Establish learnability and comparison evidence".
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine import threads
from engine.baseline.classification import classification_checks
from engine.baseline.evaluation import REPORT_KEY, Evaluation, evaluated
from engine.baseline.learners import (
    Fitted,
    default_learners,
    features,
    import_learner_libraries,
    load,
    make_model,
    predict,
    run_learner,
    target,
    validate_learners,
)
from engine.baseline.other_tasks import generation_checks, most_frequent_answer, regression_checks
from engine.baseline.records import PREDICTIONS_FILE, locked_test_check, predictions_check, timing_check
from engine.context import StageContext, StageInputError
from engine.evidence import Check, StageRecord
from engine.metric_names import LOWER_IS_BETTER

TITLE = "Baseline"
__all__ = ["PREDICTIONS_FILE", "TITLE", "Inputs", "OperatingPoint", "best_conventional", "refit_best", "run"]


class OperatingPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # "none": no action threshold is chosen; decisions stay arg-max and the check says so.
    constraint: Literal["none", "min_precision", "min_recall", "cost"] = Field(
        default="none", description="How a decision threshold is chosen ('none': arg-max decisions)."
    )
    positive_class: str = Field(default="", description="The class the threshold is for.")
    target: float = Field(
        default=0.9, ge=0, le=1, description="The precision or recall the threshold must reach."
    )
    cost_fp: float = Field(
        default=1.0, ge=0, le=1e9, description="Cost of a false positive (constraint 'cost')."
    )
    cost_fn: float = Field(
        default=1.0, ge=0, le=1e9, description="Cost of a false negative (constraint 'cost')."
    )


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Empty: the defaults for the claim's task kind (text: most_frequent, prior, tfidf_logreg).
    learners: list[str] = Field(
        default_factory=list,
        description="Baseline learners, comma-separated (empty: the defaults for the task kind).",
    )
    max_features: int = Field(default=50_000, ge=1, le=10_000_000, description="Largest TF-IDF vocabulary.")
    ngram_max: int = Field(default=2, ge=1, le=3, description="Longest word n-gram in the TF-IDF features.")
    min_df: int = Field(default=2, ge=1, le=10**9, description="Fewest documents a term must appear in.")
    C: float = Field(
        default=1.0, gt=0, le=1e6, description="Inverse regularisation strength of the logistic regression."
    )
    # When given, C is selected on dev (or inside the training folds, nested, for K-fold).
    C_grid: list[Annotated[float, Field(gt=0, le=1e6)]] = Field(
        default_factory=list,
        max_length=50,
        description="C values to select from on dev (nested in the folds for K-fold), comma-separated; empty = C.",
    )
    max_iter: int = Field(default=300, ge=1, le=1_000_000, description="Most solver iterations.")
    seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the learners.")
    bootstrap_resamples: int = Field(
        default=1000, ge=100, le=100_000, description="Bootstrap resamples of each interval."
    )
    bootstrap_seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the bootstrap.")
    unit: Literal["auto", "family", "row"] = Field(
        default="auto",
        description="The independent unit resampled for intervals ('auto': families when the data has them).",
    )
    ece_bins: int = Field(default=15, ge=2, le=1000, description="Bins of the expected calibration error.")
    calibration: Literal["temperature", "platt", "isotonic", "none"] = Field(
        default="temperature", description="How probabilities are calibrated on dev."
    )
    operating_point: OperatingPoint = Field(
        default_factory=OperatingPoint, description="The decision threshold, when the claim needs one."
    )
    cv: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="K-fold instead of train/dev ('auto': when train is small or dev is empty).",
    )
    cv_folds: int = Field(default=5, ge=2, le=50, description="Folds of the K-fold.")
    # cv="auto" switches to K-fold when train has fewer rows than this (or dev is empty).
    cv_below_rows: int = Field(
        default=2000,
        ge=0,
        le=10**9,
        description="With cv 'auto': K-fold when train has fewer rows than this.",
    )
    trivial_reference: str = Field(
        default="most_frequent", description="The learner the trivial baseline is."
    )
    # HistGradientBoosting boosting rounds (no early stopping, so runs are reproducible).
    hgb_max_iter: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Boosting rounds of HistGradientBoosting (no early stopping: reproducible).",
    )


def best_conventional(upstream: dict[str, StageRecord]) -> tuple[str, float | None]:
    """The recorded best conventional learner by the primary metric, and the C it chose (if any)."""
    import math

    from engine.shapes import baseline as shapes
    from engine.shapes import parse

    rec = upstream.get("baseline")
    conv = parse(rec.check("baseline.conventional"), shapes.Conventional) if rec else None
    learners = conv.learners if conv else {}
    if not learners:
        raise StageInputError("the baseline stage recorded no conventional learner to compare against")
    metric = conv.primary_metric or "macro_f1"
    lower = metric in LOWER_IS_BETTER
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
    model = make_model(best, data, inputs, float(inputs.C if chosen_c is None else chosen_c))
    with threads.capped():
        model.fit(features(best, data.fit, data), target(data.fit, data))

    def predict_frame(frame: Any) -> Any:
        return predict(model, features(best, frame, data), data)

    return predict_frame, best


# ---------------------------------------------------------------- the stage


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    t_start = time.perf_counter()
    ctx.progress(0.0, "reading train / dev / calibration rows")
    data = load(inputs, upstream, ctx)
    claim = upstream["claim"].inputs
    learners = inputs.learners or default_learners(data.task, claim, data.text_cols)
    validate_learners(learners, data)
    metric = str(claim.get("primary_metric") or ("mae" if data.task == "regression" else "macro_f1"))
    metric = REPORT_KEY.get(metric, metric)
    if data.task == "generation":
        metric = "exact_match"
    t_load = time.perf_counter() - t_start
    t_imports = import_learner_libraries()

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
    checks.append(timing_check(data, fitted, (t_load, t_imports, cap), time.perf_counter() - t_start))
    ctx.progress(1.0, "done")
    return StageRecord(stage="baseline", inputs=inputs.model_dump(mode="json"), checks=checks, notes=ev.notes)
