"""The baseline stage for a multi-label target (claim target_type = "multi_label").

Each row's label set is a 0/1 row over the claim's labels (engine/data/labelsets.py). Trivial
learners: `prior` (every row scored with each label's train prevalence, so a label is predicted
where it is held by half the train rows or more) and `most_frequent` (the most frequent train label
set, for every row). Conventional learners: one-vs-rest logistic regression (scikit-learn's
OneVsRestClassifier: one sigmoid per label) over TF-IDF of the text columns (`tfidf_logreg`) or over
the tabular inputs (`logreg`). All are fitted on train and measured on dev at the default decision
threshold 0.5 (per-label thresholds are chosen on calibration in the artifact stage), with unit
bootstrap intervals and the paired interval of the best conventional learner over the best trivial
one, as for single-label targets. K-fold is not built for a multi-label target: it is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claimcheck.engine import threads
from claimcheck.engine.baseline.evaluation import PB_LEARN, PB_RARE, PB_TRIVIAL, _coverage, unit_facts
from claimcheck.engine.baseline.learners import Data, Fitted, make_model
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.stats import multilabel as ml

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

TRIVIAL = ("prior", "most_frequent")
CONVENTIONAL = ("tfidf_logreg", "logreg")
DEFAULT_LEARNERS = ("prior", "most_frequent", "tfidf_logreg")


def labels_of(frame: pl.DataFrame, data: Data) -> np.ndarray:
    """The (n, L) 0/1 matrix of the rows' label sets over the claim's labels (data.classes)."""
    from claimcheck.engine.data import labelsets

    return labelsets.indicator(frame.get_column("target"), data.classes)


def refuse_kfold(data: Data) -> None:
    if data.mode != "holdout":
        raise StageInputError(
            'K-fold is not built for a multi-label target; set the baseline\'s cv = "off" and give the '
            "split a dev fraction"
        )


def make_multilabel(name: str, data: Data, inputs: Any, c_value: float) -> Any:
    """An unfitted one-vs-rest pipeline: the single-label learner's features, one logistic regression per label."""
    from sklearn.multiclass import OneVsRestClassifier

    model = make_model(name, data, inputs, c_value)
    step, est = model.steps[-1]
    model.steps[-1] = (step, OneVsRestClassifier(est))
    return model


def scores(model: Any, x: Any, width: int) -> np.ndarray:
    """(n, L) per-label probabilities of a fitted one-vs-rest model."""
    import numpy as np

    out = np.asarray(model.predict_proba(x), dtype=np.float64)
    return out.reshape(-1, width)


def trivial_scores(name: str, train_y: np.ndarray, n: int) -> np.ndarray:
    """A trivial learner's (n, L) scores: label prevalences (prior) or the most frequent label set."""
    import numpy as np

    if name == "prior":
        prior = train_y.mean(axis=0) if train_y.shape[0] else np.zeros(train_y.shape[1])
        return np.tile(prior.astype(np.float64), (n, 1))
    sets, counts = np.unique(train_y, axis=0, return_counts=True)
    top = sets[int(np.argmax(counts))] if len(counts) else np.zeros(train_y.shape[1])
    return np.tile(top.astype(np.float64), (n, 1))


def describe_trivial(name: str, train_y: np.ndarray, labels: list[str]) -> str:
    top = trivial_scores(name, train_y, 1)[0]
    if name == "prior":
        return (
            "each label's train prevalence ("
            + ", ".join(f"{lab} {p:.2f}" for lab, p in zip(labels, top, strict=True))
            + ")"
        )
    chosen = [lab for lab, v in zip(labels, top, strict=True) if v >= 0.5]
    return f"the most frequent train label set: {{{', '.join(chosen)}}}"


def fit_conventional(name: str, data: Data, inputs: Any, metric: str) -> Fitted:
    """Fit on train (C chosen on dev by the primary metric when a grid is given); score dev and calibration."""
    import time

    from claimcheck.engine.baseline.learners import features

    t0 = time.perf_counter()
    width = len(data.classes)
    y_fit, y_dev = labels_of(data.fit, data), labels_of(data.eval, data)
    trials = []
    chosen = float(inputs.C)
    if inputs.C_grid:
        best = None
        for c in inputs.C_grid:
            model = make_multilabel(name, data, inputs, float(c))
            with threads.capped():
                model.fit(features(name, data.fit, data), y_fit)
                s = ml.value(metric, y_dev, scores(model, features(name, data.eval, data), width))
            trials.append({"C": float(c), "score": s})
            if best is None or s > best[0] + 1e-12:
                best = (s, float(c))
        chosen = best[1] if best else chosen
    model = make_multilabel(name, data, inputs, chosen)
    with threads.capped():
        model.fit(features(name, data.fit, data), y_fit)
        ev = scores(model, features(name, data.eval, data), width)
        cal = scores(model, features(name, data.cal, data), width) if data.cal.height else None
    return Fitted(name, ev, cal, chosen, trials, time.perf_counter() - t0)


def fit_trivial(name: str, data: Data) -> Fitted:
    import time

    t0 = time.perf_counter()
    train_y = labels_of(data.fit, data)
    cal = trivial_scores(name, train_y, data.cal.height) if data.cal.height else None
    return Fitted(
        name, trivial_scores(name, train_y, data.eval.height), cal, None, [], time.perf_counter() - t0
    )


def run_learners(learners: list[str], data: Data, inputs: Any, metric: str, ctx: Any) -> dict[str, Fitted]:
    refuse_kfold(data)
    bad = [x for x in learners if x not in TRIVIAL + CONVENTIONAL]
    if bad:
        raise StageInputError(
            f"learners {bad} do not fit a multi-label target; choose from {', '.join(TRIVIAL + CONVENTIONAL)}"
        )
    fitted = {}
    for i, name in enumerate(learners):
        ctx.check_cancelled()
        ctx.progress(0.1 + 0.6 * i / len(learners), f"fitting {name}")
        fitted[name] = (
            fit_trivial(name, data) if name in TRIVIAL else fit_conventional(name, data, inputs, metric)
        )
    return fitted


# ---------------------------------------------------------------- checks


def _report(y: np.ndarray, pred: np.ndarray, units: np.ndarray, inputs: Any, f: Fitted) -> dict[str, Any]:
    from claimcheck.engine.stats import uncertainty

    boot = uncertainty.Bootstrap(n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed)
    out: dict[str, Any] = {"n": int(y.shape[0]), "intervals": {}}
    for m in ml.METRICS:
        out[m] = ml.value(m, y, pred)
        out["intervals"][m] = uncertainty.unit_rule(
            uncertainty.bootstrap_ci(ml.statistic(m), y, pred, units, boot)
        )
    if f.c_value is not None:
        out["C"] = f.c_value
    if f.trials:
        out["trials"] = f.trials
    return out


def checks(data: Data, fitted: dict[str, Fitted], inputs: Any, metric: str) -> list[Check]:
    """baseline.trivial, baseline.conventional, baseline.learnability and baseline.per_label."""
    import numpy as np

    y = labels_of(data.eval, data)
    mask = np.ones(data.eval.height, dtype=bool)
    units = np.asarray(data.units)
    cov = _coverage(data, mask)
    reports = {n: _report(y, f.eval_pred, units, inputs, f) for n, f in fitted.items()}
    triv = {n: r for n, r in reports.items() if n in TRIVIAL}
    conv = {n: r for n, r in reports.items() if n in CONVENTIONAL}
    train_y = labels_of(data.fit, data)
    shown = "; ".join(f"{n}: {describe_trivial(n, train_y, data.classes)}" for n in triv)
    out = [
        Check(
            id="baseline.trivial",
            status="info",
            summary=", ".join(f"{n} {metric} {r[metric]:.4f}" for n, r in triv.items())
            + f" on dev ({shown})",
            coverage=cov,
            measured={"learners": triv, "primary_metric": metric},
            why="A multi-label model must beat predicting each label's prevalence and the most frequent label set.",
            playbook=PB_TRIVIAL,
        ),
        Check(
            id="baseline.conventional",
            status="info",
            summary=", ".join(f"{n} {metric} {r[metric]:.4f}" for n, r in conv.items())
            + " on dev (one-vs-rest, threshold 0.5 per label)",
            coverage=cov,
            measured={
                "learners": conv,
                "primary_metric": metric,
                "fitted_on": "train",
                "measured_on": "dev",
                "mode": data.mode,
                **unit_facts(data, mask),
            },
            why="A conventional one-vs-rest learner is what a fine-tuned or larger model must beat.",
            playbook=PB_TRIVIAL,
        ),
    ]
    out.append(learnability((y, units), fitted, (triv, conv), inputs, metric, cov))
    out.append(per_label(y, fitted, data.classes, cov))
    return out


def learnability(
    rows: tuple[Any, Any],
    fitted: dict[str, Fitted],
    reports: tuple[dict[str, Any], dict[str, Any]],
    inputs: Any,
    metric: str,
    cov: str,
) -> Check:
    """baseline.learnability: the best conventional learner − the best trivial one in the primary
    metric on dev, a paired interval over the independent unit (`rows` = (labels, unit per row))."""
    from claimcheck.engine.pipeline.checks import not_run
    from claimcheck.engine.stats import uncertainty

    (y, units), (triv, conv) = rows, reports
    if not (triv and conv):
        return not_run(
            "baseline.learnability",
            "not run: it compares a conventional learner with a trivial one; the baseline's learners "
            f"name {'no conventional' if triv else 'no trivial'} learner",
        )
    best_c = max(conv, key=lambda n: conv[n][metric])
    best_t = max(triv, key=lambda n: triv[n][metric])
    boot = uncertainty.Bootstrap(n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed)
    diff = uncertainty.unit_rule(
        uncertainty.paired_bootstrap_diff(
            ml.statistic(metric), y, fitted[best_c].eval_pred, fitted[best_t].eval_pred, units, boot
        )
    )
    beats = bool(diff.get("lo") is not None and diff["lo"] > 0)
    return Check(
        id="baseline.learnability",
        status="pass" if beats else "warn",
        summary=f"{best_c} − {best_t} in {metric} on dev: {diff['estimate']:+.4f}"
        + (
            f" [{diff['lo']:+.4f}, {diff['hi']:+.4f}]"
            if "lo" in diff
            else f" ({diff.get('refused', 'no interval')})"
        ),
        coverage=cov,
        measured={
            "learner": best_c,
            "reference": best_t,
            "difference": diff,
            "beats_trivial": beats,
            "metric": metric,
            "selected_on": "dev",
        },
        why="The paired interval over the independent unit says whether the inputs carry the labels at all.",
        playbook=PB_LEARN,
    )


def per_label(y: np.ndarray, fitted: dict[str, Fitted], labels: list[str], cov: str) -> Check:
    """baseline.per_label: each label's dev support and every learner's precision / recall / F1 at 0.5."""
    figures = {n: ml.per_label(y, f.eval_pred, labels) for n, f in fitted.items()}
    support = {lab: int(y[:, j].sum()) for j, lab in enumerate(labels)}
    conv = [n for n in fitted if n in CONVENTIONAL]
    weakest = {}
    for n in conv:
        lab = min(labels, key=lambda x: figures[n][x]["f1"])
        weakest[n] = {"label": lab, "f1": figures[n][lab]["f1"], "support": support[lab]}
    absent = [lab for lab, s in support.items() if s == 0]
    never = {n: [lab for lab in labels if figures[n][lab]["predicted"] == 0] for n in conv}
    never = {n: v for n, v in never.items() if v}
    status = "warn" if absent or never else "info"
    parts = ["dev support: " + ", ".join(f"{lab} {s}" for lab, s in support.items())]
    parts += [
        f"{n}'s weakest label {w['label']} (F1 {w['f1']:.3f}, {w['support']} rows)"
        for n, w in weakest.items()
    ]
    if absent:
        parts.append(f"no dev rows: {', '.join(absent)}")
    parts += [f"{n} never predicts {', '.join(v)}" for n, v in never.items()]
    return Check(
        id="baseline.per_label",
        status=status,
        summary="; ".join(parts),
        coverage=cov,
        measured={
            "support": support,
            "learners": figures,
            "weakest": weakest,
            "labels_absent": absent,
            "never_predicted": never,
        },
        why="A micro average hides rare labels: each label's support and F1 say which decisions the model really makes.",
        playbook=PB_RARE,
    )
