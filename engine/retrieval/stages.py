"""The checks each stage writes for a retrieval claim (claim.task_kind = "retrieval").

source.retrieval (the judged pairs), split.query_integrity (every query in one split),
baseline.retrieval (random ranking and BM25 on the dev queries), the contract's pinned encoder
(contract.candidate), and the artifact stage's locked-test ranking of every arm (artifact.ranking,
artifact.comparison). Checks of the stages' other paths that a retrieval claim has no use for are
recorded as not applicable through the check registry.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.pipeline.checks import declaration, not_applicable
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.retrieval import data as rdata
from claimcheck.engine.retrieval import rankers
from claimcheck.engine.shapes import retrieval as shapes
from claimcheck.engine.stats import ranking
from claimcheck.engine.stats.uncertainty import Bootstrap
from claimcheck.engine.textsafe import visible

TRIVIAL, BM25, BASE_MODEL = "trivial_baseline", "bm25", "base_model"
SHOWN_IDS = 20  # ids named in a record, at most
# The encoder's reading settings the contract pins (the recipe's values; not yet inputs).
MAX_LENGTH, BATCH_SIZE = 128, 32
# Dev queries the reload-parity check embeds with two independent loads of the encoder.
PARITY_QUERIES = 16
# What each arm of the locked-test ranking is ("unchanged" / "fine_tuned": the candidate of a claim
# without / with fine-tuning).
WHAT = {
    "unchanged": "the unchanged encoder, cosine similarity",
    "fine_tuned": "the encoder with the contrastive LoRA adapters the job trained, cosine similarity",
    "base_model": "the unchanged encoder the fine-tune started from, cosine similarity",
    TRIVIAL: rankers.TRIVIAL_WHAT,
    BM25: rankers.BM25_WHAT,
}


def is_retrieval(upstream: dict[str, StageRecord]) -> bool:
    return "claim" in upstream and upstream["claim"].inputs.get("task_kind") == "retrieval"


def _claim(upstream: dict[str, StageRecord]) -> dict[str, Any]:
    return upstream["claim"].inputs


def _k(upstream: dict[str, StageRecord]) -> int:
    return int(_claim(upstream).get("ranking_k") or 10)


def _metric(upstream: dict[str, StageRecord]) -> str:
    m = str(_claim(upstream).get("primary_metric") or "ndcg_at_k")
    if m not in ranking.METRICS:
        raise StageInputError(
            f"claim.primary_metric '{m}' is not a ranking metric ({', '.join(ranking.METRICS)})"
        )
    return m


def _check(
    check_id: str, status: str, summary: str, measured: Any, why: str, coverage: str = "full"
) -> Check:
    return Check(
        id=check_id,
        status=status,
        summary=summary,
        coverage=coverage,
        measured=measured,
        why=why,
        playbook=declaration(check_id).playbook,
    )


# ---------------------------------------------------------------- source


def refuse_misplaced(source_inputs: Any, claim: dict[str, Any]) -> None:
    """[source.retrieval] belongs to a retrieval claim, and a retrieval claim needs it."""
    retrieval = claim.get("task_kind") == "retrieval"
    if source_inputs.retrieval.named() and not retrieval:
        raise StageInputError(
            "source: [source.retrieval] is read by a retrieval claim only (claim.task_kind = 'retrieval'); remove it"
        )
    if retrieval:
        cols = rdata.columns(source_inputs.model_dump(mode="json"))
        if (
            cols.query_column not in source_inputs.input_columns
            or cols.doc_column not in source_inputs.input_columns
        ):
            raise StageInputError(
                "source: the retrieval query and document columns are what a ranker reads: list "
                f"'{visible(cols.query_column)}' and '{visible(cols.doc_column)}' in input_columns"
            )


def source_check(dataset: Any, source_inputs: dict[str, Any], cov: str) -> Check:
    """The judged pairs: queries, documents, relevant pairs per query, queries without a relevant one."""
    import polars as pl

    cols = rdata.columns(source_inputs)
    corp = rdata.corpus(dataset, cols)
    qs = rdata.queries(dataset, cols, corp)
    per_query = (qs.relevance > 0).sum(axis=1)
    empty = [q for q, n in zip(qs.ids, per_query, strict=True) if n == 0]
    grades = dataset.group_by(pl.col("target").cast(pl.String)).len().sort("target")
    several_docs = _several(dataset, cols.doc_id_column, cols.doc_column)
    several_queries = _several(dataset, cols.query_id_column, cols.query_column)
    judged_twice = dataset.height - dataset.unique(subset=[cols.query_id_column, cols.doc_id_column]).height
    measured = shapes.SourceRetrieval(
        queries=len(qs.ids),
        documents=len(corp.ids),
        pairs=dataset.height,
        relevant_pairs=int(per_query.sum()),
        grades=dict(zip(grades["target"].to_list(), grades["len"].to_list(), strict=True)),
        relevant_per_query={
            "min": float(per_query.min(initial=0)),
            "median": float(np.median(per_query)) if per_query.size else 0.0,
            "max": float(per_query.max(initial=0)),
        },
        queries_without_relevant=len(empty),
        queries_without_relevant_ids=empty[:SHOWN_IDS],
        documents_with_several_texts=several_docs[:SHOWN_IDS],
        queries_with_several_texts=several_queries[:SHOWN_IDS],
        pairs_judged_twice=judged_twice,
    )
    bad = several_docs or several_queries
    status = "fail" if bad or not len(empty) < len(qs.ids) else ("warn" if empty or judged_twice else "pass")
    summary = (
        f"{len(qs.ids)} queries, {len(corp.ids)} documents, {dataset.height} judged pairs "
        f"({int(per_query.sum())} relevant; per query min {measured.relevant_per_query['min']:g}, "
        f"median {measured.relevant_per_query['median']:g}, max {measured.relevant_per_query['max']:g}); "
        f"{len(empty)} quer{'y' if len(empty) == 1 else 'ies'} without a relevant document"
        + (
            f" ({', '.join(visible(q) for q in empty[:5])}{'…' if len(empty) > 5 else ''}): not scored by any ranking metric"
            if empty
            else ""
        )
        + (f"; {len(several_docs)} document id(s) with several texts" if several_docs else "")
        + (f"; {len(several_queries)} query id(s) with several texts" if several_queries else "")
        + (f"; {judged_twice} pair(s) judged twice (the highest grade counts)" if judged_twice else "")
    )
    why = "A ranking metric is undefined for a query with no relevant document; an id with two texts is two items."
    return _check("source.retrieval", status, summary, measured, why, cov)


def _several(frame: Any, id_col: str, text_col: str) -> list[str]:
    import polars as pl

    g = frame.group_by(pl.col(id_col).cast(pl.String)).agg(pl.col(text_col).n_unique().alias("n"))
    return sorted(g.filter(pl.col("n") > 1)[id_col].to_list())


# ---------------------------------------------------------------- split


def split_check(joined: Any, source_inputs: dict[str, Any]) -> Check:
    """Every query's pairs in one split; per split its queries, scored queries and pairs."""
    import polars as pl

    cols = rdata.columns(source_inputs)
    q = pl.col(cols.query_id_column).cast(pl.String)
    spread = joined.group_by(q).agg(pl.col("split").n_unique().alias("n"))
    crossing = sorted(spread.filter(pl.col("n") > 1)[cols.query_id_column].to_list())
    per_split = {}
    for name in ("train", "dev", "calibration", "test"):
        part = joined.filter(pl.col("split") == name)
        relevant = part.filter(
            pl.col("target").cast(pl.String).map_elements(rdata.grade, return_dtype=pl.Float64) > 0
        )
        per_split[name] = shapes.SplitQueries(
            queries=part.select(q).n_unique() if part.height else 0,
            scored_queries=relevant.select(q).n_unique() if relevant.height else 0,
            pairs=part.height,
        )
    measured = shapes.QueryIntegrity(
        queries=spread.height,
        queries_in_several_splits=len(crossing),
        crossing_ids=crossing[:SHOWN_IDS],
        per_split=per_split,
    )
    counts = ", ".join(f"{s} {p.queries} ({p.scored_queries} scored)" for s, p in per_split.items())
    summary = (
        f"every one of {spread.height} queries lies in one split; queries per split: {counts}"
        if not crossing
        else f"{len(crossing)} of {spread.height} queries have pairs in several splits "
        f"({', '.join(visible(q) for q in crossing[:5])}{'…' if len(crossing) > 5 else ''}): split by groups with the "
        f"query id '{visible(cols.query_id_column)}' among the source's entity_columns"
    )
    why = "A query seen in training and scored in test measures memory, not retrieval; the query is the unit."
    return _check("split.query_integrity", "fail" if crossing else "pass", summary, measured, why)


# ---------------------------------------------------------------- scoring shared by baseline and artifact


def _scored_arms(
    qs: rdata.Queries, scores: dict[str, np.ndarray], k: int, boot: Bootstrap
) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, Any]]]:
    """Per arm and metric: the per-query values on the scored queries, and the mean with its interval."""
    keep = qs.scored
    values = {
        arm: {m: ranking.per_query(m, qs.relevance[keep], s[keep], k) for m in ranking.METRICS}
        for arm, s in scores.items()
    }
    intervals = {
        arm: {m: ranking.interval(m, v, boot) for m, v in per.items()} for arm, per in values.items()
    }
    return values, intervals


def _ranking_text(intervals: dict[str, dict[str, Any]], metric: str) -> str:
    return ", ".join(f"{arm} {iv[metric]['estimate']:.4f}" for arm, iv in intervals.items())


def _band(d: dict[str, Any]) -> str:
    from claimcheck.engine.artifact.common import band

    return band(d)


# ---------------------------------------------------------------- baseline


def baseline_record(inputs: Any, upstream: dict[str, StageRecord], ctx: StageContext) -> StageRecord:
    """The baseline stage of a retrieval claim: a random ranking and BM25 on the dev queries."""
    from claimcheck.engine.baseline.records import locked_test_check
    from claimcheck.engine.data import rows, splits

    ctx.progress(0.05, "reading the corpus and the dev queries")
    source_inputs = upstream["source"].inputs
    cols = rdata.columns(source_inputs)
    corp = rdata.corpus(
        rows.load_dataset(source_inputs, ctx).select(cols.doc_id_column, cols.doc_column).collect(), cols
    )
    dev = splits.rows("dev", upstream, ctx, caller="baseline")
    if dev.height == 0:
        raise StageInputError("the dev split is empty: a retrieval baseline is measured on the dev queries")
    qs = rdata.queries(dev, cols, corp)
    k, metric = _k(upstream), _metric(upstream)
    ctx.progress(0.3, "BM25 over the corpus")
    scores = {
        TRIVIAL: rankers.random_scores(len(qs.ids), len(corp.ids), inputs.seed),
        BM25: rankers.bm25_scores(qs.texts, corp.texts),
    }
    boot = Bootstrap(n=inputs.bootstrap_resamples, seed=inputs.bootstrap_seed)
    ctx.progress(0.6, "intervals over queries")
    values, intervals = _scored_arms(qs, scores, k, boot)
    diffs = {m: ranking.paired(m, values[BM25][m], values[TRIVIAL][m], boot) for m in ranking.METRICS}
    d = diffs[metric]
    learnable = bool("lo" in d and d["lo"] > 0)
    what = {TRIVIAL: rankers.TRIVIAL_WHAT, BM25: rankers.BM25_WHAT}
    measured = shapes.BaselineRetrieval(
        split="dev",
        k=k,
        corpus=len(corp.ids),
        queries=len(qs.ids),
        queries_without_relevant=int((~qs.scored).sum()),
        primary_metric=metric,
        arms={a: shapes.ArmRanking(what=what[a], metrics=intervals[a]) for a in scores},
        differences=diffs,
        learnable=learnable,
    )
    check = _check(
        "baseline.retrieval",
        "pass" if learnable else "warn",
        f"{metric} (k = {k}) on {int(qs.scored.sum())} dev queries over {len(corp.ids)} documents: "
        f"{_ranking_text(intervals, metric)}; bm25 − random ranking {d['estimate']:+.4f} {_band(d)}"
        + (
            ""
            if learnable
            else f"; not shown learnable: {d['refused']}"
            if d.get("refused")
            else "; BM25 is not shown better than a random ranking"
        ),
        measured,
        "A model is judged against what a random ranking and the conventional lexical ranker already achieve.",
    )
    reason = "a retrieval claim: the random ranking and BM25 are measured in baseline.retrieval"
    checks = [check]
    checks += [
        not_applicable(c, reason)
        for c in ("baseline.trivial", "baseline.conventional", "baseline.predictions")
    ]
    checks.append(locked_test_check(upstream, ctx))
    checks.append(not_applicable("baseline.timing", reason))
    ctx.progress(1.0, "done")
    return StageRecord(stage="baseline", inputs=inputs.model_dump(mode="json"), checks=checks)


# ---------------------------------------------------------------- contract


def contract_candidate(
    inputs: Any, upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[dict[str, Any], Any, Check, int]:
    """The effective contract of a retrieval claim: the unchanged encoder pinned by its files' sha256."""
    from claimcheck.engine.training.models import resolve_model_path
    from claimcheck.engine.training.resolve import Resolution

    res = Resolution()
    eff: dict[str, Any] = {"candidate_kind": "encoder"}
    eff["task_kind"] = (
        res.same("task_kind", "retrieval")
        if inputs.task_kind == "retrieval"
        else res.resolved(
            "task_kind", inputs.task_kind, "retrieval", "the claim's task kind (no fine-tuning)"
        )
    )
    path = resolve_model_path(inputs.model_path, ctx.workspace)
    ctx.progress(None, "hashing the encoder's files")
    digest, files = rankers.folder_digest(path)
    spec = {
        "model_path": res.same("model_path", inputs.model_path),
        "model_sha256": digest,
        "model_files": files,
        "ranking_k": _k(upstream),
        "max_length": MAX_LENGTH,
        "batch_size": BATCH_SIZE,
        "normalize": True,
        "versions": rankers.versions(),
    }
    eff.update(
        encoder=spec,
        model_path=inputs.model_path,
        model_sha256=digest,
        seed=res.same("seed", inputs.seed),
        required_checks=["contract.requested_vs_effective", "contract.candidate"],
        on_required_fail=res.same("on_required_fail", inputs.on_required_fail),
    )
    from claimcheck.engine.data import splits

    rows = splits.rows("train", upstream, ctx, caller="contract", labels=False).height
    check = Check(
        id="contract.candidate",
        status="pass",
        summary=(
            f"the unchanged encoder {inputs.model_path} ({files} files, {digest[7:19]}…), cosine similarity of "
            f"normalised embeddings, max {MAX_LENGTH} tokens, k = {spec['ranking_k']}; loaded and scored in the "
            "artifact stage, no job is dispatched"
        ),
        measured={"candidate_kind": "encoder", **{k: v for k, v in spec.items()}},
        why="Without fine-tuning, a retrieval claim's candidate is the unchanged encoder; it is pinned like any job.",
        playbook=declaration("contract.candidate").playbook,
    )
    return eff, res, check, rows


# ---------------------------------------------------------------- artifact


def artifact_checks(
    inputs: Any, eff: dict[str, Any], upstream: dict[str, StageRecord], ctx: StageContext
) -> tuple[list[Check], dict[str, Any]]:
    """Identity, reload parity, the locked-test ranking of every arm and the comparison."""
    from claimcheck.engine.training.models import resolve_model_path
    from claimcheck.engine.training.schema import effective

    spec = effective(eff).encoder
    if spec is None:
        raise StageInputError("the contract pins no encoder: re-run and freeze the contract stage")
    path = resolve_model_path(spec.model_path, ctx.workspace)
    ctx.progress(0.05, "encoder identity")
    checks = [_loaded_here(spec.model_path), _identity(path, spec)]
    model = rankers.load_encoder(path, spec.max_length)
    checks.append(_parity(model, path, spec, inputs.parity_tolerance, upstream, ctx))
    ctx.check_cancelled()
    checks += ranked_checks(inputs, spec, {"candidate": model}, upstream, ctx)
    return checks, {"checks": checks, "metric": _metric(upstream)}


def ranked_checks(
    inputs: Any, spec: Any, models: dict[str, Any], upstream: dict[str, StageRecord], ctx: StageContext
) -> list[Check]:
    """The locked-test ranking of every arm (`models`: the encoder arms by name) and the comparison."""
    from claimcheck.engine.artifact.arms import locked_read, locked_test
    from claimcheck.engine.data import rows

    checks: list[Check] = []
    source_inputs = upstream["source"].inputs
    cols = rdata.columns(source_inputs)

    corp = rdata.corpus(
        rows.load_dataset(source_inputs, ctx).select(cols.doc_id_column, cols.doc_column).collect(), cols
    )
    lt = locked_test(inputs.max_test_rows, inputs.seed, upstream, ctx)
    qs = rdata.queries(lt.rows, cols, corp)
    checks.append(locked_read(lt.reads, lt.total, lt.coverage))
    arms = ["candidate", *[c for c in inputs.comparators if c != "candidate"]]
    ctx.progress(0.3, "ranking the corpus for the locked-test queries")
    scores, indexes = _arm_scores(arms, models, qs, corp, spec, inputs.seed)
    boot = Bootstrap(n=inputs.bootstrap_resamples, seed=inputs.seed)
    values, intervals = _scored_arms(qs, scores, spec.ranking_k, boot)
    checks.append(_arms(arms, scores, qs))
    metric = _metric(upstream)
    what = {a: WHAT[a] for a in arms if a in WHAT}
    what["candidate"] = WHAT["fine_tuned" if "base_model" in models else "unchanged"]
    table = values, intervals, what
    checks.extend(_compared(table, metric, qs, len(corp.ids), spec.ranking_k, boot, lt.coverage))
    ctx.progress(0.9, "latency")
    checks.append(_latency(indexes, qs.texts, inputs.latency_examples))
    return checks


def _loaded_here(model_path: str) -> Check:
    from claimcheck.engine.shapes.artifact import JobFinished

    return Check(
        id="artifact.job_finished",
        status="pass",
        summary=f"no dispatched job: the unchanged encoder {model_path} is loaded in this stage under the contract",
        measured=JobFinished(job_state="finished"),
        why="A finished run is the first of four outcomes, not evidence of the other three.",
        playbook=declaration("artifact.job_finished").playbook,
    )


def _identity(path: Path, spec: Any) -> Check:
    from claimcheck.engine.shapes.artifact import Identity

    digest, files = rankers.folder_digest(path)
    ok = digest == spec.model_sha256 and files == spec.model_files
    problems = (
        []
        if ok
        else [
            f"files hash to {digest} ({files} files); the contract pinned {spec.model_sha256} ({spec.model_files})"
        ]
    )
    return Check(
        id="artifact.identity",
        status="pass" if ok else "fail",
        summary=(
            f"the encoder's {files} files hash to the contract's pin ({digest[7:19]}…)"
            if ok
            else f"the encoder changed since the contract: {problems[0]}"
        ),
        measured=Identity(
            path=str(spec.model_path),
            files=files,
            candidate_kind="encoder",
            problems=problems or None,
            versions=spec.versions,
        ),
        why="The model scored must be the model the contract pinned.",
        playbook=declaration("artifact.identity").playbook,
    )


def _parity(
    model: Any, path: Path, spec: Any, tol: float, upstream: dict[str, StageRecord], ctx: StageContext
) -> Check:
    """Two independent loads of the encoder embed the same retained dev queries alike."""
    from claimcheck.engine.data import splits
    from claimcheck.engine.shapes.artifact import ReloadParity

    cols = rdata.columns(upstream["source"].inputs)
    dev = splits.rows("dev", upstream, ctx, caller="artifact", labels=False)
    texts = dev.unique(subset=[cols.query_id_column], keep="first", maintain_order=True)[cols.query_column]
    texts = [str(t) for t in texts.head(PARITY_QUERIES).to_list()]
    if not texts:
        return not_applicable("artifact.reload_parity", "no dev query to embed twice")
    again = rankers.load_encoder(path, spec.max_length)
    a, b = rankers.embed(model, texts, spec.batch_size), rankers.embed(again, texts, spec.batch_size)
    diff = float(np.abs(a - b).max())
    return Check(
        id="artifact.reload_parity",
        status="pass" if diff <= tol else "fail",
        summary=f"two independent loads embed {len(texts)} dev queries alike: max |Δ| {diff:.2e} (tolerance {tol:g})",
        measured=ReloadParity(
            rows=len(texts),
            compared=len(texts),
            max_abs_embedding_diff=diff,
            tolerance=tol,
            inference_mode="eval",
        ),
        why="The ranking must not depend on which load of the model scored it.",
        playbook=declaration("artifact.reload_parity").playbook,
    )


def _arm_scores(
    arms: list[str], models: dict[str, Any], qs: rdata.Queries, corp: rdata.Corpus, spec: Any, seed: int
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Every arm's scores for the queries over the corpus, and each arm's index (for latency)."""
    indexes: dict[str, Any] = {}
    for arm in arms:
        if arm in models:
            indexes[arm] = rankers.EncoderIndex(models[arm], corp.texts, spec.batch_size)
        elif arm == BM25:
            indexes[arm] = rankers.BM25Index(corp.texts)
        elif arm == TRIVIAL:
            indexes[arm] = rankers.RandomRanking(len(corp.ids), seed)
        else:
            raise StageInputError(
                f"'{arm}' is not an arm of this retrieval claim ({', '.join([*models, TRIVIAL, BM25])})"
            )
    return {arm: index.score(qs.texts) for arm, index in indexes.items()}, indexes


def _arms(arms: list[str], scores: dict[str, np.ndarray], qs: rdata.Queries) -> Check:
    from claimcheck.engine.shapes.artifact import ArmCounts, Arms

    n, scored = len(qs.ids), int(qs.scored.sum())
    counts = {
        a: ArmCounts(
            requested=n, scored=scored if a in scores else 0, failed=0, missing=n - scored, what="queries"
        )
        for a in arms
    }
    return Check(
        id="artifact.arms",
        status="pass",
        summary=f"{len(arms)} arm(s) ranked the corpus for {n} locked-test queries; {scored} scored "
        f"({n - scored} without a relevant document)",
        measured=Arms(arms=counts),
        why="Every arm ranks the same queries over the same corpus; a query without a relevant document scores no arm.",
        playbook=declaration("artifact.arms").playbook,
    )


def _compared(
    table: tuple[dict[str, dict[str, np.ndarray]], dict[str, dict[str, Any]], dict[str, str]],
    metric: str,
    qs: rdata.Queries,
    corpus: int,
    k: int,
    boot: Bootstrap,
    coverage: str,
) -> list[Check]:
    from claimcheck.engine.shapes.artifact import Comparison

    values, intervals, what = table
    comps = [a for a in values if a != "candidate"]
    diffs = {
        c: {m: ranking.paired(m, values["candidate"][m], values[c][m], boot) for m in ranking.METRICS}
        for c in comps
    }
    n = int(qs.scored.sum())
    table = shapes.Ranking(
        k=k,
        corpus=corpus,
        queries=len(qs.ids),
        queries_without_relevant=len(qs.ids) - n,
        primary_metric=metric,
        arms={a: shapes.ArmRanking(what=what[a], metrics=intervals[a]) for a in values},
        differences=diffs,
    )
    rows = "; ".join(f"{m}: {_ranking_text(intervals, m)}" for m in ranking.METRICS)
    ranked = _check(
        "artifact.ranking",
        "info",
        f"k = {k}, {n} scored locked-test queries over {corpus} documents — {rows}",
        table,
        "Ranking metrics at the claim's cut-off, each with an interval over queries (the independent unit).",
        coverage,
    )
    better = {c: bool("lo" in d[metric] and d[metric]["lo"] > 0) for c, d in diffs.items()}
    dtext = [f"candidate − {c}: {d[metric]['estimate']:+.4f} {_band(d[metric])}" for c, d in diffs.items()]
    comparison = Check(
        id="artifact.comparison",
        status="pass" if diffs and all(better.values()) else "warn",
        summary=f"{metric} (k = {k}): {_ranking_text(intervals, metric)}; " + "; ".join(dtext),
        coverage=f"{n} locked-test queries scored by every arm"
        + ("" if coverage == "full" else f" ({coverage})"),
        measured=Comparison(
            metric=metric,
            values={a: float(iv[metric]["estimate"]) for a, iv in intervals.items()},
            differences={c: d[metric] for c, d in diffs.items()},
            candidate_better=better,
            unit="query",
            shared_rows=n,
        ),
        why=f"Paired {boot.n}-resample bootstrap over queries: every arm sees the same query resamples.",
        playbook=declaration("artifact.comparison").playbook,
    )
    return [ranked, comparison]


def _latency(indexes: dict[str, Any], texts: list[str], examples: int) -> Check:
    """Per query: the time to rank the whole corpus for one query (the corpus indexed beforehand)."""
    from claimcheck.engine.shapes.artifact import ArtifactLatency, Latency

    timed = texts[: max(1, examples)]
    out = {}
    for arm, index in indexes.items():
        if arm == TRIVIAL or not timed:
            continue
        index.score(timed[:1])  # warm-up, not timed
        ms = []
        for text in timed:
            t = time.perf_counter()
            index.score([text])
            ms.append(1000.0 * (time.perf_counter() - t))
        out[arm] = Latency(
            p50_ms=float(np.percentile(ms, 50)), p95_ms=float(np.percentile(ms, 95)), examples=len(ms)
        )
    return Check(
        id="artifact.latency",
        status="info",
        summary="per query, ranking the whole corpus (indexed or embedded beforehand), one query at a time: "
        + ", ".join(f"{a} p50 {v.p50_ms:.2f} ms, p95 {v.p95_ms:.2f} ms" for a, v in out.items()),
        measured=ArtifactLatency(arms=out, batch_size=1, device="cpu"),
        replay="observation",
        why="Latency is a separate axis from quality, timed apart from the quality run.",
        playbook=declaration("artifact.latency").playbook,
    )
