"""A retrieval claim (docs/answers-retrieval.toml, generated query–passage pairs) runs all seven stages
headless to a verdict, and replay reproduces it. The records are read back and checked against
figures recomputed here from the data file and the split membership alone: queries per split, every
query in one split, and BM25's locked-test nDCG@k with scikit-learn's ndcg_score per query."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import tomlkit
from pydantic import ValidationError
from sklearn.metrics import ndcg_score

from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import retrieval as R
from claimcheck.engine.stages.claim.inputs import Inputs as ClaimInputs
from tests.test_check_registry import assert_session_declared

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-retrieval.toml"
PAIRS = ROOT / "sample_data" / "retrieval_pairs.csv"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    session_dir = tmp_path_factory.mktemp("retrieval") / "s"
    return session_dir, run_answers(ANSWERS, session_dir)


def _pairs_with_splits(session_dir: Path) -> pl.DataFrame:
    pairs = pl.read_csv(PAIRS, infer_schema=False).with_row_index("row_id").cast({"row_id": pl.Int64})
    mem = pl.read_parquet(session_dir / "data" / "split.parquet").select("row_id", "split")
    return pairs.join(mem, on="row_id", how="inner")


@pytest.mark.slow
def test_the_retrieval_claim_reaches_a_verdict_with_intervals_over_queries(session) -> None:
    session_dir, result = session
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = Session.open(session_dir).records()
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    eff = recs["contract"].check("contract.effective").measured["effective"]
    assert eff["candidate_kind"] == "encoder" and eff["encoder"]["model_sha256"].startswith("sha256:")
    assert eff["encoder"]["ranking_k"] == 10 and "sentence-transformers" in eff["encoder"]["versions"]
    assert recs["dispatch"].check("dispatch.no_job").status == "pass"
    art = recs["artifact"]
    assert art.check("artifact.identity").status == "pass"
    assert art.check("artifact.reload_parity").status == "pass"
    table = parse(art.check("artifact.ranking"), R.Ranking)
    assert set(table.arms) == {"candidate", "trivial_baseline", "bm25"}
    for arm in table.arms.values():
        assert set(arm.metrics) == {"recall_at_k", "ndcg_at_k", "mrr"}
        assert all(iv.unit == "query" and iv.bounded for iv in arm.metrics.values())
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "ndcg_at_k" and comp.unit == "query"
    assert comp.shared_rows == table.queries - table.queries_without_relevant >= 20
    assert set(comp.differences) == {"trivial_baseline", "bm25"}
    verdict = parse(art.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and verdict.artifact_verified
    assert "paired interval" in verdict.rule


@pytest.mark.slow
def test_bm25_ndcg_recomputed_from_the_data_and_the_membership(session) -> None:
    session_dir, _ = session
    import bm25s

    rows = _pairs_with_splits(session_dir)
    corpus = rows.unique("doc_id", keep="first").sort("doc_id")
    test = rows.filter(pl.col("split") == "test")
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(corpus["passage"].to_list(), stopwords="en", show_progress=False), show_progress=False
    )
    doc_at = {d: i for i, d in enumerate(corpus["doc_id"].to_list())}
    values = []
    for _, group in sorted(test.group_by("query_id"), key=lambda g: g[0][0]):
        rel = np.zeros(len(doc_at))
        for d, g in zip(group["doc_id"].to_list(), group["relevance"].to_list(), strict=True):
            rel[doc_at[d]] = max(rel[doc_at[d]], float(g))
        if not rel.any():
            continue
        tokens = bm25s.tokenize([group["query"][0]], stopwords="en", show_progress=False, return_ids=False)[0]
        values.append(ndcg_score([rel], [retriever.get_scores(tokens)], k=10))
    table = parse(Session.open(session_dir).records()["artifact"].check("artifact.ranking"), R.Ranking)
    assert table.arms["bm25"].metrics["ndcg_at_k"].estimate == pytest.approx(float(np.mean(values)), abs=1e-9)
    assert table.queries - table.queries_without_relevant == len(values)


@pytest.mark.slow
def test_every_query_in_one_split_and_the_source_counts(session) -> None:
    session_dir, _ = session
    rows = _pairs_with_splits(session_dir)
    recs = Session.open(session_dir).records()
    integrity = parse(recs["split"].check("split.query_integrity"), R.QueryIntegrity)
    spread = rows.group_by("query_id").agg(pl.col("split").n_unique())
    assert integrity.queries_in_several_splits == 0 == spread.filter(pl.col("split") > 1).height
    for name, part in integrity.per_split.items():
        assert part.queries == rows.filter(pl.col("split") == name)["query_id"].n_unique()
    src = parse(recs["source"].check("source.retrieval"), R.SourceRetrieval)
    relevant = rows.filter(pl.col("relevance") != "0")["query_id"].unique()
    assert src.queries == rows["query_id"].n_unique() and src.documents == rows["doc_id"].n_unique()
    assert src.queries_without_relevant == src.queries - relevant.len() > 0
    assert set(src.queries_without_relevant_ids) == set(rows["query_id"].unique()) - set(relevant)


@pytest.mark.slow
def test_the_session_writes_only_declared_checks_and_replays(session) -> None:
    session_dir, _ = session
    written = assert_session_declared(session_dir)
    assert {"source.retrieval", "split.query_integrity", "baseline.retrieval", "artifact.ranking"} <= written
    baseline = Session.open(session_dir).records()["baseline"]
    assert baseline.check("baseline.conventional").summary.startswith("not run: a retrieval claim")
    assert replay(session_dir).exit_code == 0


def _retrieval_claim(**change: object) -> dict:
    claim = tomllib.loads(ANSWERS.read_text())["claim"]
    claim.update(change)
    return claim


def test_the_claim_refuses_what_a_retrieval_session_would_not_honour() -> None:
    ClaimInputs.model_validate(_retrieval_claim())
    ClaimInputs.model_validate(
        _retrieval_claim(fine_tuning=True, comparators=["base_model", "trivial_baseline"])
    )
    with pytest.raises(
        ValidationError, match="base_model is not an arm of a retrieval claim without fine-tuning"
    ):
        ClaimInputs.model_validate(_retrieval_claim(comparators=["base_model", "trivial_baseline"]))
    with pytest.raises(ValidationError, match="best_baseline is not an arm of a retrieval claim"):
        ClaimInputs.model_validate(_retrieval_claim(comparators=["trivial_baseline", "best_baseline"]))
    tabular = tomllib.loads((ROOT / "docs" / "answers-tabular.toml").read_text())["claim"]
    with pytest.raises(ValidationError, match="bm25 is a comparator of a retrieval claim"):
        ClaimInputs.model_validate({**tabular, "comparators": ["bm25"]})
    with pytest.raises(ValidationError, match="ranking_k: read by a retrieval claim only"):
        ClaimInputs.model_validate({**tabular, "ranking_k": 5})


def test_the_source_refuses_a_retrieval_table_on_another_claim(tmp_path: Path) -> None:
    answers = tomllib.loads((ROOT / "docs" / "answers-tabular.toml").read_text())
    answers["session"]["workspace"] = str(ROOT)
    answers["source"]["retrieval"] = {
        "query_id_column": "ticket_id",
        "query_column": "channel",
        "doc_id_column": "ticket_id",
        "doc_column": "product",
    }
    path = tmp_path / "answers.toml"
    path.write_text(tomlkit.dumps(answers))
    result = run_answers(path, tmp_path / "s")
    assert result.exit_code == 2
    assert "[source.retrieval] is read by a retrieval claim only" in str(result.error)
    assert list(Session.open(tmp_path / "s").records()) == ["claim"]


def test_pairs_become_queries_by_corpus_relevance_and_bad_grades_are_refused() -> None:
    from claimcheck.engine.pipeline.context import StageInputError
    from claimcheck.engine.retrieval import data as rdata
    from claimcheck.engine.retrieval import stages as retrieval

    cols = {"query_id_column": "q", "query_column": "qt", "doc_id_column": "d", "doc_column": "dt"}
    frame = pl.DataFrame(
        {
            "q": ["a", "a", "b", "c"],
            "qt": ["alpha", "alpha", "beta", "gamma"],
            "d": ["d2", "d1", "d1", "d3"],
            "dt": ["two", "one", "one", "three"],
            "target": ["2", "0", "1", "0"],
        }
    )
    spec = rdata.columns({"retrieval": cols})
    corp = rdata.corpus(frame, spec)
    qs = rdata.queries(frame, spec, corp)
    assert corp.ids == ["d1", "d2", "d3"] and qs.ids == ["a", "b", "c"]
    np.testing.assert_array_equal(qs.relevance, [[0, 2, 0], [1, 0, 0], [0, 0, 0]])
    assert qs.scored.tolist() == [True, True, False]
    check = retrieval.source_check(frame, {"retrieval": cols}, "full")
    measured = parse(check, R.SourceRetrieval)
    assert check.status == "warn" and measured.queries_without_relevant_ids == ["c"]
    clash = frame.with_columns(pl.Series("dt", ["two", "one", "ONE", "three"]))
    assert retrieval.source_check(clash, {"retrieval": cols}, "full").status == "fail"
    with pytest.raises(StageInputError, match="relevance grade 'high' is not a non-negative number"):
        rdata.queries(frame.with_columns(pl.Series("target", ["high", "0", "1", "0"])), spec, corp)
    with pytest.raises(StageInputError, match=r"needs the source's \[source.retrieval\] table"):
        rdata.columns({"retrieval": {**cols, "doc_column": ""}})


def test_the_sample_pairs_are_what_the_generator_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sample_data import make_retrieval

    monkeypatch.setattr(make_retrieval, "OUT", tmp_path / "pairs.csv")
    make_retrieval.main()
    assert (tmp_path / "pairs.csv").read_bytes() == PAIRS.read_bytes()


def test_a_query_with_pairs_in_two_splits_fails_query_integrity() -> None:
    from claimcheck.engine.retrieval import stages as retrieval

    cols = {"query_id_column": "q", "query_column": "qt", "doc_id_column": "d", "doc_column": "dt"}
    joined = pl.DataFrame(
        {
            "q": ["a", "a", "b", "b"],
            "qt": ["x", "x", "y", "y"],
            "d": ["d1", "d2", "d1", "d2"],
            "dt": ["one", "two", "one", "two"],
            "target": ["1", "0", "1", "0"],
            "split": ["train", "test", "dev", "dev"],
        }
    )
    check = retrieval.split_check(joined, {"retrieval": cols})
    measured = parse(check, R.QueryIntegrity)
    assert (
        check.status == "fail" and measured.crossing_ids == ["a"] and measured.queries_in_several_splits == 1
    )
    assert measured.per_split["dev"].queries == 1 and measured.per_split["dev"].scored_queries == 1
    assert measured.per_split["test"].scored_queries == 0
    whole = retrieval.split_check(
        joined.with_columns(pl.Series("split", ["train", "train", "dev", "dev"])), {"retrieval": cols}
    )
    assert whole.status == "pass"
