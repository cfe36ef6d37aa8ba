"""A Hugging Face model card's metadata from a session: `ModelCardData` with `EvalResult`s taken from
the frozen locked-test comparison (huggingface_hub, which comes with transformers), and the
`model-index` YAML block the report writes beside report.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import training as training_shapes
from claimcheck.engine.stats import registry
from claimcheck.engine.textsafe import visible

HF_TASKS = {
    "text_classification": ("text-classification", "Text Classification"),
    "causal_lm_sft": ("text-generation", "Text Generation"),
    "tabular": ("tabular-classification", "Tabular Classification"),
    "retrieval": ("sentence-similarity", "Sentence Similarity"),
}


def _source_revision(records: dict[str, StageRecord]) -> str:
    src = records.get("source")
    sums = parse(src.check("source.checksum"), data_shapes.Checksum) if src else None
    return sums.files[0].sha256 if sums and sums.files else ""


def _model_identity(records: dict[str, StageRecord]) -> tuple[str, str]:
    """(base model, revision) from the contract's effective settings: path or hub id, pinned revision."""
    con = records.get("contract")
    eff = parse(con.check("contract.effective"), training_shapes.Effective) if con else None
    if eff is None:
        return "", ""
    e = eff.effective
    model = str(e.get("model_path", ""))
    if model.startswith("package:"):
        model = model.removeprefix("package:")
    revision = str(e.get("hub_revision", "") or e.get("model_sha256", ""))
    return model, revision


def model_card_data(session: Session) -> Any:
    """A Hugging Face `ModelCardData` whose eval results are the frozen locked-test comparison.

    Results are included only when the artifact stage is frozen and not stale; otherwise the card has
    no results (never a number that is not established).
    """
    from huggingface_hub import EvalResult, ModelCardData

    records, states = session.records(), session.states()
    claim = records.get("claim")
    ci = claim.inputs if claim else {}
    base, revision = _model_identity(records)
    tuned = "fine-tuned" if ci.get("fine_tuning", True) else "unchanged"
    name = f"{Path(base).name or base} {tuned} (claimcheck session {session.meta.id})" if base else ""
    results = []
    artifact = records.get("artifact")
    comp = parse(artifact.check("artifact.comparison"), artifact_shapes.Comparison) if artifact else None
    if comp is not None and states.get("artifact") == "frozen" and "candidate" in comp.values:
        entry = registry.by_key(comp.metric)
        hf_type, args = entry.hf_name if entry and entry.hf_name[0] else (comp.metric, {})
        weighted = str(ci.get("metric_weighting") or "") == "sample_weight"
        if weighted:  # the value is the metric with the source's weight column as sample_weight
            src_inputs = records["source"].inputs if "source" in records else {}
            args = {**args, "sample_weight": str(src_inputs.get("weight_column", ""))}
        task_type, task_name = HF_TASKS.get(str(ci.get("task_kind", "")), ("other", "Other"))
        source = records.get("source")
        files = source.inputs.get("files", []) if source else []
        ds_name = Path(str(files[0])).stem if files else "unknown"
        results.append(
            EvalResult(
                task_type=task_type,
                task_name=task_name,
                dataset_type=ds_name,
                dataset_name=ds_name,
                dataset_split="test",
                dataset_revision=_source_revision(records) or "unknown",
                metric_type=hf_type,
                metric_value=float(comp.values["candidate"]),
                metric_name=f"{comp.metric}{' (weighted)' if weighted else ''} on the locked test",
                metric_args=dict(args) or None,
            )
        )
    return ModelCardData(
        model_name=name or f"claimcheck session {session.meta.id}",
        base_model=base or None,
        eval_results=results or None,
        base_model_revision=revision or None,
    )


def model_index(session: Session) -> dict[str, Any]:
    """The `model-index` block (and base model) of the card data, as a plain dict."""
    data = model_card_data(session).to_dict()
    data.setdefault("model-index", [{"name": data.get("model_name", ""), "results": []}])
    return data


def model_index_yaml(session: Session) -> str:
    import yaml  # pyyaml comes with transformers; loaded only when the report is written

    block = _visible_strings(model_index(session))
    head = "# model-index block for a Hugging Face model card, written by claimcheck from frozen records.\n"
    if not block["model-index"][0].get("results"):
        head += "# No results: the artifact stage's locked-test evaluation is not frozen in this session.\n"
    return head + yaml.safe_dump(block, sort_keys=False, allow_unicode=True)


def _visible_strings(value: Any) -> Any:
    """Every string (keys too) with hidden characters made visible: the YAML is read by people."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {_visible_strings(k): _visible_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_visible_strings(v) for v in value]
    return value
