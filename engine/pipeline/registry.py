"""The stage table: the seven stages, registered in order. Each has a `run` module with one interface:

    TITLE: str
    Inputs: a pydantic model (extra="forbid") of what the person decides
    run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord

Modules are imported lazily so that listing the stages never pulls in heavy libraries, and by name
(importlib), so this table sits *below* the stages in the import layers (pyproject.toml,
[tool.importlinter]): the session, the core and the stages themselves can all read it without a loop.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

# Each stage is a package here; its `run` module holds TITLE, Inputs and run().
STAGES_PACKAGE = "claimcheck.engine.stages"


@dataclass(frozen=True)
class StageSpec:
    name: str
    index: int
    title: str
    question: str

    @property
    def file_name(self) -> str:
        return f"{self.index:02d}-{self.name}.toml"

    def module(self) -> ModuleType:
        """The stage's `run` module (imported on first use)."""
        return importlib.import_module(f"{STAGES_PACKAGE}.{self.name}.run")


STAGES: tuple[StageSpec, ...] = (
    StageSpec("claim", 1, "Claim", "What exactly is claimed, for whom, measured how, against what?"),
    StageSpec("source", 2, "Source", "What is in the data, and can the inputs determine the target?"),
    StageSpec("split", 3, "Split", "Does the held-out data answer the deployment question without leakage?"),
    StageSpec("baseline", 4, "Baseline", "Is the task learnable, and what must a model beat?"),
    StageSpec(
        "contract", 5, "Contract", "Is the training run pinned, verified on real inputs, and able to fit?"
    ),
    StageSpec("dispatch", 6, "Dispatch", "Did the contracted job really run, and how did it behave?"),
    StageSpec(
        "artifact", 7, "Artifact", "Is the saved model the one trained, and is it better on the locked test?"
    ),
)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
_BY_NAME = {s.name: s for s in STAGES}


def get(name: str) -> StageSpec:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown stage {name!r}; stages are: {', '.join(STAGE_NAMES)}") from None


def upstream_names(name: str) -> tuple[str, ...]:
    return STAGE_NAMES[: get(name).index - 1]


def downstream_names(name: str) -> tuple[str, ...]:
    return STAGE_NAMES[get(name).index :]
