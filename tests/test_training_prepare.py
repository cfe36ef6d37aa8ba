"""Prepared inputs on tiny models: masks with and without generation markers, truncation, pad == eos."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.pipeline.context import StageInputError
from claimcheck.engine.training import models, prepare
from claimcheck.engine.training.prepare import IGNORE
from tests.training_fixtures import tiny_dirs_fixture  # noqa: F401

CONV = [
    {"role": "user", "content": "my card was declined"},
    {"role": "assistant", "content": "please reset your payment"},
    {"role": "user", "content": "done, thanks"},
    {"role": "assistant", "content": "great, route to billing"},
]


def _eff(path: Path, **kw) -> dict:
    eff = {
        "task_kind": "causal_lm_sft",
        "model_path": str(path),
        "tokenizer_path": "",
        "chat_template": "",
        "max_length": 64,
        "target_turn_policy": "all_assistant",
        "label_classes": [],
    }
    eff.update(kw)
    return eff


def _tok(eff: dict):
    return models.load_tokenizer(eff, Path("."))


def test_marker_mask_matches_prefix_diff_and_ends_in_eos(tiny_dirs):
    eff = _eff(tiny_dirs["llama"])
    tok = _tok(eff)
    p = prepare.encode(eff, tok, [CONV], None)
    assert p.mask_source == "generation_markers+prefix_diff"
    assert p.mask_disagreements == []
    s = p.stats[0]
    assert s["targets"] == 2 and s["targets_ending_in_eos"] == 2
    supervised = [t for t, y in zip(p.input_ids[0], p.labels[0], strict=True) if y != IGNORE]
    assert tok.decode(supervised) == "please reset your payment<|end|>great, route to billing<|end|>"
    # the flag mask from transformers agrees token for token
    flagged = tok.apply_chat_template(
        CONV, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assert [int(y != IGNORE) for y in p.labels[0]] == list(flagged["assistant_masks"])


def test_template_without_markers_our_mask_is_still_correct(tiny_dirs):
    with_markers = _eff(tiny_dirs["llama"])
    without = _eff(tiny_dirs["llama_nomarkers"])
    tok_nm = _tok(without)
    # the planted failure: transformers' own mask is all zero for this template
    flagged = tok_nm.apply_chat_template(
        CONV, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    assert not any(flagged["assistant_masks"])
    ours = prepare.encode(without, tok_nm, [CONV], None)
    ref = prepare.encode(with_markers, _tok(with_markers), [CONV], None)
    assert ours.mask_source == "prefix_diff"
    assert ours.input_ids == ref.input_ids and ours.labels == ref.labels
    assert ours.stats[0]["supervised_tokens"] > 0


def test_last_assistant_policy_supervises_only_the_final_turn(tiny_dirs):
    eff = _eff(tiny_dirs["llama"], target_turn_policy="last_assistant")
    tok = _tok(eff)
    p = prepare.encode(eff, tok, [CONV], None)
    supervised = [t for t, y in zip(p.input_ids[0], p.labels[0], strict=True) if y != IGNORE]
    assert tok.decode(supervised) == "great, route to billing<|end|>"


def test_all_masked_example_has_zero_supervised_tokens(tiny_dirs):
    eff = _eff(tiny_dirs["llama"])
    p = prepare.encode(eff, _tok(eff), [CONV, CONV[:1]], None, ids=["a", "b"])
    assert p.stats[1]["supervised_tokens"] == 0 and all(y == IGNORE for y in p.labels[1])


def test_truncation_that_cuts_targets_is_counted(tiny_dirs):
    eff = _eff(tiny_dirs["llama"], max_length=16)
    p = prepare.encode(eff, _tok(eff), [CONV], None)
    s = p.stats[0]
    assert s["truncated"] and s["full_length"] > 16 and len(p.input_ids[0]) == 16
    assert s["target_tokens_cut"] > 0


def test_pad_equal_eos_keeps_eos_trained_and_a_naive_collator_is_caught(tiny_dirs):
    eff = _eff(tiny_dirs["llama"])
    tok = _tok(eff)
    tok.pad_token = tok.eos_token  # the planted trap
    short = [CONV[0], {"role": "assistant", "content": "ok"}]
    p = prepare.encode(eff, tok, [CONV, short], None)
    assert p.pad_id == p.eos_id
    batch = p.collate([0, 1])
    got = prepare.eos_in_batch(batch, p.end_ids)
    assert got["end_tokens_masked_after_target"] == 0 and got["end_tokens_trained"] == 3
    # a collator that masks every pad-id token (TRL #976) loses EOS: the check sees it
    naive = dict(batch, labels=batch["labels"].masked_fill(batch["input_ids"] == p.pad_id, IGNORE))
    bad = prepare.eos_in_batch(naive, p.end_ids)
    assert bad["end_tokens_masked_after_target"] == 3 and bad["end_tokens_trained"] == 0


def test_classification_encoding_and_unknown_label(tiny_dirs):
    eff = {
        "task_kind": "text_classification",
        "model_path": str(tiny_dirs["encoder"]),
        "tokenizer_path": "",
        "max_length": 8,
        "label_classes": ["billing", "shipping"],
    }
    tok = _tok(eff)
    texts = ["refund my card", "package delivery is delayed again and again and the courier is lost today"]
    p = prepare.encode(eff, tok, texts, ["billing", "shipping"])
    assert p.labels == [0, 1]
    assert p.stats[1]["truncated"] and len(p.input_ids[1]) == 8 and not p.stats[0]["truncated"]
    batch = p.collate([0, 1])
    assert batch["input_ids"].shape == (2, 8) and batch["attention_mask"][0].sum() == len(p.input_ids[0])
    with pytest.raises(StageInputError, match="not in the contract's label_classes"):
        prepare.encode(eff, tok, texts, ["billing", "returns"])


def test_text_template_fields_and_rendering():
    assert prepare.template_fields("{subject}\n{body}") == ["subject", "body"]
    assert prepare.render_texts("{subject}: {body}", [{"subject": "Hi", "body": None}]) == ["Hi: "]
    with pytest.raises(StageInputError):
        prepare.template_fields("{subject.__class__}")


def test_messages_from_prompt_response_and_bad_json():
    msgs = prepare.messages_from_row({"prompt": "p", "response": "r"})
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    with pytest.raises(StageInputError, match="not JSON"):
        prepare.messages_from_row({"messages": "[{oops"})


def test_length_summary_percentiles_and_histogram():
    s = prepare.length_summary(list(range(1, 101)), max_length=64)
    assert (s["p50"], s["p95"], s["p99"], s["max"]) == (50, 95, 99, 100)
    assert (
        sum(int(line.split()[-1] if "←" not in line else line.split()[-3]) for line in s["histogram"]) == 100
    )
    assert any("← max_length" in line for line in s["histogram"])
