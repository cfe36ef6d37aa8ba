"""The import contracts in pyproject.toml ([tool.importlinter]) hold: the layers, no loops, no UI in
the engine. Runs `lint-imports` (import-linter, in the `test` extra); skips where it is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.package_layout import stage_package

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str | None:
    beside = Path(sys.executable).parent / "lint-imports"
    if beside.exists():
        return str(beside)
    return shutil.which("lint-imports")


def test_import_contracts_hold(tmp_path: Path) -> None:
    exe = _lint_imports()
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    staged = stage_package(tmp_path / "site")
    env = {**os.environ, "PYTHONPATH": str(staged)}
    cmd = [exe, "--no-cache", "--config", str(ROOT / "pyproject.toml")]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    report = out.stdout + out.stderr
    assert out.returncode == 0, report
    assert "0 broken" in report, report
