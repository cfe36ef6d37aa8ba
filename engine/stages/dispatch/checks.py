"""The dispatch stage's checks, measured from the job's own files: identity, acknowledgement,
progress, liveness, the loss curve and dev metric over time, the alarms, checkpoints and resume.

Replay calls the same `job_checks` on the recorded job folder: it looks, never launches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import Check, digest_of
from claimcheck.engine.pipeline.checks import declaration, not_run
from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.providers.snapshot import JobSnapshot, snapshot
from claimcheck.engine.stats import registry
from claimcheck.engine.training import jobfiles
from claimcheck.engine.training.jobrecords import StatusFile
from claimcheck.engine.training.schema import Effective, effective

PB_IDENTITY = (
    "Give each deliberate operation a stable identity; an uncertain reply is a reason to inspect/reconcile, "
    "not generate a new launch key."
)
PB_ACK = "Verify provider acknowledgement, actual stage and measured progress after launch."
PB_HEARTBEAT = (
    "Distinguish control-plane records from provider work. A setup row is not necessarily a GPU job, "
    "a heartbeat is not an optimizer step, and a collection failure is not proof the provider failed."
)
PB_MONITOR = (
    "Monitor objective loss and the declared task metric together. Watch for class collapse, divergence, "
    "train/development gaps and missing coverage."
)
PB_DISABLED = "Declare checkpoint selection, required-check failure behavior and any stopping rule. Disclose disabled checks."
PB_RESUME = (
    "For resumable training, retain required optimizer, scheduler, scaler, RNG and progress state as supported; "
    "test that path before promising interruption recovery."
)
PB_REUSE = (
    "Explicitly reuse the same prepared inputs and configuration so defaults cannot create a second setup."
)
PB_RUNTIME = (
    "When validating a platform fix, verify the processes that execute the path use it. Passing tests in a "
    "checkout do not establish a reloaded worker."
)
MAX_POINTS = 200


def checked_effective(eff: dict[str, Any] | Effective) -> Effective:
    """The effective contract as its typed model; a field it does not know is the person's to fix."""
    from pydantic import ValidationError

    try:
        return effective(eff)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise StageInputError(
            f"the contract record's effective settings do not fit this engine ({where}: {first.get('msg')}): "
            "re-run and freeze the contract stage"
        ) from None


@dataclass
class Look:
    """One look at a job for the dispatch record: where it is, what contract it runs, who runs it."""

    job_dir: Path
    eff: dict[str, Any]
    digest: str
    op_id: str
    provider: Any
    launch_info: dict[str, Any]
    # the contract's environment check (shapes.training.Environment; None when the record has none):
    # the runtime stamp is held to it
    environment: Any = None


def job_checks(look: Look) -> list[Check]:
    from claimcheck.engine.providers.base import Handle

    job_dir, op_id = look.job_dir, look.op_id
    if not jobfiles.has_contract(job_dir):
        return [
            not_run(
                "dispatch.identity",
                f"no job directory jobs/{op_id}: the job was never exported here",
                measured={"operation_id": op_id},
            )
        ]
    c = checked_effective(look.eff)
    doc = jobfiles.read_contract(job_dir)
    handle = Handle(
        op_id=op_id, job_dir=job_dir, provider=look.provider.name, ref=str(look.launch_info.get("ref", ""))
    )
    snap = snapshot(job_dir, look.provider, handle, c)
    checks = [
        _identity(doc, look.eff, look.digest, op_id, job_dir),
        _runtime(job_dir, snap, c, look.environment),
        _acknowledged(snap, look.launch_info, look.provider.name),
        _progress(snap),
        _liveness(snap),
        _loss_curve(snap),
        _dev_metric(snap, int(doc.get("data", {}).get("dev_rows", 0))),
    ]
    checks += [_alarm_check(alarm) for alarm in snap.alarms]
    checks.append(_checkpoints(job_dir, c, snap))
    checks.append(_resume(snap))
    if (job_dir / jobfiles.RAY_RECORD).exists():
        checks.append(_ray_record(job_dir))
    return checks


def _ray_record(job_dir: Path) -> Check:
    """What the cluster was asked to run, as the Ray provider recorded it before its first POST."""
    import json

    try:
        doc = json.loads((job_dir / jobfiles.RAY_RECORD).read_text())
    except (OSError, ValueError) as exc:
        return Check(
            id="dispatch.provider_record",
            status="fail",
            summary=f"jobs/{job_dir.name}/{jobfiles.RAY_RECORD} is unreadable ({exc})",
            playbook=PB_IDENTITY,
        )
    keys = ("address", "ray_version", "submission_id", "entrypoint", "runtime_env", "resources")
    keys += ("output_location", "outcome", "posts", "ray_status")
    kept = {k: doc[k] for k in keys if k in doc and doc[k] is not None}
    return Check(
        id="dispatch.provider_record",
        status="info",
        summary=(
            f"Ray {doc.get('ray_version', '?')} at {doc.get('address', '?')}: submission "
            f"{doc.get('submission_id', '?')} ({doc.get('outcome', '?')}, {doc.get('posts', '?')} POST)"
        ),
        measured=kept,
        replay="observation",
        why="Provider call ids, the entrypoint and the runtime environment are what a reviewer needs to find the run.",
        playbook=declaration("dispatch.provider_record").playbook,
    )


def _identity(doc: dict[str, Any], eff: dict[str, Any], digest: str, op_id: str, job_dir: Path) -> Check:
    from claimcheck.engine.training.evaluate import sha256_file

    problems = []
    copy_digest = digest_of(doc.get("effective", {}))
    if copy_digest != digest:
        problems.append(f"contract copy digest {copy_digest[:20]} ≠ frozen contract {digest[:20]}")
    if doc.get("operation_id") != op_id:
        problems.append(f"job says operation {doc.get('operation_id')!r}, expected {op_id!r}")
    data = doc.get("data", {})
    hashes = {}
    for name in ("train", "dev"):
        path = job_dir / str(data.get(name, ""))
        got = sha256_file(path) if path.is_file() else "missing"
        hashes[name] = got
        if got != data.get(f"{name}_sha256"):
            problems.append(
                f"{name} rows changed since export ({got[:12]} vs {str(data.get(f'{name}_sha256'))[:12]})"
            )
    return Check(
        id="dispatch.identity",
        status="fail" if problems else "pass",
        summary="; ".join(problems)
        if problems
        else f"operation {op_id} = contract {digest[7:23]} attempt {doc.get('attempt')}",
        measured={
            "operation_id": op_id,
            "digest": digest,
            "attempt": int(doc.get("attempt", 0)),
            "train_sha256": hashes["train"],
            "dev_sha256": hashes["dev"],
            "train_rows": int(data.get("train_rows", 0)),
            "dev_rows": int(data.get("dev_rows", 0)),
            "problems": problems,
            "job_files": job_files(job_dir),
        },
        why="One identity per deliberate launch: relaunching with the same one adopts the job, never starts a second.",
        playbook=PB_IDENTITY,
    )


def _runtime(job_dir: Path, snap: JobSnapshot, c: Effective, environment: Any) -> Check:
    """The job's runtime stamp held to the contract: a different base model fails; other library
    versions or engine sources than the contract's environment record warn; no stamp yet is pending."""
    from claimcheck.engine.shapes import training as shapes
    from claimcheck.engine.training import stamp
    from claimcheck.engine.training.jobrecords import JobFileError

    try:
        rt = jobfiles.read_runtime(job_dir)
    except JobFileError as exc:
        return Check(id="dispatch.runtime", status="fail", summary=str(exc), playbook=PB_RUNTIME)
    if rt is None:
        return _no_stamp(snap, c.model_sha256)
    versions = dict(environment.versions) if environment is not None else {}
    if environment is not None and environment.hardware.get("python"):
        versions["python"] = str(environment.hardware["python"])
    engine = environment.engine if environment is not None else None
    cmp = stamp.compare(rt, c.model_sha256, versions, engine.modules if engine is not None else None)
    problems = _runtime_problems(cmp, rt.model_sha256, c.model_sha256)
    gpu = rt.device.get("gpu")
    where = (
        f"{gpu} (CUDA {rt.device.get('cuda', '?')}, driver {rt.device.get('driver') or '?'})"
        if gpu
        else "CPU"
    )
    measured = shapes.Runtime(
        state="stamped",
        contract_model_sha256=c.model_sha256,
        model_sha256=rt.model_sha256,
        model_files=rt.model_files,
        model_ok=cmp.model_ok,
        versions=rt.versions,
        version_diffs=cmp.version_diffs,
        engine_sha256=rt.engine_sha256,
        engine_modules=len(rt.engine_modules),
        engine_compared=cmp.engine_compared,
        engine_changed=cmp.engine_changed,
        engine_unknown=cmp.engine_unknown,
        device=rt.device,
        host=rt.host,
        run=rt.run,
    )
    status = "fail" if not cmp.model_ok else ("warn" if problems else "pass")
    return Check(
        id="dispatch.runtime",
        status=status,
        summary="; ".join(problems)
        if problems
        else (
            f"the job ran the contracted base model ({rt.model_files} files, {rt.model_sha256[:19]}…) on {where}, "
            "with the contract's library versions and engine sources"
        ),
        measured=measured,
        why="The process that ran the job must be the one the contract names: the same weights, the same "
        "code, the same libraries; the job stamps itself, so on a cluster the stamp is the worker's.",
        playbook=PB_RUNTIME,
    )


def _runtime_problems(cmp: Any, got: str, want: str) -> list[str]:
    out = []
    if not cmp.model_ok:
        out.append(f"the base model the job loaded ({got[:19]}…) is not the contract's ({want[:19]}…)")
    if cmp.version_diffs:
        diffs = ", ".join(f"{k} {a} → {b}" for k, (a, b) in sorted(cmp.version_diffs.items()))
        out.append(f"library versions differ from the contract's environment: {diffs}")
    if cmp.engine_changed or cmp.engine_unknown:
        names = [*cmp.engine_changed, *cmp.engine_unknown]
        out.append(
            f"{len(names)} engine source file(s) differ from the contract's engine: {', '.join(names[:5])}"
            + (" …" if len(names) > 5 else "")
        )
    elif not cmp.engine_compared:
        out.append("the contract record has no engine source hashes: the engine digest is not compared")
    return out


def _no_stamp(snap: JobSnapshot, model_sha256: str) -> Check:
    """No runtime.json: pending while the job may still write it, missing once it ended without one."""
    from claimcheck.engine.shapes import training as shapes

    ended = snap.terminal
    measured = shapes.Runtime(state="missing" if ended else "pending", contract_model_sha256=model_sha256)
    if not ended or snap.phase == "not_found":
        return not_run(
            "dispatch.runtime",
            f"pending: not yet due — the job writes its runtime stamp once its model is loaded ({snap.phase})",
            measured=measured.dump(),
        )
    return Check(
        id="dispatch.runtime",
        status="warn",
        summary=(
            f"the job ended ({snap.phase}) without writing its runtime stamp ({jobfiles.RUNTIME}): "
            "the process that ran it is not recorded"
        ),
        measured=measured,
        playbook=PB_RUNTIME,
    )


def job_files(job_dir: Path) -> dict[str, str]:
    """sha256 of what the job wrote that evidence rests on: metrics.jsonl and every checkpoint file
    (final/ is pinned by artifact.identity; status, heartbeat, log and pid files are liveness only)."""
    from claimcheck.engine.training.evaluate import sha256_file

    files = [job_dir / jobfiles.METRICS] if (job_dir / jobfiles.METRICS).is_file() else []
    for sub in (jobfiles.CHECKPOINTS, jobfiles.BEST):
        if (job_dir / sub).is_dir():
            files += sorted(p for p in (job_dir / sub).rglob("*") if p.is_file() and not p.is_symlink())
    return {p.relative_to(job_dir).as_posix(): sha256_file(p) for p in files}


def _acknowledged(snap: JobSnapshot, launch_info: dict[str, Any], provider: str) -> Check:
    status_doc = snap.status or StatusFile()
    acked = snap.status is not None and status_doc.operation_id == launch_info["operation_id"]
    how = (
        "replay: looked only"
        if launch_info.get("replay")
        else (
            "started by this run"
            if launch_info.get("started")
            else "adopted an existing job with this identity"
        )
    )
    measured = {
        "provider": provider,
        "acknowledged": acked,
        "how": how,
        "pid": status_doc.pid,
        "runs": status_doc.runs,
    }
    why = "A launch call returning is not the job running: only the job's own status acknowledges it."
    summary = (
        f"the job wrote its own status under operation {launch_info['operation_id']} ({how})"
        if acked
        else f"no status written by the job yet ({snap.phase}; {how})"
    )
    if not acked and snap.phase in ("not_found", "launching"):
        # Whether the job has answered yet is a look at the world outside the session: never compared.
        return not_run("dispatch.acknowledged", summary, measured=measured, why=why).model_copy(
            update={"replay": "observation"}
        )
    return Check(
        id="dispatch.acknowledged",
        status="pass" if acked else "fail",
        basis="measured" if acked else "not_run",
        summary=summary,
        measured=measured,
        replay="observation",
        why=why,
        playbook=PB_ACK,
    )


def _progress(st: JobSnapshot) -> Check:
    state = st.job_state
    status = {"finished": "pass", "failed": "fail", "cancelled": "warn"}.get(
        state, "fail" if st.phase == "lost" else "info"
    )
    summary = (
        f"{state}: phase {st.phase}, {len(st.steps)} optimizer steps of {st.total_steps}, "
        f"{st.heartbeats} heartbeats"
    )
    if st.reason:
        summary += f" — {st.reason}"
    return Check(
        id="dispatch.progress",
        status=status,
        summary=summary,
        measured={
            "job_state": state,
            "stage": st.phase,  # the evidence field's name since 0.1.0 (the shape's): the job's phase
            "reason": st.reason,
            "optimizer_steps": len(st.steps),
            "last_step": st.step,
            "total_steps": st.total_steps,
            "resumed_from": list(st.resumed_from),
        },
        why="A job is finished only when it says so; a heartbeat is not an optimizer step, so both are counted.",
        playbook=PB_HEARTBEAT,
    )


def _liveness(st: JobSnapshot) -> Check:
    return Check(
        id="dispatch.liveness",
        status="info",
        summary=(
            f"process {'alive' if st.alive else 'not running'} (pid {st.pid}); last heartbeat "
            f"{st.heartbeat_age_s:.1f}s ago at step {st.heartbeat_step}"
        ),
        measured={
            "alive": st.alive,
            "pid": st.pid,
            "last_heartbeat_age_s": st.heartbeat_age_s,
            "heartbeat_step": st.heartbeat_step,
            "heartbeat_interval_s": st.heartbeat_interval_s,
            # How many heartbeats a run takes depends on the machine's speed, not the run.
            "heartbeats": st.heartbeats,
        },
        replay="observation",
        why="Process liveness and heartbeat age are a look at the world now, not a property of the run.",
        playbook=PB_HEARTBEAT,
    )


def _thin(values: list[Any]) -> tuple[list[Any], int]:
    every = max(1, math.ceil(len(values) / MAX_POINTS))
    return values[::every], every


def _loss_curve(snap: JobSnapshot) -> Check:
    steps = snap.steps
    if not steps:
        return not_run("dispatch.loss_curve", "no optimizer step recorded")
    thin, every = _thin(steps)
    losses = [s.loss for s in steps]
    finite = [x for x in losses if math.isfinite(x)]
    k = max(1, len(finite) // 10)
    first, last = (sum(finite[:k]) / k, sum(finite[-k:]) / k) if finite else (math.nan, math.nan)
    return Check(
        id="dispatch.loss_curve",
        status="info",
        summary=f"training loss {first:.4f} → {last:.4f} (mean of first / last {k} steps) over {len(steps)} steps",
        coverage="full" if every == 1 else f"sample: every {every}th of {len(steps)} steps",
        measured={
            "step": [s.step for s in thin],
            "loss": [s.loss for s in thin],
            "lr": [s.lr for s in thin],
            "grad_norm": [s.grad_norm for s in thin],
            "loss_first": first,
            "loss_last": last,
        },
        why="The measured curve, not a summary of it: lower loss alone is not a better model.",
        playbook=PB_MONITOR,
    )


def _dev_metric(snap: JobSnapshot, dev_rows: int) -> Check:
    """The dev metric over time; judged against the trivial baseline once the job ended (while it runs,
    the latest evaluation is reported, not judged). The coverage names the dev rows evaluated."""
    evals = snap.evals
    if not evals:
        return not_run("dispatch.dev_metric", "no development evaluation recorded")
    metric = evals[0].metric
    values = [e.value for e in evals]
    tv = snap.trivial.value if snap.trivial is not None else math.nan
    last = values[-1]
    lower = registry.lower_is_better(metric)
    beats = math.isfinite(tv) and (last < tv if lower else last > tv)
    ended = snap.terminal
    if ended:
        status = "pass" if beats else ("warn" if math.isfinite(tv) else "info")
        when = "at the end"
    else:
        status = "info"
        when = f"at step {evals[-1].step} (latest; judged against the trivial baseline when the job ends)"
    rows = evals[-1].rows
    return Check(
        id="dispatch.dev_metric",
        status=status,
        summary=(
            f"dev {metric} {values[0]:.4f} at step {evals[0].step} → {last:.4f} {when}"
            + (f"; trivial baseline {tv:.4f}" if math.isfinite(tv) else "")
        ),
        coverage=(
            f"full dev split ({rows} rows)"
            if not dev_rows or rows >= dev_rows
            else f"sample: {rows} of {dev_rows} dev rows (the contract's eval_rows)"
        ),
        measured={
            "metric": metric,
            "step": [e.step for e in evals],
            "value": values,
            "train_reference_value": [e.train_value for e in evals],
            "trivial_value": tv,
            "final_value": last,
            "beats_trivial": beats,
            "final_pred_distribution": dict(evals[-1].pred_distribution or {}),
            "rows": rows,
            "dev_rows": dev_rows or rows,
            "ended": ended,
        },
        why="The declared task metric over time, next to what predicting the majority class scores.",
        playbook=PB_MONITOR,
    )


def _alarm_check(alarm: dict[str, Any]) -> Check:
    state = alarm["state"]
    check_id = f"dispatch.alarms.{alarm['name']}"
    summary = f"{alarm['name'].replace('_', ' ')}: {state} — {alarm['detail']}"
    measured = {k: v for k, v in alarm.items() if k not in ("name",) and v is not None}
    why = "Alarms run while the job runs; a disabled alarm is disclosed, never silently absent."
    # The stall alarm counts wall-clock heartbeats: a re-run on a busier machine counts
    # others, so replay reports it but does not compare it.
    replay = "observation" if alarm["name"] == "stall" else "compare"
    if state in ("not_run", "pending"):
        return not_run(check_id, summary, measured=measured, why=why).model_copy(update={"replay": replay})
    status = {
        "raised": "fail" if alarm["name"] == "non_finite" else "warn",
        "clear": "pass",
        "disabled": "info",
    }
    return Check(
        id=check_id,
        status=status[state],
        basis="decided" if state == "disabled" else "measured",
        summary=summary,
        measured=measured,
        replay=replay,
        why=why,
        playbook=PB_DISABLED if state == "disabled" else PB_MONITOR,
    )


def _checkpoint_due(every: int, snap: JobSnapshot) -> tuple[list[int], list[int]]:
    """(steps the contract schedules a checkpoint at, those of them the job has reached): every
    `every` steps before the last step (the artifact is the last step's state)."""
    total = snap.total_steps
    scheduled = list(range(every, total, every)) if every and total > every else []
    # a running job's status is rewritten after the step's checkpoint; its metrics line comes before
    reached = max(snap.step, max((s.step for s in snap.steps), default=0)) if snap.terminal else snap.step
    return scheduled, [s for s in scheduled if s <= reached]


def _checkpoints(job_dir: Path, c: Effective, snap: JobSnapshot) -> Check:
    from claimcheck.engine.training import checkpoint

    found = checkpoint.complete(job_dir / jobfiles.CHECKPOINTS)
    need = (
        "trainable.safetensors",
        "optimizer.pt",
        "scheduler.pt",
        "scaler.pt",
        "rng_state.pt",
        "trainer_state.json",
    )
    incomplete = [p.name for p in found if not all((p / f).is_file() for f in need)]
    every = c.checkpoint_every_steps
    scheduled, due = _checkpoint_due(every, snap)
    measured = {
        "steps": [int(p.name[5:]) for p in found],
        "incomplete": incomplete,
        "every_steps": every,
        "files": list(need),
    }
    why = "Weights alone cannot resume a run: optimizer, scheduler, scaler and RNG state are needed too."
    if not found and scheduled and not snap.terminal and not due:
        return not_run(
            "dispatch.checkpoints",
            f"pending: not yet due — the first checkpoint is scheduled at step {scheduled[0]} "
            f"(the job is at step {snap.step} of {snap.total_steps})",
            measured=measured,
            why=why,
        )
    if not found and due:
        status = "warn"
        summary = (
            f"no checkpoint saved although the contract asks for one every {every} steps "
            f"and the job reached step {due[-1]}"
        )
    elif not found:
        status = "info"
        summary = "no checkpoint saved" + (
            f": the job ended at step {snap.step}, before the first scheduled one (step {scheduled[0]})"
            if scheduled
            else " (none scheduled before the last step)"
        )
    else:
        status = "fail" if incomplete else "pass"
        summary = (
            f"{len(found)} checkpoints (steps {', '.join(p.name[5:].lstrip('0') or '0' for p in found)}), "
            "each with weights, optimizer, scheduler, scaler and RNG state"
        )
        if incomplete:
            summary = f"checkpoints missing resume state: {incomplete}"
    return Check(
        id="dispatch.checkpoints",
        status=status,
        summary=summary,
        measured=measured,
        why=why,
        playbook=PB_RESUME,
    )


def _resume(snap: JobSnapshot) -> Check:
    resumes = snap.resumes
    if not resumes:
        return Check(
            id="dispatch.resume",
            status="info",
            summary="the job ran without interruption",
            measured={"resumed_from": []},
            why="Records where a resumed job picked up.",
            playbook=PB_RESUME,
        )
    # Steps a killed run logged past its checkpoint were redone by the resumed run: compare them.
    redone = [r.step for r in snap.redone]
    diffs = [abs(r.first.loss - r.last.loss) for r in snap.redone]
    lr_diffs = [abs(r.first.lr - r.last.lr) for r in snap.redone]
    max_diff = max(diffs) if diffs else 0.0
    tol = 1e-4
    ok = all(d <= tol for d in diffs) and all(d <= 1e-12 for d in lr_diffs)
    return Check(
        id="dispatch.resume",
        status="pass" if ok else "warn",
        summary=(
            f"resumed from step(s) {', '.join(str(r.step) for r in resumes)}; {len(redone)} redone steps "
            f"match the interrupted run's loss within {max_diff:.2e} (tolerance {tol})"
        ),
        measured={
            "resumed_from": [r.step for r in resumes],
            "checkpoints": [r.checkpoint for r in resumes],
            "redone_steps": redone,
            "max_loss_diff": max_diff,
            "max_lr_diff": max(lr_diffs) if lr_diffs else 0.0,
            "tolerance": tol,
        },
        why="A resume restores optimizer, scheduler and RNG state; the redone steps show whether it really did.",
        playbook=PB_RESUME,
    )
