"""Session directory: order, freeze, revisions, stale propagation, locking."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.ledger.lock import SessionLocked
from claimcheck.engine.ledger.session import Session, StageOrderError, find_sessions
from claimcheck.engine.pipeline import registry
from tests.claim_answers import CLAIM


class _Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: int = 0


def _fake_stage(name: str) -> types.ModuleType:
    mod = types.ModuleType(f"fake_{name}")
    mod.TITLE = name
    mod.Inputs = _Inputs

    def run(inputs, upstream, ctx):
        total = inputs.value + sum(len(r.provenance.digest) for r in upstream.values())
        return StageRecord(
            stage=name,
            inputs=inputs.model_dump(),
            checks=[Check(id=f"{name}.value", status="pass", summary="ok", measured={"total": total})],
        )

    mod.run = run
    return mod


@pytest.fixture
def fake_stages(monkeypatch):
    real = registry.StageSpec.module
    fakes = {n: _fake_stage(n) for n in ("source", "split")}
    monkeypatch.setattr(registry.StageSpec, "module", lambda self: fakes.get(self.name) or real(self))
    return fakes


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session.create(tmp_path / "runs" / "s1", workspace=tmp_path)


def test_stage_needs_frozen_upstream(session: Session, fake_stages) -> None:
    with pytest.raises(StageOrderError, match="'claim', which has not been run"):
        session.run_stage("source", {"value": 1})
    session.run_stage("claim", CLAIM)
    with pytest.raises(StageOrderError, match="freeze 'claim' first"):
        session.run_stage("source", {"value": 1})


def test_freeze_revision_and_stale_propagation(session: Session, fake_stages) -> None:
    session.run_stage("claim", CLAIM)
    session.freeze("claim")
    session.run_stage("source", {"value": 1})
    session.freeze("source")
    session.run_stage("split", {"value": 2})
    session.freeze("split")
    assert session.states()["split"] == "frozen"
    assert session.would_stale("source") == ["split"]

    old_digest = session.record("source").provenance.digest
    rec = session.run_stage("source", {"value": 5})
    assert rec.provenance.revision == 2
    archived = session.path / "history" / "02-source.r1.toml"
    assert archived.exists(), "old frozen evidence is never destroyed"
    states = session.states()
    assert states["source"] == "draft"
    assert states["split"] == "stale"
    with pytest.raises(StageOrderError, match="stale"):
        session.freeze("split")
    session.freeze("source")
    assert session.record("source").provenance.digest != old_digest
    assert session.states()["split"] == "stale", "split still rests on revision 1"
    session.run_stage("split", {"value": 2})
    session.freeze("split")
    assert set(session.states().values()) >= {"frozen", "not_run"}
    # session.toml mirrors the derived table
    reopened = Session.open(session.path)
    assert reopened.meta.stages["source"].revision == 2
    assert reopened.meta.stages["split"].state == "frozen"


def test_notes_survive_rerun_and_new_note_unfreezes(session: Session) -> None:
    session.run_stage("claim", CLAIM)
    session.add_note("claim", "limitation", "labels never audited")
    session.freeze("claim")
    rec = session.run_stage("claim", CLAIM)
    assert [n.text for n in rec.notes] == ["labels never audited"]
    assert rec.provenance.revision == 2


def test_stage_written_notes_are_not_stacked_by_reruns(session: Session, monkeypatch) -> None:
    from claimcheck.engine.evidence import Note
    from claimcheck.engine.stages.claim import run as claim

    real = claim.run

    def with_note(inputs, upstream, ctx):
        rec = real(inputs, upstream, ctx)
        rec.notes.append(Note(tag="limitation", text="stage-written limitation"))
        return rec

    monkeypatch.setattr(claim, "run", with_note)
    session.run_stage("claim", CLAIM)
    session.add_note("claim", "fact", "the person's own note")
    rec = session.run_stage("claim", CLAIM)
    assert sorted(n.text for n in rec.notes) == ["stage-written limitation", "the person's own note"]


def test_claim_completeness_names_missing_fields(session: Session) -> None:
    rec = session.run_stage("claim", {"task_kind": "text_classification", "prediction_unit": "ticket"})
    check = rec.check("claim.completeness")
    assert check.status == "fail"
    for field in ("target_meaning", "population", "primary_metric", "inference_inputs", "class_order"):
        assert field in check.measured["missing"]
    assert rec.check("claim.comparators").status == "fail"
    assert rec.check("claim.success_criterion").status == "fail"


def test_claim_full_passes_and_review_lists_earlier_sessions(tmp_path: Path) -> None:
    ws = tmp_path
    failed = Session.create(ws / "runs" / "a-failed", workspace=ws)
    failed.run_stage("claim", {"prediction_unit": "x"})  # failing completeness
    (ws / "runs" / "b-cancelled" / "jobs" / "op1").mkdir(parents=True)
    Session.create(ws / "runs" / "b-cancelled", workspace=ws)
    (ws / "runs" / "b-cancelled" / "jobs" / "op1" / "status.json").write_text('{"phase": "cancelled"}')
    broken = ws / "runs" / "c-broken"
    broken.mkdir(parents=True)
    (broken / "session.toml").write_text("id = [")
    me = Session.create(ws / "runs" / "me", workspace=ws)
    rec = me.run_stage("claim", CLAIM)
    assert rec.check("claim.completeness").status == "pass"
    assert rec.check("claim.success_criterion").status == "pass"
    review = rec.check("claim.prior_sessions")
    statuses = {s["path"]: s["status"] for s in review.measured["sessions"]}
    assert statuses == {
        "runs/a-failed": "failed",
        "runs/b-cancelled": "cancelled",
        "runs/c-broken": "unreadable",
    }
    assert review.replay == "observation"
    assert "outside this scope were not reviewed" in review.summary
    assert find_sessions(ws / "runs", exclude=me.path) == [
        ws / "runs" / n for n in ("a-failed", "b-cancelled", "c-broken")
    ]


def test_lock_refuses_second_process_and_names_holder(session: Session) -> None:
    code = (
        "import sys,time; from claimcheck.engine.ledger.session import Session; s=Session.open(sys.argv[1]); "
        "s.lock.acquire(); print('locked', flush=True); time.sleep(30)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(session.path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(SessionLocked) as info:
            session.lock.acquire()
        assert f"pid {proc.pid}" in str(info.value) and not info.value.stale
    finally:
        proc.kill()
        proc.wait()
    with pytest.raises(SessionLocked) as info:
        session.lock.acquire()
    assert info.value.stale and "take the lock over" in str(info.value)
    session.lock.acquire(take_over_stale=True)
    assert session.lock.holder()["pid"] == os.getpid()
    session.lock.release()
    assert not session.lock.file.exists()


def test_claim_refuses_a_comparator_nothing_will_measure(session: Session) -> None:
    from claimcheck.engine.pipeline.core import InvalidInputs

    with pytest.raises(InvalidInputs, match="gpt_judge is not an arm the artifact stage scores"):
        session.run_stage("claim", {**CLAIM, "comparators": [*CLAIM["comparators"], "gpt_judge"]})
    assert "claim" not in session.records()


def test_the_frozen_probe_stands_for_the_unchanged_base_of_a_text_classifier(session: Session) -> None:
    """claim.comparators asks a fine-tune for an unchanged-base comparator: the linear probe on the
    frozen base meets it (the random-head base model is then optional); neither fails, naming base_model."""
    probe = ["trivial_baseline", "best_baseline", "frozen_probe"]
    rec = session.run_stage("claim", {**CLAIM, "comparators": probe})
    check = rec.check("claim.comparators")
    assert check.status == "pass" and check.measured["required_absent"] == []
    rec = session.run_stage("claim", {**CLAIM, "comparators": ["trivial_baseline", "best_baseline"]})
    check = rec.check("claim.comparators")
    assert check.status == "fail" and check.measured["required_absent"] == ["base_model"]
