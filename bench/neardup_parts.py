"""The bounded near-duplicate search alone, each inner part's wall and thread CPU summed over its
calls (the compiled sort, run unpacking, pass split, bitmap; signature generation; pass matching;
the prefix build and its passes), then the process's user / system CPU and minor page faults.

    .venv/bin/python bench/neardup_parts.py PARQUET            # CC_THREADS=N: the thread cap held at N

PARQUET has `row_id` (Int64) and `body` columns, as for bench/neardup_store.py. Parts nest (the pass
split's time holds the signature generation it consumes); thread CPU counts the calling thread only.
The figures of bench/README.md round 8's "per-part CPU" lines came from this script at 1M and 10M.
"""

# ruff: noqa: E402, I001
import collections
import hashlib
import os
import resource
import sys
import time

import claimcheck.tui.cli  # noqa: F401  (the app's allocator setting)
import polars as pl
from claimcheck.engine import threads
from claimcheck.engine.audit import neardup
from claimcheck.engine.audit.neardup import kernels, ondisk, shingles, sharded
from claimcheck.engine.audit.textstore import spill

if os.environ.get("CC_THREADS"):
    threads.thread_cap = lambda: int(os.environ["CC_THREADS"])
acc: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])


def timed(owner: object, name: str, label: str) -> None:
    """owner.name replaced by a wrapper adding its wall and thread CPU to acc[label]."""
    f = getattr(owner, name)

    def wrapper(*a, **k):
        t, c = time.perf_counter(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            row = acc[label]
            row[0] += time.perf_counter() - t
            row[1] += time.thread_time() - c
            row[2] += 1

    setattr(owner, name, wrapper)


for mod, names in [
    (kernels, ["sort", "unpack_runs", "scatter", "bits_set", "bits_test"]),
    (sharded, ["_split_signatures", "coarse_ok", "bound_cells", "_single", "match_pass", "packed_pairs"]),
    (neardup, ["verify_pairs", "build_prefixes", "distinct_texts", "row_hashes_and_bytes"]),
    (shingles, ["_prefixes_pass2", "_pass1_chunk", "chunk_pass2"]),
]:
    for name in names:
        timed(mod, name, f"{mod.__name__.rsplit('.', 1)[-1]}.{name}")
for name in ["local", "entries"]:
    timed(ondisk.DiskPrefixes, name, f"DiskPrefixes.{name}")

frame, store = spill(pl.scan_parquet(sys.argv[1]), ["body"])
t, c = time.perf_counter(), time.process_time()
res = neardup.near_duplicates(frame, ["body"], bounded=True, store=store)
sha = hashlib.sha256(neardup.pairs_payload(res.pairs)).hexdigest()[:12]
print(
    f"time {time.perf_counter() - t:.2f} s cpu {time.process_time() - c:.2f} s pairs {res.pairs.height} cand {res.candidates} sha {sha}"
)
for label, (wall, cpu, calls) in sorted(acc.items(), key=lambda kv: -kv[1][0]):
    print(f"  {label:32s} wall {wall:8.2f} cpu {cpu:8.2f} calls {calls}")
ru = resource.getrusage(resource.RUSAGE_SELF)
print(f"user {ru.ru_utime:.1f} s sys {ru.ru_stime:.1f} s minor faults {ru.ru_minflt}")
store.close()
