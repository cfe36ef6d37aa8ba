"""The import contracts in pyproject.toml ([tool.importlinter]) hold: the layers, no loops, no UI in
the engine. Runs `lint-imports` (import-linter, in the `test` extra); skips where it is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str | None:
    beside = Path(sys.executable).parent / "lint-imports"
    if beside.exists():
        return str(beside)
    return shutil.which("lint-imports")


def test_import_contracts_hold() -> None:
    exe = _lint_imports()
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    report = out.stdout + out.stderr
    assert out.returncode == 0, report
    assert "0 broken" in report, report
