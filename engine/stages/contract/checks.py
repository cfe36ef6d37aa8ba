"""The contract stage's checks on prepared inputs: token lengths, supervision masks, samples,
columns, labels, effective batch, the memory estimate and the tiny fitting check.

claimcheck.engine.stages.contract.run resolves the requested contract and calls `verify_and_fit` when nothing
was refused; every check here is computed from the prepared train rows and the effective
contract, never from the person's request alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import declaration
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.contract.fit import fit
from claimcheck.engine.training.schema import Inputs

PB_PIN = (
    "Pin data/split hashes, model and tokenizer revisions, objective/template, supervised token masks or "
    "decision targets, optimizer, effective batch, schedule, learning rates, adapter/full-training mode, "
    "precision, context length, epochs/steps and seeds. Record runtime/library versions and hardware."
)
PB_REQ = "Compare requested and effective settings before dispatch."
PB_PREP = (
    "Verify actual prepared token lengths, targets and truncation. A context setting alone does not prove "
    "useful supervision survived."
)
PB_SFT = (
    "For SFT, inspect decoded examples and actual loss masks, EOS/padding, packing boundaries and nonempty "
    "supervised tokens. Assistant-only loss needs a compatible template; do not assume a flag makes every "
    "template correct."
)
PB_HEAD = "Chat/tool tasks need the exact template and target-turn policy; native decisions need the matching head/options."
PB_FEATURES = "Keep labels/provenance out of prediction-time features."
PB_MEMORY = (
    "Size hardware from model/optimizer/activation memory and representative length tails, not model parameter "
    "count alone. Distinguish physical micro-batch from effective batch."
)
PB_BATCH = (
    "In ordinary synchronous data parallelism, effective batch is micro-batch × accumulation × data-parallel "
    "replicas; specialized runtimes may differ. Confirm the provider's interpretation and count actual "
    "examples/tokens."
)
PB_UNCERTAIN = "If none exists, label the estimate uncertain."


def _examples(eff: dict, frame) -> tuple[list[Any], list[str] | None, list[Any]]:
    from claimcheck.engine.training.prepare import messages_from_row, render_texts

    rows = list(frame.iter_rows(named=True))
    ids = [r.get("row_id", i) for i, r in enumerate(rows)]
    if eff["task_kind"] == "causal_lm_sft":
        out = []
        for r in rows:
            try:
                out.append(messages_from_row(r, messages_column=eff["messages_column"]))
            except (StageInputError, ValueError) as exc:
                raise StageInputError(f"train row_id {r.get('row_id')}: {exc}") from None
        return out, None, ids
    labels = [str(r["target"]) for r in rows]
    return render_texts(eff["text_template"], rows), labels, ids


@dataclass
class FitMaterial:
    """What the prepared-input checks and the fitting check are computed from."""

    inp: Inputs
    eff: dict[str, Any]
    facts: dict[str, Any]  # resolve()'s identity facts: the meta model, target hits, markers
    train: Any  # the train rows (a Polars frame)
    source_inputs: dict[str, Any]
    labels_present: list[str]
    ctx: StageContext


def verify_and_fit(b: FitMaterial) -> list[Check]:
    from claimcheck.engine.training import models, prepare

    eff, ctx = b.eff, b.ctx
    ctx.progress(None, f"tokenising {b.train.height:,} train rows")
    texts, labels, ids = _examples(eff, b.train)
    tokenizer = models.load_tokenizer(eff, ctx.workspace)
    prepared = prepare.encode(eff, tokenizer, texts, labels, ids=ids)
    checks = [_prepared_lengths(eff, prepared)]
    if eff["task_kind"] == "causal_lm_sft":
        checks.append(_prepared_supervision(eff, prepared, b.facts))
        checks.append(_prepared_eos(prepared, tokenizer))
    checks.append(_prepared_packing(eff))
    checks.append(_prepared_samples(prepared, tokenizer))
    checks.append(_prepared_columns(eff, texts, b.train, b.source_inputs))
    checks.append(_effective_batch(eff, prepared))
    checks.append(_memory(b.inp, eff, b.facts, prepared))
    ctx.check_cancelled()
    fit_checks, head_sizes = fit(b.inp, eff, prepared, labels, ctx, meta=b.facts.get("meta"))
    if eff["task_kind"] == "text_classification":
        checks.append(_prepared_labels(eff, prepared, labels_present=b.labels_present, head_sizes=head_sizes))
    checks.extend(fit_checks)
    return checks


def _prepared_lengths(eff: dict, p) -> Check:
    from claimcheck.engine.training.prepare import length_summary

    max_len = eff["max_length"]
    full = [s["full_length"] for s in p.stats]
    summ = length_summary(full, max_len)
    truncated = [i for i, s in enumerate(p.stats) if s["truncated"]]
    cut = [i for i, s in enumerate(p.stats) if s["target_tokens_cut"] > 0]
    share = len(truncated) / len(p)
    measured = {
        **summ,
        "max_length": max_len,
        "truncated": len(truncated),
        "truncated_share": round(share, 6),
        "truncated_ids": [str(p.ids[i]) for i in truncated[:20]],
    }
    if p.task_kind == "causal_lm_sft":
        measured["targets_cut"] = len(cut)
        measured["target_tokens_cut"] = sum(s["target_tokens_cut"] for s in p.stats)
        measured["targets_cut_ids"] = [str(p.ids[i]) for i in cut[:20]]
        status = "fail" if cut else ("warn" if truncated else "pass")
        extra = (
            f"; {len(cut)} example(s) lost target tokens to truncation (ids {measured['targets_cut_ids'][:5]}) — "
            "raise max_length or shorten prompts"
            if cut
            else "; no target token was cut"
        )
    else:
        status = "warn" if share > 0.05 else ("info" if truncated else "pass")
        extra = ""
    summary = (
        f"tokens p50 {summ['p50']} / p95 {summ['p95']} / p99 {summ['p99']} / max {summ['max']} against "
        f"max_length {max_len}; {len(truncated):,} of {len(p):,} truncated ({share:.1%})" + extra
    )
    return Check(
        id="contract.prepared_lengths",
        status=status,
        summary=summary,
        measured=measured,
        why="A context setting alone does not prove the useful text or the answer survived tokenisation.",
        playbook=PB_PREP,
    )


def _prepared_supervision(eff: dict, p, facts: dict) -> Check:
    sup = [s["supervised_tokens"] for s in p.stats]
    zero = [str(p.ids[i]) for i, v in enumerate(sup) if v == 0]
    targets = sum(s["targets"] for s in p.stats)
    ending = sum(s["targets_ending_in_eos"] for s in p.stats)
    no_eos = targets - ending
    s_sorted = sorted(sup)
    problems = []
    if zero:
        problems.append(
            f"{len(zero)} example(s) have ZERO supervised tokens (ids {zero[:10]}) — they train nothing"
        )
    if no_eos:
        problems.append(
            f"{no_eos} of {targets} target turn(s) do not end in EOS / end-of-turn — the model never learns to stop"
        )
    if p.mask_disagreements:
        problems.append(
            f"the template's generation-marker mask disagrees with the prefix-diff mask on "
            f"{len(p.mask_disagreements)} example(s) (ids {[str(x) for x in p.mask_disagreements[:5]]})"
        )
    src = (
        "template {% generation %} markers, cross-checked by prefix diff"
        if facts.get("generation_markers")
        else "our prefix-diff mask (the template has no {% generation %} markers; transformers' flag would "
        "return an all-zero mask)"
    )
    status = "fail" if (zero or no_eos) else ("warn" if p.mask_disagreements else "pass")
    return Check(
        id="contract.prepared_supervision",
        status=status,
        summary=(
            "; ".join(problems)
            if problems
            else f"every example has supervised tokens (min {s_sorted[0]}, median {s_sorted[len(s_sorted) // 2]}, "
            f"max {s_sorted[-1]}); every target ends in EOS"
        )
        + f"; mask from {src}",
        measured={
            "mask_source": p.mask_source,
            "generation_markers": bool(facts.get("generation_markers")),
            "target_turn_policy": eff["target_turn_policy"],
            "supervised_min": s_sorted[0],
            "supervised_median": s_sorted[len(s_sorted) // 2],
            "supervised_max": s_sorted[-1],
            "supervised_total": sum(sup),
            "zero_supervised": len(zero),
            "zero_supervised_ids": zero[:50],
            "targets": targets,
            "targets_ending_in_eos": ending,
            "mask_disagreements": len(p.mask_disagreements),
        },
        why="A template without generation markers silently yields an all-masked loss; an untrained EOS never stops.",
        playbook=PB_SFT,
    )


def _prepared_eos(p, tokenizer) -> Check:
    from claimcheck.engine.training.prepare import eos_in_batch

    totals = {"end_tokens_trained": 0, "end_tokens_masked_after_target": 0}
    for start in range(0, len(p), 64):
        got = eos_in_batch(p.collate(list(range(start, min(len(p), start + 64)))), p.end_ids)
        for k in totals:
            totals[k] += got[k]
    pad_is_eos = p.pad_id == p.eos_id or p.pad_id in p.end_ids
    masked = totals["end_tokens_masked_after_target"]
    if masked:
        status, summary = (
            "fail",
            f"{masked} end-of-turn token(s) right after a target are masked out of the loss",
        )
    elif pad_is_eos:
        status = "warn"
        summary = (
            f"pad == eos (id {p.pad_id}): padding is masked by position, so EOS is still trained "
            f"({totals['end_tokens_trained']} EOS labels in the collated batches); set a distinct pad token "
            "to remove the trap for other collators"
        )
    else:
        status = "pass"
        summary = f"pad id {p.pad_id} ≠ eos id {p.eos_id}; {totals['end_tokens_trained']} end-of-turn labels trained"
    return Check(
        id="contract.prepared_eos",
        status=status,
        summary=summary,
        measured={
            "pad_id": p.pad_id,
            "eos_id": p.eos_id,
            "end_ids": p.end_ids,
            "pad_is_eos": pad_is_eos,
            "eos_token": str(tokenizer.eos_token or ""),
            **totals,
        },
        why="Collators that mask every pad-id token also mask EOS when pad == eos; the model never learns to stop.",
        playbook=PB_SFT,
    )


def _prepared_packing(eff: dict) -> Check:
    return Check(
        id="contract.prepared_packing",
        status="pass",
        summary="packing off: each example is its own padded sequence, so no example attends to another",
        measured={"packing": eff["packing"]},
        why="Packed examples without boundary-aware attention leak context between examples.",
        playbook=PB_SFT,
    )


def _prepared_samples(p, tokenizer) -> Check:
    from claimcheck.engine.training.prepare import decode_sample, representative

    picks = representative(p)
    samples = [decode_sample(p, tokenizer, i) for i in picks]
    legend = (
        "supervised tokens in ⟦…⟧, masked tokens plain"
        if p.task_kind == "causal_lm_sft"
        else "decoded model input exactly as tokenised (after truncation)"
    )
    return Check(
        id="contract.prepared_samples",
        status="info",
        summary=f"{len(samples)} representative examples (ids {[s['id'] for s in samples]}): {legend}",
        measured={"legend": legend, "ids": [s["id"] for s in samples], "samples": samples},
        why="Decoded examples show what the model is actually trained on, masks included.",
        playbook=PB_SFT,
    )


def _prepared_columns(eff: dict, texts: list, train, source_inputs: dict) -> Check:
    from claimcheck.engine.training.prepare import template_fields

    excluded = sorted(
        set(source_inputs.get("unavailable_columns") or [])
        | set(source_inputs.get("sensitive_columns") or [])
    )
    used = template_fields(eff["text_template"]) if eff["text_template"] else [eff["messages_column"]]
    in_template = [c for c in used if c in excluded]
    flat = [t if isinstance(t, str) else " ".join(m["content"] for m in t) for t in texts]
    found: dict[str, int] = {}
    examples: dict[str, list[str]] = {}
    for col in excluded:
        if col not in train.columns:
            continue
        vals = train[col].cast(str).to_list()
        hits = [i for i, (v, t) in enumerate(zip(vals, flat, strict=True)) if v and len(v) >= 6 and v in t]
        if hits:
            found[col] = len(hits)
            examples[col] = [
                str(train["row_id"][i]) if "row_id" in train.columns else str(i) for i in hits[:5]
            ]
    status = "fail" if in_template else ("warn" if found else "pass")
    if in_template:
        summary = f"excluded column(s) {in_template} are in the prepared input"
    elif found:
        summary = (
            "excluded columns are not in the template, but their values appear verbatim in the input text: "
            + ", ".join(f"{c} in {n:,} rows" for c, n in found.items())
        )
    else:
        summary = f"none of the {len(excluded)} unavailable / sensitive column(s) reach the prepared input"
    return Check(
        id="contract.prepared_columns",
        status=status,
        summary=summary,
        measured={
            "excluded_columns": excluded,
            "input_columns_used": used,
            "in_template": in_template,
            "values_found_in_text": found,
            "example_ids": examples,
        },
        why="Columns unavailable at prediction time or sensitive must not reach the model by any path.",
        playbook=PB_FEATURES,
    )


def _prepared_labels(eff: dict, p, labels_present: list[str], head_sizes: list[int]) -> Check:
    classes = eff["label_classes"]
    counts = {c: 0 for c in classes}
    for y in p.labels:
        for j in [j for j, v in enumerate(y) if v] if p.multi_label else [y]:  # a label set: each label
            counts[classes[j]] += 1
    absent = [c for c in classes if counts[c] == 0]
    head_ok = head_sizes == [len(classes)]
    status = "fail" if not head_ok else ("warn" if absent else "pass")
    summary = (
        ("multi-label sigmoid head, " if p.multi_label else "")
        + f"{len(classes)} classes in order {classes}; head outputs {head_sizes}"
        + ("" if head_ok else f" ≠ {len(classes)} classes")
        + (f"; classes never seen in train: {absent}" if absent else "; every class occurs in train")
    )
    return Check(
        id="contract.prepared_labels",
        status=status,
        summary=summary,
        measured={
            "class_order": classes,
            "label_to_id": {c: i for i, c in enumerate(classes)},
            "train_counts": counts,
            "head_sizes": head_sizes,
            "absent_in_train": absent,
        },
        why="A head whose size or class order differs from the label table predicts the wrong classes silently.",
        playbook=PB_HEAD,
    )


def _effective_batch(eff: dict, p) -> Check:
    mean_len = sum(s["length"] for s in p.stats) / len(p)
    tokens = eff["effective_batch"] * mean_len
    return Check(
        id="contract.effective_batch",
        status="pass",
        summary=(
            f"effective batch {eff['effective_batch']} = micro {eff['micro_batch']} × accumulation "
            f"{eff['grad_accum']} × replicas {eff['dp_replicas']}; ≈ {tokens:,.0f} tokens per optimizer step; "
            f"{eff['optimizer_steps']:,} optimizer steps"
        ),
        measured={
            "micro_batch": eff["micro_batch"],
            "grad_accum": eff["grad_accum"],
            "dp_replicas": eff["dp_replicas"],
            "effective_batch": eff["effective_batch"],
            "examples_per_step": eff["effective_batch"],
            "mean_prepared_tokens": round(mean_len, 4),
            "tokens_per_step": round(tokens, 2),
            "optimizer_steps": eff["optimizer_steps"],
        },
        why="Learning rates and step counts mean nothing without the batch they were tuned for.",
        playbook=PB_BATCH,
    )


def _memory(inp: Inputs, eff: dict, facts: dict, p) -> Check:
    from claimcheck.engine.training import memory
    from claimcheck.engine.training.prepare import length_summary

    p99 = min(
        eff["max_length"], length_summary([s["full_length"] for s in p.stats], eff["max_length"])["p99"]
    )
    observed = inp.target_device_memory_gb <= 0
    dev_mem = (
        memory.device_memory(eff["device"]) if observed else int(inp.target_device_memory_gb * memory.GIB)
    )
    est = memory.estimate(eff, facts["meta"], seq_len=p99, device_memory_bytes=dev_mem)
    share = est["share_of_device"]
    status = "fail" if share > 1 else ("warn" if share > 0.8 or not dev_mem else "pass")
    G = memory.GIB
    summary = (
        f"ESTIMATE {est['total_gib']:.3f} GiB at p99 length {p99} × micro-batch {eff['micro_batch']}: "
        f"weights {est['weights_bytes'] / G:.3f}, trainable state {est['trainable_state_bytes'] / G:.3f}, "
        f"activations {est['activations_bytes'] / G:.3f} (checkpointed {est['activations_checkpointed_bytes'] / G:.3f}), "
        f"logits {est['logits_bytes'] / G:.3f} GiB; {share:.1%} of {est['device_memory_gib']} GiB "
        "(formula: docs/memory-estimate.md; framework overhead not included)"
    )
    return Check(
        id="contract.memory",
        status=status,
        summary=summary,
        basis="measured",
        measured=est,
        replay="observation" if observed else "compare",
        why="Hardware is sized from weights, optimizer state and activations at the length tail, not parameter count.",
        playbook=declaration("contract.memory").playbook,
    )
