"""The source stage's checks: checksums, schema, transformations, missingness, time, class coverage, duplicates and near-duplicates, leakage, availability, entity families, sensitive columns and provenance."""

from __future__ import annotations

import datetime as dt
from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_applicable, not_run
from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.stages.source.inputs import Inputs

PB_INSPECT = (
    "Inspect record boundaries, types, counts, time range, missingness, class/family coverage, conflicting "
    "targets and duplicate inputs."
)
PB_BYTES = "Preserve approved source bytes, license/provenance and any sanitization code/checksum."
PB_SENSITIVE = "Do not upload additional sensitive fields simply because they could improve performance."
PB_AVAIL = "Check feature availability at prediction time."
PB_LEAK = (
    "Exclude outcomes, future aggregates, same-observation target leakage and identifiers used as shortcuts."
)
PB_UNRESOLVED = "If a feature's availability is unresolved, state that instead of inventing a justification."
PB_FAMILY = (
    "Where records connect multiple case/thread IDs, assess the connected family. Missing entity IDs limit "
    "claims about unseen-entity performance."
)
PB_IDENTITY = "Separate raw observation identity, model-input equivalence and entity membership."
PB_DUPS = "Do not blindly drop duplicates or rebalance labels: repetitions may be legitimate weights and resampling changes the distribution."
PB_NOISE = (
    "Contradictory or weak labels may limit performance; more epochs do not create missing information."
)
PB_MAPPING = "Test every target mapping and representative family, not only the majority prefix."
PB_TRANSFORM = (
    "Retain inspectable transformation code. Preserve stable source identities and parents through filters, "
    "branches and joins; report exclusions and label changes."
)
PB_PREVIEW = "Preview first, then audit published output against the source. Report coverage: a sample or schema check is not a full semantic review."
PB_NEAR = "Zero exact overlap is not proof of independence from near duplicates, pretraining data or unavailable customer identities."

# Default thresholds (docs/checks.md says where each comes from).
DUP_SHARE_WARN = 0.05  # Deepchecks DataDuplicates: share <= 5%
RARE_SHARE = 0.1  # cleanlab class imbalance: rarest < 0.1 / K
RARE_COUNT = 20
LEAK_GAIN_FAIL = 0.8  # Deepchecks FeatureLabelCorrelation: PPS < 0.8
LEAK_GAIN_WARN = 0.5
ID_GAIN_FAIL = 0.5
ID_GAIN_WARN = 0.05  # Deepchecks IdentifierLabelCorrelation: PPS <= 0 (we allow sampling noise)
MISSING_WARN = 0.5
NO_ENTITY_WARN = 0.05


def checksum(inp: Inputs, paths: list) -> Check:
    from claimcheck.engine.data.rows import sha256_file

    files = []
    for name, p in zip(inp.files, paths, strict=True):
        if not p.is_file():
            raise StageInputError(f"data file {name} not found (looked at {p}); check the path in 'files'")
        files.append({"path": name, "sha256": sha256_file(p), "bytes": p.stat().st_size})
    total = sum(f["bytes"] for f in files)
    return Check(
        id="source.checksum",
        status="pass",
        summary=f"{len(files)} file(s), {total:,} bytes hashed (sha256); replay fails if a byte changes",
        measured={"files": files, "total_bytes": total},
        why="The evidence holds only for these exact bytes.",
        playbook=PB_BYTES,
    )


def schema(raw: Any, schema: Any, malformed: list[dict[str, Any]], cov: str) -> Check:
    from claimcheck.engine.audit.profile import schema_of

    bad = sum(m["malformed"] for m in malformed)
    bad_utf8 = sum(m["bad_utf8_lines"] for m in malformed)
    cols = schema_of(schema)
    per_file = raw.group_by("source_file", maintain_order=True).len()
    rows_per_file = {str(f): int(n) for f, n in per_file.iter_rows()}
    if raw.height == 0:
        status, summary = "fail", "the files hold no data rows"
    elif bad or bad_utf8:
        first = next((m for m in malformed if m["locations"]), None)
        loc = f"; first at {first['file']} line {first['locations'][0]['line']}" if first else ""
        status = "warn"
        summary = (
            f"{raw.height:,} rows, {len(cols)} columns; {bad} malformed record(s) kept (ragged fields truncated "
            f"or padded with nulls), {bad_utf8} line(s) with non-UTF-8 bytes{loc}"
        )
    else:
        status, summary = "pass", f"{raw.height:,} rows, {len(cols)} columns; every record well formed"
    return Check(
        id="source.schema",
        status=status,
        summary=summary,
        coverage=cov,
        measured={
            "rows": raw.height,
            "columns": cols,
            "rows_per_file": rows_per_file,
            "malformed_records": bad,
            "non_utf8_lines": bad_utf8,
            "malformed_by_file": malformed,
        },
        why="Record boundaries and types decide what every later count means; malformed rows are located, not dropped.",
        playbook=PB_INSPECT,
    )


def transformations(inp: Inputs, n_raw: int, n_final: int, steps: list[dict[str, Any]], cov: str) -> Check:
    from claimcheck.engine.data.rows import model_inputs

    excluded = {
        "unavailable_columns": [c for c in inp.input_columns if c in inp.unavailable_columns],
        "sensitive_columns": [c for c in inp.input_columns if c in inp.sensitive_columns],
        "availability_no": [c for c in inp.input_columns if inp.availability.get(c) == "no"],
    }
    mapped = sum(1 for k, v in inp.label_mapping.items() if k != v)
    return Check(
        id="source.transformations",
        status="info",
        summary=(
            f"{n_raw:,} rows read, {n_final:,} kept; "
            + ", ".join(f"{s['removed']:,} removed: {s['reason']}" for s in steps)
            + f"; {mapped} label value(s) renamed by the mapping"
        ),
        coverage=cov,
        measured={
            "rows_read": n_raw,
            "rows_kept": n_final,
            "steps": steps,
            "label_mapping": dict(inp.label_mapping),
            "excluded_columns": excluded,
            "model_inputs": model_inputs(inp.model_dump(mode="json")),
        },
        why="Exclusions and label changes are part of the data's meaning; each is a recorded expression with its count.",
        playbook=PB_TRANSFORM,
    )


def non_finite(kept: Any, inp: Inputs, cov: str) -> Check:
    """NaN, ±inf and numbers over TOO_LARGE per numeric model input, and what `non_finite` does with
    them: refuse (fail; later stages are not run) or exclude_rows (warn; the rows are left out)."""
    import polars as pl

    from claimcheck.engine.data.rows import TOO_LARGE, non_finite_row, numeric_inputs
    from claimcheck.engine.textsafe import visible

    cols = numeric_inputs(inp.model_dump(mode="json"), kept.schema)
    per: dict[str, dict[str, int]] = {}
    if cols:
        counts = kept.select(
            *[pl.col(c).is_nan().sum().alias(f"nan:{c}") for c in cols],
            *[pl.col(c).is_infinite().sum().alias(f"inf:{c}") for c in cols],
            *[(pl.col(c).is_finite() & (pl.col(c).abs() > TOO_LARGE)).sum().alias(f"big:{c}") for c in cols],
            non_finite_row(cols).sum().alias("rows"),
        ).row(0, named=True)
        for c in cols:
            n = {"nan": counts[f"nan:{c}"], "inf": counts[f"inf:{c}"], "too_large": counts[f"big:{c}"]}
            if any(n.values()):
                per[c] = {k: int(v) for k, v in n.items()}
    rows = int(counts["rows"]) if cols else 0
    found = "; ".join(
        f"{visible(c)}: " + ", ".join(f"{v:,} {k.replace('_', ' ')}" for k, v in n.items() if v)
        for c, n in per.items()
    )
    if not cols:
        status, summary = "info", "no floating-point model input: nothing can be NaN or inf"
    elif not rows:
        status, summary = "pass", f"no NaN, inf or number over 1e150 in {', '.join(map(visible, cols))}"
    elif inp.non_finite == "refuse":
        status = "fail"
        summary = (
            f"{rows:,} row(s) hold NaN, inf or a number over 1e150 ({found}); no learner can read "
            'them: fix the data, filter the rows, or set non_finite = "exclude_rows" to leave them out'
        )
    else:
        status, summary = "warn", f"{rows:,} row(s) left out (non_finite = exclude_rows): {found}"
    return Check(
        id="source.non_finite",
        status=status,
        summary=summary,
        coverage=cov,
        measured={
            "numeric_inputs": cols,
            "by_column": per,
            "rows": rows,
            "treatment": inp.non_finite,
            "too_large": TOO_LARGE,
        },
        why="A NaN, an infinity or a number whose square overflows makes every fit fail or mislead.",
        playbook=PB_INSPECT,
    )


def missingness(kept: Any, inp: Inputs, cov: str) -> Check:
    """`kept`: the rows after the filters, a frame or a scan (engine/audit/profile.py streams it)."""
    from claimcheck.engine.audit.profile import missingness
    from claimcheck.engine.data.rows import ENGINE_COLUMNS

    cols = [c for c in kept.lazy().collect_schema() if c not in ENGINE_COLUMNS]
    m = missingness(kept, cols)
    high = sorted(c for c in inp.input_columns if m["overall"].get(c, 0.0) > MISSING_WARN)
    with_nulls = {c: v for c, v in m["overall"].items() if v > 0}
    return Check(
        id="source.missingness",
        status="warn" if high else "info",
        summary=(
            f"{len(with_nulls)} column(s) have nulls; {m['rows_with_any_null']:,} row(s) "
            f"({m['rows_with_any_null_share']:.1%}) have at least one"
            + (f"; input column(s) over {MISSING_WARN:.0%} null: {', '.join(high)}" if high else "")
        ),
        coverage=cov,
        measured={
            "null_share": m["overall"],
            "null_share_by_class": m["per_class"],
            "inputs_mostly_null": high,
            "rows_with_any_null": m["rows_with_any_null"],
            "rows_with_any_null_share": m["rows_with_any_null_share"],
        },
        why="Missingness that differs by class is a signal a model can learn that deployment may not have.",
        playbook=PB_INSPECT,
    )


def time(kept: Any, inp: Inputs, cov: str) -> list[Check]:
    """`kept`: the rows after the filters, a frame or a scan (engine/audit/profile.py streams it)."""
    from claimcheck.engine.audit.profile import time_profile

    if not inp.time_column:
        return [
            not_run(
                "source.time_range",
                "no time column declared: time range, drift and time splits cannot be checked",
                coverage=cov,
                why="Without a time column neither chronology nor drift can be measured.",
            )
        ]
    as_of = None
    if inp.as_of:
        try:
            as_of = dt.datetime.fromisoformat(inp.as_of.replace("Z", "+00:00")).replace(tzinfo=None)
        except ValueError:
            raise StageInputError(
                f"source: 'as_of' = '{inp.as_of}' is not an ISO date (e.g. 2025-09-01)"
            ) from None
    from claimcheck.engine.data.rows import resolve_time_unit

    now = as_of or dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)
    unit = resolve_time_unit(inp.time_column, kept.lazy().collect_schema()[inp.time_column], inp.time_unit)
    tp = time_profile(kept, inp.time_column, unit, now)
    rows = tp["parsed"] + tp["unparseable"] + tp["missing"]
    future = tp.pop("future", 0)
    problems = []
    if tp["unparseable"]:
        problems.append(f"{tp['unparseable']} unparseable")
    if tp["missing"]:
        problems.append(f"{tp['missing']} missing")
    for key, what in (("empty_months", "month"), ("empty_years", "year")):
        if tp.get(key):
            problems.append(f"{len(tp[key])} empty {what}(s) inside the range")
    rng = (
        f"{tp.get('min', '?')} .. {tp.get('max', '?')} ({unit})"
        if tp["parsed"]
        else "no parseable timestamps"
    )
    checks = [
        Check(
            id="source.time_range",
            status="fail" if not tp["parsed"] and rows else ("warn" if problems else "pass"),
            summary=rng + ("; " + ", ".join(problems) if problems else ""),
            coverage=cov,
            measured=tp,
            why="The time range says which deployment period the evidence can speak for; gaps and bad stamps bias time splits.",
            playbook=PB_INSPECT,
        )
    ]
    if unit == "ordinal":  # an order, not a date: nothing can lie in the future
        return checks
    checks.append(
        Check(
            id="source.future_timestamps",
            status="warn" if future else "pass",
            summary=f"{future} timestamp(s) after {now.isoformat()}"
            + ("" if as_of else " (the run time; set 'as_of' to pin it)"),
            coverage=cov,
            measured={"future": future, "as_of": now.isoformat()},
            replay="compare" if as_of else "observation",
            why="Timestamps from the future are recording errors or clock problems, and break chronology.",
            playbook=PB_INSPECT,
        )
    )
    return checks


def class_coverage(kept: Any, inp: Inputs, cov: str) -> Check:
    """`kept`: the rows after the filters, a frame or a scan (engine/audit/profile.py streams it)."""
    from claimcheck.engine.audit.profile import class_coverage

    c = class_coverage(kept, inp.label_column, inp.label_mapping, RARE_SHARE, RARE_COUNT)
    problems = []
    if len(c["per_target"]) < 2 and c["rows"]:
        problems.append(f"only {len(c['per_target'])} class — nothing to classify")
    if c["null_labels"]:
        problems.append(f"{c['null_labels']} null label(s)")
    if c["unmapped_raw_values"]:
        problems.append(
            f"{len(c['unmapped_raw_values'])} raw value(s) with no mapping ({sum(c['unmapped_raw_values'].values())} rows)"
        )
    if c["unused_mapping_keys"]:
        problems.append(f"mapping key(s) never seen: {', '.join(c['unused_mapping_keys'])}")
    if c["rare_classes"]:
        problems.append(f"rare class(es) under {c['rare_limit_rows']} rows: {', '.join(c['rare_classes'])}")
    status = "fail" if (len(c["per_target"]) < 2) else ("warn" if problems else "pass")
    counts = ", ".join(f"{k} {v}" for k, v in sorted(c["per_target"].items(), key=lambda kv: -kv[1]))
    return Check(
        id="source.class_coverage",
        status=status,
        summary=(counts or "no labelled rows") + ("; " + "; ".join(problems) if problems else ""),
        coverage=cov,
        measured=c,
        why="Every mapped value must route where intended; rare classes need per-class evidence, not accuracy.",
        playbook=PB_MAPPING,
    )


def target_distribution(kept: Any, inp: Inputs, cov: str) -> Check:
    """class_coverage's counterpart for a numeric target: its distribution, null and non-numeric values."""
    from claimcheck.engine.audit.target import distribution
    from claimcheck.engine.shapes.data import TargetDistribution
    from claimcheck.engine.textsafe import visible

    d = TargetDistribution.model_validate(distribution(kept))
    s, problems = d.summary, []
    if d.non_numeric:
        problems.append(
            f"{d.non_numeric} label(s) in '{visible(inp.label_column)}' are not numbers (e.g. "
            + ", ".join(repr(visible(v)) for v in d.non_numeric_examples)
            + '): fix them, filter them out, or declare target_type = "categorical" in the claim'
        )
    if d.distinct < 2:
        problems.append(f"{d.distinct} distinct value(s) — nothing to predict")
    if d.null_labels:
        problems.append(f"{d.null_labels} null label(s), left out")
    shape = (
        f"{s.count:,} values, range [{s.min:.4g}, {s.max:.4g}], median {s.p50:.4g}, mean {s.mean:.4g}, "
        f"std {s.std:.4g}, 5–95% [{s.p05:.4g}, {s.p95:.4g}]"
        if s.count
        else "no numeric target values"
    )
    return Check(
        id="source.target_distribution",
        status="fail" if (d.non_numeric or d.distinct < 2) else ("warn" if problems else "info"),
        summary=shape + ("; " + "; ".join(problems) if problems else ""),
        coverage=cov,
        measured=d,
        why="A numeric target's range and spread are what every regression error is read against.",
        playbook=PB_INSPECT,
    )


def numeric_target_not_run(check_id: str, counterpart: str) -> Check:
    """A class-based check that does not apply to a numeric target, naming the check that replaces it."""
    return not_applicable(check_id, f"the claim's target is numeric — see {counterpart}")


def leakage(ds: Any, inp: Inputs, numeric: bool = False) -> list[Check]:
    from claimcheck.engine.audit.leakage import identifier_candidates, sample, single_feature_scores
    from claimcheck.engine.data.rows import ENGINE_COLUMNS, model_inputs

    allowed = set(model_inputs(inp.model_dump(mode="json")))
    sm, cov = sample(ds)
    cols = [
        c
        for c in ds.columns
        if c not in ENGINE_COLUMNS and c != inp.label_column and c not in inp.text_columns
    ]
    ids = identifier_candidates(sm, cols, inp.id_column)
    scores = single_feature_scores(sm, cols, numeric=numeric) if sm.height else {}
    return [_identifier_check(ids, scores, allowed, cov), _single_feature_check(scores, allowed, cov)]


def _score_text(score: dict[str, Any]) -> str:
    """One column's single-feature score in words: accuracy vs trivial, or out-of-fold R² (numeric target)."""
    if "r2" in score:
        return f"out-of-fold R² {score['r2']:.3f}"
    return f"acc {score['accuracy']:.3f} vs trivial {score['trivial']:.3f}"


def _identifier_check(ids: list[str], scores: dict[str, Any], allowed: set[str], cov: str) -> Check:
    id_rows = [scores[c] for c in ids if c in scores]
    id_hit = [r["column"] for r in id_rows if r["gain"] > ID_GAIN_WARN]
    id_bad = [c for c in id_hit if c in allowed and scores[c]["gain"] >= ID_GAIN_FAIL]
    id_status = (
        "fail"
        if id_bad
        else ("warn" if any(c in allowed for c in id_hit) else ("info" if id_hit else "pass"))
    )
    return Check(
        id="source.identifier_shortcut",
        status=id_status,
        summary=(
            "identifier-like column(s) that predict the label: "
            + ", ".join(f"{c} ({_score_text(scores[c])})" for c in id_hit)
            + ("" if not id_hit or id_bad else " — not a model input")
            if id_hit
            else f"{len(ids)} identifier-like column(s); none predicts the label above the trivial rate"
        ),
        coverage=cov,
        measured={
            "candidates": ids,
            "scores": id_rows,
            "flagged": id_hit,
            "flagged_in_model_inputs": [c for c in id_hit if c in allowed],
        },
        why="An id allocated by queue or time lets a model read the answer off the record number.",
        playbook=PB_LEAK,
    )


def _single_feature_check(scores: dict[str, Any], allowed: set[str], cov: str) -> Check:
    leak = sorted(
        (c for c, s in scores.items() if s["gain"] >= LEAK_GAIN_FAIL), key=lambda c: -scores[c]["gain"]
    )
    strong = [c for c, s in scores.items() if LEAK_GAIN_WARN <= s["gain"] < LEAK_GAIN_FAIL]
    leak_in = [c for c in leak if c in allowed]
    status = (
        "fail"
        if leak_in
        else ("warn" if [c for c in strong if c in allowed] else ("info" if leak else "pass"))
    )
    return Check(
        id="source.single_feature_leakage",
        status=status,
        summary=(
            (
                "suspected leakage (one column alone nearly determines the label): "
                + ", ".join(
                    f"{c} gain {scores[c]['gain']:.3f}"
                    + ("" if c in allowed else " [excluded from model inputs]")
                    for c in leak
                )
            )
            if leak
            else "no single non-text column nearly determines the label"
        )
        + (f"; strong single predictors: {', '.join(strong)}" if strong else ""),
        coverage=cov,
        measured={
            "scores": list(scores.values()),
            "suspected": leak,
            "suspected_in_model_inputs": leak_in,
            "strong": strong,
        },
        why="A column that alone predicts the label is usually an outcome recorded after the fact or a copy of it.",
        playbook=PB_LEAK,
    )


def availability(inp: Inputs) -> Check:
    undeclared = [
        c for c in inp.input_columns if c not in inp.availability and c not in inp.unavailable_columns
    ]
    no = [c for c in inp.input_columns if inp.availability.get(c) == "no" or c in inp.unavailable_columns]
    unresolved = [c for c in inp.input_columns if inp.availability.get(c) == "unresolved" and c not in no]
    status = "fail" if undeclared else ("warn" if unresolved else "pass")
    parts = []
    if undeclared:
        parts.append(f"no availability declared for: {', '.join(undeclared)}")
    if no:
        parts.append(f"excluded as unavailable at prediction time: {', '.join(no)}")
    if unresolved:
        parts.append(f"unresolved (a limitation, not guessed): {', '.join(unresolved)}")
    return Check(
        id="source.prediction_time_availability",
        status=status,
        basis="decided",
        summary="; ".join(parts) or "every input column is declared available at prediction time",
        measured={"undeclared": undeclared, "excluded": no, "unresolved": unresolved},
        why="A feature only known after the outcome makes offline scores unreachable in deployment.",
        playbook=PB_UNRESOLVED,
    )


def sensitive(inp: Inputs) -> Check:
    from claimcheck.engine.data.rows import model_inputs, text_inputs

    d = inp.model_dump(mode="json")
    leaked = sorted(set(inp.sensitive_columns) & (set(model_inputs(d)) | set(text_inputs(d))))
    removed = [c for c in inp.sensitive_columns if c in inp.input_columns]
    return Check(
        id="source.sensitive_columns",
        status="fail" if leaked else "pass",
        summary=(
            f"sensitive column(s) in the model inputs: {', '.join(leaked)}"
            if leaked
            else f"{len(inp.sensitive_columns)} declared sensitive column(s) absent from the model inputs"
            + (f" ({', '.join(removed)} removed from input_columns)" if removed else "")
        ),
        basis="decided",
        measured={
            "declared": list(inp.sensitive_columns),
            "in_model_inputs": leaked,
            "removed_from_inputs": removed,
        },
        why="Sensitive fields do not go into a model because they might help.",
        playbook=PB_SENSITIVE,
    )


def provenance(inp: Inputs) -> Check:
    missing = [k for k in ("license", "provenance") if not getattr(inp, k).strip()]
    return Check(
        id="source.licence_provenance",
        status="warn" if missing else "pass",
        basis="decided",
        summary=("not stated: " + ", ".join(missing)) if missing else "licence and provenance recorded",
        measured={"license": inp.license, "provenance": inp.provenance},
        why="A public data set is not automatically representative or unrestricted for every use.",
        playbook=PB_BYTES,
    )
