"""The figure of a declared search: the dev figure of each complete trial against each varied
setting, from the ledger's rows (engine/stages/contract/search_view.py). Drawn in the terminal by
tui/plots.py."""

from __future__ import annotations

import math
from typing import Any

from claimcheck.engine.report.figures import Lines
from claimcheck.engine.stages.contract.search_view import SearchView

# A varied setting's figure has one curve per combination of the other settings' values, up to this
# many; past it, one curve of every trial.
MAX_CURVES = 6


def _axis(space: dict[str, Any], value: Any) -> float | None:
    """Where a setting's value sits on its figure's x axis: log10 on a log scale, the choice's
    index for text choices."""
    if isinstance(value, str):
        choices = [str(c) for c in space.get("choices", [])]
        return float(choices.index(value)) if value in choices else None
    v = float(value)
    if space.get("log") or _log_choices(space):
        return math.log10(v) if v > 0 else None
    return v


def _log_choices(space: dict[str, Any]) -> bool:
    """Numeric choices spanning a factor of 10 or more are drawn on a log axis."""
    nums = [
        float(c) for c in space.get("choices", []) if isinstance(c, int | float) and not isinstance(c, bool)
    ]
    return len(nums) > 1 and min(nums) > 0 and max(nums) / min(nums) >= 10


def _x_label(space: dict[str, Any]) -> str:
    name = str(space.get("name", ""))
    if any(isinstance(c, str) for c in space.get("choices", [])):
        return name + " (" + ", ".join(f"{i}={c}" for i, c in enumerate(space["choices"])) + ")"
    return f"log10 {name}" if space.get("log") or _log_choices(space) else name


def setting_figures(view: SearchView) -> list[Lines]:
    """One figure per varied setting: the dev figure of every complete trial (not its seed repeats)
    against the setting, one curve per combination of the other settings' values."""
    done = [r for r in view.rows if r.kind == "trial" and r.state == "complete" and r.value is not None]
    figs = []
    for sp in view.space:
        name = str(sp.get("name", ""))
        others = [str(o.get("name", "")) for o in view.space if o.get("name") != name]
        groups: dict[str, list[tuple[float, float]]] = {}
        for r in done:
            x = _axis(sp, r.settings.get(name)) if name in r.settings else None
            if x is None or r.value is None:
                continue
            key = ", ".join(f"{o} = {r.settings.get(o)}" for o in others) or "trials"
            groups.setdefault(key, []).append((x, float(r.value)))
        if len(groups) > MAX_CURVES:
            groups = {"trials": [p for pts in groups.values() for p in pts]}
        series = {k: sorted(v) for k, v in sorted(groups.items())}
        figs.append(Lines(f"dev {view.metric} against {name}", series, _x_label(sp)))
    return figs
