"""The contract's requested → effective resolution: every setting either honoured as requested,
resolved (an "auto" made concrete, with the reason) or refused with the reason — never silently
replaced. Hardware probes are cached per process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import digest_of
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stats import registry as metric_registry
from claimcheck.engine.training.hardware import Capability, probe
from claimcheck.engine.training.schema import Inputs

# What "auto" becomes per device, and why (bench/training.py measured the CPU costs; bench/README.md).
AUTO_ADAPTER = {
    "cuda": ("qlora", "a GPU: 4-bit NF4 base weights (bf16 compute) + LoRA"),
    "cpu": (
        "lora",
        "CPU: 4-bit weights save memory, not time, on CPU (bitsandbytes dequantises them for every "
        "matmul: a step costs what a LoRA step costs) while quantising at every model load (fitting "
        "check, job, artifact) doubles the load time (bench/HISTORY.md, training round 1)",
    ),
}


# ---------------------------------------------------------------- resolution: requested → effective

# The "requested" cell of a setting the contract's inputs do not hold, derived from the claim and the
# source (the loss weighting, a multi-label head); contract.requested_vs_effective names each one.
DERIVED = "(from the claim and source)"


class Resolution:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.refused: list[dict[str, str]] = []

    def same(self, setting: str, value: Any) -> Any:
        self.rows.append(
            {
                "setting": setting,
                "requested": _show(value),
                "effective": _show(value),
                "outcome": "as requested",
            }
        )
        return value

    def resolved(self, setting: str, requested: Any, effective: Any, how: str) -> Any:
        self.rows.append(
            {
                "setting": setting,
                "requested": _show(requested),
                "effective": _show(effective),
                "outcome": "resolved: " + how,
            }
        )
        return effective

    def refuse(self, setting: str, requested: Any, reason: str) -> None:
        self.rows.append(
            {
                "setting": setting,
                "requested": _show(requested),
                "effective": "REFUSED",
                "outcome": "refused: " + reason,
            }
        )
        self.refused.append({"setting": setting, "requested": _show(requested), "reason": reason})


def _show(v: Any) -> str:
    if isinstance(v, str):
        return v if v else '""'
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


@dataclass
class _Resolving:
    """One resolution in progress: the request, the table of outcomes, the effective contract."""

    inp: Inputs
    R: Resolution
    eff: dict[str, Any]
    facts: dict[str, Any]
    ws: Path
    claim: dict[str, Any]
    source_inputs: dict[str, Any]
    caps: Capability
    tok_dir: Path | None = None


def resolve(
    inp: Inputs,
    ctx: StageContext,
    claim: dict[str, Any],
    source_inputs: dict[str, Any],
    caps: Capability | None = None,
) -> tuple[dict, Resolution, dict]:
    """The effective contract, the side-by-side table with refusals, and identity facts.
    `caps`: the machine's capabilities (default: probed)."""
    R = Resolution()
    eff: dict[str, Any] = {"task_kind": R.same("task_kind", inp.task_kind)}
    if inp.task_kind == "tabular":
        R.refuse(
            "task_kind",
            "tabular",
            "tabular learners are the baseline stage's scikit-learn models; "
            "this stage contracts torch fine-tuning only",
        )
    s = _Resolving(inp, R, eff, {}, ctx.workspace, claim, source_inputs, caps or probe())
    for step in (
        _device,
        _identity,
        _adapter,
        _precision,
        _lora,
        _attention,
        _optimizer,
        _batch,
        _template,
        _over_time,
        _weighting,
        _head,
    ):
        step(s)
    return s.eff, s.R, s.facts


def _device(s: _Resolving) -> None:
    """The device: auto made concrete; cuda refused without a visible GPU."""
    inp, R, eff = s.inp, s.R, s.eff
    has_gpu = s.caps.cuda
    if inp.device == "auto":
        device = R.resolved(
            "device",
            "auto",
            "cuda" if has_gpu else "cpu",
            f"a GPU is visible ({s.caps.name})"
            if has_gpu and s.caps.name
            else "a GPU is visible"
            if has_gpu
            else "no GPU visible",
        )
    elif inp.device == "cuda" and not has_gpu:
        R.refuse("device", "cuda", "no CUDA GPU is visible on this machine")
        device = "cuda"
    else:
        device = R.same("device", inp.device)
    eff["device"] = device


def _identity(s: _Resolving) -> None:
    """Model and tokenizer identity: paths, hub revision, file manifests."""
    from claimcheck.engine.training import models

    inp, R, eff, ws = s.inp, s.R, s.eff, s.ws
    model_dir = models.resolve_model_path(inp.model_path, ws)
    eff["model_path"] = R.same("model_path", inp.model_path)
    tok_spec = inp.tokenizer_path or inp.model_path
    eff["tokenizer_path"] = (
        R.resolved("tokenizer_path", "", tok_spec, "same as model_path")
        if not inp.tokenizer_path
        else R.same("tokenizer_path", tok_spec)
    )
    tok_dir = models.resolve_model_path(tok_spec, ws)
    detected = models.hub_revision_of(model_dir)
    if inp.hub_revision and detected and inp.hub_revision != detected:
        R.refuse("hub_revision", inp.hub_revision, f"the local snapshot is revision {detected}")
        eff["hub_revision"] = inp.hub_revision
    elif inp.hub_revision and not detected:
        R.refuse(
            "hub_revision",
            inp.hub_revision,
            "the model folder is not a Hugging Face cache snapshot, "
            "so its revision cannot be confirmed; leave hub_revision empty or point at the cache",
        )
        eff["hub_revision"] = inp.hub_revision
    elif detected and not inp.hub_revision:
        eff["hub_revision"] = R.resolved("hub_revision", "", detected, "read from the cache snapshot path")
    else:
        eff["hub_revision"] = R.same("hub_revision", inp.hub_revision)
    model_manifest = models.file_manifest(model_dir)
    tok_manifest = model_manifest if tok_dir == model_dir else models.file_manifest(tok_dir)
    eff["model_sha256"] = digest_of(model_manifest)
    eff["tokenizer_sha256"] = digest_of(tok_manifest)
    s.facts.update(model_dir=model_dir, model_manifest=model_manifest, tok_manifest=tok_manifest)
    s.tok_dir = tok_dir


def _adapter(s: _Resolving) -> None:
    """Adapter mode and 4-bit quantisation (QLoRA needs a working NF4 round trip)."""
    inp, R, eff = s.inp, s.R, s.eff
    device = eff["device"]
    if inp.adapter_mode == "auto":
        pick, why = AUTO_ADAPTER["cuda" if device == "cuda" else "cpu"]
        mode = eff["adapter_mode"] = R.resolved("adapter_mode", "auto", pick, why)
    else:
        mode = eff["adapter_mode"] = R.same("adapter_mode", inp.adapter_mode)
    q = inp.quant
    if mode == "qlora":
        ok, why = s.caps.nf4(device)
        if not ok:
            R.refuse("adapter_mode", "qlora", why)
        if q.quant_type != "nf4":
            R.refuse(
                "quant.quant_type",
                q.quant_type,
                "fp4 is transformers' silent default; QLoRA's 4-bit "
                'weights are NF4 — set quant_type = "nf4"',
            )
        if q.compute_dtype == "float32":
            R.refuse(
                "quant.compute_dtype",
                q.compute_dtype,
                "float32 is transformers' silent default compute "
                "dtype for 4-bit layers; set bfloat16 explicitly",
            )
        elif q.compute_dtype == "float16" or inp.precision == "fp16":
            R.refuse(
                "quant.compute_dtype" if q.compute_dtype == "float16" else "precision",
                "float16",
                "fp16 with 4-bit weights overflows into NaN / zero loss; use bfloat16",
            )
    eff["quant"] = {
        "load_in_4bit": mode == "qlora",
        "quant_type": R.same("quant.quant_type", q.quant_type) if mode == "qlora" else q.quant_type,
        "double_quant": R.same("quant.double_quant", q.double_quant) if mode == "qlora" else q.double_quant,
        "compute_dtype": R.same("quant.compute_dtype", q.compute_dtype)
        if mode == "qlora"
        else q.compute_dtype,
    }
    if mode == "head" and inp.task_kind == "causal_lm_sft":
        R.refuse(
            "adapter_mode",
            "head",
            "head-only training is for classification heads; use lora or qlora for SFT",
        )


def _precision(s: _Resolving) -> None:
    """Mixed precision the local job can honour on the effective device."""
    inp, R, eff = s.inp, s.R, s.eff
    device = eff["device"]
    bf16_ok = device == "cuda" and s.caps.bf16
    if inp.precision == "auto":
        eff["precision"] = R.resolved(
            "precision",
            "auto",
            "bf16" if bf16_ok else "fp32",
            "the GPU supports bf16 autocast" if bf16_ok else f"no bf16 autocast on {device}: fp32",
        )
        return
    if inp.precision == "bf16" and not bf16_ok:
        R.refuse(
            "precision",
            "bf16",
            f"bf16 autocast is not supported on {device} by the local job "
            "(a GPU with bf16 is needed); use fp32 here",
        )
    elif inp.precision == "fp16" and device != "cuda":
        R.refuse("precision", "fp16", "fp16 mixed precision needs a CUDA GPU; use fp32 on CPU")
    eff["precision"] = R.same("precision", inp.precision)


def _attention(s: _Resolving) -> None:
    """The attention kernel: "auto" is SDPA (torch's fused scaled-dot-product attention) where the
    architecture supports it, else the eager implementation; a request the model cannot honour is refused."""
    inp, R, eff = s.inp, s.R, s.eff
    meta = s.facts.get("meta")
    if meta is None:  # tabular: no torch model
        eff["attn_implementation"] = ""
        return
    supported = bool(getattr(type(meta), "_supports_sdpa", False))
    if inp.attn_implementation == "auto":
        pick = "sdpa" if supported else "eager"
        why = "the architecture supports SDPA" if supported else "the architecture has no SDPA path"
        eff["attn_implementation"] = R.resolved("attn_implementation", "auto", pick, why)
        return
    if inp.attn_implementation == "sdpa" and not supported:
        R.refuse("attn_implementation", "sdpa", "this architecture has no SDPA attention in transformers")
    eff["attn_implementation"] = R.same("attn_implementation", inp.attn_implementation)


def _lora(s: _Resolving) -> None:
    """LoRA settings, targets checked against the real architecture (meta device, no weights)."""
    from claimcheck.engine.training import models

    inp, R, eff, ws, claim = s.inp, s.R, s.eff, s.ws, s.claim
    mode = eff["adapter_mode"]
    eff["lora"] = {
        "r": inp.lora.r,
        "alpha": inp.lora.alpha,
        "dropout": inp.lora.dropout,
        "target_modules": inp.lora.target_modules,
    }
    if inp.task_kind != "tabular":
        meta = models.meta_model(
            {"model_path": inp.model_path, "task_kind": inp.task_kind},
            ws,
            num_labels=max(2, len(claim.get("class_order") or []))
            if inp.task_kind == "text_classification"
            else None,
        )
        s.facts["meta"] = meta
        max_pos = int(getattr(meta.config, "max_position_embeddings", 0) or 0)
        if max_pos and inp.max_length > max_pos:
            R.refuse("max_length", inp.max_length, f"the model's position table has {max_pos} positions")
        if mode in ("lora", "qlora"):
            hits = models.match_targets(meta, inp.lora.target_modules)
            s.facts["target_hits"] = hits
            for name, found in hits.items():
                if not found:
                    linear = sorted({n.split(".")[-1] for n in models.linear_names(meta)})
                    R.refuse(
                        "lora.target_modules",
                        name,
                        f"matches no linear layer; this model's linear layer names are {linear}",
                    )
            if all(hits.values()):
                R.same("lora.target_modules", inp.lora.target_modules)
    eff["max_length"] = R.same("max_length", inp.max_length)


def _optimizer(s: _Resolving) -> None:
    """Optimizer and schedule."""
    inp, R, eff = s.inp, s.R, s.eff
    device = eff["device"]
    opt = inp.optimizer
    if opt.name == "paged_adamw_8bit" and device != "cuda":
        R.refuse("optimizer.name", opt.name, "paged 8-bit AdamW needs a CUDA GPU")
    head_lr = opt.head_lr or opt.lr
    if not opt.head_lr and inp.task_kind == "text_classification":
        R.resolved("optimizer.head_lr", 0.0, head_lr, "0 means the same as lr")
    eff["optimizer"] = {
        "name": R.same("optimizer.name", opt.name),
        "lr": R.same("optimizer.lr", opt.lr),
        "head_lr": head_lr,
        "weight_decay": R.same("optimizer.weight_decay", opt.weight_decay),
    }
    eff["max_grad_norm"] = R.same("optimizer.max_grad_norm", opt.max_grad_norm)
    eff["schedule"] = {
        "name": R.same("schedule.name", inp.schedule.name),
        "warmup_ratio": R.same("schedule.warmup_ratio", inp.schedule.warmup_ratio),
    }


# Why packing is refused, and what to use instead (docs/contract.md, "Packing").
PACKING_REFUSAL = (
    "packing is refused: the job's attention (sdpa / eager, transformers 5.24, CPU or GPU) has no "
    "per-example isolation, so packed examples would attend to each other; isolation needs "
    "flash-attention varlen kernels fed per-example position_ids, which this job does not use. "
    "Use packing = false: each example is its own sequence and every batch is padded only to its "
    "own longest row"
)


def _batch(s: _Resolving) -> None:
    """Batch arithmetic, step budget and packing."""
    inp, R, eff = s.inp, s.R, s.eff
    for k in ("micro_batch", "grad_accum", "dp_replicas"):
        eff[k] = R.same(k, getattr(inp, k))
    eff["effective_batch"] = R.resolved(
        "effective_batch",
        "(derived)",
        inp.micro_batch * inp.grad_accum * inp.dp_replicas,
        "micro_batch × grad_accum × dp_replicas",
    )
    for k in ("epochs", "max_steps", "seed", "gradient_checkpointing"):
        eff[k] = R.same(k, getattr(inp, k))
    if inp.packing:
        R.refuse(
            "packing",
            True,
            PACKING_REFUSAL,
        )
    eff["packing"] = False


def _template(s: _Resolving) -> None:
    """Template and objective: the text template's columns, or the chat template for SFT."""
    from claimcheck.engine.training.prepare import has_generation_markers, template_fields

    inp, R, eff, source_inputs = s.inp, s.R, s.eff, s.source_inputs
    allowed = _allowed_columns(source_inputs)
    if inp.task_kind == "text_classification":
        template = inp.text_template or default_text_template(source_inputs)
        fields = template_fields(template)
        if not fields:
            R.refuse(
                "text_template",
                inp.text_template,
                "refers to no column, so the model would see constant text"
                if inp.text_template
                else "is empty and the source declares no text model input (text_columns) to derive it "
                "from; give a text_template",
            )
        bad = [f for f in fields if f not in allowed]
        if bad:
            R.refuse(
                "text_template",
                inp.text_template,
                f"uses column(s) {bad} that are not model inputs "
                f"(model inputs: {allowed}; unavailable, sensitive or unknown columns are excluded)",
            )
        eff["text_template"] = (
            R.same("text_template", template)
            if inp.text_template
            else R.resolved("text_template", "", template, "derived from the source's text columns")
        )
        eff["objective"] = "cross_entropy_over_classes"
        eff["chat_template"] = ""
        eff["chat_template_sha256"] = ""
        eff["messages_column"] = ""
    else:
        eff["text_template"] = ""
        eff["objective"] = "causal_lm_next_token_on_assistant_turns"
        tok_template = _tokenizer_template(s.tok_dir)
        chat = inp.chat_template or tok_template
        if not chat:
            R.refuse("chat_template", "", "the tokenizer has no chat template; give one in chat_template")
        elif inp.chat_template:
            R.same("chat_template", "(text, sha256 " + digest_of(chat)[7:19] + ")")
        else:
            R.resolved(
                "chat_template",
                "",
                "(tokenizer's, sha256 " + digest_of(chat)[7:19] + ")",
                "the tokenizer's own template",
            )
        eff["chat_template"] = chat
        eff["chat_template_sha256"] = digest_of(chat)
        s.facts["generation_markers"] = has_generation_markers(chat)
        if inp.messages_column not in allowed and not {"prompt", "response"} <= set(allowed):
            R.refuse(
                "messages_column",
                inp.messages_column,
                f"is not a model input column (model inputs: {allowed})",
            )
        eff["messages_column"] = R.same("messages_column", inp.messages_column)
    eff["target_turn_policy"] = R.same("target_turn_policy", inp.target_turn_policy)


def _over_time(s: _Resolving) -> None:
    """What the job does over time: evaluation, checkpoints, stopping, required checks, alarms."""
    inp, R, eff, claim = s.inp, s.R, s.eff, s.claim
    for k in (
        "eval_every_steps",
        "eval_rows",
        "checkpoint_every_steps",
        "checkpoint_selection",
        "stopping_rule",
        "patience_evals",
        "required_checks",
        "on_required_fail",
    ):
        eff[k] = R.same(k, getattr(inp, k))
    eff["dev_metric"] = str(
        claim.get("primary_metric") or ("macro_f1" if inp.task_kind == "text_classification" else "dev_loss")
    )
    classes = [str(c) for c in claim.get("class_order") or []]
    if metric_registry.positive_index(claim, classes) >= 0:
        eff["positive_class"] = str(claim["positive_class"])
    eff["alarms"] = inp.alarms.model_dump(mode="json")


def _weighting(s: _Resolving) -> None:
    """The source's sample weights in the job: a weighted training loss, and the dev metric weighted
    when the claim's metric_weighting says so. Written only when the source declares a weight
    column (a contract without one keeps its digest)."""
    from claimcheck.engine.data import weights

    name = weights.column(s.source_inputs)
    if not name:
        return
    if s.inp.task_kind != "text_classification":
        s.R.refuse(
            "loss_weighting",
            f"sample_weight ('{name}')",
            "a weighted loss is built for text classification; leave the source's weight_column empty",
        )
        return
    s.eff["weight_column"] = name
    s.eff["loss_weighting"] = s.R.resolved(
        "loss_weighting",
        DERIVED,
        weights.SAMPLE_WEIGHT,
        f"the source declares weight column '{name}': the loss is sum(w * l) / sum(w) per optimizer step",
    )
    metric = str(s.claim.get("metric_weighting") or "unweighted")
    s.eff["metric_weighting"] = s.R.resolved(
        "metric_weighting", DERIVED, metric, "the claim's metric_weighting: the job's dev metric"
    )


def _head(s: _Resolving) -> None:
    """A multi-label claim's head: sigmoid outputs trained with BCEWithLogits (written only then)."""
    if str(s.claim.get("target_type") or "") != "multi_label":
        return
    if s.inp.task_kind != "text_classification":
        s.R.refuse("target_type", "multi_label", "a multi-label head is built for text classification")
        return
    s.eff["target_type"] = s.R.resolved(
        "target_type",
        DERIVED,
        "multi_label",
        "the claim's target_type: a sigmoid head per label, BCEWithLogits loss "
        "(problem_type multi_label_classification), dev metric at threshold 0.5",
    )


def default_text_template(source_inputs: dict[str, Any]) -> str:
    """The text template when none is given: the source's text model inputs, one per line, in order
    ('{subject}\\n{body}' for the sample data); '' when it declares none."""
    from claimcheck.engine.data.rows import text_inputs

    return "\n".join("{" + c + "}" for c in text_inputs(source_inputs))


def _allowed_columns(source_inputs: dict[str, Any]) -> list[str]:
    from claimcheck.engine.data.rows import model_inputs

    return model_inputs(source_inputs)


def _tokenizer_template(tok_dir: Path) -> str:
    jinja = tok_dir / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text("utf-8")
    import json

    cfg = tok_dir / "tokenizer_config.json"
    if cfg.is_file():
        t = json.loads(cfg.read_text("utf-8")).get("chat_template") or ""
        return t if isinstance(t, str) else ""
    return ""
