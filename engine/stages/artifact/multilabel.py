"""The artifact stage's locked-test comparison for a multi-label target (claim target_type = "multi_label").

Every arm scores each label (the candidate and best_baseline: one-vs-rest probabilities; the trivial
baseline: each label's train prevalence). Every arm's per-label decision thresholds are chosen on the
calibration split by one rule (engine/stats/multilabel.py `choose_thresholds`: best F1 per label),
never on the test; artifact.label_thresholds records them. The comparison is the claim's metric
(micro_f1, macro_f1 or subset_accuracy) with candidate − comparator paired bootstrap intervals over
the independent unit, read by the verdict like a single-label comparison; artifact.per_label gives
each label's F1 per arm with candidate − comparator intervals and names the largest regression.
"""

from __future__ import annotations

from typing import Any

from claimcheck.engine.artifact.common import PB_CAL, PB_REPORT, band
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.shapes import artifact as shapes
from claimcheck.engine.stats import multilabel as ml
from claimcheck.engine.stats import registry


def compare(
    inputs: Any, data: Any, fn: Any, note: str, upstream: dict[str, StageRecord], ctx: StageContext
) -> list[Check]:
    """locked read, arms, coverage, thresholds, comparison, per-label, slices (not built), latency."""
    import numpy as np

    from claimcheck.engine.artifact.arms import arm_counts, arm_predict, latency, locked_read, locked_test
    from claimcheck.engine.artifact.coverage import arms_coverage
    from claimcheck.engine.baseline.multilabel import labels_of, trivial_scores
    from claimcheck.engine.data import splits
    from claimcheck.engine.stages.baseline import run as baseline

    if inputs.slice_columns:
        raise StageInputError(
            "artifact: slice_columns are not built for a multi-label target yet; leave slice_columns empty"
        )
    metric = str(upstream["claim"].inputs.get("primary_metric") or registry.DEFAULTS["multi_label"])
    lt = locked_test(inputs.max_test_rows, inputs.seed, upstream, ctx)
    test = lt.rows
    cal = splits.rows("calibration", upstream, ctx, caller="artifact", labels=True)
    fns, notes = {"candidate": fn}, {"candidate": note}
    if "best_baseline" in inputs.comparators:
        try:
            best, name = baseline.refit_best(upstream, ctx)
            fns["best_baseline"], notes["best_baseline"] = (
                best,
                f"{name}, refitted on its fitting rows with the baseline stage's settings",
            )
        except StageInputError as exc:
            notes["best_baseline"] = f"not available: {exc}"
    if "trivial_baseline" in inputs.comparators:
        train_y = labels_of(data.train if data.train is not None else data.fit, data)
        fns["trivial_baseline"] = lambda frame: trivial_scores("prior", train_y, frame.height)
        notes["trivial_baseline"] = "each label's train prevalence as its score (the per-label prior)"
    wanted = list(dict.fromkeys(["candidate", *inputs.comparators]))
    ctx.progress(0.4, "predicting the locked test")
    preds = {a: arm_predict(fns[a], {"test": test, "calibration": cal}) for a in wanted if a in fns}
    y, y_cal = labels_of(test, data), labels_of(cal, data)
    thresholds = {
        a: ml.choose_thresholds(y_cal, p["calibration"]["proba"]) if cal.height else None
        for a, p in preds.items()
    }
    decided = {
        a: ml.decisions(p["test"]["proba"], thresholds[a][0] if thresholds[a] else ml.DEFAULT_THRESHOLD)
        for a, p in preds.items()
    }
    ok = np.logical_and.reduce([p["test"]["ok"] for p in preds.values()])
    test_preds = {a: p["test"] for a, p in preds.items()}
    scored = _Scored(
        y[ok],
        {a: d[ok] for a, d in decided.items()},
        lt.units[ok] if lt.units is not None else None,
        lt.unit_kind,
        inputs,
    )
    return [
        locked_read(lt.reads, lt.total, lt.coverage),
        arm_counts(wanted, test_preds, notes, test.height, np.zeros(test.height), lt.coverage),
        arms_coverage(test, np.ones(test.height, dtype=bool), test_preds, inputs, upstream, lt.coverage),
        label_thresholds(thresholds, data.classes, cal.height),
        comparison(scored, metric),
        per_label(scored, data.classes),
        not_run(
            "artifact.slices",
            "slices are not built for a multi-label target (artifact.per_label has each label)",
        ),
        latency(inputs.latency_examples, fns, test),
    ]


class _Scored:
    """The rows every arm scored: labels, each arm's decisions, the independent unit, the bootstrap."""

    def __init__(self, y: Any, decided: dict[str, Any], units: Any, unit_kind: str, inputs: Any) -> None:
        from claimcheck.engine.stats import uncertainty

        self.y, self.decided, self.units, self.unit_kind = y, decided, units, unit_kind
        self.boot = uncertainty.Bootstrap(n=inputs.bootstrap_resamples, seed=inputs.seed)

    def paired(self, stat: Any, a: str, b: str) -> dict[str, Any]:
        from claimcheck.engine.stats import uncertainty

        d = uncertainty.paired_bootstrap_diff(
            stat, self.y, self.decided[a], self.decided[b], self.units, self.boot
        )
        return uncertainty.unit_rule(d, self.unit_kind)


def label_thresholds(thresholds: dict[str, Any], labels: list[str], cal_rows: int) -> Check:
    """artifact.label_thresholds: each arm's per-label thresholds, chosen on the calibration split."""
    if not cal_rows:
        return Check(
            id="artifact.label_thresholds",
            status="warn",
            summary=f"no calibration rows: every arm decides each label at {ml.DEFAULT_THRESHOLD}",
            measured={"calibration_rows": 0, "default": ml.DEFAULT_THRESHOLD},
            why="Thresholds chosen on the test would flatter every arm; without calibration rows none are chosen.",
            playbook=PB_CAL,
        )
    table = {a: dict(zip(labels, t[0], strict=True)) for a, t in thresholds.items()}
    how = {a: dict(zip(labels, t[1], strict=True)) for a, t in thresholds.items()}
    cand = table.get("candidate", {})
    return Check(
        id="artifact.label_thresholds",
        status="pass",
        summary=f"per-label thresholds chosen on {cal_rows} calibration rows (best F1 per label, grid "
        f"{ml.THRESHOLD_GRID[0]}–{ml.THRESHOLD_GRID[-1]}); candidate: "
        + ", ".join(f"{lab} {t:.2f}" for lab, t in cand.items()),
        measured={
            "calibration_rows": cal_rows,
            "thresholds": table,
            "chosen_by": how,
            "grid": list(ml.THRESHOLD_GRID),
        },
        why="Each label's decision threshold is an operating point: chosen on calibration rows by one rule for every arm, never on the test.",
        playbook=PB_CAL,
    )


def comparison(sc: _Scored, metric: str) -> Check:
    """artifact.comparison in the claim's multi-label metric (shapes.Comparison, read by the verdict)."""
    arms = list(sc.decided)
    if sc.y.shape[0] == 0:
        return not_run("artifact.comparison", "no test row was scored by every arm")
    values = {a: ml.value(metric, sc.y, sc.decided[a]) for a in arms}
    diffs = {c: sc.paired(ml.statistic(metric), "candidate", c) for c in arms if c != "candidate"}
    better = {c: bool("lo" in d and d["lo"] > 0) for c, d in diffs.items()}
    return Check(
        id="artifact.comparison",
        status="pass" if diffs and all(better.values()) else "warn",
        summary=f"{metric}: "
        + ", ".join(f"{a} {v:.4f}" for a, v in values.items())
        + "; "
        + "; ".join(f"candidate − {c}: {d['estimate']:+.4f} {band(d)}" for c, d in diffs.items()),
        coverage=f"{sc.y.shape[0]} test rows scored by every arm, each arm at its calibration thresholds",
        measured=shapes.Comparison(
            metric=metric,
            values=values,
            differences={c: {k: v for k, v in d.items() if v is not None} for c, d in diffs.items()},
            candidate_better=better,
            unit=sc.unit_kind,
            shared_rows=int(sc.y.shape[0]),
        ),
        why=f"Paired {sc.boot.n}-resample bootstrap over {sc.unit_kind}s of per-row label counts; higher is better.",
        playbook=PB_REPORT,
    )


def _label_f1(j: int) -> Any:
    """Label j's F1 as per-row sums (tp, fp, fn) for the paired bootstrap."""
    import numpy as np

    from claimcheck.engine.stats.uncertainty import Statistic

    def rows(y: Any, p: Any) -> Any:
        yy, d = np.asarray(y, dtype=np.float64)[:, j], ml.decisions(p)[:, j]
        return np.stack([yy * d, (1 - yy) * d, yy * (1 - d)], axis=1)

    def fin(t: Any) -> Any:
        den = 2 * t[:, 0] + t[:, 1] + t[:, 2]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, 2 * t[:, 0] / np.where(den > 0, den, 1), 0.0)

    return Statistic(f"f1_label_{j}", rows, fin)


def per_label(sc: _Scored, labels: list[str]) -> Check:
    """artifact.per_label: each label's test support and F1 per arm, candidate − comparator intervals,
    and the largest per-label regression of the candidate named."""
    figures = {a: ml.per_label(sc.y, d, labels) for a, d in sc.decided.items()}
    others = [a for a in sc.decided if a != "candidate"]
    intervals = {
        lab: {
            c: {k: v for k, v in sc.paired(_label_f1(j), "candidate", c).items() if v is not None}
            for c in others
        }
        for j, lab in enumerate(labels)
    }
    drops = [
        (figures["candidate"][lab]["f1"] - figures[c][lab]["f1"], lab, c)
        for lab in labels
        for c in others
        if figures["candidate"][lab]["f1"] < figures[c][lab]["f1"]
    ]
    worst = min(drops) if drops else None
    support = {lab: figures["candidate"][lab]["support"] for lab in labels}
    absent = [lab for lab, s in support.items() if s == 0]
    parts = ["candidate F1 " + ", ".join(f"{lab} {figures['candidate'][lab]['f1']:.3f}" for lab in labels)]
    if worst:
        parts.append(f"largest regression: {worst[1]} vs {worst[2]} ({worst[0]:+.3f} F1)")
    else:
        parts.append("no label where a comparator's F1 is higher")
    if absent:
        parts.append(f"no test rows: {', '.join(absent)}")
    return Check(
        id="artifact.per_label",
        status="warn" if worst or absent else "pass",
        summary="; ".join(parts),
        coverage=f"{sc.y.shape[0]} test rows scored by every arm",
        measured={
            "support": support,
            "arms": figures,
            "differences": intervals,
            "largest_regression": {"label": worst[1], "versus": worst[2], "f1_difference": worst[0]}
            if worst
            else {},
            "labels_without_test_rows": absent,
        },
        why="A pooled metric can rise while one label collapses; each label's F1 with its interval shows which.",
        playbook=PB_REPORT,
    )
