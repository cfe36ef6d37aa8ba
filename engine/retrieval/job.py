"""The retrieval job kind: a contrastive LoRA fine-tune of a retrieval claim's encoder.

`python -m claimcheck.engine.retrieval.job JOB_DIR` runs this class; the launchers choose this
module for a contract whose task kind is "retrieval" (jobfiles.job_module). It is the classification job (claimcheck.engine.training.job.Job) with its own setup,
step, evaluation and artifact: the same status file, heartbeats, signal handling, checkpoints
(trainable tensors, optimizer, scheduler, RNG), resume from the last complete checkpoint, evaluation
schedule, best-dev selection and early stopping. What differs (claimcheck.engine.retrieval.finetune):

- a micro-batch is `micro_batch` (query, relevant document) pairs of the train rows, drawn by the same
  seeded per-epoch permutation as the classification job; the loss is sentence-transformers'
  MultipleNegativesRankingLoss (the other documents of the micro-batch are each query's negatives);
- the dev metric is the claim's ranking metric (nDCG@k, recall@k or MRR) of the dev queries ranked
  over every document of the job's rows; the trivial line is a seeded random ranking's value;
- the artifact (final/) is the adapter tensors, the embeddings of the first dev queries made with
  them (the artifact stage's reload parity) and a manifest with their sha256.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.retrieval import finetune
from claimcheck.engine.training import jobfiles, stamp
from claimcheck.engine.training.job import Halt, Job
from claimcheck.engine.training.jobfiles import append_metric
from claimcheck.engine.training.jobrecords import EvalLine, StepLine, TrivialLine
from claimcheck.engine.training.schema import Effective


@dataclass
class RetrievalTraining:
    """What the retrieval training loop works with, built once by `RetrievalJob._setup`."""

    contract: Effective
    device: str
    model: Any
    loss: Any
    train_pairs: list[tuple[str, str]]
    dev: finetune.Ranked  # the dev queries over the job's documents
    ref: finetune.Ranked  # train queries over the same documents (the train-dev gap)
    dev_loss_pairs: list[tuple[str, str]]
    optimizer: Any
    scheduler: Any
    metric: str
    k: int
    scaler: Any = None
    best: dict[str, Any] = field(default_factory=lambda: {"value": None, "step": -1, "stale_evals": 0})

    @property
    def accum(self) -> int:
        return 1


class RetrievalJob(Job):
    def _setup(self, c: Effective) -> RetrievalTraining:  # type: ignore[override]
        import torch

        from claimcheck.engine import threads
        from claimcheck.engine.training.evaluate import load_split
        from claimcheck.engine.training.models import make_optimizer, model_info

        # the runtime's thread count, else the engine's cap (the usable cores, 1 on a saturated machine)
        torch.set_num_threads(int(self.runtime.get("threads", 0)) or threads.thread_cap())
        if c.retrieval is None:
            raise ValueError("the contract has no [effective.retrieval] table: re-run the contract stage")
        self.eff = c.model_dump(mode="json")  # every setting, its default written out where the copy omits it
        device = "cpu"
        torch.manual_seed(c.seed)
        train = load_split(self.dir, self.doc, "train")
        dev = load_split(self.dir, self.doc, "dev")
        workspace = Path(self.doc.get("workspace", "."))
        loaded = self._model_digest(device, workspace)
        model = finetune.build(self.eff, workspace, device)
        jobfiles.write_runtime(self.dir, stamp.stamp(loaded))
        info = model_info(model)
        self.status.model_info = {k: v for k, v in info.items() if isinstance(v, int | float | str | bool)}
        train_pairs = finetune.pairs(train)
        if not train_pairs:
            raise ValueError("the train rows hold no relevant (query, document) pair to train on")
        self.total_steps = self._budget(c, len(train_pairs))
        optimizer, scheduler = make_optimizer(model, self.eff, self.total_steps)
        return RetrievalTraining(
            contract=c,
            device=device,
            model=model,
            loss=finetune.loss_fn(model),
            train_pairs=train_pairs,
            dev=finetune.ranked(dev, train, dev),
            ref=finetune.ranked(train, train, dev),
            dev_loss_pairs=finetune.pairs(dev),
            optimizer=optimizer,
            scheduler=scheduler,
            metric=c.retrieval.metric,
            k=c.retrieval.ranking_k,
        )

    def _start_or_resume(self, run: RetrievalTraining) -> None:  # type: ignore[override]
        from claimcheck.engine.retrieval.rankers import random_scores
        from claimcheck.engine.stats import ranking
        from claimcheck.engine.training import checkpoint

        if checkpoint.complete(self.dir / jobfiles.CHECKPOINTS):
            super()._start_or_resume(run)  # restores the trainable tensors, optimizer and RNG
            return
        self.set_phase("initial-eval")
        keep = run.dev.scored
        rand = random_scores(len(run.dev.query_texts), len(run.dev.doc_texts), run.contract.seed)
        value = (
            float(ranking.per_query(run.metric, run.dev.relevance[keep], rand[keep], run.k).mean())
            if keep.any()
            else math.nan
        )
        detail = f"a seeded random ranking of the {len(run.dev.doc_texts)} documents of the job's rows"
        append_metric(
            self.dir, TrivialLine(kind="trivial", step=0, metric=run.metric, value=value, detail=detail)
        )
        self._eval(run)  # type: ignore[arg-type]

    def _step(self, run: RetrievalTraining) -> None:  # type: ignore[override]
        """One optimizer step over one micro-batch of pairs; a non-finite loss or norm halts."""
        import torch

        from claimcheck.engine.training.evaluate import Batcher

        c, t0 = run.contract, time.time()
        run.optimizer.zero_grad(set_to_none=True)
        idx = Batcher.micro_indices(self.step, c.micro_batch, len(run.train_pairs), c.seed)
        loss = finetune.pair_loss(run.model, run.loss, [run.train_pairs[i] for i in idx], run.device)
        if not torch.isfinite(loss):
            raise Halt(f"non-finite loss ({float(loss.detach())}) at step {self.step + 1}", self.step + 1)
        loss.backward()
        gn, lr_now = self._advance(run)  # type: ignore[arg-type]
        rec = StepLine(
            kind="step",
            step=self.step,
            time=time.time(),
            loss=float(loss.detach()),
            lr=lr_now,
            grad_norm=gn,
            seconds=round(time.time() - t0, 4),
            epoch=round(self.step * c.micro_batch / len(run.train_pairs), 4),
        )
        append_metric(self.dir, rec)
        self.status.step = self.step

    def _dev_loss(self, run: RetrievalTraining) -> float:
        import torch

        batch = run.contract.micro_batch
        losses = []
        with torch.no_grad():
            for i in range(0, len(run.dev_loss_pairs), batch):
                chunk = run.dev_loss_pairs[i : i + batch]
                losses.append(float(finetune.pair_loss(run.model, run.loss, chunk, run.device)) * len(chunk))
        return sum(losses) / len(run.dev_loss_pairs) if run.dev_loss_pairs else math.nan

    def _eval(self, run: RetrievalTraining, selected: int = -1) -> float:  # type: ignore[override]
        import torch

        self.eval_started = time.time()
        self.evaluating = True
        run.model.eval()
        try:
            with torch.no_grad():
                value, train_value = finetune.metric_values(run.model, [run.dev, run.ref], run.metric, run.k)
                loss = self._dev_loss(run)
        finally:
            self.evaluating = False
            self.heartbeat.restart_count(self.step)
        append_metric(
            self.dir,
            EvalLine(
                kind="eval" if selected < 0 else "selected_eval",
                split="dev",
                step=self.step,
                time=time.time(),
                metric=run.metric,
                value=value,
                loss=loss,
                train_value=train_value,
                train_rows=int(run.ref.scored.sum()),
                rows=int(run.dev.scored.sum()),
                phase=self.phase,
                selected_step=selected,
            ),
        )
        return float(value)

    def _finish(self, run: RetrievalTraining) -> None:  # type: ignore[override]
        """Final dev evaluation, the checkpoint selection rule, and the adapter artifact."""
        selected, selection = self._selected(run)
        parity = run.dev.query_texts[: finetune.PARITY_QUERIES]
        chosen = {"selected_step": selected, "checkpoint_selection": selection}
        finetune.save_final(self.dir / jobfiles.FINAL, run.model, self.eff, chosen, parity)


if __name__ == "__main__":
    from claimcheck.engine.training.job import main

    sys.exit(main(kind=RetrievalJob, module=jobfiles.RETRIEVAL_JOB_MODULE))
