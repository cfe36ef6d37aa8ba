"""The training entrypoint: `python -m claimcheck.engine.training.job JOB_DIR`.

The job reads only its own directory (contract.toml, data/train.jsonl, data/dev.jsonl) and
writes its own progress there — status.json, heartbeat, metrics.jsonl, checkpoints/, final/ — so
it can run detached from the app and be reattached later. Once its base model is loaded it writes its
runtime stamp (runtime.json, claimcheck.engine.training.stamp): on a Ray cluster, the worker's own.
The folder's layout, its readers and writers and the job's state vocabulary live in
claimcheck.engine.training.jobfiles; the alarms that judge its records in claimcheck.engine.training.alarms.

A terminal status is written from the SIGTERM handler, so a cancelled job is never left showing
"training". SIGHUP is ignored: a dropped SSH connection does not stop the job.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import now_iso
from claimcheck.engine.stats import registry
from claimcheck.engine.threads import job_threads
from claimcheck.engine.training import jobfiles, stamp
from claimcheck.engine.training.jobfiles import append_metric, read_contract, read_status, write_status
from claimcheck.engine.training.jobrecords import (
    TERMINAL_PHASES,
    CheckpointLine,
    EarlyStopLine,
    EvalLine,
    HaltLine,
    HeartbeatFile,
    ResumeLine,
    StatusFile,
    StepLine,
    TrivialLine,
    WrittenPhase,
)
from claimcheck.engine.training.loss import step_weight
from claimcheck.engine.training.loss import weighted as weighted_loss
from claimcheck.engine.training.schema import Effective, effective

# ---------------------------------------------------------------- the job


class JobCancelled(Exception):
    pass


class Halt(Exception):
    """A required stop (non-finite loss or gradient): the job ends "failed" with this reason."""

    def __init__(self, reason: str, step: int):
        super().__init__(reason)
        self.reason, self.step = reason, step


class Heartbeat(threading.Thread):
    def __init__(self, job: Job, interval: float):
        super().__init__(daemon=True, name="heartbeat")
        self.job, self.interval = job, interval
        self.stop = threading.Event()
        self.beats = 0
        self._last_step = -1
        self.since_step = 0
        self.max_without_step = -1

    def restart_count(self, step: int) -> None:
        """Heartbeats without a step are counted afresh from here (after an evaluation)."""
        self._last_step, self.since_step = step, 0

    def beat(self) -> None:
        self.beats += 1
        step, phase = self.job.step, self.job.phase
        # A dev evaluation between steps is expected work, not a stall: it does not count.
        if phase == "training" and not self.job.evaluating:
            if step != self._last_step:
                self._last_step, self.since_step = step, 0
            else:
                self.since_step += 1
            self.max_without_step = max(self.max_without_step, self.since_step)
        beat = HeartbeatFile(
            time=time.time(),
            iso=now_iso(),
            beats=self.beats,
            step=step,
            phase=phase,
            pid=os.getpid(),
            interval=self.interval,
            beats_since_step=self.since_step,
            max_beats_without_step=self.max_without_step,
            # a dev evaluation in progress and when it began (the live view says so: no step moves)
            evaluating=bool(self.job.evaluating),
            evaluating_since=self.job.eval_started if self.job.evaluating else None,
        )
        try:
            jobfiles.write_heartbeat(self.job.dir, beat)
        except OSError:
            pass

    def run(self) -> None:
        while not self.stop.is_set():
            self.beat()
            self.stop.wait(self.interval)


@dataclass
class Training:
    """What the training loop works with, built once by `Job._setup`."""

    contract: Effective
    device: str
    model: Any
    tok: Any
    batcher: Any
    train_b: Any  # encoded train rows
    dev_b: Any  # encoded dev rows evaluated during training (all, or the contract's eval_rows)
    dev_all: Any  # every dev row: the artifact's dev predictions
    ref_b: Any  # a train subset evaluated like dev (the train-dev gap)
    optimizer: Any
    scheduler: Any
    scaler: Any
    metric: str
    evaluate: Any
    best: dict[str, Any] = field(default_factory=lambda: {"value": None, "step": -1, "stale_evals": 0})

    @property
    def accum(self) -> int:
        return max(1, self.contract.grad_accum)


class Job:
    def __init__(self, job_dir: Path):
        self.dir = Path(job_dir).resolve()
        self.doc = read_contract(self.dir)
        self.eff: dict[str, Any] = self.doc["effective"]
        self.runtime: dict[str, Any] = self.doc.get("runtime", {})
        self.step = 0
        self.total_steps = 0
        self.phase: WrittenPhase = "loading"
        self.evaluating = False
        self.eval_started = 0.0
        beat_s = float(self.runtime.get("heartbeat_seconds", jobfiles.HEARTBEAT_SECONDS))
        earlier = read_status(self.dir) or StatusFile()
        self.status = StatusFile(
            operation_id=self.doc.get("operation_id", self.dir.name),
            digest=self.doc.get("digest", ""),
            pid=os.getpid(),
            started_at=now_iso(),
            heartbeat_seconds=beat_s,
            resumed_from=list(earlier.resumed_from),
            runs=earlier.runs + 1,
        )
        self.heartbeat = Heartbeat(self, beat_s)

    # ------------------------------------------------------------ status

    def set_phase(self, phase: WrittenPhase, reason: str = "") -> None:
        self.phase = phase
        st = self.status
        st.phase, st.reason, st.step, st.total_steps = phase, reason, self.step, self.total_steps
        if self.heartbeat.max_without_step >= 0:
            st.max_beats_without_step = self.heartbeat.max_without_step
        write_status(self.dir, self.status)

    def _on_term(self, signum: int, frame: Any) -> None:
        if self.phase in TERMINAL_PHASES:
            return
        self.set_phase("cancelled", f"received {signal.Signals(signum).name} at step {self.step}")
        raise JobCancelled()

    # ------------------------------------------------------------ main

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.set_phase("loading", "")
        self.heartbeat.start()
        try:
            self._train()
            self.set_phase("done", f"finished {self.step} optimizer steps")
            return 0
        except JobCancelled:
            return 143
        except Halt as h:
            append_metric(self.dir, HaltLine(kind="halt", step=h.step, time=time.time(), reason=h.reason))
            self.set_phase("failed", h.reason)
            return 3
        except Exception as exc:  # the job's own failure: recorded, never left "training"
            traceback.print_exc()
            self.set_phase("failed", f"{type(exc).__name__}: {exc}")
            return 1
        finally:
            self.heartbeat.stop.set()
            self.heartbeat.beat()

    # ------------------------------------------------------------ training

    def _train(self) -> None:
        run = self._setup(effective(self.doc))
        self._start_or_resume(run)
        self.set_phase("training")
        run.model.train()
        delay = float(self.runtime.get("step_delay_seconds", 0.0))
        while self.step < self.total_steps:
            self._step(run)
            if self._after_eval(run):
                break
            self._maybe_checkpoint(run)
            write_status(self.dir, self.status)
            if delay:
                time.sleep(delay)
        self._finish(run)

    def _setup(self, c: Effective) -> Training:
        """Device, data, model, batches, step budget, optimizer and the tracked dev metric."""
        import torch

        from claimcheck.engine.training.evaluate import Batcher, evaluate, load_split, resolve_device
        from claimcheck.engine.training.models import build, make_optimizer

        torch.set_num_threads(int(self.runtime.get("threads", 0)) or job_threads())
        device = resolve_device(c.device)
        if c.dp_replicas != 1:
            raise ValueError(
                f"dp_replicas={c.dp_replicas}: the local job runs one replica; "
                "edit the contract or use a cluster provider"
            )
        torch.manual_seed(c.seed)
        train = load_split(self.dir, self.doc, "train")
        dev = load_split(self.dir, self.doc, "dev")
        classes = [str(x) for x in c.label_classes]
        workspace = Path(self.doc.get("workspace", "."))
        loaded = self._model_digest(device, workspace)
        model, tok, info = build(
            self.eff,
            num_labels=len(classes) if c.is_classification else None,
            workspace=workspace,
            device=device,
        )
        jobfiles.write_runtime(self.dir, stamp.stamp(loaded))
        self.status.model_info = {k: v for k, v in info.items() if isinstance(v, int | float | str | bool)}
        batcher = Batcher(self.eff, tok, classes, device)
        train_b = batcher.prepare(train, rendered=True)
        dev_all = batcher.prepare(dev, rendered=True)
        dev_b = self._eval_rows(c, dev_all)
        ref_b = train_b.subset(list(range(min(train_b.n, max(dev_b.n, 32), 256))))
        self.total_steps = self._budget(c, train_b.n)
        optimizer, scheduler = make_optimizer(model, self.eff, self.total_steps)
        use_scaler = c.precision == "fp16" and device.startswith("cuda")
        return Training(
            contract=c,
            device=device,
            model=model,
            tok=tok,
            batcher=batcher,
            train_b=train_b,
            dev_b=dev_b,
            dev_all=dev_all,
            ref_b=ref_b,
            optimizer=optimizer,
            scheduler=scheduler,
            scaler=torch.amp.GradScaler("cuda") if use_scaler else None,
            metric=self._tracked_metric(c),
            evaluate=evaluate,
        )

    def _model_digest(self, device: str, workspace: Path) -> stamp.Loaded:
        """The base model folder's digest, taken as the job loads it (the stamp holds it to the contract)."""
        from claimcheck.engine.training.models import resolve_model_path

        digest, files = stamp.model_digest(resolve_model_path(self.eff["model_path"], workspace))
        return stamp.Loaded(device=device, model_sha256=digest, model_files=files, run=self.status.runs)

    @staticmethod
    def _eval_rows(c: Effective, dev_b: Any) -> Any:
        """The dev rows evaluated during training: all, or `eval_rows` evenly spaced ones (fixed)."""
        n = int(c.eval_rows or 0)
        if not n or n >= dev_b.n:
            return dev_b
        return dev_b.subset([int(k * dev_b.n / n) for k in range(n)])

    @staticmethod
    def _budget(c: Effective, train_rows: int) -> int:
        if c.max_steps > 0:
            return c.max_steps
        per_epoch = math.ceil(train_rows / c.micro_batch)
        return max(1, math.ceil(per_epoch * float(c.epochs or 1) / max(1, c.grad_accum)))

    def _tracked_metric(self, c: Effective) -> str:
        if not c.is_classification:
            return "dev_loss"
        metric, note = registry.dev_metric(c.dev_metric or registry.DEFAULTS["categorical"])
        if note:
            self.status.dev_metric_note = note
        return metric

    def _start_or_resume(self, run: Training) -> None:
        """Continue from the last complete checkpoint, or record the trivial baseline and step 0."""
        from claimcheck.engine.training import checkpoint

        done = checkpoint.complete(self.dir / jobfiles.CHECKPOINTS)
        if done:
            state = checkpoint.load(done[-1], run.model, run.optimizer, run.scheduler, run.scaler)
            self.step = int(state["step"])
            run.best = state.get("best", run.best)
            self.status.resumed_from.append(self.step)
            resume = ResumeLine(
                kind="resume",
                step=self.step,
                time=time.time(),
                checkpoint=done[-1].name,
                run=self.status.runs,
            )
            append_metric(self.dir, resume)
            return
        self.set_phase("initial-eval")
        trivial = run.batcher.trivial(run.train_b, run.dev_b, run.metric)
        append_metric(self.dir, TrivialLine(kind="trivial", step=0, metric=run.metric, **trivial))
        self._eval(run)

    def _step(self, run: Training) -> None:
        """One optimizer step over `grad_accum` micro-batches; a non-finite loss or norm halts."""
        import torch

        c, t0 = run.contract, time.time()
        run.optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        micro = [
            run.batcher.micro_indices(self.step * run.accum + k, c.micro_batch, run.train_b.n, c.seed)
            for k in range(run.accum)
        ]
        w = run.train_b.weights if c.loss_weighting == "sample_weight" else None
        total = step_weight(w, micro) if w is not None else 0.0
        for idx in micro:
            with torch.autocast(
                device_type=run.device.split(":")[0],
                dtype=torch.bfloat16,
                enabled=c.precision == "bf16" and run.device.startswith("cuda"),
            ):
                if w is None:
                    out = run.model(**run.train_b.batch(idx))
                    loss = out.loss / run.accum
                else:  # the step's weighted mean: this micro-batch's sum(w * l) over the step's sum(w)
                    batch = run.train_b.batch(idx)
                    labels = batch.pop("labels")
                    loss = weighted_loss(run.model(**batch).logits, labels, [w[i] for i in idx], total)
            if not torch.isfinite(loss):
                raise Halt(f"non-finite loss ({float(loss.detach())}) at step {self.step + 1}", self.step + 1)
            (run.scaler.scale(loss) if run.scaler else loss).backward()
            loss_sum += float(loss.detach())
        gn, lr_now = self._advance(run)
        rec = StepLine(
            kind="step",
            step=self.step,
            time=time.time(),
            loss=loss_sum,
            lr=lr_now,
            grad_norm=gn,
            seconds=round(time.time() - t0, 4),
            epoch=round(self.step * run.accum * c.micro_batch / run.train_b.n, 4),
        )
        append_metric(self.dir, rec)
        self.status.step = self.step

    def _advance(self, run: Training) -> tuple[float, float]:
        """Clip, step the optimizer (through the AMP scaler when there is one) and the schedule, and
        count the step: (the gradient norm, the learning rate the step used)."""
        gn = self._clip(run)
        lr_now = float(run.scheduler.get_last_lr()[0])
        if run.scaler:
            run.scaler.step(run.optimizer)
            run.scaler.update()
        else:
            run.optimizer.step()
        run.scheduler.step()
        self.step += 1
        return gn, lr_now

    def _clip(self, run: Training) -> float:
        import torch

        if run.scaler:
            run.scaler.unscale_(run.optimizer)
        params = [p for g in run.optimizer.param_groups for p in g["params"]]
        max_norm = float(run.contract.max_grad_norm or 0.0)
        if max_norm > 0:
            gn = torch.nn.utils.clip_grad_norm_(params, max_norm)
        else:
            gn = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
        gn = float(gn)
        if not math.isfinite(gn):
            raise Halt(f"non-finite gradient norm ({gn}) at step {self.step + 1}", self.step + 1)
        return gn

    def _after_eval(self, run: Training) -> bool:
        """Evaluate on schedule, keep the best state; True when early stopping ends training."""
        from claimcheck.engine.training import checkpoint

        c = run.contract
        every = c.eval_every_steps
        if not (every and self.step % every == 0 and self.step < self.total_steps):
            return False
        value = self._eval(run)
        if self._better(value, run.best["value"], run.metric):
            run.best = {"value": value, "step": self.step, "stale_evals": 0}
            if c.checkpoint_selection == "best_dev":
                best_dir = self.dir / jobfiles.BEST
                kept = checkpoint.save(
                    best_dir,
                    self.step,
                    run.model,
                    run.optimizer,
                    run.scheduler,
                    run.scaler,
                    {"best": run.best},
                )
                for old in checkpoint.complete(best_dir):
                    if old != kept:
                        shutil.rmtree(old, ignore_errors=True)
        else:
            run.best["stale_evals"] = int(run.best.get("stale_evals", 0)) + 1
        run.model.train()
        patience = max(1, c.patience_evals or 3)
        if c.stopping_rule == "early_stopping" and run.best["stale_evals"] >= patience:
            reason = f"no dev improvement in {patience} evaluations"
            append_metric(
                self.dir, EarlyStopLine(kind="early_stop", step=self.step, time=time.time(), reason=reason)
            )
            self.status.early_stopped_at = self.step
            return True
        return False

    def _maybe_checkpoint(self, run: Training) -> None:
        from claimcheck.engine.training import checkpoint

        every = run.contract.checkpoint_every_steps
        if not (every and self.step % every == 0 and self.step < self.total_steps):
            return
        state = {"best": run.best, "total_steps": self.total_steps, "seed": run.contract.seed}
        path = checkpoint.save(
            self.dir / jobfiles.CHECKPOINTS,
            self.step,
            run.model,
            run.optimizer,
            run.scheduler,
            run.scaler,
            state,
        )
        append_metric(
            self.dir, CheckpointLine(kind="checkpoint", step=self.step, time=time.time(), path=path.name)
        )

    def _finish(self, run: Training) -> None:
        """Final dev evaluation, the checkpoint selection rule, and the artifact."""
        from claimcheck.engine.training.artifact_files import Trained, save_artifact

        selected, selection = self._selected(run)
        trained = Trained(
            model=run.model,
            tok=run.tok,
            eff=self.eff,
            batcher=run.batcher,
            dev_b=run.dev_all,
            selected_step=selected,
            selection=selection,
            info=self.status.model_info,
        )
        save_artifact(self.dir / jobfiles.FINAL, trained)

    def _selected(self, run: Any) -> tuple[int, str]:
        """The final dev evaluation and the checkpoint selection rule: (the step whose state the model
        now holds, the rule). An earlier evaluation that was better is loaded back (ties keep it)."""
        from claimcheck.engine.training import checkpoint

        self.set_phase("final-eval")
        value = self._eval(run)
        selected = self.step
        selection = run.contract.checkpoint_selection
        saved_best = checkpoint.complete(self.dir / jobfiles.BEST)
        if selection == "best_dev" and saved_best and not self._better(value, run.best["value"], run.metric):
            checkpoint.load_trainable(run.model, saved_best[-1] / checkpoint.TRAINABLE)
            selected = int(run.best["step"])
            self._eval(run, selected=selected)
        return selected, selection

    def _better(self, value: float | None, than: float | None, metric: str) -> bool:
        if value is None or not math.isfinite(value):
            return False
        if than is None:
            return True
        return registry.get(metric).better(value, than)

    def _eval(self, run: Training, selected: int = -1) -> float:
        self.eval_started = time.time()
        self.evaluating = True
        try:
            c = run.contract
            pos = c.positive_class
            weighting = {
                "weighted_loss": c.loss_weighting == "sample_weight",
                "weighted_metric": c.metric_weighting == "sample_weight",
            }
            dev_r = run.evaluate(run.model, run.dev_b, run.metric, run.batcher.classes, pos, **weighting)
            ref_r = run.evaluate(run.model, run.ref_b, run.metric, run.batcher.classes, pos, **weighting)
        finally:
            self.evaluating = False
            self.heartbeat.restart_count(self.step)
        distributions = {k: dev_r[k] for k in ("pred_distribution", "true_distribution") if k in dev_r}
        rec = EvalLine(
            kind="eval" if selected < 0 else "selected_eval",
            split="dev",
            step=self.step,
            time=time.time(),
            metric=run.metric,
            value=dev_r["value"],
            loss=dev_r["loss"],
            train_value=ref_r["value"],
            train_rows=run.ref_b.n,
            rows=run.dev_b.n,
            phase=self.phase,
            selected_step=selected,
            **distributions,
        )
        append_metric(self.dir, rec)
        return float(dev_r["value"])


def main(
    argv: list[str] | None = None, kind: type[Job] | None = None, module: str = jobfiles.JOB_MODULE
) -> int:
    """Run the job in JOB_DIR as `kind` from `module` (the classification job, unless a job kind's own
    module passes its class and name; the launcher picks the module, jobfiles.job_module)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: python -m {module} JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(args[0])
    if job_dir.is_dir():
        jobfiles.record_self(job_dir)
    if not (job_dir / jobfiles.CONTRACT).is_file():
        print(
            f"{job_dir / jobfiles.CONTRACT} not found: a job directory holds the frozen contract copy",
            file=sys.stderr,
        )
        return 2
    wanted = jobfiles.job_module(job_dir)
    if wanted != module:
        print(f"{job_dir} holds a job of another kind: run it with python -m {wanted}", file=sys.stderr)
        return 2
    from claimcheck.engine.training.models import keep_bitsandbytes_out

    job = (kind or Job)(job_dir)
    keep_bitsandbytes_out(effective(job.doc))  # before the job imports peft (its run does)
    return job.run()


if __name__ == "__main__":
    sys.exit(main())
