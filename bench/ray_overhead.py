"""Overhead of the Ray Jobs path against the local provider for the same tiny training job.

    .venv/bin/python bench/ray_overhead.py                 # starts a Ray head on 127.0.0.1
    .venv/bin/python bench/ray_overhead.py --repeats 3
    .venv/bin/python bench/ray_overhead.py --address http://127.0.0.1:8265   # an existing head

Each run is one fresh job directory (same contract, next attempt number) taken from launch to a
fetched, checksum-verified artifact: `launch → wait(terminal) → fetch`. Local and Ray runs
alternate so machine load hits both alike. Reported per provider: every run's wall seconds, the
median, and for Ray its parts (launch call, Ray PENDING→end as Ray timed it, fetch). The head's
own start time is reported apart: a real cluster is already running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CLASSES = ["billing", "login"]
WORDS = {"billing": "refund invoice charge card payment", "login": "password login reset account locked"}


def effective(max_steps: int) -> dict[str, Any]:
    return {
        "task_kind": "text_classification",
        "model_path": "enc",
        "adapter_mode": "head",
        "label_classes": CLASSES,
        "optimizer": {"name": "adamw", "lr": 1e-3, "head_lr": 0.0, "weight_decay": 0.0},
        "schedule": {"name": "linear", "warmup_ratio": 0.0},
        "micro_batch": 4,
        "grad_accum": 1,
        "dp_replicas": 1,
        "precision": "fp32",
        "max_length": 32,
        "max_steps": max_steps,
        "epochs": 1,
        "seed": 0,
        "text_template": "{text}",
        "eval_every_steps": 0,
        "checkpoint_every_steps": 0,
        "checkpoint_selection": "last",
        "device": "cpu",
    }


def make_job(jobs_root: Path, workspace: Path, attempt: int, max_steps: int) -> tuple[Path, str]:
    import polars as pl

    from claimcheck.engine.evidence import digest_of
    from claimcheck.engine.providers.base import operation_id
    from claimcheck.engine.training import jobfiles

    eff = effective(max_steps)
    digest = digest_of(eff)
    op = operation_id(digest, attempt)
    rows = [{"row_id": i, "text": f"{WORDS[c]} {i}", "target": c} for i, c in enumerate(CLASSES * 12)]
    jobfiles.write_job_dir(
        jobs_root / op,
        effective=eff,
        digest=digest,
        op_id=op,
        attempt=attempt,
        train=pl.DataFrame(rows[:16]),
        dev=pl.DataFrame(rows[16:]),
        workspace=workspace,
        runtime={"heartbeat_seconds": 0.5, "threads": 1},
    )
    return jobs_root / op, op


def run_once(provider: Any, job_dir: Path, op: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    handle = provider.launch(job_dir, op)
    t_launch = time.perf_counter() - t0
    st = provider.wait(handle, timeout=600, poll=0.2)
    t_end = time.perf_counter() - t0
    provider.fetch(handle)
    from claimcheck.engine.training.artifact_files import verify_artifact

    ok = bool(verify_artifact(job_dir / "final").get("ok")) if st.phase == "done" else False
    total = time.perf_counter() - t0
    out = {"phase": st.phase, "verified": ok, "launch_s": round(t_launch, 3), "terminal_s": round(t_end, 3),
           "total_s": round(total, 3)}  # fmt: skip
    rec_path = job_dir / "ray.json"
    if rec_path.exists():
        rec = json.loads(rec_path.read_text())
        if rec.get("ray_end_time") and rec.get("ray_start_time"):
            out["ray_job_s"] = round((rec["ray_end_time"] - rec["ray_start_time"]) / 1000, 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--address", default="", help="an existing Ray dashboard (default: start one on 127.0.0.1)"
    )
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()

    import torch  # imported once up front so neither provider's fetch pays for it

    from claimcheck.engine.providers.local import LocalProvider
    from claimcheck.engine.providers.ray_jobs import RayJobsProvider
    from claimcheck.engine.providers.ray_testhead import LoopbackHead
    from claimcheck.engine.training.tiny import make_tiny_encoder

    del torch
    head = None
    head_s = 0.0
    if not args.address:
        t0 = time.perf_counter()
        head = LoopbackHead(num_cpus=2)
        args.address = head.start()
        head_s = time.perf_counter() - t0
    try:
        with tempfile.TemporaryDirectory(prefix="ray-overhead-") as tmp:
            root = Path(tmp)
            make_tiny_encoder(root / "ws" / "enc", num_labels=len(CLASSES))
            jobs_root = root / "jobs"
            local = LocalProvider(jobs_root)
            ray = RayJobsProvider(jobs_root, address=args.address)
            runs: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
            attempt = 0
            for _ in range(args.repeats):
                for name, prov in (("local", local), ("ray", ray)):
                    attempt += 1
                    job_dir, op = make_job(jobs_root, root / "ws", attempt, args.steps)
                    runs[name].append(run_once(prov, job_dir, op))
                    print(name, runs[name][-1], flush=True)
            summary = {
                name: {"median_total_s": round(statistics.median(r["total_s"] for r in rs), 3), "runs": rs}
                for name, rs in runs.items()
            }
            summary["overhead_s"] = round(
                summary["ray"]["median_total_s"] - summary["local"]["median_total_s"], 3
            )
            summary["head_start_s"] = round(head_s, 3)
            summary["address"] = args.address
            summary["steps"] = args.steps
            print(json.dumps(summary, indent=1))
            bad = [r for rs in runs.values() for r in rs if not (r["phase"] == "done" and r["verified"])]
            return 1 if bad else 0
    finally:
        if head is not None:
            head.stop()


if __name__ == "__main__":
    sys.exit(main())
