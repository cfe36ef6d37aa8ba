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


def test_the_contract_names_packages_and_hides_no_edge() -> None:
    """At most ten layer entries, every one a package or a module of the engine's base (no file of
    a concern named alone), and no ignored or type-checking-only import."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]["importlinter"]
    assert not config.get("exclude_type_checking_imports"), "type-checking imports must count"
    for contract in config["contracts"]:
        assert not contract.get("ignore_imports"), f"{contract['id']} ignores imports"
        assert not contract.get("exclude_type_checking_imports"), contract["id"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    assert len(layers) <= 10, layers
    for entry in layers:
        for name in (n.strip() for n in entry.replace("|", ":").split(":")):
            path = ROOT / Path(*name.split(".")[1:])
            is_package = (path / "__init__.py").is_file()
            base_module = path.parent == ROOT / "engine" and path.with_suffix(".py").is_file()
            assert is_package or base_module, (
                f"{name}: a layer names a package (or a module of engine/ itself)"
            )
