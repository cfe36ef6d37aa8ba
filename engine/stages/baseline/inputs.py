"""The baseline stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class OperatingPoint(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # "none": no action threshold is chosen; decisions stay arg-max and the check says so.
    constraint: Literal["none", "min_precision", "min_recall", "cost"] = Field(
        default="none", description="How a decision threshold is chosen ('none': arg-max decisions)."
    )
    positive_class: str = Field(default="", description="The class the threshold is for.")
    target: float = Field(
        default=0.9, ge=0, le=1, description="The precision or recall the threshold must reach."
    )
    cost_fp: float = Field(
        default=1.0, ge=0, le=1e9, description="Cost of a false positive (constraint 'cost')."
    )
    cost_fn: float = Field(
        default=1.0, ge=0, le=1e9, description="Cost of a false negative (constraint 'cost')."
    )


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # Empty: the defaults for the claim's task kind (text: most_frequent, prior, tfidf_logreg).
    learners: list[str] = Field(
        default_factory=list,
        description="Baseline learners, comma-separated (empty: the defaults for the task kind).",
    )
    max_features: int = Field(default=50_000, ge=1, le=10_000_000, description="Largest TF-IDF vocabulary.")
    ngram_max: int = Field(default=2, ge=1, le=3, description="Longest word n-gram in the TF-IDF features.")
    min_df: int = Field(default=2, ge=1, le=10**9, description="Fewest documents a term must appear in.")
    C: float = Field(
        default=1.0, gt=0, le=1e6, description="Inverse regularisation strength of the logistic regression."
    )
    # When given, C is selected on dev (or inside the training folds, nested, for K-fold).
    C_grid: list[Annotated[float, Field(gt=0, le=1e6)]] = Field(
        default_factory=list,
        max_length=50,
        description="C values to select from on dev (nested in the folds for K-fold), comma-separated; empty = C.",
    )
    max_iter: int = Field(default=300, ge=1, le=1_000_000, description="Most solver iterations.")
    seed: int = Field(default=0, strict=True, ge=0, le=2**32 - 1, description="Seed of the learners.")
    bootstrap_resamples: int = Field(
        default=1000, ge=100, le=100_000, description="Bootstrap resamples of each interval."
    )
    bootstrap_seed: int = Field(
        default=0, strict=True, ge=0, le=2**32 - 1, description="Seed of the bootstrap."
    )
    unit: Literal["auto", "family", "row"] = Field(
        default="auto",
        description="The independent unit resampled for intervals ('auto', 'family': the families the split kept together).",
    )
    ece_bins: int = Field(default=15, ge=2, le=1000, description="Bins of the expected calibration error.")
    calibration: Literal["temperature", "platt", "isotonic", "none"] = Field(
        default="temperature", description="How probabilities are calibrated on dev."
    )
    operating_point: OperatingPoint = Field(
        default_factory=OperatingPoint, description="The decision threshold, when the claim needs one."
    )
    cv: Literal["auto", "on", "off"] = Field(
        default="auto",
        description="K-fold instead of train/dev ('auto': when train is small or dev is empty, "
        "and the train/dev holdout when the folds cannot be made).",
    )
    cv_folds: int = Field(default=5, ge=2, le=50, description="Folds of the K-fold.")
    # cv="auto" switches to K-fold when train has fewer rows than this (or dev is empty).
    cv_below_rows: int = Field(
        default=2000,
        ge=0,
        le=10**9,
        description="With cv 'auto': K-fold when train has fewer rows than this.",
    )
    trivial_reference: str = Field(
        default="most_frequent", description="The learner the trivial baseline is."
    )
    # HistGradientBoosting boosting rounds (no early stopping, so runs are reproducible).
    hgb_max_iter: int = Field(
        default=100,
        ge=1,
        le=10_000,
        description="Boosting rounds of HistGradientBoosting (no early stopping: reproducible).",
    )
