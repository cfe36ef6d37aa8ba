"""What a declared search's trials need from the machine: each trial's memory estimate and measured
step time (reused from an earlier trial of the same micro_batch / grad_accum / lora.r, attributed by
that trial's number, seed and digest, instead of being estimated and measured again), and how many
trials run at once: the declared concurrency, bounded on a local provider by the machine's cores and
by its available memory over the largest trial's estimate.

The bound and its reasons are written to search/r<N>/resources.toml when the search runs, and the
contract.search_concurrency check reads that file (so replay, on any machine, reproduces it).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomlkit

from claimcheck.engine.evidence import atomic_write_text, digest_of
from claimcheck.engine.shapes.tuning import TrialRecord
from claimcheck.engine.training import search as S
from claimcheck.engine.training.schema import Search

FILE = "resources.toml"
# Of the machine's available memory, the share the trials' memory estimates may fill together.
MEMORY_SHARE = 0.8


def estimate_bytes(base: dict[str, Any], settings: dict[str, Any], meta: Any) -> int | None:
    """The memory estimate (docs/memory-estimate.md) of the base contract with these settings, one
    micro-batch at max_length tokens; None where there is no meta model to estimate on."""
    from claimcheck.engine.training import memory

    if meta is None:
        return None
    eff = S.trial_effective(base, settings)
    est = memory.estimate(eff, meta, seq_len=int(eff["max_length"]), device_memory_bytes=0)
    return int(est["total_bytes"])


def with_resources(
    rec: TrialRecord,
    ledger: list[TrialRecord],
    base: dict[str, Any],
    meta: Any,
    cache: dict[str, int | None],
) -> TrialRecord:
    """The trial with its memory estimate: an earlier ended trial's estimate and measured step time
    where its resource settings are the same (attributed), else its own estimate (`cache`: the
    estimates already made in this run, by resource key)."""
    key = S.resource_key(rec.settings)
    for r in ledger:
        same = S.resource_key(r.settings) == key and (r.number, r.seed) != (rec.number, rec.seed)
        if same and r.resources_from is None and r.step_s is not None and r.memory_bytes:
            return rec.model_copy(
                update={
                    "memory_bytes": r.memory_bytes,
                    "step_s": r.step_s,
                    "resources_from": r.number,
                    "resources_from_seed": r.seed,
                    "resources_from_digest": r.digest,
                }
            )
    k = digest_of(key)
    if k not in cache:
        cache[k] = estimate_bytes(base, rec.settings, meta)
    return rec.model_copy(update={"memory_bytes": cache[k]})


def reuse_problems(ledger: list[TrialRecord]) -> list[str]:
    """A trial that says it reuses another's figures must name a measuring trial of the same resource
    settings, by its digest, with the same figures."""
    by = {(r.number, r.seed): r for r in ledger}
    out = []
    for r in ledger:
        if r.resources_from is None:
            continue
        src = by.get((r.resources_from, r.resources_from_seed if r.resources_from_seed is not None else -1))
        what = f"trial {r.number} (seed {r.seed}) reuses trial {r.resources_from}'s figures"
        if src is None or src.digest != r.resources_from_digest:
            out.append(f"{what}, but no such trial record has digest {(r.resources_from_digest or '')[:19]}…")
        elif S.resource_key(src.settings) != S.resource_key(r.settings):
            out.append(f"{what}, whose micro_batch / grad_accum / lora.r differ")
        elif (src.memory_bytes, src.step_s) != (r.memory_bytes, r.step_s):
            out.append(f"{what}, but its figures are not that trial's")
    return out


# ---------------------------------------------------------------- the concurrency bound


def bound(search: Search, base: dict[str, Any], meta: Any) -> dict[str, Any]:
    """How many trials run at once here, and why (resources.toml's content)."""
    import datetime as dt

    from claimcheck.engine.threads import usable_cores
    from claimcheck.engine.training import memory

    doc: dict[str, Any] = {"provider": search.provider, "declared": search.concurrency}
    doc["measured_at"] = dt.datetime.now(dt.UTC).isoformat()
    if search.provider != "local":
        doc.update(
            bound=search.concurrency,
            why=(
                f"the declared concurrency {search.concurrency}: each trial is a {search.provider} job, "
                "placed on the cluster's resources by its scheduler, not on this machine"
            ),
        )
        return doc
    cores = usable_cores()
    largest = S.largest_settings(search)
    per_trial = estimate_bytes(base, largest, meta)
    available = memory.available_memory(str(base.get("device", "cpu")))
    by_memory = max(1, int(available * MEMORY_SHARE // per_trial)) if per_trial and available else None
    n = min(x for x in (search.concurrency, cores, by_memory) if x is not None)
    reasons = [f"declared {search.concurrency}", f"{cores} usable core(s): one trial a core at most"]
    if by_memory is None:
        reasons.append("memory not bounded: no estimate or no available-memory figure")
    else:
        what = ", ".join(f"{k} = {v}" for k, v in largest.items()) or "the base contract's settings"
        reasons.append(
            f"{MEMORY_SHARE:.0%} of {available / memory.GIB:.2f} GiB available over the largest trial's "
            f"estimate {per_trial / memory.GIB:.3f} GiB ({what}; framework memory not included) = {by_memory}"
        )
    limits = [
        name
        for name, v in (("declared", search.concurrency), ("cores", cores), ("memory", by_memory))
        if v == n
    ]
    doc.update(
        cores=cores,
        by_cores=cores,
        threads_per_trial=max(1, cores // n),
        largest_settings=largest,
        memory_per_trial_bytes=per_trial or 0,
        memory_available_bytes=available,
        bound=n,
        why=f"{n} at once, the least of: " + "; ".join(reasons) + f" (set by {' and '.join(limits)})",
    )
    if by_memory is not None:
        doc["by_memory"] = by_memory
    return doc


def write(rdir: Path, doc: dict[str, Any]) -> None:
    rdir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rdir / FILE, tomlkit.dumps(doc))


def read(rdir: Path) -> dict[str, Any] | None:
    path = rdir / FILE
    return tomllib.loads(path.read_text()) if path.is_file() else None
