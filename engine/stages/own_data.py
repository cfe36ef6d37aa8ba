"""A session on the person's own data file: the recipe suggested for the task and the machine, and
the stage inputs it starts from — the recipe without its sample-specific values, and the columns
the person picked from the file.

Rules (each suggestion says which one applied, in `Suggestion.reason`):
- the label column is numeric with more than `NUMERIC_DISTINCT` distinct values in the rows read:
  a regression on the tabular recipe, judged in the registry's default numeric metric;
- otherwise classes: with free-text input columns, the text-classification recipe (QLoRA when a GPU
  is visible, plain LoRA on a CPU with its step budget, batch and input length sized to the file's rows
  and the cores so that the job finishes within a stated time: engine/stages/own_sizing.py); without
  text, the tabular one.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from claimcheck.engine.data.peek import DataPeek
from claimcheck.engine.stages.own_sizing import Machine, Sizing, size_cpu
from claimcheck.engine.stats import registry as metrics

# A numeric label with at most this many distinct values (in the rows read) is taken as classes.
NUMERIC_DISTINCT = 20
TEXT_GPU_RECIPE = "text-classification-qlora"
TEXT_CPU_RECIPE = "text-classification-lora"
TABULAR_RECIPE = "tabular-sklearn"

# Recipe values that describe the recipe's sample data (support tickets), not the person's file: a
# session on the person's own data starts with them empty (the columns come from the picker).
SAMPLE_SPECIFIC: dict[str, tuple[str, ...]] = {
    "claim": (
        "prediction_unit",
        "target_meaning",
        "target_kind",
        "inference_inputs",
        "population",
        "class_order",
        "positive_class",
        "label_quality_limits",
    ),
    "source": (
        "files",
        "label_column",
        "label_mapping",
        "input_columns",
        "text_columns",
        "id_column",
        "entity_columns",
        "time_column",
        "weight_column",
        "unavailable_columns",
        "sensitive_columns",
        "availability",
        "filters",
        "license",
        "provenance",
        "as_of",
    ),
    "split": ("rationale",),
    # the recipe's learners are the sample's task's; empty = the defaults for the claim's task kind
    "baseline": ("learners",),
}


# Form fields whose model example (shown as the field's placeholder) is drawn from the sample's
# support tickets; a session on the person's own file shows `own_examples` in their place.
SAMPLE_EXAMPLES: dict[str, tuple[str, ...]] = {
    "claim": (
        "prediction_unit",
        "target_meaning",
        "inference_inputs",
        "population",
        "positive_class",
        "class_order",
    ),
}
FEW_EXAMPLES = 3  # label values / column names an example lists


def on_own_data(files: list[str]) -> bool:
    """Whether a source reads the person's own files (none of them the sample data)."""
    from pathlib import PurePath

    from claimcheck.engine.pipeline.examples import SAMPLE_FOLDER

    return bool(files) and not any(PurePath(f).parts[:1] == (SAMPLE_FOLDER,) for f in files)


def own_examples(stage: str, source: dict[str, Any], peek: DataPeek | None) -> dict[str, str]:
    """The placeholders of a stage form on the person's own file, by field: drawn from the file (a few
    of the label's values, the picked input columns) or neutral; {} for a session on the sample data."""
    fields = SAMPLE_EXAMPLES.get(stage, ())
    files = [str(f) for f in source.get("files") or []]
    if not fields or not on_own_data(files):
        return {}
    label = str(source.get("label_column") or "")
    inputs = [str(c) for c in source.get("input_columns") or []][:FEW_EXAMPLES]
    column = peek.column(label) if peek is not None and label else None
    classes = column.values[:FEW_EXAMPLES] if column is not None else []
    what = f"'{label}'" if label else "the label column"
    found = {
        "prediction_unit": f"one row of {files[0]}, at the time it is predicted",
        "target_meaning": f"what {what} records",
        "inference_inputs": ", ".join(inputs) or "the input columns",
        "population": f"the rows {files[0]} stands for",
        "positive_class": classes[0] if classes else "one of the label's values",
        "class_order": ", ".join(classes) or "the label's values, in report order",
    }
    return {f: f"e.g. {found[f]}" for f in fields}


class ColumnChoice(BaseModel):
    """The columns a person picked from their file (each one of the file's own columns)."""

    model_config = ConfigDict(extra="forbid")
    file: str
    label: str
    inputs: list[str] = Field(default_factory=list)
    text: list[str] = Field(default_factory=list)  # a subset of `inputs`
    id: str = ""
    entities: list[str] = Field(default_factory=list)
    time: str = ""
    weight: str = ""  # per-row sample weights (source.weight_column)

    def problem(self, peek: DataPeek) -> str:
        """What is wrong with the choice against the file's columns ("" when nothing is)."""
        have = set(peek.names())
        if not self.label:
            return "pick the label column (the target)"
        named = {"label": [self.label], "inputs": self.inputs, "text": self.text, "id": [self.id]}
        named |= {"entities": self.entities, "time": [self.time], "weight": [self.weight]}
        for role, cols in named.items():
            stray = [c for c in cols if c and c not in have]
            if stray:
                return f"{role}: {stray} not in {peek.file}"
        if (
            self.label in self.inputs
            or self.label in (self.id, self.time, self.weight)
            or self.label in self.entities
        ):
            return f"the label column '{self.label}' is also picked as an input, id, entity, time or weight"
        if self.weight and self.weight in self.inputs:
            return f"the weight column '{self.weight}' is also picked as an input (weights are never read by the model)"
        if not self.inputs:
            return "pick at least one input column (what the model reads)"
        if any(t not in self.inputs for t in self.text):
            return "a text column must also be an input column"
        return ""


class Suggestion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    recipe: str
    task_kind: str
    target_type: str  # categorical | numeric
    metric: str
    reason: str
    sizing: Sizing | None = None  # the contract sized for this machine (the CPU text recipe)


def suggest(peek: DataPeek, choice: ColumnChoice, machine: Machine) -> Suggestion:
    """The recipe for the picked label and text columns on this machine."""
    label = peek.column(choice.label)
    if label is not None and label.kind == "number" and label.distinct > NUMERIC_DISTINCT:
        metric = metrics.DEFAULTS["numeric"]
        why = (
            f"label '{choice.label}' is numeric ({label.dtype}, {label.distinct} distinct values in the "
            f"first {peek.rows_read} rows): a regression, judged in {metric}; scikit-learn baselines, "
            "no GPU needed"
        )
        return Suggestion(
            recipe=TABULAR_RECIPE, task_kind="tabular", target_type="numeric", metric=metric, reason=why
        )
    metric = metrics.DEFAULTS["categorical"]
    kind = "numeric with few values" if label is not None and label.kind == "number" else "classes"
    if not choice.text:
        why = f"label '{choice.label}' holds {kind} and no input is free text: tabular classification"
        return Suggestion(
            recipe=TABULAR_RECIPE, task_kind="tabular", target_type="categorical", metric=metric, reason=why
        )
    sizing = None
    if machine.cuda:
        recipe = TEXT_GPU_RECIPE
        hw = f"a GPU is visible ({machine.gpu or 'CUDA'}): QLoRA (4-bit base + LoRA) with the recipe's budget"
    else:
        recipe = TEXT_CPU_RECIPE
        sizing = size_cpu(peek.rows or peek.rows_read, machine)
        hw = f"no GPU found ({machine.words()}, {peek.rows or peek.rows_read} rows): plain LoRA {sizing.line()}"
    why = f"label '{choice.label}' holds {kind} and {', '.join(choice.text)} is free text: text classification; {hw}"
    return Suggestion(
        recipe=recipe,
        task_kind="text_classification",
        target_type="categorical",
        metric=metric,
        reason=why,
        sizing=sizing,
    )


def reopened(
    recipe: str, claim: dict[str, Any], source: dict[str, Any], peek: DataPeek
) -> tuple[ColumnChoice, Suggestion] | None:
    """The column choice and suggestion of a session on the person's file, read back from its recorded
    claim and source (the app keeps them in memory only): None for a session on the sample data. The
    CPU text recipe is sized again for this machine as it is now."""
    files = [str(f) for f in source.get("files") or []]
    if not on_own_data(files):
        return None
    choice = ColumnChoice(
        file=files[0],
        label=str(source.get("label_column") or ""),
        inputs=list(source.get("input_columns") or []),
        text=list(source.get("text_columns") or []),
        id=str(source.get("id_column") or ""),
        entities=list(source.get("entity_columns") or []),
        time=str(source.get("time_column") or ""),
        weight=str(source.get("weight_column") or ""),
    )
    sizing = size_cpu(peek.rows or peek.rows_read, Machine.cpu()) if recipe == TEXT_CPU_RECIPE else None
    s = Suggestion(
        recipe=recipe,
        task_kind=str(claim.get("task_kind") or "text_classification"),
        target_type=str(claim.get("target_type") or "categorical"),
        metric=str(claim.get("primary_metric") or metrics.DEFAULTS["categorical"]),
        reason="read back from the recorded claim and source",
        sizing=sizing,
    )
    return choice, s


def _success(recipe_claim: dict[str, Any], metric: str) -> dict[str, Any]:
    """The success criterion in the suggested metric: better than the recipe's comparator, in the
    metric's own direction (from the metric registry)."""
    lower = metrics.lower_is_better(metric)
    relative = (recipe_claim.get("success") or {}).get("relative_to", "trivial_baseline")
    return {"metric": metric, "op": "<" if lower else ">", "value": 0.0, "relative_to": relative}


def own_data_recipe(
    recipe: dict[str, dict[str, Any]], choice: ColumnChoice, s: Suggestion
) -> dict[str, dict[str, Any]]:
    """The recipe's stage values for a session on the person's file: sample-specific values dropped,
    the picked columns and the suggested task, target type and metric put in."""
    out = copy.deepcopy(recipe)
    for stage, fields in SAMPLE_SPECIFIC.items():
        for f in fields:
            out.get(stage, {}).pop(f, None)
    source = {"files": [choice.file], "label_column": choice.label, "input_columns": choice.inputs}
    source |= {"text_columns": choice.text, "id_column": choice.id, "entity_columns": choice.entities}
    source |= {"time_column": choice.time, "weight_column": choice.weight}
    out.setdefault("source", {}).update(source)
    claim = out.setdefault("claim", {})
    claim.update(task_kind=s.task_kind, target_type=s.target_type, primary_metric=s.metric)
    claim["inference_inputs"] = list(choice.inputs)
    claim["success"] = _success(claim, s.metric)
    if s.target_type == "numeric":
        claim["metric_averaging"] = ""
    if "contract" in out and "task_kind" in out["contract"]:
        out["contract"]["task_kind"] = s.task_kind
    if s.sizing is not None:
        out.setdefault("contract", {}).update(s.sizing.contract())
    return out


__all__ = [
    "SAMPLE_EXAMPLES",
    "SAMPLE_SPECIFIC",
    "ColumnChoice",
    "Suggestion",
    "on_own_data",
    "own_data_recipe",
    "own_examples",
    "reopened",
    "suggest",
]
