"""The decoding contract every generating arm of the locked-test comparison answers under
(causal-LM SFT). It is part of the artifact stage's inputs, so it is recorded and hashed with them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_MAX_NEW_TOKENS = 32


class Decoding(BaseModel):
    """Greedy decoding, at most `max_new_tokens` new tokens. A generation stops at the tokenizer's
    end-of-turn token or at any of `stop_sequences` (cut before the stop); one that reaches the
    limit without stopping is counted as truncated, never scored."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    strategy: Literal["greedy"] = Field(default="greedy", description="How tokens are chosen (greedy only).")
    max_new_tokens: int = Field(
        default=DEFAULT_MAX_NEW_TOKENS,
        ge=1,
        le=4096,
        description="Most new tokens per answer; one that reaches it without a stop is counted truncated.",
    )
    stop_sequences: list[str] = Field(
        default_factory=list,
        description="Texts that end an answer, besides the tokenizer's end-of-turn token (comma-separated).",
    )
