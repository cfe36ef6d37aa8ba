"""Baseline stage: is the task learnable from the recorded inputs, and what must a model beat?

Trivial and conventional scikit-learn learners are fitted on train and measured on dev (or on
pooled out-of-fold predictions for small data, with folds that respect the split's groups / time).
Calibration and thresholds are fitted on the calibration split (or cross-fitted out-of-fold), never
on the locked test, which this stage cannot read (engine.splits.rows refuses it and the refusal is
probed and recorded).

Playbook: "Establish learnability and comparison evidence".
"""

from __future__ import annotations

import io
import time
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from engine.context import StageContext, StageInputError
from engine.evidence import Check, Note, StageRecord, atomic_write_bytes
from engine.learners import (
    CALLER,
    CLASS_CONVENTIONAL,
    CLASS_TRIVIAL,
    LOWER_IS_BETTER,
    REG_CONVENTIONAL,
    REG_TRIVIAL,
    Data,
    Fitted,
    default_learners,
    features,
    load,
    make_model,
    predict,
    run_learner,
    target,
    validate_learners,
)

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

TITLE = "Baseline"
PREDICTIONS_FILE = "baseline_dev_predictions.parquet"

PB_TRIVIAL = (
    "Measure a task-appropriate trivial baseline and, when informative, a simple conventional learner using "
    "train/development only."
)
PB_RARE = (
    "For rare classes, retain per-class support, precision/recall, confusion counts and suitable "
    "probability/ranking/operating-point metrics. Accuracy can reward predicting only the majority class."
)
PB_LEARN = (
    "Inspect whether the available inputs can reasonably determine the targets. Contradictory or weak labels "
    "may limit performance; more epochs do not create missing information."
)
PB_CAL = (
    "Probability calibration and action-threshold choice are different. Fit them using independent or "
    "out-of-fold predictions, never final results. Tie thresholds to error costs or operating constraints; "
    "0.5 is not universally appropriate."
)
PB_SPLITS = (
    "Separate training, development, calibration and locked final testing when applicable. Development "
    "selects recipes/checkpoints; calibration fits temperatures/thresholds; final results do not select either."
)
PB_SMALL = (
    "For small datasets, consider cross-validation that respects the same groups/time constraints rather than "
    "fragmenting the data into four undersized sets. Keep model selection inside development folds."
)
PB_REPORT = (
    "Report raw and calibrated results separately, including per-class/slice regressions, uncertainty "
    "appropriate to the independent unit"
)

DECOMPOSABLE = {"accuracy", "macro_f1", "weighted_f1", "balanced_accuracy", "log_loss", "brier"}
# Non-decomposable ranking metrics bootstrapped per resample (macro over classes defined in it).
RANKING = ("macro_auroc", "macro_auprc")
# Claim metric names → the key classification_report uses for them.
REPORT_KEY = {"auroc": "macro_auroc", "auprc": "macro_auprc"}


class OperatingPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # "none": no action threshold is chosen; decisions stay arg-max and the check says so.
    constraint: Literal["none", "min_precision", "min_recall", "cost"] = "none"
    positive_class: str = ""
    target: float = Field(default=0.9, ge=0, le=1)
    cost_fp: float = Field(default=1.0, ge=0, le=1e9)
    cost_fn: float = Field(default=1.0, ge=0, le=1e9)


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Empty: the defaults for the claim's task kind (text: most_frequent, prior, tfidf_logreg).
    learners: list[str] = Field(default_factory=list)
    max_features: int = Field(default=50_000, ge=1, le=10_000_000)
    ngram_max: int = Field(default=2, ge=1, le=3)
    min_df: int = Field(default=2, ge=1, le=10**9)
    C: float = Field(default=1.0, gt=0, le=1e6)
    # When given, C is selected on dev (or inside the training folds, nested, for K-fold).
    C_grid: list[Annotated[float, Field(gt=0, le=1e6)]] = Field(default_factory=list, max_length=50)
    max_iter: int = Field(default=300, ge=1, le=1_000_000)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    bootstrap_resamples: int = Field(default=1000, ge=100, le=100_000)
    bootstrap_seed: int = Field(default=0, ge=0, le=2**32 - 1)
    unit: Literal["auto", "family", "row"] = "auto"
    ece_bins: int = Field(default=15, ge=2, le=1000)
    calibration: Literal["temperature", "platt", "isotonic", "none"] = "temperature"
    operating_point: OperatingPoint = Field(default_factory=OperatingPoint)
    cv: Literal["auto", "on", "off"] = "auto"
    cv_folds: int = Field(default=5, ge=2, le=50)
    # cv="auto" switches to K-fold when train has fewer rows than this (or dev is empty).
    cv_below_rows: int = Field(default=2000, ge=0, le=10**9)
    trivial_reference: str = "most_frequent"
    # HistGradientBoosting boosting rounds (no early stopping, so runs are reproducible).
    hgb_max_iter: int = Field(default=100, ge=1, le=10_000)


def refit_best(upstream: dict[str, StageRecord], ctx: StageContext) -> tuple[Any, str]:
    """Refit the recorded best conventional learner on its own fitting rows (train, or train+dev for
    K-fold) with its recorded settings, for a later stage's comparison. Returns (predict(frame), name)."""
    import math

    rec = upstream.get("baseline")
    conv = rec.check("baseline.conventional") if rec else None
    learners = dict(conv.measured.get("learners", {})) if conv else {}
    if not learners:
        raise StageInputError("the baseline stage recorded no conventional learner to compare against")
    metric = str(conv.measured.get("primary_metric", "macro_f1"))
    lower = metric in LOWER_IS_BETTER
    best = sorted(
        learners,
        key=lambda n: float(learners[n].get(metric, math.inf if lower else -math.inf)) * (1 if lower else -1),
    )[0]
    inputs = Inputs.model_validate(rec.inputs)
    data = load(inputs, upstream, ctx)
    model = make_model(best, data, inputs, float(learners[best].get("C", inputs.C)))
    model.fit(features(best, data.fit, data), target(data.fit, data))

    def predict_frame(frame: Any) -> Any:
        return predict(model, features(best, frame, data), data)

    return predict_frame, best


# ---------------------------------------------------------------- the stage


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    import numpy as np

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

    fitted: dict[str, Fitted] = {}
    for i, name in enumerate(learners):
        ctx.check_cancelled()
        ctx.progress(0.1 + 0.6 * i / len(learners), f"fitting {name}")
        if data.task == "generation":
            fitted[name] = _most_frequent_answer(data)
        else:
            fitted[name] = run_learner(name, data, inputs, metric)
    ctx.progress(0.75, "bootstrap intervals and comparisons")
    mask = _evaluated(data)
    y_eval = target(data.eval, data)[mask]
    units = data.units[mask]
    checks: list[Check] = []
    notes: list[Note] = []
    if data.task == "classification":
        checks += _classification_checks(inputs, data, fitted, y_eval, units, mask, metric, upstream, notes)
    elif data.task == "regression":
        checks += _regression_checks(inputs, data, fitted, y_eval, units, mask, metric)
    else:
        checks += _generation_checks(inputs, data, fitted, y_eval, units, mask)
    checks.append(_predictions_check(data, fitted, mask, ctx))
    checks.append(_locked_test_check(upstream, ctx))
    checks.append(_timing_check(data, fitted, t_load, time.perf_counter() - t_start))
    ctx.progress(1.0, "done")
    _ = np
    return StageRecord(stage="baseline", inputs=inputs.model_dump(mode="json"), checks=checks, notes=notes)


def _evaluated(data: Data) -> np.ndarray:
    import numpy as np

    if data.eval_fold is None:
        return np.ones(data.eval.height, dtype=bool)
    return data.eval_fold >= 0


def _coverage(data: Data, mask: np.ndarray) -> str:
    n = int(mask.sum())
    if data.mode == "holdout":
        return f"full: all {n} dev rows"
    return (
        f"full: {n} of {data.eval.height} train+dev rows, out-of-fold ({len(data.folds)} folds, {data.mode})"
    )


def _where(data: Data) -> str:
    return "dev" if data.mode == "holdout" else "out-of-fold"


def _most_frequent_answer(data: Data) -> Fitted:
    import numpy as np

    counts = data.fit.get_column("target").value_counts(sort=True)
    top = counts.sort(["count", "target"], descending=[True, False]).get_column("target")[0]
    return Fitted("most_frequent_answer", np.asarray([top] * data.eval.height, dtype=object), None)


# ---------------------------------------------------------------- classification checks


def _classification_checks(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    y: np.ndarray,
    units: np.ndarray,
    mask: np.ndarray,
    metric: str,
    upstream: dict[str, StageRecord],
    notes: list[Note],
) -> list[Check]:
    from engine import metrics as m

    reports = {
        n: m.classification_report(y, f.eval_pred[mask], data.classes, ece_bins=inputs.ece_bins)
        for n, f in fitted.items()
    }
    present = [
        i for i, c in enumerate(data.classes) if reports[next(iter(reports))]["per_class"][i]["support"] > 0
    ]
    intervals = {
        n: _intervals(inputs, data, y, f.eval_pred[mask], units, present, metric) for n, f in fitted.items()
    }
    cov = _coverage(data, mask)
    trivial = [n for n in fitted if n in CLASS_TRIVIAL]
    conventional = [n for n in fitted if n in CLASS_CONVENTIONAL]
    out = [_trivial_check(data, reports, intervals, trivial, cov)]
    out.append(_conventional_check(data, fitted, reports, intervals, conventional, metric, cov))
    out.append(_per_class_check(data, reports, trivial, cov))
    best = _best(conventional, reports, metric)
    out.append(
        _learnability_check(
            inputs, data, fitted, reports, y, units, mask, metric, best, present, upstream, cov, notes
        )
    )
    cal_check, calibrated = _calibration_check(inputs, data, fitted, y, mask, best)
    out.append(cal_check)
    out.append(_operating_point_check(inputs, data, fitted, y, mask, best, calibrated))
    return out


def _intervals(
    inputs: Inputs,
    data: Data,
    y: np.ndarray,
    proba: np.ndarray,
    units: np.ndarray,
    present: list[int],
    metric: str,
) -> dict[str, Any]:
    from engine import uncertainty

    names = ["accuracy", "macro_f1"] + (
        [metric] if metric in DECOMPOSABLE and metric not in ("accuracy", "macro_f1") else []
    )
    out = {}
    for name in names:
        out[name] = uncertainty.bootstrap_ci(
            name,
            y,
            proba,
            units,
            n=inputs.bootstrap_resamples,
            seed=inputs.bootstrap_seed,
            classes=data.classes,
            labels=present,
        )
        out[name]["unit"] = data.unit_kind
    return out


def _slim(report: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "n",
        "accuracy",
        "majority_class",
        "majority_rate",
        "macro_f1",
        "weighted_f1",
        "balanced_accuracy",
        "macro_auroc",
        "macro_auprc",
        "log_loss",
        "brier",
        "ece",
        "ece_bins",
        "confusion",
        "per_class",
        "classes_absent",
        "collapsed_classes",
        "undefined",
    )
    return {k: report[k] for k in keys if k in report}


def _trivial_check(
    data: Data, reports: dict[str, Any], intervals: dict[str, Any], trivial: list[str], cov: str
) -> Check:
    if not trivial:
        return Check(
            id="baseline.trivial",
            status="warn",
            basis="decided",
            summary="no trivial learner was run",
            coverage=cov,
            why="Without a trivial reference, 'better' has no floor.",
            playbook=PB_TRIVIAL,
        )
    first = reports[trivial[0]]
    majority_train = str(data.fit.get_column("target").mode().sort()[0])
    same = abs(first["accuracy"] - first["majority_rate"]) < 1e-12
    parts = [
        f"{n}: accuracy {reports[n]['accuracy']:.4f}, macro-F1 {reports[n].get('macro_f1', 0.0):.4f}, "
        f"log loss {reports[n]['log_loss']:.4f}"
        for n in trivial
    ]
    summary = (
        f"{'; '.join(parts)} on {_where(data)}; {_where(data)} majority rate {first['majority_rate']:.4f} "
        f"('{first['majority_class']}')" + ("" if same else f"; train majority is '{majority_train}'")
    )
    return Check(
        id="baseline.trivial",
        status="info",
        summary=summary,
        coverage=cov,
        measured={
            "learners": {n: _slim(reports[n]) | {"intervals": intervals[n]} for n in trivial},
            "train_majority_class": majority_train,
            "accuracy_equals_majority_rate": same,
        },
        why="The trivial learner's score is the floor every model must clear; accuracy alone reaches the majority rate.",
        playbook=PB_TRIVIAL,
    )


def _conventional_check(
    data: Data,
    fitted: dict[str, Fitted],
    reports: dict[str, Any],
    intervals: dict[str, Any],
    conventional: list[str],
    metric: str,
    cov: str,
) -> Check:
    if not conventional:
        return Check(
            id="baseline.conventional",
            status="not_run",
            basis="not_run",
            summary="no conventional learner chosen",
            coverage=cov,
            why="A simple learner shows whether the inputs carry signal.",
            playbook=PB_TRIVIAL,
        )
    measured: dict[str, Any] = {
        "primary_metric": metric,
        "fitted_on": "train" if data.mode == "holdout" else "folds",
        "measured_on": _where(data),
        "mode": data.mode,
        "learners": {},
    }
    parts = []
    for n in conventional:
        f = fitted[n]
        ci = intervals[n].get(metric, intervals[n]["macro_f1"])
        entry = _slim(reports[n]) | {"intervals": intervals[n], "trials": f.trials}
        if f.c_value is not None:
            entry["C"] = f.c_value
        measured["learners"][n] = entry
        val = reports[n].get(metric)
        parts.append(
            f"{n}: {metric} {val:.4f} [{ci.get('lo', float('nan')):.4f}, {ci.get('hi', float('nan')):.4f}]"
            if val is not None
            else f"{n}: {metric} undefined"
        )
    return Check(
        id="baseline.conventional",
        status="info",
        summary="; ".join(parts) + f" on {_where(data)}",
        coverage=cov,
        measured=measured,
        why="Fitted on train only (vocabulary and encoders too), measured on rows it never saw.",
        playbook=PB_TRIVIAL,
    )


def _per_class_check(data: Data, reports: dict[str, Any], trivial: list[str], cov: str) -> Check:
    collapsed = {n: r["collapsed_classes"] for n, r in reports.items() if r["collapsed_classes"]}
    learned = {n: c for n, c in collapsed.items() if n not in trivial}
    recall = {n: {p["class"]: p.get("recall", -1.0) for p in r["per_class"]} for n, r in reports.items()}
    parts = [f"{n} never recalls {', '.join(c)}" for n, c in collapsed.items()]
    status = "warn" if learned else "info"
    if not parts:
        summary = "every learner recalls at least one row of every class present"
    else:
        summary = "; ".join(parts) + (
            " (expected of trivial learners; accuracy hides it)" if not learned else ""
        )
    weakest = {}
    for n, r in reports.items():
        rated = [p for p in r["per_class"] if "recall" in p]
        if n not in trivial and rated:
            low = min(rated, key=lambda p: (p["recall"], p["class"]))
            weakest[n] = {"class": low["class"], "recall": low["recall"], "support": low["support"]}
            summary += f"; {n}'s weakest class: {low['class']} (recall {low['recall']:.3f}, support {low['support']})"
    absent = reports[next(iter(reports))]["classes_absent"]
    if absent:
        summary += f"; classes absent from {_where(data)}: {', '.join(absent)}"
    return Check(
        id="baseline.per_class",
        status=status,
        summary=summary,
        coverage=cov,
        measured={
            "collapsed": collapsed,
            "weakest": weakest,
            "recall": recall,
            "classes_absent": absent,
            "recall_absent_marker": -1.0,
        },
        why="A model that predicts only the majority class scores the majority rate in accuracy and zero recall on the rest.",
        playbook=PB_RARE,
    )


def _best(conventional: list[str], reports: dict[str, Any], metric: str) -> str:
    if not conventional:
        return ""
    sign = 1 if metric in LOWER_IS_BETTER else -1

    def key(n: str) -> tuple[int, float, int]:
        v = reports[n].get(metric)  # an undefined metric ranks last, never first
        return (1, 0.0, conventional.index(n)) if v is None else (0, sign * float(v), conventional.index(n))

    return min(conventional, key=key)


def _noise_ceiling(upstream: dict[str, StageRecord]) -> tuple[float | None, str]:
    """The accuracy ceiling implied by conflicting labels, if the source stage recorded one."""
    check = upstream["source"].check("source.conflicting_labels")
    if check is None or check.status == "not_run":
        return None, "the source stage recorded no conflicting-labels measurement"
    meas = check.measured
    for key in ("noise_ceiling_accuracy", "accuracy_ceiling", "noise_ceiling", "label_noise_ceiling"):
        v = meas.get(key)
        if isinstance(v, int | float) and 0 <= v <= 1:
            return float(v), f"source.conflicting_labels.{key}"
    for key, v in meas.items():
        if "ceiling" in key and isinstance(v, int | float) and 0 <= v <= 1:
            return float(v), f"source.conflicting_labels.{key}"
    return None, "source.conflicting_labels has no ceiling value"


def _learnability_check(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    reports: dict[str, Any],
    y: np.ndarray,
    units: np.ndarray,
    mask: np.ndarray,
    metric: str,
    best: str,
    present: list[int],
    upstream: dict[str, StageRecord],
    cov: str,
    notes: list[Note],
) -> Check:
    from engine import metrics as m
    from engine import uncertainty

    ref = (
        inputs.trivial_reference
        if inputs.trivial_reference in fitted
        else next((n for n in fitted if n in CLASS_TRIVIAL), "")
    )
    if not best or not ref:
        return Check(
            id="baseline.learnability",
            status="not_run",
            basis="not_run",
            coverage=cov,
            summary="needs one trivial and one conventional learner",
            why="",
            playbook=PB_LEARN,
        )
    boot_metric = metric if metric in DECOMPOSABLE or metric in RANKING else "macro_f1"
    lower = boot_metric in LOWER_IS_BETTER
    pa, pb = fitted[best].eval_pred[mask], fitted[ref].eval_pred[mask]
    # AUROC / AUPRC do not decompose into per-unit sums: the (slower) per-resample path computes them
    stat: Any = getattr(m, boot_metric) if boot_metric in RANKING else boot_metric
    diff = uncertainty.paired_bootstrap_diff(
        stat,
        y,
        pa,
        pb,
        units,
        n=inputs.bootstrap_resamples,
        seed=inputs.bootstrap_seed,
        classes=data.classes,
        labels=present,
    )
    diff["metric"] = boot_metric
    if boot_metric in RANKING:
        diff["method"] += " (per-resample recomputation; macro over classes defined in each resample)"
    diff["unit"] = data.unit_kind
    acc_diff = uncertainty.paired_bootstrap_diff(
        "accuracy",
        y,
        pa,
        pb,
        units,
        n=inputs.bootstrap_resamples,
        seed=inputs.bootstrap_seed,
        classes=data.classes,
        labels=present,
    )
    acc_diff["unit"] = data.unit_kind
    yi = m.encode(y, data.classes)
    test = uncertainty.mcnemar(m.argmax_pred(pa) == yi, m.argmax_pred(pb) == yi)
    better = "lo" in diff and ((diff["hi"] < 0) if lower else (diff["lo"] > 0))
    ceiling, ceiling_from = _noise_ceiling(upstream)
    acc = reports[best]["accuracy"]
    measured: dict[str, Any] = {
        "learner": best,
        "reference": ref,
        "metric": boot_metric,
        "difference": diff,
        "accuracy_difference": acc_diff,
        "mcnemar": test,
        "beats_trivial": better,
        "selected_on": _where(data),
        "noise_ceiling_source": ceiling_from,
    }
    verdict = (
        f"{best} beats {ref} on {boot_metric} by {diff['estimate']:+.4f} "
        f"[{diff.get('lo', float('nan')):+.4f}, {diff.get('hi', float('nan')):+.4f}] "
        f"({diff['resamples']} {data.unit_kind} resamples, {diff['units']} units); "
        f"McNemar p={test['p_value']:.3g}"
    )
    if not better:
        verdict = verdict.replace(" beats ", " does not clearly beat ")
    status = "pass" if better else "warn"
    if ceiling is None:
        measured["ceiling_comparison"] = "not_run"
        verdict += "; label-noise ceiling not measured"
    else:
        gap = ceiling - acc
        measured.update(noise_ceiling=ceiling, accuracy=acc, gap_to_ceiling=gap)
        if gap < -0.01:
            measured["ceiling_comparison"] = "above_ceiling"
            status = "warn"
            verdict += (
                f"; accuracy {acc:.4f} exceeds the label-noise ceiling {ceiling:.4f} — suspect leakage "
                "or a ceiling measured on too few duplicated inputs"
            )
        else:
            measured["ceiling_comparison"] = "below_ceiling"
            verdict += f"; accuracy {acc:.4f} vs label-noise ceiling {ceiling:.4f} (gap {gap:.4f})"
            if ceiling < 1.0:
                notes.append(
                    Note(
                        tag="limitation",
                        text=(
                            f"Contradictory labels on identical inputs cap accuracy at about {ceiling:.4f} "
                            f"({ceiling_from}); no model trained on these labels can be expected to exceed it."
                        ),
                    )
                )
    if data.mode == "holdout" and fitted[best].trials:
        verdict += "; C was selected on dev, so the dev figure of the chosen C is optimistic"
    return Check(
        id="baseline.learnability",
        status=status,
        summary=verdict,
        coverage=cov,
        measured=measured,
        why="Learnable means the conventional learner beats the trivial one with an interval over the independent "
        "unit that excludes zero; weak or contradictory labels are a limit, reported, not hidden.",
        playbook=PB_LEARN,
    )


# ---------------------------------------------------------------- calibration and operating point


def _calibration_sets(
    data: Data, fitted: dict[str, Fitted], mask: np.ndarray, best: str, y: np.ndarray
) -> tuple[str, Any]:
    """Where calibration is fitted: the calibration split (holdout) or cross-fitted over folds (K-fold)."""
    if data.mode == "holdout":
        if data.cal.height == 0 or fitted[best].cal_pred is None:
            return "none", None
        return "calibration_split", (fitted[best].cal_pred, target(data.cal, data))
    return "out_of_fold", (fitted[best].eval_pred[mask], y, data.eval_fold[mask])


def _calibration_check(
    inputs: Inputs, data: Data, fitted: dict[str, Fitted], y: np.ndarray, mask: np.ndarray, best: str
) -> tuple[Check, Any]:
    import numpy as np

    from engine import calibration
    from engine import metrics as m

    base = dict(
        id="baseline.calibration",
        why="Calibration fitted on the rows it is scored on looks better than it is; "
        "scores on the fitting rows are in-sample.",
        playbook=PB_CAL,
    )
    if not best or inputs.calibration == "none":
        why = "no conventional learner" if not best else "calibration method 'none' chosen"
        return Check(status="not_run", basis="not_run", summary=f"not run: {why}", **base), None
    where, sets = _calibration_sets(data, fitted, mask, best, y)
    if sets is None:
        return Check(
            status="not_run",
            basis="not_run",
            summary="not run: no calibration split and not in K-fold mode; the split stage makes one",
            **base,
        ), None
    raw = fitted[best].eval_pred[mask]
    yi = m.encode(y, data.classes)

    def figures(p: np.ndarray, yy: np.ndarray, sample: str) -> dict[str, Any]:
        r = m.classification_report(yy, p, data.classes, ece_bins=inputs.ece_bins)
        return {
            "sample": sample,
            "log_loss": r["log_loss"],
            "brier": r["brier"],
            "ece": r["ece"],
            "accuracy": r["accuracy"],
            "rows": r["n"],
        }

    if where == "calibration_split":
        cal_p, cal_y = sets
        cal_i = m.encode(cal_y, data.classes)
        calib = calibration.fit_calibrator(inputs.calibration, cal_p, cal_i, seed=inputs.seed)
        out_p = calib.transform(raw)
        fitting = {
            "raw": figures(cal_p, cal_y, "in-sample (fitting rows, before calibration)"),
            "calibrated": figures(calib.transform(cal_p), cal_y, "in-sample (fitting rows)"),
        }
        calibrated_fit = (calib.transform(cal_p), cal_i)
    else:
        p_all, _, folds = sets
        out_p = np.zeros_like(p_all)
        for k in sorted(set(folds.tolist())):  # cross-fit: each fold calibrated by the others
            other = folds != k
            if len(set(yi[other].tolist())) < 2:
                out_p[folds == k] = p_all[folds == k]
                continue
            out_p[folds == k] = calibration.fit_calibrator(
                inputs.calibration, p_all[other], yi[other], seed=inputs.seed
            ).transform(p_all[folds == k])
        calib = calibration.fit_calibrator(inputs.calibration, p_all, yi, seed=inputs.seed)
        fitting = {"calibrated": figures(calib.transform(p_all), y, "in-sample (all out-of-fold rows)")}
        calibrated_fit = (out_p, yi)
    evaluation = {
        "raw": figures(raw, y, f"out-of-sample ({_where(data)})"),
        "calibrated": figures(
            out_p,
            y,
            f"out-of-sample ({_where(data)}" + (", cross-fitted)" if where == "out_of_fold" else ")"),
        ),
    }
    r0, r1 = evaluation["raw"], evaluation["calibrated"]
    summary = (
        f"{best}, {inputs.calibration} fitted on {where.replace('_', ' ')}: {_where(data)} ECE "
        f"{r0['ece']:.4f} raw → {r1['ece']:.4f} calibrated, log loss {r0['log_loss']:.4f} → "
        f"{r1['log_loss']:.4f} (out-of-sample; {inputs.ece_bins} bins)"
    )
    measured = {
        "learner": best,
        "method": inputs.calibration,
        "fitted_on": where,
        "params": calib.params,
        "evaluation": evaluation,
        "fitting_rows": fitting,
        "ece_bins": inputs.ece_bins,
    }
    return Check(status="info", summary=summary, coverage=_coverage(data, mask), measured=measured, **base), (
        out_p,
        calibrated_fit,
        calib,
    )


def _operating_point_check(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    y: np.ndarray,
    mask: np.ndarray,
    best: str,
    calibrated: Any,
) -> Check:
    import numpy as np

    from engine import calibration
    from engine import metrics as m

    op = inputs.operating_point
    base = dict(
        id="baseline.operating_point",
        why="An action threshold is a decision about error costs; 0.5 or "
        "arg-max is not a default that fits every cost.",
        playbook=PB_CAL,
    )
    if op.constraint == "none":
        return Check(
            status="not_run",
            basis="not_run",
            summary="no operating constraint or cost declared; decisions "
            "are arg-max over classes and no threshold was chosen",
            **base,
        )
    if op.positive_class not in data.classes:
        raise StageInputError(
            f"operating_point.positive_class '{op.positive_class}' is not one of {data.classes}"
        )
    if not best:
        return Check(
            status="not_run",
            basis="not_run",
            summary="no conventional learner to set a threshold for",
            **base,
        )
    j = data.classes.index(op.positive_class)
    yi = m.encode(y, data.classes)
    kw = dict(constraint=op.constraint, target=op.target, cost_fp=op.cost_fp, cost_fn=op.cost_fn)
    if (
        calibrated is None
    ):  # no calibration available: the threshold is fitted on raw scores of the same sources
        return Check(
            status="not_run",
            basis="not_run",
            summary="not run: no calibration split or out-of-fold predictions to fit a threshold on",
            **base,
        )
    eval_p, (fit_p, fit_y), _ = calibrated
    if data.mode == "holdout":
        choice = calibration.choose_threshold(fit_y == j, fit_p[:, j], **kw)
        applied = calibration.binary_counts(yi == j, eval_p[:, j], choice["threshold"])
    else:
        folds = data.eval_fold[mask]
        flags = np.zeros(len(yi), dtype=bool)
        for k in sorted(set(folds.tolist())):
            other, this = folds != k, folds == k
            t = calibration.choose_threshold(fit_y[other] == j, fit_p[other, j], **kw)["threshold"]
            flags[this] = eval_p[this, j] >= t
        choice = calibration.choose_threshold(fit_y == j, fit_p[:, j], **kw)
        applied = calibration.binary_counts(yi == j, flags.astype(float), 0.5)
        applied["threshold"] = "cross-fitted per fold"
    choice["fit_sample"] = "in-sample (the rows the threshold was chosen on)"
    applied["sample"] = f"out-of-sample ({_where(data)})"
    rule = (
        f"precision ≥ {op.target}"
        if op.constraint == "min_precision"
        else f"recall ≥ {op.target}"
        if op.constraint == "min_recall"
        else f"min {op.cost_fp}·FP + {op.cost_fn}·FN"
    )
    status = "pass"
    if not choice["feasible"]:
        status = "warn"
        summary = f"'{op.positive_class}': no threshold meets {rule} on the fitting rows"
    else:
        got = applied.get("precision" if op.constraint == "min_precision" else "recall", 0.0)
        summary = (
            f"'{op.positive_class}' ≥ {choice['threshold']:.4f} ({rule}, chosen on calibrated "
            f"{'calibration split' if data.mode == 'holdout' else 'out-of-fold'} scores): {_where(data)} "
            f"precision {applied['precision']:.4f}, recall {applied.get('recall', float('nan')):.4f}"
        )
        if op.constraint != "cost" and got < op.target:
            status = "warn"
            summary += f"; the constraint does not hold out-of-sample ({got:.4f} < {op.target})"
    return Check(
        status=status,
        summary=summary,
        coverage=_coverage(data, mask),
        measured={
            "learner": best,
            "positive_class": op.positive_class,
            "rule": rule,
            "choice": choice,
            "applied": applied,
        },
        **base,
    )


# ---------------------------------------------------------------- regression and generation


def _regression_checks(
    inputs: Inputs,
    data: Data,
    fitted: dict[str, Fitted],
    y: np.ndarray,
    units: np.ndarray,
    mask: np.ndarray,
    metric: str,
) -> list[Check]:
    from engine import metrics as m
    from engine import uncertainty

    cov = _coverage(data, mask)
    reps = {n: m.regression_report(y, f.eval_pred[mask]) for n, f in fitted.items()}
    for n, f in fitted.items():
        reps[n]["intervals"] = {
            k: uncertainty.bootstrap_ci(
                k, y, f.eval_pred[mask], units, n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed
            )
            | {"unit": data.unit_kind}
            for k in ("mae", "rmse")
        }
    trivial = [n for n in fitted if n in REG_TRIVIAL]
    conv = [n for n in fitted if n in REG_CONVENTIONAL]
    desc = "; ".join(f"{n}: MAE {reps[n]['mae']:.4g}, RMSE {reps[n]['rmse']:.4g}" for n in fitted)
    out = [
        Check(
            id="baseline.trivial",
            status="info",
            summary=desc,
            coverage=cov,
            measured={"learners": {n: reps[n] for n in trivial}},
            why="The floor a model must clear.",
            playbook=PB_TRIVIAL,
        ),
        Check(
            id="baseline.conventional",
            status="info" if conv else "not_run",
            basis="measured" if conv else "not_run",
            summary=desc if conv else "no conventional learner chosen",
            coverage=cov,
            measured={"learners": {n: reps[n] for n in conv}},
            why="Signal in the inputs.",
            playbook=PB_TRIVIAL,
        ),
    ]
    boot = metric if metric in ("mae", "rmse", "r2") else "mae"
    if conv and trivial:
        best = min(conv, key=lambda n: reps[n][boot] if boot != "r2" else -reps[n].get("r2", -1e9))
        ref = inputs.trivial_reference if inputs.trivial_reference in trivial else trivial[0]
        diff = uncertainty.paired_bootstrap_diff(
            boot,
            y,
            fitted[best].eval_pred[mask],
            fitted[ref].eval_pred[mask],
            units,
            n=inputs.bootstrap_resamples,
            seed=inputs.bootstrap_seed,
        )
        better = "lo" in diff and (diff["lo"] > 0 if boot == "r2" else diff["hi"] < 0)
        out.append(
            Check(
                id="baseline.learnability",
                status="pass" if better else "warn",
                coverage=cov,
                summary=f"{best} − {ref} {boot}: {diff['estimate']:+.4g} [{diff.get('lo', 0):+.4g}, "
                f"{diff.get('hi', 0):+.4g}] ({data.unit_kind} bootstrap)",
                measured={"learner": best, "reference": ref, "difference": diff, "beats_trivial": better},
                why="Learnable means the conventional learner beats the trivial one beyond noise.",
                playbook=PB_LEARN,
            )
        )
    na = "not a classification task"
    for cid in ("baseline.per_class", "baseline.calibration", "baseline.operating_point"):
        out.append(
            Check(id=cid, status="not_run", basis="not_run", summary=f"not run: {na}", playbook=PB_RARE)
        )
    return out


def _generation_checks(
    inputs: Inputs, data: Data, fitted: dict[str, Fitted], y: np.ndarray, units: np.ndarray, mask: np.ndarray
) -> list[Check]:
    import numpy as np

    from engine import metrics as m
    from engine import uncertainty

    f = fitted["most_frequent_answer"]
    answer = str(f.eval_pred[0]) if len(f.eval_pred) else ""
    em = m.exact_match(list(y), list(f.eval_pred[mask]))

    def em_fn(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    yy = np.asarray([" ".join(str(s).split()).casefold() for s in y], dtype=object)
    pp = np.asarray([" ".join(answer.split()).casefold()] * len(yy), dtype=object)
    ci = uncertainty.bootstrap_ci(
        em_fn, yy, pp, units, n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed
    )
    ci["unit"] = data.unit_kind
    cov = _coverage(data, mask)
    return [
        Check(
            id="baseline.trivial",
            status="info",
            coverage=cov,
            summary=f"most frequent training answer: exact match {em:.4f} [{ci.get('lo', 0):.4f}, {ci.get('hi', 0):.4f}]",
            measured={
                "answer": answer[:200],
                "exact_match": em,
                "interval": ci,
                "normalisation": "whitespace collapsed, case-folded",
            },
            why="Repeating the commonest answer is the floor for a generative task.",
            playbook=PB_TRIVIAL,
        ),
        Check(
            id="baseline.conventional",
            status="not_run",
            basis="not_run",
            summary="no conventional learner for free generation; the unchanged base model is the comparator "
            "measured at the artifact stage",
            playbook=PB_TRIVIAL,
        ),
    ]


# ---------------------------------------------------------------- files, locked test, timing


def _predictions_frame(data: Data, fitted: dict[str, Fitted], mask: np.ndarray) -> pl.DataFrame:
    import numpy as np
    import polars as pl

    from engine.metrics import argmax_pred

    row_id = data.eval.get_column("row_id").to_numpy()[mask]
    frames = []
    for name, f in fitted.items():
        cols: dict[str, Any] = {"row_id": row_id, "learner": [name] * len(row_id)}
        pred = f.eval_pred[mask]
        if data.task == "classification":
            cols["predicted"] = [data.classes[i] for i in argmax_pred(pred)]
            for j, c in enumerate(data.classes):
                cols[f"proba_{c}"] = pred[:, j].astype(np.float64)
        elif data.task == "regression":
            cols["predicted"] = pred.astype(np.float64)
        else:
            cols["predicted"] = [str(v) for v in pred]
        frames.append(pl.DataFrame(cols))
    return pl.concat(frames) if frames else pl.DataFrame()


def _predictions_check(data: Data, fitted: dict[str, Fitted], mask: np.ndarray, ctx: StageContext) -> Check:
    import hashlib

    frame = _predictions_frame(data, fitted, mask)
    buf = io.BytesIO()
    frame.write_parquet(buf, compression="zstd", statistics=False)
    blob = buf.getvalue()
    path = ctx.data_dir / PREDICTIONS_FILE
    if not ctx.replay:
        atomic_write_bytes(path, blob)
    return Check(
        id="baseline.predictions",
        status="info",
        summary=f"{frame.height} {_where(data)} predictions ({len(fitted)} learners) saved to data/{PREDICTIONS_FILE}",
        coverage=_coverage(data, mask),
        measured={
            "path": f"data/{PREDICTIONS_FILE}",
            "sha256": hashlib.sha256(blob).hexdigest(),
            "rows": frame.height,
            "columns": frame.columns,
        },
        why="Saved predictions let a reviewer recompute every figure without refitting.",
        playbook=PB_REPORT,
    )


def _locked_test_check(upstream: dict[str, StageRecord], ctx: StageContext) -> Check:
    """Probe the guard (it must refuse before reading anything) and count locked reads on this context."""
    from engine import splits

    refused, message = False, ""
    try:
        splits.rows("test", upstream, ctx, caller=CALLER)
    except splits.LockedTestError as exc:
        refused, message = True, str(exc)
    reads = [r for r in splits.locked_reads(ctx) if r.get("caller") == CALLER]
    ok = refused and not reads
    return Check(
        id="baseline.locked_test",
        status="pass" if ok else "fail",
        summary=(
            "the locked test was not read: the guard refused this stage and 0 locked reads are logged"
            if ok
            else f"the locked test was read by this stage ({len(reads)} read(s)); its figures cannot select anything"
        ),
        measured={
            "guard_refused": refused,
            "refusal": message,
            "locked_reads": len(reads),
            "splits_read": ["train", "dev", "calibration"],
        },
        why="Final results must select nothing; a stage that saw the test labels cannot claim an unbiased test.",
        playbook=PB_SPLITS,
    )


def _timing_check(data: Data, fitted: dict[str, Fitted], t_load: float, total: float) -> Check:
    per = {n: round(f.seconds, 3) for n, f in fitted.items()}
    return Check(
        id="baseline.timing",
        status="info",
        replay="observation",
        summary=f"stage took {total:.1f} s (reading {t_load:.1f} s; "
        + ", ".join(f"{n} {s:.1f} s" for n, s in per.items())
        + f") for {data.fit.height} fitting rows and {data.eval.height} evaluated rows",
        measured={
            "total_seconds": round(total, 3),
            "load_seconds": round(t_load, 3),
            "learner_seconds": per,
            "fit_rows": data.fit.height,
            "eval_rows": data.eval.height,
            "mode": data.mode,
        },
        why="Run time is an observation of this machine, not a property of the data.",
        playbook="Performance timing and quality benchmarks are different experiments.",
    )
