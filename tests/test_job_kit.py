"""Shared helpers for the job / provider / dispatch / artifact tests: a tiny encoder, tiny ticket-like
rows and an effective contract that trains it in a few seconds on CPU."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

CLASSES = ["billing", "shipping", "technical"]
_WORDS = {
    "billing": "refund invoice charge payment card declined subscription".split(),
    "shipping": "package delivery tracking courier delayed parcel address".split(),
    "technical": "error crash bug app update install slow".split(),
}
_NOISE = "please help thanks hello my the is not when can you".split()


def rows(n: int, seed: int, start_id: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        label = CLASSES[i % len(CLASSES)]
        words = [rng.choice(_WORDS[label]) for _ in range(3)] + [rng.choice(_NOISE) for _ in range(4)]
        rng.shuffle(words)
        out.append(
            {
                "row_id": start_id + i,
                "subject": " ".join(words[:3]),
                "body": " ".join(words[3:]),
                "target": label,
                "family_id": (start_id + i) // 2,
            }
        )
    return out


def frame(n: int, seed: int, start_id: int = 0):
    import polars as pl

    return pl.DataFrame(rows(n, seed, start_id))


def effective(model_dir: Path, **over: Any) -> dict[str, Any]:
    eff: dict[str, Any] = {
        "task_kind": "text_classification",
        "model_path": str(model_dir),
        "tokenizer_path": "",
        "adapter_mode": "lora",
        "quant": {"quant_type": "nf4", "double_quant": True, "compute_dtype": "bfloat16"},
        "lora": {"r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["query", "value"]},
        "optimizer": {"name": "adamw", "lr": 5e-3, "head_lr": 5e-3, "weight_decay": 0.0},
        "schedule": {"name": "linear", "warmup_ratio": 0.1},
        "micro_batch": 8,
        "grad_accum": 1,
        "dp_replicas": 1,
        "precision": "fp32",
        "max_length": 32,
        "epochs": 1,
        "max_steps": 12,
        "seed": 7,
        "text_template": "{subject}\n{body}",
        "label_classes": list(CLASSES),
        "eval_every_steps": 4,
        "checkpoint_every_steps": 4,
        "checkpoint_selection": "last",
        "device": "cpu",
        "alarms": {
            "divergence_factor": 3.0,
            "collapse_share": 0.95,
            "gap_limit": 0.5,
            "stall_heartbeats": 50,
            "worse_than_trivial_after_step": -1,
            "disabled": ["train_dev_gap"],
        },
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(eff.get(k), dict):
            eff[k] = {**eff[k], **v}
        else:
            eff[k] = v
    return eff


def wait_for(pred: Any, timeout: float = 90.0, poll: float = 0.1) -> Any:
    """Poll `pred` until it returns something truthy (returned), or fail after `timeout` seconds."""
    end = time.time() + timeout
    while time.time() < end:
        got = pred()
        if got:
            return got
        time.sleep(poll)
    raise AssertionError("condition not reached in time")


def make_model(tmp: Path) -> Path:
    from claimcheck.engine.training.tiny import make_tiny_encoder

    return make_tiny_encoder(tmp / "tiny-encoder")


def job_dir(
    root: Path,
    model_dir: Path,
    op_id: str = "0123456789abcdef-a1",
    *,
    n_train: int = 48,
    n_dev: int = 24,
    runtime: dict[str, Any] | None = None,
    **over: Any,
) -> Path:
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.training.jobfiles import write_job_dir

    eff = effective(model_dir, **over)
    jd = root / op_id
    write_job_dir(
        jd,
        effective=eff,
        digest=digest_of(eff),
        op_id=op_id,
        attempt=1,
        train=frame(n_train, 1),
        dev=frame(n_dev, 2, start_id=1000),
        workspace=root,
        runtime={"heartbeat_seconds": 0.2, "threads": 1, **(runtime or {})},
    )
    return jd


def test_micro_batches_cover_each_epoch_once() -> None:
    from claimcheck.engine.training.evaluate import Batcher

    first = [i for k in range(4) for i in Batcher.micro_indices(k, 5, 20, seed=3)]
    again = [i for k in range(4) for i in Batcher.micro_indices(k, 5, 20, seed=3)]
    assert sorted(first) == list(range(20)) and first == again
    second_epoch = [i for k in range(4, 8) for i in Batcher.micro_indices(k, 5, 20, seed=3)]
    assert sorted(second_epoch) == list(range(20)) and second_epoch != first


def test_predict_sorts_rows_by_length_and_returns_them_in_row_order(tmp_path) -> None:
    """Inference batches are the rows sorted by length (less padding); the probabilities still come
    back one row each, in row order, the same as predicting every row alone, unpadded."""
    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification

    from claimcheck.engine.training import tiny
    from claimcheck.engine.training.evaluate import Encoded, eval_batches, predict

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny.make_tiny_encoder(tmp_path / "enc", 3))
    lengths = [5, 17, 2, 9, 17, 3, 12, 1, 8, 30, 4]
    rows = [torch.randint(5, 200, (n,)) for n in lengths]
    enc = Encoded(rows, [0] * len(rows), list(range(len(rows))), 0, "cpu", True)
    batches = eval_batches(enc, 4)
    assert sorted(i for b in batches for i in b) == list(range(len(rows)))
    widths = [max(lengths[i] for i in b) for b in batches]
    assert widths == sorted(widths, reverse=True)
    assert batches[0][:3] == [9, 1, 4]  # the longest first, equal lengths in row order
    got = predict(model, enc, batch_size=4)["proba"]
    alone = np.vstack([predict(model, enc.subset([i]), batch_size=1)["proba"] for i in range(len(rows))])
    assert got.shape == (len(rows), 3)
    np.testing.assert_allclose(got, alone, atol=1e-5)


def test_an_artifact_written_in_row_order_is_predicted_in_row_order() -> None:
    # A manifest naming the mode before length-sorted batches: its rows are batched in order again,
    # so a session recorded then replays to the same probabilities.
    import torch

    from claimcheck.engine.training.evaluate import INFERENCE_MODE, ROW_ORDER_MODE, Encoded, eval_batches

    rows = [torch.ones(n, dtype=torch.long) for n in [3, 9, 1, 7, 5]]
    enc = Encoded(rows, [0] * 5, list(range(5)), 0, "cpu", True)
    assert eval_batches(enc, 2, ROW_ORDER_MODE) == [[0, 1], [2, 3], [4]]
    assert eval_batches(enc, 2, INFERENCE_MODE) == [[1, 3], [4, 0], [2]]
