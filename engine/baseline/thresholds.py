"""Baseline probability calibration and the action threshold, fitted on the calibration split or
cross-fitted out of fold — never on the rows they are scored on, never on the locked test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claimcheck.engine.baseline.evaluation import PB_CAL, Evaluation, _coverage, _where
from claimcheck.engine.baseline.learners import Data, Fitted, target
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.pipeline.context import StageInputError

if TYPE_CHECKING:
    import numpy as np


def _calibration_sets(
    data: Data, fitted: dict[str, Fitted], mask: np.ndarray, best: str, y: np.ndarray
) -> tuple[str, Any]:
    """Where calibration is fitted: the calibration split (holdout) or cross-fitted over folds (K-fold)."""
    if data.mode == "holdout":
        if data.cal.height == 0 or fitted[best].cal_pred is None:
            return "none", None
        return "calibration_split", (fitted[best].cal_pred, target(data.cal, data))
    return "out_of_fold", (fitted[best].eval_pred[mask], y, data.eval_fold[mask])


def _scores(ev: Evaluation, p: np.ndarray, yy: np.ndarray, sample: str) -> dict[str, Any]:
    from claimcheck.engine.stats import metrics

    r = metrics.classification_report(yy, p, ev.data.classes, ece_bins=ev.inputs.ece_bins)
    keys = ("log_loss", "brier", "ece", "accuracy")
    return {"sample": sample, **{k: r[k] for k in keys}, "rows": r["n"]}


def _fit_on_split(ev: Evaluation, sets: Any, raw: np.ndarray) -> tuple[Any, ...]:
    """Holdout: fit on the calibration split, apply to dev."""
    from claimcheck.engine.stats import calibration, metrics

    cal_p, cal_y = sets
    cal_i = metrics.encode(cal_y, ev.data.classes)
    calib = calibration.fit_calibrator(ev.inputs.calibration, cal_p, cal_i, seed=ev.inputs.seed)
    fitting = {
        "raw": _scores(ev, cal_p, cal_y, "in-sample (fitting rows, before calibration)"),
        "calibrated": _scores(ev, calib.transform(cal_p), cal_y, "in-sample (fitting rows)"),
    }
    return calib.transform(raw), fitting, (calib.transform(cal_p), cal_i), calib


def _cross_fit(ev: Evaluation, sets: Any, yi: np.ndarray) -> tuple[Any, ...]:
    """K-fold: each fold calibrated by the others; the reported calibrator is fitted on all folds."""
    import numpy as np

    from claimcheck.engine.stats import calibration

    method, seed = ev.inputs.calibration, ev.inputs.seed
    p_all, _, folds = sets
    out_p = np.zeros_like(p_all)
    for k in sorted(set(folds.tolist())):
        other = folds != k
        if len(set(yi[other].tolist())) < 2:
            out_p[folds == k] = p_all[folds == k]
            continue
        fitted = calibration.fit_calibrator(method, p_all[other], yi[other], seed=seed)
        out_p[folds == k] = fitted.transform(p_all[folds == k])
    calib = calibration.fit_calibrator(method, p_all, yi, seed=seed)
    fitting = {"calibrated": _scores(ev, calib.transform(p_all), ev.y, "in-sample (all out-of-fold rows)")}
    return out_p, fitting, (out_p, yi), calib


def calibration_check(ev: Evaluation, best: str) -> tuple[Check, Any]:
    from claimcheck.engine.stats import metrics

    inputs, data, mask = ev.inputs, ev.data, ev.mask
    base = dict(
        id="baseline.calibration",
        why="Calibration fitted on the rows it is scored on looks better than it is; "
        "scores on the fitting rows are in-sample.",
        playbook=PB_CAL,
    )
    if not best or inputs.calibration == "none":
        why = "no conventional learner" if not best else "calibration method 'none' chosen"
        return not_run(base["id"], f"not run: {why}", why=base["why"]), None
    where, sets = _calibration_sets(data, ev.fitted, mask, best, ev.y)
    if sets is None:
        return not_run(
            base["id"],
            "not run: no calibration split and not in K-fold mode; the split stage makes one",
            why=base["why"],
        ), None
    raw = ev.fitted[best].eval_pred[mask]
    if where == "calibration_split":
        out_p, fitting, calibrated_fit, calib = _fit_on_split(ev, sets, raw)
    else:
        out_p, fitting, calibrated_fit, calib = _cross_fit(ev, sets, metrics.encode(ev.y, data.classes))
    crossed = ", cross-fitted)" if where == "out_of_fold" else ")"
    evaluation = {
        "raw": _scores(ev, raw, ev.y, f"out-of-sample ({_where(data)})"),
        "calibrated": _scores(ev, out_p, ev.y, f"out-of-sample ({_where(data)}" + crossed),
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
    check = Check(status="info", summary=summary, coverage=_coverage(data, mask), measured=measured, **base)
    return check, (out_p, calibrated_fit, calib)


def _threshold(ev: Evaluation, calibrated: Any, j: int, kw: dict[str, Any]) -> tuple[dict, dict]:
    """Choose 'score ≥ t' for class j on the fitting scores; apply it out of sample (cross-fitted
    per fold in K-fold mode)."""
    import numpy as np

    from claimcheck.engine.stats import calibration, metrics

    data, mask = ev.data, ev.mask
    yi = metrics.encode(ev.y, data.classes)
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
    return choice, applied


def operating_point_check(ev: Evaluation, best: str, calibrated: Any) -> Check:
    inputs, data, mask = ev.inputs, ev.data, ev.mask

    op = inputs.operating_point
    base = dict(
        id="baseline.operating_point",
        why="An action threshold is a decision about error costs; 0.5 or "
        "arg-max is not a default that fits every cost.",
        playbook=PB_CAL,
    )
    if op.constraint == "none":
        return not_run(
            base["id"],
            "no operating constraint or cost declared; decisions are arg-max over classes and no threshold was chosen",
            why=base["why"],
        )
    if op.positive_class not in data.classes:
        raise StageInputError(
            f"operating_point.positive_class '{op.positive_class}' is not one of {data.classes}"
        )
    if not best:
        return not_run(base["id"], "no conventional learner to set a threshold for", why=base["why"])
    j = data.classes.index(op.positive_class)
    kw = dict(constraint=op.constraint, target=op.target, cost_fp=op.cost_fp, cost_fn=op.cost_fn)
    if (
        calibrated is None
    ):  # no calibration available: the threshold is fitted on raw scores of the same sources
        return not_run(
            base["id"],
            "not run: no calibration split or out-of-fold predictions to fit a threshold on",
            why=base["why"],
        )
    choice, applied = _threshold(ev, calibrated, j, kw)
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
