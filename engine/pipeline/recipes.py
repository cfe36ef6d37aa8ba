"""Recipes: TOML presets per task kind that pre-fill the stage forms. The person can change every value."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from claimcheck.engine import resources
from claimcheck.engine.evidence import EvidenceError, read_toml
from claimcheck.engine.pipeline import registry

DEFAULT_RECIPE = "text-classification-qlora"


def recipes_dir() -> Path:
    return resources.folder(resources.RECIPES)


def _recipe_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(recipes_dir().glob("*.toml"))}


def list_recipes() -> list[tuple[str, str]]:
    """(name, one-line description) of every recipe, the default first."""
    out = []
    for name, path in _recipe_files().items():
        try:
            desc = tomllib.loads(path.read_text("utf-8")).get("recipe", {}).get("description", "")
        except (OSError, tomllib.TOMLDecodeError):
            desc = "(unreadable recipe file)"
        out.append((name, desc))
    return sorted(out, key=lambda nd: (nd[0] != DEFAULT_RECIPE, nd[0]))


def load_recipe(name: str) -> dict[str, dict[str, Any]]:
    """Stage name → input defaults. Unknown stage tables are an error naming the file."""
    files = _recipe_files()
    if name not in files:
        raise EvidenceError(
            recipes_dir() / f"{name}.toml",
            "(file)",
            "no such recipe",
            "choose one of: " + ", ".join(files),
        )
    data = read_toml(files[name])
    out: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if key == "recipe":
            continue
        if key not in registry.STAGE_NAMES:
            raise EvidenceError(
                files[name], key, "is not a stage name", "use one of " + ", ".join(registry.STAGE_NAMES)
            )
        out[key] = value
    return out


def template_texts(stage: str, field: str) -> set[str]:
    """The text each recipe gives `field` of `stage` (stripped, empty ones left out): a recipe's
    template words, which a check counting the person's own words does not count. A recipe that
    does not load gives none."""
    out: set[str] = set()
    for name in _recipe_files():
        try:
            value = load_recipe(name).get(stage, {}).get(field)
        except (EvidenceError, OSError):
            continue
        if isinstance(value, str) and value.strip():
            out.add(value.strip())
    return out
