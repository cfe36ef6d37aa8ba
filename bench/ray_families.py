"""Benchmark: entity families on the Ray backend (engine/audit/onray/families.py) against the local ones.

    .venv/bin/python bench/ray_families.py --data /work/data1m/tickets.csv [--workers 2]

The rows are a CSV's entity columns (`--columns`, default customer_id,thread_id, as strings), each row's
position its row id. The local families (engine/audit/families.py) are timed first, then the Ray ones on
a loopback head with W worker CPUs (engine/providers/ray_testhead.py) driven through Ray Client, after
the workers started. The two frames are compared: the script exits 1 on any difference. Prints one
JSON document with the machine's load before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _warm() -> int:
    import claimcheck.engine.audit.onray.families  # noqa: F401

    return os.getpid()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="a CSV with the entity columns")
    ap.add_argument("--columns", default="customer_id,thread_id")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--object-store-mb", type=int, default=1024)
    args = ap.parse_args(argv)

    import polars as pl

    from claimcheck.engine.audit.families import compute_families
    from claimcheck.engine.audit.onray import connect
    from claimcheck.engine.audit.onray.families import compute_families as on_ray
    from claimcheck.engine.data.rows import FAMILY, ROW_ID
    from claimcheck.engine.providers.ray_testhead import LoopbackHead

    cols = args.columns.split(",")
    out: dict[str, object] = {"load_before": os.getloadavg()[0], "workers": args.workers, "columns": cols}
    df = (
        pl.scan_csv(args.data, infer_schema=False)
        .select(cols)
        .with_row_index(ROW_ID)
        .with_columns(pl.col(ROW_ID).cast(pl.Int64))
        .collect()
    )
    out["rows"] = df.height
    t = time.perf_counter()
    here = compute_families(df, cols)
    out["local_s"] = round(time.perf_counter() - t, 2)
    head = LoopbackHead(num_cpus=args.workers, object_store_mb=args.object_store_mb)
    head.start()
    try:
        with connect(head.client_address) as (ray, cluster):
            ray.get([ray.remote(_warm).remote() for _ in range(2 * args.workers)])  # start the workers
            t = time.perf_counter()
            there = on_ray(ray, cluster, df, cols)
            out["ray_s"] = round(time.perf_counter() - t, 2)
            out["partitions"] = cluster.partitions
    finally:
        head.stop()
    out["families"] = int(here.get_column(FAMILY).max()) + 1 if df.height else 0
    out["same"] = here.equals(there)
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out))
    return 0 if out["same"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
