"""Benchmark: the source + split stages' peak memory and time, bounded against in-memory, in one run.

    .venv/bin/python bench/memory.py --rows 1000000 [--limit-mb N] [--paths bounded] [--rss-cap-mb N]

One command generates the ticket-like data of bench/audit.py (a CSV), then runs each phase in a fresh
subprocess so that every phase's peak RSS (ru_maxrss) is its own:
- inmemory: the source and split stages with `memory_budget` large (every check in memory);
- bounded: the same stages with a small `memory_budget` (every check that has one takes its
  bounded path: the CSV streamed to Parquet, the near-duplicate search in shards);
- limited (--limit-mb): the bounded run under RLIMIT_DATA = the limit, on a source at least 3x that
  limit, and the in-memory run under the same limit (expected to be refused or killed).
The measured values of every check are compared between the runs (they must be equal), and the pairs
files byte for byte. The frame is the loaded data set's Polars `estimated_size`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

BIG = "1000G"


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    """This process's user + system CPU seconds, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


GEN_CHUNK = 1_000_000  # rows generated at a time (a 10M frame is ~3.8 GB: never whole in memory)


def phase_gen(work: Path, rows: int) -> dict:
    """bench/audit.py's tickets; past GEN_CHUNK rows, chunks of GEN_CHUNK with their own seeds, ids
    and customers offset so that they stay distinct (planted copies stay within a chunk)."""
    import audit
    import polars as pl

    with (work / "tickets.csv").open("wb") as f:
        for i, lo in enumerate(range(0, rows, GEN_CHUNK)):
            n = min(GEN_CHUNK, rows - lo)
            df = audit.make_data(n, seed=7 + i) if rows > GEN_CHUNK else audit.make_data(n)
            if i:
                # Customers of a chunk number below n // 5, threads below 3 * n // 5: shifted past them.
                df = df.with_columns(
                    pl.col("ticket_id") + 3 * lo,
                    (pl.col("customer_id").cast(pl.Int64) + lo).cast(pl.String),
                    (pl.col("thread_id").cast(pl.Int64) + 3 * lo).cast(pl.String),  # null stays null
                )
            df.write_csv(f, include_header=i == 0)
            del df
    return {"csv_mb": (work / "tickets.csv").stat().st_size / 2**20}


def phase_stages(work: Path, budget: str, tag: str, limit_mb: int) -> dict:
    if limit_mb:
        lim = limit_mb * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))
    import audit

    import claimcheck.tui.cli  # noqa: F401  (the app's Polars allocator option, as `claimcheck` sets it)
    from claimcheck.engine.pipeline.context import StageContext
    from claimcheck.engine.stages.source import run as source
    from claimcheck.engine.stages.split import run as split

    base = rss_mb()
    sess = work / f"session-{tag}"
    ctx = StageContext(session_dir=sess, workspace=work)
    t, c = time.perf_counter(), cpu_s()
    rec = source.run(source.Inputs(**audit.INPUTS, memory_budget=budget), {}, ctx)
    t_source, c_source = time.perf_counter() - t, cpu_s() - c
    t, c = time.perf_counter(), cpu_s()
    sp = split.run(split.Inputs(strategy="random", rationale="bench"), {"source": rec}, ctx)
    t_split, c_split = time.perf_counter() - t, cpu_s() - c
    peak = rss_mb()
    status = Path("/proc/self/status").read_text()
    vmdata = int(status.split("VmData:")[1].split()[0]) / 1024 if "VmData:" in status else 0.0
    measured = {c.id: c.measured for c in [*rec.checks, *sp.checks]}
    (work / f"measured-{tag}.json").write_text(json.dumps(measured, sort_keys=True, default=str))
    pairs = sess / "data" / "near_duplicates.parquet"
    return {
        "source_s": round(t_source, 2),
        "split_s": round(t_split, 2),
        "source_cpu_s": round(c_source, 2),
        "split_cpu_s": round(c_split, 2),
        "rss_before_mb": round(base, 1),
        "rss_peak_mb": round(peak, 1),
        "vmdata_end_mb": round(vmdata, 1),
        "pairs_sha256": hashlib.sha256(pairs.read_bytes()).hexdigest() if pairs.exists() else "",
        "coverage": {c.id: c.coverage for c in rec.checks if "memory:" in c.coverage},
    }


def phase_frame(work: Path, by_batches: bool = False) -> dict:
    import audit

    import claimcheck.tui.cli  # noqa: F401
    from claimcheck.engine.data import rows as D

    ctx_in = dict(audit.INPUTS)
    from claimcheck.engine.pipeline.context import StageContext

    ctx = StageContext(session_dir=work / "session-frame", workspace=work)
    lf = D.load_dataset(ctx_in, ctx)
    if not by_batches:
        ds = lf.collect()
        return {"frame_mb": round(ds.estimated_size("mb"), 1), "rows": ds.height}
    # Past memory: the frame's size summed over batches of GEN_CHUNK rows (never loaded whole).
    mb, rows = 0.0, 0
    for part in lf.collect_batches(chunk_size=GEN_CHUNK, engine="streaming"):
        mb, rows = mb + part.estimated_size("mb"), rows + part.height
    return {"frame_mb": round(mb, 1), "rows": rows, "frame_by": "batches"}


RSS_CAP_MB = 0.0  # --rss-cap-mb: a phase whose resident set passes it is killed (0: no cap)


def _run(args: list[str]) -> dict:
    import psutil

    cmd = [sys.executable, __file__, *args]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    capped = False
    while p.poll() is None:
        try:
            rss = psutil.Process(p.pid).memory_info().rss / 2**20
        except psutil.Error:
            rss = 0.0
        if RSS_CAP_MB and rss > RSS_CAP_MB:
            p.kill()
            capped = True
        time.sleep(0.2)
    out, err = p.communicate()
    if capped:
        return {
            "failed": f"killed by the bench: RSS over {RSS_CAP_MB:.0f} MB",
            "wall_s": time.perf_counter() - t,
        }
    if p.returncode != 0:
        tail = (err or out).strip().splitlines()[-3:]
        return {"failed": f"exit {p.returncode}: " + " | ".join(tail), "wall_s": time.perf_counter() - t}
    res = json.loads(out.strip().splitlines()[-1])
    res["wall_s"] = round(time.perf_counter() - t, 2)
    return res


def _same(work: Path, a: str, b: str) -> bool:
    x, y = work / f"measured-{a}.json", work / f"measured-{b}.json"
    if not (x.exists() and y.exists()):
        return False
    drop = ("pairs_path", "families_path", "as_of")
    ja, jb = json.loads(x.read_text()), json.loads(y.read_text())
    for d in (ja, jb):
        for m in d.values():
            for k in drop:
                m.pop(k, None)
    return ja == jb


def round_at(rows: int, work: Path, limit_mb: int, small_budget: str, paths: tuple[str, ...]) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "tickets.csv").exists():
        print(f"generate {rows:,} rows: {_run(['--phase', 'gen', '--work', str(work), '--rows', str(rows)])}")
    by = ["--frame-by-batches"] if rows > GEN_CHUNK else []
    out: dict = {"rows": rows, "frame": _run(["--phase", "frame", "--work", str(work), *by])}
    print(f"[{rows:,} frame] {json.dumps(out['frame'])}", flush=True)
    for tag, budget in (("inmemory", BIG), ("bounded", small_budget)):
        if tag not in paths:
            out[tag] = {"skipped": "not in --paths"}
            continue
        out[tag] = _run(["--phase", "stages", "--work", str(work), "--budget", budget, "--tag", tag])
        print(f"[{rows:,} {tag}] {json.dumps(out[tag])}", flush=True)
    out["same_measured"] = _same(work, "inmemory", "bounded")
    out["same_pairs"] = out["inmemory"].get("pairs_sha256") == out["bounded"].get("pairs_sha256")
    if limit_mb:
        for tag, budget in (("limited-bounded", small_budget), ("limited-inmemory", BIG)):
            args = ["--phase", "stages", "--work", str(work), "--budget", budget, "--tag", tag]
            out[tag] = _run([*args, "--limit-mb", str(limit_mb)])
            print(f"[{rows:,} {tag}, RLIMIT_DATA {limit_mb} MB] {json.dumps(out[tag])}", flush=True)
        out["limited_same_measured"] = _same(work, "inmemory", "limited-bounded")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--phase", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--budget", default=BIG)
    ap.add_argument("--small-budget", default="64M", help="the bounded run's memory_budget")
    ap.add_argument("--tag", default="")
    ap.add_argument("--limit-mb", type=int, default=0, help="RLIMIT_DATA for the limited runs (MB)")
    ap.add_argument("--paths", default="inmemory,bounded", help="the unlimited runs made (comma-separated)")
    ap.add_argument("--rss-cap-mb", type=float, default=0.0, help="kill a phase whose RSS passes this")
    ap.add_argument("--frame-by-batches", action="store_true")
    args = ap.parse_args(argv)
    global RSS_CAP_MB
    RSS_CAP_MB = args.rss_cap_mb
    if args.phase:
        work = Path(args.work)
        fn = {
            "gen": lambda: phase_gen(work, args.rows),
            "frame": lambda: phase_frame(work, args.frame_by_batches),
            "stages": lambda: phase_stages(work, args.budget, args.tag, args.limit_mb),
        }[args.phase]
        print(json.dumps(fn(), default=str))
        return 0
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ccmem-"))
    print(f"work dir {work}; load {os.getloadavg()}", flush=True)
    res = round_at(args.rows, work, args.limit_mb, args.small_budget, tuple(args.paths.split(",")))
    f = res["frame"].get("frame_mb", 0) or 1
    for tag in ("inmemory", "bounded"):
        r = res[tag]
        if "rss_peak_mb" in r:
            print(
                f"{tag:9s}: source {r['source_s']:.1f}s + split {r['split_s']:.1f}s; peak RSS "
                f"{r['rss_peak_mb']:.0f} MB = {r['rss_peak_mb'] / f:.2f}x the {f:.0f} MB frame"
            )
    b, m = res["bounded"], res["inmemory"]
    if "source_s" in b and "source_s" in m:
        ratio = (b["source_s"] + b["split_s"]) / (m["source_s"] + m["split_s"])
        print(f"time bounded / in-memory: {ratio:.2f}x (goal <= 1.2x)")
    if "inmemory" in args.paths and "bounded" in args.paths:
        print(f"measured values equal: {res['same_measured']}; pairs files identical: {res['same_pairs']}")
    print(json.dumps(res, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
