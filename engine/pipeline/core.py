"""The one core around a stage call: validate the inputs, run the stage, stamp its provenance.

    compute(stage, inputs, upstream, ctx) -> StageRecord

The app (`Session.run_stage`), the headless answers run (through `Session.run_stage`) and replay all
call it, so a stage is validated and run the same way wherever it runs. What each caller adds is its
own: the session keeps the person's notes and saves a draft; replay compares with what was recorded.

Runtime knobs are not evidence. Dispatch's `wait`, `poll_seconds` and `wait_timeout_seconds` were
once stage inputs; they are now fields of the StageContext. Records and answers files written before
still hold them: `split_runtime` takes them out before the inputs are validated (a one-way upgrade:
a re-run records the inputs without them), and returns them so that an answers run can put them on
the context.

This module sits with the session in the bottom layer of the import contract: it reaches the stage
modules only through the registry's by-name import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from claimcheck.engine.errors import Problem, validation_problem
from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.pipeline import registry
from claimcheck.engine.pipeline.context import StageContext, StageInputError

# Runtime knobs (StageContext fields) that older records hold among their stage inputs.
RUNTIME_KEYS: dict[str, tuple[str, ...]] = {"dispatch": ("wait", "poll_seconds", "wait_timeout_seconds")}


class InvalidInputs(StageInputError):
    """A stage's inputs do not fit its Inputs model; `problem` says which field and why."""

    def __init__(self, stage: str, problem: Problem):
        self.stage, self.problem = stage, problem
        super().__init__(f"{stage} inputs: {problem.text()}")


class Runtime(BaseModel):
    """The runtime knobs an answers file may still give in a stage's table (they go to the context)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Defaults are the StageContext's own (its dataclass fields).
    wait: StrictBool = StageContext.wait
    poll_seconds: float = Field(default=StageContext.poll_seconds, gt=0, le=3600)
    # 0 = wait as long as the job runs (at most a year).
    wait_timeout_seconds: float = Field(default=StageContext.wait_timeout_seconds, ge=0, le=31_536_000)


def split_runtime(stage: str, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the stage's inputs without runtime knobs, the runtime knobs they held)."""
    keys = RUNTIME_KEYS.get(stage, ())
    kept = {k: v for k, v in inputs.items() if k not in keys}
    knobs = {k: v for k, v in inputs.items() if k in keys}
    return kept, knobs


def runtime_knobs(stage: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The runtime knobs in a stage's table, validated; raises pydantic's ValidationError."""
    knobs = split_runtime(stage, inputs)[1]
    return Runtime.model_validate(knobs).model_dump(include=set(knobs)) if knobs else {}


def stage_module(stage: str) -> Any:
    return registry.get(stage).module()


def validate(stage: str, inputs: Mapping[str, Any] | BaseModel) -> BaseModel:
    """The stage's Inputs model for these inputs; raises InvalidInputs naming the field."""
    module = stage_module(stage)
    if isinstance(inputs, module.Inputs):
        return inputs
    if isinstance(inputs, BaseModel):
        inputs = inputs.model_dump(mode="json")
    try:
        return module.Inputs.model_validate(split_runtime(stage, inputs)[0])
    except ValidationError as exc:
        raise InvalidInputs(stage, validation_problem(exc)) from None


# Failing checks after which no later stage runs: what they found (one class to learn, numbers a learner
# cannot read) would make the next fit crash instead of measure. docs/checks.md says which and why.
BLOCKING_CHECKS = ("source.non_finite", "split.train_classes")


def refuse_after_blocking(stage: str, upstream: Mapping[str, StageRecord]) -> None:
    """Raise StageInputError when an upstream record holds a failing blocking check, naming it."""
    for rec in upstream.values():
        for check in rec.checks:
            if check.id in BLOCKING_CHECKS and check.status == "fail":
                raise StageInputError(
                    f"{stage}: not run — the {rec.stage} record's check {check.id} failed "
                    f"({check.summary}); fix that and run the {rec.stage} stage again"
                )


def stamp(record: StageRecord, upstream: Mapping[str, StageRecord]) -> StageRecord:
    """Provenance of a fresh computation: the upstream digests it rests on; a draft, not frozen."""
    record.provenance.upstream = {k: v.provenance.digest for k, v in upstream.items()}
    record.provenance.frozen = False
    record.provenance.frozen_at = ""
    return record


def compute(
    stage: str,
    inputs: Mapping[str, Any] | BaseModel,
    upstream: Mapping[str, StageRecord],
    ctx: StageContext,
) -> StageRecord:
    """Validate `inputs`, run the stage on `upstream` with `ctx`, and stamp the record's provenance.

    Raises InvalidInputs (inputs do not fit), StageInputError (the stage refused them: a missing
    file, an unknown column), Cancelled, EvidenceError; a stage bug propagates as it is.
    """
    model = validate(stage, inputs)
    refuse_after_blocking(stage, upstream)
    ctx.stage = stage
    record = stage_module(stage).run(model, dict(upstream), ctx)
    return stamp(record, upstream)


__all__ = [
    "BLOCKING_CHECKS",
    "RUNTIME_KEYS",
    "InvalidInputs",
    "Runtime",
    "compute",
    "refuse_after_blocking",
    "runtime_knobs",
    "split_runtime",
    "stamp",
    "validate",
]
