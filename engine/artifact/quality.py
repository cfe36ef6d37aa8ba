"""The quality comparison on the rows every arm scored: the primary metric per arm with paired
bootstrap differences over the independent unit and McNemar's test, per-class F1, slices, and
calibrated figures (fitted on the calibration split only)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from claimcheck.engine.artifact.common import PB_CAL, PB_REPORT, band
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.shapes import artifact as shapes


@dataclass
class Scored:
    """Every arm's locked-test predictions and what they are judged against."""

    inputs: Any  # the artifact stage's Inputs
    preds: dict[str, Any]  # arm -> {"proba", "ok", "errors", "cal_proba", "cal_ok"}
    y: Any  # class index per test row (-1: a label outside the class order)
    y_cal: Any  # the same for the calibration rows
    units: Any  # independent unit per test row, or None (rows)
    unit_kind: str
    classes: list[str]
    metric: str
    test: Any  # the test rows (for slice columns)
    coverage: str
    positive: int = -1  # the claim's positive class (index) of a binary AUROC / AUPRC claim
    # Sample weight per test row when the claim's metric is weighted (metric_weighting =
    # "sample_weight"), else None; the comparison's metric and paired intervals read them.
    weights: Any = None
    weight_column: str = ""
    subgroups: list[str] = field(default_factory=list)  # the source's subgroup_columns

    def scoring(self, labels: list[int] | None = None) -> Any:
        from claimcheck.engine.stats.registry import Scoring

        return Scoring(tuple(self.classes), self.positive, None if labels is None else tuple(labels))

    def weighting(self) -> str:
        """How the comparison's metric is weighted, in words ("" when unweighted)."""
        if self.weights is None:
            return ""
        return (
            f"weighted by '{self.weight_column}' (sample_weight; every resample weighted the same way; "
            "McNemar, per-class, slice and calibration figures unweighted)"
        )


def _paired(sc: Scored, shared: Any) -> tuple[dict[str, float], dict[str, dict], dict[str, dict]]:
    """The metric per arm, candidate − arm paired bootstrap differences, and McNemar per comparator
    (the metric and its differences weighted when the claim's metric is)."""
    import dataclasses

    from claimcheck.engine.stats import registry, uncertainty

    ys = sc.y[shared]
    us = sc.units[shared] if sc.units is not None else None
    labels = sorted(set(ys.tolist()))
    boot = uncertainty.Bootstrap(
        n=sc.inputs.bootstrap_resamples, seed=sc.inputs.seed, classes=sc.classes, labels=labels
    )
    m, scoring = registry.get(sc.metric), sc.scoring(labels)
    if sc.weights is not None:
        scoring = dataclasses.replace(scoring, weights=sc.weights[shared])
    proba = {a: _renorm(p["proba"][shared]) for a, p in sc.preds.items()}
    raw = {a: m.value(ys, proba[a], scoring) for a in proba}
    diffs, mcn = {}, {}
    for comp in (a for a in proba if a != "candidate"):
        diffs[comp] = registry.paired_difference(m, (ys, proba["candidate"], proba[comp], us), boot, scoring)
        right = {a: sc.preds[a]["proba"][shared].argmax(axis=1) == ys for a in ("candidate", comp)}
        mcn[comp] = uncertainty.mcnemar(right["candidate"], right[comp], us)
    return raw, diffs, mcn


def quality(sc: Scored) -> list[Check]:
    import numpy as np

    from claimcheck.engine.stats import metrics, registry

    arms = list(sc.preds)
    shared = (sc.y >= 0) & np.logical_and.reduce([sc.preds[a]["ok"] for a in arms])
    n_shared = int(shared.sum())
    cov = f"{n_shared} test rows scored by every arm" + ("" if sc.coverage == "full" else f" ({sc.coverage})")
    if n_shared == 0:
        return [not_run("artifact.comparison", "no test row was scored by every arm")]
    ys = sc.y[shared]
    raw, diffs, mcn = _paired(sc, shared)
    lower = registry.lower_is_better(sc.metric)
    better = {c: bool("lo" in d and ((d["hi"] < 0) if lower else (d["lo"] > 0))) for c, d in diffs.items()}
    parts = [f"{a} {raw[a]:.4f}" for a in arms]
    dtext = [f"candidate − {c}: {d['estimate']:+.4f} {band(d)}" for c, d in diffs.items()]
    comparison = Check(
        id="artifact.comparison",
        status="pass" if diffs and all(better.values()) else "warn",
        summary=f"{sc.metric} (raw{', ' + sc.weighting() if sc.weights is not None else ''}): "
        + ", ".join(parts)
        + "; "
        + "; ".join(dtext),
        coverage=cov,
        measured=shapes.Comparison(
            metric=sc.metric,
            values=raw,
            differences={c: _clean(d) for c, d in diffs.items()},
            mcnemar={c: _clean(m) for c, m in mcn.items()},
            candidate_better=better,
            unit=sc.unit_kind,
            shared_rows=n_shared,
        ),
        why=f"Paired {sc.inputs.bootstrap_resamples}-resample bootstrap over {sc.unit_kind}s: every arm sees the same resamples."
        + (f" The metric is {sc.weighting()}." if sc.weights is not None else ""),
        playbook=PB_REPORT,
    )
    reports = {
        a: metrics.classification_report(ys, _renorm(sc.preds[a]["proba"][shared]), sc.classes) for a in arms
    }
    from claimcheck.engine.artifact.subgroups import subgroups

    return [
        comparison,
        _per_class(reports, sc.classes),
        _slices(sc, shared, ys),
        _calibrated(sc, shared, ys),
        subgroups(sc, shared),
    ]


def _renorm(p: Any) -> Any:
    import numpy as np

    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, None)
    return p / p.sum(axis=1, keepdims=True)


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (float(v) if isinstance(v, float) else v) for k, v in d.items() if v is not None}


def _per_class(reports: dict[str, Any], classes: list[str]) -> Check:
    table = {
        a: {
            r["class"]: {k: r[k] for k in ("support", "precision", "recall", "f1") if k in r}
            for r in rep["per_class"]
        }
        for a, rep in reports.items()
    }
    regressions = []
    for comp in (a for a in reports if a != "candidate"):
        for c in classes:
            a, b = table["candidate"].get(c, {}), table[comp].get(c, {})
            if "f1" in a and "f1" in b and a["f1"] < b["f1"]:
                regressions.append(
                    {
                        "class": c,
                        "versus": comp,
                        "candidate_f1": a["f1"],
                        "comparator_f1": b["f1"],
                        "support": a.get("support", 0),
                    }
                )
    return Check(
        id="artifact.per_class",
        status="warn" if regressions else "pass",
        summary=(
            f"{len(regressions)} per-class F1 regressions: "
            + ", ".join(f"{r['class']} vs {r['versus']}" for r in regressions[:6])
            if regressions
            else "no class where the candidate's F1 is below a comparator's"
        ),
        measured={"per_class": table, "regressions": regressions},
        why="An average can hide a class the candidate gets worse at — often the rare one.",
        playbook=PB_REPORT,
    )


def _slices(sc: Scored, shared: Any, ys: Any) -> Check:
    import numpy as np

    from claimcheck.engine.stats import registry

    inputs, preds, test, metric = sc.inputs, sc.preds, sc.test, sc.metric
    m_of = registry.get(metric)
    if not inputs.slice_columns:
        return not_run("artifact.slices", "no slice columns chosen (inputs.slice_columns)")
    table: dict[str, Any] = {}
    regressions = []
    for col in inputs.slice_columns:
        if col not in test.columns:
            raise StageInputError(
                f"slice column {col!r} is not in the test rows; columns: {', '.join(test.columns)}"
            )
        vals = np.asarray([str(v) for v in test[col].to_list()], dtype=object)[shared]
        for v in sorted(set(vals.tolist())):
            m = vals == v
            if m.sum() < 5:
                continue
            try:  # a slice without both outcomes has no AUROC: left out, like a slice under 5 rows
                entry = {
                    a: m_of.value(ys[m], _renorm(preds[a]["proba"][shared][m]), sc.scoring()) for a in preds
                }
            except ValueError:
                continue
            entry["rows"] = int(m.sum())
            table[f"{col}={v}"] = entry
            for comp in (a for a in preds if a != "candidate"):
                if m_of.better(entry[comp], entry["candidate"]):
                    regressions.append({"slice": f"{col}={v}", "versus": comp, "rows": int(m.sum())})
    return Check(
        id="artifact.slices",
        status="warn" if regressions else "pass",
        summary=f"{len(table)} slices; {len(regressions)} where the candidate is below a comparator",
        measured={"metric": metric, "slices": table, "regressions": regressions},
        why="Slices with fewer than 5 rows (or where the metric is undefined) are left out; per-slice figures carry no interval.",
        playbook=PB_REPORT,
    )


def _calibrated(sc: Scored, shared: Any, ys: Any) -> Check:
    from claimcheck.engine.stats import calibration, metrics

    inputs, preds, y_cal, classes, metric = sc.inputs, sc.preds, sc.y_cal, sc.classes, sc.metric
    ok_cal = y_cal >= 0
    if ok_cal.sum() < 10 or inputs.calibration == "none":
        return not_run(
            "artifact.calibrated", f"calibration not fitted ({int(ok_cal.sum())} calibration rows)"
        )
    out: dict[str, Any] = {}
    for arm, p in preds.items():
        m = ok_cal & p["cal_ok"]
        cal_p = p["cal_proba"]
        fitted = calibration.fit_calibrator(inputs.calibration, _renorm(cal_p[m]), y_cal[m], seed=inputs.seed)
        test_p = fitted.transform(_renorm(p["proba"][shared]))
        rep_raw = metrics.classification_report(ys, _renorm(p["proba"][shared]), classes)
        rep_cal = metrics.classification_report(ys, _renorm(test_p), classes)
        out[arm] = {
            "params": fitted.params,
            "raw": {k: rep_raw[k] for k in ("log_loss", "brier", "ece") if k in rep_raw},
            "calibrated": {k: rep_cal[k] for k in ("log_loss", "brier", "ece") if k in rep_cal},
            f"calibrated_{metric}": _value_or_nan(metric, ys, _renorm(test_p), sc),
            # Reliability curve (non-empty bins): mean confidence vs accuracy, raw and calibrated.
            "reliability": {
                "bins": inputs.reliability_bins,
                "raw": _reliability(ys, _renorm(p["proba"][shared]), classes, inputs.reliability_bins),
                "calibrated": _reliability(ys, _renorm(test_p), classes, inputs.reliability_bins),
            },
        }
    return Check(
        id="artifact.calibrated",
        status="info",
        summary="; ".join(
            f"{a}: ECE {v['raw']['ece']:.3f} raw → {v['calibrated']['ece']:.3f} calibrated"
            for a, v in out.items()
        )
        or "no arm had calibration predictions",
        coverage=f"{inputs.calibration} fitted on {int(ok_cal.sum())} calibration rows, applied to the test",
        measured={
            "method": inputs.calibration,
            "arms": out,
            # The curve a reader looks at first: the candidate's raw reliability on the test.
            "reliability": {"arm": "candidate", **out["candidate"]["reliability"]["raw"]}
            if "candidate" in out
            else {},
        },
        why="Calibrated and raw results are different figures; calibration is fitted on the calibration split only.",
        playbook=PB_CAL,
    )


def _value_or_nan(metric: str, ys: Any, proba: Any, sc: Scored) -> float:
    from claimcheck.engine.stats import registry

    try:
        return registry.get(metric).value(ys, proba, sc.scoring())
    except ValueError:
        return math.nan


def _reliability(y: Any, proba: Any, classes: list[str], n_bins: int) -> dict[str, list[float]]:
    from claimcheck.engine.stats import metrics

    bins = metrics.calibration_bins(y, proba, n_bins, classes=classes)
    return {
        "confidence": [float(b["confidence"]) for b in bins],
        "accuracy": [float(b["accuracy"]) for b in bins],
        "count": [int(b["count"]) for b in bins],
    }
