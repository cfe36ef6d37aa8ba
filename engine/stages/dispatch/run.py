"""Dispatch stage: run the frozen contract as a job, and record how it really behaved.

The job directory is jobs/<operation_id>/ (operation_id = contract digest[:16] + attempt). This
stage writes the contract copy and the train / dev rows there, launches through the provider
(idempotent: an existing job with this identity is adopted, never started twice), optionally
waits, and then measures everything from the job's own files. Replay never launches: it re-reads
the files and recomputes the checks.

Playbook: "Dispatch and observe".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import Check, StageRecord, digest_of
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.dispatch.checks import PB_DISABLED, Look, checked_effective, job_checks
from claimcheck.engine.stages.dispatch.inputs import Inputs
from claimcheck.engine.training import jobfiles

TITLE = "Dispatch"


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    from claimcheck.engine.providers.base import operation_id

    eff, digest = contract_of(upstream)
    op = Operation(eff, digest, operation_id(digest, inputs.attempt), inputs.attempt)
    op_id = op.op_id
    jobs_root = ctx.session_dir / "jobs"
    job_dir = jobs_root / op_id
    provider = _provider(inputs, jobs_root, ctx)
    launch_info: dict[str, Any] = {"provider": inputs.provider, "operation_id": op_id}
    gate = _required_checks(eff, upstream["contract"])
    if gate.status == "fail" and not jobfiles.has_contract(job_dir):
        return StageRecord(stage="dispatch", inputs=inputs.model_dump(mode="json"), checks=[gate])
    if checked_effective(eff).candidate_kind in ("sklearn", "encoder"):
        checks = [gate, _no_job(eff, digest)]
        return StageRecord(stage="dispatch", inputs=inputs.model_dump(mode="json"), checks=checks)
    if checked_effective(eff).retrieval is not None and inputs.provider != "local":
        raise StageInputError(
            f"dispatch: provider '{inputs.provider}' — the retrieval job (a contrastive LoRA fine-tune) runs "
            "through the local provider only: its adapter folder is not the one the Ray fetch verifies; "
            'set provider = "local"'
        )
    if ctx.replay:
        launch_info["replay"] = True  # look, never launch
    else:
        runtime = {}
        if inputs.provider == "ray" and inputs.output_location:
            runtime["output_location"] = str(ctx.resolve(inputs.output_location).resolve() / op_id)
        export_job(job_dir, op, upstream, ctx, runtime)
        try:
            handle = provider.launch(job_dir, op_id, resume=inputs.resume)
            launch_info.update(started=handle.started, ref=handle.ref)
            if ctx.wait:
                _wait(provider, handle, inputs, ctx)
        except _provider_errors() as exc:
            raise StageInputError(f"dispatch via {inputs.provider}: {exc}") from None
    look = Look(job_dir, eff, digest, op_id, provider, launch_info, _environment(upstream["contract"]))
    checks = [gate, *job_checks(look)]
    return StageRecord(stage="dispatch", inputs=inputs.model_dump(mode="json"), checks=checks)


def _no_job(eff: dict[str, Any], digest: str) -> Check:
    """A candidate the artifact stage fits (scikit-learn, claim.fine_tuning = false) or loads unchanged
    (a retrieval claim's encoder): no job, one record naming what the contract pins."""
    from claimcheck.engine.artifact.sklearn_candidate import CANDIDATE_NOTE

    contract = checked_effective(eff)
    pinned = f"contract {digest[:19]}…"
    if contract.candidate_kind == "encoder":
        model = contract.encoder.model_path if contract.encoder else "?"
        named = {"candidate_kind": "encoder", "model_path": model}
        summary = (
            f"no job: the unchanged encoder {model} is loaded and scored in the artifact stage ({pinned})"
        )
        why = (
            "Nothing is trained: a job, its heartbeat and its alarms would add nothing a reviewer needs; "
            "the encoder is pinned by the contract digest and its files' sha256."
        )
    else:
        learner = contract.sklearn.learner if contract.sklearn else "?"
        named = {"candidate_kind": "sklearn", "learner": learner}
        summary = f"{CANDIDATE_NOTE} ({learner}, {pinned})"
        why = (
            "A conventional learner fits in seconds to minutes on this machine; a job, its heartbeat and "
            "its alarms would add nothing a reviewer needs, and the fit is pinned by the contract digest."
        )
    return Check(
        id="dispatch.no_job",
        status="pass",
        basis="decided",
        summary=summary,
        measured={**named, "digest": digest},
        why=why,
        playbook=PB_DISABLED,
    )


@dataclass
class Operation:
    """One deliberate launch: the frozen effective contract, its digest, identity and attempt."""

    eff: dict[str, Any]
    digest: str
    op_id: str
    attempt: int


def contract_of(upstream: dict[str, StageRecord]) -> tuple[dict[str, Any], str]:
    rec = upstream.get("contract")
    if rec is None:
        raise StageInputError("dispatch needs a frozen contract stage")
    from claimcheck.engine.shapes import parse
    from claimcheck.engine.shapes import training as shapes

    effective = parse(rec.check("contract.effective"), shapes.Effective)
    if effective is None or not effective.effective:
        raise StageInputError(
            "the contract record has no contract.effective check: re-run the contract stage"
        )
    eff = dict(effective.effective)
    recorded = parse(rec.check("contract.digest"), shapes.Digest)
    digest = recorded.digest if recorded else ""
    if digest != digest_of(eff):
        raise StageInputError(
            f"the contract digest {digest[:20]} does not match its effective settings ({digest_of(eff)[:20]}): "
            "re-run and freeze the contract stage"
        )
    return eff, digest


def _environment(contract: StageRecord) -> Any:
    """The contract's environment record (versions, hardware, engine sources); None when absent."""
    from claimcheck.engine.shapes import parse
    from claimcheck.engine.shapes import training as shapes

    return parse(contract.check("contract.environment"), shapes.Environment)


def _required_checks(eff: dict[str, Any], contract: StageRecord) -> Check:
    """The contract's required checks, and what it said to do when one fails (refuse or warn)."""
    c = checked_effective(eff)
    required, policy = list(c.required_checks), c.on_required_fail
    states = {}
    for cid in required:
        c = contract.check(cid)
        states[cid] = c.status if c is not None else "absent"
    failed = [cid for cid, st in states.items() if st in ("fail", "absent", "not_run")]
    warned = [cid for cid, st in states.items() if st == "warn"]
    refuse = bool(failed) and policy == "refuse_dispatch"
    # A warning is not a failure, and not a pass either: the summary names the warned ones.
    passed = (
        f"{len(required)} required contract checks without a failure: "
        f"{len(required) - len(warned)} passed, {len(warned)} warned ({', '.join(warned)})"
        if warned
        else f"{len(required)} required contract checks passed"
    )
    return Check(
        id="dispatch.required_checks",
        status="fail" if refuse else ("warn" if failed else "pass"),
        basis="decided" if failed and not refuse else "measured",
        summary=(
            f"launch refused: required contract checks not passed: {', '.join(failed)}"
            if refuse
            else (
                f"required checks not passed ({', '.join(failed)}) but the contract says warn"
                if failed
                else passed
            )
        ),
        measured={"required": required, "states": states, "on_required_fail": policy, "refused": refuse},
        why="The contract named the checks that must pass before launch and what to do when one does not.",
        playbook=PB_DISABLED,
    )


def export_job(
    job_dir: Path,
    op: Operation,
    upstream: dict[str, StageRecord],
    ctx: StageContext,
    extra_runtime: dict[str, Any] | None = None,
) -> None:
    """Write the job's own inputs once: contract copy, train / dev rows (never the test split)."""
    if jobfiles.has_contract(job_dir):
        return  # the same identity: reuse exactly what the first launch wrote
    from claimcheck.engine.data import splits

    frames = {}
    for name in ("train", "dev"):
        ctx.progress(None, f"exporting {name} rows for {op.op_id}")
        df = splits.rows(name, upstream, ctx, caller="dispatch")
        frames[name] = _job_frame(df, op.eff)
    runtime = {"heartbeat_seconds": jobfiles.HEARTBEAT_SECONDS, **(extra_runtime or {})}
    spec = jobfiles.JobSpec(
        effective=op.eff,
        digest=op.digest,
        op_id=op.op_id,
        attempt=op.attempt,
        train=frames["train"],
        dev=frames["dev"],
        workspace=ctx.workspace,
        runtime=runtime,
    )
    jobfiles.write_job_dir(job_dir, spec)


def _job_frame(df: Any, eff: dict[str, Any]) -> Any:
    import polars as pl

    from claimcheck.engine.training.evaluate import row_inputs

    contract = checked_effective(eff)
    if contract.retrieval is not None:  # the retrieval job's pairs (engine/retrieval/finetune.py)
        cols = contract.retrieval.columns
        return df.select(
            pl.col("row_id"),
            *(
                pl.col(cols[name]).cast(pl.Utf8).alias(name)
                for name in ("query_id", "query", "doc_id", "passage")
            ),
            pl.col("target").cast(pl.Utf8),
        )
    if contract.task_kind == "causal_lm_sft":
        import json

        msgs = [json.dumps(m) for m in row_inputs(eff, df)]
        return pl.DataFrame({"row_id": df["row_id"], "messages": msgs, "target": df["target"].cast(pl.Utf8)})
    texts = row_inputs(eff, df)
    frame = pl.DataFrame({"row_id": df["row_id"], "text": texts, "target": df["target"].cast(pl.Utf8)})
    weight_column = checked_effective(eff).weight_column
    if weight_column:  # the job's weighted loss and dev metric read each row's weight
        frame = frame.with_columns(df[weight_column].cast(pl.Float64).alias(jobfiles.WEIGHT_COLUMN))
    return frame


def _provider(inputs: Inputs, jobs_root: Path, ctx: StageContext) -> Any:
    from claimcheck.engine.providers.registry import from_inputs

    return from_inputs(inputs.model_dump(mode="json"), jobs_root, ctx.resolve)


def _provider_errors() -> tuple[type[BaseException], ...]:
    """Errors a provider raises for an unreachable or refusing cluster: the person's to fix, not a bug."""
    from claimcheck.engine.providers.ray_http import RayJobsError

    return (RayJobsError, ValueError)


def _wait(provider: Any, handle: Any, inputs: Inputs, ctx: StageContext) -> None:
    start = time.time()
    while True:
        st = provider.status(handle)
        frac = st.step / st.total_steps if st.total_steps else None
        ctx.progress(frac, f"job {handle.op_id}: {st.phase} step {st.step}/{st.total_steps}")
        if st.terminal:
            provider.fetch(handle)  # local: nothing to copy; ray: logs + artifact home, checksums verified
            return
        if ctx.wait_timeout_seconds and time.time() - start > ctx.wait_timeout_seconds:
            return  # the job keeps running; the checks say so
        ctx.check_cancelled()  # stops waiting only: the detached job is not touched
        time.sleep(ctx.poll_seconds)
