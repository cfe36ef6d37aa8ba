"""A retrieval claim's data: judged query–document pairs as queries × corpus relevance.

One row is one judged pair; the relevance grade is the source's target (its label column after the
label mapping), a non-negative number (0 = not relevant). The corpus is every distinct document id
of the rows given; a document never judged for a query counts as not relevant to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.retrieval.columns import RetrievalColumns


@dataclass(frozen=True)
class Corpus:
    ids: list[str]
    texts: list[str]


@dataclass(frozen=True)
class Queries:
    ids: list[str]
    texts: list[str]
    relevance: np.ndarray  # (queries, corpus documents), 0 where not judged relevant

    @property
    def scored(self) -> np.ndarray:
        """The queries with at least one relevant document (the ones a ranking metric can score)."""
        return (self.relevance > 0).any(axis=1)


def columns(source_inputs: dict[str, Any]) -> RetrievalColumns:
    """The source's `[source.retrieval]` table; a retrieval claim without one is refused."""
    raw = source_inputs.get("retrieval")
    cols = RetrievalColumns.model_validate(raw) if raw else None
    if cols is None or not all(cols.columns()):
        raise StageInputError(
            "a retrieval claim needs the source's [source.retrieval] table with query_id_column, "
            "query_column, doc_id_column and doc_column"
        )
    return cols


def grade(value: Any) -> float:
    """A relevance grade as a number; a grade that is not a finite non-negative number is refused."""
    try:
        g = float(str(value).strip())
    except ValueError:
        g = math.nan
    if not math.isfinite(g) or g < 0:
        raise StageInputError(
            f"relevance grade {str(value)!r} is not a non-negative number; the label column of a "
            "retrieval claim holds each pair's relevance (0 = not relevant)"
        )
    return g


def corpus(frame: Any, cols: RetrievalColumns) -> Corpus:
    """Every distinct document of the rows, in document-id order (the first text of an id)."""
    import polars as pl

    docs = (
        frame.select(pl.col(cols.doc_id_column).cast(pl.String), pl.col(cols.doc_column).cast(pl.String))
        .unique(subset=[cols.doc_id_column], keep="first", maintain_order=True)
        .sort(cols.doc_id_column)
    )
    return Corpus(docs[cols.doc_id_column].to_list(), docs[cols.doc_column].fill_null("").to_list())


def queries(frame: Any, cols: RetrievalColumns, corp: Corpus, target: str = "target") -> Queries:
    """The queries of the rows (query-id order) with their relevance to every corpus document."""
    import polars as pl

    rows = frame.select(
        pl.col(cols.query_id_column).cast(pl.String).alias("q"),
        pl.col(cols.query_column).cast(pl.String).fill_null("").alias("text"),
        pl.col(cols.doc_id_column).cast(pl.String).alias("d"),
        pl.col(target).cast(pl.String).alias("g"),
    )
    first = rows.unique(subset=["q"], keep="first", maintain_order=True).sort("q")
    ids, texts = first["q"].to_list(), first["text"].to_list()
    q_index = {q: i for i, q in enumerate(ids)}
    d_index = {d: i for i, d in enumerate(corp.ids)}
    rel = np.zeros((len(ids), len(corp.ids)), dtype=np.float64)
    for q, d, g in zip(rows["q"].to_list(), rows["d"].to_list(), rows["g"].to_list(), strict=True):
        if d in d_index:
            rel[q_index[q], d_index[d]] = max(rel[q_index[q], d_index[d]], grade(g))
    return Queries(ids, texts, rel)
