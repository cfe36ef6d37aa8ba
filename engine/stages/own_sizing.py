"""The CPU text recipe sized so that its training job finishes within a stated time on this machine.

The time model is tokens × seconds per token per core: a training step reads `micro_batch ×
max_length` tokens, a dev evaluation `eval_rows × max_length` (forward only). The per-token seconds
were measured here (2-core box, 1 thread, load ~4) for the CPU recipe's encoder, all-MiniLM-L6-v2 with
LoRA r=8 on all linear layers: 0.75 ms per training token, 0.33 ms per evaluated token, the same at
(16, 128), (16, 64) and (8, 64). `PLAN_SLACK` covers a machine shared with other work (the docs/tui.md
walk ran 20 s/step at load 18), and a machine already busy gives the job only its share of the cores:
`Machine.effective_cores` = the job's torch threads (engine/threads.py `job_threads`) / (load ÷
cores) ** `LOAD_EXPONENT` once the 1-minute load exceeds the cores. The plan picks the longest inputs, then the largest batch, whose step
budget still reaches `MIN_STEPS` (or one epoch, when that is fewer) inside `CPU_TARGET_S`, and whose
fitting check (the contract stage's, `FIT_CHECK_STEPS` steps of the same size) stays within
`FIT_CHECK_TARGET_S`.
"""

from __future__ import annotations

import math
import os

from pydantic import BaseModel, ConfigDict

from claimcheck.engine.training.schema import FitCheck

CPU_TARGET_S = 15 * 60  # the training job's planned wall time on a CPU
CPU_TRAIN_S_PER_TOKEN = 7.5e-4  # one core, forward + backward + optimizer step (measured, see above)
CPU_EVAL_S_PER_TOKEN = 3.3e-4  # one core, forward only
PLAN_SLACK = 2.0  # planned seconds = measured seconds × this
# A busy machine slows a multi-threaded step more than its share of the cores says (threads wait for
# each other): effective threads = threads / (load ÷ cores) ** this. Fitted to two observations here,
# 2 threads on 2 cores: 5.2 s/step at (16, 128) under load 4.4 (planned 4.9 s), and the docs/tui.md
# walk's 20 s/step at (16, 64) under load 18 (planned 20.7 s).
LOAD_EXPONENT = 1.5
# (max_length, micro_batch), most preferred first: longer inputs truncate less, larger batches step steadier
CPU_SHAPES: tuple[tuple[int, int], ...] = ((128, 16), (64, 16), (64, 8), (32, 8))
MIN_STEPS = 60  # fewer optimizer steps than this barely moves the adapters
EVAL_ROWS_CAP = 200  # dev rows evaluated during training (the artifact stage evaluates the whole test)
PERIODIC_EVALS = 3  # dev evaluations between the initial and the final one
TRAIN_FRACTION = 0.7  # the CPU text recipe's split fractions (recipes/text-classification-lora.toml)
DEV_FRACTION = 0.1
# The fitting check trains micro_batch rows a step, like the job: its time is its steps × step_s.
FIT_CHECK_STEPS = FitCheck.model_fields["steps"].default
FIT_CHECK_TARGET_S = 5 * 60  # the fitting check (the contract stage, the person waits) within this


class Machine(BaseModel):
    """The hardware facts a suggestion rests on."""

    model_config = ConfigDict(extra="forbid")
    cuda: bool
    cores: int  # cores this process may run on
    threads: int = 0  # torch threads the training job runs (0: as many as `cores`)
    gpu: str = ""  # the GPU's name ("" without one)
    load: float = 0.0  # 1-minute load average when probed

    @property
    def effective_cores(self) -> float:
        """The cores a new job can count on: all of them on an idle machine, its share on a busy one."""
        cores = max(1, self.cores)
        return (self.threads or cores) / max(1.0, self.load / cores) ** LOAD_EXPONENT

    def words(self) -> str:
        threads = f", {self.threads} training threads" if self.threads and self.threads != self.cores else ""
        return f"{self.cores} CPU core{'s' if self.cores != 1 else ''}{threads}, load {self.load:.1f}"

    @classmethod
    def cpu(cls) -> Machine:
        """This machine's CPU facts, without asking for a GPU (no torch import)."""
        from claimcheck.engine.threads import job_threads, usable_cores

        try:
            load = float(os.getloadavg()[0])
        except (AttributeError, OSError):
            load = 0.0
        return cls(cuda=False, cores=usable_cores(), threads=job_threads(), load=load)

    @classmethod
    def probe(cls) -> Machine:
        """This machine's facts (no GPU when torch or its driver cannot say)."""
        try:
            from claimcheck.engine.training.hardware import probe

            cap = probe()
            cuda, gpu = cap.cuda, cap.name
        except Exception:  # noqa: BLE001 - no torch, or a broken driver: no usable GPU
            cuda, gpu = False, ""
        return cls.cpu().model_copy(update={"cuda": cuda, "gpu": gpu})


class Sizing(BaseModel):
    """The contract values of a CPU text job sized to finish within `target_s`, and its estimate."""

    model_config = ConfigDict(extra="forbid")
    max_length: int
    micro_batch: int
    max_steps: int
    eval_every_steps: int
    checkpoint_every_steps: int
    eval_rows: int
    step_s: float  # planned seconds per optimizer step
    eval_s: float  # planned seconds per dev evaluation
    estimate_s: float  # steps × step_s + evaluations × eval_s
    target_s: float
    train_rows: int  # of the file's rows, those the split is expected to put in train
    fit_check_s: float  # planned seconds of the contract stage's fitting check (its steps × step_s)

    def contract(self) -> dict[str, int]:
        """The values this sizing puts in the contract's inputs."""
        keys = (
            "max_length",
            "micro_batch",
            "max_steps",
            "eval_every_steps",
            "checkpoint_every_steps",
            "eval_rows",
        )
        return {k: getattr(self, k) for k in keys}

    def line(self) -> str:
        return (
            f"sized to finish in about {_minutes(self.estimate_s)} (target {_minutes(self.target_s)}): "
            f"max_steps {self.max_steps} × micro_batch {self.micro_batch} at max_length {self.max_length} "
            f"(~{self.step_s:.1f} s/step planned), dev evaluation on {self.eval_rows} rows every "
            f"{self.eval_every_steps} steps; the contract's fitting check about {_minutes(self.fit_check_s)}"
        )


def _minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"


def size_cpu(rows: int, machine: Machine, target_s: float = CPU_TARGET_S) -> Sizing:
    """The CPU text job for a file of `rows` rows on `machine`: the first shape of `CPU_SHAPES` whose
    budget reaches `MIN_STEPS` (or one epoch) inside `target_s` and whose fitting check stays within
    `FIT_CHECK_TARGET_S`; the last shape when none does (its estimate then says by how much the target
    is missed)."""
    cores = machine.effective_cores
    train_rows = max(1, int(rows * TRAIN_FRACTION))
    eval_rows = max(1, min(EVAL_ROWS_CAP, int(rows * DEV_FRACTION)))
    evals = PERIODIC_EVALS + 2
    plan: Sizing | None = None
    for length, batch in CPU_SHAPES:
        step_s = batch * length * CPU_TRAIN_S_PER_TOKEN * PLAN_SLACK / cores
        eval_s = eval_rows * length * CPU_EVAL_S_PER_TOKEN * PLAN_SLACK / cores
        epoch = math.ceil(train_rows / batch)
        fits = int((target_s - evals * eval_s) // step_s)
        steps = max(1, min(fits, epoch))
        every = max(1, steps // (PERIODIC_EVALS + 1))
        plan = Sizing(
            max_length=length,
            micro_batch=batch,
            max_steps=steps,
            eval_every_steps=every,
            checkpoint_every_steps=every,
            eval_rows=eval_rows,
            step_s=step_s,
            eval_s=eval_s,
            estimate_s=steps * step_s + evals * eval_s,
            target_s=target_s,
            train_rows=train_rows,
            fit_check_s=FIT_CHECK_STEPS * step_s,
        )
        if steps >= min(MIN_STEPS, epoch) and plan.fit_check_s <= FIT_CHECK_TARGET_S:
            return plan
    assert plan is not None
    return plan


__all__ = ["CPU_TARGET_S", "Machine", "Sizing", "size_cpu"]
