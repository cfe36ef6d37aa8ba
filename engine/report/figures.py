"""Pictures chosen by meaning: each typed shape that has a natural picture says which, and this
module turns the shape into plain figure data. report_svg.py draws the data as SVG for the HTML
report; tui/plots.py draws the same data in the terminal; the Markdown report prints its rows.

Nothing here guesses a layout: a check id without a shape, or a shape without a picture, has no
figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from claimcheck.engine import shapes
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import training as training_shapes


@dataclass
class Heatmap:
    """A matrix of counts (the confusion matrix: rows true, columns predicted)."""

    title: str
    row_labels: list[str]
    col_labels: list[str]
    cells: list[list[float]]

    def rows(self) -> list[tuple[str, str]]:
        return [
            (f"true {r}", ", ".join(f"{c}: {_fmt(v)}" for c, v in zip(self.col_labels, row, strict=False)))
            for r, row in zip(self.row_labels, self.cells, strict=False)
        ]


@dataclass
class Lines:
    """Curves over a shared x axis; optional y = x ideal, vertical marks and a horizontal reference."""

    title: str
    series: dict[str, list[tuple[float, float]]]
    x_label: str = ""
    diagonal: bool = False
    marks: list[float] = field(default_factory=list)
    mark_label: str = ""
    reference: float | None = None
    reference_label: str = ""
    # x values of events drawn under the axis (dev evaluations on a loss curve); not in rows()
    events: list[float] = field(default_factory=list)
    event_label: str = ""

    def rows(self) -> list[tuple[str, str]]:
        out = [(f"{name} @ {_fmt(x)}", _fmt(y)) for name, pts in self.series.items() for x, y in pts]
        if self.reference is not None:
            out.append((self.reference_label or "reference", _fmt(self.reference)))
        if self.marks:
            out.append((self.mark_label or "marked", ", ".join(_fmt(m) for m in self.marks)))
        return out


@dataclass
class Forest:
    """Point estimates with intervals (paired differences); a zero line when the range spans zero."""

    title: str
    items: list[tuple[str, float, float, float]]

    def rows(self) -> list[tuple[str, str]]:
        return [(n, f"{p:+.4f} [{a:+.4f}, {b:+.4f}]") for n, p, a, b in self.items]


@dataclass
class Histogram:
    title: str
    bins: list[tuple[int, int, int]]
    marker: float | None = None
    marker_label: str = ""

    def rows(self) -> list[tuple[str, str]]:
        out = [(f"{lo}-{hi}", str(n)) for lo, hi, n in self.bins]
        if self.marker is not None:
            out.append((self.marker_label or "marker", _fmt(self.marker)))
        return out


@dataclass
class Grouped:
    """One row per category, one bar per group (class shares per split, per-class F1 per arm)."""

    title: str
    groups: dict[str, dict[str, float]]

    def rows(self) -> list[tuple[str, str]]:
        cats: list[str] = []
        for g in self.groups.values():
            cats += [c for c in g if c not in cats]
        return [(c, ", ".join(f"{n}: {_fmt(g[c])}" for n, g in self.groups.items() if c in g)) for c in cats]


Figure = Heatmap | Lines | Forest | Histogram | Grouped


def _fmt(v: float) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return f"{v:.4g}" if isinstance(v, float) else str(v)


# ---------------------------------------------------------------- one function per picture


def _confusion(check_id: str, shape: baseline_shapes.Trivial | baseline_shapes.Conventional) -> list[Figure]:
    out: list[Figure] = []
    for name, rep in (shape.learners or {}).items():
        if rep.confusion and rep.per_class:
            labels = [r.class_ for r in rep.per_class]
            cells = [[float(v) for v in row] for row in rep.confusion]
            out.append(Heatmap(f"{check_id} · confusion matrix of {name}", labels, labels, cells))
    return out


def _reliability(check_id: str, shape: artifact_shapes.Calibrated) -> list[Figure]:
    out: list[Figure] = []
    for arm, fig in shape.arms.items():
        series = {
            kind: list(zip(rel.confidence, rel.accuracy, strict=False))
            for kind, rel in (("raw", fig.reliability.raw), ("calibrated", fig.reliability.calibrated))
        }
        out.append(
            Lines(f"{check_id} · reliability of {arm} (accuracy vs confidence)", series, "confidence", True)
        )
    return out


def _forest_comparison(check_id: str, shape: artifact_shapes.Comparison) -> list[Figure]:
    items = [
        (f"candidate − {arm}", d.estimate, d.lo, d.hi)
        for arm, d in shape.differences.items()
        if d.lo is not None and d.hi is not None
    ]
    return (
        [Forest(f"{check_id} · paired {shape.metric} differences ({shape.unit} bootstrap)", items)]
        if items
        else []
    )


def _forest_learnability(check_id: str, shape: baseline_shapes.Learnability) -> list[Figure]:
    d = shape.difference
    if d.lo is None or d.hi is None:
        return []
    label = f"{shape.learner} − {shape.reference}"
    return [
        Forest(
            f"{check_id} · paired {d.metric} difference ({d.unit} bootstrap)",
            [(label, d.estimate, d.lo, d.hi)],
        )
    ]


def _lengths(check_id: str, shape: training_shapes.PreparedLengths) -> list[Figure]:
    bins = shape.bins()
    if not bins:
        return []
    return [
        Histogram(
            f"{check_id} · prepared token lengths before truncation", bins, shape.max_length, "max_length"
        )
    ]


def _loss(
    check_id: str, shape: training_shapes.LossCurve, marks: list[float], evals: list[float]
) -> list[Figure]:
    pts = [(float(s), v) for s, v in zip(shape.step, shape.loss, strict=False) if math.isfinite(v)]
    return (
        [
            Lines(
                f"{check_id} · training loss per optimizer step",
                {"loss": pts},
                "step",
                marks=marks,
                mark_label="checkpoints",
                events=evals,
                event_label="dev evaluations",
            )
        ]
        if pts
        else []
    )


def _dev(check_id: str, shape: training_shapes.DevMetric, marks: list[float]) -> list[Figure]:
    series = {f"dev {shape.metric}": [(float(s), v) for s, v in zip(shape.step, shape.value, strict=False)]}
    if shape.train_reference_value:
        series[f"train {shape.metric}"] = [
            (float(s), v) for s, v in zip(shape.step, shape.train_reference_value, strict=False)
        ]
    return [
        Lines(
            f"{check_id} · {shape.metric} at each evaluation",
            series,
            "step",
            marks=marks,
            mark_label="checkpoints",
            reference=shape.trivial_value,
            reference_label="trivial baseline",
        )
    ]


def _class_counts(check_id: str, shape: data_shapes.ClassCoverage) -> list[Figure]:
    return [
        Grouped(f"{check_id} · rows per class", {"rows": {k: float(v) for k, v in shape.per_target.items()}})
    ]


def _prevalence(check_id: str, shape: data_shapes.Prevalence) -> list[Figure]:
    groups = {"whole": dict(shape.whole)} | {s: dict(v) for s, v in shape.per_split.items()}
    return [Grouped(f"{check_id} · class share per split", groups)]


def _support(check_id: str, shape: data_shapes.ClassSupport) -> list[Figure]:
    groups = {s: {k: float(n) for k, n in v.items()} for s, v in shape.support.items()}
    return [Grouped(f"{check_id} · rows per class in each split (floor {shape.floor})", groups)]


def _per_class(check_id: str, shape: artifact_shapes.PerClass) -> list[Figure]:
    groups = {arm: {c: f.f1 for c, f in t.items() if f.f1 is not None} for arm, t in shape.per_class.items()}
    return [Grouped(f"{check_id} · F1 per class and arm", groups)]


def _missing(check_id: str, shape: data_shapes.Missingness) -> list[Figure]:
    shares = {k: v for k, v in shape.null_share.items() if v > 0}
    return [Grouped(f"{check_id} · share of nulls per column", {"null share": shares})] if shares else []


_DRAW: dict[type[shapes.Shape], Any] = {
    baseline_shapes.Trivial: _confusion,
    baseline_shapes.Conventional: _confusion,
    baseline_shapes.Learnability: _forest_learnability,
    artifact_shapes.Calibrated: _reliability,
    artifact_shapes.Comparison: _forest_comparison,
    artifact_shapes.PerClass: _per_class,
    training_shapes.PreparedLengths: _lengths,
    data_shapes.ClassCoverage: _class_counts,
    data_shapes.Prevalence: _prevalence,
    data_shapes.ClassSupport: _support,
    data_shapes.Missingness: _missing,
}


def figures_for(check: Any, record: Any = None) -> list[Figure]:
    """The pictures a check's shape calls for; `record` supplies context (checkpoint steps)."""
    cls = shapes.shape_for(check.id)
    if cls is None or not check.measured:
        return []
    shape = shapes.parse(check, cls)
    if cls is training_shapes.LossCurve:
        return _loss(check.id, shape, _checkpoint_steps(record), _eval_steps(record))
    if cls is training_shapes.DevMetric:
        return _dev(check.id, shape, _checkpoint_steps(record))
    draw = _DRAW.get(cls)
    return draw(check.id, shape) if draw else []


def _checkpoint_steps(record: Any) -> list[float]:
    chk = record.check("dispatch.checkpoints") if record is not None else None
    shape = shapes.parse(chk, training_shapes.Checkpoints) if chk is not None else None
    return [float(s) for s in shape.steps] if shape else []


def _eval_steps(record: Any) -> list[float]:
    chk = record.check("dispatch.dev_metric") if record is not None else None
    shape = shapes.parse(chk, training_shapes.DevMetric) if chk is not None else None
    return [float(s) for s in shape.step] if shape else []
