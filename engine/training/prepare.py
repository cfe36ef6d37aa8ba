"""The actual tokenised, collated training inputs, and the measurements made on them.

For SFT the loss mask is computed here, from the rendered chat template, prefix by prefix: the
characters an assistant turn adds to the conversation are its target, and a token is supervised
when it lies inside those characters. Where the template has {% generation %} markers the mask
transformers returns is used and cross-checked against ours; where it has none (transformers then
returns an all-zero mask) ours is the mask. A flag is never trusted blindly.
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass, field
from typing import Any

from claimcheck.engine.pipeline.context import StageInputError

IGNORE = -100
_MARKERS = re.compile(r"\{%-?\s*generation\s*-?%\}")
# End-of-turn tokens of common chat templates; the tokenizer's EOS is always accepted too.
END_OF_TURN = ("<|end|>", "<|eot_id|>", "<|im_end|>", "<end_of_turn>", "<|endoftext|>", "</s>")


@dataclass
class Prepared:
    task_kind: str
    input_ids: list[list[int]]
    # SFT: per-token labels (IGNORE where masked); classification: one class id per example;
    # multi-label classification: one multi-hot vector (0.0 / 1.0 per label_classes entry) per example.
    labels: list[Any]
    ids: list[Any]
    stats: list[dict[str, Any]]
    pad_id: int
    eos_id: int
    end_ids: list[int] = field(default_factory=list)
    mask_source: str = ""
    # examples where the template-marker mask and the prefix-diff mask disagree (SFT with markers)
    mask_disagreements: list[Any] = field(default_factory=list)
    # char spans of supervised text per example (SFT), for decoding samples
    label_classes: list[str] = field(default_factory=list)
    multi_label: bool = False

    def __len__(self) -> int:
        return len(self.input_ids)

    def collate(self, indices: list[int]) -> dict[str, Any]:
        """Right-padded tensors for these examples. Padding is masked by POSITION, never by token
        id, so when pad == eos the real EOS at the end of a target keeps its label."""
        import torch

        rows = [self.input_ids[i] for i in indices]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        att = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):
            ids[j, : len(r)] = torch.tensor(r, dtype=torch.long)
            att[j, : len(r)] = 1
        batch = {"input_ids": ids, "attention_mask": att}
        if self.task_kind == "causal_lm_sft":
            lab = torch.full((len(rows), width), IGNORE, dtype=torch.long)
            for j, i in enumerate(indices):
                lab[j, : len(self.labels[i])] = torch.tensor(self.labels[i], dtype=torch.long)
            batch["labels"] = lab
        else:
            dtype = torch.float32 if self.multi_label else torch.long  # BCEWithLogits reads float targets
            batch["labels"] = torch.tensor([self.labels[i] for i in indices], dtype=dtype)
        return batch


# ---------------------------------------------------------------- text building


def template_fields(template: str) -> list[str]:
    """The column names a text template like '{subject}\\n{body}' refers to."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise StageInputError(f"text_template {template!r} is malformed: {exc}") from None
    out = []
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conv:
            raise StageInputError(
                f"text_template field {{{name}}} must be a plain column name (no index, format or conversion)"
            )
        if name not in out:
            out.append(name)
    return out


def render_texts(template: str, rows: list[dict[str, Any]]) -> list[str]:
    """Model input text per row; a missing value renders as the empty string (never 'None')."""
    names = template_fields(template)
    out = []
    for row in rows:
        values = {n: ("" if row.get(n) is None else str(row.get(n))) for n in names}
        out.append(template.format(**values))
    return out


def messages_from_row(row: dict[str, Any], *, messages_column: str = "messages") -> list[dict[str, str]]:
    """A conversation from a row: a JSON list of {role, content} in `messages`, or prompt/response."""
    if row.get(messages_column) not in (None, ""):
        return validate_messages(row[messages_column])
    if "prompt" in row and "response" in row:
        return [
            {"role": "user", "content": str(row["prompt"] or "")},
            {"role": "assistant", "content": str(row["response"] or "")},
        ]
    raise StageInputError(
        "an SFT row needs a 'messages' column (JSON list of {role, content}) or prompt/response"
    )


def validate_messages(msgs: Any) -> list[dict[str, str]]:
    if isinstance(msgs, str):
        try:
            msgs = json.loads(msgs)
        except json.JSONDecodeError as exc:
            raise StageInputError(f"messages value is not JSON: {exc}") from None
    if not isinstance(msgs, list) or not msgs:
        raise StageInputError("messages must be a non-empty JSON list of {role, content} objects")
    out = []
    for m in msgs:
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise StageInputError(f"message {m!r} lacks role/content")
        out.append({"role": str(m["role"]), "content": str(m["content"])})
    return out


# ---------------------------------------------------------------- encoding


def encode(
    effective: dict, tokenizer, texts_or_messages: list, labels: list | None, *, ids: list | None = None
) -> Prepared:
    """Tokenise and label examples exactly as training will see them, with per-example stats
    (length, full_length, truncated, target_tokens_cut, supervised_tokens, last_target_is_eos)."""
    ids = list(range(len(texts_or_messages))) if ids is None else list(ids)
    if len(ids) != len(texts_or_messages):
        raise ValueError("ids and examples differ in length")
    if effective["task_kind"] == "causal_lm_sft":
        return _encode_sft(effective, tokenizer, texts_or_messages, ids)
    if effective["task_kind"] == "text_classification":
        if labels is None:
            raise StageInputError("text classification needs labels")
        return _encode_classification(effective, tokenizer, texts_or_messages, labels, ids)
    raise StageInputError(f"task kind {effective['task_kind']!r} has no tokenised inputs")


def _pad_and_eos(tokenizer) -> tuple[int, int]:
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    return (pad if pad is not None else 0), (eos if eos is not None else -1)


def multi_hot(target: str, classes: list[str]) -> list[float]:
    """A multi-label target (the canonical label set, engine/data/labelsets.py) as 0.0 / 1.0 per class."""
    from claimcheck.engine.data.labelsets import split_one

    held = set(split_one(str(target)))
    unknown = sorted(held - set(classes))
    if unknown:
        raise StageInputError(f"labels {unknown} are not in the contract's label_classes {classes}")
    return [1.0 if c in held else 0.0 for c in classes]


def _encode_classification(effective, tokenizer, texts, labels, ids) -> Prepared:
    classes = [str(c) for c in effective.get("label_classes") or []]
    index = {c: i for i, c in enumerate(classes)}
    multi = effective.get("target_type") == "multi_label"
    unknown = [] if multi else sorted({str(y) for y in labels if str(y) not in index})
    if unknown:
        raise StageInputError(f"labels {unknown} are not in the contract's label_classes {classes}")
    max_len = int(effective["max_length"])
    texts = [str(t) for t in texts]
    # verbose=False: untruncated lengths are measured on purpose (the truncation check reports
    # them); transformers' "Token indices sequence length is longer than ... (573 > 512)" warning
    # is about feeding such a sequence to the model, which the truncated encoding below never does.
    full = tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    cut = tokenizer(texts, add_special_tokens=True, truncation=True, max_length=max_len)["input_ids"]
    pad, eos = _pad_and_eos(tokenizer)
    stats = [
        {
            "length": len(c),
            "full_length": len(f),
            "truncated": len(f) > len(c),
            "target_tokens_cut": 0,
            "supervised_tokens": 0,
        }
        for f, c in zip(full, cut, strict=True)
    ]
    return Prepared(
        task_kind="text_classification",
        input_ids=[list(c) for c in cut],
        labels=[multi_hot(y, classes) for y in labels] if multi else [index[str(y)] for y in labels],
        ids=ids,
        stats=stats,
        pad_id=pad,
        eos_id=eos,
        label_classes=classes,
        multi_label=multi,
    )


def has_generation_markers(template: str | None) -> bool:
    return bool(template) and bool(_MARKERS.search(template))


def end_token_ids(tokenizer) -> list[int]:
    out = set()
    if tokenizer.eos_token_id is not None:
        out.add(int(tokenizer.eos_token_id))
    vocab = tokenizer.get_vocab()
    for t in END_OF_TURN:
        if t in vocab:
            out.add(int(vocab[t]))
    return sorted(out)


def assistant_spans(tokenizer, messages: list[dict], policy: str) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its target assistant turns, found by
    rendering the conversation prefix by prefix (works with or without generation markers)."""
    full = tokenizer.apply_chat_template(messages, tokenize=False)
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if policy == "last_assistant":
        turns = turns[-1:]
    spans = []
    for i in turns:
        before = (
            tokenizer.apply_chat_template(messages[:i], tokenize=False, add_generation_prompt=True)
            if i
            else ""
        )
        upto = tokenizer.apply_chat_template(messages[: i + 1], tokenize=False)
        if not (upto.startswith(before) and full.startswith(upto)):
            raise StageInputError(
                "the chat template does not render conversations prefix by prefix (turn "
                f"{i} changes earlier text), so the assistant mask cannot be derived from it"
            )
        # Whitespace after the end-of-turn token is a separator, not part of the reply.
        spans.append((len(before), max(len(before), len(upto.rstrip()))))
    return full, spans


def _mask_from_spans(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    mask = []
    for s, e in offsets:
        inside = e > s and any(a <= s and e <= b for a, b in spans)
        mask.append(1 if inside else 0)
    return mask


def _encode_sft(effective, tokenizer, items, ids) -> Prepared:
    if not tokenizer.chat_template:
        raise StageInputError("the tokenizer has no chat template and the contract sets none (chat_template)")
    policy = effective.get("target_turn_policy", "all_assistant")
    if policy not in ("all_assistant", "last_assistant"):
        raise StageInputError(f"target_turn_policy {policy!r}: use all_assistant or last_assistant")
    markers = has_generation_markers(tokenizer.chat_template)
    max_len = int(effective["max_length"])
    pad, eos = _pad_and_eos(tokenizer)
    ends = end_token_ids(tokenizer)
    input_ids, labels, stats, disagree = [], [], [], []
    for ex_id, item in zip(ids, items, strict=True):
        msgs = validate_messages(item)
        text, spans = assistant_spans(tokenizer, msgs, policy)
        # verbose=False: the whole conversation is encoded to map its offsets, then cut to
        # max_length below; the too-long-sequence warning would be about a sequence never fed.
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        tok_ids = list(enc["input_ids"])
        mask = _mask_from_spans(enc["offset_mapping"], spans)
        if markers:
            flagged = tokenizer.apply_chat_template(
                msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
            )
            flag_mask = list(flagged["assistant_masks"])
            if policy == "all_assistant" and list(flagged["input_ids"]) == tok_ids:
                if flag_mask != mask:
                    disagree.append(ex_id)
                mask = flag_mask if any(flag_mask) else mask
            elif list(flagged["input_ids"]) != tok_ids:
                disagree.append(ex_id)
        # the last supervised token of each target turn
        last_ok, n_targets = 0, 0
        for a, b in spans:
            pos = [
                k for k, (s, e) in enumerate(enc["offset_mapping"]) if e > s and a <= s and e <= b and mask[k]
            ]
            if pos:
                n_targets += 1
                last_ok += tok_ids[pos[-1]] in ends
        kept = tok_ids[:max_len]
        kept_mask = mask[:max_len]
        lab = [t if m else IGNORE for t, m in zip(kept, kept_mask, strict=True)]
        input_ids.append(kept)
        labels.append(lab)
        stats.append(
            {
                "length": len(kept),
                "full_length": len(tok_ids),
                "truncated": len(tok_ids) > len(kept),
                "supervised_tokens": int(sum(kept_mask)),
                "target_tokens_cut": int(sum(mask) - sum(kept_mask)),
                "targets": n_targets,
                "targets_ending_in_eos": int(last_ok),
                "spans": spans,
            }
        )
    return Prepared(
        task_kind="causal_lm_sft",
        input_ids=input_ids,
        labels=labels,
        ids=ids,
        stats=stats,
        pad_id=pad,
        eos_id=eos,
        end_ids=ends,
        mask_source="generation_markers+prefix_diff" if markers else "prefix_diff",
        mask_disagreements=disagree,
    )


# ---------------------------------------------------------------- measurements on prepared inputs


def eos_in_batch(batch: dict[str, Any], end_ids: list[int]) -> dict[str, int]:
    """In a collated batch: end tokens that close a supervised span and are labelled (trained), and
    those masked although the text before them is supervised (the pad == eos collator bug)."""
    ids, att, lab = batch["input_ids"], batch["attention_mask"], batch["labels"]
    trained = masked = 0
    for r in range(ids.shape[0]):
        for k in range(1, ids.shape[1]):
            if int(att[r, k]) == 0 or int(ids[r, k]) not in end_ids:
                continue
            if int(lab[r, k]) != IGNORE:
                trained += 1
            elif int(lab[r, k - 1]) != IGNORE:
                masked += 1
    return {"end_tokens_trained": trained, "end_tokens_masked_after_target": masked}


def length_summary(lengths: list[int], max_length: int, bins: int = 10) -> dict[str, Any]:
    """p50 / p95 / p99 / max (nearest-rank) and a text histogram of pre-truncation lengths."""
    if not lengths:
        return {"count": 0}
    s = sorted(lengths)

    def pct(p: float) -> int:
        k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
        return int(s[k])

    top = max(s[-1], max_length)
    width = max(1, -(-top // bins))
    counts = [0] * bins
    for v in s:
        counts[min(bins - 1, v // width)] += 1
    peak = max(counts) or 1
    hist = []
    for i, c in enumerate(counts):
        lo, hi = i * width, (i + 1) * width - 1
        flag = " ← max_length" if lo <= max_length <= hi else ""
        hist.append(f"{lo:>6}-{hi:<6} {'█' * round(30 * c / peak):<30} {c}{flag}")
    return {
        "count": len(s),
        "p50": pct(50),
        "p95": pct(95),
        "p99": pct(99),
        "max": int(s[-1]),
        "mean": round(sum(s) / len(s), 3),
        "histogram": hist,
    }


def decode_sample(prepared: Prepared, tokenizer, i: int) -> dict[str, Any]:
    """One example decoded as training sees it: supervised spans in ⟦…⟧, the rest plain."""
    ids = prepared.input_ids[i]
    if prepared.task_kind == "causal_lm_sft":
        lab = prepared.labels[i]
        parts, cur, cur_sup = [], [], None
        for t, y in zip(ids, lab, strict=True):
            sup = y != IGNORE
            if cur and sup != cur_sup:
                parts.append((cur_sup, cur))
                cur = []
            cur.append(t)
            cur_sup = sup
        if cur:
            parts.append((cur_sup, cur))
        shown = "".join(("⟦" + tokenizer.decode(p) + "⟧") if sup else tokenizer.decode(p) for sup, p in parts)
        supervised = sum(1 for y in lab if y != IGNORE)
        return {
            "id": str(prepared.ids[i]),
            "tokens": len(ids),
            "supervised_tokens": supervised,
            "masked_tokens": len(ids) - supervised,
            "decoded": shown,
        }
    if prepared.multi_label:  # the label set, canonical; no single class id
        from claimcheck.engine.data.labelsets import SEP

        held = [c for c, v in zip(prepared.label_classes, prepared.labels[i], strict=True) if v]
        label: dict[str, Any] = {"label": SEP.join(held)}
    else:
        label = {"label": prepared.label_classes[prepared.labels[i]], "label_id": int(prepared.labels[i])}
    return {
        "id": str(prepared.ids[i]),
        "tokens": len(ids),
        **label,
        "truncated": bool(prepared.stats[i]["truncated"]),
        "decoded": tokenizer.decode(ids),
    }


def representative(prepared: Prepared, k: int = 4) -> list[int]:
    """Deterministic picks across the length distribution: shortest, median, p95, longest."""
    n = len(prepared)
    if not n:
        return []
    order = sorted(range(n), key=lambda i: (prepared.stats[i]["full_length"], str(prepared.ids[i])))
    ranks = [0, n // 2, min(n - 1, int(0.95 * n)), n - 1][:k]
    out = []
    for r in ranks:
        if order[r] not in out:
            out.append(order[r])
    return out
