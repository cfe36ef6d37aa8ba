"""The house's shape: no module imports from a module that imports it, the README's map ("What is
where") names every package that exists and nothing that does not, and pyproject.toml installs every
package under the one import name."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from tests.package_layout import ROOT, package_dirs

CODE = ("engine", "tui")


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = ["claimcheck", *rel.parts]
    if parts[-1] == "__init__":
        parts.pop()
    if parts[1] == "tui" and len(parts) > 2 and parts[2] == "root":  # the package root lives in tui/root
        parts = ["claimcheck", *parts[3:]]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for top in CODE for p in (ROOT / top).rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules `name` imports (type-checking imports included: every edge counts)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def test_no_module_imports_a_module_that_imports_it() -> None:
    mods = _modules()
    graph = {n: _imports(n, p, set(mods)) for n, p in mods.items()}
    pairs = sorted(
        {tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, ())}
    )
    # A package's __init__ re-exporting its own submodules is not a loop between two modules.
    pairs = [(a, b) for a, b in pairs if not b.startswith(a + ".")]
    assert not pairs, pairs


def _readme_map() -> set[str]:
    text = (ROOT / "README.md").read_text("utf-8")
    section = text.split("## What is where", 1)[1].split("\n## ", 1)[0]
    return {m.rstrip("/") for m in re.findall(r"^\| `([^`]+)`", section, flags=re.M)}


def _packages() -> set[str]:
    """engine/ and tui/ and each package folder directly under engine/ (the concerns)."""
    found = {"engine", "tui"}
    found |= {str(p.parent.relative_to(ROOT)) for p in (ROOT / "engine").glob("*/__init__.py")}
    return found


def test_readme_map_matches_the_tree() -> None:
    listed = _readme_map()
    missing = _packages() - listed
    assert not missing, f"README.md 'What is where' does not list: {sorted(missing)}"
    gone = [p for p in listed if not (ROOT / p).exists()]
    assert not gone, f"README.md 'What is where' lists what does not exist: {gone}"


def test_every_package_is_installed_under_one_name() -> None:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(doc["tool"]["setuptools"]["packages"])
    on_disk = {"claimcheck"}
    for name, folder in package_dirs().items():
        if name == "claimcheck":
            continue
        on_disk.add(name)
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder)
            if rel.parts and rel.parts[0] != "root" and "__pycache__" not in rel.parts:
                on_disk.add(".".join([name, *rel.parts]))
    assert listed == on_disk, {
        "not installed": sorted(on_disk - listed),
        "not a folder": sorted(listed - on_disk),
    }
    assert all(n == "claimcheck" or n.startswith("claimcheck.") for n in listed)
