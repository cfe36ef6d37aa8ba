"""A retrieval claim with a fine-tuned encoder (docs/answers-retrieval-ft.toml, generated query–passage
pairs) runs all seven stages headless to a verdict: the contract pins a contrastive LoRA job, dispatch
runs it as a job (engine/retrieval/job.py), and the artifact stage ranks the locked test with
the fine-tuned encoder, the unchanged encoder, BM25 and a random ranking. The records are read back and
checked against figures recomputed here from the data file, the split membership and the job's saved
adapter alone; replay reproduces the session."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import ndcg_score

from claimcheck.engine.headless.answers import run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import retrieval as R
from tests.test_check_registry import assert_session_declared

ROOT = Path(__file__).resolve().parents[1]
ANSWERS = ROOT / "docs" / "answers-retrieval-ft.toml"
PAIRS = ROOT / "sample_data" / "retrieval_pairs.csv"


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    session_dir = tmp_path_factory.mktemp("retrieval_ft") / "s"
    return session_dir, run_answers(ANSWERS, session_dir)


def _records(session_dir: Path) -> dict:
    return Session.open(session_dir).records()


def _job_dir(session_dir: Path) -> Path:
    (job,) = sorted((session_dir / "jobs").iterdir())
    return job


def _pairs_with_splits(session_dir: Path) -> pl.DataFrame:
    pairs = pl.read_csv(PAIRS, infer_schema=False).with_row_index("row_id").cast({"row_id": pl.Int64})
    mem = pl.read_parquet(session_dir / "data" / "split.parquet").select("row_id", "split")
    return pairs.join(mem, on="row_id", how="inner")


def _test_ndcg(session_dir: Path, model: object) -> list[float]:
    """nDCG@10 per scored locked-test query, ranked by `model` over the whole corpus (sklearn's ndcg_score)."""
    from claimcheck.engine.retrieval.rankers import embed

    rows = _pairs_with_splits(session_dir)
    corpus = rows.unique("doc_id", keep="first").sort("doc_id")
    doc_at = {d: i for i, d in enumerate(corpus["doc_id"].to_list())}
    docs = embed(model, corpus["passage"].to_list(), 32)
    values = []
    for _, group in sorted(
        rows.filter(pl.col("split") == "test").group_by("query_id"), key=lambda g: g[0][0]
    ):
        rel = np.zeros(len(doc_at))
        for d, g in zip(group["doc_id"].to_list(), group["relevance"].to_list(), strict=True):
            rel[doc_at[d]] = max(rel[doc_at[d]], float(g))
        if rel.any():
            scores = embed(model, [group["query"][0]], 32) @ docs.T
            values.append(ndcg_score([rel], scores, k=10))
    return values


@pytest.mark.slow
def test_the_fine_tuned_retrieval_claim_reaches_a_verdict_with_intervals_over_queries(session) -> None:
    session_dir, result = session
    assert result.exit_code == 0, [r for r in result.rows if r.failing]
    recs = _records(session_dir)
    assert list(recs) == ["claim", "source", "split", "baseline", "contract", "dispatch", "artifact"]
    eff = recs["contract"].check("contract.effective").measured["effective"]
    assert eff["candidate_kind"] == "torch" and eff["task_kind"] == "retrieval"
    assert (
        eff["retrieval"]["loss"] == "MultipleNegativesRankingLoss"
        and eff["retrieval"]["metric"] == "ndcg_at_k"
    )
    assert eff["encoder"]["model_sha256"].startswith("sha256:") and eff["lora"]["r"] == 8
    disp = recs["dispatch"]
    assert disp.check("dispatch.no_job") is None
    for cid in ("dispatch.identity", "dispatch.runtime", "dispatch.progress", "dispatch.checkpoints"):
        assert disp.check(cid).status == "pass", (cid, disp.check(cid).summary)
    dev = disp.check("dispatch.dev_metric").measured
    assert dev["metric"] == "ndcg_at_k" and dev["beats_trivial"] and len(dev["value"]) >= 3
    art = recs["artifact"]
    assert art.check("artifact.job_finished").status == "pass"
    assert art.check("artifact.identity").status == "pass", art.check("artifact.identity").summary
    assert art.check("artifact.reload_parity").status == "pass", art.check("artifact.reload_parity").summary
    table = parse(art.check("artifact.ranking"), R.Ranking)
    assert set(table.arms) == {"candidate", "base_model", "bm25", "trivial_baseline"}
    assert "LoRA" in table.arms["candidate"].what and "unchanged" in table.arms["base_model"].what
    for arm in table.arms.values():
        assert all(iv.unit == "query" and iv.bounded for iv in arm.metrics.values())
    comp = parse(art.check("artifact.comparison"), artifact_shapes.Comparison)
    assert comp.metric == "ndcg_at_k" and comp.unit == "query" and comp.shared_rows >= 20
    assert set(comp.differences) == {"base_model", "bm25", "trivial_baseline"}
    verdict = parse(art.check("artifact.verdict"), artifact_shapes.Verdict)
    assert verdict.claim_state in ("met", "not_met") and verdict.artifact_verified
    assert "base_model" in verdict.rule and "paired interval" in verdict.rule


@pytest.mark.slow
def test_the_job_trains_on_train_pairs_only_and_never_sees_the_locked_test(session) -> None:
    session_dir, _ = session
    from claimcheck.engine.training.rowfiles import read_rows

    rows = _pairs_with_splits(session_dir)
    job = _job_dir(session_dir)
    split_of = dict(zip(rows["query_id"].to_list(), rows["split"].to_list(), strict=True))
    train = read_rows(job / "data" / "train.jsonl")
    dev = read_rows(job / "data" / "dev.jsonl")
    assert {split_of[q] for q in train["query_id"].to_list()} == {"train"}
    assert {split_of[q] for q in dev["query_id"].to_list()} == {"dev"}
    relevant = rows.filter((pl.col("split") == "train") & (pl.col("relevance") != "0"))
    eff = _records(session_dir)["contract"].check("contract.effective").measured["effective"]
    assert eff["retrieval"]["train_pairs"] == relevant.height
    test_queries = set(rows.filter(pl.col("split") == "test")["query"].to_list())
    for name in ("data/train.jsonl", "data/dev.jsonl", "final/manifest.json"):
        text = (job / name).read_text()
        assert not any(q in text for q in test_queries), name
    steps = [json.loads(line) for line in (job / "metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps if s["kind"] == "step"] == list(range(1, eff["optimizer_steps"] + 1))
    assert next(s for s in steps if s["kind"] == "trivial")["metric"] == "ndcg_at_k"


@pytest.mark.slow
def test_base_model_and_candidate_ndcg_recomputed_from_the_encoder_and_the_saved_adapter(session) -> None:
    session_dir, _ = session
    from claimcheck.engine.retrieval import finetune, rankers
    from claimcheck.engine.training.models import resolve_model_path

    table = parse(_records(session_dir)["artifact"].check("artifact.ranking"), R.Ranking)
    eff = _records(session_dir)["contract"].check("contract.effective").measured["effective"]
    base = rankers.load_encoder(resolve_model_path(eff["model_path"], ROOT), 128)
    values = _test_ndcg(session_dir, base)
    assert table.arms["base_model"].metrics["ndcg_at_k"].estimate == pytest.approx(np.mean(values), abs=1e-6)
    assert table.queries - table.queries_without_relevant == len(values)
    tuned, missing, unexpected = finetune.load_final(_job_dir(session_dir) / "final", eff, ROOT)
    assert not missing and not unexpected
    tuned_values = _test_ndcg(session_dir, tuned)
    assert table.arms["candidate"].metrics["ndcg_at_k"].estimate == pytest.approx(
        np.mean(tuned_values), abs=1e-6
    )
    assert not np.allclose(values, tuned_values)  # the adapters change the ranking


@pytest.mark.slow
def test_the_session_writes_only_declared_checks_and_replays(session) -> None:
    session_dir, _ = session
    written = assert_session_declared(session_dir)
    assert {"dispatch.identity", "dispatch.dev_metric", "artifact.ranking", "contract.candidate"} <= written
    assert "dispatch.no_job" not in written
    assert replay(session_dir).exit_code == 0


@pytest.mark.slow
def test_a_changed_adapter_fails_identity(session, tmp_path: Path) -> None:
    import shutil

    from claimcheck.engine.retrieval import finetune

    final = tmp_path / "final"
    shutil.copytree(_job_dir(session[0]) / "final", final)
    assert finetune.verify_final(final) == []
    data = bytearray((final / finetune.ADAPTER_FILE).read_bytes())
    data[-1] ^= 1
    (final / finetune.ADAPTER_FILE).write_bytes(bytes(data))
    (problem,) = finetune.verify_final(final)
    assert problem.startswith(f"{finetune.ADAPTER_FILE}: sha256")


def test_settings_the_retrieval_job_does_not_carry_out_are_refused() -> None:
    from claimcheck.engine.retrieval.contract import _refusals
    from claimcheck.engine.training.resolve import Resolution
    from claimcheck.engine.training.schema import Inputs

    contract = tomllib.loads(ANSWERS.read_text())["contract"]
    res = Resolution()
    _refusals(Inputs.model_validate(contract), res)
    assert res.refused == []
    changed = {**contract, "adapter_mode": "qlora", "grad_accum": 2, "device": "cuda", "eval_rows": 8}
    _refusals(Inputs.model_validate(changed), res)
    assert [r["setting"] for r in res.refused] == ["adapter_mode", "device", "grad_accum", "eval_rows"]
    assert "in-batch negatives" in res.refused[2]["reason"]


# ---------------------------------------------------------------- the job kind on its own (a tiny encoder)


def _pair_rows(n_queries: int, start: int) -> object:
    """Judged pairs as the dispatch stage writes them: each query one relevant and one other passage."""
    topics = ["warranty", "returns", "delivery", "setup", "cleaning", "noise", "power", "parts"]
    rows: dict[str, list[str]] = {
        c: [] for c in ("row_id", "query_id", "query", "doc_id", "passage", "target")
    }
    for i in range(start, start + n_queries):
        t, u = topics[i % 8], topics[(i + 3) % 8]
        for doc, text, rel in (
            (f"D{i % 8}", f"the {t} passage of product {i % 5}", "1"),
            (f"E{i % 8}", f"a {u} note", "0"),
        ):
            rows["row_id"].append(str(len(rows["row_id"]) + start * 10))
            rows["query_id"].append(f"Q{i:03d}")
            rows["query"].append(f"question {i} about {t}")
            rows["doc_id"].append(doc)
            rows["passage"].append(text)
            rows["target"].append(rel)
    return pl.DataFrame(rows)


def _retrieval_job_dir(root: Path, model_dir: Path, op_id: str, runtime: dict | None = None) -> Path:
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.training.jobfiles import write_job_dir

    eff = {
        "task_kind": "retrieval",
        "candidate_kind": "torch",
        "model_path": str(model_dir),
        "lora": {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": "all-linear"},
        "max_length": 32,
        "micro_batch": 4,
        "max_steps": 8,
        "optimizer_steps": 8,
        "eval_every_steps": 0,
        "checkpoint_every_steps": 2,
        "checkpoint_selection": "last",
        "optimizer": {"name": "adamw", "lr": 0.01},
        "retrieval": {
            "loss": "MultipleNegativesRankingLoss",
            "loss_scale": 20.0,
            "metric": "ndcg_at_k",
            "ranking_k": 3,
            "train_pairs": 16,
            "columns": {"query_id": "q", "query": "qt", "doc_id": "d", "passage": "dt"},
        },
    }
    jd = root / op_id
    write_job_dir(
        jd,
        effective=eff,
        digest=digest_of(eff),
        op_id=op_id,
        attempt=1,
        train=_pair_rows(16, 0),
        dev=_pair_rows(8, 100),
        workspace=root,
        runtime={"heartbeat_seconds": 0.2, "threads": 1, **(runtime or {})},
    )
    return jd


@pytest.mark.slow
def test_a_killed_retrieval_job_resumes_and_its_loss_curve_continues(tmp_path: Path) -> None:
    import os
    import signal

    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.retrieval import finetune
    from claimcheck.engine.retrieval.job import RetrievalJob
    from claimcheck.engine.training import jobfiles
    from tests import test_job_kit as kit

    model_dir = kit.make_model(tmp_path / "model")
    ref = _retrieval_job_dir(tmp_path / "ref", model_dir, "1111111111111111-a1")
    assert jobfiles.job_module(ref) == jobfiles.RETRIEVAL_JOB_MODULE == RetrievalJob.__module__
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert RetrievalJob(ref).run() == 0, jobfiles.read_status(ref)
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    ref_loss = {s.step: s.loss for s in jobfiles.latest_steps(jobfiles.read_metrics(ref))}
    assert sorted(ref_loss) == list(range(1, 9)) and finetune.verify_final(ref / "final") == []

    prov = LocalProvider(tmp_path)
    op = "2222222222222222-a1"
    jd = _retrieval_job_dir(tmp_path, model_dir, op, runtime={"step_delay_seconds": 0.5})
    h = prov.launch(jd, op)
    kit.wait_for(lambda: (st := jobfiles.read_status(jd)) is not None and st.step >= 5, timeout=240)
    os.killpg(int(h.ref), signal.SIGKILL)
    kit.wait_for(lambda: prov.status(h).phase == "lost", timeout=30)
    h2 = prov.launch(jd, op, resume=True)
    st = prov.wait(h2, timeout=240, poll=0.2)
    assert st.phase == "done" and st.resumed_from and st.resumed_from[0] in (4, 6), st
    got = {s.step: s.loss for s in jobfiles.latest_steps(jobfiles.read_metrics(jd))}
    assert sorted(got) == sorted(ref_loss)
    assert max(abs(got[s] - ref_loss[s]) for s in got) < 1e-5  # restored RNG and batches: the same curve
    assert finetune.verify_final(jd / "final") == []
    assert finetune.MANIFEST_FILE == jobfiles.MANIFEST  # judged by jobfiles.judge_done, known to replay


def test_the_retrieval_job_is_refused_on_a_provider_other_than_local(tmp_path: Path) -> None:
    from claimcheck.engine.evidence import Check, StageRecord, digest_of
    from claimcheck.engine.pipeline.context import StageContext, StageInputError
    from claimcheck.engine.stages.dispatch import run as dispatch
    from claimcheck.engine.stages.dispatch.inputs import Inputs
    from claimcheck.engine.training.schema import Effective

    eff = Effective.model_validate(
        {
            "task_kind": "retrieval",
            "required_checks": [],
            "retrieval": {
                "loss": "MultipleNegativesRankingLoss",
                "loss_scale": 20.0,
                "metric": "ndcg_at_k",
                "ranking_k": 10,
                "train_pairs": 4,
                "columns": {"query_id": "q", "query": "qt", "doc_id": "d", "passage": "dt"},
            },
        }
    ).model_dump(mode="json", exclude_none=True)
    checks = [
        Check(id="contract.effective", status="pass", summary="", measured={"effective": eff, "refused": []}),
        Check(id="contract.digest", status="pass", summary="", measured={"digest": digest_of(eff)}),
    ]
    upstream = {"contract": StageRecord(stage="contract", inputs={}, checks=checks)}
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    with pytest.raises(StageInputError, match="runs through the local provider only"):
        dispatch.run(Inputs(provider="ray"), upstream, ctx)
    assert not (tmp_path / "s" / "jobs").exists() or not any((tmp_path / "s" / "jobs").iterdir())
