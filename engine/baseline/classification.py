"""Baseline checks for classification: trivial and conventional learners with intervals over the
independent unit, per-class recall, and learnability against the label-noise ceiling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claimcheck.engine.baseline.evaluation import (
    PB_LEARN,
    PB_RARE,
    PB_TRIVIAL,
    Evaluation,
    _coverage,
    _where,
    evaluated,
    unit_facts,
)
from claimcheck.engine.baseline.learners import CLASS_CONVENTIONAL, CLASS_TRIVIAL, Data, Fitted
from claimcheck.engine.baseline.thresholds import calibration_check, operating_point_check
from claimcheck.engine.evidence import Check, Note, StageRecord
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.stats import registry

if TYPE_CHECKING:
    import numpy as np


def classification_checks(ev: Evaluation) -> list[Check]:
    from claimcheck.engine.stats import metrics

    inputs, data, fitted, y, mask, metric = ev.inputs, ev.data, ev.fitted, ev.y, ev.mask, ev.metric
    reports = {
        n: metrics.classification_report(y, f.eval_pred[mask], data.classes, ece_bins=inputs.ece_bins)
        for n, f in fitted.items()
    }
    present = [
        i for i, c in enumerate(data.classes) if reports[next(iter(reports))]["per_class"][i]["support"] > 0
    ]
    _positive_class_figures(ev, reports, present)
    _ordinal_figures(ev, reports, present)
    intervals = {n: _intervals(ev, f.eval_pred[mask], present) for n, f in fitted.items()}
    cov = _coverage(data, mask)
    trivial = [n for n in fitted if n in CLASS_TRIVIAL]
    conventional = [n for n in fitted if n in CLASS_CONVENTIONAL]
    out = [_trivial_check(data, reports, intervals, trivial, cov)]
    out.append(_conventional_check(data, fitted, reports, intervals, conventional, metric, cov))
    out.append(_per_class_check(data, reports, trivial, cov))
    best = _best(conventional, reports, metric)
    out.append(_learnability_check(ev, reports, best, present))
    cal_check, calibrated = calibration_check(ev, best)
    out.append(cal_check)
    out.append(operating_point_check(ev, best, calibrated))
    return out


def _positive_class_figures(ev: Evaluation, reports: dict[str, Any], present: list[int]) -> None:
    """A binary AUROC / AUPRC claim: each learner's figure of the claim's positive class, under the
    metric's name (the reports hold macro one-vs-rest figures only)."""
    from claimcheck.engine.stats import metrics

    entry, scoring = registry.by_key(ev.metric), _scoring(ev, present)
    if entry is None or entry.interval != "resampled" or scoring.positive < 0:
        return
    yi = metrics.encode(ev.y, ev.data.classes)
    for n, f in ev.fitted.items():
        try:
            reports[n][ev.metric] = entry.value(yi, f.eval_pred[ev.mask], scoring)
        except ValueError as exc:
            reports[n]["undefined"][ev.metric] = str(exc)


def _ordinal_figures(ev: Evaluation, reports: dict[str, Any], present: list[int]) -> None:
    """An ordinal claim: each learner's ordinal metrics over the class order (the reports hold the
    nominal figures only)."""
    from claimcheck.engine.stats import metrics

    if not registry.is_ordinal(ev.upstream["claim"].inputs):
        return
    yi = metrics.encode(ev.y, ev.data.classes)
    for name in (n for n, x in registry.METRICS.items() if x.ordinal_only):
        for n, f in ev.fitted.items():
            reports[n][name] = registry.get(name).value(yi, f.eval_pred[ev.mask], _scoring(ev, present))


def _intervals(ev: Evaluation, proba: np.ndarray, present: list[int]) -> dict[str, Any]:
    from claimcheck.engine.stats import uncertainty

    inputs, data, y, units, metric = ev.inputs, ev.data, ev.y, ev.units, ev.metric
    entry = registry.by_key(metric)
    boot = uncertainty.Bootstrap(
        n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed, classes=data.classes, labels=present
    )
    out = {}
    for name in dict.fromkeys(["accuracy", "macro_f1", metric]):
        if name == metric and (entry is None or not entry.interval):
            continue
        if name == metric and entry.interval == "resampled":
            out[name] = registry.interval(entry, (y, proba, units), boot, _scoring(ev, present))
        else:
            out[name] = uncertainty.unit_rule(uncertainty.bootstrap_ci(name, y, proba, units, boot))
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
        "quadratic_weighted_kappa",
        "mae_rank",
        "auroc",
        "auprc",
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
        return not_run(
            "baseline.conventional",
            "no conventional learner chosen",
            coverage=cov,
            why="A simple learner shows whether the inputs carry signal.",
        )
    measured: dict[str, Any] = {
        "primary_metric": metric,
        "fitted_on": "train" if data.mode == "holdout" else "folds",
        "measured_on": _where(data),
        "mode": data.mode,
        "learners": {},
        **unit_facts(data, evaluated(data)),
    }
    parts = []
    for n in conventional:
        f = fitted[n]
        ci = intervals[n].get(metric, {})
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
    sign = 1 if registry.lower_is_better(metric) else -1

    def key(n: str) -> tuple[int, float, int]:
        v = reports[n].get(metric)  # an undefined metric ranks last, never first
        return (1, 0.0, conventional.index(n)) if v is None else (0, sign * float(v), conventional.index(n))

    return min(conventional, key=key)


def _noise_ceiling(upstream: dict[str, StageRecord]) -> tuple[float | None, str]:
    """The accuracy ceiling implied by conflicting labels, if the source stage recorded one."""
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    check = upstream["source"].check("source.conflicting_labels")
    conflicts = parse(check, shapes.ConflictingLabels) if check is not None else None
    if conflicts is None:
        return None, "the source stage recorded no conflicting-labels measurement"
    return conflicts.noise_ceiling_accuracy, "source.conflicting_labels.noise_ceiling_accuracy"


def _scoring(ev: Evaluation, present: list[int]) -> registry.Scoring:
    """The claim's class order, positive class (a binary AUROC / AUPRC claim) and averaged labels."""
    classes = tuple(ev.data.classes)
    return registry.Scoring(
        classes, registry.positive_index(ev.upstream["claim"].inputs, classes), tuple(present)
    )


def _paired(ev: Evaluation, best: str, ref: str, present: list[int], metric: str) -> tuple[dict, dict, dict]:
    """best − ref on `metric` and on accuracy (paired bootstrap over the unit), and McNemar's test."""
    import numpy as np

    from claimcheck.engine.stats import metrics, uncertainty

    pa, pb = ev.fitted[best].eval_pred[ev.mask], ev.fitted[ref].eval_pred[ev.mask]
    boot = uncertainty.Bootstrap(
        n=ev.inputs.bootstrap_resamples,
        seed=ev.inputs.bootstrap_seed,
        classes=ev.data.classes,
        labels=present,
    )
    # AUROC / AUPRC do not decompose into per-unit sums: the registry recomputes them per resample
    entry = registry.by_key(metric)
    yi = metrics.encode(ev.y, ev.data.classes)
    rows = (yi, np.asarray(pa, dtype=np.float64), np.asarray(pb, dtype=np.float64), ev.units)
    diff = registry.paired_difference(entry, rows, boot, _scoring(ev, present))
    diff["metric"] = metric
    if entry.interval == "resampled":
        diff["method"] += " (per-resample recomputation; " + (
            "the claim's positive class)"
            if _scoring(ev, present).positive >= 0
            else "macro over classes defined in each resample)"
        )
    diff["unit"] = ev.data.unit_kind
    acc_diff = uncertainty.unit_rule(
        uncertainty.paired_bootstrap_diff("accuracy", ev.y, pa, pb, ev.units, boot)
    )
    acc_diff["unit"] = ev.data.unit_kind
    return (
        diff,
        acc_diff,
        uncertainty.mcnemar(metrics.argmax_pred(pa) == yi, metrics.argmax_pred(pb) == yi, ev.units),
    )


def _against_ceiling(ev: Evaluation, acc: float, measured: dict[str, Any]) -> tuple[bool, str]:
    """Compare the best learner's accuracy with the label-noise ceiling; (suspect, sentence)."""
    ceiling, ceiling_from = _noise_ceiling(ev.upstream)
    measured["noise_ceiling_source"] = ceiling_from
    if ceiling is None:
        measured["ceiling_comparison"] = "not_run"
        return False, "; label-noise ceiling not measured"
    gap = ceiling - acc
    measured.update(noise_ceiling=ceiling, accuracy=acc, gap_to_ceiling=gap)
    if gap < -0.01:
        measured["ceiling_comparison"] = "above_ceiling"
        return True, (
            f"; accuracy {acc:.4f} exceeds the label-noise ceiling {ceiling:.4f} — suspect leakage "
            "or a ceiling measured on too few duplicated inputs"
        )
    measured["ceiling_comparison"] = "below_ceiling"
    if ceiling < 1.0:
        ev.notes.append(
            Note(
                tag="limitation",
                text=(
                    f"Contradictory labels on identical inputs cap accuracy at about {ceiling:.4f} "
                    f"({ceiling_from}); no model trained on these labels can be expected to exceed it."
                ),
            )
        )
    return False, f"; accuracy {acc:.4f} vs label-noise ceiling {ceiling:.4f} (gap {gap:.4f})"


def _learnability_check(ev: Evaluation, reports: dict[str, Any], best: str, present: list[int]) -> Check:
    inputs, data, fitted = ev.inputs, ev.data, ev.fitted
    ref = (
        inputs.trivial_reference
        if inputs.trivial_reference in fitted
        else next((n for n in fitted if n in CLASS_TRIVIAL), "")
    )
    if not best or not ref:
        return not_run(
            "baseline.learnability", "needs one trivial and one conventional learner", coverage=ev.coverage
        )
    entry = registry.by_key(ev.metric)
    boot_metric = ev.metric if entry and entry.interval in ("sums", "resampled") else "macro_f1"
    diff, acc_diff, test = _paired(ev, best, ref, present, boot_metric)
    lower = registry.lower_is_better(boot_metric)
    better = "lo" in diff and ((diff["hi"] < 0) if lower else (diff["lo"] > 0))
    measured: dict[str, Any] = {
        "learner": best,
        "reference": ref,
        "metric": boot_metric,
        "difference": diff,
        "accuracy_difference": acc_diff,
        "mcnemar": test,
        "beats_trivial": better,
        "selected_on": _where(data),
    }
    verdict = (
        f"{best} {'beats' if better else 'does not clearly beat'} {ref} on {boot_metric} by "
        f"{diff['estimate']:+.4f} [{diff.get('lo', float('nan')):+.4f}, {diff.get('hi', float('nan')):+.4f}] "
        f"({diff['resamples']} {data.unit_kind} resamples, {diff['units']} units); "
        f"McNemar p={test['p_value']:.3g}"
    )
    suspect, sentence = _against_ceiling(ev, reports[best]["accuracy"], measured)
    verdict += sentence
    if data.mode == "holdout" and fitted[best].trials:
        verdict += "; C was selected on dev, so the dev figure of the chosen C is optimistic"
    return Check(
        id="baseline.learnability",
        status="pass" if better and not suspect else "warn",
        summary=verdict,
        coverage=ev.coverage,
        measured=measured,
        why="Learnable means the conventional learner beats the trivial one with an interval over the independent "
        "unit that excludes zero; weak or contradictory labels are a limit, reported, not hidden.",
        playbook=PB_LEARN,
    )
