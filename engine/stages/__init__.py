"""The seven stage modules (claim, source, split, baseline, contract, dispatch, artifact).

The stage table itself lives in `engine.registry`, below the stages; it is re-exported here so that
`from engine import stages as registry` and `from engine.stages import STAGES, StageSpec` keep working.
"""

from __future__ import annotations

from engine.registry import STAGE_NAMES, STAGES, StageSpec, downstream_names, get, upstream_names

__all__ = ["STAGES", "STAGE_NAMES", "StageSpec", "downstream_names", "get", "upstream_names"]
