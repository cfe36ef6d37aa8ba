"""The contract stage's tiny fitting check: can the contracted setup fit a small slice of train?

Runs claimcheck.engine.training.fitcheck on a slice of the prepared rows and records the verdict against the
go / no-go rule the contract declared before the run, the adapters' gradients and the timing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.training.schema import Inputs

ACC_TOL = 0.1
LOSS_TOL = 0.05
PB_FIT = (
    "Use a bounded fitting sanity check when warranted. Check that representative training examples can be fit. "
    "If fitting fails, inspect target mapping, masks, trainable parameters, head/backbone learning rates, "
    "gradients, precision and optimizer behavior before scaling."
)
PB_GO = "Define task-specific go/no-go rules before a pilot, not after seeing its result."
PB_MEM_MEASURED = (
    "Size hardware from model/optimizer/activation memory and representative length tails, not model parameter "
    "count alone."
)
PB_SCOPE = "A hardware profile, tiny fitting check and quality pilot answer different questions and require their own stated scope."


def fit(inp: Inputs, eff: dict, p, labels, ctx: StageContext, meta=None) -> tuple[list[Check], list[int]]:
    """The fitting check's checks and the head sizes it saw; `meta` (the meta-device model resolve()
    built) lets the measured peak memory sit next to the estimate for the same batch."""
    from claimcheck.engine.training import fitcheck

    fc = inp.fit_check
    rule = fc.go_rule.model_dump()
    sl = _fit_slice(p, fitcheck.select_slice(p.ids, labels, fc.rows))
    lr = fc.lr or eff["optimizer"]["lr"]
    ctx.progress(
        0.0, f"fitting check: {fc.steps} steps on {len(sl)} train rows; rule: {fitcheck.rule_text(rule)}"
    )
    import torch

    threads = torch.get_num_threads()
    try:
        settings = fitcheck.FitSettings(
            ctx.workspace, eff["device"], fc.steps, lr, ctx.progress, ctx.check_cancelled
        )
        result = fitcheck.run(eff, sl, settings)
    finally:
        torch.set_num_threads(threads)
    coverage = f"sample: {len(sl)} of {len(p)} train rows"
    checks = [
        _fit_check(FitRun(eff, sl, result, lr, fc.steps, rule, coverage)),
        _fit_adapters(eff, result, coverage),
        _fit_timing(eff, result),
    ]
    if meta is not None:
        checks.append(_fit_memory(eff, result, meta))
    return checks, result.get("head_sizes", [])


def _fit_slice(p, pos: list[int]):
    """The prepared rows at `pos`: the slice the fitting check trains on."""
    from claimcheck.engine.training.prepare import Prepared

    return Prepared(
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
        multi_label=p.multi_label,
    )


@dataclass
class FitRun:
    """One fitting-check run: the contract, the slice, fitcheck.run's result and its settings."""

    eff: dict[str, Any]
    sl: Any
    result: dict[str, Any]
    lr: float
    steps: int
    rule: dict[str, Any]
    coverage: str


def _r4(v: Any) -> float:
    return round(float(v), 4)


def _fit_check(f: FitRun) -> Check:
    from claimcheck.engine.training import fitcheck

    result, eff, sl = f.result, f.eff, f.sl
    go, failed = fitcheck.verdict(result, f.rule, eff["adapter_mode"])
    diag = [] if go else fitcheck.diagnosis(result, eff, sl)
    r4 = _r4
    return Check(
        id="contract.fit_check",
        status="pass" if go else "fail",
        coverage=f.coverage,
        summary=(
            ("GO" if go else "NO-GO: " + "; ".join(failed))
            + f" — slice loss {result['loss_before']:.4f} → {result['loss_after']:.4f}, accuracy "
            f"{result['accuracy_before']:.3f} → {result['accuracy_after']:.3f} in {f.steps} steps. "
            "The question is only whether the setup can fit a slice of train — not quality on dev."
        ),
        measured={
            "go": go,
            "rule": fitcheck.rule_text(f.rule),
            "rule_values": f.rule,
            "rule_declared": "in the contract inputs, before the run",
            "failed_criteria": failed,
            "diagnosis": diag,
            "slice_ids": [str(x) for x in sl.ids],
            "steps": f.steps,
            "lr": f.lr,
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
        playbook=declaration("contract.fit_check").playbook,
    )


def _fit_adapters(eff: dict, result: dict, coverage: str) -> Check:
    grads = result["grad_norms_step1"]
    dead = [g for g, v in grads.items() if "." not in g and not v > 0]
    moved_ok = result["lora_b_moved"] == result["lora_b_matrices"]
    lora_mode = eff["adapter_mode"] in ("lora", "qlora")
    return Check(
        id="contract.fit_adapters",
        status="fail"
        if dead
        or result["params_without_grad_step1"]
        or (lora_mode and not (moved_ok and result["lora_b_matrices"]))
        else "pass",
        coverage=coverage,
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
        playbook=declaration("contract.fit_adapters").playbook,
    )


def _fit_timing(eff: dict, result: dict) -> Check:
    return Check(
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
        playbook=declaration("contract.fit_timing").playbook,
    )


def _fit_memory(eff: dict, result: dict, meta) -> Check:
    """The fitting check's measured peak next to the estimate for the same micro-batch and width."""
    from claimcheck.engine.training import memory

    peak = result["memory_peak"]
    width = int(result["max_width"])
    est = memory.estimate(
        dict(eff, micro_batch=result["micro_batch"]), meta, seq_len=width, device_memory_bytes=0
    )
    ratio = peak["measured_bytes"] / est["total_bytes"] if est["total_bytes"] else 0.0
    mib = 1024**2
    return Check(
        id="contract.memory_measured",
        status="info",
        summary=(
            f"fitting check peak {peak['measured_bytes'] / mib:.1f} MiB measured on {peak['device']} vs "
            f"{est['total_bytes'] / mib:.1f} MiB estimated for micro-batch {result['micro_batch']} × "
            f"{width} tokens: ratio {ratio:.2f} ({peak['method']})"
            + (
                "; on CPU this is what the work added to the resident set: a lower bound where the "
                "process reused memory it already held (e.g. a long-lived app)"
                if peak["device"] == "cpu"
                else ""
            )
        ),
        measured={
            "device": peak["device"],
            "method": peak["method"],
            "adapter_mode": eff["adapter_mode"],
            "micro_batch": int(result["micro_batch"]),
            "seq_len": width,
            "estimate_bytes": int(est["total_bytes"]),
            "measured_bytes": int(peak["measured_bytes"]),
            "baseline_bytes": int(peak["baseline_bytes"]),
            "peak_bytes": int(peak["peak_bytes"]),
            "ratio": round(ratio, 4),
        },
        replay="observation",
        why="An estimate is only as good as its last comparison with a measurement on the same batch.",
        playbook=PB_MEM_MEASURED,
    )
