"""Ranking metrics of a retrieval claim (engine/stats/ranking.py): nDCG@k equals
sklearn.metrics.ndcg_score per query (ties included), recall@k and MRR on hand-worked rankings, and
intervals that resample whole queries (the one interval rule: under 20 queries, none)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from claimcheck.engine.stats import ranking
from claimcheck.engine.stats.uncertainty import Bootstrap


@pytest.mark.parametrize("ties", [False, True])
def test_ndcg_at_k_equals_sklearn_per_query(ties: bool) -> None:
    rng = np.random.default_rng(3)
    for _ in range(300):
        n, k = int(rng.integers(2, 40)), int(rng.integers(1, 15))
        rel = rng.integers(0, 4, n).astype(float)
        scores = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
        assert ranking.ndcg_at_k(rel, scores, k) == pytest.approx(ndcg_score([rel], [scores], k=k), abs=1e-12)


def test_per_query_matches_sklearn_query_by_query() -> None:
    rng = np.random.default_rng(5)
    rel = rng.integers(0, 3, (25, 30)).astype(float)
    scores = rng.random((25, 30))
    got = ranking.per_query("ndcg_at_k", rel, scores, 10)
    want = [ndcg_score([r], [s], k=10) for r, s in zip(rel, scores, strict=True)]
    np.testing.assert_allclose(got, want, atol=1e-12)
    assert got.mean() == pytest.approx(ndcg_score(rel, scores, k=10))


def test_recall_at_k_and_reciprocal_rank_by_hand() -> None:
    rel = np.array([0, 1, 0, 2, 0])
    scores = np.array([0.9, 0.1, 0.8, 0.7, 0.2])  # ranking: d0, d2, d3, d4, d1
    assert ranking.recall_at_k(rel, scores, 3) == 0.5  # d3 of {d1, d3}
    assert ranking.recall_at_k(rel, scores, 5) == 1.0
    assert ranking.reciprocal_rank(rel, scores) == pytest.approx(1 / 3)
    # ties rank in corpus order
    assert ranking.reciprocal_rank(np.array([0, 1]), np.array([0.5, 0.5])) == 0.5
    # no relevant document: no value (the caller leaves the query out and counts it)
    assert np.isnan(ranking.recall_at_k(np.zeros(3), np.ones(3), 2))
    assert np.isnan(ranking.reciprocal_rank(np.zeros(3), np.ones(3)))
    with pytest.raises(ValueError, match="not a ranking metric"):
        ranking.per_query("macro_f1", rel[None], scores[None], 3)


def test_intervals_resample_queries_and_pair_the_arms() -> None:
    rng = np.random.default_rng(11)
    a, b = rng.random(40), rng.random(40) * 0.5
    boot = Bootstrap(n=300, seed=2)
    one = ranking.interval("mrr", a, boot)
    assert one["unit"] == "query" and one["units"] == 40 and one["estimate"] == pytest.approx(a.mean())
    assert one["lo"] < a.mean() < one["hi"]
    diff = ranking.paired("mrr", a, b, boot)
    assert diff["estimate"] == pytest.approx(a.mean() - b.mean()) and diff["excludes_zero"]
    # the same resamples for both arms: a paired difference of an arm with itself is exactly zero
    same = ranking.paired("mrr", a, a, boot)
    assert same["lo"] == same["hi"] == 0.0
    few = ranking.paired("mrr", a[:12], b[:12], boot)
    assert "lo" not in few and "12 independent query unit(s)" in few["refused"]
