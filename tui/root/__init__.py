"""claimcheck: walk a fine-tuning claim through seven evidence stages, measured and recorded as TOML.

`claimcheck.engine` is the computation and the evidence ledger (no UI library), `claimcheck.tui` the
Textual app and the `claimcheck` command. This folder is the package root (pyproject.toml maps it).
"""

from claimcheck.engine import __version__

__all__ = ["__version__"]
