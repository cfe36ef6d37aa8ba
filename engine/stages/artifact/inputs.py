"""The artifact stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from claimcheck.engine.artifact.common import ARM_NAMES
from claimcheck.engine.artifact.decoding import Decoding


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Empty: the claim's frozen comparators. Listed: a subset of them (an arm of the claim left out
    # fails artifact.arms; an arm the claim does not list is refused).
    comparators: list[str] = Field(
        default_factory=list,
        description="The arms scored beside the candidate (empty = the claim's comparators), comma-separated.",
    )
    bootstrap_resamples: int = Field(
        default=1000, ge=100, le=100_000, description="Bootstrap resamples of each paired interval."
    )
    seed: int = Field(default=0, strict=True, ge=0, le=2**32 - 1, description="Seed of the bootstrap.")
    latency_examples: int = Field(
        default=50, ge=1, le=100_000, description="Examples timed for the latency figure."
    )
    parity_tolerance: float = Field(
        default=1e-5,
        ge=0,
        le=1,
        description="Largest difference allowed between the saved and the trained model's outputs.",
    )
    calibration: str = Field(
        default="temperature", description="How the candidate's probabilities are calibrated on dev."
    )
    # Columns to slice the test by (e.g. channel); each slice's metric per arm, regressions listed.
    slice_columns: list[str] = Field(
        default_factory=list, description="Columns to slice the test by (e.g. channel), comma-separated."
    )
    # 0 = every test row. A bound makes the comparison a sample, and the coverage says so.
    max_test_rows: int = Field(
        default=0,
        ge=0,
        le=10**9,
        description="0 = every test row; a bound makes the comparison a sample (the coverage says so).",
    )
    reliability_bins: int = Field(default=10, ge=2, le=1000, description="Bins of the reliability diagram.")
    # How the generating arms answer (causal-LM SFT only; classification ignores it).
    decoding: Decoding = Field(
        default_factory=Decoding,
        description="How generating arms answer (causal-LM SFT only): greedy, max new tokens, stop sequences.",
    )

    @field_validator("comparators")
    @classmethod
    def _comparators(cls, value: list[str]) -> list[str]:
        bad = [c for c in value if c not in ARM_NAMES]
        if bad:
            raise ValueError(f"unknown comparator(s) {bad}; choose from {', '.join(ARM_NAMES)}")
        return value


# ---------------------------------------------------------------- run
