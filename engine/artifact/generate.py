"""Generation and scoring for the causal-LM SFT arms: greedy decoding under the recorded decoding
contract, the reference answer's per-token loss, and the SQuAD-style answer metrics.

Answer normalisation (SQuAD v1.1's evaluation script): lowercase, drop ASCII punctuation, drop the
articles "a", "an", "the" as whole words, collapse whitespace. Exact match is 1 when the normalised
answer equals the normalised reference; token F1 is the harmonic mean of precision and recall of
the normalised answer's whitespace tokens against the reference's (bag of tokens; 1 when both are
empty, 0 when only one is).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass
from typing import Any

from claimcheck.engine.artifact.decoding import Decoding

NORMALISATION = (
    "SQuAD v1.1: lowercase, ASCII punctuation removed, articles (a, an, the) removed, whitespace collapsed"
)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = set(string.punctuation)
GEN_BATCH = 16


def normalise_answer(text: str) -> str:
    s = "".join(ch for ch in str(text).lower() if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(answer: str, reference: str) -> float:
    return float(normalise_answer(answer) == normalise_answer(reference))


def token_f1(answer: str, reference: str) -> float:
    a, r = normalise_answer(answer).split(), normalise_answer(reference).split()
    if not a or not r:
        return float(a == r)
    common = sum((Counter(a) & Counter(r)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(a), common / len(r)
    return 2 * precision * recall / (precision + recall)


def split_reference(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], str] | None:
    """(the conversation before the last assistant turn, that turn's text), or None without one."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    if last < 1:
        return None
    return messages[:last], messages[last]["content"]


@dataclass
class Generation:
    """One arm's answer to one test row: its text, and whether it stopped, was truncated or failed."""

    text: str = ""
    status: str = "scored"  # scored | truncated | failed
    error: str = ""
    new_tokens: int = 0


class TorchGenerator:
    """Greedy generation and reference loss of one causal LM under the decoding contract."""

    def __init__(self, model: Any, tok: Any, eff: dict[str, Any], decoding: Decoding):
        from claimcheck.engine.training.prepare import end_token_ids

        self.model, self.tok, self.eff, self.dec = model, tok, eff, decoding
        self.end_ids = end_token_ids(tok)
        model.eval()

    def prompt_ids(self, prompt: list[dict[str, str]]) -> list[int]:
        text = self.tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def generate(self, prompt: list[dict[str, str]]) -> Generation:
        return self.generate_many([prompt])[0]

    def generate_many(self, prompts: list[list[dict[str, str]]], batch: int = GEN_BATCH) -> list[Generation]:
        """Greedy answers in left-padded batches; a batch that raises is failed row by row, never zero."""
        out: list[Generation] = []
        for start in range(0, len(prompts), batch):
            part = prompts[start : start + batch]
            try:
                out.extend(self._generate_batch(part))
            except Exception as exc:  # noqa: BLE001 - missing evidence, counted per arm
                out.extend(
                    Generation(status="failed", error=f"{type(exc).__name__}: {exc}"[:200]) for _ in part
                )
        return out

    def _generate_batch(self, prompts: list[list[dict[str, str]]]) -> list[Generation]:
        import torch

        rows = [self.prompt_ids(p) for p in prompts]
        width = max(len(r) for r in rows)
        pad = self.tok.pad_token_id if self.tok.pad_token_id is not None else (self.end_ids or [0])[0]
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):
            ids[j, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[j, width - len(r) :] = 1
        with torch.no_grad():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=self.dec.max_new_tokens,
                do_sample=False,
                num_beams=1,
                eos_token_id=self.end_ids or None,
                pad_token_id=pad,
                stopping_criteria=self._stops(width),
            )
        return [self.finish(out[j, width:].tolist()) for j in range(len(rows))]

    def finish(self, new: list[int]) -> Generation:
        """Cut at the first end-of-turn token or stop sequence; no stop within the limit = truncated."""
        end = next((k for k, t in enumerate(new) if t in self.end_ids), None)
        raw = self.tok.decode(new[:end] if end is not None else new, skip_special_tokens=False)
        cuts = [raw.find(s) for s in self.dec.stop_sequences if s and s in raw]
        if cuts:
            raw = raw[: min(cuts)]
        stopped = end is not None or bool(cuts)
        return Generation(text=raw.strip(), status="scored" if stopped else "truncated", new_tokens=len(new))

    def _stops(self, n_prompt: int) -> Any:
        from transformers import StoppingCriteria, StoppingCriteriaList

        tok, stops = self.tok, [s for s in self.dec.stop_sequences if s]

        class _StopSequences(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                import torch

                texts = [tok.decode(r[n_prompt:].tolist(), skip_special_tokens=False) for r in input_ids]
                return torch.tensor([any(s in t for s in stops) for t in texts], device=input_ids.device)

        return StoppingCriteriaList([_StopSequences()] if stops else [])

    def reference_nll(self, conversations: list[list[dict[str, str]]]) -> list[tuple[float, int] | None]:
        """Per conversation, (summed NLL, tokens) of its last assistant turn given everything before
        it, encoded by the contract's own preparation code (engine/training/prepare.py) with
        last_assistant targets; None where the reference does not fit within max_length."""
        import torch

        from claimcheck.engine.training.evaluate import Encoded
        from claimcheck.engine.training.prepare import IGNORE, encode

        prep = encode({**self.eff, "target_turn_policy": "last_assistant"}, self.tok, conversations, None)
        enc = Encoded(
            [torch.tensor(r, dtype=torch.long) for r in prep.input_ids],
            [torch.tensor(r, dtype=torch.long) for r in prep.labels],
            list(range(len(prep.input_ids))),
            prep.pad_id,
            "cpu",
            False,
        )
        out: list[tuple[float, int] | None] = []
        for start in range(0, enc.n, GEN_BATCH):
            b = enc.batch(list(range(start, min(enc.n, start + GEN_BATCH))))
            labels = b.pop("labels")
            with torch.no_grad():
                logp = torch.log_softmax(self.model(**b).logits.float(), dim=-1)
            for j in range(labels.shape[0]):
                st = prep.stats[start + j]
                target = labels[j, 1:]
                keep = target != IGNORE
                if st["target_tokens_cut"] or not int(keep.sum()):
                    out.append(None)
                    continue
                nll = -logp[j, :-1][keep].gather(1, target[keep].unsqueeze(1)).sum()
                out.append((float(nll), int(keep.sum())))
        return out
