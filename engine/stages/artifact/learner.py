"""The artifact stage for a scikit-learn candidate (claim.fine_tuning = false; dispatch launched no job).

The candidate is rebuilt from the contract's pinned spec (engine/stages/contract/learner.py), its
identity checked against the pin, fitted on the contracted rows under the native-thread cap, its
pickle round trip checked, and then compared on the locked test with the same arms table, paired
intervals and verdict as a fine-tuned candidate (engine/stages/artifact/run.py `compare_arms`). A numeric
target is compared with its regression metric (engine/artifact/sklearn_candidate.py).

Playbook: "Verify the artifact and report the evidence".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from claimcheck.engine.artifact import numeric_errors, sklearn_candidate
from claimcheck.engine.artifact.common import PB_OUTCOMES
from claimcheck.engine.data import weights
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.dispatch.checks import checked_effective
from claimcheck.engine.stats import registry


def checks(
    inputs: Any,
    eff: dict[str, Any],
    upstream: dict[str, StageRecord],
    ctx: StageContext,
    compare_arms: Callable,
) -> list[Check]:
    from claimcheck.engine.baseline.learners import load
    from claimcheck.engine.stages.baseline import run as baseline

    spec = checked_effective(eff).sklearn
    if spec is None:
        raise StageInputError(
            "the contract has no scikit-learn candidate: re-run and freeze the contract stage"
        )
    settings = baseline.Inputs.model_validate(spec.baseline_settings)
    ctx.progress(0.05, f"rebuilding the candidate ({spec.learner})")
    data = load(settings, upstream, ctx)
    planned = sklearn_candidate.plan(spec.learner, spec.C, settings, data)
    out = [_fitted_here(spec), sklearn_candidate.identity(spec, planned)]
    ctx.progress(0.15, f"fitting the candidate on {spec.fit_rows.replace('_', ' + ')}")
    model = sklearn_candidate.fit(planned, spec.learner, spec.fit_rows)
    out.append(sklearn_candidate.parity(model, spec.learner, data, inputs.parity_tolerance))
    ctx.check_cancelled()
    fn = sklearn_candidate.predictor(model, spec.learner, data)
    note = f"{spec.learner} refitted under the contract on {sklearn_candidate.fit_frame(data, spec.fit_rows).height} rows ({spec.fit_rows})"
    excluded = _itself(inputs, spec, upstream)
    inputs = inputs.model_copy(update={"comparators": [c for c in inputs.comparators if c not in excluded]})
    if data.task == "regression":
        compared = _regression(inputs, data, fn, note, upstream, ctx)
    elif data.task == "multilabel":
        from claimcheck.engine.stages.artifact import multilabel

        compared = multilabel.compare(inputs, data, fn, note, upstream, ctx)
    else:
        compared = compare_arms(inputs, eff, upstream, ctx, ({"candidate": fn}, {"candidate": note}))[
            "checks"
        ]
    return out + [_with_excluded(c, excluded) for c in compared]


def _itself(inputs: Any, spec: Any, upstream: dict[str, StageRecord]) -> dict[str, str]:
    """The claim's comparators that are the candidate itself: best_baseline when the contracted
    candidate is the baseline stage's best conventional learner. A model is never compared with
    itself; the record says why that arm is absent (docs/checks.md, artifact.comparison)."""
    from claimcheck.engine.stages.baseline import run as baseline

    if "best_baseline" not in inputs.comparators or "baseline" not in upstream:
        return {}
    try:
        best, _ = baseline.best_conventional(upstream)
    except StageInputError:
        return {}
    if best != spec.learner:
        return {}
    return {
        "best_baseline": (
            f"the candidate is the best baseline learner ({best}) refitted under the contract "
            f"({spec.fit_rows.replace('_', ' + ')}); comparing a model with itself measures nothing, "
            "so best_baseline is not an arm"
        )
    }


def _with_excluded(check: Check, excluded: dict[str, str]) -> Check:
    """The arms table and the comparison record the comparators left out as the candidate itself."""
    if not excluded or check.id not in ("artifact.arms", "artifact.comparison") or not check.measured:
        return check
    measured = {**check.measured, "excluded": excluded}
    said = "; ".join(f"{a} not compared: {why}" for a, why in excluded.items())
    return Check.model_validate(
        {**check.model_dump(), "measured": measured, "summary": f"{check.summary}; {said}"}
    )


def _fitted_here(spec: Any) -> Check:
    return Check(
        id="artifact.job_finished",
        status="pass",
        summary=f"no dispatched job: the {spec.learner} candidate is fitted in this stage under the contract",
        measured={"job_state": "finished"},
        why="A finished fit is the first of four outcomes, not evidence of the other three.",
        playbook=PB_OUTCOMES,
    )


def _regression(
    inputs: Any, data: Any, fn: Any, note: str, upstream: dict[str, StageRecord], ctx: StageContext
) -> list[Check]:
    """A numeric target: candidate, trivial (train mean, or median for MAE) and best baseline values."""
    import numpy as np

    from claimcheck.engine.artifact.arms import arm_counts, arm_predict, latency, locked_read, locked_test
    from claimcheck.engine.artifact.coverage import arms_coverage
    from claimcheck.engine.stages.baseline import run as baseline

    metric = str(upstream["claim"].inputs.get("primary_metric") or registry.DEFAULTS["numeric"])
    lt = locked_test(inputs.max_test_rows, inputs.seed, upstream, ctx)
    test, reads, total, coverage, units = lt.rows, lt.reads, lt.total, lt.coverage, lt.units
    y = test["target"].cast(float, strict=False).fill_null(float("nan")).to_numpy()
    fns, notes = {"candidate": fn}, {"candidate": note}
    if "best_baseline" in inputs.comparators:
        try:
            best, name = baseline.refit_best(upstream, ctx)
            fns["best_baseline"] = lambda frame: np.asarray(best(frame)).reshape(-1, 1)
            notes["best_baseline"] = (
                f"{name}, refitted on its fitting rows with the baseline stage's settings"
            )
        except StageInputError as exc:
            notes["best_baseline"] = f"not available: {exc}"
    if "trivial_baseline" in inputs.comparators:
        fns["trivial_baseline"], notes["trivial_baseline"] = _trivial_number(metric, upstream, ctx)
    wanted = list(dict.fromkeys(["candidate", *inputs.comparators]))
    preds = {a: arm_predict(fns[a], {"test": test})["test"] for a in wanted if a in fns}
    sc = sklearn_candidate.RegressionScored(
        preds,
        y,
        units,
        lt.unit_kind,
        metric,
        inputs.bootstrap_resamples,
        inputs.seed,
        coverage,
        test,
        tuple(inputs.slice_columns),
        weights.for_metrics(test, upstream),
    )
    return [
        locked_read(reads, total, coverage),
        arm_counts(wanted, preds, notes, test.height, np.zeros(test.height), coverage),
        arms_coverage(test, np.isfinite(y), preds, inputs, upstream, coverage),
        sklearn_candidate.regression_comparison(sc),
        numeric_errors.errors_check(preds, y, metric, coverage),
        sklearn_candidate.regression_slices(sc),
        latency(inputs.latency_examples, fns, test),
    ]


def _trivial_number(metric: str, upstream: dict[str, StageRecord], ctx: StageContext) -> tuple[Any, str]:
    """The trivial predictor the baseline stage judged learnability against (its recorded reference,
    else the metric registry's for the metric), fitted on the train split's rows only."""
    import numpy as np

    from claimcheck.engine.baseline.other_tasks import trivial_reference
    from claimcheck.engine.data import splits

    learn = upstream["baseline"].check("baseline.learnability") if "baseline" in upstream else None
    named = str(learn.measured.get("reference", "")) if learn is not None else ""
    name = trivial_reference(named, metric, [])
    train = splits.rows("train", upstream, ctx, caller="artifact", labels=True)
    train_y = train["target"].cast(float, strict=False).drop_nulls().to_numpy()
    centre = float(np.median(train_y) if name == "median" else np.mean(train_y))
    return (lambda frame: np.full((frame.height, 1), centre)), (
        f"always {centre:.4g}: the {name} of the train split's {len(train_y)} labelled rows "
        f"(the baseline's trivial reference for {metric})"
    )
