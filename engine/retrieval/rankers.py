"""The rankers of a retrieval claim: a seeded random ranking, BM25 and the unchanged encoder.

Each returns a (queries, corpus documents) score matrix, higher ranking first. BM25 is `bm25s`
(Lucene's BM25 variant, English stop words, its default k1 = 1.5, b = 0.75); the encoder is loaded
with sentence-transformers from a local folder only (never downloaded, never remote code) and ranks
by cosine similarity of its normalised embeddings.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from claimcheck.engine.pipeline.context import StageInputError

TRIVIAL_WHAT = "a random ranking of the corpus per query (seeded): what no model at all achieves"
BM25_WHAT = "BM25 (bm25s, English stop words, k1 = 1.5, b = 0.75) over the same corpus"


def random_scores(n_queries: int, n_docs: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n_queries, n_docs))


class BM25Index:
    """BM25 over the corpus, indexed once; `score` ranks the corpus for each query."""

    def __init__(self, doc_texts: list[str]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.retriever = bm25s.BM25()
        self.retriever.index(
            bm25s.tokenize(doc_texts, stopwords="en", show_progress=False), show_progress=False
        )

    def score(self, query_texts: list[str]) -> np.ndarray:
        tokens = self._bm25s.tokenize(query_texts, stopwords="en", show_progress=False, return_ids=False)
        return np.stack([np.asarray(self.retriever.get_scores(t), dtype=np.float64) for t in tokens])


def bm25_scores(query_texts: list[str], doc_texts: list[str]) -> np.ndarray:
    return BM25Index(doc_texts).score(query_texts)


def folder_digest(path: Path) -> tuple[str, int]:
    """sha256 over every file of a model folder (relative name and bytes, in name order), and the count."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in files:
        h.update(p.relative_to(path).as_posix().encode() + b"\0")
        with p.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return "sha256:" + h.hexdigest(), len(files)


def load_encoder(path: Path, max_length: int) -> Any:
    """The encoder from its local folder on CPU (no download, no remote code)."""
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(str(path), device="cpu", local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - any load failure is the same user-facing problem
        raise StageInputError(
            f"the encoder at {path} cannot be loaded by sentence-transformers: {type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    model.max_seq_length = max_length
    return model


def embed(model: Any, texts: list[str], batch_size: int) -> np.ndarray:
    return np.asarray(
        model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        ),
        dtype=np.float64,
    )


class EncoderIndex:
    """The corpus embedded once by the encoder; `score` is each query's cosine similarity to it."""

    def __init__(self, model: Any, doc_texts: list[str], batch_size: int) -> None:
        self.model, self.batch_size = model, batch_size
        self.docs = embed(model, doc_texts, batch_size)

    def score(self, query_texts: list[str]) -> np.ndarray:
        return embed(self.model, query_texts, self.batch_size) @ self.docs.T


class RandomRanking:
    """A seeded random score for every corpus document, drawn afresh per query in order."""

    def __init__(self, n_docs: int, seed: int) -> None:
        self.n_docs, self.seed = n_docs, seed

    def score(self, query_texts: list[str]) -> np.ndarray:
        return random_scores(len(query_texts), self.n_docs, self.seed)


def versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("sentence-transformers", "transformers", "torch", "bm25s", "numpy")}
