"""Baseline checks for regression (mean / median vs gradient boosting) and free generation (the most
frequent training answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.baseline.evaluation import PB_LEARN, PB_RARE, PB_TRIVIAL, Evaluation, _coverage
from engine.baseline.learners import REG_CONVENTIONAL, REG_TRIVIAL, Data, Fitted
from engine.evidence import Check

if TYPE_CHECKING:
    import numpy as np


def most_frequent_answer(data: Data) -> Fitted:
    import numpy as np

    counts = data.fit.get_column("target").value_counts(sort=True)
    top = counts.sort(["count", "target"], descending=[True, False]).get_column("target")[0]
    return Fitted("most_frequent_answer", np.asarray([top] * data.eval.height, dtype=object), None)


def regression_checks(ev: Evaluation) -> list[Check]:
    from engine import metrics as m
    from engine import uncertainty

    inputs, data, fitted, y, units, mask, metric = (
        ev.inputs,
        ev.data,
        ev.fitted,
        ev.y,
        ev.units,
        ev.mask,
        ev.metric,
    )
    cov = _coverage(data, mask)
    reps = {n: m.regression_report(y, f.eval_pred[mask]) for n, f in fitted.items()}
    for n, f in fitted.items():
        reps[n]["intervals"] = {
            k: uncertainty.bootstrap_ci(
                k, y, f.eval_pred[mask], units, n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed
            )
            | {"unit": data.unit_kind}
            for k in ("mae", "rmse")
        }
    trivial = [n for n in fitted if n in REG_TRIVIAL]
    conv = [n for n in fitted if n in REG_CONVENTIONAL]
    desc = "; ".join(f"{n}: MAE {reps[n]['mae']:.4g}, RMSE {reps[n]['rmse']:.4g}" for n in fitted)
    out = [
        Check(
            id="baseline.trivial",
            status="info",
            summary=desc,
            coverage=cov,
            measured={"learners": {n: reps[n] for n in trivial}},
            why="The floor a model must clear.",
            playbook=PB_TRIVIAL,
        ),
        Check(
            id="baseline.conventional",
            status="info" if conv else "not_run",
            basis="measured" if conv else "not_run",
            summary=desc if conv else "no conventional learner chosen",
            coverage=cov,
            measured={"learners": {n: reps[n] for n in conv}},
            why="Signal in the inputs.",
            playbook=PB_TRIVIAL,
        ),
    ]
    boot = metric if metric in ("mae", "rmse", "r2") else "mae"
    if conv and trivial:
        best = min(conv, key=lambda n: reps[n][boot] if boot != "r2" else -reps[n].get("r2", -1e9))
        ref = inputs.trivial_reference if inputs.trivial_reference in trivial else trivial[0]
        diff = uncertainty.paired_bootstrap_diff(
            boot,
            y,
            fitted[best].eval_pred[mask],
            fitted[ref].eval_pred[mask],
            units,
            n=inputs.bootstrap_resamples,
            seed=inputs.bootstrap_seed,
        )
        better = "lo" in diff and (diff["lo"] > 0 if boot == "r2" else diff["hi"] < 0)
        out.append(
            Check(
                id="baseline.learnability",
                status="pass" if better else "warn",
                coverage=cov,
                summary=f"{best} − {ref} {boot}: {diff['estimate']:+.4g} [{diff.get('lo', 0):+.4g}, "
                f"{diff.get('hi', 0):+.4g}] ({data.unit_kind} bootstrap)",
                measured={"learner": best, "reference": ref, "difference": diff, "beats_trivial": better},
                why="Learnable means the conventional learner beats the trivial one beyond noise.",
                playbook=PB_LEARN,
            )
        )
    na = "not a classification task"
    for cid in ("baseline.per_class", "baseline.calibration", "baseline.operating_point"):
        out.append(
            Check(id=cid, status="not_run", basis="not_run", summary=f"not run: {na}", playbook=PB_RARE)
        )
    return out


def generation_checks(ev: Evaluation) -> list[Check]:
    import numpy as np

    inputs, data, fitted, y, units, mask = ev.inputs, ev.data, ev.fitted, ev.y, ev.units, ev.mask
    from engine import metrics as m
    from engine import uncertainty

    f = fitted["most_frequent_answer"]
    answer = str(f.eval_pred[0]) if len(f.eval_pred) else ""
    em = m.exact_match(list(y), list(f.eval_pred[mask]))

    def em_fn(t: np.ndarray, p: np.ndarray) -> float:
        return float(np.mean(t == p))

    yy = np.asarray([" ".join(str(s).split()).casefold() for s in y], dtype=object)
    pp = np.asarray([" ".join(answer.split()).casefold()] * len(yy), dtype=object)
    ci = uncertainty.bootstrap_ci(
        em_fn, yy, pp, units, n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed
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
        Check(
            id="baseline.conventional",
            status="not_run",
            basis="not_run",
            summary="no conventional learner for free generation; the unchanged base model is the comparator "
            "measured at the artifact stage",
            playbook=PB_TRIVIAL,
        ),
    ]
