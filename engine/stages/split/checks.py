"""The split stage's checks on the assignment it made: rationale, prevalence, family intersection, chronology, exact and near-duplicate overlap, label coverage, class support and folds."""

from __future__ import annotations

from typing import Any

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import not_applicable, not_run
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.split.inputs import GROUP_STRATEGIES, TIME_STRATEGIES, Inputs

PB_CHOOSE = "Choose time, entity/group or random splitting from the deployment question."
PB_VERIFY = (
    "Verify actual memberships, chronology, group intersections, exact input overlap, representation and plausible "
    "near-duplicate leakage."
)
PB_SEPARATE = "Separate training, development, calibration and locked final testing when applicable."
PB_PREVALENCE = "Preserve natural held-out prevalence unless evaluating an explicitly different population."
PB_SMALL = (
    "For small datasets, consider cross-validation that respects the same groups/time constraints rather than "
    "fragmenting the data into four undersized sets."
)
PB_RARE = "For rare classes, retain per-class support, precision/recall, confusion counts and suitable probability/ranking/operating-point metrics."
PB_NEAR = "Zero exact overlap is not proof of independence from near duplicates, pretraining data or unavailable customer identities."
PB_LEDGER = "Keep a durable ledger: source/checksum, transformation, split membership, model revision, runtime, prepared inputs, configuration, job, checkpoint and comparison."

EXACT_OVERLAP_FAIL = 0.05  # Deepchecks TrainTestSamplesMix: <= 5% of test
PREVALENCE_WARN = 0.05


def rationale(inp: Inputs, upstream: dict[str, StageRecord]) -> Check:
    from claimcheck.engine.pipeline.recipes import template_texts

    claim = upstream.get("claim")
    question = ""
    if claim is not None:
        ci = claim.inputs
        question = "; ".join(str(ci.get(k, "")) for k in ("prediction_unit", "population") if ci.get(k))
    text = inp.rationale.strip()
    # A recipe's template rationale (the sample's "Ticket families …") is no reason given for this data.
    template = bool(text) and text in template_texts("split", "rationale")
    if not text:
        summary = "no rationale: say why this split answers the deployment question"
    elif template:
        summary = (
            "the rationale is a recipe's template text, unchanged: replace it with why this split "
            "answers this claim's deployment question"
        )
    else:
        summary = f"{inp.strategy} split: {text}"
    return Check(
        id="split.rationale",
        status="pass" if text and not template else "fail",
        basis="decided",
        summary=summary,
        measured={
            "strategy": inp.strategy,
            "rationale": text,
            "from_recipe_template": template,
            "claim_deployment": question,
            "seed": inp.seed,
        },
        why="A random split answers 'new rows like these', a group split 'new customers', a time split 'next month'.",
        playbook=PB_CHOOSE,
    )


def prevalence(joined: Any, ds: Any, inp: Inputs) -> Check:

    from claimcheck.engine.data.rows import TARGET

    n = ds.height
    counted = ds.lazy().group_by(TARGET).len().collect(engine="streaming").sort(TARGET)
    whole = {str(k): round(v / n, 6) for k, v in counted.iter_rows()}
    per: dict[str, dict[str, float]] = {}
    sizes: dict[str, int] = {}
    worst = 0.0
    # Streaming counts per (split, class), the splits in the order of their first row.
    cells = joined.lazy().group_by("split", TARGET).len().collect(engine="streaming")
    counts = {(str(s), str(t)): int(c) for s, t, c in cells.iter_rows()}
    for s in split_order(joined):
        sizes[s] = sum(c for (a, _), c in counts.items() if a == s)
        per[s] = {k: round(counts.get((s, k), 0) / sizes[s], 6) for k in whole}
        worst = max(worst, *(abs(per[s][k] - whole[k]) for k in whole))
    drift_expected = inp.strategy in TIME_STRATEGIES
    status = "warn" if worst > PREVALENCE_WARN and not drift_expected else "info"
    return Check(
        id="split.prevalence",
        status=status,
        summary=f"sizes {', '.join(f'{k} {v:,}' for k, v in sizes.items())}; largest class-share difference from the whole "
        f"{worst:.3f}" + (" (time split: drift is part of the question)" if drift_expected else ""),
        measured={
            "sizes": sizes,
            "whole": whole,
            "per_split": per,
            "max_abs_share_difference": round(worst, 6),
        },
        why="Held-out prevalence should be the deployment's, not rebalanced, unless the claim says otherwise.",
        playbook=PB_PREVALENCE,
    )


def split_order(joined: Any) -> list[str]:
    """The splits present in `joined`, in the order of their first row (a streaming aggregation)."""
    import polars as pl

    first = (
        joined.lazy()
        .select("split")
        .with_row_index("i")
        .group_by("split")
        .agg(pl.col("i").min())
        .collect(engine="streaming")
        .sort("i")
    )
    return [str(s) for s in first.get_column("split").to_list()]


def family_intersection(joined: Any, inp: Inputs) -> Check:
    """Families of the split's unit (entity families, or those widened by duplicates) found in more
    than one split."""
    import polars as pl

    from claimcheck.engine.data.rows import FAMILY
    from claimcheck.engine.data.splits import UNIT_KINDS, UNIT_PLURALS

    per_fam = joined.group_by(FAMILY).agg(pl.col("split").n_unique().alias("k"), pl.len().alias("n"))
    crossing = per_fam.filter(pl.col("k") > 1)
    # Per family, whether it has rows in each split: memory by families, not by rows.
    names = sorted(joined.get_column("split").unique().to_list())
    present = per_fam_splits(joined, names)
    pairs = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs[f"{a}-{b}"] = int((present.get_column(a) & present.get_column(b)).sum())
    rows = int(crossing.get_column("n").sum()) if crossing.height else 0
    grouped = inp.strategy in GROUP_STRATEGIES
    status = ("fail" if grouped else "warn") if crossing.height else "pass"
    return Check(
        id="split.family_intersection",
        status=status,
        summary=f"{crossing.height:,} {UNIT_PLURALS[UNIT_KINDS[inp.grouping]]} ({rows:,} rows) span more than one split"
        + (" — a group split must have none" if grouped and crossing.height else ""),
        measured={"families_crossing": crossing.height, "rows_in_crossing_families": rows, "pairs": pairs},
        why="Rows of one customer, thread or case on both sides let a model recognise the entity instead of generalising.",
        playbook=PB_VERIFY,
    )


def per_fam_splits(joined: Any, names: list[str]) -> Any:
    """One row per family of `joined`: a Boolean column per split in `names`, true where the family
    has a row in that split (a streaming aggregation over the distinct (split, family) pairs)."""
    import polars as pl

    from claimcheck.engine.data.rows import FAMILY

    return (
        joined.lazy()
        .select("split", FAMILY)
        .group_by(FAMILY)
        .agg([(pl.col("split") == s).any().alias(s) for s in names])
        .collect(engine="streaming")
    )


def chronology(joined: Any, time: tuple[str, str], inp: Inputs) -> Check:
    """Test rows at or before the latest train time: earlier ones, and ties — one timestamp on both sides."""
    import polars as pl

    from claimcheck.engine.data.rows import format_time, time_expr

    time_col, unit = time
    if not time_col:
        return not_run(
            "split.chronology",
            "no time column: chronology not checked",
            why="Without time, a split cannot show that test comes after train.",
        )
    # Streaming passes over the split and the parsed time: the bounds, then the test rows against the
    # latest train time; the times are parsed a batch at a time, never held for every row.
    timed_rows = joined.lazy().select(
        "split", time_expr(time_col, joined.schema[time_col], unit).dt.epoch("us").alias("t")
    )
    train, test = (
        pl.col("t").filter(pl.col("split") == "train"),
        pl.col("t").filter(pl.col("split") == "test"),
    )
    bounds = timed_rows.select(
        train.count().alias("n_train"),
        test.count().alias("n_test"),
        train.max().alias("max_train"),
        test.min().alias("min_test"),
    )
    b = bounds.collect(engine="streaming").row(0, named=True)
    if not b["n_train"] or not b["n_test"]:
        return not_run(
            "split.chronology",
            "train or test has no timestamps (k-fold or empty split): chronology not measured",
            why="Chronology compares train and locked test times.",
        )
    max_train, min_test = int(b["max_train"]), int(b["min_test"])
    against = timed_rows.select(
        (test < max_train).sum().alias("earlier"), (test == max_train).sum().alias("tied")
    )
    a = against.collect(engine="streaming").row(0, named=True)
    earlier = int(a["earlier"]) / int(b["n_test"])
    tied = int(a["tied"])
    timed = inp.strategy in TIME_STRATEGIES
    status = ("fail" if timed else "info") if earlier > 0 or tied else "pass"
    first, last = format_time(max_train, unit), format_time(min_test, unit)
    return Check(
        id="split.chronology",
        status=status,
        summary=f"latest train {first}, earliest test {last}; {earlier:.1%} of test rows are earlier than the latest train row"
        + (f", {tied:,} share its time {first} (one time on both sides)" if tied else ""),
        measured={
            "max_train_time": first,
            "min_test_time": last,
            "unit": unit,
            "test_share_before_max_train": round(earlier, 6),
            "test_rows_at_max_train": tied,
        },
        why="A claim about future data needs a test that lies after everything the model learned from.",
        playbook=PB_VERIFY,
    )


def exact_overlap(joined: Any, source_inputs: dict[str, Any], store: Any = None) -> Check:
    """`store`: the text columns stay on disk, `joined` holds stand-ins (engine/audit/textstore.py)."""
    import numpy as np
    import polars as pl

    from claimcheck.engine.audit.duplicates import key_exprs, key_hashes, stored_key_hashes
    from claimcheck.engine.data.rows import model_inputs

    cols = model_inputs(source_inputs)
    norm = source_inputs.get("normalisation", "lower_strip_ws")
    if not cols:
        return not_run("split.exact_overlap", "no model inputs declared")
    # Hash first, compare values only where a held-out row's hash occurs in train (exact, bounded memory).
    h = key_hashes(joined, cols, norm) if store is None else stored_key_hashes(joined, cols, norm, store)
    hashed = pl.DataFrame({"h": h, "split": joined.get_column("split")})
    is_train = pl.col("split") == "train"
    indexed = hashed.with_row_index("i")
    train_h = hashed.filter(is_train).get_column("h").unique()
    held = indexed.filter(~is_train & pl.col("h").is_in(train_h.implode()))
    twins = indexed.filter(is_train & pl.col("h").is_in(held.get_column("h").unique().implode()))
    idx = np.sort(np.concatenate([held.get_column("i").to_numpy(), twins.get_column("i").to_numpy()]))
    # The rows read are dropped as soon as their compared values are made: one copy of their texts held.
    keyed = (
        joined[idx] if store is None else store.rows(idx, cols).with_columns(joined.get_column("split")[idx])
    ).select(*key_exprs(joined.schema, cols, norm), "split")
    train_keys = keyed.filter(pl.col("split") == "train").select(cols).unique()
    per: dict[str, int] = {}
    share: dict[str, float] = {}
    sizes = dict(hashed.group_by("split").len().iter_rows())
    for s in ("dev", "calibration", "test"):
        if not sizes.get(s):
            continue
        part = keyed.filter(pl.col("split") == s)
        hit = part.join(train_keys, on=cols, how="semi", nulls_equal=True).height
        per[s], share[s] = hit, round(hit / sizes[s], 6)
    test_share = share.get("test", 0.0)
    status = "fail" if test_share > EXACT_OVERLAP_FAIL else ("warn" if any(per.values()) else "pass")
    # Without free text the inputs are a few categorical / numeric values: held-out rows repeat
    # training inputs by construction (a lookup is the model), so overlap is reported, not failed.
    finite = not source_inputs.get("text_columns")
    status = "warn" if finite and status == "fail" else status
    return Check(
        id="split.exact_overlap",
        status=status,
        summary="rows whose model inputs also occur in train: "
        + (", ".join(f"{s} {per[s]:,} ({share[s]:.1%})" for s in per) or "none")
        + (
            "; no free-text inputs, so repeated inputs are expected (warn, not fail)"
            if finite and per
            else ""
        ),
        measured={"columns": cols, "normalisation": norm, "rows": per, "share": share},
        why="An input seen in training with its label turns a held-out score into a lookup.",
        playbook=PB_VERIFY,
    )


def pairs_reusable(src: StageRecord, inp: Inputs) -> bool:
    """The source stage's near-duplicate pairs answer this split's near-duplicate overlap: a full
    pass with the same threshold and shingle size."""
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    m = parse(src.check("source.near_duplicates"), shapes.NearDuplicates)
    return not (
        m is None
        or src.inputs.get("preview_rows")
        or m.threshold != inp.near_dup_threshold
        or m.shingle_size != inp.shingle_size
    )


def source_pairs(joined: Any, src: StageRecord, inp: Inputs, ctx: StageContext) -> Any:
    """The source stage's verified pairs restricted to the split's rows, or None when they do not apply.

    Same definition (threshold, shingle size, full pass) → the pairs among a subset of rows are exactly the
    source pairs with both rows in it, so recomputing would give the same frame.
    """
    import polars as pl

    from claimcheck.engine.audit.neardup import read_pairs
    from claimcheck.engine.data.rows import ROW_ID
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    if not pairs_reusable(src, inp):
        return None
    m = parse(src.check("source.near_duplicates"), shapes.NearDuplicates)
    assert m is not None
    pairs = read_pairs(ctx.session_dir / m.pairs_path, m.pairs_sha256)
    ids = joined.get_column(ROW_ID)
    return pairs.filter(pl.col("row_a").is_in(ids) & pl.col("row_b").is_in(ids))


def near_overlap(joined: Any, src: StageRecord, inp: Inputs, ctx: StageContext) -> Check:
    import polars as pl

    from claimcheck.engine.audit.neardup import near_duplicates
    from claimcheck.engine.data.rows import ROW_ID, text_inputs

    source_inputs = src.inputs
    cols = text_inputs(source_inputs)
    if not cols:
        return not_run(
            "split.near_duplicate_overlap", "no free-text model input: near-duplicate overlap not checked"
        )
    pairs = source_pairs(joined, src, inp, ctx)
    if pairs is None:
        pairs = near_duplicates(
            joined, cols, threshold=inp.near_dup_threshold, shingle_size=inp.shingle_size
        ).pairs
    lab = joined.select(ROW_ID, "split")
    p = (
        pairs.join(lab.rename({ROW_ID: "row_a", "split": "sa"}), on="row_a")
        .join(lab.rename({ROW_ID: "row_b", "split": "sb"}), on="row_b")
        .filter(pl.col("sa") != pl.col("sb"))
    )
    cross: dict[str, int] = {}
    for a, b in p.select("sa", "sb").iter_rows():
        key = "-".join(sorted((a, b)))
        cross[key] = cross.get(key, 0) + 1
    held_rows: dict[str, int] = {}
    for s in ("dev", "calibration", "test"):
        with_train = p.filter(
            ((pl.col("sa") == s) & (pl.col("sb") == "train"))
            | ((pl.col("sb") == s) & (pl.col("sa") == "train"))
        )
        ids = pl.concat(
            [
                with_train.filter(pl.col("sa") == s).get_column("row_a"),
                with_train.filter(pl.col("sb") == s).get_column("row_b"),
            ]
        )
        held_rows[s] = int(ids.n_unique()) if ids.len() else 0
    total = int(p.height)
    return Check(
        id="split.near_duplicate_overlap",
        status="warn"
        if held_rows.get("test", 0) or held_rows.get("dev", 0)
        else ("info" if total else "pass"),
        summary=f"{total:,} near-duplicate pair(s) (Jaccard ≥ {inp.near_dup_threshold}) cross splits; "
        f"held-out rows with a near-copy in train: {', '.join(f'{k} {v:,}' for k, v in held_rows.items())}",
        measured={
            "pairs_crossing": total,
            "pairs_by_splits": dict(sorted(cross.items())),
            "held_out_rows_with_train_near_copy": held_rows,
        },
        why="Zero exact overlap does not make held-out rows independent: near-copies leak too.",
        playbook=PB_NEAR,
    )


def train_classes(joined: Any, numeric: bool) -> Check:
    """The train split holds at least two classes (two distinct values of a numeric target): with one,
    every learner fails to fit. A failure here stops the later stages (pipeline/core.BLOCKING_CHECKS)."""
    import polars as pl

    from claimcheck.engine.data.rows import TARGET
    from claimcheck.engine.textsafe import visible

    in_train = joined.lazy().filter(pl.col("split") == "train").select(TARGET).drop_nulls()
    counted = in_train.group_by(TARGET).len().collect(engine="streaming")
    values = sorted(str(v) for v in counted.get_column(TARGET).to_list())
    train_rows = int(counted.get_column("len").sum())
    noun = "distinct target value" if numeric else "class"
    counted = f"{len(values):,} {noun}" + ("" if len(values) == 1 else ("es" if noun == "class" else "s"))
    shown = ", ".join(repr(visible(v)) for v in values[:5])
    if len(values) >= 2:
        summary = f"the train split holds {counted}"
    else:
        summary = (
            f"the train split holds {counted}{f' ({shown})' if values else ''} — nothing to learn: a "
            "model needs at least two; check the label column and label_mapping (the source record's "
            "class coverage says what the data holds) or the split fractions"
        )
    return Check(
        id="split.train_classes",
        status="pass" if len(values) >= 2 else "fail",
        summary=summary,
        measured={"train_rows": train_rows, "train_classes": len(values), "numeric_target": numeric},
        why="A learner fitted on one class cannot be fitted at all; later stages are not run on it.",
        playbook=PB_SEPARATE,
    )


def label_coverage(joined: Any) -> Check:
    import polars as pl

    from claimcheck.engine.data.rows import TARGET

    # The distinct (split, label) pairs, by a streaming aggregation.
    pairs = joined.lazy().select("split", TARGET).unique().collect(engine="streaming")
    train = set(pairs.filter(pl.col("split") == "train").get_column(TARGET).unique().to_list())
    missing = {}
    for s in ("dev", "calibration", "test"):
        labels = set(pairs.filter(pl.col("split") == s).get_column(TARGET).unique().to_list())
        if labels - train:
            missing[s] = sorted(labels - train)
    return Check(
        id="split.label_coverage",
        status="fail" if missing else "pass",
        summary=("labels absent from train: " + "; ".join(f"{s}: {', '.join(v)}" for s, v in missing.items()))
        if missing
        else "every held-out label also occurs in train",
        measured={"absent_from_train": missing, "train_labels": sorted(train)},
        why="A class never seen in training can only be scored as wrong.",
        playbook=PB_SEPARATE,
    )


def support(joined: Any, inp: Inputs) -> Check:
    from claimcheck.engine.data.rows import TARGET

    counts = joined.lazy().group_by(["split", TARGET]).len().collect(engine="streaming")
    labels = sorted(counts.get_column(TARGET).unique().to_list())
    table: dict[str, dict[str, int]] = {}
    for s, t, n in counts.iter_rows():
        table.setdefault(str(s), {lab: 0 for lab in labels})[str(t)] = int(n)
    low = {s: sorted(t for t, n in v.items() if n < inp.class_support_floor) for s, v in table.items()}
    low = {s: v for s, v in low.items() if v}
    return Check(
        id="split.class_support",
        status="warn" if low else "pass",
        summary=(
            f"classes under {inp.class_support_floor} rows: "
            + "; ".join(f"{s}: {', '.join(v)}" for s, v in sorted(low.items()))
        )
        if low
        else f"every class has ≥ {inp.class_support_floor} rows in every split",
        measured={
            "floor": inp.class_support_floor,
            "support": dict(sorted(table.items())),
            "below_floor": dict(sorted(low.items())),
        },
        why="Per-class precision and recall on a handful of rows are too uncertain to support a claim.",
        playbook=PB_RARE,
    )


def folds(joined: Any, inp: Inputs) -> Check:
    import polars as pl

    from claimcheck.engine.data.rows import FAMILY

    tr = joined.select("fold", FAMILY).filter(pl.col("fold") >= 0)
    sizes = {str(f): int(n) for f, n in tr.group_by("fold").len().sort("fold").iter_rows()}
    crossing = tr.group_by(FAMILY).agg(pl.col("fold").n_unique().alias("k")).filter(pl.col("k") > 1).height
    return Check(
        id="split.folds",
        status="fail" if crossing else "pass",
        summary=f"{inp.k} group folds, rows per fold {', '.join(str(v) for v in sizes.values())}; {crossing} families span folds",
        measured={"k": inp.k, "rows_per_fold": sizes, "families_spanning_folds": crossing},
        why="Cross-validation must respect the same groups as the final split, or every fold leaks.",
        playbook=PB_SMALL,
    )


def times_of(ds: Any, time_col: str, unit: str) -> Any:
    """The time column as epoch microseconds (Int64; null where unreadable), read in its resolved unit."""
    import polars as pl

    from claimcheck.engine.data.rows import time_expr

    if not time_col:
        return None
    t = ds.select(time_expr(time_col, ds.schema[time_col], unit).dt.epoch("us").alias("t")).get_column("t")
    return t if t.null_count() < t.len() else pl.Series("t", [None] * t.len(), dtype=pl.Int64)


# ---------------------------------------------------------------- numeric targets (regression)


def target_distribution(joined: Any, ds: Any) -> Check:
    """prevalence and class support's counterpart for a numeric target: its distribution per split."""
    import polars as pl

    from claimcheck.engine.audit.target import numeric_target, per_split, summary
    from claimcheck.engine.shapes.data import SplitTargetDistribution, TargetSummary

    whole = TargetSummary.model_validate(summary(ds.select(numeric_target(ds)).to_series()))
    parts = {s: TargetSummary.model_validate(v) for s, v in per_split(joined).items()}
    sd = whole.std or 0.0
    shift = max(
        (abs((p.p50 or 0.0) - (whole.p50 or 0.0)) / sd for p in parts.values() if p.count and sd > 0),
        default=0.0,
    )
    sizes = {s: int(joined.select("split").filter(pl.col("split") == s).height) for s in parts}
    shape = SplitTargetDistribution(
        sizes=sizes, whole=whole, per_split=parts, max_median_shift_sd=round(shift, 6)
    )
    return Check(
        id="split.target_distribution",
        status="info",
        summary="; ".join(
            f"{s} {p.count:,}: median {p.p50:.4g}, 5–95% [{p.p05:.4g}, {p.p95:.4g}]"
            if p.count
            else f"{s}: no values"
            for s, p in parts.items()
        )
        + f"; largest median shift from the whole {shift:.2f} sd",
        measured=shape,
        why="Each split's target distribution says what population its errors describe.",
        playbook=PB_PREVALENCE,
    )


def target_range(joined: Any) -> Check:
    """label_coverage's counterpart for a numeric target: held-out values outside the train range warn
    (a model may still predict there; the train mean and trees cannot extrapolate beyond it)."""
    from claimcheck.engine.audit.target import range_coverage
    from claimcheck.engine.shapes.data import TargetRange

    r = TargetRange.model_validate(range_coverage(joined))
    outside = {
        s: (r.below_train_min.get(s, 0), r.above_train_max.get(s, 0))
        for s in r.share_outside
        if r.below_train_min.get(s, 0) + r.above_train_max.get(s, 0)
    }
    if r.train_min is None:
        summary = "no numeric train values: the train range is undefined"
    elif outside:
        summary = (
            f"held-out targets outside the train range [{r.train_min:.4g}, {r.train_max:.4g}]: "
            + "; ".join(
                f"{s}: {lo + hi} ({lo} below, {hi} above, {r.share_outside[s]:.1%})"
                for s, (lo, hi) in outside.items()
            )
        )
    else:
        summary = f"every held-out target lies in the train range [{r.train_min:.4g}, {r.train_max:.4g}]"
    return Check(
        id="split.target_range",
        status="warn" if outside or r.train_min is None else "pass",
        summary=summary,
        measured=r,
        why="Predictions beyond the values seen in training are extrapolation; count how much is asked.",
        playbook=PB_SEPARATE,
    )


def numeric_target_not_run(check_id: str, counterpart: str) -> Check:
    """A class-based split check that does not apply to a numeric target, naming its replacement."""
    return not_applicable(check_id, f"the claim's target is numeric — see {counterpart}")
