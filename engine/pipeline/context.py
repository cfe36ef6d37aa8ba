"""What a stage's run() may use besides its inputs: paths, progress, cancellation and runtime knobs.

Runtime knobs say how this run behaves (whether dispatch waits for its job, how often it polls), not
what the person decided: they are never part of a stage's inputs, so never part of its evidence.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from claimcheck.engine.errors import ClaimcheckError


class Cancelled(ClaimcheckError):
    """Raised inside a stage when the person cancelled the running computation."""


class StageInputError(ClaimcheckError):
    """A user mistake in a stage's inputs (missing file, unknown column): a clear message, no traceback."""


def _no_progress(fraction: float | None, message: str) -> None:
    return None


@dataclass
class StageContext:
    session_dir: Path
    # Relative paths in inputs (data files, model folders) resolve against the workspace.
    workspace: Path
    progress: Callable[[float | None, str], None] = _no_progress
    cancel_event: threading.Event = field(default_factory=threading.Event)
    # True when replay re-runs the stage: no new jobs, no writes outside the comparison.
    replay: bool = False
    # The stage calling into the engine; the locked-test guard names it in refusals.
    stage: str = ""
    # Runtime knobs of the dispatch stage (not evidence): wait for the launched job to end (headless
    # runs and tests) or return at once (the app follows the job live); how often to poll it; and
    # how long to wait at most (0 = as long as the job runs; the job itself keeps running).
    wait: bool = True
    poll_seconds: float = 2.0
    wait_timeout_seconds: float = 0.0

    @property
    def data_dir(self) -> Path:
        return self.session_dir / "data"

    def resolve(self, path: str | Path, *, inside: bool = False, field: str = "files") -> Path:
        """A path from the inputs, relative to the workspace.

        inside=True enforces the workspace boundary: the path, with every symlink followed, must lie
        inside the workspace; otherwise StageInputError says so (the input `allow_outside_workspace =
        true` lifts the rule and is recorded with the inputs).
        """
        p = Path(path).expanduser()
        out = p if p.is_absolute() else (self.workspace / p)
        if inside:
            root = Path(self.workspace).resolve()
            real = out.resolve()
            if not real.is_relative_to(root):
                link = f" (a symlink to {real})" if real != Path(os.path.normpath(out.absolute())) else ""
                raise StageInputError(
                    f"'{field}': {str(path)!r} lies outside the workspace {root}{link}; move or copy it "
                    "into the workspace, or set allow_outside_workspace = true to read it from there"
                )
        return out

    def check_cancelled(self) -> None:
        if self.cancel_event.is_set():
            raise Cancelled(f"{self.stage or 'stage'} cancelled")
