"""Shapes of a declared tuning search: the trial ledger's files and the contract stage's three
search checks (engine/stages/contract/tuning.py writes them; replay and the report read them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from claimcheck.engine.shapes.base import Part, Shape

TrialState = Literal["running", "complete", "failed", "pruned", "cancelled"]


class TrialRecord(Part):
    """One trial file of the ledger (search/r<revision>/trials/t<NNN>[-s<seed>].toml)."""

    number: int
    kind: Literal["trial", "repeat"]
    settings: dict[str, float | int | str]
    seed: int
    digest: str
    op_id: str
    state: TrialState
    reason: str = ""
    metric: str
    value: float | None = None
    started_at: str
    ended_at: str = ""
    trainable_params: int = 0
    # The memory estimate (bytes, docs/memory-estimate.md, at max_length) and measured seconds per
    # optimizer step: this trial's own, or, where resources_from names an earlier trial with the same
    # micro_batch / grad_accum / lora.r, that trial's, reused and not measured again.
    memory_bytes: int | None = None
    step_s: float | None = None
    resources_from: int | None = None
    resources_from_seed: int | None = None
    resources_from_digest: str | None = None


class Revision(Part):
    revision: int
    digest: str
    trial_files: int


class SearchDeclaration(Shape):
    check_ids = ("contract.search_declaration",)
    revision: int
    digest: str
    base_digest: str
    frozen_at: str
    path: str
    sha256: str
    hypothesis: str
    space: list[dict[str, Any]]
    sampler: str
    n_trials: int
    metric: str
    direction: Literal["maximize", "minimize"]
    pruning: str
    finalists: int
    seed_repeats: int
    tie_break: str
    provider: str
    concurrency: int
    refused: list[str] = Field(default_factory=list)
    earlier_revisions: list[Revision] = Field(default_factory=list)


class TrialRow(Part):
    number: int
    kind: Literal["trial", "repeat"]
    seed: int
    settings: dict[str, float | int | str]
    digest: str
    state: TrialState
    reason: str = ""
    value: float | None = None
    started_at: str
    ended_at: str = ""
    file: str
    file_sha256: str
    memory_bytes: int | None = None
    step_s: float | None = None
    resources_from: int | None = None
    resources_from_seed: int | None = None
    resources_from_digest: str | None = None


class SearchTrials(Shape):
    check_ids = ("contract.search_trials",)
    revision: int
    trials: int
    complete: int
    failed: int
    pruned: int
    cancelled: int
    running: int
    repeats: int
    problems: list[str] = Field(default_factory=list)
    rows: list[TrialRow]


class Finalist(Part):
    number: int
    settings: dict[str, float | int | str]
    digest: str
    values: list[float]
    mean: float
    spread: float
    trainable_params: int = 0


class SearchSelection(Shape):
    check_ids = ("contract.search_selection",)
    metric: str
    direction: Literal["maximize", "minimize"]
    finalists: list[Finalist]
    margin: float | None = None
    spread: float | None = None
    tie: bool
    rule: str
    chosen_trial: int
    chosen_digest: str
    chosen_settings: dict[str, float | int | str]
    contract_digest: str = ""


class SearchConcurrency(Shape):
    """How many trials the search ran at once on this machine, and why (search/r<N>/resources.toml,
    written when the search runs)."""

    check_ids = ("contract.search_concurrency",)
    path: str
    sha256: str
    provider: str
    declared: int
    cores: int | None = None
    by_cores: int | None = None
    threads_per_trial: int | None = None
    largest_settings: dict[str, float | int | str] = Field(default_factory=dict)
    memory_per_trial_bytes: int = 0
    memory_available_bytes: int = 0
    by_memory: int | None = None
    bound: int
    why: str
    measured_at: str
