"""The one real session the readers are tested on: the documented answers example run by
`claimcheck run --answers` on the sample data, CI-sized (one ticket in eight, a tiny encoder instead
of all-MiniLM-L6-v2, a few optimizer steps). Built once per test run by the `real_session` fixture
in conftest.py; a test that edits it works on a copy (`copy_workspace`).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import tomlkit

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "answers-example.toml"
SAMPLE = ROOT / "sample_data" / "tickets.csv"
SESSION = Path("runs") / "sample"


def ci_sized(answers: dict, model_dir: Path) -> dict:
    """The documented example, shrunk for CI; every other decision stays as documented."""
    answers["session"]["workspace"] = "."
    answers["source"]["filters"] = [{"reason": "CI: one ticket in eight", "where": "ticket_id % 8 = 0"}]
    c = answers["contract"]
    c.update(model_path=str(model_dir), adapter_mode="lora", max_length=32, max_steps=12)
    c.update(eval_every_steps=6, checkpoint_every_steps=6, seed=3, on_required_fail="warn")
    c["lora"]["target_modules"] = ["query", "value"]
    c["optimizer"]["lr"] = 3e-3
    c["fit_check"].update(rows=16, steps=30, lr=1e-2)
    answers["dispatch"]["poll_seconds"] = 0.3
    answers["artifact"].update(bootstrap_resamples=200, latency_examples=3)
    answers["baseline"]["bootstrap_resamples"] = 200
    return answers


def build(ws: Path) -> Path:
    """A workspace with a copy of the sample data and a session built by `claimcheck run --answers`."""
    import torch

    from claimcheck.engine.training.tiny import make_tiny_encoder
    from claimcheck.tui.cli import main

    torch.set_num_threads(1)
    (ws / "sample_data").mkdir(parents=True)
    shutil.copy(SAMPLE, ws / "sample_data" / "tickets.csv")
    shutil.copy(SAMPLE.parent / "make_tickets.py", ws / "sample_data")  # the example's label script
    answers = ci_sized(tomllib.loads(EXAMPLE.read_text()), make_tiny_encoder(ws / "tiny-encoder"))
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    code = main(["run", "--answers", str(ws / "answers.toml"), str(ws / SESSION)])
    assert code == 0, "the documented answers example did not build a session"
    return ws


def copy_workspace(ws: Path, tmp_path: Path) -> Path:
    """A copy of the whole workspace, so one test's edits cannot touch another's; returns the session."""
    dest = tmp_path / "ws"
    shutil.copytree(ws, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest / SESSION


# ---------------------------------------------------------------- the tuned session

TUNING = ROOT / "docs" / "answers-tuning.toml"
TUNED = Path("runs") / "tuned"


def build_tuned(ws: Path) -> Path:
    """docs/answers-tuning.toml (a declared search of 6 trials, the top 2 repeated over 2 seeds) run
    CI-sized by `claimcheck run --answers` into ws/runs/tuned; the `tuned_workspace` fixture in
    conftest.py builds it once per test run."""
    import torch

    from claimcheck.engine.training.tiny import make_tiny_encoder
    from claimcheck.tui.cli import main

    torch.set_num_threads(1)
    (ws / "sample_data").mkdir(parents=True)
    shutil.copy(SAMPLE, ws / "sample_data" / "tickets.csv")
    answers = ci_sized(tomllib.loads(TUNING.read_text()), make_tiny_encoder(ws / "tiny-encoder"))
    (ws / "answers.toml").write_text(tomlkit.dumps(answers))
    code = main(["run", "--answers", str(ws / "answers.toml"), str(ws / TUNED)])
    assert code == 0, "docs/answers-tuning.toml did not build a session"
    return ws


def copy_tuned(ws: Path, tmp_path: Path) -> Path:
    """A copy of the tuned workspace; returns its session folder."""
    dest = tmp_path / "tuned-ws"
    shutil.copytree(ws, dest, ignore=shutil.ignore_patterns(".lock"))
    return dest / TUNED
