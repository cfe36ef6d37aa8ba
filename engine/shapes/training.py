"""Shapes of the contract and dispatch stages' checks that the report, the TUI and later stages read."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from claimcheck.engine.shapes.base import Part, Shape

_BIN = re.compile(r"^\s*(\d+)-(\d+)\s.*?(\d+)(\s*← max_length)?\s*$")


class SuccessCriterion(Shape):
    check_ids = ("claim.success_criterion",)
    criterion: str
    problems: list[str] = Field(default_factory=list)


class PriorSession(Part):
    path: str
    status: str
    detail: str
    id: str | None = None  # absent when the session could not be read


class PriorSessions(Shape):
    """Earlier sessions found in the claim's review scope, and how many ended each way."""

    check_ids = ("claim.prior_sessions",)
    figure = "bars"
    scope: list[str]
    sessions: list[PriorSession]
    counts: dict[str, int]


class SettingRow(Part):
    setting: str
    requested: str
    effective: str
    outcome: str


class Refusal(Part):
    setting: str
    requested: str
    reason: str


class RequestedVsEffective(Shape):
    check_ids = ("contract.requested_vs_effective",)
    refused: list[Refusal]
    table: list[SettingRow]


class PreparedLengths(Shape):
    check_ids = ("contract.prepared_lengths",)
    figure = "length_histogram"
    count: int
    p50: int
    p95: int
    p99: int
    max: int
    mean: float
    # One text line per bin ("lo-hi  bar  count", the max_length bin marked); `bins()` reads them.
    histogram: list[str]
    max_length: int
    truncated: int
    truncated_share: float
    truncated_ids: list[str]
    targets_cut: int | None = None
    target_tokens_cut: int | None = None
    targets_cut_ids: list[str] | None = None

    def bins(self) -> list[tuple[int, int, int]]:
        """(low, high, count) per histogram bin, in order."""
        out = []
        for line in self.histogram:
            m = _BIN.match(line)
            if m:
                out.append((int(m.group(1)), int(m.group(2)), int(m.group(3))))
        return out


class Sample(Part):
    """One prepared example decoded as training sees it (engine/training/prepare.py decode_sample):
    a classification row carries its label; an SFT row its supervised / masked token counts."""

    id: str
    tokens: int
    decoded: str
    label: str | None = None
    label_id: int | None = None
    truncated: bool | None = None
    supervised_tokens: int | None = None
    masked_tokens: int | None = None


class PreparedSamples(Shape):
    check_ids = ("contract.prepared_samples",)
    legend: str
    ids: list[str]
    samples: list[Sample]


class Memory(Shape):
    check_ids = ("contract.memory",)
    label: str
    seq_len: int
    micro_batch: int
    quantised_params: int
    unquantised_params: int
    lora_params: int
    trainable_params: int
    weights_bytes: int
    trainable_state_bytes: int
    activations_bytes: int
    activations_checkpointed_bytes: int
    gradient_checkpointing: bool
    logits_bytes: int
    total_bytes: int
    total_gib: float
    device_memory_bytes: int
    device_memory_gib: float
    share_of_device: float


class MemoryMeasured(Shape):
    """The fitting check's measured peak memory next to the estimate for the same batch (volatile)."""

    check_ids = ("contract.memory_measured",)
    device: str
    method: str
    adapter_mode: str
    micro_batch: int
    seq_len: int
    estimate_bytes: int
    measured_bytes: int
    baseline_bytes: int
    peak_bytes: int
    ratio: float


class Effective(Shape):
    check_ids = ("contract.effective",)
    refused: list[Refusal]
    effective: dict[str, Any] = Field(default_factory=dict)


class EngineSources(Part):
    """Every claimcheck.engine source file's sha256 by module name, and the digest over them."""

    sha256: str
    modules: dict[str, str]


class Environment(Shape):
    check_ids = ("contract.environment",)
    versions: dict[str, str]
    hardware: dict[str, Any]
    claimcheck: dict[str, str] | None = None
    # absent in records made before the contract pinned the engine's sources
    engine: EngineSources | None = None


class Digest(Shape):
    check_ids = ("contract.digest",)
    digest: str


class DispatchIdentity(Shape):
    check_ids = ("dispatch.identity",)
    operation_id: str
    digest: str
    attempt: int
    train_sha256: str
    dev_sha256: str
    train_rows: int
    dev_rows: int
    problems: list[str]
    # sha256 of metrics.jsonl and every file under checkpoints/ and best/, relative to jobs/<op>/;
    # absent in records made before claimcheck pinned them.
    job_files: dict[str, str] | None = None


class Runtime(Shape):
    """The job's runtime stamp (runtime.json) held to the contract: its model digest (fail on a
    difference), its library versions and engine sources (warn on a difference)."""

    check_ids = ("dispatch.runtime",)
    # stamped / pending (no stamp yet, the job runs) / missing (the job ended without one)
    state: str
    contract_model_sha256: str
    model_sha256: str = ""
    model_files: int = 0
    model_ok: bool | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    # library: [the contract's version, the job's]
    version_diffs: dict[str, list[str]] = Field(default_factory=dict)
    engine_sha256: str = ""
    engine_modules: int = 0
    engine_compared: bool = False
    engine_changed: list[str] = Field(default_factory=list)
    engine_unknown: list[str] = Field(default_factory=list)
    device: dict[str, str | int] = Field(default_factory=dict)
    host: str = ""
    run: int = 0


class Progress(Shape):
    check_ids = ("dispatch.progress",)
    job_state: str
    stage: str
    reason: str
    optimizer_steps: int
    last_step: int
    total_steps: int
    resumed_from: list[int]


class LossCurve(Shape):
    check_ids = ("dispatch.loss_curve",)
    figure = "training_curves"
    step: list[int]
    loss: list[float]
    lr: list[float]
    grad_norm: list[float]
    loss_first: float | None = None
    loss_last: float | None = None


class DevMetric(Shape):
    check_ids = ("dispatch.dev_metric",)
    figure = "training_curves"
    metric: str
    step: list[int]
    value: list[float]
    train_reference_value: list[float] = Field(default_factory=list)
    trivial_value: float | None = None
    final_value: float | None = None
    beats_trivial: bool | None = None
    final_pred_distribution: dict[str, int] = Field(default_factory=dict)
    # dev rows the evaluations cover and the dev split's rows (fewer under the contract's eval_rows),
    # and whether the job had ended (only then is the last value "at the end"); absent in older records
    rows: int | None = None
    dev_rows: int | None = None
    ended: bool | None = None


class Alarm(Shape):
    """One in-run alarm (engine/training/alarms.py): its state, what it compared, and at which step."""

    check_ids = ("dispatch.alarms.*",)
    state: str
    detail: str
    step: int
    # The figure the alarm compared, per alarm.
    gap: float | None = None
    max_beats_without_step: int | None = None
    # stall: the longest stretch without a step (s), the limit it was held to (s), the median step (s)
    longest_without_step_s: float | None = None
    stall_limit_s: float | None = None
    median_step_s: float | None = None


class Checkpoints(Shape):
    check_ids = ("dispatch.checkpoints",)
    steps: list[int]
    incomplete: list[int]
    every_steps: int
    files: list[str]
