"""The locked-test arms: predicting in batches (a failing batch is missing evidence, never a zero),
a torch model as an arm, the recorded read of the locked labels, the per-arm counts, and latency."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from claimcheck.engine.artifact.common import PB_ARMS, PB_BASE, PB_LATENCY
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.shapes import artifact as shapes

ARM_BATCH = 64  # rows an arm predicts at a time: a failing batch is that many rows of missing evidence
# A torch arm's rows at a time: its predict sorts them by length into batches of 32 (evaluate.eval_batches),
# and the more rows it sorts the less padding: 135,768 token slots on the demo's 2,399 dev tickets
# against 175,128 with 64 rows at a time (122,508 sorting them all).
TORCH_ARM_BATCH = 256


def arm_predict(fn: Any, frames: dict[str, Any], batch: int | None = None) -> dict[str, Any]:
    """Predict in batches (`batch` rows; by default the arm's `arm_batch`, else ARM_BATCH); a failing
    batch is counted failed (missing evidence), never scored 0."""
    import numpy as np

    batch = batch or getattr(fn, "arm_batch", ARM_BATCH)
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


def torch_arm(model: Any, tok: Any, eff: dict[str, Any], classes: list[str], mode: str):
    """A torch model as an arm, predicting under the inference `mode` (the artifact manifest's)."""
    from claimcheck.engine.training.evaluate import Batcher, predict

    batcher = Batcher(eff, tok, classes, "cpu")

    def fn(frame: Any) -> Any:
        enc = batcher.prepare(frame, with_labels=False)
        return predict(model, enc, mode=mode)["proba"]

    fn.arm_batch = TORCH_ARM_BATCH  # type: ignore[attr-defined]
    return fn, batcher


def base_model_identity(eff: dict[str, Any], workspace: Any) -> Check:
    """The base-model arm's weights re-hashed as the contract pinned them (`model_sha256`): a
    difference fails, and the arm is not scored — it is not the unchanged base the claim names."""
    from claimcheck.engine.errors import ClaimcheckError
    from claimcheck.engine.training import stamp
    from claimcheck.engine.training.models import resolve_model_path

    want = str(eff.get("model_sha256", ""))
    try:
        digest, files = stamp.model_digest(resolve_model_path(eff["model_path"], workspace))
    except (ClaimcheckError, OSError) as exc:
        digest, files, problem = "", 0, f"the base model cannot be read ({exc})"
    else:
        problem = (
            "" if digest == want else f"its files hash to {digest[:19]}…, not the contract's {want[:19]}…"
        )
    return Check(
        id="artifact.base_model_identity",
        status="fail" if problem else "pass",
        summary=(
            f"base model {eff['model_path']}: {problem}; the base-model arm is not scored"
            if problem
            else f"base model {eff['model_path']}: {files} files re-hashed, the contract's {want[:19]}…"
        ),
        measured=shapes.BaseModelIdentity(
            model_path=str(eff["model_path"]),
            contract_model_sha256=want,
            model_sha256=digest,
            model_files=files,
            matches=not problem,
        ),
        why="The unchanged-base comparator is the model the contract pinned: the same name can hold other weights.",
        playbook=PB_BASE,
    )


@dataclass(frozen=True)
class LockedTest:
    """The locked test rows the artifact stage reads (sampled when the inputs bound them), the reads
    logged so far by this stage, and the coverage that says whether every test row is scored."""

    rows: Any  # a polars DataFrame
    reads: list[dict[str, Any]]
    total: int
    coverage: str
    kind: str = "family"  # the split's unit (claimcheck.engine.data.splits.unit_kind)

    @property
    def units(self) -> Any:
        """The independent unit of each row (the family the split kept it with), or None where the
        split records none; a row outside every family is its own unit."""
        import polars as pl

        if "family_id" not in self.rows.columns:
            return None
        own = -1 - pl.col("row_id")
        return self.rows.select(pl.col("family_id").fill_null(own)).to_series().to_numpy()

    @property
    def unit_kind(self) -> str:
        return self.kind if "family_id" in self.rows.columns else "row"


def locked_test(max_rows: int, seed: int, upstream: dict[str, Any], ctx: Any) -> LockedTest:
    """Read the locked test split once, as the artifact stage; `max_rows` > 0 samples it (seeded)."""
    from claimcheck.engine.data import splits

    test = splits.rows("test", upstream, ctx, caller="artifact")
    reads = [dict(r) for r in splits.locked_reads(ctx) if r.get("caller") == "artifact"]
    total = test.height
    if max_rows and test.height > max_rows:
        test = test.sample(n=max_rows, seed=seed, shuffle=False).sort("row_id")
    coverage = "full" if test.height == total else f"sample: {test.height} of {total} test rows"
    return LockedTest(test, reads, total, coverage, splits.unit_kind(upstream["split"]))


def locked_read(reads: list[dict[str, Any]], total: int, coverage: str) -> Check:
    return Check(
        id="artifact.locked_test_read",
        status="info",
        summary=f"locked test labels read by the artifact stage ({total} rows); reads logged: {len(reads)}",
        coverage=coverage,
        measured={"test_rows": total, "reads": [{k: v for k, v in r.items() if k != "time"} for r in reads]},
        replay="observation",
        why="Final results must not select recipes, checkpoints or thresholds; the read is recorded.",
        playbook=declaration("artifact.locked_test_read").playbook,
    )


def arm_counts(
    wanted: list[str], preds: dict[str, Any], notes: dict[str, str], n: int, y: Any, coverage: str
) -> Check:
    counts = {}
    for arm in wanted:
        if arm in preds:
            ok = preds[arm]["ok"][:n]
            counts[arm] = shapes.ArmCounts(
                requested=n,
                scored=int(ok.sum()),
                failed=int((~ok).sum()),
                missing=0,
                errors=preds[arm]["errors"][:5],
                what=notes.get(arm, ""),
            )
        else:
            counts[arm] = shapes.ArmCounts(
                requested=n, scored=0, failed=0, missing=n, what=notes.get(arm, "")
            )
    unlabeled = int((y < 0).sum())
    incomplete = [a for a, c in counts.items() if c.scored < n]
    return Check(
        id="artifact.arms",
        status="warn" if incomplete or unlabeled else "pass",
        summary=", ".join(f"{a}: {c.scored}/{c.requested} scored" for a, c in counts.items())
        + (f"; {unlabeled} test rows with a label outside the class order" if unlabeled else ""),
        coverage=coverage,
        measured=shapes.Arms(arms=counts, labels_outside_class_order=unlabeled),
        why="A failed prediction is missing evidence, never a zero score; paired metrics use rows every arm scored.",
        playbook=PB_ARMS,
    )


def _timed_calls(fn: Any, rows: Any) -> list[float]:
    """Milliseconds of each one-row call that returned; a row the arm fails on is not timed (its
    failure is counted where quality is: artifact.arms)."""
    times = []
    for i in range(rows.height):
        t0 = time.perf_counter()
        try:
            fn(rows.slice(i, 1))
        except Exception:  # noqa: BLE001 - a failed prediction is not a latency
            continue
        times.append((time.perf_counter() - t0) * 1000)
    return times


def latency(examples: int, fns: dict[str, Any], test: Any) -> Check:
    import numpy as np

    n = min(examples, test.height)
    rows = test.slice(0, n)
    out, untimed = {}, []
    for arm, fn in fns.items():
        if arm == "trivial_baseline":
            continue
        _timed_calls(fn, rows.slice(0, 1))  # warm-up, not timed
        times = _timed_calls(fn, rows)
        if not times:
            untimed.append(arm)
            continue
        out[arm] = {
            "p50_ms": float(np.percentile(times, 50)),
            "p95_ms": float(np.percentile(times, 95)),
            "examples": len(times),
        }
    parts = [f"{a}: p50 {v['p50_ms']:.1f} ms, p95 {v['p95_ms']:.1f} ms" for a, v in out.items()]
    parts += [f"{a}: not timed (it failed on every timed row)" for a in untimed]
    parts += [f"{a}: {v['examples']} of {n} rows timed" for a, v in out.items() if v["examples"] < n]
    return Check(
        id="artifact.latency",
        status="info",
        summary="; ".join(parts),
        coverage=f"sample: {n} test rows, one at a time, CPU, after one warm-up call",
        measured={"arms": out, "batch_size": 1, "device": "cpu"},
        replay="observation",
        why="Timing is measured apart from quality, one example at a time, on this machine.",
        playbook=PB_LATENCY,
    )


def chosen_arms(chosen: list[str], claimed: list[str]) -> list[str]:
    """The comparators scored beside the candidate: the claim's frozen comparators, or the subset of
    them the artifact inputs list. An arm the claim does not list is refused (ValueError)."""
    picked = [c for c in (chosen or claimed) if c != "candidate"]
    extra = [c for c in picked if c not in claimed]
    if extra:
        raise ValueError(
            f"artifact.comparators: {', '.join(extra)} is not a comparator of the claim "
            f"({', '.join(claimed) or 'none listed'}); the artifact stage scores exactly the claim's "
            "comparators: leave comparators empty, or list a subset of them"
        )
    return list(dict.fromkeys(picked))


def claimed_arms(check: Check, claimed: list[str]) -> Check:
    """The arms check held against the claim's frozen comparators: one of them not run (left out of
    the artifact inputs, not available) fails it, named; one run that scored no test row (every
    prediction failed or was truncated) is named as a warning: missing evidence, not zero quality."""
    from claimcheck.engine.shapes import parse

    arms = parse(check, shapes.Arms)
    if arms is None:
        return check
    arm_of = [c for c in claimed if c not in arms.excluded]  # an excluded one is no arm (recorded why)
    unscored = [c for c in arm_of if c not in arms.arms or arms.arms[c].scored == 0]
    update: dict[str, Any] = {
        "measured": arms.model_copy(update={"claim_comparators": list(claimed), "unscored": unscored})
    }
    absent = [c for c in unscored if c not in arms.arms]
    if absent:
        update["status"] = "fail"
        update["summary"] = f"the claim's comparator(s) {', '.join(absent)} not run; {check.summary}"
    elif unscored:
        update["status"] = "warn" if check.status == "pass" else check.status
        update["summary"] = f"the claim's comparator(s) {', '.join(unscored)} scored no row; {check.summary}"
    return Check.model_validate({**check.model_dump(), **update})
