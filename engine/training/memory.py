"""Training memory ESTIMATE (not a measurement): weights at their stored width, trainable
parameters with gradients and Adam states, activations at the p99 length, and logits.
The formula, its sources and what it leaves out are in docs/memory-estimate.md.
"""

from __future__ import annotations

import os
from typing import Any

from claimcheck.engine.training import models

GIB = 1024**3
# NF4 blocks of 64 weights share one absmax constant: fp32 (4 B) per block, or with double
# quantisation an 8-bit constant per block plus one fp32 per 256 blocks.
_ABSMAX_BYTES = {False: 4 / 64, True: 1 / 64 + 4 / (64 * 256)}
_ADAM_TRAIN_BYTES = 4 + 4 + 8  # fp32 weight, fp32 gradient, two fp32 Adam moments


def _config_dims(config) -> dict[str, int]:
    text = getattr(config, "text_config", None) or config
    return {
        "hidden": int(text.hidden_size),
        "layers": int(text.num_hidden_layers),
        "heads": int(text.num_attention_heads),
        "vocab": int(text.vocab_size),
    }


def estimate(
    effective: dict,
    meta,
    *,
    seq_len: int,
    device_memory_bytes: int,
) -> dict[str, Any]:
    """Bytes per component for one micro-batch at `seq_len` tokens on the meta model `meta`."""
    mode = effective["adapter_mode"]
    classification = effective["task_kind"] == "text_classification"
    b = int(effective["micro_batch"])
    s = int(seq_len)
    dims = _config_dims(meta.config)
    h, n_layers, a, vocab = dims["hidden"], dims["layers"], dims["heads"], dims["vocab"]

    linear = set(models.linear_names(meta))
    quantised_params = other_params = 0
    for mod_name, mod in meta.named_modules():
        for pname, p in mod.named_parameters(recurse=False):
            n = p.numel()
            is_head = models._is_output_layer(mod_name) or mod_name.split(".")[-1] in models.HEAD_NAMES
            if mode == "qlora" and mod_name in linear and pname == "weight" and not is_head:
                quantised_params += n
            else:
                other_params += n
    dq = bool(effective.get("quant", {}).get("double_quant", True))
    weights = quantised_params * (0.5 + _ABSMAX_BYTES[dq]) + other_params * 4

    head_params = sum(p.numel() for n, p in meta.named_parameters() if models.param_group_of(n) == "head")
    lora_params = 0
    if mode in ("lora", "qlora"):
        r = int(effective["lora"]["r"])
        hits = models.match_targets(meta, effective["lora"]["target_modules"])
        adapted = {n for names in hits.values() for n in names}
        mods = dict(meta.named_modules())
        lora_params = sum(r * (mods[n].in_features + mods[n].out_features) for n in adapted)
        trainable = lora_params + (head_params if classification else 0)
    elif mode == "head":
        trainable = head_params
    else:
        trainable = sum(p.numel() for p in meta.parameters())
    # 'full' already counts the weights once in `weights`; the rest is gradient + Adam.
    train_state = trainable * (_ADAM_TRAIN_BYTES - 4 if mode == "full" else _ADAM_TRAIN_BYTES)

    # Korthikanti et al. 2022: s·b·h·(34 + 5·a·s/h) bytes per layer with 16-bit activations.
    act_width = 2 if (effective.get("precision") in ("bf16", "fp16") or mode == "qlora") else 4
    per_layer = s * b * h * (34 + 5 * a * s / h) * act_width / 2
    act_full = per_layer * n_layers
    # checkpointing keeps each layer's input and recomputes one layer at a time
    act_ckpt = s * b * h * act_width * n_layers + per_layer
    gc = bool(effective.get("gradient_checkpointing", False))
    logits = 0 if classification else b * s * vocab * 4 * 2  # fp32 logits and their gradient

    total = weights + train_state + (act_ckpt if gc else act_full) + logits
    return {
        "label": "estimate",
        "seq_len": s,
        "micro_batch": b,
        "quantised_params": quantised_params,
        "unquantised_params": other_params,
        "lora_params": lora_params,
        "trainable_params": trainable,
        "weights_bytes": int(weights),
        "trainable_state_bytes": int(train_state),
        "activations_bytes": int(act_full),
        "activations_checkpointed_bytes": int(act_ckpt),
        "gradient_checkpointing": gc,
        "logits_bytes": int(logits),
        "total_bytes": int(total),
        "total_gib": round(total / GIB, 4),
        "device_memory_bytes": int(device_memory_bytes),
        "device_memory_gib": round(device_memory_bytes / GIB, 3),
        "share_of_device": round(total / device_memory_bytes, 4) if device_memory_bytes else 0.0,
    }


def device_memory(device: str) -> int:
    """Total memory of the effective device: GPU 0's memory, or the machine's RAM for CPU."""
    if device == "cuda":
        import torch

        return int(torch.cuda.get_device_properties(0).total_memory)
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


# ---------------------------------------------------------------- measured peak (not an estimate)

_PROC_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"


def _proc_kib(field: str) -> int:
    """A `kB` field of /proc/self/status (VmRSS, VmHWM) in bytes; 0 where there is none."""
    try:
        with open(_PROC_STATUS) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakMeter:
    """The peak memory of one piece of work, measured, never estimated.

    cuda: `torch.cuda.max_memory_allocated` after `reset_peak_memory_stats` (tensors only, as the
    estimate counts them). cpu: the process's resident-set high-water mark (VmHWM) reset at the start
    by writing 5 to /proc/self/clear_refs, minus the resident set at the start — so the figure is
    what this work added, whatever the process held before. Where the mark cannot be reset, the
    process's lifetime peak (`ru_maxrss`) is used and the method says so.
    """

    def __init__(self, device: str):
        self.device = device
        self.method = ""
        self.baseline = 0

    def start(self) -> PeakMeter:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.baseline = int(torch.cuda.memory_allocated())
            self.method = "torch.cuda.max_memory_allocated - allocated at start"
            return self
        self.baseline = _proc_kib("VmRSS")
        try:
            with open(_CLEAR_REFS, "w") as f:
                f.write("5")
            self.method = "VmHWM (reset via /proc/self/clear_refs) - VmRSS at start"
        except OSError:
            self.method = "ru_maxrss (process lifetime peak; the mark could not be reset) - VmRSS at start"
        return self

    def read(self) -> dict[str, Any]:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            peak = int(torch.cuda.max_memory_allocated())
        elif self.method.startswith("VmHWM"):
            peak = _proc_kib("VmHWM")
        else:
            import resource

            peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
        return {
            "device": self.device,
            "method": self.method,
            "baseline_bytes": int(self.baseline),
            "peak_bytes": int(peak),
            "measured_bytes": max(0, int(peak) - int(self.baseline)),
        }


def available_memory(device: str) -> int:
    """Memory free for more work on the effective device: the machine's MemAvailable for CPU
    (/proc/meminfo; its total where that cannot be read), GPU 0's total memory for CUDA."""
    if device == "cuda":
        return device_memory(device)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return device_memory(device)
