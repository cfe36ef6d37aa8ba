"""Drafts of unsaved form edits (engine/ledger/drafts.py): beside the record, never evidence."""

from __future__ import annotations

from pathlib import Path

from claimcheck.engine.headless import integrity
from claimcheck.engine.ledger.drafts import (
    DRAFT_SUFFIX,
    draft_path,
    is_draft,
    read_draft,
    remove_draft,
    write_draft,
)
from claimcheck.engine.ledger.session import Session
from tests.claim_answers import CLAIM


def test_a_draft_round_trips_and_is_no_evidence(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "runs" / "d", workspace=tmp_path)
    session.run_stage("claim", CLAIM)
    before = [(r.stage, r.check, r.outcome, r.detail) for r in integrity.verify(Session.open(session.path))]

    text = 'prediction_unit = "one ticket"\nbroken = [\n'  # kept even while it does not parse
    path = write_draft(session.path, "claim", text)
    assert path == draft_path(session.path, "claim") == session.path / f"01-claim{DRAFT_SUFFIX}"
    assert is_draft(path.name) and not is_draft("01-claim.toml")
    assert read_draft(session.path, "claim") == text
    assert not list(session.path.glob(".*.tmp")), "written atomically: no temp file left"

    # integrity (and so replay and the report) reads records by their own names: a draft changes nothing
    reopened = Session.open(session.path)
    assert [(r.stage, r.check, r.outcome, r.detail) for r in integrity.verify(reopened)] == before
    assert reopened.record("claim").inputs["prediction_unit"] == CLAIM["prediction_unit"]

    remove_draft(session.path, "claim")
    assert read_draft(session.path, "claim") is None
    remove_draft(session.path, "claim")  # removing twice is fine
