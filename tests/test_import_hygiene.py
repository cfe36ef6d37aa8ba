"""The engine never imports the UI; the CLI's --help never loads the heavy libraries."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ["torch", "transformers", "peft", "bitsandbytes", "sklearn", "textual.app"]


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_engine_imports_neither_textual_nor_rich() -> None:
    code = "import claimcheck.engine, claimcheck.engine.evidence, claimcheck.engine.ledger.session\n"
    code += "import claimcheck.engine.pipeline.recipes\n"
    code += "from claimcheck.engine.pipeline import registry\n[s.module() for s in registry.STAGES]\n"
    loaded = _modules_after(code)
    assert not {m for m in loaded if m.split(".")[0] in ("textual", "rich")}
    # heavy libraries load lazily, inside the functions that need them
    assert not [m for m in ("torch", "transformers", "peft", "sklearn") if m in loaded]


def test_cli_help_is_light() -> None:
    loaded = _modules_after("import sys; sys.argv=['claimcheck','--help']\nimport claimcheck.tui.cli\n")
    assert not [m for m in HEAVY if m in loaded]
    out = subprocess.run(
        [sys.executable, "-m", "claimcheck.tui.cli", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "seven stages" in out.stdout
    for sub in ("report", "run"):
        out = subprocess.run(
            [sys.executable, "-m", "claimcheck.tui.cli", sub, "--help"], capture_output=True, text=True
        )
        assert out.returncode == 0 and "usage: claimcheck " + sub in out.stdout


def test_the_cli_asks_polars_to_return_freed_memory_unless_the_user_chose() -> None:
    import os

    code = "import claimcheck.tui.cli, polars, os; print(os.environ['_RJEM_MALLOC_CONF'])"
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    ours = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    # Polars puts its own defaults first; the later options win in jemalloc.
    assert ours.stdout.strip().endswith("dirty_decay_ms:0,muzzy_decay_ms:0")
    env["_RJEM_MALLOC_CONF"] = "dirty_decay_ms:250"
    theirs = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert theirs.stdout.strip().endswith("dirty_decay_ms:250")
