"""A real causal-LM SFT session: the documented SFT answers file (docs/answers-sft.toml) run by
`claimcheck run --answers` on the sample chat data, CI-sized (one conversation in twenty, a tiny
Llama built on the spot instead of a real causal LM, a few optimizer steps on CPU)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import tomlkit

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "answers-sft.toml"
SAMPLE = ROOT / "sample_data" / "tickets_sft.jsonl"
SESSION = Path("runs") / "sft"


def ci_sized(answers: dict, model_dir: Path) -> dict:
    """The documented SFT example, shrunk for CI; every other decision stays as documented."""
    answers["session"]["workspace"] = "."
    answers["source"]["filters"] = [
        {"reason": "CI: one conversation in twenty", "where": "CAST(ticket_id AS BIGINT) % 20 = 0"}
    ]
    c = answers["contract"]
    c.update(model_path=str(model_dir), max_length=384, max_steps=8, micro_batch=4, grad_accum=1)
    c.update(eval_every_steps=4, checkpoint_every_steps=4, seed=3, on_required_fail="warn", device="cpu")
    c.update(gradient_checkpointing=False)
    c["lora"].update(r=8, alpha=16, dropout=0.0)
    c["optimizer"]["lr"] = 1e-2
    c["fit_check"].update(rows=8, steps=10, lr=1e-2)
    answers["dispatch"]["poll_seconds"] = 0.3
    answers["artifact"].update(bootstrap_resamples=200, latency_examples=2)
    answers["artifact"]["decoding"]["max_new_tokens"] = 6
    answers["baseline"]["bootstrap_resamples"] = 200
    return answers


def build(ws: Path) -> Path:
    """A workspace with a copy of the chat data and an SFT session built by `claimcheck run --answers`."""
    import torch

    from claimcheck.engine.training.tiny import make_tiny_llama
    from claimcheck.tui.cli import main

    torch.set_num_threads(1)
    (ws / "sample_data").mkdir(parents=True, exist_ok=True)
    shutil.copy(SAMPLE, ws / "sample_data" / SAMPLE.name)
    model = make_tiny_llama(ws / "tiny-llama", max_positions=512)
    answers = ci_sized(tomllib.loads(EXAMPLE.read_text()), model)
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    code = main(["run", "--answers", str(ws / "answers.toml"), str(ws / SESSION)])
    assert code == 0, "the documented SFT answers example did not build a session"
    return ws
