"""A scikit-learn candidate (claim.fine_tuning = false): its pinned spec, its fit, its identity and
reload parity, and — for a numeric target — the regression comparison on the locked test.

The contract stage pins the spec (`spec`: learner, estimator class, parameters and their digest,
seed, fitting rows, baseline settings, library versions); dispatch launches no job; the artifact
stage rebuilds the estimator from the same settings, checks it is the pinned one (`identity`), fits
it on the contracted rows under the native-thread cap, checks a pickle round trip predicts the same
(`parity`) and compares it on the locked test with the same arms, paired intervals and verdict as a
fine-tuned candidate. Classification goes through engine/artifact/quality.py; a numeric target
(`task == "regression"`) through `regression_comparison` here, with engine/stats/metrics.py
`regression_report` metrics and the metric registry's direction.
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass
from typing import Any

from claimcheck.engine import threads
from claimcheck.engine.artifact.common import PB_IDENTITY, PB_PARITY, PB_REPORT, band
from claimcheck.engine.baseline import learners
from claimcheck.engine.evidence import Check, digest_of
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.shapes import artifact as shapes
from claimcheck.engine.stats import registry

VERSIONED = ("scikit-learn", "numpy", "scipy", "polars", "threadpoolctl")
CANDIDATE_NOTE = "no job: the scikit-learn candidate is fitted in the artifact stage under the contract"


def versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for pkg in VERSIONED:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def _plain(value: Any) -> Any:
    """A parameter as TOML can hold it: scalars as written (non-finite floats and None as text),
    lists of scalars as lists, anything else (an estimator, a dtype) by its class path."""
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if value is None:
        return "None"
    if isinstance(value, list | tuple) and all(isinstance(v, bool | int | float | str) for v in value):
        return [_plain(v) for v in value]
    cls = value if isinstance(value, type) else type(value)
    return f"{cls.__module__}.{cls.__qualname__}"


def estimator_params(model: Any) -> tuple[str, dict[str, Any]]:
    """The final estimator's class path and every parameter of the (pipeline) model, made plain."""
    final = model.steps[-1][1] if hasattr(model, "steps") else model
    cls = type(final)
    params = {k: _plain(v) for k, v in sorted(model.get_params(deep=True).items())}
    return f"{cls.__module__}.{cls.__qualname__}", params


@dataclass
class Planned:
    """The candidate as the baseline settings build it, before any fit."""

    data: Any  # claimcheck.engine.baseline.learners.Data
    model: Any  # the unfitted estimator
    estimator: str
    params: dict[str, Any]


def plan(learner: str, c_value: float, settings: Any, data: Any) -> Planned:
    if data.task == "multilabel":
        from claimcheck.engine.baseline.multilabel import make_multilabel

        model = make_multilabel(learner, data, settings, c_value)
    else:
        model = learners.make_model(learner, data, settings, c_value)
    estimator, params = estimator_params(model)
    return Planned(data, model, estimator, params)


def fit_frame(data: Any, fit_rows: str) -> Any:
    """The rows the candidate is fitted on, exactly as contracted: the train split alone ("train"),
    or train + dev ("train_dev"). In K-fold mode the baseline's fitting rows pool train + dev, so
    "train" takes the train split's rows alone."""
    import polars as pl

    if fit_rows == "train_dev" and data.mode == "holdout" and data.eval.height:
        return pl.concat([data.fit, data.eval], how="diagonal_relaxed").sort("row_id")
    if fit_rows == "train" and data.mode != "holdout" and data.train is not None:
        return data.train
    return data.fit


def fit(planned: Planned, learner: str, fit_rows: str) -> Any:
    frame = fit_frame(planned.data, fit_rows)
    with threads.capped():
        learners.fit_model(
            planned.model, learners.features(learner, frame, planned.data), frame, planned.data
        )
    return planned.model


def predictor(model: Any, learner: str, data: Any) -> Any:
    """predict(frame) -> an (n, K) probability matrix, or an (n, 1) column of values (regression)."""

    def fn(frame: Any) -> Any:
        with threads.capped():  # the stage's cap when called inside it
            out = learners.predict(model, learners.features(learner, frame, data), data)
        return out.reshape(-1, 1) if out.ndim == 1 else out

    return fn


def identity(spec: Any, planned: Planned) -> Check:
    """The rebuilt estimator is the pinned one: class, parameter digest and library versions."""
    now = versions()
    problems = []
    if planned.estimator != spec.estimator:
        problems.append(f"estimator {planned.estimator} is not the contracted {spec.estimator}")
    digest = digest_of(planned.params)
    if digest != spec.params_sha256:
        changed = sorted(
            k for k in set(spec.params) | set(planned.params) if spec.params.get(k) != planned.params.get(k)
        )
        problems.append(f"parameters differ from the contract: {', '.join(changed[:6])}")
    moved = {k: f"{spec.versions.get(k)} -> {v}" for k, v in now.items() if spec.versions.get(k) != v}
    if moved:
        problems.append(
            "library versions changed since the contract: " + ", ".join(f"{k} {v}" for k, v in moved.items())
        )
    return Check(
        id="artifact.identity",
        status="fail" if problems else "pass",
        summary=(
            f"{spec.learner}: {spec.estimator.rsplit('.', 1)[-1]} rebuilt with the contracted parameters "
            f"(sha256 {digest[7:19]}…) and library versions"
            if not problems
            else "; ".join(problems)
        ),
        measured=shapes.Identity(
            path="contract.effective.sklearn",
            candidate_kind="sklearn",
            estimator=planned.estimator,
            params_sha256=digest,
            versions=now,
            problems=problems,
        ),
        why="The candidate must be the estimator the contract pinned, built by the same library versions.",
        playbook=PB_IDENTITY,
    )


def parity(model: Any, learner: str, data: Any, tolerance: float) -> Check:
    """A pickle round trip (how a fitted scikit-learn model is saved and served) predicts the same."""
    import numpy as np

    rows = data.eval if data.eval.height else data.fit
    rows = rows.slice(0, min(rows.height, 500))
    # An in-memory round trip of the model fitted just now: nothing is read from the session folder
    # (the artifact stage refits the candidate; it never unpickles a file).
    reloaded = pickle.loads(pickle.dumps(model))
    a = predictor(model, learner, data)(rows)
    b = predictor(reloaded, learner, data)(rows)
    diff = float(np.max(np.abs(a - b))) if rows.height else 0.0
    if data.task == "multilabel":  # rows whose label set at 0.5 differs
        mismatches = int(((a >= 0.5) != (b >= 0.5)).any(axis=1).sum())
    elif a.shape[1] > 1:
        mismatches = int((a.argmax(axis=1) != b.argmax(axis=1)).sum())
    else:
        mismatches = int((np.abs(a - b) > tolerance).sum())
    ok = diff <= tolerance and mismatches == 0
    return Check(
        id="artifact.reload_parity",
        status="pass" if ok else "fail",
        summary=(
            f"pickle round trip: {rows.height} rows, {mismatches} prediction mismatches, "
            f"max |Δ| {diff:.2e} (tolerance {tolerance})"
        ),
        coverage=f"the first {rows.height} evaluated rows of the baseline's data",
        measured=shapes.ReloadParity(
            rows=rows.height,
            compared=rows.height,
            prediction_mismatches=mismatches,
            max_abs_proba_diff=diff,
            tolerance=tolerance,
            inference_mode="pickle round trip in process (predict_proba / predict)",
            keys_ok=True,
        ),
        why="The fitted model, saved and loaded back, must predict what it predicted before saving.",
        playbook=PB_PARITY,
    )


# ---------------------------------------------------------------- a numeric target


@dataclass
class RegressionScored:
    """Every arm's locked-test values and what they are judged against (a numeric target)."""

    preds: dict[str, Any]  # arm -> {"proba": (n, 1) values, "ok": mask, ...}
    y: Any  # float target per test row
    units: Any
    unit_kind: str
    metric: str  # mae | rmse | r2
    resamples: int
    seed: int
    coverage: str
    test: Any = None  # the locked-test rows (for the slice columns)
    slice_columns: tuple[str, ...] = ()
    # Sample weight per test row when the claim's metric is weighted, else None (the comparison's
    # values and paired intervals read them; slices stay unweighted).
    weights: Any = None


def regression_comparison(sc: RegressionScored) -> Check:
    """candidate − comparator paired bootstrap over the independent unit, for a regression metric."""
    import numpy as np

    from claimcheck.engine.stats import metrics, uncertainty

    arms = list(sc.preds)
    shared = np.isfinite(sc.y) & np.logical_and.reduce([sc.preds[a]["ok"] for a in arms])
    if not shared.any():
        return not_run("artifact.comparison", "no test row was scored by every arm")
    ys = sc.y[shared]
    us = sc.units[shared] if sc.units is not None else None
    vals = {a: np.asarray(sc.preds[a]["proba"][shared][:, 0], dtype=np.float64) for a in arms}
    ws = None if sc.weights is None else sc.weights[shared]
    if ws is None:
        values = {a: float(metrics.regression_report(ys, vals[a]).get(sc.metric, math.nan)) for a in arms}
    else:
        weighted = registry.Scoring(weights=ws)
        values = {a: registry.get(sc.metric).value(ys, vals[a], weighted) for a in arms}
    lower = registry.lower_is_better(sc.metric)
    boot = uncertainty.Bootstrap(n=sc.resamples, seed=sc.seed, weights=ws)
    diffs = {  # the session's one interval rule: too few units, no interval (uncertainty.unit_rule)
        c: uncertainty.unit_rule(
            uncertainty.paired_bootstrap_diff(sc.metric, ys, vals["candidate"], vals[c], us, boot),
            sc.unit_kind,
        )
        for c in arms
        if c != "candidate"
    }
    better = {c: bool("lo" in d and ((d["hi"] < 0) if lower else (d["lo"] > 0))) for c, d in diffs.items()}
    return Check(
        id="artifact.comparison",
        status="pass" if diffs and all(better.values()) else "warn",
        summary=f"{sc.metric}{'' if ws is None else ' (weighted by sample_weight)'}: "
        + ", ".join(f"{a} {v:.4f}" for a, v in values.items())
        + "; "
        + "; ".join(f"candidate − {c}: {d['estimate']:+.4f} {band(d)}" for c, d in diffs.items()),
        coverage=f"{int(shared.sum())} test rows scored by every arm"
        + ("" if sc.coverage == "full" else f" ({sc.coverage})"),
        measured=shapes.Comparison(
            metric=sc.metric,
            values=values,
            differences={c: {k: v for k, v in d.items() if v is not None} for c, d in diffs.items()},
            candidate_better=better,
            unit=sc.unit_kind,
            shared_rows=int(shared.sum()),
        ),
        why=f"Paired {sc.resamples}-resample bootstrap over {sc.unit_kind}s; {sc.metric} is "
        + ("lower" if lower else "higher")
        + " is better.",
        playbook=PB_REPORT,
    )


MIN_SLICE_ROWS = 5  # a slice with fewer rows is left out (as for classes: engine/artifact/quality.py)


def regression_slices(sc: RegressionScored) -> Check:
    """Per slice of the test rows (each value of each slice column): the metric per arm, and
    candidate − comparator paired intervals over the slice's units under the one interval rule."""
    import numpy as np

    from claimcheck.engine.pipeline.context import StageInputError
    from claimcheck.engine.stats import metrics, uncertainty

    if not sc.slice_columns:
        return not_run("artifact.slices", "no slice columns chosen (inputs.slice_columns)")
    arms = list(sc.preds)
    shared = np.isfinite(sc.y) & np.logical_and.reduce([sc.preds[a]["ok"] for a in arms])
    vals = {a: np.asarray(sc.preds[a]["proba"][:, 0], dtype=np.float64) for a in arms}
    boot = uncertainty.Bootstrap(n=sc.resamples, seed=sc.seed)
    table: dict[str, Any] = {}
    intervals: dict[str, Any] = {}
    regressions = []
    small: dict[str, int] = {}  # slices left out for fewer than MIN_SLICE_ROWS rows: their rows
    lower = registry.lower_is_better(sc.metric)
    for col in sc.slice_columns:
        if col not in sc.test.columns:
            raise StageInputError(
                f"slice column {col!r} is not in the test rows; columns: {', '.join(sc.test.columns)}"
            )
        column = np.asarray([str(v) for v in sc.test[col].to_list()], dtype=object)
        for v in sorted(set(column[shared].tolist())):
            m = shared & (column == v)
            key = f"{col}={v}"
            if m.sum() < MIN_SLICE_ROWS:
                small[key] = int(m.sum())
                continue
            us = sc.units[m] if sc.units is not None else None
            entry: dict[str, Any] = {
                a: float(metrics.regression_report(sc.y[m], vals[a][m]).get(sc.metric, math.nan))
                for a in arms
            }
            entry["rows"] = int(m.sum())
            table[key] = entry
            intervals[key] = {
                c: uncertainty.unit_rule(
                    uncertainty.paired_bootstrap_diff(
                        sc.metric, sc.y[m], vals["candidate"][m], vals[c][m], us, boot
                    ),
                    sc.unit_kind,
                )
                for c in arms
                if c != "candidate"
            }
            for c in (a for a in arms if a != "candidate"):
                if (entry["candidate"] > entry[c]) if lower else (entry["candidate"] < entry[c]):
                    regressions.append({"slice": key, "versus": c, "rows": entry["rows"]})
    left_out = (
        f"; {len(small)} slice(s) left out with fewer than {MIN_SLICE_ROWS} test rows "
        f"(at most {max(small.values())})"
        if small
        else ""
    )
    if not table:
        return not_run(
            "artifact.slices",
            f"no slice of {', '.join(sc.slice_columns)} has {MIN_SLICE_ROWS} or more scored test rows "
            f"({len(small)} slice(s), at most {max(small.values(), default=0)} rows each): per-slice "
            f"{sc.metric} is refused; a larger test split or a coarser slice column would measure it",
            coverage=f"test rows scored by every arm, in slices of at least {MIN_SLICE_ROWS} rows",
        )
    drawn = sum("lo" in d for by in intervals.values() for d in by.values())
    return Check(
        id="artifact.slices",
        status="warn" if regressions else "pass",
        summary=f"{len(table)} slices; {len(regressions)} where the candidate's {sc.metric} is worse than a "
        f"comparator's; {drawn} of {sum(len(by) for by in intervals.values())} slice intervals drawn "
        f"(the others refused: too few {sc.unit_kind} units){left_out}",
        coverage=f"test rows scored by every arm, in slices of at least {MIN_SLICE_ROWS} rows",
        measured=shapes.Slices(
            metric=sc.metric,
            slices=table,
            regressions=[shapes.SliceRegression(**r) for r in regressions],
            intervals={
                k: {c: {x: y for x, y in d.items() if y is not None} for c, d in by.items()}
                for k, by in intervals.items()
            },
        ),
        why=f"Per-slice {sc.metric} per arm; candidate − comparator paired bootstrap over the slice's "
        f"{sc.unit_kind}s, refused below {uncertainty.MIN_UNITS} units (one interval rule).",
        playbook=PB_REPORT,
    )
