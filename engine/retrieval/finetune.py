"""The fine-tuned encoder of a retrieval claim: a contrastive LoRA fine-tune of the small encoder.

The job (claimcheck.engine.retrieval.job) trains LoRA adapters (peft) on the encoder's linear
layers with sentence-transformers' MultipleNegativesRankingLoss over the train split's (query,
relevant document) pairs: each query's relevant document is its positive, the other documents of the
micro-batch its negatives. Its dev metric is the claim's ranking metric on the dev queries, ranked over
the documents of the job's own rows (train and dev pairs); the locked test is never in the job folder.
The artifact stage reloads the adapters into the unchanged encoder (`load_final`) and ranks the
locked-test queries with it beside the unchanged encoder, BM25 and a random ranking.

This module holds what the job and the artifact stage share: the model, the pairs, the dev ranking,
and the saved adapter's files. It needs no Polars (the job reads its row files with the standard
library, engine/training/rowfiles.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

LOSS = "MultipleNegativesRankingLoss"
LOSS_SCALE = 20.0  # sentence-transformers' default: cosine similarities × 20 into the cross-entropy
# The job's row files: one judged pair per row (the names the job reads, whatever the source calls them).
PAIR_COLUMNS = ("row_id", "query_id", "query", "doc_id", "passage", "target")
ADAPTER_FILE = "adapter.safetensors"
PARITY_FILE = "dev_query_embeddings.safetensors"
MANIFEST_FILE = "manifest.json"  # the name every job's final/ manifest has (jobfiles.MANIFEST)
PARITY_QUERIES = 16  # dev queries the job embeds at the end, re-embedded after the reload
EMBED_BATCH = 32
POOLER = r".*\bpooler\b.*"  # modules LoRA never wraps (a BERT pooler, unused by mean pooling)


@dataclass(frozen=True)
class Ranked:
    """Queries and a corpus as the job ranks them: texts, and each query's relevance to every document."""

    query_texts: list[str]
    doc_texts: list[str]
    relevance: np.ndarray  # (queries, documents)

    @property
    def scored(self) -> np.ndarray:
        return (self.relevance > 0).any(axis=1)


def _grade(value: Any) -> float:
    try:
        return max(0.0, float(str(value).strip()))
    except ValueError:
        return 0.0


def pairs(table: Any) -> list[tuple[str, str]]:
    """The (query, relevant document) pairs of a job row table, in row order."""
    return [
        (str(r["query"]), str(r["passage"])) for r in table.iter_rows(named=True) if _grade(r["target"]) > 0
    ]


def ranked(queries: Any, *corpus_tables: Any) -> Ranked:
    """The queries of `queries` (query-id order) over every distinct document of the tables given."""
    docs: dict[str, str] = {}
    for t in corpus_tables:
        for r in t.iter_rows(named=True):
            docs.setdefault(str(r["doc_id"]), str(r["passage"]))
    doc_ids = sorted(docs)
    d_index = {d: i for i, d in enumerate(doc_ids)}
    texts: dict[str, str] = {}
    rows = list(queries.iter_rows(named=True))
    for r in rows:
        texts.setdefault(str(r["query_id"]), str(r["query"]))
    q_ids = sorted(texts)
    q_index = {q: i for i, q in enumerate(q_ids)}
    rel = np.zeros((len(q_ids), len(doc_ids)))
    for r in rows:
        i, j = q_index[str(r["query_id"])], d_index[str(r["doc_id"])]
        rel[i, j] = max(rel[i, j], _grade(r["target"]))
    return Ranked([texts[q] for q in q_ids], [docs[d] for d in doc_ids], rel)


def lora_config(eff: dict[str, Any]) -> Any:
    from claimcheck.engine.training.models import _peft

    lo = eff["lora"]
    targets = lo["target_modules"]
    return _peft("lora").LoraConfig(
        r=int(lo["r"]),
        lora_alpha=int(lo["alpha"]),
        lora_dropout=float(lo["dropout"]),
        target_modules=targets if targets == "all-linear" else list(targets),
        # the pooler's output is not what sentence-transformers embeds (it pools the token states):
        # an adapter there would get no gradient
        exclude_modules=POOLER,
        task_type="FEATURE_EXTRACTION",
    )


def build(eff: dict[str, Any], workspace: Path, device: str = "cpu") -> Any:
    """The encoder from its local folder with fresh LoRA adapters (seeded) on its transformer."""
    import warnings

    import torch

    from claimcheck.engine.retrieval.rankers import load_encoder
    from claimcheck.engine.training.models import _peft, resolve_model_path

    model = load_encoder(resolve_model_path(eff["model_path"], workspace), int(eff["max_length"]))
    torch.manual_seed(int(eff.get("seed", 0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model[0].auto_model = _peft("lora").get_peft_model(model[0].auto_model, lora_config(eff))
    return model.to(device)


def loss_fn(model: Any) -> Any:
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    return MultipleNegativesRankingLoss(model, scale=LOSS_SCALE)


def features(model: Any, texts: list[str], device: str) -> dict[str, Any]:
    """The model's tokenised input for a list of texts (tensors on the device)."""
    out = model.preprocess(texts)
    return {k: (v.to(device) if hasattr(v, "to") else v) for k, v in out.items()}


def pair_loss(model: Any, loss: Any, batch: list[tuple[str, str]], device: str) -> Any:
    """The contrastive loss of a micro-batch of (query, relevant document) pairs."""
    qs, ds = [q for q, _ in batch], [d for _, d in batch]
    return loss([features(model, qs, device), features(model, ds, device)], None)


def embed(model: Any, texts: list[str]) -> np.ndarray:
    from claimcheck.engine.retrieval.rankers import embed as _embed

    return _embed(model, texts, EMBED_BATCH)


def metric_values(model: Any, sets: list[Ranked], metric: str, k: int) -> list[float]:
    """The mean of a ranking metric over each set's scored queries (NaN: none scored); sets sharing
    one corpus have it embedded once."""
    from claimcheck.engine.stats import ranking

    docs: dict[tuple[str, ...], np.ndarray] = {}
    out = []
    for data in sets:
        key = tuple(data.doc_texts)
        if key not in docs:
            docs[key] = embed(model, data.doc_texts)
        keep = data.scored
        if not keep.any():
            out.append(float("nan"))
            continue
        scores = embed(model, data.query_texts) @ docs[key].T
        out.append(float(ranking.per_query(metric, data.relevance[keep], scores[keep], k).mean()))
    return out


# ---------------------------------------------------------------- the saved adapter


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save_final(
    final: Path, model: Any, eff: dict[str, Any], selected: dict[str, Any], parity: list[str]
) -> None:
    """The trained adapters, the dev-query embeddings made with them, and a manifest hashing both."""
    import torch
    from safetensors.torch import save_file

    from claimcheck.engine.training.checkpoint import trainable_state

    tmp = final.parent / f".tmp-final-{os.getpid()}"
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    state = trainable_state(model)
    save_file(state, str(tmp / ADAPTER_FILE))
    model.eval()
    with torch.no_grad():
        emb = embed(model, parity)
    save_file({"embeddings": torch.from_numpy(np.ascontiguousarray(emb))}, str(tmp / PARITY_FILE))
    lora_b = [float(t.norm()) for n, t in state.items() if ".lora_B." in n]
    manifest = {
        "kind": "retrieval_lora",
        "loss": LOSS,
        "loss_scale": LOSS_SCALE,
        "model_path": eff["model_path"],
        "model_sha256": eff.get("model_sha256", ""),
        "lora": eff["lora"],
        "tensors": {n: list(t.shape) for n, t in sorted(state.items())},
        "lora_b_matrices": len(lora_b),
        "lora_b_min_norm": min(lora_b) if lora_b else -1.0,
        "parity_queries": parity,
        **selected,
        "file_sha256": {f: _sha256(tmp / f) for f in (ADAPTER_FILE, PARITY_FILE)},
    }
    (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1, sort_keys=True))
    if final.exists():
        import shutil

        shutil.rmtree(final)
    os.replace(tmp, final)


def read_manifest(final: Path) -> dict[str, Any]:
    return json.loads((final / MANIFEST_FILE).read_text())


def verify_final(final: Path) -> list[str]:
    """Problems with the saved adapter folder (empty: every file matches its recorded sha256 and the
    adapter tensors are the recorded ones, every LoRA B matrix non-zero)."""
    from safetensors import safe_open

    if not (final / MANIFEST_FILE).is_file():
        return [f"no {MANIFEST_FILE} in {final.name}"]
    m = read_manifest(final)
    problems = [
        f"{f}: sha256 {(_sha256(final / f) if (final / f).is_file() else 'missing')[:12]} differs from the recorded {want[:12]}"
        for f, want in m.get("file_sha256", {}).items()
        if not (final / f).is_file() or _sha256(final / f) != want
    ]
    if problems:
        return problems
    with safe_open(str(final / ADAPTER_FILE), framework="pt") as fh:
        shapes = {k: list(fh.get_slice(k).get_shape()) for k in fh.keys()}
    if shapes != m.get("tensors"):
        problems.append("the adapter's tensors differ from the manifest's")
    if int(m.get("lora_b_matrices", 0)) == 0 or float(m.get("lora_b_min_norm", 0.0)) <= 0.0:
        problems.append("a LoRA B matrix is zero: the adapter was not trained")
    return problems


def load_final(final: Path, eff: dict[str, Any], workspace: Path) -> tuple[Any, list[str], list[str]]:
    """The encoder with the saved adapters loaded, in eval mode; (model, missing, unexpected keys)."""
    from claimcheck.engine.training.checkpoint import load_trainable

    model = build(eff, workspace)
    missing, unexpected = load_trainable(model, final / ADAPTER_FILE)
    model.eval()
    return model, missing, unexpected


def recorded_embeddings(final: Path) -> np.ndarray:
    from safetensors.numpy import load_file

    return np.asarray(load_file(str(final / PARITY_FILE))["embeddings"], dtype=np.float64)
