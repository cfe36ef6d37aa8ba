"""The bounded near-duplicate search alone, its texts in a text store as the bounded source stage
keeps them: wall and CPU time, each phase's peak RSS (a psutil sampler at 5 ms), the pairs' sha256.

    .venv/bin/python bench/neardup_store.py PARQUET [CHUNK_TEXTS CHUNK_BYTES]

It also prints the bytes the process read (/proc/self/io: rchar through read calls, read_bytes from
the disk) and, where the sketch bounds are a block join (blockjoin.py), its ranges, filled cells and
candidate codes written before the bounds (and offered to the coarse bound, where it exists).

PARQUET has `row_id` (Int64) and `body` columns (e.g. the `body` of bench/audit.py's tickets.csv).
Run it from two checkouts in turn (A/B, fresh processes) to compare them: it wraps the phases that
exist in either (bench/README.md, "Bounded memory, round 3").
"""

# ruff: noqa: E401, E402, E702, E501, I001
import sys, time, threading, hashlib
import claimcheck.tui.cli  # noqa
import polars as pl, psutil
from claimcheck.engine.audit import neardup
from claimcheck.engine.audit.neardup import shingles as sg
from claimcheck.engine.audit.textstore import spill
from claimcheck.engine.audit.budget import release_free_memory

proc = psutil.Process()
st = {"peak": 0.0}


def sample():
    while True:
        st["peak"] = max(st["peak"], proc.memory_info().rss / 2**20)
        time.sleep(0.005)


threading.Thread(target=sample, daemon=True).start()
if len(sys.argv) > 2:
    sg.CHUNK_TEXTS = int(sys.argv[2])
    sg.CHUNK_BYTES = int(sys.argv[3])
frame, store = spill(pl.scan_parquet(sys.argv[1]), ["body"])
import claimcheck.engine.audit.neardup as nd

mods = [
    (nd, "normalised_row_hashes"),
    (nd, "row_hashes_and_bytes"),
    (nd, "distinct_texts"),
    (nd, "verify_pairs"),
    (nd, "build_prefixes"),
    (sg, "_prefixes_pass2"),
]
mods.append((nd.sharded, "find_candidates") if hasattr(nd, "sharded") else (nd, "find_candidates"))
if hasattr(nd, "sharded") and hasattr(nd.sharded, "bound_cells"):
    _cells = nd.sharded.bound_cells

    def _bound_cells(cells, *a, **k):
        print(
            f"      [cells: {cells.m} ranges of {cells.span} texts, {len(cells.filled)} filled, {cells.codes:,} codes = {cells.codes * 8 / 2**20:.1f} MB before the bounds, of {_offered[0]:,} before the coarse bound]",
            flush=True,
        )
        return _cells(cells, *a, **k)

    nd.sharded.bound_cells = _bound_cells
    _coarse, _offered = nd.sharded.coarse_ok, [0]

    def _coarse_ok(codes, *a, **k):
        _offered[0] += codes.size
        return _coarse(codes, *a, **k)

    nd.sharded.coarse_ok = _coarse_ok
    mods.append((nd.sharded, "bound_cells"))
for mod, name in mods:
    if not hasattr(mod, name):
        continue
    f = getattr(mod, name)

    def w(*a, _f=f, _n=name, **k):
        saved = st["peak"]
        e0 = proc.memory_info().rss / 2**20
        st["peak"] = e0
        t = time.perf_counter()
        r = _f(*a, **k)
        print(
            f"      [{_n:22s} {time.perf_counter() - t:6.2f} s entry {e0:.0f} peak {st['peak']:.0f} (+{st['peak'] - e0:.0f}) exit {proc.memory_info().rss / 2**20:.0f}]",
            flush=True,
        )
        st["peak"] = max(saved, st["peak"])
        return r

    setattr(mod, name, w)
release_free_memory()
time.sleep(0.2)
base = proc.memory_info().rss / 2**20
st["peak"] = base
t = time.perf_counter()
c0 = time.process_time()
res = neardup.near_duplicates(frame, ["body"], bounded=True, store=store)
print(
    f"time {time.perf_counter() - t:.2f} s cpu {time.process_time() - c0:.2f} s base {base:.0f} peak {st['peak']:.0f} (+{st['peak'] - base:.0f}) pairs {res.pairs.height} cand {res.candidates} sha {hashlib.sha256(neardup.pairs_payload(res.pairs)).hexdigest()[:12]}"
)
store.close()
io = dict(line.split(": ") for line in open("/proc/self/io").read().split("\n") if line)
print(f"read: rchar {int(io['rchar']) / 2**20:,.0f} MB, read_bytes {int(io['read_bytes']) / 2**20:,.0f} MB")
