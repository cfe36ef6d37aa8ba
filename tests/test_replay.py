"""Replay: reproduce, detect tampering (any byte), stale downstream, tolerances, incomplete jobs, exit codes.

The stages here after `claim` are small synthetic modules registered in the test, so these tests do
not depend on the real source/split/... stages. Their check ids are `<stage>.synthetic_*`: declared
nowhere and without a shape, so they can never stand in for a real check (a test below holds them to
that). Replay of records the real stages wrote is tested at the end of this file on the real session.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from claimcheck.engine.evidence import Check, StageRecord, atomic_write_text
from claimcheck.engine.headless.replay import Difference, ReplayResult, compare_check, diff_values, replay
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.context import StageContext

REAL_MODULE = registry.StageSpec.module

CLAIM = {
    "prediction_unit": "one support ticket",
    "target_meaning": "the queue the ticket was routed to",
    "target_kind": "recorded_workflow_label",
    "inference_inputs": ["subject", "body"],
    "population": "tickets from 2023-2024",
    "primary_metric": "macro_f1",
    "metric_averaging": "macro",
    "class_order": ["billing", "technical"],
    "success": {"metric": "macro_f1", "op": ">=", "value": 0.05, "relative_to": "trivial_baseline"},
    "comparators": ["trivial_baseline", "base_model"],
    "run_scope": "LoRA on a small encoder",
}


# ---------------------------------------------------------------- synthetic stages


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SourceInputs(Strict):
    files: list[str] = Field(default_factory=list)
    label_column: str = "queue"


def source_run(inputs: SourceInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    path = ctx.resolve(inputs.files[0])
    raw = path.read_bytes()
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r[inputs.label_column]] = counts.get(r[inputs.label_column], 0) + 1
    return StageRecord(
        stage="source",
        inputs=inputs.model_dump(mode="json"),
        checks=[
            Check(
                id="source.synthetic_checksum",
                status="info",
                summary=f"{len(raw)} bytes",
                measured={"sha256": "sha256:" + hashlib.sha256(raw).hexdigest(), "bytes": len(raw)},
            ),
            Check(
                id="source.synthetic_class_counts",
                status="pass",
                summary="classes",
                measured={"counts": counts},
            ),
        ],
    )


class SplitInputs(Strict):
    test_fraction: float = 0.5
    write_even_in_replay: bool = False


def split_run(inputs: SplitInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    counts = upstream["source"].check("source.synthetic_class_counts").measured["counts"]
    total = sum(counts.values())
    prevalence = {
        part: {k: round(v / total, 6) for k, v in sorted(counts.items())} for part in ("train", "dev", "test")
    }
    blob = json.dumps(prevalence, sort_keys=True).encode()
    if not ctx.replay or inputs.write_even_in_replay:
        atomic_write_text(ctx.data_dir / "split.json", blob.decode())
    return StageRecord(
        stage="split",
        inputs=inputs.model_dump(mode="json"),
        checks=[
            Check(
                id="split.synthetic_membership",
                status="pass",
                summary="membership saved",
                measured={"path": "data/split.json", "sha256": hashlib.sha256(blob).hexdigest()},
            ),
            Check(
                id="split.synthetic_prevalence",
                status="pass",
                summary="prevalence per split",
                measured={"prevalence": prevalence},
            ),
        ],
    )


class BaselineInputs(Strict):
    noise: float = 0.0
    tolerance: float = 0.01
    seen_key: str = ""


def baseline_run(inputs: BaselineInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    rng = random.Random()  # unseeded on purpose: a stochastic figure
    f1 = 0.6 + rng.uniform(-inputs.noise, inputs.noise)
    curve = [{"step": s, "loss": round(1.0 / (s + 1), 6)} for s in range(5)]
    return StageRecord(
        stage="baseline",
        inputs=inputs.model_dump(mode="json"),
        checks=[
            Check(
                id="baseline.synthetic_metrics",
                status="pass",
                summary="dev macro-F1",
                measured={"macro_f1": f1, "per_class": [f1, f1], "curve": curve},
                tolerance={"macro_f1": inputs.tolerance, "per_class": inputs.tolerance},
            ),
            Check(
                id="baseline.synthetic_timing",
                status="info",
                summary="seconds",
                measured={"seconds": rng.random() if inputs.noise else 0.25},
                replay="observation",
            ),
        ],
    )


class EmptyInputs(Strict):
    note: str = ""


def contract_run(inputs: EmptyInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    return StageRecord(
        stage="contract",
        inputs=inputs.model_dump(mode="json"),
        checks=[
            Check(
                id="contract.synthetic_digest",
                status="pass",
                summary="pinned",
                measured={"digest": "sha256:" + "ab" * 32},
            )
        ],
    )


class DispatchInputs(Strict):
    op_id: str = "abcdef0123456789-a1"


def dispatch_run(inputs: DispatchInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    status_file = ctx.session_dir / "jobs" / inputs.op_id / "status.json"
    if not ctx.replay:
        status_file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(status_file, json.dumps({"phase": "done", "step": 10, "total_steps": 10}))
    status = json.loads(status_file.read_text())
    return StageRecord(
        stage="dispatch",
        inputs=inputs.model_dump(mode="json"),
        checks=[
            Check(
                id="dispatch.synthetic_identity",
                status="pass",
                summary=f"job {inputs.op_id}",
                measured={"operation_id": inputs.op_id},
            ),
            Check(
                id="dispatch.synthetic_progress",
                status="info",
                summary=f"job is {status['phase']}",
                measured={"phase": status["phase"]},
                replay="observation",
            ),
        ],
    )


class ArtifactInputs(Strict):
    candidate_f1: float = 0.71


def artifact_run(inputs: ArtifactInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    arms = [
        {
            "arm": "trivial_baseline",
            "requested": 100,
            "scored": 100,
            "failed": 0,
            "missing": 0,
            "value": 0.12,
            "lo": 0.1,
            "hi": 0.14,
        },
        {
            "arm": "base_model",
            "requested": 100,
            "scored": 98,
            "failed": 2,
            "missing": 0,
            "value": 0.41,
            "lo": 0.35,
            "hi": 0.47,
        },
        {
            "arm": "candidate",
            "requested": 100,
            "scored": 100,
            "failed": 0,
            "missing": 0,
            "value": inputs.candidate_f1,
            "lo": 0.66,
            "hi": 0.76,
        },
    ]
    reliability = [{"confidence": c / 10, "accuracy": min(1.0, c / 10 + 0.05)} for c in range(1, 10, 2)]
    return StageRecord(
        stage="artifact",
        inputs=inputs.model_dump(mode="json"),
        checks=[
            Check(
                id="artifact.synthetic_comparison",
                status="pass",
                summary="locked test, 3 arms",
                measured={"arms": arms},
            ),
            Check(
                id="artifact.synthetic_verdict",
                status="pass",
                summary=f"candidate macro_f1 {inputs.candidate_f1} beats trivial_baseline by 0.59",
                measured={"delta": round(inputs.candidate_f1 - 0.12, 6)},
            ),
            Check(
                id="artifact.synthetic_calibration",
                status="info",
                summary="reliability",
                measured={"bins": reliability},
            ),
            Check(
                id="artifact.synthetic_latency",
                status="info",
                summary="p50 12 ms",
                measured={"p50_ms": 12.0, "p95_ms": 30.5},
                replay="observation",
            ),
        ],
    )


FAKES = {
    "source": SimpleNamespace(TITLE="Source", Inputs=SourceInputs, run=source_run),
    "split": SimpleNamespace(TITLE="Split", Inputs=SplitInputs, run=split_run),
    "baseline": SimpleNamespace(TITLE="Baseline", Inputs=BaselineInputs, run=baseline_run),
    "contract": SimpleNamespace(TITLE="Contract", Inputs=EmptyInputs, run=contract_run),
    "dispatch": SimpleNamespace(TITLE="Dispatch", Inputs=DispatchInputs, run=dispatch_run),
    "artifact": SimpleNamespace(TITLE="Artifact", Inputs=ArtifactInputs, run=artifact_run),
}


def use_fakes(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...] = tuple(FAKES)) -> None:
    def module(self: registry.StageSpec) -> Any:
        if self.name in names:
            return FAKES[self.name]
        return REAL_MODULE(self)

    monkeypatch.setattr(registry.StageSpec, "module", module)


def write_data(workspace: Path, rows: int = 40) -> Path:
    path = workspace / "data.csv"
    lines = ["id,queue,text"] + [f"{i},{'billing' if i % 3 else 'technical'},ticket {i}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


ANSWERS = """
[session]
title = "fixture session"
id = "fixture"
workspace = "."

[claim]
{claim}

[source]
files = ["data.csv"]

[split]
test_fraction = 0.5

[baseline]
noise = 0.0
"""


def answers_text(extra: str = "", split_extra: str = "") -> str:
    claim = "\n".join(f"{k} = {json.dumps(v)}" for k, v in CLAIM.items() if k != "success")
    claim += (
        "\nsuccess = "
        + "{ "
        + ", ".join(f"{k} = {json.dumps(v)}" for k, v in CLAIM["success"].items())
        + " }"
    )
    text = ANSWERS.format(claim=claim).replace("test_fraction = 0.5", "test_fraction = 0.5\n" + split_extra)
    return text + textwrap.dedent(extra)


def build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "", split_extra: str = "", **fakes: Any
) -> Path:
    from claimcheck.engine.headless.answers import run_answers

    use_fakes(monkeypatch, **fakes)
    write_data(tmp_path)
    (tmp_path / "answers.toml").write_text(answers_text(extra, split_extra))
    result = run_answers(tmp_path / "answers.toml", tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    return tmp_path / "s"


def outcomes(result: ReplayResult) -> dict[tuple[str, str], str]:
    return {(r.stage, r.check): r.outcome for r in result.rows}


# ---------------------------------------------------------------- tests


def test_replay_reproduces_a_fresh_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch)
    messages: list[str] = []
    result = replay(session, progress=messages.append)
    got = outcomes(result)
    assert result.exit_code == 0, result.render_table()
    assert got[("source", "source.synthetic_checksum")] == "reproduced"
    assert got[("split", "split.synthetic_prevalence")] == "reproduced"
    assert got[("claim", "claim.prior_sessions")] == "observation"
    assert got[("baseline", "baseline.synthetic_timing")] == "observation"
    assert got[("contract", "(stage)")] == "not_run"
    assert any("re-running" in m for m in messages)
    data = result.to_json()
    assert data["exit_code"] == 0 and data["timing"]["compute_s"] >= 0
    assert set(data["timing"]["per_stage_s"]) == {"claim", "source", "split", "baseline"}
    assert "everything reproduced" in result.render_table()


def test_the_synthetic_stages_write_no_real_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake stages' records test replay's machinery only: every id they write is a synthetic one,
    which the check registry does not declare and the shape registry has no shape for."""
    from claimcheck.engine.pipeline.checks import declaration
    from claimcheck.engine.shapes import shape_for

    session = build(tmp_path, monkeypatch)
    ids = [
        c.id for rec in Session.open(session).records().values() for c in rec.checks if rec.stage != "claim"
    ]
    assert len(ids) == 6  # source, split and baseline: two each
    for cid in ids:
        assert cid.split(".", 1)[1].startswith("synthetic_") and shape_for(cid) is None, cid
        with pytest.raises(KeyError):
            declaration(cid)


def test_replay_never_writes_into_the_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from claimcheck.engine.headless.replay import _snapshot

    session = build(tmp_path, monkeypatch)
    before = _snapshot(session)
    assert replay(session).exit_code == 0
    assert _snapshot(session) == before


def test_a_stage_that_writes_during_replay_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = build(tmp_path, monkeypatch, split_extra="write_even_in_replay = true")
    result = replay(session)
    assert outcomes(result)[("split", "(session files)")] == "differs"
    assert "data/split.json" in result.render_table()
    assert result.exit_code == 1


def test_one_edited_value_byte_is_tampered_and_downstream_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = build(tmp_path, monkeypatch)
    path = session / "02-source.toml"
    text = path.read_text()
    assert "bytes = " in text
    i = text.index("bytes = ") + len("bytes = ")
    digit = text[i]
    path.write_text(text[:i] + ("7" if digit != "7" else "8") + text[i + 1 :])
    result = replay(session)
    got = outcomes(result)
    assert result.exit_code == 1
    assert got[("source", "(record)")] == "tampered"
    assert got[("source", "source.synthetic_checksum")] == "differs"  # the re-run names the edited value
    assert got[("split", "split.synthetic_prevalence")] == "stale"
    assert got[("baseline", "baseline.synthetic_metrics")] == "stale"
    tampered = next(r for r in result.rows if r.outcome == "tampered")
    assert "02-source.toml" in tampered.detail


def test_a_whitespace_byte_is_tampered_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch)
    path = session / "04-baseline.toml"
    text = path.read_text()
    path.write_text(text.replace('stage = "baseline"', 'stage  = "baseline"', 1))
    result = replay(session)
    row = next(r for r in result.rows if r.outcome == "tampered")
    assert row.stage == "baseline" and "04-baseline.toml" in row.detail and "bytes differ" in row.detail
    assert result.exit_code == 1


def test_resealed_edit_breaks_the_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Editing a record and recomputing its digest still shows: session.toml and downstream disagree."""
    from claimcheck.engine.evidence import record_to_toml

    session = build(tmp_path, monkeypatch)
    s = Session.open(session)
    rec = s.record("source")
    rec.checks[1].measured["counts"]["billing"] += 1
    atomic_write_text(s.record_path("source"), record_to_toml(rec.sealed()))
    result = replay(session)
    got = outcomes(result)
    assert got[("source", "(record)")] == "tampered"  # session.toml's digest disagrees
    assert got[("source", "source.synthetic_class_counts")] == "differs"
    assert got[("split", "(chain)")] == "stale"
    assert result.exit_code == 1


def test_one_changed_source_byte_fails_at_checksum_and_marks_downstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = build(tmp_path, monkeypatch)
    data = tmp_path / "data.csv"
    raw = bytearray(data.read_bytes())
    raw[-3] = ord("9") if raw[-3] != ord("9") else ord("8")
    data.write_bytes(bytes(raw))
    result = replay(session)
    got = outcomes(result)
    assert result.exit_code == 1
    assert got[("source", "source.synthetic_checksum")] == "differs"
    row = next(r for r in result.rows if r.check == "source.synthetic_checksum")
    assert any(d.key == "measured.sha256" for d in row.differences)
    for stage, check in (
        ("split", "split.synthetic_membership"),
        ("split", "split.synthetic_prevalence"),
        ("baseline", "baseline.synthetic_metrics"),
    ):
        assert got[(stage, check)] == "stale"
    stale = next(r for r in result.rows if r.stage == "split")
    assert "source" in stale.detail


def test_missing_source_file_is_missing_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = build(tmp_path, monkeypatch)
    (tmp_path / "data.csv").unlink()
    result = replay(session)
    assert outcomes(result)[("source", "(run)")] in ("missing", "differs")
    assert result.exit_code == 1
    assert "data.csv" in result.render_table()


def test_tolerance_declared_in_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch, extra="")
    s = Session.open(session)
    # Re-run baseline as a noisy stage whose declared tolerance covers the noise: it reproduces.
    s.run_stage("baseline", {"noise": 0.001, "tolerance": 0.01})
    s.freeze("baseline")
    result = replay(session)
    row = next(r for r in result.rows if r.check == "baseline.synthetic_metrics")
    assert row.outcome == "reproduced" and "tolerance" in row.detail
    # Noise far beyond the declared tolerance: it differs, and says by how much was allowed.
    s.run_stage("baseline", {"noise": 0.2, "tolerance": 1e-9})
    s.freeze("baseline")
    result = replay(session)
    row = next(r for r in result.rows if r.check == "baseline.synthetic_metrics")
    assert row.outcome == "differs" and row.differences[0].tolerance == 1e-9
    assert result.exit_code == 1


def test_draft_record_is_incomplete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch)
    Session.open(session).add_note("baseline", "fact", "a note makes a new draft")
    result = replay(session)
    assert outcomes(result)[("baseline", "(record)")] == "incomplete"
    assert result.exit_code == 1


def test_job_killed_mid_run_is_incomplete_not_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch, extra="[contract]\n[dispatch]\n")
    assert replay(session).exit_code == 0
    status = session / "jobs" / "abcdef0123456789-a1" / "status.json"
    status.write_text(json.dumps({"phase": "training", "step": 4, "total_steps": 10}))
    result = replay(session)
    row = next(r for r in result.rows if r.check == "(job)")
    assert row.outcome == "incomplete" and "training" in row.detail and "4 of 10" in row.detail
    assert result.exit_code == 1


def test_deleted_record_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch)
    (session / "03-split.toml").unlink()
    result = replay(session)
    got = outcomes(result)
    assert got[("split", "(record)")] == "missing"
    assert got[("baseline", "baseline.synthetic_metrics")] == "stale"
    assert result.exit_code == 1


def test_unparseable_record_is_tampered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = build(tmp_path, monkeypatch)
    path = session / "03-split.toml"
    path.write_text(path.read_text().replace("[provenance]", "[provenance", 1))
    result = replay(session)
    row = next(r for r in result.rows if r.stage == "split" and r.outcome == "tampered")
    assert "03-split.toml" in row.detail
    assert result.exit_code == 1


def test_unusable_input_exits_2(tmp_path: Path) -> None:
    assert replay(tmp_path / "nope").exit_code == 2
    (tmp_path / "s").mkdir()
    assert replay(tmp_path / "s").exit_code == 2  # no session.toml
    (tmp_path / "s" / "session.toml").write_text("id = [")
    result = replay(tmp_path / "s")
    assert result.exit_code == 2 and "session.toml" in result.error
    assert "unusable input" in result.render_table()
    assert result.to_json()["exit_code"] == 2


def test_cli_replay_json_and_exit_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from claimcheck.tui.cli import main

    session = build(tmp_path, monkeypatch)
    assert main(["--replay", str(session), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["reproduced"] >= 6
    assert main(["--replay", str(tmp_path / "missing")]) == 2


# ---------------------------------------------------------------- comparison units


def test_diff_values_exact_and_tolerant() -> None:
    assert diff_values({"a": [1, 2.0]}, {"a": [1, 2.0]}) == []
    assert diff_values(float("nan"), float("nan")) == []
    assert diff_values(True, 1) != []  # a bool is not a number here
    assert diff_values([0.5, 0.25], [0.5001, 0.2499], 0.001) == []
    d = diff_values({"x": {"y": [1.0, 2.0]}}, {"x": {"y": [1.0, 2.5]}}, 0.1, "m")
    assert d == [Difference("m.x.y[1]", 2.0, 2.5, 0.1)]
    assert diff_values([1, 2], [1, 2, 3])[0].key == ""
    assert diff_values({"a": 1}, {"b": 1}) == [Difference("a", 1, "(absent)"), Difference("b", "(absent)", 1)]
    assert diff_values("a", "b") == [Difference("", "a", "b")]


def test_compare_check_status_and_observation() -> None:
    old = Check(id="x.y", status="pass", summary="s", measured={"v": 1})
    assert compare_check("x", old, old.model_copy()).outcome == "reproduced"
    worse = old.model_copy(update={"status": "fail"})
    row = compare_check("x", old, worse)
    assert row.outcome == "differs" and row.differences[0].key == "status"
    obs = old.model_copy(update={"replay": "observation"})
    row = compare_check("x", obs, obs.model_copy(update={"measured": {"v": 2}}))
    assert row.outcome == "observation" and not row.failing and "changed" in row.detail


def test_records_made_before_later_settings_and_checks_still_reproduce(real_session: Path) -> None:
    """A record made by an earlier claimcheck (no source.class_order check, no missingness row count,
    an effective contract without attn_implementation / eval_rows, so another digest) compares as
    reproduced against today's re-run; what the later claimcheck adds is an observation."""
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.headless.compare import LATER_EFFECTIVE, compare_records

    s = Session.open(real_session)
    src = s.record("source")
    older = src.model_copy(deep=True)
    older.checks = [c for c in older.checks if c.id != "source.class_order"]
    miss = older.check("source.missingness").measured
    miss.pop("rows_with_any_null")
    miss.pop("rows_with_any_null_share")
    rows = {r.check: r for r in compare_records("source", older, src)}
    assert rows["source.class_order"].outcome == "observation"
    assert rows["source.missingness"].outcome == "reproduced"

    con = s.record("contract")
    eff = con.check("contract.effective").measured["effective"]
    assert all(eff[k] == v for k, v in LATER_EFFECTIVE.items())
    older = con.model_copy(deep=True)
    old_eff = {k: v for k, v in eff.items() if k not in LATER_EFFECTIVE}
    older.check("contract.effective").measured["effective"] = old_eff
    older.check("contract.digest").measured["digest"] = digest_of(old_eff)
    table = older.check("contract.requested_vs_effective").measured["table"]
    older.check("contract.requested_vs_effective").measured["table"] = [
        r for r in table if r["setting"] not in LATER_EFFECTIVE
    ]
    outcomes = {r.check: r.outcome for r in compare_records("contract", older, con)}
    assert {
        outcomes[c] for c in ("contract.effective", "contract.digest", "contract.requested_vs_effective")
    } == {"reproduced"}
    # a recorded setting with another value is still a difference
    older.check("contract.effective").measured["effective"] = {**old_eff, "max_length": 7}
    outcomes = {r.check: r.outcome for r in compare_records("contract", older, con)}
    assert outcomes["contract.effective"] == "differs"


def test_a_contract_recorded_with_the_unreachable_default_alarm_step_still_reproduces(
    real_session: Path,
) -> None:
    """A contract recorded before the default worse-than-trivial step past the budget was resolved to
    -1 (it kept 200 on its 12 steps) compares as reproduced against today's re-run; another step differs."""
    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.headless.compare import compare_records

    con = Session.open(real_session).record("contract")
    eff = con.check("contract.effective").measured["effective"]
    assert eff["alarms"]["worse_than_trivial_after_step"] == -1 and eff["optimizer_steps"] < 200
    older = con.model_copy(deep=True)
    old_eff = {**eff, "alarms": {**eff["alarms"], "worse_than_trivial_after_step": 200}}
    older.check("contract.effective").measured["effective"] = old_eff
    older.check("contract.digest").measured["digest"] = digest_of(old_eff)
    rve = older.check("contract.requested_vs_effective").measured
    rve["table"] = [r for r in rve["table"] if r["setting"] != "alarms.worse_than_trivial_after_step"]
    ids = ("contract.effective", "contract.digest", "contract.requested_vs_effective")
    outcomes = {r.check: r.outcome for r in compare_records("contract", older, con)}
    assert {outcomes[c] for c in ids} == {"reproduced"}, outcomes
    other = {**old_eff, "alarms": {**eff["alarms"], "worse_than_trivial_after_step": 150}}
    older.check("contract.effective").measured["effective"] = other
    outcomes = {r.check: r.outcome for r in compare_records("contract", older, con)}
    assert outcomes["contract.effective"] == "differs"


def test_the_fake_stages_write_no_id_the_registries_know(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fakes' check ids are synthetic: none is declared or has a shape, so no fake record stands
    in for what a real stage writes; every other id in the session is declared."""
    from claimcheck.engine.pipeline.checks import declared
    from claimcheck.engine.shapes import shape_for

    session = build(tmp_path, monkeypatch)
    ids = {c.id for rec in Session.open(session).records().values() for c in rec.checks}
    known = declared()
    synthetic = {i for i in ids if ".synthetic_" in i}
    assert synthetic and all(i.split(".", 1)[0] in FAKES for i in synthetic)
    assert not [i for i in synthetic if i in known or shape_for(i) is not None]
    assert ids - synthetic <= set(known)
