"""The claim's target type, for the source and split audits: read from the metric registry
(engine/stats/registry.py), which holds every metric name and direction."""

from __future__ import annotations

from claimcheck.engine.stats.registry import TARGET_TYPES, target_type

__all__ = ["TARGET_TYPES", "target_type"]
