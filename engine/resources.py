"""The product's own files, installed as package data: the recipes, the sample data, the answers examples.

Each is a folder on disk, whether claimcheck runs from a clone (an editable install maps the package
names onto the repository's folders: recipes/, sample_data/, docs/) or from a wheel (the files sit
inside the installed package). Read through importlib.resources.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

RECIPES = "claimcheck.recipes"
SAMPLE_DATA = "claimcheck.sample_data"
EXAMPLES = "claimcheck.examples"


def folder(package: str) -> Path:
    """The folder holding `package`'s files (one of the names above)."""
    return Path(str(files(package)))
