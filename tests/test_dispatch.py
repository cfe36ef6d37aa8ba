"""Dispatch and artifact stages end to end on tiny models: real claim/source/split records, the real
contract and baseline stages, a detached job, replay without relaunch, the locked-test comparison."""

from __future__ import annotations

import pytest

from tests.training_fixtures import make_cls_session


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    import torch

    from claimcheck.engine.stages.baseline import run as baseline
    from claimcheck.engine.stages.contract import run as contract
    from claimcheck.engine.stages.dispatch import run as dispatch
    from claimcheck.engine.training.tiny import make_tiny_encoder

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("pipeline")
    upstream, ctx = make_cls_session(tmp, n=240)
    upstream["claim"] = upstream["claim"].model_copy(
        update={
            "inputs": {
                **upstream["claim"].inputs,
                "comparators": ["trivial_baseline", "base_model", "best_baseline"],
                "success": {"metric": "macro_f1", "op": ">=", "value": 0.0, "relative_to": "base_model"},
            }
        }
    )
    enc = make_tiny_encoder(tmp / "enc")
    ctx.stage = "baseline"
    upstream["baseline"] = baseline.run(
        baseline.Inputs(learners=["most_frequent", "tfidf_logreg"], bootstrap_resamples=100, cv="off"),
        upstream,
        ctx,
    )
    ctx.stage = "contract"
    cinp = contract.Inputs(
        model_path=str(enc),
        adapter_mode="lora",
        device="cpu",
        micro_batch=16,
        max_length=32,
        max_steps=20,
        eval_every_steps=5,
        checkpoint_every_steps=10,
        seed=3,
        lora={"r": 4, "alpha": 8, "target_modules": ["query", "value"]},
        optimizer={"lr": 3e-3},
        fit_check={"rows": 16, "steps": 5},
        alarms={"disabled": ["train_dev_gap"], "worse_than_trivial_after_step": 10},
        on_required_fail="warn",
    )
    upstream["contract"] = contract.run(cinp, upstream, ctx)
    ctx.stage = "dispatch"
    ctx.poll_seconds, ctx.wait_timeout_seconds = 0.3, 240  # runtime knobs, not inputs
    rec = dispatch.run(dispatch.Inputs(), upstream, ctx)
    return upstream, ctx, rec


def test_dispatch_records_the_job_from_its_own_files(pipeline) -> None:
    upstream, ctx, rec = pipeline
    by = {c.id: c for c in rec.checks}
    assert by["dispatch.identity"].status == "pass"
    op = by["dispatch.identity"].measured["operation_id"]
    assert op == upstream["contract"].check("contract.digest").measured["digest"][7:23] + "-a1"
    assert by["dispatch.acknowledged"].status == "pass"
    prog = by["dispatch.progress"].measured
    assert prog["job_state"] == "finished" and prog["optimizer_steps"] == 20
    assert by["dispatch.liveness"].measured["heartbeats"] >= 1, "a heartbeat is counted apart from steps"
    assert by["dispatch.loss_curve"].measured["step"] == list(range(1, 21))
    assert (
        by["dispatch.alarms.train_dev_gap"].status == "info"
        and "disabled" in by["dispatch.alarms.train_dev_gap"].summary
    )
    assert {
        f"dispatch.alarms.{a}"
        for a in ("non_finite", "divergence", "class_collapse", "stall", "worse_than_trivial")
    } <= set(by)
    assert by["dispatch.checkpoints"].measured["steps"] == [10]
    assert by["dispatch.resume"].measured["resumed_from"] == []
    # no test row went to the job
    import polars as pl

    from claimcheck.engine.data import splits
    from claimcheck.engine.training.rowfiles import read_rows

    exported = set(read_rows(ctx.session_dir / "jobs" / op / "data/train.jsonl")["row_id"].to_list())
    test_ids = set(
        splits.membership(upstream["split"], ctx).filter(pl.col("split") == "test")["row_id"].to_list()
    )
    assert exported and not exported & test_ids


def test_second_dispatch_and_replay_do_not_relaunch(pipeline) -> None:
    import json

    from claimcheck.engine.stages.dispatch import run as dispatch

    upstream, ctx, rec = pipeline
    op = rec.check("dispatch.identity").measured["operation_id"]
    pid_file = ctx.session_dir / "jobs" / op / "pid.json"
    starts = json.loads(pid_file.read_text())["starts"]
    again = dispatch.run(dispatch.Inputs(), upstream, ctx)
    assert "adopted" in again.check("dispatch.acknowledged").measured["how"]
    ctx.replay = True
    try:
        replayed = dispatch.run(dispatch.Inputs(), upstream, ctx)
    finally:
        ctx.replay = False
    assert json.loads(pid_file.read_text())["starts"] == starts  # still one process ever started
    for a, b in zip(rec.checks, replayed.checks, strict=True):
        assert a.id == b.id
        if a.replay == "compare":
            assert a.measured == b.measured, a.id


def test_artifact_stage_compares_on_the_locked_test(pipeline) -> None:
    from claimcheck.engine.stages.artifact import run as artifact

    upstream, ctx, rec = pipeline
    upstream = {**upstream, "dispatch": rec}
    ctx.stage = "artifact"
    out = artifact.run(
        artifact.Inputs(
            comparators=["base_model", "best_baseline", "trivial_baseline"],
            bootstrap_resamples=200,
            latency_examples=5,
        ),
        upstream,
        ctx,
    )
    by = {c.id: c for c in out.checks}
    assert by["artifact.job_finished"].status == "pass"
    assert by["artifact.identity"].status == "pass", by["artifact.identity"].summary
    assert by["artifact.reload_parity"].status == "pass", by["artifact.reload_parity"].summary
    assert by["artifact.locked_test_read"].measured["reads"][0]["caller"] == "artifact"
    arms = by["artifact.arms"].measured["arms"]
    assert set(arms) == {"candidate", "base_model", "best_baseline", "trivial_baseline"}
    assert all(a["requested"] == a["scored"] + a["failed"] + a["missing"] for a in arms.values())
    comp = by["artifact.comparison"].measured
    assert set(comp["differences"]) == {"base_model", "best_baseline", "trivial_baseline"}
    assert all("lo" in d and d["unit"] == "group" for d in comp["differences"].values())
    assert by["artifact.calibrated"].measured["arms"]["candidate"]["params"]["temperature"] > 0
    assert by["artifact.latency"].measured["arms"]["candidate"]["p95_ms"] > 0
    verdict = by["artifact.verdict"].measured
    assert verdict["job_finished"] and verdict["artifact_verified"]
    assert verdict["claim_state"] in ("met", "not_met") and "train_dev_gap" in " ".join(
        verdict["disabled_alarms"]
    )


def test_required_check_failure_refuses_the_launch() -> None:
    from claimcheck.engine.evidence import Check, StageRecord
    from claimcheck.engine.stages.dispatch.run import _required_checks

    rec = StageRecord(
        stage="contract", checks=[Check(id="contract.fit_check", status="fail", summary="no go")]
    )
    eff = {
        "required_checks": ["contract.fit_check", "contract.prepared_lengths"],
        "on_required_fail": "refuse_dispatch",
    }
    gate = _required_checks(eff, rec)
    assert gate.status == "fail" and gate.measured["refused"]
    assert gate.measured["states"] == {"contract.fit_check": "fail", "contract.prepared_lengths": "absent"}
    warn = _required_checks({**eff, "on_required_fail": "warn"}, rec)
    assert warn.status == "warn" and not warn.measured["refused"]


def test_one_byte_of_the_base_model_changed_fails_dispatch_and_the_base_arm(pipeline) -> None:
    """The job's runtime stamp and the base-model arm re-hash the weights: one byte edited after the
    contract was frozen fails dispatch.runtime (a new attempt loads it) and artifact.base_model_identity."""
    from pathlib import Path

    from claimcheck.engine.stages.artifact import run as artifact
    from claimcheck.engine.stages.dispatch import run as dispatch

    upstream, ctx, rec = pipeline
    rt = rec.check("dispatch.runtime")
    assert rt.status == "pass", rt.summary  # the untouched model, this engine, these libraries
    assert rt.measured["model_sha256"] == rt.measured["contract_model_sha256"]
    eff = upstream["contract"].check("contract.effective").measured["effective"]
    weights = next(Path(eff["model_path"]).glob("*.safetensors"))
    original = weights.read_bytes()
    edited = bytearray(original)
    edited[-1] ^= 0x01  # one byte of the last tensor: the model still loads
    weights.write_bytes(bytes(edited))
    try:
        ctx.stage = "dispatch"
        again = dispatch.run(dispatch.Inputs(attempt=2), upstream, ctx)  # a new job loads the edited weights
        rt2 = again.check("dispatch.runtime")
        assert again.check("dispatch.progress").measured["job_state"] == "finished"
        assert rt2.status == "fail" and "is not the contract's" in rt2.summary, rt2.summary
        assert rt2.measured["model_sha256"] != rt2.measured["contract_model_sha256"]
        ctx.stage = "artifact"
        out = artifact.run(
            artifact.Inputs(comparators=["base_model"], bootstrap_resamples=100, latency_examples=2),
            {**upstream, "dispatch": rec},
            ctx,
        )
    finally:
        weights.write_bytes(original)
    base = out.check("artifact.base_model_identity")
    assert base.status == "fail" and "not scored" in base.summary, base.summary
    arm = out.check("artifact.arms").measured["arms"]["base_model"]
    assert arm["scored"] == 0 and arm["missing"] == arm["requested"] and "not scored" in arm["what"]
