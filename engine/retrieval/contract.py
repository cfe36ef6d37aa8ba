"""The contract of a retrieval claim with fine_tuning = true: the contrastive LoRA job, pinned.

The effective contract is the classification job's table (task_kind "retrieval", candidate_kind
"torch": dispatched as a job) with the unchanged encoder pinned beside it (`encoder`, the base_model
arm the artifact stage scores) and the job's retrieval settings (`retrieval`: the loss, the tracked
ranking metric, the train pairs, the source's columns). Settings the retrieval job does not carry out
are refused with the reason, never replaced: see REFUSED.
"""

from __future__ import annotations

import math
from typing import Any

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.retrieval import data as rdata
from claimcheck.engine.retrieval import finetune

# requested setting -> (the value the job supports, why another value is refused)
REFUSED: dict[str, tuple[Any, str]] = {
    "adapter_mode": ("lora", 'the retrieval job trains LoRA adapters on the encoder (adapter_mode = "lora")'),
    "precision": ("fp32", "the retrieval job trains in fp32 on the CPU"),
    "device": ("auto", 'the retrieval job runs on the CPU (device "auto" or "cpu")'),
    "grad_accum": (
        1,
        "in-batch negatives come from one micro-batch: accumulating micro-batches would change the loss",
    ),
    "dp_replicas": (1, "the retrieval job runs one replica"),
    "packing": (False, "pairs are not packed"),
    "gradient_checkpointing": (False, "not wired into the retrieval job"),
    "text_template": ("", "the job reads the query and document columns of [source.retrieval] as they are"),
    "eval_rows": (0, "the dev metric ranks every dev query"),
    "tokenizer_path": ("", "the encoder's own tokenizer is used"),
    "hub_revision": ("", "the encoder is read from a local folder"),
}


def _refusals(inputs: Any, res: Any) -> None:
    for name, (allowed, why) in REFUSED.items():
        value = getattr(inputs, name)
        if name == "device" and value == "cpu":
            continue
        if value != allowed:
            res.refuse(name, value, why)
    if inputs.search is not None:
        res.refuse("search", "declared", "a tuning search of the retrieval job is not built")


def finetune_contract(
    inputs: Any, upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[dict[str, Any], Any, Check, int]:
    """The effective contract of the contrastive LoRA job; its candidate check; the train pairs."""
    from claimcheck.engine.data import splits
    from claimcheck.engine.retrieval.stages import _k, _metric, contract_candidate
    from claimcheck.engine.training import stamp
    from claimcheck.engine.training.models import resolve_model_path
    from claimcheck.engine.training.schema import Alarms

    eff, res, _, _ = contract_candidate(inputs, upstream, ctx)  # the unchanged encoder, pinned
    _refusals(inputs, res)
    cols = rdata.columns(upstream["source"].inputs)
    train = splits.rows("train", upstream, ctx, caller="contract")
    n_pairs = sum(1 for g in train["target"].to_list() if rdata.grade(g) > 0)
    if n_pairs == 0:
        raise StageInputError("the train split holds no relevant (query, document) pair to fine-tune on")
    path = resolve_model_path(inputs.model_path, ctx.workspace)
    digest, _files = stamp.model_digest(path)
    steps = inputs.max_steps or math.ceil(n_pairs / inputs.micro_batch) * inputs.epochs
    metric, k = _metric(upstream), _k(upstream)
    eff.update(
        candidate_kind="torch",
        device="cpu",
        model_sha256=digest,  # as the job's runtime stamp digests the folder it loads
        adapter_mode="lora",
        lora=res.same("lora", inputs.lora.model_dump(mode="json")),
        max_length=res.same("max_length", inputs.max_length),
        optimizer={
            "name": res.same("optimizer.name", inputs.optimizer.name),
            "lr": res.same("optimizer.lr", inputs.optimizer.lr),
            "head_lr": 0.0,
            "weight_decay": res.same("optimizer.weight_decay", inputs.optimizer.weight_decay),
        },
        max_grad_norm=res.same("optimizer.max_grad_norm", inputs.optimizer.max_grad_norm),
        schedule={
            "name": res.same("schedule.name", inputs.schedule.name),
            "warmup_ratio": res.same("schedule.warmup_ratio", inputs.schedule.warmup_ratio),
            "warmup_steps": int(math.ceil(inputs.schedule.warmup_ratio * steps)),
        },
        micro_batch=res.same("micro_batch", inputs.micro_batch),
        effective_batch=inputs.micro_batch,
        epochs=res.same("epochs", inputs.epochs),
        max_steps=res.same("max_steps", inputs.max_steps),
        optimizer_steps=steps,
        eval_every_steps=res.same("eval_every_steps", inputs.eval_every_steps),
        checkpoint_every_steps=res.same("checkpoint_every_steps", inputs.checkpoint_every_steps),
        checkpoint_selection=res.same("checkpoint_selection", inputs.checkpoint_selection),
        stopping_rule=res.same("stopping_rule", inputs.stopping_rule),
        patience_evals=res.same("patience_evals", inputs.patience_evals),
        dev_metric=res.resolved("dev_metric", "", metric, "the claim's primary ranking metric"),
        alarms=inputs.alarms.model_dump(mode="json"),
        objective=finetune.LOSS,
        retrieval={
            "loss": finetune.LOSS,
            "loss_scale": finetune.LOSS_SCALE,
            "metric": metric,
            "ranking_k": k,
            "train_pairs": n_pairs,
            "columns": {
                "query_id": cols.query_id_column,
                "query": cols.query_column,
                "doc_id": cols.doc_id_column,
                "passage": cols.doc_column,
            },
        },
    )
    after = int(eff["alarms"]["worse_than_trivial_after_step"])
    if after > steps and after == Alarms.model_fields["worse_than_trivial_after_step"].default:
        why = f"the default step {after} lies past the {steps}-step budget: judged from half-way"
        eff["alarms"]["worse_than_trivial_after_step"] = res.resolved(
            "alarms.worse_than_trivial_after_step", after, -1, why
        )
    check = Check(
        id="contract.candidate",
        status="pass",
        summary=(
            f"a contrastive LoRA fine-tune of {inputs.model_path} (r = {inputs.lora.r}, "
            f"{finetune.LOSS}, in-batch negatives) on {n_pairs} train (query, relevant document) pairs, "
            f"{steps} steps of {inputs.micro_batch} pairs; dev {metric} (k = {k}) tracked; dispatched as a job. "
            f"The unchanged encoder ({eff['encoder']['model_sha256'][7:19]}…) is pinned as the base_model arm"
        ),
        measured={
            "candidate_kind": "torch",
            "loss": finetune.LOSS,
            "train_pairs": n_pairs,
            "optimizer_steps": steps,
            "encoder": eff["encoder"],
        },
        why="A retrieval claim's fine-tuned encoder is trained from the train pairs only, under this contract.",
        playbook=declaration("contract.candidate").playbook,
    )
    return eff, res, check, train.height
