"""Shared fixtures for the training / contract tests: tiny models built once per test session, and
small hand-made sessions (upstream records + membership) for the contract stage."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.data import splits
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.training import tiny

CLASSES = ["billing", "shipping", "technical"]
WORDS = {
    "billing": ["refund", "invoice", "charge", "payment", "card"],
    "shipping": ["package", "delivery", "courier", "tracking", "parcel"],
    "technical": ["error", "crash", "bug", "update", "firmware"],
}
FILLER = ["please", "help", "hello", "thanks", "today", "my", "the", "is"]


@pytest.fixture(scope="session", name="tiny_dirs")
def tiny_dirs_fixture(tmp_path_factory) -> dict[str, Path]:
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("tiny_models")
    return {
        "llama": tiny.make_tiny_llama(root / "llama"),
        "llama_nomarkers": tiny.make_tiny_llama(
            root / "llama_nomarkers", chat_template=tiny.CHAT_TEMPLATE_NO_MARKERS
        ),
        "encoder": tiny.make_tiny_encoder(root / "encoder"),
    }


# The counts of a source.entity_families record (engine/shapes/data.py EntityFamilies); the
# fixtures below only need its families file, the other figures are placeholders.
FAMILY_COUNTS = {
    "entity_columns": [],
    "rows": 0,
    "families": 0,
    "singleton_families": 0,
    "largest_family_rows": 0,
    "rows_in_multi_row_families": 0,
    "rows_without_entity_id": 0,
    "multi_row_families": 0,
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _records(tmp: Path, frame: pl.DataFrame, source_inputs: dict, claim_inputs: dict, seed: int = 0):
    n = frame.height
    tmp.mkdir(parents=True, exist_ok=True)
    frame.write_csv(tmp / "t.csv")
    data = tmp / "session" / "data"
    data.mkdir(parents=True, exist_ok=True)
    ids = np.arange(n, dtype=np.int64)
    pl.DataFrame({"row_id": ids, "family_id": ids}).write_parquet(data / "families.parquet")
    part = splits.assign_rows(ids, {"train": 0.7, "dev": 0.1, "calibration": 0.1, "test": 0.1}, seed)
    names = np.asarray(splits.SPLITS)[part]
    pl.DataFrame({"row_id": ids, "split": names, "fold": np.full(n, -1, dtype=np.int64)}).write_parquet(
        data / "split.parquet"
    )
    claim = StageRecord(stage="claim", inputs=claim_inputs)
    source = StageRecord(
        stage="source",
        inputs={"files": ["t.csv"], **source_inputs},
        checks=[
            Check(
                id="source.checksum",
                status="info",
                summary="x",
                measured={
                    "total_bytes": 1,
                    "files": [{"path": "t.csv", "sha256": _sha(tmp / "t.csv"), "bytes": 1}],
                },
            ),
            Check(
                id="source.entity_families",
                status="info",
                summary="x",
                measured=FAMILY_COUNTS
                | {
                    "families_path": "data/families.parquet",
                    "families_sha256": _sha(data / "families.parquet"),
                },
            ),
        ],
    )
    split = StageRecord(
        stage="split",
        inputs={"strategy": "random"},
        checks=[
            Check(
                id="split.membership",
                status="info",
                summary="x",
                measured={
                    "path": "data/split.parquet",
                    "sha256": _sha(data / "split.parquet"),
                    "rows": frame.height,
                    "sizes": {},
                    "excluded": {},
                },
            )
        ],
    )
    ctx = StageContext(session_dir=tmp / "session", workspace=tmp, stage="contract")
    return {"claim": claim, "source": source, "split": split}, ctx


def make_cls_session(tmp: Path, n: int = 120, seed: int = 0):
    """Tickets with subject/body, an unavailable outcome column and a sensitive email column."""
    rng = np.random.default_rng(seed)
    label = rng.choice(CLASSES, size=n)
    subjects, bodies = [], []
    for lab in label:
        subjects.append(f"{rng.choice(WORDS[lab])} {rng.choice(FILLER)}")
        bodies.append(" ".join([*rng.choice(FILLER, 3), str(rng.choice(WORDS[lab])), *rng.choice(FILLER, 2)]))
    frame = pl.DataFrame(
        {
            "ticket_id": np.arange(n),
            "subject": subjects,
            "body": bodies,
            "queue": label,
            "resolution_code": [f"RES_{lab.upper()}" for lab in label],
            "customer_email": [f"user{i}@example.com" for i in range(n)],
        }
    )
    return _records(
        tmp,
        frame,
        {
            "label_column": "queue",
            "input_columns": ["subject", "body", "resolution_code", "customer_email"],
            "text_columns": ["subject", "body"],
            "id_column": "ticket_id",
            "unavailable_columns": ["resolution_code"],
            "sensitive_columns": ["customer_email"],
        },
        {"task_kind": "text_classification", "primary_metric": "macro_f1", "class_order": CLASSES},
        seed,
    )


def make_sft_session(
    tmp: Path, n: int = 60, seed: int = 0, *, empty_reply_every: int = 0, long_prompt: bool = False
):
    rng = np.random.default_rng(seed)
    msgs, label = [], []
    for i in range(n):
        lab = str(rng.choice(CLASSES))
        prompt = " ".join([*rng.choice(FILLER, 2), str(rng.choice(WORDS[lab]))])
        if long_prompt:
            prompt = " ".join(rng.choice(FILLER, 60)) + " " + prompt
        reply = "" if empty_reply_every and i % empty_reply_every == 0 else f"route to {lab}"
        conv = [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]
        if not reply:
            conv = conv[:1]  # a conversation with no assistant turn: nothing to supervise
        msgs.append(json.dumps(conv))
        label.append(lab)
    frame = pl.DataFrame({"ticket_id": np.arange(n), "messages": msgs, "queue": label})
    return _records(
        tmp,
        frame,
        {
            "label_column": "queue",
            "input_columns": ["messages"],
            "text_columns": ["messages"],
            "id_column": "ticket_id",
        },
        {"task_kind": "causal_lm_sft", "primary_metric": "exact_match"},
        seed,
    )
