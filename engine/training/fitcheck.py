"""The tiny fitting check: can the contracted model, adapter, template and masks fit a small
representative slice of train? A different question from quality — memorising a slice says
nothing about generalisation.

The go / no-go rule is a value fixed before the run (the contract input `fit_check.go_rule`),
recorded with the result, and evaluated by `verdict()` — never chosen after seeing the curve.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.training import models
from claimcheck.engine.training.prepare import IGNORE, Prepared

DIAGNOSIS_ORDER = (
    "target mapping",
    "masks",
    "trainable parameters",
    "learning rates",
    "gradients",
    "precision",
    "optimizer",
)


def rule_text(go_rule: dict[str, Any]) -> str:
    parts = [f"eval loss on the slice after training ≤ {go_rule['max_loss_ratio']} × before"]
    if go_rule.get("min_slice_accuracy", 0) > 0:
        parts.append(f"slice accuracy ≥ {go_rule['min_slice_accuracy']}")
    parts.append("every trainable parameter group has a finite non-zero gradient at step 1")
    parts.append("every LoRA B matrix has moved off zero (LoRA modes)")
    parts.append("no non-finite loss")
    return "; ".join(parts)


def select_slice(ids: list[Any], labels: list[Any] | None, n: int) -> list[int]:
    """Positions of a representative slice: round-robin over classes (in class order, each class in
    id order) for classification, evenly spaced in id order otherwise. Deterministic."""
    order = sorted(range(len(ids)), key=lambda i: str(ids[i]))
    if n >= len(order):
        return order
    if labels is None:
        step = len(order) / n
        return [order[int(k * step)] for k in range(n)]
    by_class: dict[str, list[int]] = {}
    for i in order:
        by_class.setdefault(str(labels[i]), []).append(i)
    queues = [by_class[c] for c in sorted(by_class)]
    out: list[int] = []
    k = 0
    while len(out) < n:
        q = queues[k % len(queues)]
        j = k // len(queues)
        if j < len(q):
            out.append(q[j])
        k += 1
        if k > n * len(queues) + len(order):
            break
    return sorted(out, key=lambda i: str(ids[i]))


def _autocast(effective: dict, device: str):
    import contextlib

    import torch

    if effective.get("precision") == "bf16":
        return torch.autocast(device_type="cuda" if device == "cuda" else "cpu", dtype=torch.bfloat16)
    if effective.get("precision") == "fp16" and device == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.float16)
    return contextlib.nullcontext()


def _to(batch: dict, device: str) -> dict:
    return {k: v.to(device) for k, v in batch.items()}


def evaluate_slice(model, prepared: Prepared, effective: dict, device: str) -> tuple[float, float]:
    """(mean loss, accuracy) on the prepared slice, eval mode, no dropout. Accuracy is per example
    for classification, per label decision (at 0.5) for multi-label and per supervised token for SFT."""
    import torch

    mb = max(1, int(effective["micro_batch"]))
    model.eval()
    loss_sum = 0.0
    weight = correct = total = 0
    with torch.no_grad(), _autocast(effective, device):
        for start in range(0, len(prepared), mb):
            idx = list(range(start, min(len(prepared), start + mb)))
            batch = _to(prepared.collate(idx), device)
            out = model(**batch)
            logits = out.logits.float()
            if prepared.task_kind == "causal_lm_sft":
                pred = logits[:, :-1].argmax(-1)
                gold = batch["labels"][:, 1:]
                keep = gold != IGNORE
                n = int(keep.sum())
                correct += int((pred[keep] == gold[keep]).sum())
                total += n
                loss_sum += float(out.loss) * n
                weight += n
            elif prepared.multi_label:  # each label decision (logit > 0, probability > 0.5) counts
                correct += int(((logits > 0).float() == batch["labels"]).sum())
                total += int(batch["labels"].numel())
                loss_sum += float(out.loss) * len(idx)
                weight += len(idx)
            else:
                correct += int((logits.argmax(-1) == batch["labels"]).sum())
                total += len(idx)
                loss_sum += float(out.loss) * len(idx)
                weight += len(idx)
    model.train()
    return (loss_sum / weight if weight else float("nan")), (correct / total if total else 0.0)


def _group_norms(model) -> tuple[dict[str, float], int]:
    sq: dict[str, float] = {}
    without = 0
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        g = models.param_group_of(name)
        sub = "adapters.lora_A" if "lora_A" in name else "adapters.lora_B" if "lora_B" in name else g
        if p.grad is None:
            without += 1
            sq.setdefault(g, 0.0)
            continue
        v = float(p.grad.detach().float().pow(2).sum())
        sq[g] = sq.get(g, 0.0) + v
        if sub != g:
            sq[sub] = sq.get(sub, 0.0) + v
    return {k: math.sqrt(v) for k, v in sorted(sq.items())}, without


def _head_sizes(model) -> list[int]:
    """Output sizes of the classification head's linear layer(s) (original and peft's trained copy)."""
    import torch

    sizes = set()
    for name, mod in model.named_modules():
        parts = name.split(".")
        if (
            isinstance(mod, torch.nn.Linear)
            and any(p in ("classifier", "score") for p in parts)
            and "lora_" not in name
        ):
            sizes.add(int(mod.out_features))
    return sorted(sizes)


def _lora_b(model) -> dict[str, Any]:
    norms = [float(p.detach().float().norm()) for n, p in model.named_parameters() if "lora_B" in n]
    moved = sum(1 for v in norms if v > 0)
    return {
        "lora_b_matrices": len(norms),
        "lora_b_moved": moved,
        "lora_b_min_norm": min(norms) if norms else 0.0,
    }


@dataclass
class FitSettings:
    """How one fitting check runs: where, how many steps at which constant learning rate."""

    workspace: Path
    device: str
    steps: int
    lr: float
    progress: Callable[[float | None, str], None] | None = None
    check_cancelled: Callable[[], None] | None = None


@dataclass
class _Loop:
    """What the step loop measured."""

    curve: list[float] = field(default_factory=list)
    step1: dict[str, float] = field(default_factory=dict)
    no_grad_params: int = 0
    nonfinite: int = 0
    micro_batch: int = 1


def _fit_contract(effective: dict, lr: float) -> dict:
    """The contract as the fitting check trains it: constant learning rate `lr` (the head scaled
    with the body), no warm-up."""
    fit_eff = dict(effective)
    base_lr = float(effective["optimizer"]["lr"])
    head_lr = float(effective["optimizer"].get("head_lr") or 0.0)
    fit_eff["optimizer"] = dict(
        effective["optimizer"], lr=lr, head_lr=(head_lr / base_lr * lr) if head_lr else 0.0
    )
    fit_eff["schedule"] = {"name": "constant", "warmup_ratio": 0.0}
    return fit_eff


def _steps(model: Any, prepared: Prepared, fit_eff: dict, s: FitSettings, optim: tuple[Any, Any]) -> _Loop:
    import torch

    optimizer, scheduler = optim
    # max_grad_norm is a top-level setting of the effective contract (0: no clipping)
    max_norm = float(fit_eff.get("max_grad_norm", 1.0) or 0.0)
    loop = _Loop(micro_batch=max(1, min(int(fit_eff["micro_batch"]), len(prepared))))
    gen = torch.Generator().manual_seed(int(fit_eff.get("seed", 0)))
    order: list[int] = []
    model.train()
    for step in range(s.steps):
        if s.check_cancelled:
            s.check_cancelled()
        if len(order) < loop.micro_batch:
            order += torch.randperm(len(prepared), generator=gen).tolist()
        idx, order = order[: loop.micro_batch], order[loop.micro_batch :]
        batch = _to(prepared.collate(idx), s.device)
        with _autocast(fit_eff, s.device):
            loss = model(**batch).loss
        loss.backward()
        if step == 0:
            loop.step1, loop.no_grad_params = _group_norms(model)
        if not torch.isfinite(loss):
            loop.nonfinite += 1
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], max_norm)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loop.curve.append(float(loss.detach()))
        if s.progress:
            s.progress(
                (step + 1) / s.steps, f"fitting check step {step + 1}/{s.steps}: loss {loop.curve[-1]:.4f}"
            )
    return loop


def run(effective: dict, prepared: Prepared, settings: FitSettings) -> dict[str, Any]:
    """Train the contracted model on the prepared slice for `settings.steps` optimizer steps
    (micro-batch from the contract, no accumulation, constant learning rate) and measure it."""
    import torch

    from claimcheck.engine.training.memory import PeakMeter

    t0 = time.perf_counter()
    s = settings
    fit_eff = _fit_contract(effective, s.lr)
    was_det = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    meter = PeakMeter(s.device).start()
    try:
        num_labels = len(prepared.label_classes) or None
        model, _tok, info = models.build(
            fit_eff, num_labels=num_labels, workspace=s.workspace, device=s.device
        )
        load_s = time.perf_counter() - t0
        loss0, acc0 = evaluate_slice(model, prepared, fit_eff, s.device)
        optimizer, scheduler = models.make_optimizer(model, fit_eff, s.steps)
        group_lrs = {g["name"]: g["lr"] for g in optimizer.param_groups}
        loop = _steps(model, prepared, fit_eff, s, (optimizer, scheduler))
        peak = meter.read()
        loss1, acc1 = evaluate_slice(model, prepared, fit_eff, s.device)
        lora = _lora_b(model)
        heads = _head_sizes(model)
    finally:
        torch.use_deterministic_algorithms(was_det)
    result = {
        "rows": len(prepared),
        "steps": s.steps,
        "micro_batch": loop.micro_batch,
        "lr": s.lr,
        "group_lrs": group_lrs,
        "loss_before": loss0,
        "loss_after": loss1,
        "loss_ratio": (loss1 / loss0) if loss0 and math.isfinite(loss0) else float("nan"),
        "accuracy_before": acc0,
        "accuracy_after": acc1,
        "loss_curve": loop.curve,
        "grad_norms_step1": loop.step1,
        "params_without_grad_step1": loop.no_grad_params,
        "nonfinite_losses": loop.nonfinite,
        "trainable_params": info["trainable_params"],
        "total_params": info["total_params"],
        "trainable_by_group": info["trainable_by_group"],
        "adapted_modules": info["adapted_modules"],
        "quantised_linear_layers": info["quantised_linear_layers"],
        **lora,
        "head_sizes": heads,
        "memory_peak": peak,
        "max_width": max((len(r) for r in prepared.input_ids), default=0),
        "load_seconds": load_s,
        "seconds": time.perf_counter() - t0,
    }
    del model
    return result


def verdict(result: dict[str, Any], go_rule: dict[str, Any], adapter_mode: str) -> tuple[bool, list[str]]:
    """(go, the criteria that failed), by the rule declared before the run."""
    failed = []
    ratio = result["loss_ratio"]
    if not (math.isfinite(ratio) and ratio <= go_rule["max_loss_ratio"]):
        failed.append(
            f"loss ratio {ratio:.3f} (after {result['loss_after']:.4f} / before {result['loss_before']:.4f}) "
            f"> {go_rule['max_loss_ratio']}"
        )
    need_acc = float(go_rule.get("min_slice_accuracy", 0.0))
    if need_acc > 0 and result["accuracy_after"] < need_acc:
        failed.append(f"slice accuracy {result['accuracy_after']:.3f} < {need_acc}")
    dead = [
        g for g, v in result["grad_norms_step1"].items() if "." not in g and not (math.isfinite(v) and v > 0)
    ]
    if dead:
        failed.append(f"no gradient at step 1 in group(s) {dead}")
    if result["params_without_grad_step1"]:
        failed.append(f"{result['params_without_grad_step1']} trainable tensor(s) got no gradient at step 1")
    if adapter_mode in ("lora", "qlora"):
        if not result["lora_b_matrices"]:
            failed.append("no LoRA B matrices: no adapter was attached")
        elif result["lora_b_moved"] < result["lora_b_matrices"]:
            failed.append(
                f"only {result['lora_b_moved']} of {result['lora_b_matrices']} LoRA B matrices moved off zero"
            )
    if result["nonfinite_losses"]:
        failed.append(f"{result['nonfinite_losses']} non-finite loss value(s)")
    return (not failed), failed


def diagnosis(result: dict[str, Any], effective: dict, prepared: Prepared) -> list[str]:
    """What to inspect when the fitting check fails, each item with what was measured about it."""
    sup = [s["supervised_tokens"] for s in prepared.stats]
    if prepared.task_kind == "causal_lm_sft":
        target = (
            "SFT targets are the assistant turns (policy " + str(effective.get("target_turn_policy")) + ")"
        )
        masks = (
            f"supervised tokens per slice example: min {min(sup)}, max {max(sup)}" if sup else "no examples"
        )
    else:
        counts: dict[int, int] = {}
        for y in prepared.labels:
            for j in [j for j, v in enumerate(y) if v] if prepared.multi_label else [y]:
                counts[j] = counts.get(j, 0) + 1
        target = (
            f"{len(prepared.label_classes)} classes; slice class counts by id {dict(sorted(counts.items()))}"
        )
        masks = "classification: no token mask; check truncation of the text instead"
    curve = result["loss_curve"]
    rises = sum(1 for a, b in zip(curve, curve[1:], strict=False) if b > a)
    return [
        f"target mapping: {target}",
        f"masks: {masks}",
        f"trainable parameters: {result['trainable_params']} of {result['total_params']} "
        f"({result['trainable_by_group']}); adapted modules: {len(result['adapted_modules'])}",
        f"learning rates: {result['group_lrs']}",
        f"gradients: step-1 norms {result['grad_norms_step1']}; "
        f"{result['params_without_grad_step1']} tensors without gradient",
        f"precision: {effective.get('precision')}; adapter {effective['adapter_mode']}; "
        f"quant {effective.get('quant') if effective['adapter_mode'] == 'qlora' else 'none'}; "
        f"{result['nonfinite_losses']} non-finite losses",
        f"optimizer: {effective['optimizer'].get('name')}; loss rose on {rises} of {max(0, len(curve) - 1)} steps",
    ]
