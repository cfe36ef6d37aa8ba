"""The one core around a stage call: validate, run, stamp; one error root and one validation wording;
dispatch's runtime knobs on the context, never in the record (older records still load and replay)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from claimcheck.engine.errors import EXIT_DIFFERS, EXIT_OK, EXIT_UNUSABLE, ClaimcheckError, validation_problem
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import core, registry
from claimcheck.engine.pipeline.context import StageContext
from tests.test_replay import FAKES, REAL_MODULE, answers_text, use_fakes, write_data


class _Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = 1
    nested: list[dict[str, int]] = []


def _toy(seen: list[StageContext]) -> SimpleNamespace:
    def run(inputs: _Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
        seen.append(ctx)
        check = Check(id="source.rows", status="pass", summary="ok", measured={"rows": inputs.rows})
        return StageRecord(stage="source", inputs=inputs.model_dump(), checks=[check])

    return SimpleNamespace(TITLE="Source", Inputs=_Inputs, run=run)


def _claim_record() -> StageRecord:
    check = Check(id="claim.completeness", status="pass", summary="ok")
    return StageRecord(stage="claim", inputs={}, checks=[check]).sealed()


def test_compute_validates_runs_and_stamps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[StageContext] = []
    toy = _toy(seen)
    monkeypatch.setattr(
        registry.StageSpec, "module", lambda self: toy if self.name == "source" else REAL_MODULE(self)
    )
    claim = _claim_record()
    ctx = StageContext(session_dir=tmp_path, workspace=tmp_path)
    rec = core.compute("source", {"rows": 3}, {"claim": claim}, ctx)
    assert rec.check("source.rows").measured == {"rows": 3}
    assert rec.provenance.upstream == {"claim": claim.provenance.digest}
    assert not rec.provenance.frozen and seen[0].stage == "source"
    with pytest.raises(core.InvalidInputs) as info:
        core.compute("source", {"rows": "many", "rowz": 1}, {"claim": claim}, ctx)
    assert info.value.problem.field == "rows" and "more problem" in info.value.problem.problem
    assert str(info.value).startswith("source inputs: field 'rows': ")


def test_one_validation_wording() -> None:
    def problem(data: dict[str, Any]):
        with pytest.raises(ValidationError) as info:
            _Inputs.model_validate(data)
        return validation_problem(info.value)

    extra = problem({"rowz": 1})
    assert (extra.field, extra.problem, extra.fix) == (
        "rowz",
        "not a known field",
        "remove it or check its spelling",
    )
    assert extra.text() == "field 'rowz': not a known field"
    nested = problem({"nested": [{"a": 1}, {"a": "x"}]})
    assert nested.field == "nested[1].a" and nested.fix == "correct the value"
    with pytest.raises(ValidationError) as info:
        _Inputs.model_validate({"rows": "x"})
    assert validation_problem(info.value, "source").field == "source.rows"


def test_every_error_has_the_one_root() -> None:
    from claimcheck.engine.data.splits import LockedTestError
    from claimcheck.engine.evidence import EvidenceError
    from claimcheck.engine.ledger.lock import SessionLocked
    from claimcheck.engine.ledger.session import StageOrderError
    from claimcheck.engine.pipeline.context import Cancelled, StageInputError

    for cls in (EvidenceError, StageInputError, Cancelled, StageOrderError, SessionLocked, LockedTestError):
        assert issubclass(cls, ClaimcheckError), cls
    assert issubclass(core.InvalidInputs, StageInputError)


def test_exit_codes_are_defined_once() -> None:
    import claimcheck.engine.headless.replay
    import claimcheck.tui.cli

    assert (EXIT_OK, EXIT_DIFFERS, EXIT_UNUSABLE) == (0, 1, 2)
    assert claimcheck.tui.cli.EXIT_UNUSABLE is EXIT_UNUSABLE and claimcheck.tui.cli.EXIT_OK is EXIT_OK
    assert claimcheck.engine.headless.replay.EXIT_DIFFERS is EXIT_DIFFERS
    for path in ("engine/headless/replay.py", "engine/headless/answers.py", "tui/cli.py"):
        text = (Path(__file__).resolve().parents[1] / path).read_text()
        assert "= 0, 1, 2" not in text, path


def test_the_answers_run_does_not_import_replay() -> None:
    code = "import sys, claimcheck.engine.headless.answers; print('claimcheck.engine.headless.replay' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------- dispatch's runtime knobs


def test_old_dispatch_inputs_with_runtime_knobs_still_validate() -> None:
    from claimcheck.engine.stages.dispatch import run as dispatch

    assert not {"wait", "poll_seconds", "wait_timeout_seconds"} & set(dispatch.Inputs.model_fields)
    model = core.validate(
        "dispatch", {"attempt": 2, "wait": True, "poll_seconds": 2.0, "wait_timeout_seconds": 0}
    )
    assert model.model_dump()["attempt"] == 2 and "wait" not in model.model_dump()
    assert core.runtime_knobs("dispatch", {"wait": False, "attempt": 2}) == {"wait": False}
    with pytest.raises(ValidationError):
        core.runtime_knobs("dispatch", {"poll_seconds": 0})
    with pytest.raises(core.InvalidInputs):
        core.validate("source", {"wait": True})  # only dispatch ever had them


DISPATCH_ANSWERS = """
[contract]

[dispatch]
op_id = "abcdef0123456789-a1"
wait = false
poll_seconds = 0.5
"""


def _capturing_dispatch(monkeypatch: pytest.MonkeyPatch, seen: list[StageContext]) -> None:
    fake = FAKES["dispatch"]

    def run(inputs: Any, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
        seen.append(ctx)
        return fake.run(inputs, upstream, ctx)

    wrapped = SimpleNamespace(TITLE=fake.TITLE, Inputs=fake.Inputs, run=run)

    def module(self: registry.StageSpec) -> Any:
        if self.name == "dispatch":
            return wrapped
        return FAKES.get(self.name) or REAL_MODULE(self)

    monkeypatch.setattr(registry.StageSpec, "module", module)


def test_answers_knobs_go_to_the_context_not_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from claimcheck.engine.evidence import EvidenceError
    from claimcheck.engine.headless.answers import load_answers, run_answers
    from claimcheck.engine.headless.replay import replay

    use_fakes(monkeypatch)
    seen: list[StageContext] = []
    _capturing_dispatch(monkeypatch, seen)
    write_data(tmp_path)
    path = tmp_path / "answers.toml"
    path.write_text(answers_text(DISPATCH_ANSWERS))
    answers = load_answers(path)
    assert answers.runtime == {"dispatch": {"wait": False, "poll_seconds": 0.5}}
    assert "wait" not in answers.stages["dispatch"]
    result = run_answers(path, tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    ctx = seen[-1]
    assert (ctx.wait, ctx.poll_seconds, ctx.wait_timeout_seconds) == (False, 0.5, 0.0)
    rec = Session.open(tmp_path / "s").record("dispatch")
    assert rec.inputs == {"op_id": "abcdef0123456789-a1"}
    assert replay(tmp_path / "s").exit_code == 0
    path.write_text(answers_text(DISPATCH_ANSWERS.replace("poll_seconds = 0.5", "poll_seconds = -1")))
    with pytest.raises(EvidenceError) as info:
        load_answers(path)
    assert info.value.field == "dispatch.poll_seconds"


def test_a_record_that_still_holds_the_knobs_replays(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Written before the knobs moved: it loads, and replay does not call the dropped keys a difference."""
    from claimcheck.engine.headless.answers import run_answers
    from claimcheck.engine.headless.replay import replay

    use_fakes(monkeypatch)
    write_data(tmp_path)
    path = tmp_path / "answers.toml"
    path.write_text(answers_text(DISPATCH_ANSWERS))
    assert run_answers(path, tmp_path / "s").exit_code == 0
    session = Session.open(tmp_path / "s")
    old = session.record("dispatch")
    legacy = old.model_copy(
        update={"inputs": {**old.inputs, "wait": True, "poll_seconds": 2.0, "wait_timeout_seconds": 0.0}}
    )
    session.save_record(legacy)
    session.freeze("dispatch")
    assert session.record("dispatch").inputs["poll_seconds"] == 2.0
    result = replay(tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    assert not [r for r in result.rows if r.stage == "dispatch" and r.check == "(inputs)"]
    # a re-run records the inputs without them (the one-way upgrade)
    rerun = session.run_stage("dispatch", dict(session.record("dispatch").inputs))
    assert rerun.inputs == {"op_id": "abcdef0123456789-a1"}
