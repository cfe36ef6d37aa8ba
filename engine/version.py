"""claimcheck's version and, when it runs from a git checkout, the commit: what `--version` prints and
the contract's environment check records."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path

from claimcheck.engine import __version__


@cache
def git_commit() -> str | None:
    """The checkout's commit (with "+modified" when the work tree differs), or None outside a checkout."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists() or not (root / "pyproject.toml").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+modified" if dirty.stdout.strip() else "")


def describe() -> str:
    """`0.1.0` for an installed wheel, `0.1.0 (git 1a2b3c…)` from a checkout."""
    commit = git_commit()
    return __version__ if commit is None else f"{__version__} (git {commit})"
