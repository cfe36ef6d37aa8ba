"""Source stage: what is in the data, and can the inputs determine the target?

Every check is computed on the recorded files with Polars (definitions and default thresholds in
docs/checks.md). Nothing is dropped silently: filters and the rows without a target are counted per
reason, malformed records are located by file and line, duplicates are reported, never removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from claimcheck.engine.audit import budget as memory_budget
from claimcheck.engine.audit import onray, textstore
from claimcheck.engine.data import weights
from claimcheck.engine.evidence import Check, Note, StageRecord
from claimcheck.engine.pipeline.checks import not_applicable
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.source import checks as source_checks
from claimcheck.engine.stages.source import claim as source_claim
from claimcheck.engine.stages.source import identity as source_identity
from claimcheck.engine.stages.source import labels as source_labels
from claimcheck.engine.stages.source import provenance
from claimcheck.engine.stages.source.checks import PB_PREVIEW
from claimcheck.engine.stages.source.inputs import Inputs
from claimcheck.engine.stats.names import target_type

if TYPE_CHECKING:
    import threading
    from concurrent.futures import Future

TITLE = "Source"


def run(inputs: Inputs, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    from claimcheck.engine.data import rows as data

    _validate_fields(inputs)
    backend = onray.resolve(inputs.audit_backend, inputs.audit_ray_address, replay=ctx.replay)
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    weights.refuse_unweightable(inputs.model_dump(), claim)
    _label_lists_declared(inputs, claim)
    from claimcheck.engine.retrieval.stages import refuse_misplaced

    refuse_misplaced(inputs, claim)
    paths = [ctx.resolve(f, inside=not inputs.allow_outside_workspace) for f in inputs.files]
    data.refuse_same_file(paths, inputs.files)
    ctx.progress(0.02, "checksums")
    checks: list[Check] = [source_checks.checksum(inputs, paths)]
    budget = memory_budget.resolve(inputs.memory_budget)
    load_path = budget.choose(memory_budget.need_parse(paths))
    textstore.drop_handed()
    marks = textstore.file_marks(paths)
    raw, schema, malformed, store = _read(inputs, paths, ctx, (load_path, claim))
    handed = False
    try:
        record = _checked(
            inputs, upstream, ctx, (raw, schema, malformed, store), (checks, budget, load_path, backend)
        )
        # The spill of every row, kept for the split stage's read (engine/audit/textstore.py hand_over).
        if store is not None and not inputs.preview_rows:
            handed = textstore.hand_over(store, record.inputs, marks, paths)
        return record
    finally:
        if store is not None and not handed:
            store.close()


def _checked(
    inputs: Inputs,
    upstream: dict[str, StageRecord],
    ctx: StageContext,
    read: tuple[Any, Any, list[dict[str, Any]], Any],
    so_far: tuple[list[Check], memory_budget.Budget, str, tuple[str, str]],
) -> StageRecord:
    """The checks after the read; `store`: the text columns left on disk (engine/audit/textstore.py);
    `backend`: where the duplicate keys, the near-duplicate search and the families run (onray.resolve)."""
    import polars as pl

    from claimcheck.engine.data import rows as data

    raw, schema, malformed, store = read
    checks, budget, load_path, backend = so_far
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    cov = "full" if not inputs.preview_rows else f"preview: first {raw.height} rows"
    checks.append(source_checks.schema(raw, schema, malformed, budget.covered(cov, load_path)))
    ctx.check_cancelled()
    kept, steps = _apply_filters(raw, inputs)
    checks.append(source_checks.non_finite(kept, inputs, cov))
    if inputs.non_finite == "exclude_rows":
        bad = data.non_finite_row(data.numeric_inputs(inputs.model_dump(mode="json"), kept.schema))
        before = kept.height
        kept = kept.filter(~bad)
        where = "every numeric model input finite and at most 1e150 in magnitude"
        steps.append({"reason": data.NON_FINITE_REASON, "where": where, "removed": before - kept.height})
    # Filtering copies every column; skip it when every row has a target (the common case at scale).
    has_null = kept.get_column(data.TARGET).null_count() > 0
    dataset = kept.filter(pl.col(data.TARGET).is_not_null()) if has_null else kept
    removed = kept.height - dataset.height
    steps.append({"reason": data.NO_TARGET_REASON, "where": "target IS NOT NULL", "removed": removed})
    checks.append(source_checks.transformations(inputs, raw.height, dataset.height, steps, cov))
    if inputs.weight_column:
        weights.validate(dataset, inputs.weight_column)
        checks.append(weights.sample_weights_check(dataset, inputs.weight_column, claim, cov))
    kind = target_type(claim)
    numeric = kind == "numeric"
    _refuse_subgroups(inputs, claim, raw)
    audit = _audit(kept, dataset, inputs, ctx, cov, numeric=numeric, budget=(budget, store), backend=backend)
    checks += (
        [weights.on_duplicates(c, inputs.weight_column) for c in audit] if inputs.weight_column else audit
    )
    if kind == "multi_label":
        checks = [_not_for_lists(c) for c in checks]
        order = [str(c) for c in claim.get("class_order") or []]
        checks.append(not_applicable("source.class_order", LISTS_REASON))
        checks.append(source_labels.label_lists(kept, inputs, order, cov))
    else:
        checks.append(
            source_checks.numeric_target_not_run("source.class_order", "source.target_distribution")
            if numeric
            else source_claim.class_order(dataset, inputs, upstream)
        )
    if claim.get("task_kind") == "retrieval":
        from claimcheck.engine.retrieval.stages import source_check

        checks.append(source_check(dataset, inputs.model_dump(mode="json"), cov))
    ctx.progress(0.95, "preprocessing scripts")
    checks += provenance.preprocessing(inputs, ctx, checks[0])
    checks.append(provenance.label_provenance(inputs, ctx, claim))
    checks.append(provenance.label_maturity(kept, inputs, cov))
    checks.append(provenance.selection(inputs))
    if inputs.preview_rows:
        checks.append(
            Check(
                id="source.pass_kind",
                status="warn",
                summary=f"preview of the first {raw.height} rows only — run the full pass before freezing",
                coverage=cov,
                measured={"preview_rows": inputs.preview_rows},
                why="A preview finds obvious problems fast; only the full pass can support the claim.",
                playbook=PB_PREVIEW,
            )
        )
    ctx.progress(1.0, "done")
    inp = inputs.model_dump(mode="json")
    return StageRecord(stage="source", inputs=inp, checks=checks, notes=_notes(inputs, checks))


LISTS_REASON = "the claim's target is a set of labels per row — see source.label_lists"


def _not_for_lists(check: Check) -> Check:
    """source.class_coverage reads one class per row; a label-list target has source.label_lists."""
    return not_applicable(check.id, LISTS_REASON) if check.id == "source.class_coverage" else check


def _label_lists_declared(inputs: Inputs, claim: dict[str, Any]) -> None:
    """A multi-label claim needs a label-list column, and a label-list column a multi-label claim."""
    from claimcheck.engine.data.labelsets import is_multi_label

    lists, multi = is_multi_label(inputs.model_dump()), target_type(claim) == "multi_label"
    if multi and not lists:
        raise StageInputError(
            "source: the claim's target_type is \"multi_label\" but 'label_format' is empty; say how the "
            'label column holds each row\'s labels ("json_list" or "delimited" with label_delimiter)'
        )
    if lists and not multi:
        raise StageInputError(
            f"source: 'label_format' is {inputs.label_format!r} but the claim's target is not multi-label; "
            'set target_type = "multi_label" in the claim or leave label_format empty'
        )


def _read(
    inputs: Inputs, paths: list, ctx: StageContext, how: tuple[str, dict[str, Any]]
) -> tuple[Any, Any, list[dict[str, Any]], Any]:
    """The rows (after `preview_rows`), their schema, the per-file malformed-record counts and the
    store of the text columns left on disk (or None); read in memory or streamed through a temporary
    Parquet file (`how`: the load path, engine/audit/budget.py, and the claim's inputs). On the bounded
    path CSV / TSV / JSONL files are read in blocks (engine/data/blockread.py) and the text columns stay in
    that file where engine/audit/textstore.py allows it."""
    from claimcheck.engine.data.blockread import folder_for

    ctx.progress(0.05, "scanning records")
    if how[0] != memory_budget.BOUNDED:
        # Located first: a malformed JSONL line must be named by line, not by the reader's first complaint.
        malformed = _malformed(inputs, paths)
        raw, schema, store = _loaded(inputs, paths, ctx, how, None)
        return raw, schema, malformed, store
    # The bounded path: the record scan (Python, one core) runs on a thread beside the block read, which
    # leaves a core free between its Polars calls; the scan's refusal still comes before any the read
    # makes. Cancelled, or stopped by anything but a refusal, the read stops the scan.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    stop = threading.Event()
    with ThreadPoolExecutor(1, thread_name_prefix="claimcheck-records") as pool:
        scan = pool.submit(_malformed, inputs, paths, stop)
        try:
            with folder_for(True) as blocks:
                raw, schema, store = _loaded(inputs, paths, ctx, how, blocks)
        except StageInputError:
            _scan_result(scan)
            raise
        except BaseException:
            stop.set()
            raise
        try:
            malformed = _scan_result(scan)
        except BaseException:
            if store is not None:
                store.close()
            raise
    return raw, schema, malformed, store


def _malformed(inputs: Inputs, paths: list, stop: threading.Event | None = None) -> list[dict[str, Any]]:
    """Each file's malformed-record counts (engine/audit/profile.py); refused where a JSONL line is not
    JSON. `stop`: set, the scan ends early (profile.malformed_records)."""
    from claimcheck.engine.audit import profile

    malformed = [profile.malformed_records(p, n, stop) for p, n in zip(paths, inputs.files, strict=True)]
    _refuse_bad_jsonl(malformed, inputs.files)
    return malformed


def _scan_result(scan: Future[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The record scan's counts, or its refusal raised here (without the read's error as context)."""
    try:
        return scan.result()
    except StageInputError as refusal:
        raise refusal from None


def _loaded(
    inputs: Inputs, paths: list, ctx: StageContext, how: tuple[str, dict[str, Any]], blocks: Any
) -> tuple[Any, Any, Any]:
    """The rows, their schema and the text store (or None), `_read`'s; `blocks`: the folder the
    bounded path reads CSV / TSV / JSONL files into (engine/data/rows.py scan_files), or None."""
    import polars as pl

    from claimcheck.engine.audit import textstore
    from claimcheck.engine.data import rows as data

    lf = data.scan_files(paths, names=list(inputs.files), blocks=blocks)
    data.require_columns(lf, inputs.named_columns(), text_columns=inputs.text_columns)
    if inputs.time_column:
        data.resolve_time_unit(inputs.time_column, lf.collect_schema()[inputs.time_column], inputs.time_unit)
    elif inputs.time_unit:
        raise StageInputError(
            "source input 'time_unit' is set but 'time_column' is empty; name the time column"
        )
    ctx.check_cancelled()
    if inputs.preview_rows:
        lf = lf.head(inputs.preview_rows)
    load_path, claim = how
    schema = lf.collect_schema()
    on_disk = textstore.columns_on_disk(inputs.model_dump(mode="json"), schema, claim)
    store = None
    try:
        lf_t = lf.with_columns(data.source_target_expr(inputs.model_dump()))
        if load_path == memory_budget.BOUNDED:
            memory_budget.release_free_memory()
        if load_path == memory_budget.BOUNDED and on_disk:
            raw, store = textstore.spill(lf_t, on_disk)
        else:
            raw = memory_budget.collect(lf_t, load_path)
    except pl.exceptions.PolarsError as exc:
        raise StageInputError(
            f"the data files cannot be read as one table: {data._first_line(exc)}"
        ) from None
    return raw, schema, store


def _audit(
    kept: Any,
    dataset: Any,
    inputs: Inputs,
    ctx: StageContext,
    cov: str,
    *,
    numeric: bool,
    budget: tuple[memory_budget.Budget, Any],
    backend: tuple[str, str] = (onray.LOCAL, ""),
) -> list[Check]:
    """The audit proper: profile, duplicates, near-duplicates, leakage, families, declarations.
    `numeric`: the claim's target is a number (class coverage becomes the target's distribution);
    `budget`: the memory budget and the store of the text columns left on disk (or None);
    `backend`: (local or ray, the cluster's address), onray.resolve: with ray, the duplicate keys, the
    near-duplicate search and the entity families' grouping run as Ray tasks on that cluster
    (engine/audit/onray)."""
    from claimcheck.engine.audit.textstore import restricted

    budget, store = budget
    rows = _scanned(kept, store)
    store = restricted(store, dataset)
    ctx.progress(0.2, "missingness, time, classes")
    checks = [
        source_checks.missingness(rows, inputs, cov),
        *source_checks.time(rows, inputs, cov),
        source_checks.numeric_target_not_run("source.class_coverage", "source.target_distribution")
        if numeric
        else source_checks.class_coverage(rows, inputs, cov),
    ]
    if numeric:
        checks.append(source_checks.target_distribution(kept, inputs, cov))
    ctx.check_cancelled()
    ctx.progress(0.35, "duplicates and conflicts")
    with onray.session(*backend, inputs.audit_ray_texts) as on:
        checks.extend(source_identity.duplicates(dataset, inputs, cov, on, store))
        ctx.check_cancelled()
        ctx.progress(0.5, "near-duplicates")
        checks.append(source_identity.near_duplicates(dataset, inputs, ctx, cov, budget, on, store))
        ctx.check_cancelled()
        ctx.progress(0.7, "single-feature leakage")
        checks.extend(source_checks.leakage(dataset, inputs, numeric))
        checks.append(source_checks.availability(inputs))
        ctx.check_cancelled()
        ctx.progress(0.85, "entity families")
        checks.append(source_identity.families(dataset, inputs, ctx, cov, on))
    checks.append(source_checks.sensitive(inputs))
    checks.append(source_checks.provenance(inputs))
    return checks


def _scanned(kept: Any, store: Any) -> Any:
    """The kept rows as a scan for the streaming checks (missingness, time, classes): the frame's own
    scan, also on the bounded path with a spill file. Those checks read the null-ness of the text
    columns, which the frame's stand-ins keep exactly (engine/audit/textstore.py), and no text; a scan
    of the spill file decodes every text to count its nulls (+220 MB and 12 s on 1.4 M conversations
    of 1.3 KB, against +5 MB and 0.1 s on the frame). Each check reads only its columns and holds its
    groups, not the rows."""
    return kept.lazy()


# ---------------------------------------------------------------- validation


def _validate_fields(inp: Inputs) -> None:
    if not inp.files:
        raise StageInputError("source: 'files' is empty; give at least one CSV, Parquet or JSONL file")
    if not inp.label_column:
        raise StageInputError("source: 'label_column' is empty; name the column that holds the label")
    if inp.label_column in inp.input_columns:
        raise StageInputError(
            f"source: the label column '{inp.label_column}' is listed in 'input_columns'; a model may not see its target"
        )
    stray = [c for c in inp.text_columns if c not in inp.input_columns]
    if stray:
        raise StageInputError(
            f"source: text column(s) {stray} are not in 'input_columns'; add them there or remove them"
        )
    unknown = [c for c in inp.availability if c not in inp.input_columns]
    if unknown:
        raise StageInputError(f"source: 'availability' names column(s) {unknown} that are not input columns")
    for f in inp.filters:
        if not f.where.strip() or not f.reason.strip():
            raise StageInputError(
                "source: every filter needs a 'reason' and a 'where' expression (rows to keep)"
            )


def _refuse_subgroups(inp: Inputs, claim: dict[str, Any], raw: Any) -> None:
    """Subgroups are measured for class-based claims of learned models only; refused up front otherwise."""
    from claimcheck.engine.data.subgroups import refuse_wide

    if not inp.subgroup_columns:
        return
    if target_type(claim) == "numeric" or claim.get("task_kind") == "causal_lm_sft":
        raise StageInputError(
            "source input 'subgroup_columns': per-subgroup support and metrics are measured for a "
            "categorical target of a text_classification or tabular claim only; remove it for this claim"
        )
    refuse_wide(raw, inp.subgroup_columns)


def _refuse_bad_jsonl(malformed: list[dict[str, Any]], files: list[str]) -> None:
    for m in malformed:
        if m["file"].lower().endswith((".jsonl", ".ndjson")) and m["malformed"]:
            where = ", ".join(f"line {loc['line']}" for loc in m["locations"] if loc["record"])[:200]
            raise StageInputError(
                f"{m['file']}: {m['malformed']} line(s) are not JSON objects ({where}); fix or remove them, "
                "or record a cleaned copy with its own checksum"
            )


# ---------------------------------------------------------------- checks


def _apply_filters(raw: Any, inp: Inputs) -> tuple[Any, list[dict[str, Any]]]:
    from claimcheck.engine.data.rows import filter_expr

    steps, cur = [], raw
    for f in inp.filters:
        try:
            nxt = cur.filter(filter_expr(f.where, f.reason, raw.schema).fill_null(False))
        except StageInputError:
            raise
        except Exception as exc:
            raise StageInputError(
                f"filter '{f.reason}' ({f.where}) cannot run on the data: {str(exc).splitlines()[0]}"
            ) from None
        steps.append({"reason": f.reason, "where": f.where, "removed": cur.height - nxt.height})
        cur = nxt
    return cur, steps


def _notes(inp: Inputs, checks: list[Check]) -> list[Note]:
    notes = []
    unresolved = [c for c in inp.input_columns if inp.availability.get(c) == "unresolved"]
    if unresolved:
        notes.append(
            Note(
                tag="limitation",
                text=f"Prediction-time availability unresolved for: {', '.join(unresolved)}.",
            )
        )
    fam = next((c for c in checks if c.id == "source.entity_families"), None)
    if fam is not None and fam.measured.get("rows_without_entity_id") and not inp.independent_rows.declared:
        notes.append(
            Note(
                tag="limitation",
                text=f"{fam.measured['rows_without_entity_id']} row(s) carry no entity id; unseen-entity claims do not cover them.",
            )
        )
    return notes
