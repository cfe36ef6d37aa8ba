"""The split stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from claimcheck.engine.pipeline.context import StageInputError

GROUP_STRATEGIES = ("group", "group_time", "group_kfold")
TIME_STRATEGIES = ("time", "group_time")


def default_fractions() -> dict[str, float]:
    return {"train": 0.7, "dev": 0.1, "calibration": 0.1, "test": 0.1}


# What each strategy does and which deployment question it answers (the form's help, the report).
STRATEGY_HELP = {
    "random": "rows at random: answers 'new rows like these'",
    "stratified": "rows at random, each class's share kept per split",
    "group": "whole families (entity columns) at random: answers 'new customers / firms'",
    "time": "rows cut in time order (earliest to train): answers 'next period'; families may straddle",
    "group_time": "whole families ordered by their first time, then cut: needs many families to realise the fractions",
    "group_kfold": "k folds of whole families (small data): each family in one fold",
}
# When a time strategy cannot realise the asked fractions: what can.
FRACTION_ADVICE = {
    "group_time": "with few families whole families cannot be cut near the asked fractions: 'time' "
    "cuts rows (families then straddle, which split.family_intersection reports), or give time_cuts",
    "time": "rows are cut only between distinct times: give time_cuts (dates) to set the cuts yourself",
}


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    strategy: Literal["random", "stratified", "group", "time", "group_time", "group_kfold"] = Field(
        default="group",
        description="How rows are assigned to train / dev / test. "
        + "; ".join(f"{k}: {v}" for k, v in STRATEGY_HELP.items())
        + ".",
    )
    fractions: dict[str, float] = Field(
        default_factory=default_fractions,
        description="Share of rows (or groups) per split.",
    )
    seed: int = Field(
        default=0,
        strict=True,
        ge=0,
        le=2**32 - 1,
        description="Seed of the random assignment (recorded, so the split is reproducible).",
    )
    # Ascending ISO dates separating consecutive non-empty splits (time strategies); empty = by fractions.
    time_cuts: list[str] = Field(
        default_factory=list,
        description="Ascending ISO dates between consecutive splits (time strategies); empty = by fractions.",
    )
    gap_days: float = Field(
        default=0.0, ge=0.0, le=36_500, description="Days left out between consecutive time splits."
    )
    k: int = Field(default=5, ge=2, le=50, description="Folds of group K-fold.")
    # What a group strategy keeps together: the source's entity families, widened by rows with identical
    # model inputs ("duplicates") and also by the source's near-duplicate pairs ("duplicates_and_near").
    grouping: Literal["entities", "duplicates", "duplicates_and_near"] = Field(
        default="entities",
        description="What a group split keeps together: entity families, or also exact (and near) duplicate families.",
    )
    rationale: str = Field(default="", description="Why this split answers the deployment question.")
    class_support_floor: int = Field(
        default=20, ge=0, le=10**9, description="Fewest test rows per class before the check warns."
    )
    near_dup_threshold: float = Field(
        default=0.8,
        gt=0.0,
        le=1.0,
        description="Jaccard similarity from which a train and a test text count as near-duplicates.",
    )
    shingle_size: int = Field(
        default=5, ge=1, le=50, description="Words per shingle in the near-duplicate comparison."
    )

    # Checked before any data is read, so an answers file is refused before a stage runs.
    @field_validator("fractions")
    @classmethod
    def _fractions(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        from types import SimpleNamespace

        try:
            check_fractions(SimpleNamespace(fractions=value, strategy=info.data.get("strategy", "group")))
        except StageInputError as exc:
            raise ValueError(str(exc).removeprefix("split: ")) from None
        return value

    @field_validator("grouping")
    @classmethod
    def _grouping(cls, value: str, info: ValidationInfo) -> str:
        strategy = info.data.get("strategy", "group")
        if value != "entities" and strategy not in GROUP_STRATEGIES:
            raise ValueError(
                f"'{value}' groups rows, but strategy '{strategy}' does not split by groups; use one of "
                f"{', '.join(GROUP_STRATEGIES)} or grouping 'entities'"
            )
        return value

    @field_validator("time_cuts")
    @classmethod
    def _time_cuts(cls, value: list[str]) -> list[str]:
        from claimcheck.engine.data import splits

        try:
            cuts = [splits.to_datetime_us(c) for c in value]
        except StageInputError as exc:
            raise ValueError(str(exc).removeprefix("split: ")) from None
        if cuts != sorted(cuts):
            raise ValueError("the time cuts must be ascending")
        return value


# How far the fractions' sum may be from 1, on either side: room for decimal rounding, nothing more.
FRACTION_TOLERANCE = 1e-9


def check_fractions(inp: Inputs) -> dict[str, float]:
    from claimcheck.engine.data.splits import SPLITS

    unknown = [k for k in inp.fractions if k not in SPLITS]
    if unknown:
        raise StageInputError(
            f"split: unknown split name(s) {unknown} in 'fractions'; use {', '.join(SPLITS)}"
        )
    if any(v < 0 for v in inp.fractions.values()):
        raise StageInputError("split: fractions must be >= 0")
    total = math.fsum(inp.fractions.values())  # exact sum of the given values, then rounded once
    if abs(total - 1.0) > FRACTION_TOLERANCE:
        raise StageInputError(
            f"split: fractions add up to {total!r}, not 1 (allowed: 1 ± {FRACTION_TOLERANCE:g}); adjust them"
        )
    if inp.fractions.get("train", 0) <= 0:
        raise StageInputError("split: the train fraction must be > 0")
    if inp.strategy != "group_kfold" and inp.fractions.get("test", 0) <= 0:
        raise StageInputError("split: the locked test fraction must be > 0 (or use group_kfold)")
    return {s: float(inp.fractions.get(s, 0.0)) for s in SPLITS}
