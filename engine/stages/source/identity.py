"""The source stage's identity checks: rows with identical model inputs and their conflicting
labels (the label-noise ceiling), near-duplicate texts, and entity families — the equivalences a
split must respect."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from claimcheck.engine.audit.budget import Budget
from claimcheck.engine.audit.onray import Cluster
from claimcheck.engine.evidence import Check, atomic_write_bytes
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source.checks import (
    DUP_SHARE_WARN,
    NO_ENTITY_WARN,
    PB_DUPS,
    PB_FAMILY,
    PB_NEAR,
    PB_NOISE,
)
from claimcheck.engine.stages.source.inputs import Inputs

if TYPE_CHECKING:
    from claimcheck.engine.audit.textstore import TextStore


def duplicates(
    ds: Any,
    inp: Inputs,
    cov: str,
    on: tuple[Any, Cluster] | None = None,
    store: TextStore | None = None,
) -> list[Check]:
    """`on`: (ray, cluster) where the keys are grouped by Ray tasks (engine/audit/onray), else here;
    `store`: the text columns stay on disk, `ds` holds stand-ins (engine/audit/textstore.py)."""
    from claimcheck.engine.audit.duplicates import candidate_rows, conflict_stats, duplicate_stats
    from claimcheck.engine.data.rows import model_inputs

    cols = model_inputs(inp.model_dump(mode="json"))
    if on is not None:
        from claimcheck.engine.audit.onray.duplicates import identity_stats

        exact, norm, conf = identity_stats(*on, ds, cols, inp.normalisation, store)
        cov = on[1].covered(cov, store is not None)
    else:
        hashes = _stored_hashes(ds, cols, inp.normalisation, store)
        cand = candidate_rows(ds, cols, "none", hashes[0], store) if cols and ds.height else None
        exact = duplicate_stats(ds, cols, "none", cand)
        norm = (
            duplicate_stats(
                ds, cols, inp.normalisation, _candidates(ds, cols, inp.normalisation, store, hashes[1])
            )
            if inp.normalisation != "none"
            else exact
        )
        conf = conflict_stats(ds, cols, cand)
    status = (
        "warn"
        if norm["share"] > DUP_SHARE_WARN
        else ("info" if exact["groups"] or norm["groups"] else "pass")
    )
    dup = Check(
        id="source.duplicate_inputs",
        status=status,
        summary=(
            f"{exact['groups']} groups / {exact['rows']} rows with identical model inputs; "
            f"{norm['groups']} groups / {norm['rows']} rows after '{inp.normalisation}' "
            f"({norm['share']:.1%}); kept — they may be legitimate weights"
        ),
        coverage=cov,
        measured={"columns": cols, "exact": exact, "normalised": norm, "normalisation": inp.normalisation},
        why="Repeated inputs inflate held-out scores when they straddle a split, and may be legitimate weights.",
        playbook=PB_DUPS,
    )
    noise = Check(
        id="source.conflicting_labels",
        status="warn" if conf["groups"] else "pass",
        summary=(
            f"{conf['groups']} input-identical group(s) / {conf['rows']} rows carry more than one label; "
            f"label-noise ceiling: accuracy ≤ {conf['noise_ceiling_accuracy']:.4f}"
        ),
        coverage=cov,
        measured={"columns": cols, **conf},
        why="No model can be right on both labels of identical inputs: the ceiling bounds any claimed accuracy.",
        playbook=PB_NOISE,
    )
    return [dup, noise]


def _stored_hashes(ds: Any, cols: list[str], normalisation: str, store: TextStore | None) -> list[Any]:
    """Where the texts stay on disk: the rows' key hashes as compared exactly and after
    `normalisation`, from one read of the store; [None, None] elsewhere (candidate_rows hashes)."""
    from claimcheck.engine.audit.duplicates import stored_key_hashes_each

    if store is None or not cols or not ds.height:
        return [None, None]
    if normalisation == "none":
        return [*stored_key_hashes_each(ds, cols, ["none"], store), None]
    return stored_key_hashes_each(ds, cols, ["none", normalisation], store)


def _candidates(
    ds: Any, cols: list[str], normalisation: str, store: TextStore | None, hashes: Any = None
) -> Any:
    """The duplicate candidates after `normalisation` (None: duplicate_stats finds them in `ds`);
    `hashes`: the rows' key hashes after it, where the caller has them."""
    from claimcheck.engine.audit.duplicates import candidate_rows

    if store is None or not cols or not ds.height:
        return None
    return candidate_rows(ds, cols, normalisation, hashes, store)


def near_duplicates(
    ds: Any,
    inp: Inputs,
    ctx: StageContext,
    cov: str,
    budget: Budget | None = None,
    on: tuple[Any, Cluster] | None = None,
    store: TextStore | None = None,
) -> Check:
    """`on`: (ray, cluster) where the search runs as Ray tasks (engine/audit/onray/neardup.py), else here
    (in memory or bounded, as the budget chooses; bounded whenever the texts stay on disk in `store`)."""
    import hashlib

    import polars as pl

    from claimcheck.engine.audit.neardup import (
        METHOD,
        PAIRS_FILE,
        cluster_summary,
        near_duplicates,
        pairs_payload,
    )
    from claimcheck.engine.audit.neardup.hashing import SHINGLE_HASH
    from claimcheck.engine.data.rows import text_inputs

    cols = text_inputs(inp.model_dump(mode="json"))
    if not cols:
        return not_run(
            "source.near_duplicates",
            "no free-text model input declared ('text_columns'): near-duplicates not checked",
            coverage=cov,
            why="Near-duplicate texts leak across splits even when exact duplicates do not.",
        )
    from claimcheck.engine.audit import budget as memory_budget

    budget = budget or memory_budget.resolve(inp.memory_budget)
    # Texts left on disk (engine/audit/textstore.py) are searched on the bounded path.
    text_bytes = sum(int(ds.get_column(c).cast(pl.String).str.len_bytes().sum() or 0) for c in cols)
    path = (
        memory_budget.BOUNDED if store is not None else budget.choose(memory_budget.need_neardup(text_bytes))
    )
    if on is not None:
        from claimcheck.engine.audit.onray import neardup as on_ray

        res = on_ray.near_duplicates(
            *on, ds, cols, threshold=inp.near_dup_threshold, shingle_size=inp.shingle_size, store=store
        )
        where = on[1].covered(cov, store is not None)
    else:
        res = near_duplicates(
            ds,
            cols,
            threshold=inp.near_dup_threshold,
            shingle_size=inp.shingle_size,
            bounded=path == memory_budget.BOUNDED,
            store=store,
        )
        where = budget.covered(cov, path)
    if path == memory_budget.BOUNDED:
        memory_budget.release_free_memory()
    cl = cluster_summary(res.pairs)
    # Saved so the split stage reuses the pairs instead of recomputing them; replay only compares the hash.
    payload = pairs_payload(res.pairs)
    rel = f"data/{PAIRS_FILE}"
    if not ctx.replay:
        atomic_write_bytes(ctx.session_dir / rel, payload)
    return Check(
        id="source.near_duplicates",
        status="warn" if res.pairs.height else "pass",
        summary=(
            f"{res.pairs.height} row pair(s) with Jaccard ≥ {inp.near_dup_threshold} over {inp.shingle_size}-word "
            f"shingles (distinct texts, exact-Jaccard verified); {cl['clusters']} cluster(s), {cl['rows_in_clusters']} rows"
        ),
        coverage=where,
        measured={
            "columns": cols,
            "pairs": res.pairs.height,
            "text_pairs": res.verified_text_pairs,
            "distinct_texts": res.texts,
            "candidates": res.candidates,
            **cl,
            "threshold": inp.near_dup_threshold,
            "shingle_size": inp.shingle_size,
            "method": METHOD,
            "shingle_hash": SHINGLE_HASH,
            "candidate_probability_at_threshold": round(res.recall_at(inp.near_dup_threshold), 9),
            "pairs_path": rel,
            "pairs_sha256": hashlib.sha256(payload).hexdigest(),
        },
        why="Near-copies on both sides of a split make a held-out score measure memory, not generalisation.",
        playbook=PB_NEAR,
    )


def families(
    ds: Any, inp: Inputs, ctx: StageContext, cov: str, on: tuple[Any, Cluster] | None = None
) -> Check:
    """`on`: (ray, cluster) where each entity column's values are grouped by Ray tasks
    (engine/audit/onray/families.py), else here."""
    import hashlib

    from claimcheck.engine.audit.families import compute_families, family_summary
    from claimcheck.engine.data.rows import FAMILIES_FILE
    from claimcheck.engine.textsafe import visible

    if on is not None:
        from claimcheck.engine.audit.onray import ENTITY_IDS_IN_FRAME
        from claimcheck.engine.audit.onray.families import compute_families as on_ray

        fam = on_ray(*on, ds, inp.entity_columns)
        cov = on[1].covered(cov, sent=ENTITY_IDS_IN_FRAME)
    else:
        fam = compute_families(ds, inp.entity_columns)
    buf = io.BytesIO()
    # One chunk, so the file's row groups (and its sha256) do not follow the reader's chunks.
    fam.rechunk().write_parquet(buf, statistics=False)
    payload = buf.getvalue()
    rel = f"data/{FAMILIES_FILE}"
    if not ctx.replay:
        atomic_write_bytes(ctx.session_dir / rel, payload)
    s = family_summary(fam, ds, inp.entity_columns)
    s["multi_row_families"] = s["families"] - s["singleton_families"]
    no_id_share = s["rows_without_entity_id"] / max(s["rows"], 1)
    basis = "measured"
    if inp.independent_rows.declared:
        status, basis = "pass", "decided"
        summary = (
            "rows declared independent (a recorded decision): every row is its own family — "
            f"{visible(inp.independent_rows.rationale.strip())}"
        )
    elif not inp.entity_columns:
        status, summary = (
            "warn",
            "no entity columns declared: every row is its own family; unseen-entity claims cannot be checked "
            "(or record in the source stage that the rows are independent, with a rationale)",
        )
    else:
        status = "warn" if no_id_share > NO_ENTITY_WARN else "info"
        summary = (
            f"{s['families']:,} families over {', '.join(inp.entity_columns)}; largest {s['largest_family_rows']} rows; "
            f"{s['multi_row_families']:,} multi-row; {s['rows_without_entity_id']} rows have no entity id"
        )
    return Check(
        id="source.entity_families",
        status=status,
        basis=basis,
        summary=summary,
        coverage=cov,
        measured={
            "entity_columns": list(inp.entity_columns),
            "independent_rows_declared": inp.independent_rows.declared,
            **s,
            "families_path": rel,
            "families_sha256": hashlib.sha256(payload).hexdigest(),
        },
        why="Rows linked by a customer, thread or case are not independent; a split must keep a family together.",
        playbook=PB_FAMILY,
    )
