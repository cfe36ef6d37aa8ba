"""Which provider serves a job: built from the dispatch inputs that named it.

The dispatch stage launches through `from_inputs`; a view that only watches a job (the TUI's
dispatch panel) judges it through `for_job`, so a job launched on Ray is asked of Ray, never
judged as a missing local process. Providers are imported here lazily: base and the providers
never import this module, so there is no loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from claimcheck.engine.providers.base import Provider
from claimcheck.engine.training import jobfiles

PROVIDERS = ("local", "ray")
# A watcher asks Ray briefly: a cluster that does not answer must not hold up a screen.
WATCH_TIMEOUT_S = 3.0


def get_provider(name: str, jobs_root: Path) -> Provider:
    """The provider by name with its default settings, rooted at the session's jobs folder."""
    return from_inputs({"provider": name}, jobs_root)


def from_inputs(
    inputs: Mapping[str, Any],
    jobs_root: Path,
    resolve: Callable[[str], Path] | None = None,
    *,
    watch: bool = False,
) -> Provider:
    """The provider the dispatch inputs name (provider, ray_address, ray_* resources, output_location).

    `resolve` turns a workspace-relative output location into a path; `watch` makes the Ray
    client short-tempered (one try, a few seconds) for views that poll.
    """
    name = str(inputs.get("provider", "local") or "local")
    if name == "local":
        from claimcheck.engine.providers.local import LocalProvider

        return LocalProvider(jobs_root)
    if name != "ray":
        raise ValueError(f"unknown provider {name!r}; available: {', '.join(PROVIDERS)}")
    from claimcheck.engine.providers.ray_http import RayJobsClient
    from claimcheck.engine.providers.ray_jobs import RayJobsProvider, RayResources

    resources = RayResources(
        float(inputs.get("ray_num_cpus", 1.0)),
        float(inputs.get("ray_num_gpus", 0.0)),
        int(float(inputs.get("ray_memory_gb", 0.0)) * 2**30),
    )
    address = str(inputs.get("ray_address", "") or "http://127.0.0.1:8265")
    location = str(inputs.get("output_location", "") or "")
    output = str(resolve(location) if resolve else Path(location)) if location else None
    client = RayJobsClient(address, timeout=WATCH_TIMEOUT_S, retries=1) if watch else None
    return RayJobsProvider(jobs_root, address=address, resources=resources, output_root=output, client=client)


def named_by_job(job_dir: Path) -> dict[str, Any] | None:
    """The provider a job's own folder records, None when it records none yet.

    The Ray provider writes ray.json (naming its address) before its first request; the local
    provider writes pid.json when it starts the process.
    """
    job_dir = Path(job_dir)
    try:
        rec = json.loads((job_dir / jobfiles.RAY_RECORD).read_text())
    except (OSError, ValueError):
        rec = None
    if isinstance(rec, dict):
        return {"provider": "ray", "ray_address": str(rec.get("address", "") or "")}
    if (job_dir / jobfiles.PID_FILE).exists():
        return {"provider": "local"}
    return None


def for_job(
    job_dir: Path,
    inputs: Mapping[str, Any] | None = None,
    resolve: Callable[[str], Path] | None = None,
) -> Provider:
    """The provider to judge one job by: the one the dispatch inputs name, unless the job's own
    folder records another (an earlier attempt launched elsewhere). Built for watching."""
    job_dir = Path(job_dir)
    chosen = dict(inputs or {"provider": "local"})
    own = named_by_job(job_dir)
    if own is not None and own["provider"] != chosen.get("provider", "local"):
        chosen = own
    elif own is not None and own.get("ray_address"):
        chosen["ray_address"] = own["ray_address"]  # where it was really sent
    return from_inputs(chosen, job_dir.parent, resolve, watch=True)
