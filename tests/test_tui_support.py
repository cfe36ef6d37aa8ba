"""Helpers shared by the TUI tests: screen text, waiting, and stand-in stage modules.

Stand-in modules replace a stage's module only to exercise the app's own mechanics (stale flow,
cancellation, untrusted text) quickly; the stage engines are tested in their own files.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.pipeline.registry import StageSpec


def screen_text(app: Any) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join(s.text.rstrip() for s in strips)


async def wait_for(pilot: Any, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    # A plain sleep lets the app's loop run; pilot.pause() would message every widget each time.
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time; screen:\n" + screen_text(pilot.app))
        await asyncio.sleep(0.05)
    await pilot.pause()


class ToyInputs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rows: int = 3
    label: str = "queue"
    delay_steps: int = 0


def toy_module(name: str, checks: Callable[[ToyInputs], list[Check]] | None = None) -> types.SimpleNamespace:
    def run(inputs: ToyInputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
        for i in range(inputs.delay_steps):
            ctx.progress(i / max(1, inputs.delay_steps), f"step {i} of {inputs.delay_steps}")
            ctx.check_cancelled()
            time.sleep(0.02)
        made = (
            checks(inputs)
            if checks
            else [
                Check(
                    id=f"{name}.rows",
                    status="pass" if inputs.rows > 0 else "fail",
                    summary=f"{inputs.rows} rows",
                    measured={
                        "rows": inputs.rows,
                        "class_counts": {"billing": 2 * inputs.rows, "security": 1},
                    },
                )
            ]
        )
        return StageRecord(stage=name, inputs=inputs.model_dump(mode="json"), checks=made)

    return types.SimpleNamespace(TITLE=name.title(), Inputs=ToyInputs, run=run)


def patch_modules(monkeypatch: Any, mapping: dict[str, Any]) -> None:
    """Make StageSpec.module() return `mapping[name]` (a stand-in module) for the named stages."""
    real = StageSpec.module

    def module(self: StageSpec) -> Any:
        if self.name in mapping:
            return mapping[self.name]
        return real(self)

    monkeypatch.setattr(StageSpec, "module", module)


async def settle(pilot: Any, n: int = 2) -> None:
    for _ in range(n):
        await pilot.pause()
    await asyncio.sleep(0)
