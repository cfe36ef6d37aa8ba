"""Split stage: does the held-out data answer the deployment question without leakage?

Assigns every row with a target to train / dev / calibration / locked test (or group-aware folds),
saves the membership as Parquet with its sha256, and measures what the split really is: sizes and
prevalence, entity-family intersections, chronology, exact and near-duplicate overlap across splits,
label coverage and per-class support.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

from claimcheck.engine.data import weights
from claimcheck.engine.evidence import Check, StageRecord, atomic_write_bytes
from claimcheck.engine.pipeline.checks import not_applicable
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.split import checks as split_checks
from claimcheck.engine.stages.split import subgroups
from claimcheck.engine.stages.split.checks import PB_LEDGER, TIME_STRATEGIES, times_of
from claimcheck.engine.stages.split.inputs import FRACTION_ADVICE, Inputs, check_fractions
from claimcheck.engine.stages.split.labels import label_support
from claimcheck.engine.stats.names import target_type

# A realised fraction further than this from the asked one: the membership summary says what can realise them.
FRACTION_SHIFT_ADVICE = 0.05

TITLE = "Split"
LISTS_REASON = "the claim's target is a set of labels per row — see split.label_support"


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    from claimcheck.engine.audit import budget as memory_budget

    if "source" not in upstream:
        raise StageInputError("split: the source stage must be run and frozen first")
    src = upstream["source"]
    fractions = check_fractions(inputs)
    ctx.progress(0.05, "loading data")
    budget = memory_budget.resolve(str(src.inputs.get("memory_budget") or ""))
    files = [ctx.resolve(f, inside=False) for f in src.inputs.get("files") or []]
    load_path = budget.choose(memory_budget.need_parse(files))
    if load_path == memory_budget.BOUNDED:
        memory_budget.release_free_memory()
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    ds, store = _load(src, inputs, claim, ctx, (load_path, files))
    try:
        return _split(inputs, upstream, ctx, (ds, store), (fractions, budget, load_path))
    finally:
        if store is not None:
            store.close()


def _load(src: StageRecord, inp: Inputs, claim: dict[str, Any], ctx: StageContext, where: tuple) -> Any:
    """The rows with a target, and the store of the text columns left on disk (or None): on the
    bounded path the text columns stay in the spill file (engine/audit/textstore.py) when no step
    of this split reads them but the exact overlap (grouping by entities, the source's near-duplicate
    pairs reused). `where`: the load path and the data files. On the bounded path the rows come from
    the source stage's spill where it handed one over for these inputs and files (textstore.take_over),
    else from the files."""
    from claimcheck.engine.audit import budget as memory_budget
    from claimcheck.engine.audit import textstore
    from claimcheck.engine.data.blockread import folder_for

    load_path, files = where
    spill = textstore.take_over(src.inputs, files)
    if spill is not None and load_path != memory_budget.BOUNDED:
        spill.close()
        spill = None
    if spill is not None:
        return _from_spill(spill, src, inp, claim)
    # The bounded path reads CSV / TSV / JSONL files in blocks (engine/data/blockread.py), unmapped.
    with folder_for(load_path == memory_budget.BOUNDED) as blocks:
        return _loaded(src, inp, claim, ctx, (load_path, blocks))


def _from_spill(spill: Any, src: StageRecord, inp: Inputs, claim: dict[str, Any]) -> Any:
    """`_loaded`'s rows and store on the bounded path, read from the source stage's spill (every
    column of the files' rows, row id and target added, no filter applied): its target is made again
    after the recorded filters, as `load_dataset` makes it. The store, where one is kept, reads that
    file and removes it on close; otherwise the file is removed here."""
    import polars as pl

    from claimcheck.engine.audit import textstore
    from claimcheck.engine.data import rows as data

    try:
        lf = data.refined(pl.scan_parquet(spill.path).drop(data.TARGET), src.inputs)
        lf, on_disk = _narrowed(lf, src, inp, claim, bounded=True)
        if on_disk:
            frame = textstore.read_back(lf, on_disk)
            ids = frame.get_column(data.ROW_ID).to_numpy().astype("int64")
            return frame, textstore.TextStore(spill.path, ids, spill.schema, spill.folder)
        frame = textstore.read_back(lf, [])
    except BaseException:
        spill.close()
        raise
    spill.close()
    return frame, None


def _loaded(src: StageRecord, inp: Inputs, claim: dict[str, Any], ctx: StageContext, how: tuple) -> Any:
    """`_load`'s rows and store; `how`: the load path and the block folder (or None)."""
    from claimcheck.engine.audit import budget as memory_budget
    from claimcheck.engine.audit import textstore
    from claimcheck.engine.data import rows as data

    load_path, blocks = how
    lf = data.load_dataset(src.inputs, ctx, blocks)
    lf, on_disk = _narrowed(lf, src, inp, claim, bounded=load_path == memory_budget.BOUNDED)
    if on_disk:
        return textstore.spill(lf, on_disk)
    return memory_budget.collect(lf, load_path), None


def _narrowed(lf: Any, src: StageRecord, inp: Inputs, claim: dict[str, Any], bounded: bool) -> tuple:
    """`lf` with only the columns this split reads, and the text columns that stay on disk: on the
    bounded path, where no step of this split reads them but the exact overlap (grouping by entities,
    the source's near-duplicate pairs reused, or no text inputs); else none."""
    from claimcheck.engine.audit import textstore
    from claimcheck.engine.data import rows as data

    needed = read_columns(src.inputs, claim)
    if needed is not None:
        lf = lf.select(c for c in lf.collect_schema() if c in needed)
    if not bounded or inp.grouping != "entities":
        return lf, []
    on_disk = textstore.columns_on_disk(src.inputs, lf.collect_schema(), claim)
    if on_disk and (split_checks.pairs_reusable(src, inp) or not data.text_inputs(src.inputs)):
        return lf, on_disk
    return lf, []


def read_columns(source_inputs: dict[str, Any], claim: dict[str, Any]) -> set[str] | None:
    """The columns the split stage reads: row id, target, the model inputs (exact overlap, duplicate
    families, near-duplicate texts), the time, weight and subgroup columns. None (every column) for a
    retrieval claim, whose check reads its own columns (engine/retrieval/stages.py)."""
    from claimcheck.engine.data import rows as data

    if claim.get("task_kind") == "retrieval":
        return None
    named = [
        str(source_inputs.get("time_column") or ""),
        weights.column(source_inputs),
        *(source_inputs.get("subgroup_columns") or []),
    ]
    return {data.ROW_ID, data.TARGET, *data.model_inputs(source_inputs), *(c for c in named if c)}


def _split(
    inputs: Inputs,
    upstream: dict[str, StageRecord],
    ctx: StageContext,
    loaded: tuple[Any, Any],
    plan: tuple[dict[str, float], Any, str],
) -> StageRecord:
    """The assignment and the checks on the loaded rows (`loaded`: the rows and the store of their
    text columns left on disk, or None)."""
    import polars as pl

    from claimcheck.engine.audit.textstore import restricted
    from claimcheck.engine.data import rows as data
    from claimcheck.engine.data import splits

    ds, store = loaded
    fractions, budget, load_path = plan
    src = upstream["source"]
    fam = data.families(src, ctx)
    ds = _attach(ds, fam, "left", load_path).with_columns(
        pl.col(data.FAMILY).fill_null(
            -1 - pl.col(data.ROW_ID)
        )  # rows outside the family file: their own family
    )
    ds = _with_groupings(ds, src, inputs, ctx)
    time_col, time_unit = data.source_time(src.inputs, ds.schema)
    if ds.height == 0:
        raise StageInputError("split: the source data has no rows with a target; nothing to split")
    ctx.check_cancelled()
    ctx.progress(0.2, f"assigning ({inputs.strategy})")
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    multi = target_type(claim) == "multi_label"
    order = [str(c) for c in claim.get("class_order") or []] if multi else None
    mem, excluded = _assign(ds, inputs, fractions, (time_col, time_unit), label_order=order)
    buf = io.BytesIO()
    mem.write_parquet(buf, statistics=False)
    payload = buf.getvalue()
    rel = f"data/{splits.MEMBERSHIP_FILE}"
    if not ctx.replay:
        atomic_write_bytes(ctx.session_dir / rel, payload)
    member = _membership(ds, mem, (inputs, fractions, excluded), (rel, payload))
    member = member.model_copy(update={"coverage": budget.covered(member.coverage, load_path)})
    checks = [member, split_checks.rationale(inputs, upstream)]
    joined = _attach(ds, mem.drop(data.FAMILY), "inner", load_path)
    ctx.progress(0.4, "prevalence, families, chronology")
    numeric = target_type(claim) == "numeric"
    checks.append(split_checks.train_classes(joined, numeric))
    checks.extend(
        [not_applicable("split.prevalence", LISTS_REASON)]
        if multi
        else _distribution_checks(joined, ds, inputs, numeric)
    )
    checks.append(split_checks.family_intersection(joined, inputs))
    checks.append(split_checks.chronology(joined, (time_col, time_unit), inputs))
    ctx.check_cancelled()
    ctx.progress(0.55, "exact overlap")
    checks.append(split_checks.exact_overlap(joined, src.inputs, restricted(store, joined)))
    ctx.check_cancelled()
    ctx.progress(0.7, "near-duplicate overlap")
    checks.append(split_checks.near_overlap(joined, src, inputs, ctx))
    if multi:
        checks += [not_applicable(c, LISTS_REASON) for c in ("split.label_coverage", "split.class_support")]
        checks.append(label_support(joined, order or [], inputs.strategy))
    else:
        checks.extend(_coverage_checks(joined, inputs, numeric))
    if weights.column(src.inputs):
        checks.append(weights.weight_mass_check(joined, weights.column(src.inputs)))
    if inputs.strategy == "group_kfold":
        checks.append(split_checks.folds(joined, inputs))
    if "claim" in upstream and upstream["claim"].inputs.get("task_kind") == "retrieval":
        from claimcheck.engine.retrieval.stages import split_check

        checks.append(split_check(joined, src.inputs))
    checks.append(subgroups.subgroup_support(joined, src.inputs))
    ctx.progress(1.0, "done")
    return StageRecord(stage="split", inputs=inputs.model_dump(mode="json"), checks=checks)


def _attach(ds: Any, other: Any, how: str, load_path: str) -> Any:
    """ds joined (`how`: left or inner) with `other`'s columns by row id. In memory: a join, which
    copies every column of ds. Bounded: `other`'s columns aligned to ds's rows and added beside its own
    (shared, not copied); for an inner join the rows `other` lacks are filtered out only when there are
    any. The same rows and values."""
    import numpy as np
    import polars as pl

    from claimcheck.engine.audit import budget as memory_budget
    from claimcheck.engine.data.rows import ROW_ID

    if load_path == memory_budget.IN_MEMORY:
        return ds.join(other, on=ROW_ID, how=how)
    # Row ids are unique on both sides: a sorted search aligns them without a join's hash table.
    other = other.sort(ROW_ID)
    ids = other.get_column(ROW_ID).to_numpy()
    want = ds.get_column(ROW_ID).to_numpy()
    at = np.minimum(np.searchsorted(ids, want), max(ids.size - 1, 0))
    present = ids[at] == want if ids.size else np.zeros(want.size, dtype=bool)
    idx = pl.Series(np.where(present, at, 0), dtype=pl.Int64)
    cols = [
        pl.Series(c, other.get_column(c).gather(idx)).scatter(np.flatnonzero(~present), None)
        if ids.size
        else pl.Series(c, [None] * want.size, dtype=other.schema[c])
        for c in other.columns
        if c != ROW_ID
    ]
    out = ds.hstack(cols)
    if how == "inner" and not present.all():
        out = out.filter(pl.Series(present))
    return out


# ---------------------------------------------------------------- assignment


# The families each grouping forms, kept beside the unit (FAMILY) while the split runs; counted over
# the assigned rows in split.membership's kept_together. Keys are the ones that record uses.
PARTS = {
    "entities": "__entity_family",
    "exact_duplicates": "__exact_family",
    "near_duplicates": "__near_family",
}
PART_NOUNS = {
    "entities": "entity",
    "exact_duplicates": "exact-duplicate",
    "near_duplicates": "near-duplicate",
}


def _with_groupings(ds: Any, src: StageRecord, inp: Inputs, ctx: StageContext) -> Any:
    """ds with FAMILY the unit the split keeps together (entity families, widened by duplicate
    families for a duplicate grouping) and one column per grouping part (PARTS)."""
    import polars as pl

    from claimcheck.engine.data.rows import FAMILY

    ds = ds.with_columns(pl.col(FAMILY).alias(PARTS["entities"]))
    if inp.grouping == "entities":
        return ds
    dup = _duplicate_families(ds, src, inp, ctx)
    cols = [pl.Series(FAMILY, dup.family), pl.Series(PARTS["exact_duplicates"], dup.exact)]
    if dup.near is not None:
        cols.append(pl.Series(PARTS["near_duplicates"], dup.near))
    return ds.with_columns(cols)


def _kept(labels: Any) -> Any:
    import numpy as np

    from claimcheck.engine.shapes.data import KeptFamilies

    sizes = np.unique(labels, return_counts=True)[1] if labels.size else np.zeros(0, dtype=np.int64)
    multi = sizes[sizes >= 2]
    return KeptFamilies(
        families=int(sizes.size),
        multi_row_families=int(multi.size),
        rows_in_multi_row_families=int(multi.sum()),
    )


def _membership(
    ds: Any, mem: Any, assigned: tuple[Inputs, dict[str, float], dict[str, int]], saved: tuple[str, bytes]
) -> Check:
    """split.membership: rows per split, rows left out, the saved file's hash, and the families kept
    together per grouping with the unit every later stage folds and resamples over."""
    from claimcheck.engine.data import splits
    from claimcheck.engine.data.rows import FAMILY, ROW_ID
    from claimcheck.engine.shapes.data import Membership

    inputs, fractions, excluded = assigned
    rel, payload = saved
    per_split = dict(mem.lazy().group_by("split").len().collect(engine="streaming").iter_rows())
    sizes = {s: int(per_split.get(s, 0)) for s in splits.SPLITS}
    realised = {s: round(n / max(mem.height, 1), 6) for s, n in sizes.items()}
    shift = round(max(abs(realised[s] - fractions[s]) for s in splits.SPLITS), 6)
    parted = [c for c in PARTS.values() if c in ds.columns]
    kept = ds.select(ROW_ID, *parted)
    if mem.height < ds.height:  # rows left out: the kept ones only
        kept = kept.join(mem.select(ROW_ID), on=ROW_ID, how="semi")
    parts = {k: _kept(kept.get_column(c).to_numpy()) for k, c in PARTS.items() if c in kept.columns}
    unit = splits.UNIT_KINDS[inputs.grouping]
    shape = Membership(
        path=rel,
        sha256=hashlib.sha256(payload).hexdigest(),
        rows=mem.height,
        sizes=sizes,
        excluded=excluded,
        realised_fractions=realised,
        largest_fraction_shift=shift,
        grouping=inputs.grouping,
        families=int(ds.get_column(FAMILY).n_unique()),
        unit=unit,
        units=int(mem.get_column(FAMILY).n_unique()),
        kept_together=parts,
    )
    by_fractions = inputs.strategy in TIME_STRATEGIES and not inputs.time_cuts
    return Check(
        id="split.membership",
        status="pass" if sizes["train"] and (sizes["test"] or inputs.strategy == "group_kfold") else "fail",
        summary=f"{mem.height:,} rows assigned ({', '.join(f'{k} {v:,}' for k, v in sizes.items())}); "
        f"{sum(excluded.values()):,} left out; saved as {rel}"
        + (
            f"; cut only between distinct timestamps: realised fractions differ from the asked ones "
            f"by up to {shift:.3f}"
            + (f" — {FRACTION_ADVICE[inputs.strategy]}" if shift > FRACTION_SHIFT_ADVICE else "")
            if by_fractions
            else ""
        )
        + _kept_text(shape, inputs.strategy),
        measured=shape,
        why="The exact membership is what every later number rests on; its hash ties them to it.",
        playbook=PB_LEDGER,
    )


def _kept_text(shape: Any, strategy: str) -> str:
    """What the split kept together and the unit later folds and intervals use, in words."""
    from claimcheck.engine.data.splits import UNIT_PLURALS
    from claimcheck.engine.stages.split.inputs import GROUP_STRATEGIES

    parts = (
        ", ".join(
            f"{p.multi_row_families:,} {PART_NOUNS[k]} families of 2+ rows ({p.rows_in_multi_row_families:,} rows)"
            for k, p in shape.kept_together.items()
            if p.multi_row_families
        )
        or "no family of 2+ rows"
    )
    unit = f"the unit of later folds and intervals: {shape.units:,} {UNIT_PLURALS[shape.unit]}"
    if strategy in GROUP_STRATEGIES:
        return f"; kept whole: {parts}; {unit}"
    return f"; {unit} (a {strategy} split does not keep families whole: {parts})"


def _duplicate_families(ds: Any, src: StageRecord, inp: Inputs, ctx: StageContext) -> Any:
    """The entity families widened by the source's duplicates: identical model inputs (the source's
    normalisation) and, for 'duplicates_and_near', the source stage's sha256-pinned near-duplicate pairs."""
    from claimcheck.engine.audit.families import duplicate_families
    from claimcheck.engine.audit.neardup import read_pairs
    from claimcheck.engine.data.rows import model_inputs
    from claimcheck.engine.shapes import data as shapes
    from claimcheck.engine.shapes import parse

    pairs = None
    if inp.grouping == "duplicates_and_near":
        m = parse(src.check("source.near_duplicates"), shapes.NearDuplicates)
        if m is None or src.inputs.get("preview_rows"):
            raise StageInputError(
                "split: grouping 'duplicates_and_near' needs the source stage's near-duplicate pairs from a "
                "full pass over declared text columns; declare text_columns and run the source's full pass, "
                "or use grouping 'duplicates'"
            )
        pairs = read_pairs(ctx.session_dir / m.pairs_path, m.pairs_sha256)
    norm = str(src.inputs.get("normalisation", "lower_strip_ws"))
    return duplicate_families(ds, model_inputs(src.inputs), norm, pairs)


def _assign(
    ds: Any,
    inp: Inputs,
    fractions: dict[str, float],
    time: tuple[str, str],
    label_order: list[str] | None = None,
) -> tuple[Any, dict[str, int]]:
    """Membership and rows left out per reason; `label_order`: a multi-label target's labels (a
    stratified split then stratifies by label sets, engine/data/labelsets.py)."""
    import numpy as np
    import polars as pl

    from claimcheck.engine.data import splits
    from claimcheck.engine.data.rows import FAMILY, ROW_ID, TARGET

    ids = ds.get_column(ROW_ID).to_numpy()
    fam = ds.get_column(FAMILY).to_numpy()
    keep = np.ones(ids.size, dtype=bool)
    fold = np.full(ids.size, -1, dtype=np.int64)
    excluded: dict[str, int] = {}
    times = None
    time_col, unit = time
    if inp.strategy in TIME_STRATEGIES:
        if not time_col:
            raise StageInputError(
                f"split: strategy '{inp.strategy}' needs a time column; declare one in the source stage"
            )
        if unit == "ordinal" and (inp.time_cuts or inp.gap_days):
            raise StageInputError(
                "split: the time column is an ordinal (an order, not dates): 'time_cuts' and 'gap_days' "
                "cannot apply; split by fractions and leave them empty"
            )
        t = times_of(ds, time_col, unit)
        keep = t.is_not_null().to_numpy()
        excluded["no parseable time"] = int((~keep).sum())
        times = t.fill_null(0).to_numpy()
    cuts = [splits.to_datetime_us(c) for c in inp.time_cuts]
    if cuts != sorted(cuts):
        raise StageInputError("split: 'time_cuts' must be ascending")
    lab = np.zeros(ids.size, dtype=np.int64)
    sel = np.flatnonzero(keep)
    if inp.strategy == "random":
        lab[sel] = splits.assign_rows(ids[sel], fractions, inp.seed)
    elif inp.strategy == "stratified" and label_order is not None:
        lab[sel] = _by_label_sets(ds, sel, label_order, fractions, inp.seed)
    elif inp.strategy == "stratified":
        lab[sel] = splits.assign_stratified(
            ids[sel], ds.get_column(TARGET).to_numpy()[sel], fractions, inp.seed
        )
    elif inp.strategy == "group":
        lab[sel] = splits.assign_groups(fam[sel], fractions, inp.seed)
    elif inp.strategy == "time":
        lab[sel] = splits.assign_time(times[sel], ids[sel], fractions, cuts)
    elif inp.strategy == "group_time":
        # Rows split by time; a family belongs to the split of its earliest row, and its rows dated in a
        # later split are left out — so no family crosses splits and test lies after train.
        row_lab = splits.assign_time(times[sel], ids[sel], fractions, cuts)
        fam_lab = splits.family_first_split(fam[sel], row_lab)
        lab[sel] = fam_lab
        outside = np.zeros(ids.size, dtype=bool)
        outside[sel] = row_lab != fam_lab
        keep &= ~outside
        excluded["dated after their family's split"] = int(outside.sum())
    else:  # group_kfold: a group-held-out locked test, the rest in k group folds
        test_frac = fractions.get("test", 0.0)
        two = {"train": 1.0 - test_frac, "dev": 0.0, "calibration": 0.0, "test": test_frac}
        lab[sel] = splits.assign_groups(fam[sel], two, inp.seed) if test_frac > 0 else 0
        tr = sel[lab[sel] == 0]
        fold[tr] = splits.assign_folds(fam[tr], inp.k, inp.seed)
    if inp.gap_days > 0 and times is not None:
        # only rows still kept count as inside the gap: one left out already is counted once, above
        in_gap = keep & ~_gap_mask(lab, times, keep, inp.gap_days)
        keep &= ~in_gap
        excluded["inside the gap before a later split"] = int(in_gap.sum())
    # The split's name gathered by its index: no per-row Python or numpy string.
    names = pl.Series("split", list(splits.SPLITS), dtype=pl.String).gather(lab[keep])
    mem = pl.DataFrame(
        {ROW_ID: ids[keep], "split": names, "fold": fold[keep], FAMILY: fam[keep]},
        schema={ROW_ID: pl.Int64, "split": pl.String, "fold": pl.Int64, FAMILY: pl.Int64},
    )
    # The rows keep the file's order, ascending row ids: sorted already, no copy of the membership.
    in_order = mem.get_column(ROW_ID).is_sorted()
    mem = mem.with_columns(pl.col(ROW_ID).set_sorted()) if in_order else mem.sort(ROW_ID)
    return mem, excluded


def _by_label_sets(ds: Any, sel: Any, label_order: list[str], fractions: dict[str, float], seed: int) -> Any:
    """Split index of the selected rows of a multi-label target, stratified by label sets."""
    from claimcheck.engine.data import label_split, labelsets
    from claimcheck.engine.data.rows import TARGET

    target = ds.get_column(TARGET)
    order = list(dict.fromkeys([*label_order, *labelsets.vocabulary(target.drop_nulls())]))
    return label_split.assign_iterative(labelsets.indicator(target, order)[sel], fractions, seed)


def _gap_mask(lab: Any, times: Any, keep: Any, gap_days: float) -> Any:
    """Drop rows of a later split dated less than gap_days after the earliest row of that split."""
    import numpy as np

    gap = int(gap_days * 86_400 * 1_000_000)
    out = np.ones(lab.size, dtype=bool)
    present = sorted(set(lab[keep].tolist()))
    for s in present[1:]:
        m = keep & (lab == s)
        start = times[m].min()
        out &= ~(m & (times < start + gap))
    return out


# ---------------------------------------------------------------- checks


def _distribution_checks(joined: Any, ds: Any, inputs: Inputs, numeric: bool) -> list[Check]:
    """Class prevalence per split, or (numeric target) the target's distribution per split."""
    if not numeric:
        return [split_checks.prevalence(joined, ds, inputs)]
    return [
        split_checks.numeric_target_not_run("split.prevalence", "split.target_distribution"),
        split_checks.target_distribution(joined, ds),
    ]


def _coverage_checks(joined: Any, inputs: Inputs, numeric: bool) -> list[Check]:
    """Label coverage and class support, or (numeric target) held-out values outside the train range."""
    if not numeric:
        return [split_checks.label_coverage(joined), split_checks.support(joined, inputs)]
    return [
        split_checks.numeric_target_not_run("split.label_coverage", "split.target_range"),
        split_checks.numeric_target_not_run("split.class_support", "split.target_distribution"),
        split_checks.target_range(joined),
    ]
