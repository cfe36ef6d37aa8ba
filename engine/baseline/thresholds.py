"""Baseline probability calibration and the action threshold, fitted on the calibration split or
cross-fitted out of fold — never on the rows they are scored on, never on the locked test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.baseline.evaluation import PB_CAL, Evaluation, _coverage, _where
from engine.baseline.learners import Data, Fitted, target
from engine.context import StageInputError
from engine.evidence import Check

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


def calibration_check(ev: Evaluation, best: str) -> tuple[Check, Any]:
    import numpy as np

    inputs, data, fitted, y, mask = ev.inputs, ev.data, ev.fitted, ev.y, ev.mask
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


def operating_point_check(ev: Evaluation, best: str, calibrated: Any) -> Check:
    import numpy as np

    inputs, data, _fitted, y, mask = ev.inputs, ev.data, ev.fitted, ev.y, ev.mask
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
