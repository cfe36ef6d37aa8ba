"""Sample weights: the source's weight column, checked once, carried through every later stage.

The source stage declares `weight_column`; its values must be numbers, finite and non-negative on
every row kept (a row that is not is refused, named by file and line, before any record is written);
zero-weight rows are kept and counted. The rows later stages read (engine/data/splits.py `rows`)
carry the column, so weights survive filters and splits by construction; `split.weight_mass` recounts
the mass per split. Duplicated rows are never collapsed into weights, nor weights expanded into rows.

The claim's `metric_weighting = "sample_weight"` makes the artifact comparison compute its metric and
paired intervals with these weights (engine/stats/registry.py, `weightable` metrics); scikit-learn
learners get them as `sample_weight` in fit whenever a weight column is declared, and a fine-tuned
text classifier's training job a weighted loss (the contract's loss_weighting, engine/training/loss.py).

Playbook: "Preserve option order, soft targets, weights, ties and ordinal semantics when present."
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.context import StageInputError

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

PB_WEIGHTS = "Preserve option order, soft targets, weights, ties and ordinal semantics when present."
SAMPLE_WEIGHT = "sample_weight"
# The rows a refusal names at most.
NAMED_ROWS = 5


def column(source_inputs: dict[str, Any]) -> str:
    """The declared weight column ("" when none)."""
    return str(source_inputs.get("weight_column") or "")


def claimed(upstream: dict[str, StageRecord]) -> bool:
    """The claim asks for metrics computed with the sample weights."""
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    return str(claim.get("metric_weighting") or "") == SAMPLE_WEIGHT


def of(frame: pl.DataFrame, source_inputs: dict[str, Any]) -> np.ndarray | None:
    """The rows' weights as float64 (None without a weight column); validated by the source stage."""
    name = column(source_inputs)
    if not name:
        return None
    return frame.get_column(name).cast(float).to_numpy().astype("float64")


def for_metrics(frame: pl.DataFrame, upstream: dict[str, StageRecord]) -> np.ndarray | None:
    """The rows' weights when the claim's metrics are weighted, else None."""
    if not claimed(upstream):
        return None
    return of(frame, upstream["source"].inputs)


def refuse_unweightable(source_inputs: dict[str, Any], claim: dict[str, Any]) -> None:
    """Refuse what no later stage would honour: weighted metrics without a weight column, and a
    weight column on a claim whose training job has no weighted loss (causal-LM SFT: its token loss
    and dev-loss metric are unweighted)."""
    fine_tuned = claim.get("task_kind") == "causal_lm_sft" or claim.get("fine_tuning", True) is not False
    if column(source_inputs) and fine_tuned and claim.get("task_kind") != "text_classification":
        raise StageInputError(
            f"source input 'weight_column' ('{column(source_inputs)}'): sample weights are honoured for "
            "scikit-learn learners (fine_tuning = false) and for a fine-tuned text classifier, whose "
            "training job's loss is the weighted cross-entropy; a fine-tuned "
            f"{claim.get('task_kind') or 'text_classification'} job's loss is unweighted (an SFT job's "
            "token loss and dev-loss metric are not weighted): leave 'weight_column' empty"
            + ("" if claim.get("task_kind") == "causal_lm_sft" else " or set fine_tuning = false")
        )
    kind = "a retrieval" if claim.get("task_kind") == "retrieval" else "a multi-label"
    if column(source_inputs) and (
        claim.get("task_kind") == "retrieval" or str(claim.get("target_type") or "") == "multi_label"
    ):
        raise StageInputError(
            f"source input 'weight_column' ('{column(source_inputs)}'): sample weights are not honoured "
            f"for {kind} claim (its learners and metrics are unweighted); leave 'weight_column' empty"
        )
    if str(claim.get("metric_weighting") or "") == SAMPLE_WEIGHT and not column(source_inputs):
        raise StageInputError(
            "the claim says metric_weighting = 'sample_weight' but the source declares no "
            "'weight_column'; name the column holding the weights, or set the claim's "
            "metric_weighting to 'unweighted'"
        )


def validate(dataset: pl.DataFrame, name: str) -> None:
    """Refuse a weight column that is not numeric, or a row whose weight is null, NaN, infinite or
    negative, naming the rows by file and line."""
    import polars as pl

    from claimcheck.engine.data.rows import SOURCE_FILE, SOURCE_LINE

    dtype = dataset.schema[name]
    if not dtype.is_numeric():
        raise StageInputError(
            f"source input 'weight_column': column '{name}' holds {dtype} values, not numbers; "
            "sample weights are non-negative finite numbers"
        )
    w = pl.col(name).cast(pl.Float64)
    bad = dataset.filter(w.is_null() | w.is_nan() | w.is_infinite() | (w < 0))
    if bad.height:
        where = ", ".join(
            f"{f} line {ln} ({v})"
            for f, ln, v in bad.select(SOURCE_FILE, SOURCE_LINE, name).head(NAMED_ROWS).iter_rows()
        )
        raise StageInputError(
            f"source input 'weight_column': {bad.height} row(s) of '{name}' are not non-negative finite "
            f"numbers (null, NaN, infinite or negative): {where}; fix them, or filter those rows out "
            "with a recorded filter"
        )


def _summary(w: np.ndarray) -> dict[str, Any]:
    return {
        "rows": int(len(w)),
        "zero_weight_rows": int((w == 0).sum()),
        "total_mass": float(w.sum()),
        "min": float(w.min()) if len(w) else 0.0,
        "max": float(w.max()) if len(w) else 0.0,
    }


def on_duplicates(check: Check, name: str) -> Check:
    """source.duplicate_inputs with a weight column: the record says duplicates stay rows."""
    if check.id != "source.duplicate_inputs":
        return check
    said = (
        f"; with weight column '{name}': duplicated rows stay rows, never collapsed into weights "
        "(nor weights expanded into rows)"
    )
    return check.model_copy(update={"summary": check.summary + said})


def sample_weights_check(dataset: pl.DataFrame, name: str, claim: dict[str, Any], cov: str) -> Check:
    """source.sample_weights: what the weight column holds on the rows kept."""
    from claimcheck.engine.shapes.data import SampleWeights

    w = of(dataset, {"weight_column": name})
    assert w is not None
    s = _summary(w)
    status = "pass" if s["total_mass"] > 0 else "fail"
    weighted = str(claim.get("metric_weighting") or "") == SAMPLE_WEIGHT
    return Check(
        id="source.sample_weights",
        status=status,
        summary=(
            f"weight column '{name}': {s['rows']} rows, total mass {s['total_mass']:.6g}, "
            f"min {s['min']:.6g}, max {s['max']:.6g}, {s['zero_weight_rows']} zero-weight rows (kept, counted); "
            + ("the claim's metrics are weighted" if weighted else "the claim's metrics are unweighted")
            + ("" if status == "pass" else "; every weight is zero: nothing counts")
        ),
        coverage=cov,
        measured=SampleWeights(
            column=name,
            metric_weighting=SAMPLE_WEIGHT if weighted else "unweighted",
            duplicates="kept as rows: never collapsed into weights, nor weights expanded into rows",
            **s,
        ),
        why="Weights say how much each row counts; every later stage must carry them, not drop them.",
        playbook=PB_WEIGHTS,
    )


def weight_mass_check(joined: pl.DataFrame, name: str) -> Check:
    """split.weight_mass: the weight mass each split holds (recounted from the assigned rows)."""
    import polars as pl

    from claimcheck.engine.data.splits import SPLIT, SPLITS
    from claimcheck.engine.shapes.data import SplitWeightMass, WeightPart

    w = pl.col(name).cast(pl.Float64)
    # Each split's weights summed in ascending order, and the total in split order: float sums that
    # do not follow the rows' order (the bounded and in-memory joins order the rows differently).
    per = {
        r[SPLIT]: r
        for r in joined.select(SPLIT, name)
        .group_by(SPLIT)
        .agg(
            pl.len().alias("rows"),
            w.sort().sum().alias("mass"),
            (w == 0).sum().alias("zero"),
            w.min().alias("min"),
            w.max().alias("max"),
        )
        .iter_rows(named=True)
    }
    total = float(sum(per[s]["mass"] for s in SPLITS if s in per))
    parts = {
        s: WeightPart(
            rows=int(r["rows"]),
            total_mass=float(r["mass"]),
            mass_share=float(r["mass"] / total) if total > 0 else 0.0,
            zero_weight_rows=int(r["zero"]),
            min=float(r["min"]),
            max=float(r["max"]),
        )
        for s in SPLITS
        if (r := per.get(s)) is not None
    }
    empty = [s for s in ("train", "test") if s in parts and parts[s].total_mass <= 0]
    return Check(
        id="split.weight_mass",
        status="fail" if empty else "pass",
        summary=", ".join(
            f"{s} {p.total_mass:.6g} ({p.mass_share:.1%}, {p.rows} rows)" for s, p in parts.items()
        )
        + (f"; {', '.join(empty)} hold(s) no weight mass" if empty else ""),
        coverage="every assigned row",
        measured=SplitWeightMass(column=name, total_mass=total, splits=parts),
        why="Each split's share of the weight mass, beside its share of rows: a split can hold many rows "
        "that count for little.",
        playbook=PB_WEIGHTS,
    )
