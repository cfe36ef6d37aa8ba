"""The installed package's layout, laid out from the repository's folders by pyproject.toml's
[tool.setuptools.package-dir] mapping: for tools that walk a package's folder (import-linter's grimp
needs one folder per top-level package, which an editable install does not have)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, Path]:
    """Package name → the repository folder it is installed from."""
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {name: ROOT / folder for name, folder in doc["tool"]["setuptools"]["package-dir"].items()}


def stage_package(dst: Path) -> Path:
    """Copy the Python sources into `dst/claimcheck/...` as a wheel would install them; returns `dst`."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "root")
    for name, src in sorted(package_dirs().items(), key=lambda kv: kv[0].count(".")):
        target = dst.joinpath(*name.split("."))
        shutil.copytree(src, target, ignore=ignore, dirs_exist_ok=True)
    return dst
