"""The locked-test comparison for causal-LM SFT: the saved adapter (candidate), the unchanged base
model and the trivial baseline (the most frequent training answer) answer every test prompt by
greedy generation under the recorded decoding contract (the artifact stage's `decoding` input).

Each test row's reference is its conversation's last assistant turn; the prompt is everything
before it. Per arm: requested / scored / truncated / failed — a generation that errors or reaches
`max_new_tokens` without a stop is counted, never scored as zero. On the rows every arm scored:
exact match and token F1 (SQuAD normalisation, engine/artifact/generate.py) and, for the model
arms, the reference's mean per-token NLL; paired bootstrap intervals over the independent unit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.artifact.arms import base_model_identity, latency, locked_read, locked_test
from claimcheck.engine.artifact.common import PB_ARMS, PB_BASE, PB_REPORT
from claimcheck.engine.artifact.generate import (
    NORMALISATION,
    Generation,
    TorchGenerator,
    exact_match,
    split_reference,
)
from claimcheck.engine.artifact.generate import token_f1 as token_f1_of
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.shapes import artifact as shapes
from claimcheck.engine.stats import registry
from claimcheck.engine.textsafe import visible

SFT_METRICS = tuple(registry.computed_for("causal_lm_sft", "text"))  # exact_match, token_f1
NLL = "mean_nll"
SAMPLES = 3


@dataclass
class ArmResult:
    """One arm's answers on the test rows (None: the row has no reference, nothing requested)."""

    gens: list[Generation | None]
    nll: list[tuple[float, int] | None] = field(default_factory=list)  # model arms only
    what: str = ""


def _ratio(name: str) -> Any:
    """Per-row (numerator, denominator) summed over resampled units: exact under the bootstrap."""
    from claimcheck.engine.stats.uncertainty import Statistic

    return Statistic(name, lambda y, p: p, lambda t: t[:, 0] / t[:, 1])


def _run_model(gen: TorchGenerator, conversations: list[Any], ctx: Any) -> ArmResult:
    """Greedy answers and the reference's loss for every row with a reference (None elsewhere)."""
    idx = [i for i, c in enumerate(conversations) if c is not None]
    ctx.check_cancelled()
    answers = gen.generate_many([conversations[i][0] for i in idx])
    ctx.check_cancelled()
    full = [[*conversations[i][0], {"role": "assistant", "content": conversations[i][1]}] for i in idx]
    try:
        losses: list[tuple[float, int] | None] = gen.reference_nll(full)
    except Exception:  # noqa: BLE001 - no loss for this arm: its rows are not compared on loss
        losses = [None] * len(idx)
    gens: list[Generation | None] = [None] * len(conversations)
    nll: list[tuple[float, int] | None] = [None] * len(conversations)
    for k, i in enumerate(idx):
        gens[i], nll[i] = answers[k], losses[k]
    return ArmResult(gens, nll)


def _conversations(eff: dict[str, Any], frame: Any) -> list[Any]:
    from claimcheck.engine.training.evaluate import row_inputs

    return [split_reference(m) for m in row_inputs(eff, frame)]


def _trivial(upstream: dict[str, Any], ctx: Any, eff: dict[str, Any]) -> str:
    """The most frequent training reply (ties: the alphabetically first), like the baseline stage's
    most_frequent_answer, read from the same last assistant turn the test is scored on."""
    from collections import Counter

    from claimcheck.engine.data import splits

    train = splits.rows("train", upstream, ctx, caller="artifact")
    refs = [c[1] for c in _conversations(eff, train) if c is not None]
    if not refs:
        return ""
    counts = Counter(refs)
    return sorted(counts, key=lambda a: (-counts[a], a))[0]


def compare(
    inputs: Any, eff: dict[str, Any], final: Path, upstream: dict[str, Any], ctx: Any
) -> dict[str, Any]:
    import numpy as np
    import torch

    from claimcheck.engine import threads
    from claimcheck.engine.training.artifact_files import build_base, load_artifact

    torch.set_num_threads(threads.predict_torch_threads())
    lt = locked_test(inputs.max_test_rows, inputs.seed, upstream, ctx)
    test, reads, total, coverage, units = lt.rows, lt.reads, lt.total, lt.coverage, lt.units
    convs = _conversations(eff, test)
    wanted = list(dict.fromkeys(["candidate", *inputs.comparators]))
    gens: dict[str, TorchGenerator] = {}
    results: dict[str, ArmResult] = {}
    notes: dict[str, str] = {}
    ctx.progress(0.3, "loading the candidate and the unchanged base model")
    model, tok, _, _ = load_artifact(final, ctx.workspace)
    gens["candidate"] = TorchGenerator(model, tok, eff, inputs.decoding)
    notes["candidate"] = "the saved adapter reloaded onto the contracted base, saved tokenizer, greedy"
    base_id = base_model_identity(eff, ctx.workspace) if "base_model" in wanted else None
    if base_id is not None and base_id.status != "pass":
        notes["base_model"] = f"not scored: {base_id.summary}"
    elif base_id is not None:
        base, base_tok = build_base(eff, ctx.workspace)
        gens["base_model"] = TorchGenerator(base, base_tok, eff, inputs.decoding)
        notes["base_model"] = (
            "the unchanged base model (untrained adapter, LoRA B = 0) under the identical chat template, "
            "tokenizer, quantisation and decoding contract"
        )
    for i, (arm, g) in enumerate(gens.items()):
        ctx.progress(0.35 + 0.4 * i / len(gens), f"generating the locked test: {arm}")
        results[arm] = _run_model(g, convs, ctx)
        results[arm].what = notes[arm]
    if "trivial_baseline" in wanted:
        answer = _trivial(upstream, ctx, eff)
        results["trivial_baseline"] = ArmResult(
            [None if c is None else Generation(text=answer) for c in convs],
            what=f"always '{visible(answer, limit=80)}' (the most frequent training reply)",
        )
    for arm in wanted:
        if arm not in results:
            notes.setdefault(
                arm, "not available for causal-LM SFT (no conventional learner for free generation)"
            )
    refs = [None if c is None else c[1] for c in convs]
    checks = [locked_read(reads, total, coverage), _arms(wanted, results, notes, refs, coverage)]
    if base_id is not None:
        checks.insert(0, base_id)
    metric = primary_metric(upstream)
    unit_kind = lt.unit_kind
    scored = Scored(inputs, results, refs, units, unit_kind, metric, test, coverage)
    checks.extend(quality(scored, np))
    ctx.progress(0.85, "latency")
    checks.append(latency(inputs.latency_examples, _latency_fns(gens, convs, test), test))
    return {"checks": checks, "metric": metric}


def _latency_fns(gens: dict[str, TorchGenerator], convs: list[Any], test: Any) -> dict[str, Any]:
    by_row = dict(zip(test["row_id"].to_list(), convs, strict=True))

    def fn_for(g: TorchGenerator) -> Any:
        return lambda frame: [g.generate(by_row[r][0]) for r in frame["row_id"].to_list() if by_row[r]]

    return {arm: fn_for(g) for arm, g in gens.items()}


def primary_metric(upstream: dict[str, Any]) -> str:
    claim = upstream["claim"].inputs if "claim" in upstream else {}
    m = str(claim.get("primary_metric") or registry.DEFAULTS["text"])
    return m if m in SFT_METRICS else registry.DEFAULTS["text"]


def _arms(
    wanted: list[str], results: dict[str, ArmResult], notes: dict[str, str], refs: list[Any], coverage: str
) -> Check:
    n = sum(r is not None for r in refs)
    counts = {}
    for arm in wanted:
        if arm not in results:
            counts[arm] = shapes.ArmCounts(
                requested=n, scored=0, failed=0, missing=n, what=notes.get(arm, "")
            )
            continue
        st = [g.status for g in results[arm].gens if g is not None]
        counts[arm] = shapes.ArmCounts(
            requested=n,
            scored=st.count("scored"),
            failed=st.count("failed"),
            truncated=st.count("truncated"),
            missing=0,
            errors=[g.error for g in results[arm].gens if g is not None and g.error][:5],
            what=results[arm].what,
        )
    no_ref = len(refs) - n
    incomplete = [a for a, c in counts.items() if c.scored < n]
    return Check(
        id="artifact.arms",
        status="warn" if incomplete or no_ref else "pass",
        summary=", ".join(
            f"{a}: {c.scored}/{c.requested} scored"
            + (f", {c.truncated} truncated" if c.truncated else "")
            + (f", {c.failed} failed" if c.failed else "")
            for a, c in counts.items()
        )
        + (f"; {no_ref} test rows without an assistant reply to score against" if no_ref else ""),
        coverage=coverage,
        measured=shapes.Arms(arms=counts, rows_without_reference=no_ref),
        why="A failed or truncated generation is missing evidence, never a zero; paired metrics use rows every arm scored.",
        playbook=PB_ARMS,
    )


@dataclass
class Scored:
    inputs: Any
    results: dict[str, ArmResult]
    refs: list[str | None]
    units: Any
    unit_kind: str
    metric: str
    test: Any
    coverage: str


def _per_row(sc: Scored, shared: Any, np: Any) -> dict[str, dict[str, Any]]:
    """Per arm, (numerator, denominator) rows on the shared rows: exact match, token F1, NLL."""
    idx = np.flatnonzero(shared)
    out: dict[str, dict[str, Any]] = {}
    for arm, res in sc.results.items():
        texts = [res.gens[i].text for i in idx]
        refs = [sc.refs[i] for i in idx]
        ones = np.ones(len(idx))
        rows = {
            "exact_match": np.stack([[exact_match(t, r) for t, r in zip(texts, refs, strict=True)], ones], 1),
            "token_f1": np.stack([[token_f1_of(t, r) for t, r in zip(texts, refs, strict=True)], ones], 1),
        }
        if res.nll:
            rows[NLL] = np.asarray([res.nll[i] for i in idx], dtype=np.float64).reshape(len(idx), 2)
        out[arm] = rows
    return out


def _values(sc: Scored, np: Any) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Per arm and metric, (numerator, denominator) per test row (NaN where not scored), and the
    rows each arm has the metric on: answers that stopped, losses that were computed."""
    n = len(sc.refs)
    rows: dict[str, dict[str, Any]] = {}
    ok: dict[str, dict[str, Any]] = {}
    for arm, res in sc.results.items():
        scored = np.asarray([g is not None and g.status == "scored" for g in res.gens])
        r, o = {}, {}
        for m, fn in (("exact_match", exact_match), ("token_f1", token_f1_of)):
            vals = [fn(res.gens[i].text, sc.refs[i]) if scored[i] else math.nan for i in range(n)]
            r[m], o[m] = np.stack([np.asarray(vals, dtype=np.float64), np.ones(n)], 1), scored
        if any(x is not None for x in res.nll):
            r[NLL] = np.asarray([x if x is not None else (math.nan, 1) for x in res.nll], dtype=np.float64)
            o[NLL] = np.asarray([x is not None for x in res.nll])
        rows[arm], ok[arm] = r, o
    return rows, ok


def quality(sc: Scored, np: Any) -> list[Check]:
    """Each arm's metrics on the rows it scored; candidate − comparator on the rows both scored,
    paired over the independent unit."""
    from claimcheck.engine.stats import uncertainty

    rows, ok = _values(sc, np)
    if "candidate" not in rows or not ok["candidate"]["exact_match"].any():
        return [not_run("artifact.comparison", "the candidate scored no test row")]
    boot = uncertainty.Bootstrap(n=sc.inputs.bootstrap_resamples, seed=sc.inputs.seed)
    metrics = [*SFT_METRICS, NLL]
    values = {
        m: {
            a: float(r[m][ok[a][m], 0].sum() / r[m][ok[a][m], 1].sum())
            for a, r in rows.items()
            if m in r and ok[a][m].any()
        }
        for m in metrics
    }
    diffs: dict[str, dict[str, Any]] = {m: {} for m in metrics}
    for m in (m for m in metrics if m in rows["candidate"]):
        for comp in (a for a in rows if a != "candidate" and m in rows[a]):
            both = ok["candidate"][m] & ok[comp][m]
            if not both.any():
                continue
            units = sc.units[both] if sc.units is not None else None
            d = uncertainty.paired_bootstrap_diff(
                _ratio(m),
                np.zeros(int(both.sum())),
                rows["candidate"][m][both],
                rows[comp][m][both],
                units,
                boot,
            )
            diffs[m][comp] = {k: (float(v) if isinstance(v, float) else v) for k, v in d.items()}
    every = np.logical_and.reduce([ok[a]["exact_match"] for a in rows])
    cov = f"each arm on the rows it scored; differences on the rows both arms scored ({int(every.sum())} scored by every arm)"
    if sc.coverage != "full":
        cov += f" ({sc.coverage})"
    return [
        _comparison(sc, values, diffs, rows, ok, int(every.sum()), cov),
        _generation(sc, values, diffs, every, cov),
    ]


def _better(metric: str, d: dict[str, Any]) -> bool:
    return bool("lo" in d and ((d["hi"] < 0) if metric == NLL else (d["lo"] > 0)))


def _comparison(sc: Scored, values: dict, diffs: dict, rows: dict, ok: dict, n_every: int, cov: str) -> Check:
    from claimcheck.engine.stats import uncertainty

    m = sc.metric
    comps = [a for a in sc.results if a != "candidate"]
    better = {c: _better(m, diffs[m][c]) if c in diffs[m] else False for c in comps}
    mcn = {}
    for c in diffs[m]:
        both = ok["candidate"]["exact_match"] & ok[c]["exact_match"]
        r = uncertainty.mcnemar(
            rows["candidate"]["exact_match"][both, 0] > 0.5,
            rows[c]["exact_match"][both, 0] > 0.5,
            sc.units[both] if sc.units is not None else None,
        )
        mcn[c] = {k: v for k, v in r.items() if v is not None}
    text = "; ".join(
        f"candidate − {c}: {d['estimate']:+.4f} [{d.get('lo', math.nan):+.4f}, {d.get('hi', math.nan):+.4f}] on {d['rows']} rows"
        if (d := diffs[m].get(c))
        else f"candidate − {c}: no row scored by both"
        for c in comps
    )
    summary = (
        f"{m} (greedy generation): " + ", ".join(f"{a} {v:.4f}" for a, v in values[m].items()) + "; " + text
    )
    measured = shapes.Comparison(
        metric=m,
        values=values[m],
        differences=diffs[m],
        mcnemar=mcn,
        candidate_better=better,
        unit=sc.unit_kind,
        shared_rows=n_every,
    )
    why = f"Paired {sc.inputs.bootstrap_resamples}-resample bootstrap over {sc.unit_kind}s; McNemar on exact-match correctness."
    if not diffs[m]:
        return not_run("artifact.comparison", summary, coverage=cov, measured=measured.dump(), why=why)
    return Check(
        id="artifact.comparison",
        status="pass" if all(better.values()) else "warn",
        summary=summary,
        coverage=cov,
        measured=measured,
        why=why,
        playbook=PB_REPORT,
    )


def _generation(sc: Scored, values: dict, diffs: dict, shared: Any, cov: str) -> Check:
    dec = sc.inputs.decoding
    idx = [i for i in range(len(sc.refs)) if sc.refs[i] is not None][:SAMPLES]
    samples = [
        {"row_id": str(sc.test["row_id"][i]), "reference": visible(sc.refs[i], limit=200)}
        | {a: visible(r.gens[i].text, limit=200) for a, r in sc.results.items() if r.gens[i] is not None}
        for i in idx
    ]
    better = {m: {c: _better(m, d) for c, d in diffs[m].items()} for m in diffs}
    return Check(
        id="artifact.generation",
        status="info",
        summary="; ".join(
            f"{m}: " + ", ".join(f"{a} {v:.4f}" for a, v in values[m].items()) for m in values if values[m]
        ),
        coverage=cov,
        measured=shapes.Generation(
            decoding=dec.model_dump(),
            normalisation=NORMALISATION,
            values=values,
            differences=diffs,
            candidate_better=better,
            unit=sc.unit_kind,
            samples=samples,
        ),
        why=(
            "Exact match and token F1 of greedy answers, and the reference's per-token loss under each model, "
            "under one decoding contract; the trivial arm generates nothing, so it has no loss."
        ),
        playbook=PB_BASE,
    )
