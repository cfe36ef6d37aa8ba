"""Ranking metrics of a retrieval claim: recall@k, nDCG@k and MRR per query, and their intervals.

A query's ranking is its score for every document of the corpus (higher ranks first) beside the
graded relevance of each document to it (0 = not relevant). Per query:

- recall@k: the relevant documents (relevance > 0) among the first k, over the relevant documents;
- nDCG@k: ``sklearn.metrics.ndcg_score`` of the query (linear gains, log2 discount, tied scores
  averaged over their tie as scikit-learn does);
- MRR: 1 / the rank of the first relevant document (0 when none is ranked).

recall@k and MRR rank tied scores by corpus order (a stable sort). A query with no relevant
document has no recall and no reciprocal rank: it is left out of scoring and counted by the caller.
The claim's figure is the mean over the scored queries; its interval resamples whole queries (the
independent unit), paired between two arms on the same resamples (engine/stats/uncertainty.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from claimcheck.engine.stats import uncertainty

METRICS = ("recall_at_k", "ndcg_at_k", "mrr")


def _order(scores: np.ndarray) -> np.ndarray:
    """Document indices best first; ties in corpus order."""
    return np.argsort(-scores, kind="stable")


def recall_at_k(relevance: np.ndarray, scores: np.ndarray, k: int) -> float:
    rel = np.asarray(relevance, dtype=np.float64) > 0
    total = int(rel.sum())
    if total == 0:
        return float("nan")
    return float(rel[_order(np.asarray(scores, dtype=np.float64))[:k]].sum() / total)


def reciprocal_rank(relevance: np.ndarray, scores: np.ndarray) -> float:
    rel = np.asarray(relevance, dtype=np.float64) > 0
    if not rel.any():
        return float("nan")
    ranked = rel[_order(np.asarray(scores, dtype=np.float64))]
    return float(1.0 / (int(np.argmax(ranked)) + 1))


def _tie_averaged_dcg(gains: np.ndarray, scores: np.ndarray, discount: np.ndarray) -> float:
    """DCG where the documents tied on a score share the mean gain of their tie (scikit-learn's rule)."""
    uniq, inv, counts = np.unique(-scores, return_inverse=True, return_counts=True)
    tie_gain = np.zeros(len(uniq))
    np.add.at(tie_gain, inv, gains)
    tie_gain /= counts
    ends = np.cumsum(counts) - 1
    cum_discount = np.cumsum(discount)
    starts = np.concatenate([[0], ends[:-1] + 1])
    total = 0.0
    for g, s, e in zip(tie_gain, starts, ends, strict=True):
        if s >= len(discount):
            break
        total += g * (cum_discount[min(e, len(discount) - 1)] - (cum_discount[s - 1] if s else 0.0))
    return float(total)


def ndcg_at_k(relevance: np.ndarray, scores: np.ndarray, k: int) -> float:
    """nDCG@k of one query; 0 when no document is relevant (as sklearn.metrics.ndcg_score)."""
    gains = np.asarray(relevance, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    n = len(gains)
    discount = 1.0 / np.log2(np.arange(n) + 2)
    discount[k:] = 0.0
    ideal = float(np.sort(gains)[::-1] @ discount)
    if ideal == 0.0:
        return 0.0
    return _tie_averaged_dcg(gains, s, discount) / ideal


def per_query(metric: str, relevance: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """The metric of every query: `relevance` and `scores` are (queries, documents)."""
    if metric == "recall_at_k":
        fn = lambda r, s: recall_at_k(r, s, k)  # noqa: E731
    elif metric == "ndcg_at_k":
        fn = lambda r, s: ndcg_at_k(r, s, k)  # noqa: E731
    elif metric == "mrr":
        fn = reciprocal_rank
    else:
        raise ValueError(f"{metric!r} is not a ranking metric ({', '.join(METRICS)})")
    return np.array([fn(r, s) for r, s in zip(relevance, scores, strict=True)], dtype=np.float64)


def _mean_statistic(name: str) -> uncertainty.Statistic:
    """The mean of per-query values as summed statistics, so resamples over queries stay exact."""

    def rows(y: np.ndarray, values: np.ndarray) -> np.ndarray:
        return np.stack([np.asarray(values, dtype=np.float64), np.ones(len(values))], axis=1)

    def finish(t: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return t[:, 0] / t[:, 1]

    return uncertainty.Statistic(name, rows, finish)


def interval(name: str, values: np.ndarray, boot: uncertainty.Bootstrap) -> dict[str, Any]:
    """The mean of one arm's per-query values with its bootstrap interval over queries."""
    v = np.asarray(values, dtype=np.float64)
    out = uncertainty.bootstrap_ci(_mean_statistic(name), np.zeros(len(v)), v, None, boot)
    return uncertainty.unit_rule({**out, "unit": "query"}, "query")


def paired(name: str, a: np.ndarray, b: np.ndarray, boot: uncertainty.Bootstrap) -> dict[str, Any]:
    """mean(a) − mean(b) over the same queries, resampling whole queries for both arms at once."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    out = uncertainty.paired_bootstrap_diff(_mean_statistic(name), np.zeros(len(va)), va, vb, None, boot)
    return uncertainty.unit_rule({**out, "unit": "query"}, "query")
