"""Artifact stage: is the saved model the one trained, and is it better on the locked test?

Identity (sha256 of every saved file, tensors, LoRA B norms, reload keys), reload parity in a
fresh process on the retained dev rows, then the final comparison on the locked test — the first
time its labels are read, and the read is recorded. Four outcomes are kept apart: the job
finished, the artifact is verified, the candidate beats its comparators, the claim is met.

Playbook: "Verify the artifact and report the evidence".
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.context import StageContext, StageInputError
from engine.evidence import Check, StageRecord

TITLE = "Artifact"

PB_IDENTITY = "Verify saved model/adapter/head/tokenizer identity and reload behavior on retained inputs."
PB_PARITY = "Check training-serving parity. Weight reload is not proof of optimizer resume or exact stochastic reproducibility. Evaluate in the correct inference mode."
PB_ARMS = (
    "Inspect every arm's requested, scored, failed and missing counts. Provider errors are missing evidence, not zero "
    "quality. Paired metrics use shared valid examples; discuss coverage bias."
)
PB_COMPARE = "Evaluate the selected artifact against frozen comparators."
PB_REPORT = (
    "Report raw and calibrated results separately, including per-class/slice regressions, uncertainty appropriate to "
    "the independent unit, and latency as a separate axis."
)
PB_CAL = (
    "Scores on the data used to fit calibration are in-sample; calibrated final-test scores are distinct."
)
PB_LATENCY = "Performance timing and quality benchmarks are different experiments."
PB_OUTCOMES = (
    "Distinguish preparation, optimization, artifact verification, final comparison and serving readiness. Process "
    "success does not establish model improvement or production safety."
)
PB_BASE = "Match the requested unchanged-base comparator to the exact model identity and inference contract."
ARM_NAMES = ("candidate", "base_model", "best_baseline", "trivial_baseline")


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    comparators: list[str] = Field(default_factory=lambda: ["base_model", "candidate", "best_baseline"])
    bootstrap_resamples: int = Field(default=1000, ge=100, le=100_000)
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    latency_examples: int = Field(default=50, ge=1, le=100_000)
    parity_tolerance: float = Field(default=1e-5, ge=0, le=1)
    calibration: str = "temperature"
    # Columns to slice the test by (e.g. channel); each slice's metric per arm, regressions listed.
    slice_columns: list[str] = Field(default_factory=list)
    # 0 = every test row. A bound makes the comparison a sample, and the coverage says so.
    max_test_rows: int = Field(default=0, ge=0, le=10**9)
    reliability_bins: int = Field(default=10, ge=2, le=1000)

    @field_validator("comparators")
    @classmethod
    def _comparators(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if c not in ARM_NAMES]
        if bad:
            raise ValueError(f"unknown comparator(s) {bad}; choose from {', '.join(ARM_NAMES)}")
        return value


# ---------------------------------------------------------------- run


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    from engine.stages.dispatch import contract_of

    bad = [c for c in inputs.comparators if c not in ARM_NAMES]
    if bad:
        raise StageInputError(f"unknown comparator(s) {bad}; choose from {', '.join(ARM_NAMES)}")
    eff, _ = contract_of(upstream)
    disp = upstream.get("dispatch")
    if disp is None:
        raise StageInputError("the artifact stage needs a frozen dispatch stage")
    if disp.check("dispatch.identity") is None:
        gate = disp.check("dispatch.required_checks")
        raise StageInputError(
            "the dispatch stage launched no job"
            + (f" ({gate.summary})" if gate else "")
            + ": there is no artifact to verify"
        )
    op_id = str(disp.check("dispatch.identity").measured.get("operation_id", ""))
    job_dir = ctx.session_dir / "jobs" / op_id
    final = job_dir / "final"
    checks: list[Check] = [_job_finished(disp)]
    if not final.is_dir():
        checks.append(
            Check(
                id="artifact.identity",
                status="fail",
                summary=f"no artifact at jobs/{op_id}/final",
                measured={"path": f"jobs/{op_id}/final"},
                playbook=PB_IDENTITY,
            )
        )
        checks.append(_outcomes(checks, None, upstream))
        return StageRecord(stage="artifact", inputs=inputs.model_dump(mode="json"), checks=checks)
    ctx.progress(0.05, "artifact identity")
    checks.append(_identity(final, ctx))
    ctx.progress(0.15, "reload parity in a fresh process")
    checks.append(_parity(final, job_dir, ctx, inputs.parity_tolerance))
    ctx.check_cancelled()
    if eff.get("task_kind") != "text_classification":
        checks.append(
            Check(
                id="artifact.comparison",
                status="not_run",
                basis="not_run",
                summary="the locked-test comparison is built for classification; generation is not done yet",
                playbook=PB_COMPARE,
            )
        )
        checks.append(_outcomes(checks, None, upstream))
        return StageRecord(stage="artifact", inputs=inputs.model_dump(mode="json"), checks=checks)
    comparison = compare(inputs, eff, final, upstream, ctx)
    checks.extend(comparison["checks"])
    checks.append(_outcomes(checks, comparison, upstream))
    return StageRecord(stage="artifact", inputs=inputs.model_dump(mode="json"), checks=checks)


def _job_finished(disp: StageRecord) -> Check:
    prog = disp.check("dispatch.progress")
    state = str(prog.measured.get("job_state", "")) if prog else ""
    return Check(
        id="artifact.job_finished",
        status="pass" if state == "finished" else "fail",
        summary=f"the training job {'finished' if state == 'finished' else 'did not finish: ' + (state or 'unknown')}",
        measured={"job_state": state or "unknown"},
        why="A finished job is the first of four outcomes, not evidence of the other three.",
        playbook=PB_OUTCOMES,
    )


def _identity(final: Path, ctx: StageContext) -> Check:
    from engine.training.evaluate import verify_artifact

    v = verify_artifact(final)
    rel = final.relative_to(ctx.session_dir).as_posix()
    m = v.get("manifest", {})
    measured = {
        "path": rel,
        "file_sha256": v.get("file_sha256", {}),
        "files": int(v.get("files", 0)),
        "tensor_count": int(v.get("tensor_count", 0)),
        "tensor_count_recorded": int(v.get("tensor_count_recorded", -1)),
        "tensor_shapes": {k: list(s) for k, s in m.get("tensors", {}).items()},
        "lora_b_matrices": int(v.get("lora_b_matrices", 0)),
        "lora_b_min_norm": float(v.get("lora_b_min_norm", -1.0)),
        "selected_step": int(m.get("selected_step", -1)),
        "checkpoint_selection": str(m.get("checkpoint_selection", "")),
        "problems": list(v["problems"]),
    }
    ok = v["ok"]
    summary = (
        f"{measured['files']} files match their recorded sha256; {measured['tensor_count']} tensors"
        + (
            f"; {measured['lora_b_matrices']} LoRA B matrices, min norm {measured['lora_b_min_norm']:.3g}"
            if measured["lora_b_matrices"]
            else ""
        )
        if ok
        else "; ".join(v["problems"][:3])
    )
    return Check(
        id="artifact.identity",
        status="pass" if ok else "fail",
        summary=summary,
        measured=measured,
        why="A truncated or partial adapter loads silently in some tools; hashes and shapes catch it.",
        playbook=PB_IDENTITY,
    )


def _parity(final: Path, job_dir: Path, ctx: StageContext, tolerance: float) -> Check:
    from engine.training.evaluate import parity_in_fresh_process

    r = parity_in_fresh_process(final, job_dir, ctx.workspace, tolerance)
    if "error" in r:
        return Check(
            id="artifact.reload_parity",
            status="fail",
            summary=f"reload failed: {r['error'][-200:]}",
            measured={"error": r["error"][-400:]},
            playbook=PB_PARITY,
        )
    keys_ok = not r["missing_keys"] and not r["unexpected_keys"]
    ok = r["ok"] and keys_ok
    summary = (
        f"fresh-process reload: {r['compared']} retained dev rows, {r['prediction_mismatches']} prediction "
        f"mismatches, max |Δp| {r['max_abs_proba_diff']:.2e} (tolerance {tolerance}); "
        f"missing keys {len(r['missing_keys'])}, unexpected {len(r['unexpected_keys'])}"
    )
    return Check(
        id="artifact.reload_parity",
        status="pass" if ok else "fail",
        summary=summary,
        coverage=f"dev rows retained at the end of training ({r['rows']})",
        measured={k: v for k, v in r.items() if k != "ok"} | {"keys_ok": keys_ok},
        tolerance={"max_abs_proba_diff": 1e-6},
        why="Predictions recorded at the end of training and after a reload in a new process must agree.",
        playbook=PB_PARITY,
    )


# ---------------------------------------------------------------- the locked-test comparison


def _claim(upstream: dict[str, StageRecord]) -> dict[str, Any]:
    return upstream["claim"].inputs if "claim" in upstream else {}


def _arm_predict(fn: Any, frames: dict[str, Any], batch: int = 64) -> dict[str, Any]:
    """Predict in batches; a failing batch is counted failed (missing evidence), never scored 0."""
    import numpy as np

    out = {}
    for name, frame in frames.items():
        probas, ok_mask, errors = [], [], []
        for start in range(0, frame.height, batch):
            part = frame.slice(start, batch)
            try:
                p = np.asarray(fn(part), dtype=np.float64)
                if p.shape[0] != part.height or not np.isfinite(p).all():
                    raise ValueError(f"{p.shape[0]} rows returned for {part.height}, or non-finite scores")
                probas.append(p)
                ok_mask.extend([True] * part.height)
            except Exception as exc:  # noqa: BLE001 - recorded per arm as failed predictions
                errors.append(f"rows {start}..{start + part.height - 1}: {type(exc).__name__}: {exc}"[:200])
                probas.append(None)
                ok_mask.extend([False] * part.height)
        k = next((p.shape[1] for p in probas if p is not None), 1)
        full = (
            np.vstack(
                [
                    p if p is not None else np.full((min(batch, frame.height - i * batch), k), np.nan)
                    for i, p in enumerate(probas)
                ]
            )
            if probas
            else np.zeros((0, k))
        )
        out[name] = {"proba": full, "ok": np.asarray(ok_mask, dtype=bool), "errors": errors}
    return out


def _torch_arm(model: Any, tok: Any, eff: dict[str, Any], classes: list[str]):
    from engine.training.evaluate import Batcher, predict

    batcher = Batcher(eff, tok, classes, "cpu")

    def fn(frame: Any) -> Any:
        enc = batcher.prepare(frame, with_labels=False)
        return predict(model, enc)["proba"]

    return fn, batcher


def compare(
    inputs: Inputs, eff: dict[str, Any], final: Path, upstream: dict[str, StageRecord], ctx: StageContext
) -> dict[str, Any]:
    import numpy as np
    import torch

    from engine import splits
    from engine.stages import baseline
    from engine.training.evaluate import build_base, load_artifact

    torch.set_num_threads(2)
    classes = [str(c) for c in eff["label_classes"]]
    test = splits.rows("test", upstream, ctx, caller="artifact")
    reads = [dict(r) for r in splits.locked_reads(ctx) if r.get("caller") == "artifact"]
    total_test = test.height
    if inputs.max_test_rows and test.height > inputs.max_test_rows:
        test = test.sample(n=inputs.max_test_rows, seed=inputs.seed, shuffle=False).sort("row_id")
    cal = splits.rows("calibration", upstream, ctx, caller="artifact")
    coverage = "full" if test.height == total_test else f"sample: {test.height} of {total_test} test rows"
    y = np.asarray([classes.index(str(t)) if str(t) in classes else -1 for t in test["target"].to_list()])
    y_cal = np.asarray([classes.index(str(t)) if str(t) in classes else -1 for t in cal["target"].to_list()])
    units = test["family_id"].fill_null(-1).to_numpy() if "family_id" in test.columns else None
    unit_kind = "family" if units is not None else "row"

    arms_wanted = list(dict.fromkeys(["candidate", *inputs.comparators]))
    fns: dict[str, Any] = {}
    notes: dict[str, str] = {}
    ctx.progress(0.3, "loading the candidate and the unchanged base model")
    cand_model, cand_tok, _, _ = load_artifact(final, ctx.workspace)
    fns["candidate"], _ = _torch_arm(cand_model, cand_tok, eff, classes)
    notes["candidate"] = (
        "the saved artifact reloaded (trainable tensors into the contracted model, saved tokenizer)"
    )
    if "base_model" in arms_wanted:
        base_model, base_tok = build_base(eff, ctx.workspace)
        fns["base_model"], _ = _torch_arm(base_model, base_tok, eff, classes)
        notes["base_model"] = (
            "the unchanged base model under the identical template, tokenizer and inference mode; "
            f"its classification head is untrained (seed {eff.get('seed', 0)}), so it is a "
            "chance-level comparator — what 'unchanged base' means for a native decision head"
        )
    if "best_baseline" in arms_wanted:
        try:
            fns["best_baseline"], best = baseline.refit_best(upstream, ctx)
            notes["best_baseline"] = (
                f"{best}, refitted on its fitting rows with the baseline stage's recorded settings"
            )
        except StageInputError as exc:
            notes["best_baseline"] = f"not available: {exc}"
    if "trivial_baseline" in arms_wanted:
        train_y = splits.rows("train", upstream, ctx, caller="artifact", labels=True)["target"].to_list()
        prior = np.bincount(
            [classes.index(str(t)) for t in train_y if str(t) in classes], minlength=len(classes)
        )
        major = np.eye(len(classes))[int(prior.argmax())]
        fns["trivial_baseline"] = lambda frame: np.tile(major, (frame.height, 1))
        notes["trivial_baseline"] = f"always '{classes[int(prior.argmax())]}' (train's majority class)"

    preds: dict[str, dict[str, Any]] = {}
    for i, arm in enumerate(a for a in arms_wanted if a in fns):
        ctx.check_cancelled()
        ctx.progress(0.35 + 0.4 * i / len(fns), f"predicting the locked test: {arm}")
        r = _arm_predict(fns[arm], {"test": test, "calibration": cal})
        preds[arm] = {**r["test"], "cal_proba": r["calibration"]["proba"], "cal_ok": r["calibration"]["ok"]}
    checks = [_locked_read(reads, total_test, coverage)]
    checks.append(_arm_counts(arms_wanted, preds, notes, test.height, y, coverage))
    metric = _primary_metric(upstream)
    checks.extend(_quality(inputs, preds, y, y_cal, units, unit_kind, classes, metric, test, coverage))
    ctx.progress(0.85, "latency")
    checks.append(_latency(inputs, fns, test))
    return {"checks": checks, "metric": metric}


def _primary_metric(upstream: dict[str, StageRecord]) -> str:
    m = str(_claim(upstream).get("primary_metric") or "macro_f1")
    return (
        m
        if m in ("accuracy", "macro_f1", "weighted_f1", "balanced_accuracy", "log_loss", "brier")
        else "macro_f1"
    )


def _locked_read(reads: list[dict[str, Any]], total: int, coverage: str) -> Check:
    return Check(
        id="artifact.locked_test_read",
        status="info",
        summary=f"locked test labels read by the artifact stage ({total} rows); reads logged: {len(reads)}",
        coverage=coverage,
        measured={"test_rows": total, "reads": [{k: v for k, v in r.items() if k != "time"} for r in reads]},
        replay="observation",
        why="Final results must not select recipes, checkpoints or thresholds; the read is recorded.",
        playbook="If a test influenced development, disclose that and obtain a fresh holdout for a new generalization claim.",
    )


def _arm_counts(
    wanted: list[str], preds: dict[str, Any], notes: dict[str, str], n: int, y: Any, coverage: str
) -> Check:
    counts = {}
    for arm in wanted:
        if arm in preds:
            ok = preds[arm]["ok"][:n]
            counts[arm] = {
                "requested": n,
                "scored": int(ok.sum()),
                "failed": int((~ok).sum()),
                "missing": 0,
                "errors": preds[arm]["errors"][:5],
                "what": notes.get(arm, ""),
            }
        else:
            counts[arm] = {
                "requested": n,
                "scored": 0,
                "failed": 0,
                "missing": n,
                "errors": [],
                "what": notes.get(arm, ""),
            }
    unlabeled = int((y < 0).sum())
    incomplete = [a for a, c in counts.items() if c["scored"] < n]
    return Check(
        id="artifact.arms",
        status="warn" if incomplete or unlabeled else "pass",
        summary=", ".join(f"{a}: {c['scored']}/{c['requested']} scored" for a, c in counts.items())
        + (f"; {unlabeled} test rows with a label outside the class order" if unlabeled else ""),
        coverage=coverage,
        measured={"arms": counts, "labels_outside_class_order": unlabeled},
        why="A failed prediction is missing evidence, never a zero score; paired metrics use rows every arm scored.",
        playbook=PB_ARMS,
    )


def _quality(
    inputs: Inputs,
    preds: dict[str, Any],
    y: Any,
    y_cal: Any,
    units: Any,
    unit_kind: str,
    classes: list[str],
    metric: str,
    test: Any,
    coverage: str,
) -> list[Check]:
    import numpy as np

    from engine import metrics as M
    from engine import uncertainty

    arms = list(preds)
    shared = (y >= 0) & np.logical_and.reduce([preds[a]["ok"] for a in arms])
    n_shared = int(shared.sum())
    cov = f"{n_shared} test rows scored by every arm" + ("" if coverage == "full" else f" ({coverage})")
    if n_shared == 0:
        return [
            Check(
                id="artifact.comparison",
                status="not_run",
                basis="not_run",
                summary="no test row was scored by every arm",
                playbook=PB_COMPARE,
            )
        ]
    ys = y[shared]
    us = units[shared] if units is not None else None
    labels = sorted(set(ys.tolist()))
    reports = {a: M.classification_report(ys, _renorm(preds[a]["proba"][shared]), classes) for a in arms}
    raw = {
        a: float(
            uncertainty.bootstrap_ci(
                metric,
                ys,
                _renorm(preds[a]["proba"][shared]),
                us,
                n=inputs.bootstrap_resamples,
                seed=inputs.seed,
                classes=classes,
                labels=labels,
            )["estimate"]
        )
        for a in arms
    }
    out: list[Check] = []
    diffs, mcn = {}, {}
    for comp in (a for a in arms if a != "candidate"):
        d = uncertainty.paired_bootstrap_diff(
            metric,
            ys,
            _renorm(preds["candidate"]["proba"][shared]),
            _renorm(preds[comp]["proba"][shared]),
            us,
            n=inputs.bootstrap_resamples,
            seed=inputs.seed,
            classes=classes,
            labels=labels,
        )
        diffs[comp] = d
        ca = preds["candidate"]["proba"][shared].argmax(axis=1) == ys
        cb = preds[comp]["proba"][shared].argmax(axis=1) == ys
        mcn[comp] = uncertainty.mcnemar(ca, cb)
    lower = metric in ("log_loss", "brier")
    better = {c: bool("lo" in d and ((d["hi"] < 0) if lower else (d["lo"] > 0))) for c, d in diffs.items()}
    parts = [f"{a} {raw[a]:.4f}" for a in arms]
    dtext = [
        f"candidate − {c}: {d['estimate']:+.4f} [{d.get('lo', math.nan):+.4f}, {d.get('hi', math.nan):+.4f}]"
        for c, d in diffs.items()
    ]
    out.append(
        Check(
            id="artifact.comparison",
            status="pass" if diffs and all(better.values()) else "warn",
            summary=f"{metric} (raw): " + ", ".join(parts) + "; " + "; ".join(dtext),
            coverage=cov,
            measured={
                "metric": metric,
                "values": raw,
                "differences": {c: _clean(d) for c, d in diffs.items()},
                "mcnemar": {c: _clean(m) for c, m in mcn.items()},
                "candidate_better": better,
                "unit": unit_kind,
                "shared_rows": n_shared,
            },
            why=f"Paired {inputs.bootstrap_resamples}-resample bootstrap over {unit_kind}s: every arm sees the same resamples.",
            playbook=PB_REPORT,
        )
    )
    out.append(_per_class(reports, classes))
    out.append(_slices(inputs, preds, shared, ys, test, classes, metric))
    out.append(_calibrated(inputs, preds, shared, ys, y_cal, classes, metric))
    return out


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


def _slices(
    inputs: Inputs, preds: dict[str, Any], shared: Any, ys: Any, test: Any, classes: list[str], metric: str
) -> Check:
    import numpy as np

    from engine.training.evaluate import metric_value

    if not inputs.slice_columns:
        return Check(
            id="artifact.slices",
            status="not_run",
            basis="not_run",
            summary="no slice columns chosen (inputs.slice_columns)",
            playbook=PB_REPORT,
        )
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
            entry = {
                a: metric_value(metric, ys[m].tolist(), _renorm(preds[a]["proba"][shared][m]), classes)
                for a in preds
            }
            entry["rows"] = int(m.sum())
            table[f"{col}={v}"] = entry
            for comp in (a for a in preds if a != "candidate"):
                worse = (
                    entry["candidate"] > entry[comp]
                    if metric in ("log_loss", "brier")
                    else entry["candidate"] < entry[comp]
                )
                if worse:
                    regressions.append({"slice": f"{col}={v}", "versus": comp, "rows": int(m.sum())})
    return Check(
        id="artifact.slices",
        status="warn" if regressions else "pass",
        summary=f"{len(table)} slices; {len(regressions)} where the candidate is below a comparator",
        measured={"metric": metric, "slices": table, "regressions": regressions},
        why="Slices with fewer than 5 rows are left out; per-slice figures carry no interval.",
        playbook=PB_REPORT,
    )


def _calibrated(
    inputs: Inputs, preds: dict[str, Any], shared: Any, ys: Any, y_cal: Any, classes: list[str], metric: str
) -> Check:
    import numpy as np

    from engine import calibration
    from engine import metrics as M

    ok_cal = y_cal >= 0
    if ok_cal.sum() < 10 or inputs.calibration == "none":
        return Check(
            id="artifact.calibrated",
            status="not_run",
            basis="not_run",
            summary=f"calibration not fitted ({int(ok_cal.sum())} calibration rows)",
            playbook=PB_CAL,
        )
    out: dict[str, Any] = {}
    for arm, p in preds.items():
        m = ok_cal & p["cal_ok"]
        cal_p = p["cal_proba"]
        fitted = calibration.fit_calibrator(inputs.calibration, _renorm(cal_p[m]), y_cal[m], seed=inputs.seed)
        test_p = fitted.transform(_renorm(p["proba"][shared]))
        rep_raw = M.classification_report(ys, _renorm(p["proba"][shared]), classes)
        rep_cal = M.classification_report(ys, _renorm(test_p), classes)
        out[arm] = {
            "params": fitted.params,
            "raw": {k: rep_raw[k] for k in ("log_loss", "brier", "ece") if k in rep_raw},
            "calibrated": {k: rep_cal[k] for k in ("log_loss", "brier", "ece") if k in rep_cal},
            f"calibrated_{metric}": float(rep_cal.get(metric, np.nan)),
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


def _reliability(y: Any, proba: Any, classes: list[str], n_bins: int) -> dict[str, list[float]]:
    from engine import metrics as M

    bins = M.calibration_bins(y, proba, n_bins, classes=classes)
    return {
        "confidence": [float(b["confidence"]) for b in bins],
        "accuracy": [float(b["accuracy"]) for b in bins],
        "count": [int(b["count"]) for b in bins],
    }


def _latency(inputs: Inputs, fns: dict[str, Any], test: Any) -> Check:
    import numpy as np

    n = min(inputs.latency_examples, test.height)
    rows = test.slice(0, n)
    out = {}
    for arm, fn in fns.items():
        if arm == "trivial_baseline":
            continue
        fn(rows.slice(0, 1))  # warm-up, not timed
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            fn(rows.slice(i, 1))
            times.append((time.perf_counter() - t0) * 1000)
        out[arm] = {
            "p50_ms": float(np.percentile(times, 50)),
            "p95_ms": float(np.percentile(times, 95)),
            "examples": n,
        }
    return Check(
        id="artifact.latency",
        status="info",
        summary="; ".join(f"{a}: p50 {v['p50_ms']:.1f} ms, p95 {v['p95_ms']:.1f} ms" for a, v in out.items()),
        coverage=f"sample: {n} test rows, one at a time, CPU, after one warm-up call",
        measured={"arms": out, "batch_size": 1, "device": "cpu"},
        replay="observation",
        why="Timing is measured apart from quality, one example at a time, on this machine.",
        playbook=PB_LATENCY,
    )


# ---------------------------------------------------------------- the four outcomes


def _criterion(
    upstream: dict[str, StageRecord], comparison: dict[str, Any] | None, checks: list[Check]
) -> tuple[str, str]:
    claim = _claim(upstream)
    s = claim.get("success", {}) or {}
    if not s.get("metric") or comparison is None:
        return "not_run", "no success criterion or no comparison"
    comp = next((c for c in checks if c.id == "artifact.comparison"), None)
    if comp is None or comp.status == "not_run":
        return "not_run", "no comparison"
    metric = str(s["metric"])
    if metric != comp.measured.get("metric"):
        return (
            "not_run",
            f"the criterion's metric {metric} is not the compared metric {comp.measured.get('metric')}",
        )
    values = comp.measured["values"]
    op, target, rel = (
        str(s.get("op", ">=")),
        float(s.get("value", 0.0)),
        str(s.get("relative_to", "absolute")),
    )
    if rel == "absolute":
        lhs, text = values["candidate"], f"candidate {metric} {values['candidate']:.4f} {op} {target}"
    elif rel in comp.measured["differences"]:
        d = comp.measured["differences"][rel]
        # the interval's conservative end must meet the criterion, not just the point estimate
        lhs = d.get("lo", math.nan) if op in (">=", ">") else d.get("hi", math.nan)
        text = f"candidate − {rel} interval end {lhs:+.4f} {op} {target}"
    else:
        return "not_run", f"the criterion is relative to {rel!r}, which was not compared"
    met = {">=": lhs >= target, ">": lhs > target, "<=": lhs <= target, "<": lhs < target}[op]
    return ("met" if met else "not_met"), text


def _outcomes(
    checks: list[Check], comparison: dict[str, Any] | None, upstream: dict[str, StageRecord]
) -> Check:
    by = {c.id: c for c in checks}
    finished = by["artifact.job_finished"].status == "pass"
    verified = all(
        by.get(i) is not None and by[i].status == "pass"
        for i in ("artifact.identity", "artifact.reload_parity")
    )
    comp = by.get("artifact.comparison")
    better = bool(comp and comp.status == "pass")
    claim_state, claim_text = _criterion(upstream, comparison, checks)
    limitations = [n.text for rec in upstream.values() for n in rec.notes if n.tag == "limitation"]
    disabled = [
        c.id
        for rec in upstream.values()
        for c in rec.checks
        if c.id.startswith("dispatch.alarms.") and c.measured.get("state") == "disabled"
    ]
    outcomes = {
        "job_finished": finished,
        "artifact_verified": verified,
        "candidate_better": better,
        "claim_met": claim_state == "met",
    }
    status = "pass" if all(outcomes.values()) else ("fail" if not (finished and verified) else "warn")
    return Check(
        id="artifact.verdict",
        status=status,
        summary=(
            f"job finished: {'yes' if finished else 'no'}; artifact verified: {'yes' if verified else 'no'}; "
            f"candidate better than every comparator: {'yes' if better else 'no'}; claim met: "
            f"{ {'met': 'yes', 'not_met': 'no'}.get(claim_state, 'not decided') } ({claim_text})"
        ),
        measured={
            **outcomes,
            "claim_state": claim_state,
            "criterion": claim_text,
            "limitations": limitations,
            "disabled_alarms": disabled,
        },
        why="Four different outcomes: a finished job, a verified artifact, a better model and a met claim.",
        playbook=PB_OUTCOMES,
    )
