"""Shapes of a retrieval claim's checks (engine/retrieval): the query–document table, the split's
query integrity, the baseline's rankers and the artifact stage's per-arm ranking figures."""

from __future__ import annotations

from pydantic import Field

from claimcheck.engine.shapes.base import Part, Shape
from claimcheck.engine.shapes.common import Interval


class SourceRetrieval(Shape):
    """The judged query–document pairs: queries, documents, relevant pairs per query, and the
    queries with no relevant document (named) that no ranking metric can score."""

    check_ids = ("source.retrieval",)
    queries: int
    documents: int
    pairs: int
    relevant_pairs: int
    grades: dict[str, int]  # relevance grade (as written) -> judged pairs
    relevant_per_query: dict[str, float]  # min, median, max over queries
    queries_without_relevant: int
    queries_without_relevant_ids: list[str] = Field(default_factory=list)  # the first 20
    documents_with_several_texts: list[str] = Field(default_factory=list)
    queries_with_several_texts: list[str] = Field(default_factory=list)
    pairs_judged_twice: int = 0


class SplitQueries(Part):
    queries: int
    scored_queries: int  # with at least one relevant document
    pairs: int


class QueryIntegrity(Shape):
    """Every query's pairs in one split: the queries found in more than one split, named."""

    check_ids = ("split.query_integrity",)
    queries: int
    queries_in_several_splits: int
    crossing_ids: list[str] = Field(default_factory=list)  # the first 20
    per_split: dict[str, SplitQueries]


class ArmRanking(Part):
    """One ranker's figures: per metric the mean over the scored queries with its interval over queries."""

    what: str
    metrics: dict[str, Interval]


class BaselineRetrieval(Shape):
    """The conventional ranker (BM25) and a random ranking on the dev queries over the whole corpus."""

    check_ids = ("baseline.retrieval",)
    split: str
    k: int
    corpus: int
    queries: int
    queries_without_relevant: int
    primary_metric: str
    arms: dict[str, ArmRanking]
    # per metric: bm25 − trivial_baseline, paired over the same queries
    differences: dict[str, Interval]
    learnable: bool


class Ranking(Shape):
    """The locked-test ranking figures of every arm and the candidate's paired differences to each
    comparator in every ranking metric (the claim's own metric is artifact.comparison's)."""

    check_ids = ("artifact.ranking",)
    k: int
    corpus: int
    queries: int
    queries_without_relevant: int
    primary_metric: str
    arms: dict[str, ArmRanking]
    differences: dict[str, dict[str, Interval]]  # comparator -> metric -> candidate − comparator
