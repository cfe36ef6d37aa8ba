"""The training entrypoint: `python -m engine.training.job JOB_DIR`.

The job reads only its own directory (contract.toml, data/train.parquet, data/dev.parquet) and
writes its own progress there, so it can run detached from the app and be reattached later:

    status.json     stage (loading / initial-eval / training / final-eval / done / failed /
                    cancelled), reason, step, total steps, resume points
    heartbeat       JSON written by a thread every `heartbeat_seconds`: time, beat count, the
                    optimizer step at that moment — a heartbeat is not a step
    metrics.jsonl   one JSON object a line: kind = step | eval | checkpoint | resume | alarm | halt
    log.txt         stdout / stderr of the process (written by the provider)
    checkpoints/    resumable state (engine.training.checkpoint)
    final/          the artifact: trainable weights, tokenizer, config, dev predictions, manifest

A terminal status is written from the SIGTERM handler, so a cancelled job is never left showing
"training". SIGHUP is ignored: a dropped SSH connection does not stop the job.

The file-protocol helpers at the top are cheap (no torch) so providers and stages can use them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import sys
import threading
import time
import tomllib
import traceback
from pathlib import Path
from typing import Any

from engine.evidence import atomic_write_text, dump_toml, now_iso

CONTRACT = "contract.toml"
STATUS = "status.json"
HEARTBEAT = "heartbeat"
METRICS = "metrics.jsonl"
LOG = "log.txt"
CHECKPOINTS = "checkpoints"
FINAL = "final"
TRAIN_FILE = "data/train.parquet"
DEV_FILE = "data/dev.parquet"
MANIFEST = "manifest.json"
DEV_PREDICTIONS = "dev_predictions.parquet"

ALARMS = ("non_finite", "divergence", "class_collapse", "train_dev_gap", "stall", "worse_than_trivial")
ALARM_DEFAULTS: dict[str, Any] = {
    "divergence_factor": 3.0,
    "collapse_share": 0.95,
    "gap_limit": 0.25,
    "stall_heartbeats": 30,
    "worse_than_trivial_after_step": -1,  # -1: from the half-way step on
    "disabled": [],
}
LOWER_BETTER = {"log_loss", "brier", "dev_loss"}
DEV_METRICS = ("accuracy", "macro_f1", "weighted_f1", "balanced_accuracy", "log_loss", "brier")


# ---------------------------------------------------------------- file protocol (cheap)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_status(job_dir: Path) -> dict[str, Any]:
    return _read_json(Path(job_dir) / STATUS)


def write_status(job_dir: Path, doc: dict[str, Any]) -> None:
    atomic_write_text(Path(job_dir) / STATUS, json.dumps({**doc, "updated_at": now_iso()}, indent=1))


def read_heartbeat(job_dir: Path) -> dict[str, Any]:
    return _read_json(Path(job_dir) / HEARTBEAT)


def read_metrics(job_dir: Path) -> list[dict[str, Any]]:
    """Every complete line of metrics.jsonl (a line cut by a kill is skipped, not an error)."""
    path = Path(job_dir) / METRICS
    out: list[dict[str, Any]] = []
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def append_metric(job_dir: Path, rec: dict[str, Any]) -> None:
    line = json.dumps(rec, allow_nan=True) + "\n"
    with open(Path(job_dir) / METRICS, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def read_contract(job_dir: Path) -> dict[str, Any]:
    with open(Path(job_dir) / CONTRACT, "rb") as fh:
        return tomllib.load(fh)


def write_job_dir(
    job_dir: Path,
    *,
    effective: dict[str, Any],
    digest: str,
    op_id: str,
    attempt: int,
    train: Any,
    dev: Any,
    workspace: Path,
    runtime: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write contract.toml and the data files a job needs. Returns the contract document.

    train / dev: Polars frames with row_id, text (or messages as a JSON string) and target.
    Re-writing an existing job directory with the same identity changes nothing.
    """
    from engine.data import sha256_file

    job_dir = Path(job_dir)
    if (job_dir / CONTRACT).exists():
        return read_contract(job_dir)
    (job_dir / "data").mkdir(parents=True, exist_ok=True)
    hashes = {}
    for name, frame in (("train", train), ("dev", dev)):
        path = job_dir / f"data/{name}.parquet"
        tmp = path.with_suffix(".tmp")
        frame.write_parquet(tmp)
        os.replace(tmp, path)
        hashes[name] = sha256_file(path)
    doc = {
        "operation_id": op_id,
        "attempt": attempt,
        "digest": digest,
        "written_at": now_iso(),
        "workspace": str(Path(workspace).resolve()),
        "data": {
            "train": TRAIN_FILE,
            "dev": DEV_FILE,
            "train_sha256": hashes["train"],
            "dev_sha256": hashes["dev"],
            "train_rows": train.height,
            "dev_rows": dev.height,
        },
        "runtime": {"heartbeat_seconds": 2.0, "step_delay_seconds": 0.0, **(runtime or {})},
        "effective": effective,
    }
    atomic_write_text(job_dir / CONTRACT, dump_toml(doc))
    return doc


# ---------------------------------------------------------------- alarms (pure, shared with dispatch)


def alarm_config(effective: dict[str, Any]) -> dict[str, Any]:
    if "effective" in effective and isinstance(effective["effective"], dict):
        effective = effective["effective"]  # a whole contract.toml document was passed
    cfg = {**ALARM_DEFAULTS, **dict(effective.get("alarms", {}) or {})}
    cfg["disabled"] = [str(x) for x in cfg.get("disabled", [])]
    return cfg


def latest_by_step(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Records of one kind, the last written per step (a resumed run overwrites the lost tail)."""
    by_step: dict[int, dict[str, Any]] = {}
    for r in records:
        if r.get("kind") == kind:
            by_step[int(r.get("step", 0))] = r
    return [by_step[s] for s in sorted(by_step)]


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(float(x))


def evaluate_alarms(
    records: list[dict[str, Any]], effective: dict[str, Any], heartbeat: dict[str, Any], total_steps: int
) -> list[dict[str, Any]]:
    """One entry per alarm: name, state (raised / clear / disabled / not_run), detail, step."""
    cfg = alarm_config(effective)
    steps = latest_by_step(records, "step")
    evals = [e for e in latest_by_step(records, "eval") if e.get("split") == "dev"]
    higher = not any(e.get("metric") in LOWER_BETTER for e in evals[:1])
    out = []

    def add(name: str, state: str, detail: str, step: int = -1, **extra: Any) -> None:
        out.append({"name": name, "state": state, "detail": detail, "step": step, **extra})

    for name in ALARMS:
        if name in cfg["disabled"]:
            add(name, "disabled", "disabled in the contract (alarms.disabled)")
            continue
        if name == "non_finite":
            halts = [r for r in records if r.get("kind") == "halt"]
            bad = [s for s in steps if not _finite(s.get("loss")) or not _finite(s.get("grad_norm"))]
            if halts or bad:
                first = halts[0] if halts else bad[0]
                add(
                    name,
                    "raised",
                    str(first.get("reason", "non-finite loss or gradient norm")),
                    int(first.get("step", -1)),
                )
            elif steps:
                add(name, "clear", f"loss and gradient norm finite at all {len(steps)} steps")
            else:
                add(name, "not_run", "no optimizer step recorded")
        elif name == "divergence":
            losses = [(int(s["step"]), float(s["loss"])) for s in steps if _finite(s.get("loss"))]
            if len(losses) < 10:
                add(name, "not_run", f"{len(losses)} finite loss values; divergence needs ≥ 10")
                continue
            factor = float(cfg["divergence_factor"])
            window = max(3, len(losses) // 10)
            means = [
                (losses[i][0], sum(v for _, v in losses[i - window + 1 : i + 1]) / window)
                for i in range(window - 1, len(losses))
            ]
            best = math.inf
            hit = None
            for step, m in means:
                if m > factor * best:
                    hit = (step, m, best)
                    break
                best = min(best, m)
            if hit:
                add(name, "raised", f"rolling loss {hit[1]:.4g} > {factor}× best {hit[2]:.4g}", hit[0])
            else:
                add(name, "clear", f"rolling loss (window {window}) never exceeded {factor}× its best")
        elif name == "class_collapse":
            dists = [e for e in evals if e.get("pred_distribution")]
            if not dists:
                add(name, "not_run", "no predicted-class distribution recorded (not a classification job?)")
                continue
            share = float(cfg["collapse_share"])
            last = dists[-1]
            pred = last["pred_distribution"]
            true = last.get("true_distribution", {})
            n = max(1, sum(pred.values()))
            top_cls, top_n = max(pred.items(), key=lambda kv: kv[1])
            true_top = max(true.values()) / max(1, sum(true.values())) if true else 0.0
            if top_n / n >= share and true_top < share:
                add(
                    name,
                    "raised",
                    f"{top_n / n:.1%} of dev predictions are '{top_cls}' (true top share {true_top:.1%})",
                    int(last["step"]),
                )
            else:
                add(
                    name,
                    "clear",
                    f"top predicted class '{top_cls}' at {top_n / n:.1%} < {share:.0%} at last eval",
                )
        elif name == "train_dev_gap":
            pairs = [e for e in evals if _finite(e.get("train_value")) and _finite(e.get("value"))]
            if not pairs:
                add(name, "not_run", "no train-reference metric recorded")
                continue
            last = pairs[-1]
            gap = float(last["train_value"]) - float(last["value"])
            gap = -gap if not higher else gap
            limit = float(cfg["gap_limit"])
            state = "raised" if gap > limit else "clear"
            add(
                name,
                state,
                f"train − dev {last.get('metric')} gap {gap:.3f} vs limit {limit}",
                int(last["step"]),
                gap=gap,
            )
        elif name == "stall":
            worst = int(heartbeat.get("max_beats_without_step", -1))
            if worst < 0:
                add(name, "not_run", "no heartbeat recorded during training")
                continue
            limit = int(cfg["stall_heartbeats"])
            state = "raised" if worst > limit else "clear"
            add(
                name,
                state,
                f"at most {worst} heartbeats without an optimizer step (limit {limit})",
                -1,
                max_beats_without_step=worst,
            )
        elif name == "worse_than_trivial":
            after = int(cfg["worse_than_trivial_after_step"])
            after = total_steps // 2 if after < 0 else after
            trivial = next((r for r in records if r.get("kind") == "trivial"), None)
            late = [e for e in evals if int(e["step"]) >= after and _finite(e.get("value"))]
            if trivial is None or not _finite(trivial.get("value")):
                add(name, "not_run", "no trivial-baseline dev value recorded")
            elif not late:
                add(name, "not_run", f"no dev evaluation at or after step {after}")
            else:
                tv = float(trivial["value"])
                worse = [e for e in late if (float(e["value"]) < tv if higher else float(e["value"]) > tv)]
                if worse:
                    e = worse[0]
                    add(
                        name,
                        "raised",
                        f"dev {e.get('metric')} {float(e['value']):.4f} worse than trivial {tv:.4f} "
                        f"at step {e['step']} (after step {after})",
                        int(e["step"]),
                    )
                else:
                    add(
                        name,
                        "clear",
                        f"dev metric not worse than trivial {tv:.4f} at {len(late)} evals from step {after}",
                    )
    return out


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
        step, stage = self.job.step, self.job.stage
        # A dev evaluation between steps is expected work, not a stall: it does not count.
        if stage == "training" and not self.job.evaluating:
            if step != self._last_step:
                self._last_step, self.since_step = step, 0
            else:
                self.since_step += 1
            self.max_without_step = max(self.max_without_step, self.since_step)
        doc = {
            "time": time.time(),
            "iso": now_iso(),
            "beats": self.beats,
            "step": step,
            "stage": stage,
            "pid": os.getpid(),
            "interval": self.interval,
            "beats_since_step": self.since_step,
            "max_beats_without_step": self.max_without_step,
        }
        try:
            atomic_write_text(self.job.dir / HEARTBEAT, json.dumps(doc))
        except OSError:
            pass

    def run(self) -> None:
        while not self.stop.is_set():
            self.beat()
            self.stop.wait(self.interval)


class Job:
    def __init__(self, job_dir: Path):
        self.dir = Path(job_dir).resolve()
        self.doc = read_contract(self.dir)
        self.eff: dict[str, Any] = self.doc["effective"]
        self.runtime: dict[str, Any] = self.doc.get("runtime", {})
        self.step = 0
        self.total_steps = 0
        self.stage = "loading"
        self.evaluating = False
        self.status: dict[str, Any] = {
            "operation_id": self.doc.get("operation_id", self.dir.name),
            "digest": self.doc.get("digest", ""),
            "pid": os.getpid(),
            "started_at": now_iso(),
            "heartbeat_seconds": float(self.runtime.get("heartbeat_seconds", 2.0)),
            "resumed_from": list(read_status(self.dir).get("resumed_from", [])),
            "runs": int(read_status(self.dir).get("runs", 0)) + 1,
        }
        self.heartbeat = Heartbeat(self, float(self.runtime.get("heartbeat_seconds", 2.0)))

    # ------------------------------------------------------------ status

    def set_stage(self, stage: str, reason: str = "") -> None:
        self.stage = stage
        self.status.update(stage=stage, reason=reason, step=self.step, total_steps=self.total_steps)
        if self.heartbeat.max_without_step >= 0:
            self.status["max_beats_without_step"] = self.heartbeat.max_without_step
        write_status(self.dir, self.status)

    def _on_term(self, signum: int, frame: Any) -> None:
        if self.stage in ("done", "failed", "cancelled"):
            return
        self.set_stage("cancelled", f"received {signal.Signals(signum).name} at step {self.step}")
        raise JobCancelled()

    # ------------------------------------------------------------ main

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        self.set_stage("loading", "")
        self.heartbeat.start()
        try:
            self._train()
            self.set_stage("done", f"finished {self.step} optimizer steps")
            return 0
        except JobCancelled:
            return 143
        except Halt as h:
            append_metric(self.dir, {"kind": "halt", "step": h.step, "time": time.time(), "reason": h.reason})
            self.set_stage("failed", h.reason)
            return 3
        except Exception as exc:  # the job's own failure: recorded, never left "training"
            traceback.print_exc()
            self.set_stage("failed", f"{type(exc).__name__}: {exc}")
            return 1
        finally:
            self.heartbeat.stop.set()
            self.heartbeat.beat()

    # ------------------------------------------------------------ training

    def _train(self) -> None:
        import torch

        from engine.training import checkpoint
        from engine.training.evaluate import Batcher, evaluate, load_split, resolve_device, save_artifact

        torch.set_num_threads(int(self.runtime.get("threads", 0)) or max(1, min(4, os.cpu_count() or 1)))
        eff = self.eff
        device = resolve_device(str(eff.get("device", "cpu")))
        if int(eff.get("dp_replicas", 1) or 1) != 1:
            raise ValueError(
                f"dp_replicas={eff.get('dp_replicas')}: the local job runs one replica; "
                "edit the contract or use a cluster provider"
            )
        seed = int(eff.get("seed", 0))
        torch.manual_seed(seed)
        train = load_split(self.dir, self.doc, "train")
        dev = load_split(self.dir, self.doc, "dev")
        from engine.training.models import build

        classes = [str(c) for c in eff.get("label_classes", [])]
        is_cls = eff.get("task_kind", "text_classification") == "text_classification"
        model, tok, info = build(
            eff,
            num_labels=len(classes) if is_cls else None,
            workspace=Path(self.doc.get("workspace", ".")),
            device=device,
        )
        self.status["model_info"] = {k: v for k, v in info.items() if isinstance(v, int | float | str | bool)}
        batcher = Batcher(eff, tok, classes, device)
        train_b = batcher.prepare(train, rendered=True)
        dev_b = batcher.prepare(dev, rendered=True)
        n_ref = min(train_b.n, max(dev_b.n, 32), 256)
        ref_b = train_b.subset(list(range(n_ref)))

        micro = int(eff.get("micro_batch", 8))
        accum = max(1, int(eff.get("grad_accum", 1)))
        per_epoch = math.ceil(train_b.n / micro)
        max_steps = int(eff.get("max_steps", 0) or 0)
        epochs = float(eff.get("epochs", 1) or 1)
        self.total_steps = max_steps if max_steps > 0 else max(1, math.ceil(per_epoch * epochs / accum))

        from engine.training.models import make_optimizer

        optimizer, scheduler = make_optimizer(model, eff, self.total_steps)
        groups = optimizer.param_groups
        precision = str(eff.get("precision", "fp32"))
        scaler = torch.amp.GradScaler("cuda") if precision == "fp16" and device.startswith("cuda") else None
        max_grad_norm = float(eff.get("max_grad_norm", 1.0) or 0.0)

        metric = str(eff.get("dev_metric") or ("macro_f1" if is_cls else "dev_loss"))
        if is_cls and metric not in DEV_METRICS:
            self.status["dev_metric_note"] = f"{metric} is not tracked during training; macro_f1 is"
            metric = "macro_f1"
        elif not is_cls:
            metric = "dev_loss"
        best: dict[str, Any] = {"value": None, "step": -1, "stale_evals": 0}
        ckpt_root = self.dir / CHECKPOINTS
        done = checkpoint.complete(ckpt_root)
        if done:
            state = checkpoint.load(done[-1], model, optimizer, scheduler, scaler)
            self.step = int(state["step"])
            best = state.get("best", best)
            self.status["resumed_from"].append(self.step)
            append_metric(
                self.dir,
                {
                    "kind": "resume",
                    "step": self.step,
                    "time": time.time(),
                    "checkpoint": done[-1].name,
                    "run": self.status["runs"],
                },
            )
        else:
            self.set_stage("initial-eval")
            trivial = batcher.trivial(train_b, dev_b, metric)
            append_metric(self.dir, {"kind": "trivial", "step": 0, "metric": metric, **trivial})
            self._eval(model, batcher, dev_b, ref_b, metric, evaluate)

        self.set_stage("training")
        delay = float(self.runtime.get("step_delay_seconds", 0.0))
        ckpt_every = int(eff.get("checkpoint_every_steps", 0) or 0)
        eval_every = int(eff.get("eval_every_steps", 0) or 0)
        selection = str(eff.get("checkpoint_selection", "last"))
        stopping = str(eff.get("stopping_rule", "fixed_budget"))
        patience = max(1, int(eff.get("patience_evals", 3) or 3))
        model.train()
        while self.step < self.total_steps:
            t0 = time.time()
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for k in range(accum):
                idx = batcher.micro_indices(self.step * accum + k, micro, train_b.n, seed)
                with torch.autocast(
                    device_type=device.split(":")[0],
                    dtype=torch.bfloat16,
                    enabled=precision == "bf16" and device.startswith("cuda"),
                ):
                    out = model(**train_b.batch(idx))
                loss = out.loss / accum
                if not torch.isfinite(loss):
                    raise Halt(
                        f"non-finite loss ({float(out.loss.detach())}) at step {self.step + 1}", self.step + 1
                    )
                (scaler.scale(loss) if scaler else loss).backward()
                loss_sum += float(loss.detach())
            if scaler:
                scaler.unscale_(optimizer)
            params = [p for g in groups for p in g["params"]]
            if max_grad_norm > 0:
                gn = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
            else:
                gn = torch.norm(torch.stack([p.grad.norm() for p in params if p.grad is not None]))
            gn = float(gn)
            if not math.isfinite(gn):
                raise Halt(f"non-finite gradient norm ({gn}) at step {self.step + 1}", self.step + 1)
            lr_now = float(scheduler.get_last_lr()[0])
            if scaler:
                scaler.step(optimizer)
                scaler.update()
            else:
                optimizer.step()
            scheduler.step()
            self.step += 1
            append_metric(
                self.dir,
                {
                    "kind": "step",
                    "step": self.step,
                    "time": time.time(),
                    "loss": loss_sum,
                    "lr": lr_now,
                    "grad_norm": gn,
                    "seconds": round(time.time() - t0, 4),
                    "epoch": round(self.step * accum * micro / train_b.n, 4),
                },
            )
            self.status["step"] = self.step
            if eval_every and self.step % eval_every == 0 and self.step < self.total_steps:
                value = self._eval(model, batcher, dev_b, ref_b, metric, evaluate)
                if self._better(value, best["value"], metric):
                    best = {"value": value, "step": self.step, "stale_evals": 0}
                    if selection == "best_dev":
                        kept = checkpoint.save(
                            self.dir / "best", self.step, model, optimizer, scheduler, scaler, {"best": best}
                        )
                        for old in checkpoint.complete(self.dir / "best"):
                            if old != kept:
                                shutil.rmtree(old, ignore_errors=True)
                else:
                    best["stale_evals"] = int(best.get("stale_evals", 0)) + 1
                model.train()
                if stopping == "early_stopping" and best["stale_evals"] >= patience:
                    append_metric(
                        self.dir,
                        {
                            "kind": "early_stop",
                            "step": self.step,
                            "time": time.time(),
                            "reason": f"no dev improvement in {patience} evaluations",
                        },
                    )
                    self.status["early_stopped_at"] = self.step
                    break
            if ckpt_every and self.step % ckpt_every == 0 and self.step < self.total_steps:
                path = checkpoint.save(
                    ckpt_root,
                    self.step,
                    model,
                    optimizer,
                    scheduler,
                    scaler,
                    {"best": best, "total_steps": self.total_steps, "seed": seed},
                )
                append_metric(
                    self.dir,
                    {"kind": "checkpoint", "step": self.step, "time": time.time(), "path": path.name},
                )
            write_status(self.dir, self.status)
            if delay:
                time.sleep(delay)

        self.set_stage("final-eval")
        value = self._eval(model, batcher, dev_b, ref_b, metric, evaluate)
        selected = self.step
        saved_best = checkpoint.complete(self.dir / "best")
        if selection == "best_dev" and saved_best and not self._better(value, best["value"], metric):
            # an earlier evaluation was better: the artifact is that state (ties keep the earlier one)
            checkpoint.load_trainable(model, saved_best[-1] / checkpoint.TRAINABLE)
            selected = int(best["step"])
            value = self._eval(model, batcher, dev_b, ref_b, metric, evaluate, selected=selected)
        save_artifact(
            self.dir / FINAL,
            model,
            tok,
            eff,
            batcher,
            dev_b,
            dev,
            selected_step=selected,
            selection=selection,
            info=self.status.get("model_info", {}),
        )

    def _better(self, value: float | None, than: float | None, metric: str) -> bool:
        if value is None or not math.isfinite(value):
            return False
        if than is None:
            return True
        return value < than if metric in LOWER_BETTER else value > than

    def _eval(
        self, model: Any, batcher: Any, dev_b: Any, ref_b: Any, metric: str, evaluate: Any, selected: int = -1
    ) -> float:
        self.evaluating = True
        try:
            dev_r = evaluate(model, dev_b, metric, batcher.classes)
            ref_r = evaluate(model, ref_b, metric, batcher.classes)
        finally:
            self.evaluating = False
            self.heartbeat.restart_count(self.step)
        kind = "eval" if selected < 0 else "selected_eval"
        rec = {
            "kind": kind,
            "split": "dev",
            "step": self.step,
            "time": time.time(),
            "metric": metric,
            "value": dev_r["value"],
            "loss": dev_r["loss"],
            "train_value": ref_r["value"],
            "train_rows": ref_b.n,
            "rows": dev_b.n,
            "stage": self.stage,
            "selected_step": selected,
        }
        if "pred_distribution" in dev_r:
            rec["pred_distribution"] = dev_r["pred_distribution"]
            rec["true_distribution"] = dev_r["true_distribution"]
        append_metric(self.dir, rec)
        return float(dev_r["value"])


PID_FILE = "pid.json"  # the launcher's pid file (engine.providers.local.PID_FILE)


def record_self(job_dir: Path) -> None:
    """The job's first act: name itself in pid.json, so a launcher killed before writing it still
    leaves a job folder that identifies the live process (pid, process group, host, start)."""
    import socket

    path = Path(job_dir) / PID_FILE
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict):
        info = {}
    if info.get("pid") == os.getpid():
        return  # the launcher was first
    starts = [*info.get("starts", []), now_iso()] if isinstance(info.get("starts"), list) else [now_iso()]
    doc = {"pid": os.getpid(), "pgid": os.getpgid(0), "host": socket.gethostname(), "starts": starts}
    try:
        atomic_write_text(path, json.dumps(doc))
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m engine.training.job JOB_DIR", file=sys.stderr)
        return 2
    job_dir = Path(args[0])
    if job_dir.is_dir():
        record_self(job_dir)
    if not (job_dir / CONTRACT).is_file():
        print(
            f"{job_dir / CONTRACT} not found: a job directory holds the frozen contract copy", file=sys.stderr
        )
        return 2
    return Job(job_dir).run()


if __name__ == "__main__":
    sys.exit(main())
