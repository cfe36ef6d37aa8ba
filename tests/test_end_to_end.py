"""The whole product headless, through the `claimcheck` command: the documented answers example run
on the sample data (CI-sized: one ticket in eight, a tiny encoder instead of all-MiniLM-L6-v2, a few
optimizer steps), then replay, report, and the tamper proofs of issue 8 on that real session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.ledger.session import Session
from claimcheck.tui.cli import main
from tests import real_session as rs

SAMPLE = rs.SAMPLE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not SAMPLE.exists(), reason="sample_data/tickets.csv is not generated"),
]


@pytest.fixture(scope="module")
def built(real_workspace: Path) -> Path:
    return real_workspace


def _copy(ws: Path, tmp_path: Path) -> Path:
    return rs.copy_workspace(ws, tmp_path)


def test_every_stage_is_frozen_with_its_outcomes_kept_apart(built: Path) -> None:
    session = Session.open(built / "runs" / "sample")
    assert set(session.states().values()) == {"frozen"}
    art = session.record("artifact")
    verdict = art.check("artifact.verdict").measured
    for outcome in ("job_finished", "artifact_verified", "candidate_better", "claim_met"):
        assert outcome in str(verdict)
    assert art.check("artifact.locked_test_read").status in ("pass", "info")
    assert session.record("baseline").check("baseline.locked_test").status == "pass"


def test_the_arms_are_the_claims_three_comparators_and_the_candidate(built: Path) -> None:
    from claimcheck.engine.shapes import artifact as A
    from claimcheck.engine.shapes import parse

    session = Session.open(built / "runs" / "sample")
    claimed = session.record("claim").inputs["comparators"]
    assert sorted(claimed) == ["base_model", "best_baseline", "trivial_baseline"]
    check = session.record("artifact").check("artifact.arms")
    arms = parse(check, A.Arms)
    assert set(arms.arms) == {"candidate", *claimed} and arms.claim_comparators == claimed
    assert arms.unscored == [] and check.status != "fail"
    comp = parse(session.record("artifact").check("artifact.comparison"), A.Comparison)
    assert set(comp.differences) == set(claimed)


def test_replay_reproduces_and_report_is_written(built: Path, tmp_path: Path, capsys) -> None:
    session_dir = _copy(built, tmp_path)  # the report writes into the session: never the shared one
    assert main(["--replay", str(session_dir)]) == 0, capsys.readouterr().out
    assert "reproduced" in capsys.readouterr().out
    assert main(["report", str(session_dir)]) == 0
    md = (session_dir / "report.md").read_text()
    assert "does not establish" in md.lower()
    assert (session_dir / "report.html").read_text().count("<svg") >= 3


def test_one_edited_byte_in_a_frozen_record_is_named(built: Path, tmp_path: Path, capsys) -> None:
    session_dir = _copy(built, tmp_path)
    path = session_dir / "04-baseline.toml"
    text = path.read_text()
    path.write_text(text.replace("seed = 0", "seed = 1", 1))
    assert main(["--replay", str(session_dir)]) == 1
    out = capsys.readouterr().out
    assert "tampered" in out and "04-baseline.toml" in out


def test_one_changed_byte_of_source_data_fails_at_checksum_and_marks_downstream(
    built: Path, tmp_path: Path, capsys
) -> None:
    session_dir = _copy(built, tmp_path)
    data = session_dir.parents[1] / "sample_data" / "tickets.csv"
    raw = bytearray(data.read_bytes())
    at = raw.index(b"refund")
    raw[at] = ord("R")
    data.write_bytes(bytes(raw))
    assert main(["--replay", str(session_dir), "--json"]) == 1
    import json

    result = json.loads(capsys.readouterr().out)
    rows = {(r["stage"], r["check"]): r["outcome"] for r in result["rows"]}
    assert rows[("source", "source.checksum")] == "differs"
    downstream = {r["stage"]: r["outcome"] for r in result["rows"] if r["stage"] in ("split", "artifact")}
    assert downstream == {"split": "stale", "artifact": "stale"}


def test_retrain_reruns_the_job_in_a_scratch_copy_and_reproduces(built: Path, tmp_path: Path, capsys) -> None:
    session_dir = _copy(built, tmp_path)
    before = sorted(p.relative_to(session_dir) for p in session_dir.rglob("*"))
    code = main(["--replay", str(session_dir), "--retrain", "--json"])
    import json

    result = json.loads(capsys.readouterr().out)
    assert code == 0, [r for r in result["rows"] if r["outcome"] not in ("reproduced", "observation")]
    assert result["timing"]["retrain"]
    assert {r["outcome"] for r in result["rows"] if r["stage"] == "dispatch"} <= {"reproduced", "observation"}
    assert sorted(p.relative_to(session_dir) for p in session_dir.rglob("*")) == before, "replay only reads"
