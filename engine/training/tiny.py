"""Tiny models and tokenizers built on the spot, for tests and offline demos.

Nothing here downloads anything: the BPE tokenizer is trained with the `tokenizers` library on a
small deterministic corpus, the WordPiece vocabulary is written out, and the models are
initialised from a config under a fixed seed. Every file is byte-identical across processes.
"""

from __future__ import annotations

import random
from pathlib import Path

# Chat template WITH {% generation %} markers: transformers can return an assistant mask from it.
# The end-of-turn token is the tokenizer's EOS, so the last supervised token of a reply is EOS.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "<|assistant|>\n{% generation %}{{ message['content'] }}<|end|>{% endgeneration %}"
    "{% else %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}<|end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# The same rendering WITHOUT generation markers: transformers' assistant mask is then all zero.
CHAT_TEMPLATE_NO_MARKERS = CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")

LLAMA_SPECIALS = ["<pad>", "<s>", "<|end|>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>"]
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

_WORDS = (
    "refund invoice charge billing payment card declined double charged subscription plan "
    "password login account locked reset email verify profile username two factor "
    "package delivery shipping tracking courier delayed lost address warehouse parcel "
    "return broken damaged replacement exchange label order item wrong size "
    "error crash bug app update install slow network device firmware screen "
    "security breach phishing suspicious fraud stolen unauthorised access alert "
    "please help thanks hello hi the a my is not was it to and of for with on in "
    "when can you i we our your this that how why what yes no sure done today week"
).split()


def _corpus(seed: int, n: int = 600) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        k = rng.randint(4, 16)
        lines.append(" ".join(rng.choice(_WORDS) for _ in range(k)))
    lines.extend(_WORDS)
    return lines


def _wordpiece_vocab(vocab_size: int) -> dict[str, int]:
    """Specials, every printable ASCII character alone and as a continuation, then whole words."""
    import string

    chars = sorted(set(string.ascii_lowercase + string.digits + string.punctuation))
    tokens = list(BERT_SPECIALS) + chars + [f"##{c}" for c in chars] + sorted(set(_WORDS))
    return {t: i for i, t in enumerate(dict.fromkeys(tokens[:vocab_size]))}


def make_tiny_llama(
    dir: Path,
    *,
    vocab_size: int = 512,
    chat_template: bool | str = True,
    seed: int = 0,
    max_positions: int = 256,
) -> Path:
    """A 2-layer Llama and a byte-level BPE tokenizer saved together in `dir`.

    chat_template: True = template with generation markers, False = no chat template,
    a string = that template (e.g. CHAT_TEMPLATE_NO_MARKERS for the planted failure).
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=LLAMA_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|end|>",
        pad_token="<pad>",
        unk_token="<unk>",
        additional_special_tokens=["<|system|>", "<|user|>", "<|assistant|>"],
    )
    if chat_template is True:
        fast.chat_template = CHAT_TEMPLATE
    elif isinstance(chat_template, str):
        fast.chat_template = chat_template
    fast.save_pretrained(dir)

    torch.manual_seed(seed)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=len(fast),
        max_position_embeddings=max_positions,
        bos_token_id=fast.bos_token_id,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        tie_word_embeddings=False,
        # A wide init so a frozen random LM head can still express confident predictions:
        # with the default 0.02 LoRA alone cannot push the loss below ~ln(vocab) - 1.
        initializer_range=0.2,
    )
    LlamaForCausalLM(config).save_pretrained(dir)
    return dir


def make_tiny_encoder(
    dir: Path, num_labels: int | None = None, *, vocab_size: int = 512, seed: int = 0
) -> Path:
    """A 2-layer BERT encoder and a WordPiece tokenizer saved together in `dir`.

    Without num_labels it is a bare encoder (like the packaged all-MiniLM-L6-v2 folder), so the
    classification head is initialised when the contract loads it; with num_labels the folder
    holds a BertForSequenceClassification with that head.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, BertModel, PreTrainedTokenizerFast

    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    # The vocabulary is written out, not trained: the WordPiece trainer breaks ties in hash
    # order, so two processes trained different vocabularies and fits differed between runs.
    tok = Tokenizer(models.WordPiece(vocab=_wordpiece_vocab(vocab_size), unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(dir)

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=len(fast),
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=256,
        pad_token_id=fast.pad_token_id,
        # Random features of a 64-wide encoder are too weak at the default 0.02 init (and with
        # dropout) for LoRA to fit a slice in a few dozen steps; a pretrained encoder has no such issue.
        initializer_range=0.1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    if num_labels:
        config.num_labels = num_labels
        BertForSequenceClassification(config).save_pretrained(dir)
    else:
        BertModel(config).save_pretrained(dir)
    return dir
