"""The training loss under sample weights: the weighted mean of the per-example loss.

A contract with loss_weighting = "sample_weight" (engine/training/schema.py) trains on
sum(w_i * l_i) / sum(w_i) over the rows of one optimizer step (every micro-batch of it), where l_i
is row i's cross-entropy and w_i its weight from the source's weight column (the job's row files
carry it). Each micro-batch contributes its share, sum over its rows of w_i * l_i divided by the
step's total weight, so the gradients accumulated over the step are those of the step's weighted
mean whatever the micro-batching. A step whose rows all weigh zero has zero loss and no gradient.
"""

from __future__ import annotations

from typing import Any


def step_weight(weights: list[float], micro_batches: list[list[int]]) -> float:
    """The total weight of the rows one optimizer step reads (the weighted mean's denominator)."""
    return float(sum(weights[i] for idx in micro_batches for i in idx))


def per_example(logits: Any, labels: Any) -> Any:
    """Each row's cross-entropy (float32), the loss the model's own mean reduction averages."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.float(), labels, reduction="none")


def weighted(logits: Any, labels: Any, weights: list[float], total: float) -> Any:
    """One micro-batch's share of the step's weighted mean: sum(w * l) / `total` (0 when total is 0)."""
    import torch

    w = torch.tensor(weights, dtype=torch.float32, device=logits.device)
    losses = per_example(logits, labels)
    return (losses * w).sum() / total if total > 0 else (losses * 0.0).sum()
