"""Contract stage: one executable training contract, verified on the real prepared inputs.

Requested settings are resolved into the effective contract side by side; a request that cannot be
honoured here is refused with its reason, never replaced. Then the engine measures the actual
tokenised train split (lengths, truncation, supervised tokens, EOS, labels, excluded columns),
estimates memory, and runs a tiny fitting check under a go / no-go rule fixed in the inputs.
The digest of the effective contract is the training job's identity.

Playbook: "Freeze one executable training contract", "Use a bounded fitting sanity check".
"""

from __future__ import annotations

import math
import platform
from typing import Any

from claimcheck.engine.evidence import Check, StageRecord, digest_of
from claimcheck.engine.pipeline.checks import declaration, not_run
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.contract.checks import PB_PIN, PB_REQ, FitMaterial, verify_and_fit
from claimcheck.engine.training.hardware import cuda_available
from claimcheck.engine.training.resolve import DERIVED, Resolution, resolve
from claimcheck.engine.training.schema import Inputs

TITLE = "Contract"
CALLER = "contract"

# ---------------------------------------------------------------- data


def _split_rows(split: str, upstream: dict[str, StageRecord], ctx: StageContext):
    from claimcheck.engine.data import splits

    return splits.rows(split, upstream, ctx, caller=CALLER)


# ---------------------------------------------------------------- the stage


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    for need in ("source", "split"):
        if need not in upstream:
            raise StageInputError(f"the contract stage needs a frozen {need} stage first")
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    if claim.get("task_kind") == "retrieval":
        return _encoder(inputs, upstream, ctx, fine_tuning=claim.get("fine_tuning") is not False)
    if claim.get("fine_tuning") is False:
        if inputs.search is not None:
            raise StageInputError(
                "contract.search: a search tunes a fine-tuning job; this claim has fine_tuning = false "
                "(its candidate is a scikit-learn learner): remove [contract.search]"
            )
        return _sklearn(inputs, upstream, ctx)
    source_inputs = upstream["source"].inputs
    ctx.progress(None, "resolving the requested contract")
    eff, res, facts = resolve(inputs, ctx, claim, source_inputs)

    ctx.progress(None, "reading the train split")
    train = _split_rows("train", upstream, ctx)
    if train.height == 0:
        raise StageInputError("the train split is empty")
    checks: list[Check] = []
    labels_present: list[str] = []
    if eff["task_kind"] == "text_classification":
        labels_present = sorted({str(t) for t in train["target"].to_list()})
        if eff.get("target_type") == "multi_label":  # each target is a label set
            from claimcheck.engine.data.labelsets import split_one

            labels_present = sorted({lab for t in labels_present for lab in split_one(t)})
        order = [str(c) for c in claim.get("class_order") or []]
        classes = order or labels_present
        eff["label_classes"] = res.resolved(
            "label_classes",
            order,
            classes,
            "the claim's class_order" if order else "sorted classes present in train",
        )
        missing = [c for c in labels_present if c not in classes]
        if missing:
            res.refuse("label_classes", classes, f"train has classes {missing} that the class order lacks")
    else:
        eff["label_classes"] = []
    steps_per_epoch = math.ceil(train.height / eff["effective_batch"])
    eff["optimizer_steps"] = eff["max_steps"] or steps_per_epoch * eff["epochs"]
    eff["schedule"]["warmup_steps"] = int(math.ceil(eff["schedule"]["warmup_ratio"] * eff["optimizer_steps"]))
    _alarm_within_budget(eff, res)
    eff["data"] = _data_identity(upstream, train.height)
    if inputs.search is not None:
        from claimcheck.engine.stages.contract.tuning import tune

        eff, search_checks = tune(inputs.search, eff, res, upstream, ctx, facts.get("meta"))
        checks.extend(search_checks)

    checks.append(_requested_vs_effective(res))
    checks.append(_model_identity(eff, facts))
    checks.append(_data_identity_check(eff))
    checks.append(_environment(eff))

    refused = bool(res.refused)
    if refused:
        why = "not run: the contract has refused settings (see contract.requested_vs_effective)"
        for cid in ("prepared_lengths", "prepared_columns", "effective_batch", "memory", "fit_check"):
            checks.append(not_run(f"contract.{cid}", why))
    else:
        checks.extend(
            verify_and_fit(FitMaterial(inputs, eff, facts, train, source_inputs, labels_present, ctx))
        )

    return _sealed(inputs, eff, res, checks)


def _alarm_within_budget(eff: dict[str, Any], res: Resolution) -> None:
    """An alarm that could never fire under the contract is refused: the worse-than-trivial alarm's
    step past the step budget. The default step (not a choice) is resolved to half-way, said so."""
    from claimcheck.engine.training.schema import Alarms

    alarms, budget = eff["alarms"], int(eff["optimizer_steps"])
    after = int(alarms["worse_than_trivial_after_step"])
    if "worse_than_trivial" in alarms["disabled"] or after <= budget:
        return
    setting = "alarms.worse_than_trivial_after_step"
    if after == Alarms.model_fields["worse_than_trivial_after_step"].default:
        why = f"the default step {after} lies past the {budget}-step budget: judged from half-way (step {budget // 2})"
        alarms["worse_than_trivial_after_step"] = res.resolved(setting, after, -1, why)
        return
    res.refuse(
        setting,
        after,
        f"the worse_than_trivial alarm could never fire: step {after} lies past the contract's "
        f"{budget}-step budget; choose a step ≤ {budget}, -1 (from half-way), or disable the alarm",
    )


def _sklearn(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    """claim.fine_tuning = false: the candidate is a pinned scikit-learn learner (contract_sklearn)."""
    from claimcheck.engine.stages.contract.learner import sklearn_contract

    eff, res, candidate, rows = sklearn_contract(inputs, upstream, ctx)
    eff["data"] = _data_identity(upstream, rows)
    checks = [_requested_vs_effective(res), candidate, _data_identity_check(eff), _environment(eff)]
    return _sealed(inputs, eff, res, checks)


def _encoder(
    inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext, fine_tuning: bool
) -> StageRecord:
    """A retrieval claim: the pinned unchanged encoder, or (fine_tuning) the contrastive LoRA job."""
    from claimcheck.engine.retrieval.contract import finetune_contract
    from claimcheck.engine.retrieval.stages import contract_candidate

    pin = finetune_contract if fine_tuning else contract_candidate
    eff, res, candidate, rows = pin(inputs, upstream, ctx)
    eff["data"] = _data_identity(upstream, rows)
    checks = [_requested_vs_effective(res), candidate, _data_identity_check(eff), _environment(eff)]
    return _sealed(inputs, eff, res, checks)


def _sealed(inputs: Inputs, eff: dict[str, Any], res: Resolution, checks: list[Check]) -> StageRecord:
    """The effective contract and its digest appended: the record the later stages read."""
    refused = bool(res.refused)
    digest = digest_of(eff)
    checks.append(
        Check(
            id="contract.effective",
            status="fail" if refused else "pass",
            summary=(
                f"{len(res.refused)} refused setting(s): the contract cannot run as requested; edit it"
                if refused
                else f"effective contract pinned ({len(eff)} fields)"
            ),
            measured={"effective": eff, "refused": res.refused},
            why="The job trains from exactly this dictionary; nothing it does is left to a library default.",
            playbook=PB_PIN,
        )
    )
    checks.append(
        Check(
            id="contract.digest",
            status="fail" if refused else "pass",
            summary=f"contract digest {digest[:19]}…"
            + (" (of a refused contract — not dispatchable)" if refused else ""),
            measured={"digest": digest},
            why="The digest of the effective contract is the training job's identity: same digest, same job.",
            playbook=declaration("contract.digest").playbook,
        )
    )
    return StageRecord(
        stage="contract", inputs=inputs.model_dump(mode="json", exclude_none=True), checks=checks
    )


def _data_identity(upstream: dict[str, StageRecord], train_rows: int) -> dict[str, Any]:
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    sums = parse(upstream["source"].check("source.checksum"), shapes.Checksum)
    mem = parse(upstream["split"].check("split.membership"), shapes.Membership)
    return {
        "source_files": [f"{f.path}:{f.sha256}" for f in sums.files] if sums else [],
        "split_sha256": mem.sha256 if mem else "",
        "source_record": upstream["source"].provenance.digest,
        "split_record": upstream["split"].provenance.digest,
        "train_rows": train_rows,
    }


def _requested_vs_effective(res: Resolution) -> Check:
    n_resolved = sum(1 for r in res.rows if r["outcome"].startswith("resolved"))
    if res.refused:
        summary = "REFUSED: " + "; ".join(
            f"{r['setting']} = {r['requested']}: {r['reason']}" for r in res.refused
        )
    else:
        summary = f"{len(res.rows)} settings: {len(res.rows) - n_resolved} as requested, {n_resolved} resolved, none refused"
        derived = [r for r in res.rows if r["requested"] == DERIVED]
        if derived:
            summary += "; from the claim and source: " + "; ".join(
                f"{r['setting']} = {r['effective']} ({r['outcome'].removeprefix('resolved: ')})"
                for r in derived
            )
    return Check(
        id="contract.requested_vs_effective",
        status="fail" if res.refused else "pass",
        basis="measured",
        summary=summary,
        measured={"table": res.rows, "refused": res.refused},
        why="A setting that cannot be honoured here is refused with its reason, never silently replaced.",
        playbook=PB_REQ,
    )


def _model_identity(eff: dict, facts: dict) -> Check:
    mm, tm = facts["model_manifest"], facts["tok_manifest"]
    weights = [f for f in mm if f["file"].endswith((".safetensors", ".bin"))]
    status = "pass" if weights else "fail"
    return Check(
        id="contract.model_identity",
        status=status,
        summary=(
            f"{eff['model_path']}: {len(mm)} files hashed ({sum(f['bytes'] for f in weights):,} weight bytes)"
            + (
                f", revision {eff['hub_revision']}"
                if eff["hub_revision"]
                else ", local folder (no hub revision)"
            )
            if weights
            else f"{eff['model_path']}: no weight file (.safetensors / .bin) in the folder"
        ),
        measured={
            "model_sha256": eff["model_sha256"],
            "tokenizer_sha256": eff["tokenizer_sha256"],
            "hub_revision": eff["hub_revision"],
            "model_files": mm,
            "tokenizer_files": tm,
        },
        why="The same name can hold different weights; the manifest pins the exact files the job loads.",
        playbook=PB_PIN,
    )


def _data_identity_check(eff: dict) -> Check:
    d = eff["data"]
    ok = bool(d["source_files"]) and bool(d["split_sha256"])
    sk = eff.get("sklearn") or {}
    # a scikit-learn candidate is fitted on its contracted rows: train, or train + dev
    rows = (
        f"{d['train_rows']:,} rows the candidate is fitted on ({str(sk['fit_rows']).replace('_', ' + ')})"
        if sk.get("fit_rows")
        else f"{d['train_rows']:,} train rows"
    )
    return Check(
        id="contract.data_identity",
        status="pass" if ok else "warn",
        summary=(
            f"{len(d['source_files'])} source file(s) and the split membership pinned by sha256; {rows}"
            if ok
            else "source checksum or split membership hash missing upstream"
        ),
        measured=dict(d),
        why="Training data must be exactly the data the split and baseline stages measured.",
        playbook=PB_PIN,
    )


def _claimcheck_version() -> dict[str, str]:
    """This claimcheck's version and, from a git checkout, its commit ("" for an installed wheel)."""
    from claimcheck.engine import __version__
    from claimcheck.engine.version import git_commit

    return {"version": __version__, "commit": git_commit() or ""}


def _environment(eff: dict) -> Check:
    from claimcheck.engine import threads
    from claimcheck.engine.artifact.sklearn_candidate import VERSIONED
    from claimcheck.engine.training import stamp

    sklearn = eff.get("candidate_kind") == "sklearn"
    versions = stamp.library_versions(VERSIONED if sklearn else stamp.TORCH_STACK)
    hw: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "platform": platform.platform(terse=True),
        "device": eff.get("device", "cpu"),
    }
    # cpu_count, and the cap every scikit-learn / numpy fit runs under (engine/threads.py)
    hw.update(threads.record())
    if hw["device"] == "cuda" and cuda_available():
        import torch

        hw["gpu"] = torch.cuda.get_device_name(0)
    return Check(
        id="contract.environment",
        status="info",
        summary="libraries: "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f"; {hw['device']} on {hw['machine']}",
        # every engine source file's sha256: a job's runtime stamp is held to it (dispatch.runtime)
        measured={
            "versions": versions,
            "hardware": hw,
            "claimcheck": _claimcheck_version(),
            "engine": stamp.environment_record(),
        },
        replay="observation",
        why="Seeds aid repeatability but do not guarantee bitwise agreement across runtimes or devices.",
        playbook=PB_PIN,
    )
