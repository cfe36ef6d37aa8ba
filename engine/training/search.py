"""A declared tuning search (the contract's `search` table): what may vary, its refusals, and the
trial contracts it makes.

The declaration (claimcheck.engine.training.schema.Search) is checked here against the base
effective contract before anything runs: each varied setting must be one of SEARCHABLE with a range
or choices of its type, the grid sampler needs choices, the dev metric must be one the job tracks,
and tied settings vary together (a search varying batch size with the learning rate pinned is
refused: a learning rate means nothing without the batch it was tuned for). `refusals` returns the
reasons; an empty list means the search may run.

A trial's effective contract is the base contract with the trial's settings (`trial_effective`):
the same dictionary the final run would train from, so its digest is the trial's identity.

No import of the stages or of optuna: claimcheck.engine.stages.contract.tuning runs the study.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

from claimcheck.engine.evidence import digest_of
from claimcheck.engine.training.schema import Search, SearchSetting

# The settings of the effective contract a search may vary, and their value type.
SEARCHABLE: dict[str, type] = {
    "optimizer.lr": float,
    "optimizer.head_lr": float,
    "optimizer.weight_decay": float,
    "lora.r": int,
    "lora.alpha": int,
    "lora.dropout": float,
    "schedule.name": str,
    "schedule.warmup_ratio": float,
    "micro_batch": int,
    "grad_accum": int,
    "max_steps": int,
}
# Ties every search keeps: a setting on the left varied means the ones on the right vary too.
BUILT_IN_TIES: tuple[tuple[str, ...], ...] = (
    ("micro_batch", "optimizer.lr"),
    ("grad_accum", "optimizer.lr"),
)
# Settings that change how many optimizer steps a trial runs (recomputed per trial).
STEP_SETTINGS = ("micro_batch", "grad_accum", "max_steps")
NO_SEARCH_KINDS = ("sklearn",)


def declaration_digest(search: Search) -> str:
    """The frozen declaration's identity (its settings as written, revision included)."""
    return digest_of(search.model_dump(mode="json", exclude_none=True))


def refusals(
    search: Search, base: dict[str, Any], tracked_metric: str, lower_is_better: bool | None
) -> list[str]:
    """Why this search cannot run as declared (empty: it can). `tracked_metric` is the metric the job
    tracks on dev for the base contract; `lower_is_better` the registry's direction of the declared
    metric (None: not in the registry)."""
    out: list[str] = []
    names = [s.name for s in search.space]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        out.append(f"space: {dup} is declared twice")
    for s in search.space:
        out.extend(_setting_refusals(s, search.sampler))
    varied = set(names)
    for group in search.tied:
        for name in group:
            if name not in SEARCHABLE:
                out.append(f"tied: {name} is not a setting a search may vary ({', '.join(SEARCHABLE)})")
    # a built-in tie binds one way (batch size varied → learning rate varied); a declared group both ways
    ties = [(t[0], t[1:]) for t in BUILT_IN_TIES] + [
        (g, tuple(search.tied[i])) for i, grp in enumerate(search.tied) for g in grp
    ]
    for trigger, needs in ties:
        pinned = [n for n in needs if n not in varied and n != trigger]
        if trigger in varied and pinned:
            out.append(
                f"tied settings: the search varies {trigger} but pins {', '.join(pinned)}; retune them together "
                "(a learning rate means nothing without the batch it was tuned for) — add them to the space"
            )
    metric = search.dev_metric or tracked_metric
    if metric != tracked_metric:
        out.append(
            f"dev_metric: {metric} is not the metric the training job tracks on dev for this contract "
            f"({tracked_metric}); declare {tracked_metric} or leave it empty"
        )
    elif lower_is_better is None and metric != "dev_loss":
        out.append(f"dev_metric: {metric} is not in the metric registry")
    if search.sampler == "grid" and not out:
        size = grid_size(search)
        if search.n_trials > size:
            out.append(
                f"n_trials: {search.n_trials} trials exceed the grid's {size} points; a grid point run twice is "
                "the same contract"
            )
    finals = min(search.finalists, search.n_trials)
    if search.seed_repeats and finals < 2:
        out.append(
            "finalists: seed repeats compare at least 2 finalists; declare finalists ≥ 2 or seed_repeats = 0"
        )
    if base.get("candidate_kind") in NO_SEARCH_KINDS:
        out.append("a search tunes a fine-tuning job; this contract's candidate is a scikit-learn learner")
    return out


def _setting_refusals(s: SearchSetting, sampler: str) -> list[str]:
    kind = SEARCHABLE.get(s.name)
    if kind is None:
        return [f"space: {s.name} is not a setting a search may vary ({', '.join(SEARCHABLE)})"]
    ranged = s.low is not None or s.high is not None
    if ranged and s.choices:
        return [f"space: {s.name} has both a range and choices; declare one"]
    if not ranged and not s.choices:
        return [f"space: {s.name} needs a range (low, high) or choices"]
    if s.choices:
        bad = [c for c in s.choices if not _fits(c, kind)]
        if bad:
            return [f"space: {s.name} choices {bad} are not {kind.__name__} values"]
        if len(set(map(str, s.choices))) != len(s.choices):
            return [f"space: {s.name} choices repeat a value"]
        return []
    if kind is str:
        return [f"space: {s.name} takes choices, not a range"]
    if sampler == "grid":
        return [f"space: {s.name}: the grid sampler needs choices, not a range"]
    if s.low is None or s.high is None or not s.low < s.high:
        return [f"space: {s.name} needs low < high (got {s.low}, {s.high})"]
    if kind is int and not (float(s.low).is_integer() and float(s.high).is_integer()):
        return [f"space: {s.name} is a whole number: low and high must be whole"]
    if s.log and s.low <= 0:
        return [f"space: {s.name} on a log scale needs low > 0"]
    return []


def _fits(value: Any, kind: type) -> bool:
    if kind is str:
        return isinstance(value, str)
    if isinstance(value, bool) or isinstance(value, str):
        return False
    return float(value).is_integer() if kind is int else True


def grid_size(search: Search) -> int:
    return math.prod(len(s.choices) or 1 for s in search.space)


def grid_space(search: Search) -> dict[str, list[Any]]:
    """The grid sampler's search space: each setting's choices, typed."""
    return {s.name: [typed(s.name, c) for c in s.choices] for s in search.space}


def grid_points(search: Search) -> list[dict[str, Any]]:
    space = grid_space(search)
    return [dict(zip(space, vals, strict=True)) for vals in itertools.product(*space.values())]


def typed(name: str, value: Any) -> Any:
    kind = SEARCHABLE[name]
    return int(value) if kind is int else (float(value) if kind is float else str(value))


def trial_effective(
    base: dict[str, Any], settings: dict[str, Any], seed: int | None = None
) -> dict[str, Any]:
    """The base effective contract with a trial's settings (and seed), its step counts recomputed."""
    eff = copy.deepcopy(base)
    for name, value in settings.items():
        cur = eff
        *parents, leaf = name.split(".")
        for p in parents:
            cur = cur[p]
        cur[leaf] = typed(name, value)
    if seed is not None:
        eff["seed"] = int(seed)
    if any(n in settings for n in STEP_SETTINGS):
        eff["effective_batch"] = eff["micro_batch"] * eff["grad_accum"] * eff["dp_replicas"]
        rows = int(eff["data"]["train_rows"])
        per_epoch = math.ceil(rows / eff["effective_batch"])
        eff["optimizer_steps"] = eff["max_steps"] or per_epoch * eff["epochs"]
    steps = int(eff["optimizer_steps"])
    eff["schedule"]["warmup_steps"] = int(math.ceil(eff["schedule"]["warmup_ratio"] * steps))
    return eff


def settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in settings.items())


# Settings that change a trial's memory estimate or the time of one optimizer step. A trial whose
# values of these equal an earlier trial's reuses that trial's estimate and measured step time.
RESOURCE_SETTINGS = ("micro_batch", "grad_accum", "lora.r")
# Of those, the ones a larger value of makes the memory estimate larger.
MEMORY_SETTINGS = ("micro_batch", "lora.r")


def resource_key(settings: dict[str, Any]) -> dict[str, Any]:
    """The trial's values of the settings its memory estimate and step time depend on."""
    return {k: settings[k] for k in RESOURCE_SETTINGS if k in settings}


def largest_settings(search: Search) -> dict[str, Any]:
    """The largest value the search may give each memory setting it varies (its most memory-hungry
    trial, for the concurrency bound)."""
    out: dict[str, Any] = {}
    for s in search.space:
        if s.name in MEMORY_SETTINGS:
            top = max(s.choices) if s.choices else s.high
            out[s.name] = typed(s.name, top)
    return out
