"""The baseline stage's saved predictions, its probe of the locked-test guard, and its timings."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from claimcheck.engine.baseline.evaluation import PB_REPORT, PB_SPLITS, _coverage, _where
from claimcheck.engine.baseline.learners import CALLER, Data, Fitted
from claimcheck.engine.evidence import Check, StageRecord, atomic_write_bytes
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.pipeline.context import StageContext

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

PREDICTIONS_FILE = "baseline_dev_predictions.parquet"


def _predictions_frame(data: Data, fitted: dict[str, Fitted], mask: np.ndarray) -> pl.DataFrame:
    import numpy as np
    import polars as pl

    from claimcheck.engine.stats.metrics import argmax_pred

    row_id = data.eval.get_column("row_id").to_numpy()[mask]
    frames = []
    for name, f in fitted.items():
        cols: dict[str, Any] = {"row_id": row_id, "learner": [name] * len(row_id)}
        if data.eval_fold is not None:  # K-fold: the fold that predicted the row
            cols["fold"] = data.eval_fold[mask].astype(np.int64)
        pred = f.eval_pred[mask]
        if data.task == "classification":
            cols["predicted"] = [data.classes[i] for i in argmax_pred(pred)]
            for j, c in enumerate(data.classes):
                cols[f"proba_{c}"] = pred[:, j].astype(np.float64)
        elif data.task == "regression":
            cols["predicted"] = pred.astype(np.float64)
        elif data.task == "multilabel":  # the label set at threshold 0.5, and each label's score
            from claimcheck.engine.data.labelsets import canonical

            cols["predicted"] = canonical(pred >= 0.5, data.classes)
            for j, c in enumerate(data.classes):
                cols[f"proba_{c}"] = pred[:, j].astype(np.float64)
        else:
            cols["predicted"] = [str(v) for v in pred]
        frames.append(pl.DataFrame(cols))
    return pl.concat(frames) if frames else pl.DataFrame()


def predictions_check(data: Data, fitted: dict[str, Fitted], mask: np.ndarray, ctx: StageContext) -> Check:
    import hashlib

    frame = _predictions_frame(data, fitted, mask)
    buf = io.BytesIO()
    frame.write_parquet(buf, compression="zstd", statistics=False)
    blob = buf.getvalue()
    path = ctx.data_dir / PREDICTIONS_FILE
    if not ctx.replay:
        atomic_write_bytes(path, blob)
    return Check(
        id="baseline.predictions",
        status="info",
        summary=f"{frame.height} {_where(data)} predictions ({len(fitted)} learners) saved to data/{PREDICTIONS_FILE}",
        coverage=_coverage(data, mask),
        measured={
            "path": f"data/{PREDICTIONS_FILE}",
            "sha256": hashlib.sha256(blob).hexdigest(),
            "rows": frame.height,
            "columns": frame.columns,
        },
        why="Saved predictions let a reviewer recompute every figure without refitting.",
        playbook=PB_REPORT,
    )


def locked_test_check(upstream: dict[str, StageRecord], ctx: StageContext) -> Check:
    """Probe the guard (it must refuse before reading anything) and count locked reads on this context."""
    from claimcheck.engine.data import splits

    refused, message = False, ""
    try:
        splits.rows("test", upstream, ctx, caller=CALLER)
    except splits.LockedTestError as exc:
        refused, message = True, str(exc)
    reads = [r for r in splits.locked_reads(ctx) if r.get("caller") == CALLER]
    ok = refused and not reads
    return Check(
        id="baseline.locked_test",
        status="pass" if ok else "fail",
        summary=(
            "the locked test was not read: the guard refused this stage and 0 locked reads are logged"
            if ok
            else f"the locked test was read by this stage ({len(reads)} read(s)); its figures cannot select anything"
        ),
        measured={
            "guard_refused": refused,
            "refusal": message,
            "locked_reads": len(reads),
            "splits_read": ["train", "dev", "calibration"],
        },
        why="Final results must select nothing; a stage that saw the test labels cannot claim an unbiased test.",
        playbook=PB_SPLITS,
    )


def timing_check(data: Data, fitted: dict[str, Fitted], pre: tuple[float, float, int], total: float) -> Check:
    """pre: (seconds reading the rows, seconds importing the learner libraries — kept apart from
    each fit time — and the native thread cap the fits ran under)."""
    from claimcheck.engine import threads

    t_load, t_imports, cap = pre
    per = {n: round(f.seconds, 3) for n, f in fitted.items()}
    return Check(
        id="baseline.timing",
        status="info",
        replay="observation",
        summary=f"stage took {total:.1f} s (reading {t_load:.1f} s; imports {t_imports:.1f} s; "
        + ", ".join(f"{n} {s:.1f} s" for n, s in per.items())
        + f") for {data.fit.height} fitting rows and {data.eval.height} evaluated rows",
        measured={
            "total_seconds": round(total, 3),
            "load_seconds": round(t_load, 3),
            "imports_seconds": round(t_imports, 3),
            "learner_seconds": per,
            "fit_rows": data.fit.height,
            "eval_rows": data.eval.height,
            "mode": data.mode,
            **threads.record(cap),
        },
        why="Run time is an observation of this machine, not a property of the data.",
        playbook=declaration("baseline.timing").playbook,
    )


def sample_weights_check(data: Data, learners: list[str]) -> Check:
    """baseline.sample_weights: every learner was fitted with the source's weights as sample_weight."""
    from claimcheck.engine.data import weights
    from claimcheck.engine.shapes.baseline import BaselineSampleWeights

    w = weights.of(data.fit, {"weight_column": data.weight_column})
    assert w is not None
    return Check(
        id="baseline.sample_weights",
        status="pass",
        summary=(
            f"{len(learners)} learner(s) fitted with '{data.weight_column}' as sample_weight on "
            f"{len(w)} fitting rows (mass {float(w.sum()):.6g}, {int((w == 0).sum())} at weight 0); "
            "the dev figures here are unweighted, the claim's metric is weighted at the artifact stage"
        ),
        coverage=f"{len(w)} fitting rows",
        measured=BaselineSampleWeights(
            column=data.weight_column,
            learners=list(learners),
            fit_rows=len(w),
            fit_mass=float(w.sum()),
            zero_weight_fit_rows=int((w == 0).sum()),
            dev_figures="unweighted",
        ),
        why="A declared weight says how much a row counts in the fit, not only in the figures.",
        playbook=weights.PB_WEIGHTS,
    )
