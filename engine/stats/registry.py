"""The metric registry: every metric a claim may name, and what each stage needs to know of it.

One typed table (`METRICS`): per metric the task kinds and target types it is computed for, its
direction, what it needs (probabilities, a threshold, a positive class, a query id, k), how it is
computed for an arm on the locked test (`compute`), how its paired interval over the independent unit
is drawn (`interval`), whether the training job tracks it on dev, and — when it is not computed at all
— why (`refusal`). The claim stage refuses what the table cannot compute for the claim's task kind and
target type; the baseline, the job's dev tracking, the artifact comparison and the report read the
direction, the report key and the compute function from here. No other list of metric names exists.

Importing this module never loads numpy: the compute functions import what they use when called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

TaskKind = Literal["text_classification", "causal_lm_sft", "tabular", "retrieval"]
TASK_KINDS: tuple[str, ...] = ("text_classification", "causal_lm_sft", "tabular", "retrieval")
# What the claim's target is: classes, a number, or a set of labels per row (multi_label). "" in a claim means "derive it" (target_type below).
TARGET_TYPES = ("categorical", "numeric", "multi_label")
# The training job's own dev figure for generation (mean token loss): tracked, never claimed.
DEV_LOSS = "dev_loss"


@dataclass(frozen=True)
class Scoring:
    """What a class metric reads beside the labels and probabilities: the class order, the positive
    class of a binary claim (its index; -1 = none named), and the labels a macro average runs over
    (None: the classes present in the rows scored)."""

    classes: tuple[str, ...] = ()
    positive: int = -1
    labels: tuple[int, ...] | None = None
    # Per-row sample weights of the rows scored (a claim with metric_weighting = "sample_weight");
    # None: unweighted. Read by a `weightable` metric only.
    weights: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class Metric:
    """One metric: where it applies, which way is better, what it needs and how it is computed."""

    name: str
    task_kinds: tuple[str, ...]  # claim task kinds it is computed for (empty: none; see refusal)
    target_types: tuple[str, ...]  # categorical / numeric ("text" for generated answers)
    lower_is_better: bool = False
    needs_proba: bool = False  # scored from probabilities, not the arg-max decision
    needs_threshold: bool = False  # needs a decision threshold (an operating point)
    needs_positive_class: bool = False  # a binary claim must name its positive class
    needs_query: bool = False  # needs a query id column (ranking)
    needs_k: bool = False  # needs a cut-off k (ranking)
    # f(y, pred, scoring) -> float for an arm's rows (class indices and (n, K) probabilities, or
    # numbers); None where another module computes it (generation: engine/artifact/sft.py).
    compute: Callable[[Any, Any, Scoring], float] | None = None
    # How the paired candidate − comparator interval resamples the independent unit: "sums"
    # (per-row sufficient statistics, engine/stats/uncertainty.py), "resampled" (the metric recomputed
    # on each unit resample), "" (not computed here).
    interval: Literal["sums", "resampled", ""] = ""
    dev_trackable: bool = False  # the training job can track it on dev (and select a checkpoint by it)
    # Computed with per-row sample weights (scikit-learn's sample_weight) when the claim says
    # metric_weighting = "sample_weight": the per-row statistics are weighted, and so is every resample.
    weightable: bool = False
    # Computed for an ordinal target only (claim target_type = "ordinal": class_order is an order).
    ordinal_only: bool = False
    report_key: str = ""  # its key in metrics.classification_report / regression_report ("" = name)
    hf_name: tuple[str, dict[str, str]] = ("", {})  # Hugging Face model-index type and args
    refusal: str = ""  # why no stage computes it ("" = computed)
    description: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return self.report_key or self.name

    def value(self, y: Any, pred: Any, scoring: Scoring = Scoring()) -> float:
        """The metric of one arm on the given rows."""
        if self.compute is None:
            raise ValueError(f"{self.name} is not computed from labels and predictions here")
        return float(self.compute(y, pred, scoring))

    def better(self, a: float, b: float) -> bool:
        """a is strictly better than b in this metric's direction."""
        return a < b if self.lower_is_better else a > b


# ---------------------------------------------------------------- compute functions


def _labels(y: Any, scoring: Scoring) -> list[int]:
    import numpy as np

    if scoring.labels is not None:
        return list(scoring.labels)
    return sorted(set(np.asarray(y, dtype=np.int64).tolist()))


def _sums(name: str) -> Callable[[Any, Any, Scoring], float]:
    """A metric written as per-row sufficient statistics (engine/stats/uncertainty.py)."""

    def compute(y: Any, pred: Any, scoring: Scoring) -> float:
        import numpy as np

        from claimcheck.engine.stats import uncertainty

        if np.ndim(y) == 2:  # a multi-label target: (n, L) 0/1 labels and decisions or scores
            from claimcheck.engine.stats import multilabel

            return multilabel.value(name, y, pred)
        if name in REGRESSION:
            stat = uncertainty.regression_statistic(name)
            yy, pp = np.asarray(y, dtype=np.float64), np.asarray(pred, dtype=np.float64).reshape(-1)
        else:
            stat = uncertainty.classification_statistic(name, scoring.classes, _labels(y, scoring))
            yy, pp = np.asarray(y, dtype=np.int64), np.asarray(pred, dtype=np.float64)
        s = uncertainty.weighted_rows(stat.rows(yy, pp), scoring.weights)
        return float(stat.finish(s.sum(axis=0, keepdims=True))[0])

    compute.__name__ = name
    return compute


def _ranking(name: str) -> Callable[[Any, Any, Scoring], float]:
    """AUROC / AUPRC: of the named positive class for a binary claim, else macro one-vs-rest."""

    def compute(y: Any, pred: Any, scoring: Scoring) -> float:
        import numpy as np

        from claimcheck.engine.stats import metrics

        yy, p = np.asarray(y, dtype=np.int64), np.asarray(pred, dtype=np.float64)
        if scoring.positive >= 0:
            return metrics.binary_ranking(name, yy == scoring.positive, p[:, scoring.positive])
        return metrics.macro_auroc(yy, p) if name == "auroc" else metrics.macro_auprc(yy, p)

    compute.__name__ = name
    return compute


REGRESSION = ("mae", "rmse", "r2")
_CLASS_TASKS = ("text_classification", "tabular")


def _class(name: str, targets: tuple[str, ...] = ("categorical",), **kw: Any) -> Metric:
    return Metric(
        name,
        _CLASS_TASKS,
        targets,
        compute=_sums(name),
        interval="sums",
        dev_trackable=True,
        weightable=True,
        **kw,
    )


def _ranked(name: str, hf: str, what: str) -> Metric:
    return Metric(
        name,
        _CLASS_TASKS,
        ("categorical",),
        needs_proba=True,
        needs_positive_class=True,
        compute=_ranking(name),
        interval="resampled",
        dev_trackable=True,
        report_key=f"macro_{name}",
        hf_name=(hf, {}),
        description=what,
    )


def _regression(name: str, lower: bool) -> Metric:
    return Metric(
        name,
        ("tabular",),
        ("numeric",),
        lower_is_better=lower,
        compute=_sums(name),
        interval="sums",
        weightable=True,
        hf_name=(name, {}),
    )


def _ordinal(name: str, lower: bool, what: str) -> Metric:
    return Metric(
        name,
        _CLASS_TASKS,
        ("categorical",),
        lower_is_better=lower,
        compute=_sums(name),
        interval="sums",
        weightable=True,
        ordinal_only=True,
        description=what,
    )


def _multi(name: str, hf: tuple[str, dict[str, str]]) -> Metric:
    """A multi-label metric (engine/stats/multilabel.py): scored from per-label 0/1 decisions; a
    fine-tuning job tracks it on dev with every label decided at 0.5 (engine/training/evaluate.py)."""
    return Metric(
        name,
        _CLASS_TASKS,
        ("multi_label",),
        compute=_sums(name),
        interval="sums",
        dev_trackable=True,
        hf_name=hf,
    )


def _retrieval(name: str, what: str) -> Metric:
    """A ranking metric of a retrieval claim: per query over the corpus, the mean over queries, its
    interval resampling queries (engine/stats/ranking.py computes it; the target is the relevance grade)."""
    return Metric(
        name,
        ("retrieval",),
        ("categorical",),
        needs_query=True,
        needs_k=name != "mrr",
        description=what,
    )


def _generation(name: str) -> Metric:
    return Metric(name, ("causal_lm_sft",), ("text",), interval="sums", hf_name=(name, {}))


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        _class("accuracy", hf_name=("accuracy", {})),
        _class("balanced_accuracy", hf_name=("balanced_accuracy", {})),
        _class("macro_f1", ("categorical", "multi_label"), hf_name=("f1", {"average": "macro"})),
        _class("weighted_f1", hf_name=("f1", {"average": "weighted"})),
        _ranked("auroc", "roc_auc", "area under the ROC curve"),
        _ranked("auprc", "average_precision", "average precision (area under the PR curve)"),
        _class("log_loss", lower_is_better=True, needs_proba=True, hf_name=("log_loss", {})),
        _class("brier", lower_is_better=True, needs_proba=True, hf_name=("brier_score", {})),
        _regression("mae", True),
        _regression("rmse", True),
        _regression("r2", False),
        _generation("exact_match"),
        _generation("token_f1"),
        _retrieval("ndcg_at_k", "nDCG of the first ranking_k documents, mean over queries"),
        _retrieval(
            "recall_at_k", "relevant documents in the first ranking_k over the relevant, mean over queries"
        ),
        _retrieval("mrr", "reciprocal rank of the first relevant document, mean over queries"),
        _ordinal(
            "quadratic_weighted_kappa", False, "Cohen's kappa with quadratic weights over the class order"
        ),
        _ordinal("mae_rank", True, "mean absolute difference of ranks in the class order"),
        _multi("micro_f1", ("f1", {"average": "micro"})),
        _multi("subset_accuracy", ("accuracy", {})),
    )
}
# The training job's generation dev figure: lower is better; not a claim metric.
_DEV_LOSS = Metric(
    DEV_LOSS, (), ("text",), lower_is_better=True, refusal="the training job's dev loss, not a claim metric"
)

# The trivial predictor each metric is judged against when the claim or baseline names none: the
# constant that minimises it (median for absolute error, mean for squared error and R²); for classes,
# the train class shares for a metric scored from probabilities, else the majority class.
TRIVIAL_BY_METRIC = {"mae": "median", "rmse": "mean", "r2": "mean"}
# An ordinal target's trivial predictor: the median class of train in the class order.
MEDIAN_CLASS = "median_class"
ORDINAL = "ordinal"


def trivial_for(name: str) -> str:
    """The trivial predictor named for metric `name`: mean / median (numbers), prior / most_frequent (classes)."""
    m = get(name)
    if m.ordinal_only:
        return MEDIAN_CLASS
    if name in TRIVIAL_BY_METRIC:
        return TRIVIAL_BY_METRIC[name]
    return "prior" if m.needs_proba else "most_frequent"


# The metric a claim without a stated primary metric is judged in, per target type.
DEFAULTS = {"categorical": "macro_f1", "numeric": "mae", "text": "exact_match", "multi_label": "micro_f1"}


def get(name: str) -> Metric:
    """The registry's entry for `name` (the job's dev_loss included); KeyError naming the choices."""
    if name == DEV_LOSS:
        return _DEV_LOSS
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a metric claimcheck knows ({', '.join(METRICS)})") from None


def by_key(key: str) -> Metric | None:
    """The entry whose name or report key (metrics.classification_report's `macro_auroc`) is `key`."""
    if key == DEV_LOSS:
        return _DEV_LOSS
    return METRICS.get(key) or next((m for m in METRICS.values() if m.report_key == key), None)


def lower_is_better(name: str) -> bool:
    """Whether a smaller value of `name` (a name or a report key) is better; False for one the
    registry does not hold."""
    m = by_key(name)
    return bool(m and m.lower_is_better)


def names() -> list[str]:
    """Every metric name the registry holds, those it refuses included."""
    return list(METRICS)


def claimable() -> list[str]:
    """The metrics some task kind and target type can be judged in (the claim form's suggestions)."""
    return [n for n, m in METRICS.items() if m.task_kinds and not m.refusal]


def computed_for(task_kind: str, kind: str) -> list[str]:
    """The metrics computed for a task kind and target type (`kind` as target_type returns it, or
    "ordinal": the categorical metrics and the ordinal ones)."""
    wanted = "text" if task_kind == "causal_lm_sft" else ("categorical" if kind == ORDINAL else kind)
    return [
        n
        for n, m in METRICS.items()
        if task_kind in m.task_kinds and wanted in m.target_types and (kind == ORDINAL or not m.ordinal_only)
    ]


def dev_metric(name: str) -> tuple[str, str]:
    """The metric the training job tracks on dev for a claim metric, and a note when it differs."""
    m = METRICS.get(name)
    if m is not None and m.dev_trackable:
        return name, ""
    return "macro_f1", f"{name} is not tracked during training; macro_f1 is"


def target_type(claim: Mapping[str, Any]) -> str:
    """The claim's target type: its `target_type` when stated; otherwise categorical, except a tabular
    claim whose primary metric is a regression metric (how claims written before the field said it)."""
    stated = str(claim.get("target_type") or "")
    if stated == ORDINAL:  # ordered classes: a categorical target whose class_order is an order
        return "categorical"
    if stated:
        return stated
    if claim.get("task_kind") == "tabular" and claim.get("primary_metric") in REGRESSION:
        return "numeric"
    return "categorical"


def is_ordinal(claim: Mapping[str, Any]) -> bool:
    """The claim's classes are ordered (target_type = "ordinal"; class_order is the order)."""
    return str(claim.get("target_type") or "") == ORDINAL


def positive_index(claim: Mapping[str, Any], classes: Sequence[str]) -> int:
    """The index of the claim's positive class in `classes` for a metric that needs one on a binary
    target; -1 otherwise (more than two classes: macro one-vs-rest)."""
    m = METRICS.get(str(claim.get("primary_metric") or ""))
    pos = str(claim.get("positive_class") or "")
    if m is None or not m.needs_positive_class or len(classes) != 2 or pos not in classes:
        return -1
    return list(classes).index(pos)


def refusal(claim: Mapping[str, Any], metric: str) -> str:
    """Why a claim cannot be judged in `metric` ("" when it can): unknown, not computed at all, not
    computed for its task kind and target type, or a binary class metric without its positive class."""
    task = str(claim.get("task_kind") or "text_classification")
    kind = ORDINAL if is_ordinal(claim) and task != "causal_lm_sft" else target_type(claim)
    if metric not in METRICS:
        return f"'{metric}' is not a metric claimcheck computes; choose one of {', '.join(computed_for(task, kind))}"
    m = METRICS[metric]
    if kind == "multi_label" and task not in _CLASS_TASKS:
        return (
            f"no metric is computed for a {task} claim on a multi_label target; a multi-label target is "
            "judged with scikit-learn one-vs-rest learners (a tabular claim) or a fine-tuned text "
            "classifier's sigmoid head (a text_classification claim)"
        )
    if not computed_for(task, kind):
        return f"no metric is computed for a {task} claim on a {kind} target; a numeric target is a tabular claim"
    if m.refusal:
        return f"'{metric}' {m.refusal}; choose one of {', '.join(computed_for(task, kind))}"
    if metric not in computed_for(task, kind):
        what = "generated text" if task == "causal_lm_sft" else f"a {kind} target"
        hint = " (a regression metric)" if kind == "numeric" else ""
        hint = " (an ordinal metric: set target_type = 'ordinal')" if m.ordinal_only else hint
        return (
            f"'{metric}' is not computed for a {task} claim on {what}{hint}; "
            f"choose one of {', '.join(computed_for(task, kind))}"
        )
    return _positive_class_problem(claim, m) or weighting_problem(claim, m)


def weighting_problem(claim: Mapping[str, Any], m: Metric) -> str:
    """Why a claim's metric_weighting cannot be honoured for `m` ("" when it can)."""
    if str(claim.get("metric_weighting") or "unweighted") != "sample_weight" or m.weightable:
        return ""
    return (
        f"metric_weighting = 'sample_weight' is not computed for {m.name}; choose one of "
        f"{', '.join(n for n, x in METRICS.items() if x.weightable)} or leave the metric unweighted"
    )


def _positive_class_problem(claim: Mapping[str, Any], m: Metric) -> str:
    classes = [str(c) for c in claim.get("class_order") or []]
    pos = str(claim.get("positive_class") or "")
    if not m.needs_positive_class:
        needing = [n for n, x in METRICS.items() if x.needs_positive_class]
        return (
            f"positive_class is read by {', '.join(needing)} only; leave it empty for {m.name}" if pos else ""
        )
    if len(classes) == 2 and not pos:
        return f"a binary {m.name} claim names its positive class: set positive_class to one of {classes}"
    if pos and classes and pos not in classes:
        return f"positive_class '{pos}' is not one of the class_order {classes}"
    if pos and len(classes) > 2:
        return (
            f"positive_class applies to a binary claim; with {len(classes)} classes {m.name} is "
            "macro one-vs-rest: leave positive_class empty"
        )
    return ""


def _resampled(m: Metric, scoring: Scoring) -> Callable[[Any, Any], float]:
    def fn(yy: Any, pp: Any) -> float:
        return m.value(yy, pp, scoring)

    fn.__name__ = m.name
    return fn


def _stat(m: Metric, y: Any, scoring: Scoring) -> Any:
    """What the bootstrap sums or recomputes for `m`: a multi-label (2-D) target's statistic
    (engine/stats/multilabel.py), the metric's name for per-row sums, else the metric itself."""
    import numpy as np

    if np.ndim(y) == 2:
        from claimcheck.engine.stats import multilabel

        return multilabel.statistic(m.name)
    return m.name if m.interval == "sums" else _resampled(m, scoring)


def interval(m: Metric, rows: tuple[Any, Any, Any], boot: Any, scoring: Scoring) -> dict[str, Any]:
    """One arm's bootstrap interval of `m` over the independent unit, `rows` = (y, predictions, unit
    per row or None); drawn as `paired_difference` draws its differences."""
    from claimcheck.engine.stats import uncertainty

    y, pred, units = rows
    if m.interval not in ("sums", "resampled"):
        raise ValueError(f"{m.name} has no interval here")
    stat = _stat(m, y, scoring)
    boot = _weighted(boot, m, scoring)
    return uncertainty.unit_rule(uncertainty.bootstrap_ci(stat, y, pred, units, boot))


def paired_difference(
    m: Metric, rows: tuple[Any, Any, Any, Any], boot: Any, scoring: Scoring
) -> dict[str, Any]:
    """candidate − comparator in `m` on the same rows, `rows` = (y, candidate's predictions, the
    comparator's, independent unit per row or None): a paired bootstrap over the units
    (engine/stats/uncertainty.py), from summed per-row statistics where the metric decomposes,
    else the metric recomputed on every resample (a resample where it is undefined is counted)."""
    from claimcheck.engine.stats import uncertainty

    y, a, b, units = rows
    if m.compute is None:
        raise ValueError(f"{m.name} is compared by engine/artifact/sft.py, not from labels and predictions")
    if m.interval not in ("sums", "resampled"):
        raise ValueError(f"{m.name} has no paired interval here")
    stat = _stat(m, y, scoring)
    boot = _weighted(boot, m, scoring)
    # the session's one interval rule (too few independent units: no interval), as the baseline's
    return uncertainty.unit_rule(uncertainty.paired_bootstrap_diff(stat, y, a, b, units, boot))


def _weighted(boot: Any, m: Metric, scoring: Scoring) -> Any:
    """The bootstrap with the scoring's sample weights (a weightable metric only)."""
    import dataclasses

    if scoring.weights is None:
        return boot
    if not m.weightable:
        raise ValueError(f"{m.name} is not computed with sample weights")
    return dataclasses.replace(boot, weights=scoring.weights)
