"""Retrieval and ranking claims (claim.task_kind = "retrieval").

The data is a table of judged query–document pairs (source input `[source.retrieval]` names the
query id, query, document id and document columns; the source's label column holds the relevance
grade). The corpus is every distinct document of the data; every query is ranked against all of it.
The split keeps a query's pairs in one split (`split.query_integrity`); the baseline stage scores a
random ranking and BM25 (`bm25s`) on the dev queries (`baseline.retrieval`); the contract pins the
unchanged encoder (sentence-transformers, a local folder only); dispatch launches no job; the artifact
stage ranks the locked-test queries with every arm and compares recall@k, nDCG@k and MRR with
intervals over queries (`artifact.ranking`, `artifact.comparison`).

data.py: the pairs as queries × corpus relevance; rankers.py: the three rankers; stages.py: the
checks each stage writes for a retrieval claim.
"""
