"""The dispatch stage's inputs: what the person decides, with its defaults and validation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool


class Inputs(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    # local: a detached process on this machine. ray: Ray's Job Submission REST API (docs/ray.md).
    provider: Literal["local", "ray"] = Field(
        default="local",
        description="Where the job runs: local (a detached process here) or ray (Ray Jobs API).",
    )
    ray_address: str = Field(
        default="http://127.0.0.1:8265", description="The Ray dashboard address (provider ray)."
    )
    ray_num_cpus: float = Field(default=1.0, ge=0, le=100_000, description="CPUs the Ray job asks for.")
    ray_num_gpus: float = Field(default=0.0, ge=0, le=10_000, description="GPUs the Ray job asks for.")
    ray_memory_gb: float = Field(
        default=0.0, ge=0, le=10_000_000, description="Memory the Ray job asks for, in GB (0: no request)."
    )
    # Shared storage the Ray job writes to; empty = the session's own job folder, read in place.
    output_location: str = Field(
        default="", description="Shared storage the Ray job writes to; empty = the session's own job folder."
    )
    attempt: int = Field(
        default=1,
        ge=1,
        le=10_000,
        description="Attempt number: a new attempt starts a new job of the same contract.",
    )
    # Whether to wait for the job, how often to poll it and for how long are runtime knobs, not
    # evidence: StageContext.wait / poll_seconds / wait_timeout_seconds (engine/pipeline/core.py).
    # Restart a job whose process died before a terminal status, from its last checkpoint.
    resume: StrictBool = Field(
        default=False, description="Restart a job that died before finishing, from its last checkpoint."
    )
