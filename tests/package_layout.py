"""The installed package's layout, laid out from the repository's folders by pyproject.toml's
[tool.setuptools.package-dir] mapping: for tools that walk a package's folder (import-linter's grimp
needs one folder per top-level package, which an editable install does not have)."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Package name → the folder of the checkout at `root` it is installed from."""
    doc = tomllib.loads((root / "pyproject.toml").read_text())
    return {name: root / folder for name, folder in doc["tool"]["setuptools"]["package-dir"].items()}


def stage_package(dst: Path, root: Path = ROOT) -> Path:
    """Copy the checkout's sources into `dst/claimcheck/...` as a wheel would install them; returns `dst`."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "root")
    for name, src in sorted(package_dirs(root).items(), key=lambda kv: kv[0].count(".")):
        target = dst.joinpath(*name.split("."))
        shutil.copytree(src, target, ignore=ignore, dirs_exist_ok=True)
    return dst
