"""The claim stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from claimcheck.engine.stats import registry

TRIVIAL = "trivial_baseline"
BASE_MODEL = "base_model"
# The frozen base encoder with a logistic-regression head fitted on train (a linear probe).
FROZEN_PROBE = "frozen_probe"
# The arms the artifact stage scores on the locked test beside the candidate: exactly the claim's.
# BM25 over the same corpus: the conventional comparator of a retrieval claim (engine/retrieval).
BM25 = "bm25"
KNOWN_COMPARATORS = (TRIVIAL, "best_baseline", BASE_MODEL, FROZEN_PROBE, BM25)
# The comparators a retrieval claim may name: a random ranking (trivial_baseline) and BM25.
RETRIEVAL_COMPARATORS = (TRIVIAL, BM25)
# The cut-off of recall@k / nDCG@k when the claim states none.
DEFAULT_RANKING_K = 10


class SuccessCriterion(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    metric: str = Field(
        default="",
        description="The metric the success criterion is stated in.",
        json_schema_extra={"suggestions": registry.claimable()},
    )
    op: Literal[">=", ">", "<=", "<"] = Field(
        default=">=", description="How the metric compares to the value."
    )
    value: float = Field(
        default=0.0,
        ge=-1e12,
        le=1e12,
        description="The threshold (or margin, when relative to a comparator).",
    )
    # "absolute": metric op value. A comparator name: metric - comparator's metric op value.
    relative_to: str = Field(
        default="absolute",
        description="'absolute' (metric op value), or a comparator: metric minus its metric op value.",
        examples=["trivial_baseline"],
    )


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    task_kind: Literal["text_classification", "causal_lm_sft", "tabular", "retrieval"] = Field(
        default="text_classification", description="The kind of model the claim is about."
    )
    # What the target is: classes ("categorical") or a number ("numeric", a regression). Empty: derived
    # (claimcheck.engine.stats.registry.target_type): categorical, except a tabular claim with a regression metric.
    # "ordinal": ordered classes, class_order being the order (lowest first); metrics
    # quadratic_weighted_kappa and mae_rank beside the categorical ones, trivial baseline the median class.
    # "multi_label": a set of labels per row (class_order lists the labels; the source stage's
    # label_format says how the column holds them).
    target_type: Literal["categorical", "numeric", "", "ordinal", "multi_label"] = Field(
        default="",
        description=(
            "Classes (categorical), ordered classes (ordinal: class_order lowest first), a number "
            "(numeric: a regression) or a set of labels per row (multi_label); empty = derived from "
            "the task and metric."
        ),
    )
    prediction_unit: str = Field(
        default="",
        description="One thing the model predicts for, and when.",
        examples=["one ticket at triage"],
    )
    target_meaning: str = Field(
        default="", description="What the label means in the world.", examples=["the queue it was routed to"]
    )
    target_kind: Literal["recorded_workflow_label", "real_world_decision", "measured_quantity", ""] = Field(
        default="",
        description=(
            "Is the label what a workflow recorded, the decision that was right, or a measured "
            "quantity (a number recorded by measurement or accounting)?"
        ),
    )
    inference_inputs: list[str] = Field(
        default_factory=list,
        description="What the model may see at prediction time (comma-separated).",
        examples=["subject, body, channel"],
    )
    population: str = Field(
        default="", description="Who or what the claim covers.", examples=["tickets from all channels"]
    )
    primary_metric: str = Field(
        default="",
        description="The one metric the claim is judged on.",
        json_schema_extra={"suggestions": registry.claimable()},
    )
    metric_averaging: str = Field(
        default="", description="How per-class scores are averaged (macro, weighted, …).", examples=["macro"]
    )
    # "sample_weight": the primary metric and its paired intervals are computed with the source's
    # weight column (scikit-learn's sample_weight; every bootstrap resample weighted the same way).
    # The source stage refuses it when no weight column is declared.
    metric_weighting: Literal["unweighted", "sample_weight"] = Field(
        default="unweighted",
        description="unweighted, or sample_weight: metrics and intervals weighted by the source's weight column.",
    )
    # The cut-off of recall@k and nDCG@k of a retrieval claim (read by no other task kind).
    ranking_k: int = Field(
        default=DEFAULT_RANKING_K,
        ge=1,
        le=1000,
        description="Retrieval: how many top-ranked documents recall@k and nDCG@k read.",
    )
    positive_class: str = Field(
        default="",
        description="The positive class of a binary AUROC / AUPRC claim (one of class_order); empty otherwise.",
        examples=["security"],
    )
    class_order: list[str] = Field(
        default_factory=list,
        description="The label values, in the order reports show them (comma-separated).",
        examples=["billing, technical, security"],
    )
    success: SuccessCriterion = Field(
        default_factory=SuccessCriterion, description="What result counts as success, stated before any run."
    )
    comparators: list[str] = Field(
        default_factory=list,
        description="What the model must beat (comma-separated).",
        examples=["trivial_baseline, best_baseline, frozen_probe"],
    )
    fine_tuning: StrictBool = Field(default=True, description="Is a fine-tuned model part of the claim?")
    run_scope: str = Field(
        default="", description="How many runs the claim rests on.", examples=["one LoRA fine-tune, no sweep"]
    )
    label_quality_limits: str = Field(
        default="", description="What is known to be wrong with the labels.", examples=["never audited"]
    )
    # Where the review of earlier sessions looked, relative to the workspace.
    review_scope: list[str] = Field(
        default_factory=lambda: ["runs"],
        description="Where earlier sessions were looked for, relative to the workspace (comma-separated).",
        examples=["runs"],
    )

    @field_validator("class_order")
    @classmethod
    def _distinct_classes(cls, value: list[str]) -> list[str]:
        import unicodedata

        from claimcheck.engine.stats.names import code_points

        seen: dict[str, str] = {}
        for label in value:
            key = unicodedata.normalize("NFC", label)
            if key in seen:
                if seen[key] == label:
                    raise ValueError(f"names the class '{label}' twice; list each class once")
                raise ValueError(
                    f"names one class in two Unicode spellings ({code_points(seen[key])} and "
                    f"{code_points(label)}); keep the NFC one ({code_points(key)}) and map the other to "
                    "it in the source stage's label_mapping"
                )
            seen[key] = label
        return value

    @model_validator(mode="after")
    def _judgeable(self) -> Inputs:
        """Refuse up front what the artifact stage could not judge: a metric the registry does not
        compute for this task kind and target, a criterion relative to an arm the claim does not
        list, a comparator no stage scores."""
        claim = self.model_dump()
        for field, metric in (
            ("primary_metric", self.primary_metric),
            ("success.metric", self.success.metric),
        ):
            why = registry.refusal(claim, metric) if metric else ""
            if why:
                raise ValueError(f"{field}: {why}")
        if registry.is_ordinal(claim) and (
            self.task_kind == "causal_lm_sft" or 0 < len(self.class_order) < 3
        ):
            raise ValueError(
                "target_type: 'ordinal' orders the classes of a classification claim: list at least three "
                "classes in class_order, lowest first"
                + (
                    " (a causal_lm_sft claim's target is generated text)"
                    if self.task_kind == "causal_lm_sft"
                    else ""
                )
            )
        _retrieval_problem(self)
        unknown = [c for c in self.comparators if c not in KNOWN_COMPARATORS]
        if unknown:
            raise ValueError(
                f"comparators: {', '.join(unknown)} is not an arm the artifact stage scores; "
                f"choose from {', '.join(KNOWN_COMPARATORS)}"
            )
        if BASE_MODEL in self.comparators and not self.fine_tuning:
            raise ValueError(
                "comparators: base_model is the unchanged model a fine-tune starts from; a claim with "
                "fine_tuning = false has none: remove it"
            )
        if FROZEN_PROBE in self.comparators and (
            self.task_kind != "text_classification" or not self.fine_tuning
        ):
            raise ValueError(
                "comparators: frozen_probe (the frozen base encoder with a linear head fitted on train) "
                "is a comparator of a fine-tuned text classifier; "
                + (
                    "for causal-LM SFT the unchanged base model under the same prompt and decoding "
                    "contract already answers what fine-tuning added: use base_model"
                    if self.task_kind == "causal_lm_sft"
                    else "this claim has no fine-tuned encoder: remove it"
                )
            )
        if self.target_type == "multi_label":
            _multi_label_claim(self)
        rel = self.success.relative_to
        if rel != "absolute" and rel not in self.comparators:
            raise ValueError(
                f"success.relative_to: '{rel}' is not one of the claim's comparators "
                f"({', '.join(self.comparators) or 'none listed'}); list it or choose one of them"
            )
        return self


def _multi_label_claim(claim: Inputs) -> None:
    """What a multi-label claim can be judged on: scikit-learn one-vs-rest learners (task_kind
    tabular, no fine-tuning), or a fine-tuned text encoder with a sigmoid head per label (task_kind
    text_classification, fine_tuning = true) against the trivial and best baselines."""
    tuned = claim.task_kind == "text_classification" and claim.fine_tuning
    if not tuned and claim.task_kind != "tabular":
        raise ValueError(
            "target_type: a multi-label claim is judged with scikit-learn one-vs-rest learners (task_kind "
            '"tabular", text columns read through TF-IDF) or a fine-tuned encoder with a sigmoid head '
            '(task_kind "text_classification", fine_tuning = true): choose one of them'
        )
    if claim.task_kind == "tabular" and claim.fine_tuning:
        raise ValueError(
            "fine_tuning: a tabular multi-label claim is judged with scikit-learn learners (one-vs-rest "
            'logistic regression); for a fine-tuned sigmoid / BCE head set task_kind = "text_classification", '
            "else set fine_tuning = false"
        )
    other = [c for c in claim.comparators if c in (BASE_MODEL, FROZEN_PROBE)]
    if tuned and other:
        raise ValueError(
            f"comparators: {', '.join(other)} is not an arm of a multi-label claim (an unchanged encoder "
            "needs a head per label fitted first, which claimcheck does not build); compare with "
            "trivial_baseline and best_baseline"
        )
    if claim.positive_class:
        raise ValueError("positive_class: a multi-label claim has no single positive class; leave it empty")


def _retrieval_problem(inp: Inputs) -> None:
    """A retrieval claim's own refusals: only the arms it scores; BM25 and ranking_k belong to
    retrieval claims only."""
    if inp.task_kind != "retrieval":
        if BM25 in inp.comparators:
            raise ValueError("comparators: bm25 is a comparator of a retrieval claim; remove it")
        if inp.ranking_k != DEFAULT_RANKING_K:
            raise ValueError("ranking_k: read by a retrieval claim only; leave it at its default")
        return
    # fine_tuning = true: the candidate is the contrastive LoRA fine-tune of the encoder, and the
    # unchanged encoder is the base_model arm; fine_tuning = false: the candidate is the unchanged encoder.
    allowed = (*RETRIEVAL_COMPARATORS, BASE_MODEL) if inp.fine_tuning else RETRIEVAL_COMPARATORS
    other = [c for c in inp.comparators if c not in allowed]
    if other:
        raise ValueError(
            f"comparators: {', '.join(other)} is not an arm of a retrieval claim"
            + (" without fine-tuning" if BASE_MODEL in other else "")
            + f"; choose from {', '.join(allowed)}"
        )


REQUIRED_TEXT = (
    "prediction_unit",
    "target_meaning",
    "target_kind",
    "population",
    "primary_metric",
    "run_scope",
)


def missing_fields(inp: Inputs) -> list[str]:
    """The claim fields left open, as claim.completeness counts them (the form shows the same list)."""
    missing = [f for f in REQUIRED_TEXT if not str(getattr(inp, f)).strip()]
    if not inp.inference_inputs:
        missing.append("inference_inputs")
    categorical = registry.target_type(inp.model_dump()) in ("categorical", "multi_label")
    if (
        inp.task_kind == "text_classification"
        and not registry.lower_is_better(inp.primary_metric)
        and not inp.metric_averaging
    ):
        missing.append("metric_averaging")
    # Class order is asked of categorical targets only: a numeric target has no classes.
    if inp.task_kind != "causal_lm_sft" and categorical and not inp.class_order:
        missing.append("class_order")
    return missing
