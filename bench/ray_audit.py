"""Benchmark: the audit's Ray backend (engine/audit/onray) at 1, 2 and 4 workers against the local search.

    .venv/bin/python bench/ray_audit.py --rows 200000 [--workers 1,2,4] [--object-store-mb 1024]

Generates bench/audit.py's ticket-like rows (planted exact and near copies), then times, each on the
same frame in this process:
- local: engine.audit.neardup.near_duplicates (in memory) and the duplicate / conflict keys
  (engine.audit.duplicates), one process;
- ray-W: a loopback Ray head (engine/providers/ray_testhead.py) with W worker CPUs, driven through Ray
  Client (ray://127.0.0.1:port, the laptop-to-cluster path), timing each step of the distributed search
  (passes 1-2, the candidate shuffle, verification) and the duplicate-key shuffle. The connection is
  timed apart (it is paid once per source stage).
Every Ray run's pairs (as the source stage writes them) and counts are compared with the local run's:
the script exits 1 on any difference. Prints one JSON document (the figures bench/README.md quotes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _warm() -> int:
    import claimcheck.engine.audit.onray.duplicates  # noqa: F401
    import claimcheck.engine.audit.onray.neardup  # noqa: F401

    return os.getpid()


def _local(df: Any) -> dict[str, Any]:
    from claimcheck.engine.audit.duplicates import candidate_rows, conflict_stats, duplicate_stats
    from claimcheck.engine.audit.neardup import near_duplicates, pairs_payload

    t = time.perf_counter()
    res = near_duplicates(df, ["body"])
    near_s = time.perf_counter() - t
    t = time.perf_counter()
    cand = candidate_rows(df, ["body"], "none")
    dup = duplicate_stats(df, ["body"], "none", cand)
    conf = conflict_stats(df, ["body"], cand)
    dup_s = time.perf_counter() - t
    return {
        "near_s": round(near_s, 2),
        "dup_s": round(dup_s, 2),
        "counts": [res.pairs.height, res.candidates, res.verified_text_pairs, res.texts, res.shingles],
        "dup": [dup, conf],
        "pairs_sha256": hashlib.sha256(pairs_payload(res.pairs)).hexdigest(),
    }


def _on_ray(df: Any, workers: int, store_mb: int, driver: str) -> dict[str, Any]:
    from claimcheck.engine.audit.neardup import NearDupResult, _expand, pairs_payload
    from claimcheck.engine.audit.neardup.arrays import split_codes
    from claimcheck.engine.audit.neardup.hashing import normalised_row_hashes
    from claimcheck.engine.audit.onray import connect
    from claimcheck.engine.audit.onray import neardup as rn
    from claimcheck.engine.audit.onray.duplicates import identity_stats
    from claimcheck.engine.audit.texts import distinct_texts
    from claimcheck.engine.providers.ray_testhead import LoopbackHead

    head = LoopbackHead(num_cpus=workers, object_store_mb=store_mb)
    head.start()
    steps: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        with connect(head.client_address if driver == "client" else head.gcs_address) as (ray, cluster):
            steps["connect_s"] = time.perf_counter() - t0
            # Start the workers and import the search there (each driver gets worker processes of its
            # own: this is paid once per source stage, like the connection).
            t = time.perf_counter()
            ray.get([ray.remote(_warm).remote() for _ in range(2 * workers)])
            steps["workers_start_s"] = time.perf_counter() - t
            t = time.perf_counter()
            texts, rows, text_of = distinct_texts(df, ["body"], "row_id", normalised_row_hashes(df, ["body"]))
            steps["distinct_texts_s"] = time.perf_counter() - t
            t = time.perf_counter()
            p = rn._prefixes(ray, cluster, texts, 5, 0.8)
            steps["passes_1_2_s"] = time.perf_counter() - t
            t = time.perf_counter()
            codes = rn._candidates(ray, cluster, p, 0.8)
            steps["candidates_s"] = time.perf_counter() - t
            sizes = p.sizes
            t = time.perf_counter()
            jac = rn._verified(ray, cluster, texts, codes, sizes, 5)
            steps["verify_s"] = time.perf_counter() - t
            t = time.perf_counter()
            a, b = split_codes(codes)
            hit = jac >= 0.8 - 1e-12
            res = NearDupResult(
                _expand(rows, text_of, a[hit], b[hit], jac[hit]),
                texts.len(),
                int(codes.size),
                int(hit.sum()),
                int(sizes.sum()),
            )
            steps["expand_s"] = time.perf_counter() - t
            t = time.perf_counter()
            dup, _, conf = identity_stats(ray, cluster, df, ["body"], "none")
            steps["dup_s"] = time.perf_counter() - t
            ident = cluster.note()
            tasks = {
                "pass_chunks": len(rn.pass_bounds(texts, cluster)),
                "partitions_min": cluster.partitions,
            }
    finally:
        head.stop()
    steps["near_s"] = sum(
        steps[k] for k in ("distinct_texts_s", "passes_1_2_s", "candidates_s", "verify_s", "expand_s")
    )
    return {
        **{k: round(v, 2) for k, v in steps.items()},
        "tasks": tasks,
        "cluster": ident,
        "counts": [res.pairs.height, res.candidates, res.verified_text_pairs, res.texts, res.shingles],
        "dup": [dup, conf],
        "pairs_sha256": hashlib.sha256(pairs_payload(res.pairs)).hexdigest(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--object-store-mb", type=int, default=1024)
    ap.add_argument(
        "--driver",
        choices=("client", "gcs"),
        default="client",
        help="client: through Ray Client (ray://, a laptop's path); gcs: a driver on the head node (host:port)",
    )
    args = ap.parse_args(argv)
    if args.driver == "gcs":
        # Ray replaces a 127.0.0.1 GCS address by the machine's own IP (where the loopback head does
        # not listen) unless it is told this node is not part of a multi-machine cluster.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    import audit
    import polars as pl

    from claimcheck.engine.data.rows import TARGET

    df = audit.make_data(args.rows).select("body", pl.col("queue").alias(TARGET))
    df = df.with_row_index("row_id").with_columns(pl.col("row_id").cast(pl.Int64))
    out: dict[str, Any] = {
        "rows": df.height,
        "text_mb": round(int(df["body"].str.len_bytes().sum()) / 2**20, 1),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "driver": args.driver,
    }
    out["local"] = _local(df)
    same = True
    for w in [int(x) for x in args.workers.split(",")]:
        r = _on_ray(df, w, args.object_store_mb, args.driver)
        r["same_as_local"] = all(r[k] == out["local"][k] for k in ("counts", "dup", "pairs_sha256"))
        same &= r["same_as_local"]
        r["near_overhead_vs_local"] = round(r["near_s"] / max(out["local"]["near_s"], 1e-9), 2)
        out[f"ray-{w}"] = r
        print(json.dumps({f"ray-{w}": r}, default=str), file=sys.stderr, flush=True)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1, default=str))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
