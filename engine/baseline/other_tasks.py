"""Baseline checks for regression (mean / median vs gradient boosting) and free generation (the most
frequent training answer)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from claimcheck.engine.baseline.evaluation import (
    PB_LEARN,
    PB_TRIVIAL,
    Evaluation,
    _coverage,
    _where,
    unit_facts,
)
from claimcheck.engine.baseline.learners import REG_CONVENTIONAL, REG_TRIVIAL, Data, Fitted
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_applicable, not_run
from claimcheck.engine.stats import registry

if TYPE_CHECKING:
    import numpy as np


def most_frequent_answer(data: Data) -> Fitted:
    import numpy as np

    counts = data.fit.get_column("target").value_counts(sort=True)
    top = counts.sort(["count", "target"], descending=[True, False]).get_column("target")[0]
    return Fitted("most_frequent_answer", np.asarray([top] * data.eval.height, dtype=object), None)


# The registry's regression metrics, R² shown first: r2, mae, rmse.
REG_METRICS = tuple(sorted(registry.computed_for("tabular", "numeric"), key=lambda n: n != "r2"))
METRIC_LABEL = {"r2": "R²", "mae": "MAE", "rmse": "RMSE"}


def _reg_reports(ev: Evaluation, refused: str | None) -> dict[str, dict[str, Any]]:
    """Each learner's regression report; with intervals (unit bootstrap) unless they are refused."""
    from claimcheck.engine.stats import metrics, uncertainty

    reps = {n: metrics.regression_report(ev.y, f.eval_pred[ev.mask]) for n, f in ev.fitted.items()}
    for n, f in ev.fitted.items():
        reps[n]["intervals"] = (
            {}
            if refused
            else {
                k: uncertainty.bootstrap_ci(
                    k,
                    ev.y,
                    f.eval_pred[ev.mask],
                    ev.units,
                    uncertainty.Bootstrap(n=ev.inputs.bootstrap_resamples, seed=ev.inputs.bootstrap_seed),
                )
                | {"unit": ev.data.unit_kind}
                for k in REG_METRICS
                if k in reps[n]
            }
        )
    return reps


def _reg_text(name: str, rep: dict[str, Any], metric: str) -> str:
    """'hgb: R² 0.71 [0.62, 0.78], MAE …, RMSE …' — the primary metric first, its interval when drawn."""
    parts = []
    for k in (metric, *[k for k in REG_METRICS if k != metric]):
        if k not in rep:
            parts.append(f"{METRIC_LABEL[k]} undefined")
            continue
        ci = rep["intervals"].get(k, {}) if k == metric else {}
        band = f" [{ci['lo']:.4g}, {ci['hi']:.4g}]" if "lo" in ci else ""
        parts.append(f"{METRIC_LABEL[k]} {rep[k]:.4g}{band}")
    return f"{name}: " + ", ".join(parts)


def regression_checks(ev: Evaluation) -> list[Check]:
    """Trivial (mean / median) and conventional learners, each summarised with the primary metric, and
    the learnability difference: a paired unit bootstrap, or refused when there are too few units."""
    from claimcheck.engine.stats import uncertainty

    data, fitted, metric = ev.data, ev.fitted, ev.metric
    metric = metric if metric in REG_METRICS else registry.DEFAULTS["numeric"]
    n_units = len(set(ev.units.tolist()))
    refused = uncertainty.too_few_units(n_units, data.unit_kind)
    cov = _coverage(data, ev.mask)
    reps = _reg_reports(ev, refused)
    trivial = [n for n in fitted if n in REG_TRIVIAL]
    conv = [n for n in fitted if n in REG_CONVENTIONAL]
    note = f" (no intervals: {refused})" if refused else ""
    where = {"primary_metric": metric, "fitted_on": "train" if data.mode == "holdout" else "folds"}
    conv_measured = {
        "learners": {n: reps[n] for n in conv},
        **where,
        "measured_on": _where(data),
        **unit_facts(data, ev.mask),
    }
    conv_check = (
        Check(
            id="baseline.conventional",
            status="info",
            summary="; ".join(_reg_text(n, reps[n], metric) for n in conv) + note,
            coverage=cov,
            measured=conv_measured,
            why="Signal in the inputs.",
            playbook=PB_TRIVIAL,
        )
        if conv
        else not_run(
            "baseline.conventional",
            "no conventional learner chosen",
            coverage=cov,
            measured=conv_measured,
            why="Signal in the inputs.",
        )
    )
    ref = trivial_reference(ev.inputs.trivial_reference, metric, trivial) if trivial else ""
    fitted_on = "train" if data.mode == "holdout" else "folds"
    rows = (
        f"the train split's {data.fit.height:,} rows"
        if fitted_on == "train"
        else f"each fold's training rows (of {data.fit.height:,} train+dev rows)"
    )
    said = f"; the trivial reference for {metric}: {ref}, fitted on {rows}" if ref else ""
    out = [
        Check(
            id="baseline.trivial",
            status="info",
            summary="; ".join(_reg_text(n, reps[n], metric) for n in trivial) + note + said,
            coverage=cov,
            measured={
                "learners": {n: reps[n] for n in trivial},
                "primary_metric": metric,
                "reference": ref,
                "fitted_on": fitted_on,
                "fit_rows": data.fit.height,
            },
            why="The floor a model must clear.",
            playbook=PB_TRIVIAL,
        ),
        conv_check,
    ]
    if conv and trivial:
        out.append(_reg_learnability(ev, reps, (trivial, conv), metric))
    for cid in ("baseline.per_class", "baseline.calibration", "baseline.operating_point"):
        out.append(not_applicable(cid, "not a classification task"))
    return out


def trivial_reference(named: str, metric: str, fitted: list[str]) -> str:
    """The trivial predictor a numeric target is judged against: the one the baseline inputs name
    (mean / median), else the metric registry's for the claim's metric (median for MAE, mean for
    RMSE / R²); the artifact stage's trivial_baseline arm is the same predictor."""
    if named in REG_TRIVIAL:
        return named
    ref = registry.trivial_for(metric)
    return ref if ref in fitted or not fitted else fitted[0]


def _reg_learnability(
    ev: Evaluation,
    reps: dict[str, dict[str, Any]],
    arms: tuple[list[str], list[str]],
    metric: str,
) -> Check:
    """Best conventional − reference trivial learner on the primary metric, paired over the units."""
    from claimcheck.engine.stats import uncertainty

    trivial, conv = arms
    lower = registry.lower_is_better(metric)
    best = min(conv, key=lambda n: reps[n].get(metric, math.inf) * (1 if lower else -1))
    ref = trivial_reference(ev.inputs.trivial_reference, metric, trivial)
    a, b = ev.fitted[best].eval_pred[ev.mask], ev.fitted[ref].eval_pred[ev.mask]
    diff = uncertainty.paired_bootstrap_diff(
        metric,
        ev.y,
        a,
        b,
        ev.units,
        uncertainty.Bootstrap(n=ev.inputs.bootstrap_resamples, seed=ev.inputs.bootstrap_seed),
    )
    diff = uncertainty.unit_rule(diff, ev.data.unit_kind)
    better = "lo" in diff and (diff["hi"] < 0 if lower else diff["lo"] > 0)
    band = (
        f"[{diff['lo']:+.4g}, {diff['hi']:+.4g}] ({ev.data.unit_kind} bootstrap, {diff['units']} units)"
        if "lo" in diff
        else f"no interval: {diff.get('refused', 'too few defined resamples')}"
    )
    return Check(
        id="baseline.learnability",
        status="pass" if better else "warn",
        coverage=_coverage(ev.data, ev.mask),
        summary=f"{best} − {ref} {METRIC_LABEL[metric]}: {diff['estimate']:+.4g} {band}",
        measured={
            "learner": best,
            "reference": ref,
            "metric": metric,
            "difference": diff,
            "beats_trivial": better,
        },
        why="Learnable means the conventional learner beats the trivial one beyond noise.",
        playbook=PB_LEARN,
    )


def generation_checks(ev: Evaluation) -> list[Check]:
    import numpy as np

    inputs, data, fitted, y, units, mask = ev.inputs, ev.data, ev.fitted, ev.y, ev.units, ev.mask
    from claimcheck.engine.stats import metrics, uncertainty

    f = fitted["most_frequent_answer"]
    answer = str(f.eval_pred[0]) if len(f.eval_pred) else ""
    em = metrics.exact_match(list(y), list(f.eval_pred[mask]))

    def em_fn(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    yy = np.asarray([" ".join(str(s).split()).casefold() for s in y], dtype=object)
    pp = np.asarray([" ".join(answer.split()).casefold()] * len(yy), dtype=object)
    ci = uncertainty.bootstrap_ci(
        em_fn, yy, pp, units, uncertainty.Bootstrap(n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed)
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
        not_run(
            "baseline.conventional",
            "no conventional learner for free generation; the unchanged base model is the comparator "
            "measured at the artifact stage",
        ),
    ]
