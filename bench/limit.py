"""Benchmark: the source + split audit of a long-text corpus several times larger than a real memory
limit (a cgroup, bench/cgroup_limit.py), against the same audit unlimited and in memory.

    .venv/bin/python bench/limit.py --work /tmp/limit-w --target-mb 1700 --limit-mb 512
    .venv/bin/python bench/limit.py --work /tmp/limit-w --limit-mb 512 --runs limited   # one run
    .venv/bin/python bench/limit.py --work /tmp/limit-w --data convs-parquet --limit-mb 512  # the same rows, Parquet
    .venv/bin/python bench/limit.py --work /tmp/t1m --data tickets --limit-mb 700        # bench/audit.py's tickets

The corpus (`--data convs`, generated once into WORK/convs.csv): SFT-like conversations of about
1-1.5 KB (user and assistant turns made of sentences drawn from a pool of pseudo-words), a source, a
user (the entity column), a label; planted exact copies (2 %, a quarter of them relabelled: conflicts)
and near copies (2 %, the last sentence replaced). Deterministic for a seed; chunks of CHUNK rows.

`--data convs-parquet` audits the same rows from WORK/convs.parquet, written once from convs.csv by
Polars' streaming engine (uncompressed, row groups of 8,192 rows, so that the file keeps the CSV's
size); `--data tickets` audits WORK/tickets.csv (bench/memory.py --phase gen; link /work/data1m's).

Runs, each a fresh process of this script (`--phase stages`), each in its own memory cgroup:
- unlimited: `memory_budget = 1000G` (every check in memory), the cgroup limited to physical memory
  only so that its peak usage is read the same way;
- limited: no budget setting at all, under the cgroup limit: the default budget (50 % of the cgroup's
  limit, engine/audit/budget.py) sends the reads and the near-duplicate search down the bounded path;
- limited-inmemory (`--runs …,limited-inmemory`): `memory_budget = 1000G` under the same limit,
  expected to be killed.
Every run prints each progress step's peak RSS as it ends, and the step that starts next (stderr,
kept in WORK/steps-TAG.txt); a killed run's result names the step it died in (`died_in`). The measured values of every check are compared between runs, and the pairs files' sha256.
"""

# ruff: noqa: E402
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

CHUNK = 100_000  # rows generated at a time
BIG = "1000G"
CONV_INPUTS = dict(
    files=["convs.csv"],
    label_column="label",
    input_columns=["conversation", "source"],
    text_columns=["conversation"],
    id_column="conv_id",
    entity_columns=["user_id"],
    availability={"conversation": "yes", "source": "yes"},
    near_dup_threshold=0.8,
    shingle_size=5,
    as_of="2026-01-01",
)
DATA_FILES = {"convs": "convs.csv", "convs-parquet": "convs.parquet", "tickets": "tickets.csv"}
LABELS = ["helpful", "refusal", "unsafe", "off_topic"]
SOURCES = ["forum", "docs", "chat", "synthetic"]
POOL = 40_000  # sentences
VOCAB = 6_000  # pseudo-words


def _pool(seed: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(seed)
    syl = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "pe", "da", "gu", "zo", "fi", "ber", "tan", "qua"]
    words = sorted({"".join(rng.choice(syl, size=int(rng.integers(1, 4)))) for _ in range(VOCAB * 2)})
    words = np.array(words[:VOCAB])
    out = []
    for _ in range(POOL):
        w = rng.choice(words, size=int(rng.integers(8, 15)))
        out.append(" ".join(w).capitalize() + rng.choice([".", "?", "!", "."]))
    return out


def make_chunk(n: int, seed: int, first_id: int, pool: list[str]):
    """n conversations: 12-18 sentences each, turns marked; planted exact and near copies within the
    chunk; labels with planted conflicts among the exact copies."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    k = 18
    idx = rng.integers(0, len(pool), size=(n, k))
    length = rng.integers(12, k + 1, size=n)
    label = rng.choice(len(LABELS), size=n, p=[0.6, 0.2, 0.1, 0.1])
    rows = np.arange(n)
    src_of = (rng.random(n) * np.maximum(rows, 1)).astype(np.int64)  # an earlier row
    exact = (rows % 50 == 7) & (rows > 0)
    near = (rows % 50 == 23) & (rows > 0)
    idx[exact] = idx[src_of[exact]]
    length[exact] = length[src_of[exact]]
    label[exact] = label[src_of[exact]]
    conflict = exact & (rows % 200 == 7)
    label[conflict] = (label[conflict] + 1) % len(LABELS)
    idx[near] = idx[src_of[near]]
    length[near] = length[src_of[near]]
    last = length[near] - 1
    idx[np.flatnonzero(near), last] = (idx[np.flatnonzero(near), last] + 1) % len(pool)
    sentences = pl.Series(pool)
    parts = []
    for j in range(k):
        s = sentences.gather(idx[:, j])
        turn = "user: " if j % 4 == 0 else ("assistant: " if j % 4 == 1 else "")
        sep = "\n" if j and j % 4 in (0, 1) else " "
        piece = pl.lit(("" if j == 0 else sep) + turn) + pl.lit(s)
        parts.append(pl.when(pl.lit(pl.Series(length > j))).then(piece).otherwise(None))
    body = pl.select(pl.concat_str(parts, ignore_nulls=True).alias("conversation")).to_series()
    return pl.DataFrame(
        {
            "conv_id": np.arange(first_id, first_id + n, dtype=np.int64),
            "user_id": (rng.integers(0, max(n // 8, 1), size=n) + first_id).astype(str),
            "source": np.array(SOURCES)[rng.integers(0, len(SOURCES), size=n)],
            "conversation": body,
            "label": np.array(LABELS)[label],
        }
    )


def generate(path: Path, rows: int = 0, target_mb: float = 0.0, seed: int = 41) -> dict:
    """Write the corpus to `path` (CSV): `rows` rows, or chunks until the file reaches `target_mb`."""
    pool = _pool(seed)
    written, i = 0, 0
    with path.open("wb") as f:
        while (rows and written < rows) or (target_mb and f.tell() < target_mb * 2**20):
            n = min(CHUNK, rows - written) if rows else CHUNK
            make_chunk(n, seed + 1 + i, written, pool).write_csv(f, include_header=i == 0)
            written, i = written + n, i + 1
    return {"rows": written, "csv_mb": round(path.stat().st_size / 2**20, 1)}


def _anon_sampler(state: dict) -> None:
    """The process's anonymous memory (what a cgroup cannot reclaim), peak per step."""
    while True:
        text = Path("/proc/self/smaps_rollup").read_text()
        anon = int(text.split("Anonymous:")[1].split()[0]) >> 10
        state["peak"] = max(state["peak"], anon)
        time.sleep(0.05)


def phase_probe(work: Path, data: str, what: str) -> None:
    """One step alone, each part's peak anonymous memory printed as it ends: `read` (the source
    file's scan streamed to Parquet as the bounded read does, then read back with stand-ins) or
    `neardup` (the bounded near-duplicate search on the spilled texts, by step)."""
    import claimcheck.tui.cli  # noqa: F401  (the app's Polars allocator option, before polars loads)

    # isort: split
    import polars as pl

    import claimcheck.engine.audit.neardup as nd
    from claimcheck.engine.audit import textstore

    state, t0 = {"step": "scan", "peak": 0}, time.perf_counter()
    threading.Thread(target=_anon_sampler, args=(state,), daemon=True).start()

    def mark(name: str) -> None:
        print(
            f"{time.perf_counter() - t0:7.1f} s  {state['step']:28s} anon peak {state['peak']:6d} MB",
            flush=True,
        )
        state["step"], state["peak"] = name, 0

    path = work / DATA_FILES[data]
    col = "body" if data == "tickets" else "conversation"
    if path.suffix == ".csv":
        lf = pl.scan_csv(path, infer_schema_length=None, encoding="utf8-lossy", glob=False)
    else:
        lf = pl.scan_parquet(path, glob=False)
    lf.collect_schema()
    lf = lf.with_row_index("row_id").with_columns(pl.col("row_id").cast(pl.Int64))
    mark("spill (sink, read back)")
    frame, store = textstore.spill(lf, [col])
    if what == "read":
        mark("end")
        return
    for name in (
        "normalised_row_hashes",
        "distinct_texts",
        "build_prefixes",
        "find_candidates",
        "verify_pairs",
    ):

        def wrapped(*a, _f=getattr(nd, name), _n=name, **k):
            mark(_n)
            out = _f(*a, **k)
            mark(f"after {_n}")
            return out

        setattr(nd, name, wrapped)
    inp = CONV_INPUTS
    nd.near_duplicates(
        frame,
        [col],
        threshold=inp["near_dup_threshold"],
        shingle_size=inp["shingle_size"],
        bounded=True,
        store=store,
    )
    mark("end")


def to_parquet(csv: Path, out: Path) -> None:
    import polars as pl

    lf = pl.scan_csv(csv, infer_schema_length=None)
    lf.sink_parquet(out, compression="uncompressed", row_group_size=8192, engine="streaming")


def _sampler(state: dict) -> None:
    import psutil

    proc = psutil.Process()
    while True:
        r = proc.memory_info().rss / 2**20
        state["peak"] = max(state["peak"], r)
        state["step_peak"] = max(state["step_peak"], r)
        time.sleep(0.05)


def phase_stages(work: Path, data: str, budget: str, tag: str) -> dict:
    """The source and split stages on WORK's data; each progress step's peak RSS on stderr."""
    import claimcheck.tui.cli  # noqa: F401  (the app's Polars allocator option, as `claimcheck` sets it)
    from claimcheck.engine.pipeline.context import StageContext
    from claimcheck.engine.stages.source import run as source
    from claimcheck.engine.stages.split import run as split

    if data == "tickets":
        import audit

        # WORK/tickets.csv may be a link to a shared copy (/work/data1m): read where it lies.
        inputs = {**audit.INPUTS, "allow_outside_workspace": True}
    else:
        inputs = {**CONV_INPUTS, "files": [DATA_FILES[data]]}
    t0 = time.perf_counter()
    state = {"step": "start", "peak": 0.0, "step_peak": 0.0}
    threading.Thread(target=_sampler, args=(state,), daemon=True).start()

    def prog(stage):
        def f(_x, label):
            print(
                f"{time.perf_counter() - t0:8.1f} s  {state['step']:44s} step peak "
                f"{state['step_peak']:7.0f} MB (peak {state['peak']:.0f})  -> {stage}: {label}",
                file=sys.stderr,
                flush=True,
            )
            state["step"], state["step_peak"] = f"{stage}: {label}", 0.0

        return f

    sess = work / f"session-{tag}"
    ctx = StageContext(session_dir=sess, workspace=work, progress=prog("source"))
    t = time.perf_counter()
    rec = source.run(source.Inputs(**inputs, memory_budget=budget), {}, ctx)
    t_source = time.perf_counter() - t
    ctx = StageContext(session_dir=sess, workspace=work, progress=prog("split"))
    t = time.perf_counter()
    sp = split.run(split.Inputs(strategy="random", rationale="bench"), {"source": rec}, ctx)
    t_split = time.perf_counter() - t
    prog("end")(None, "")
    from claimcheck.engine.audit.budget import strip_note

    figures = {
        c.id: {
            "measured": c.measured,
            "status": c.status,
            "summary": c.summary,
            "coverage": strip_note(c.coverage),
        }
        for c in [*rec.checks, *sp.checks]
    }
    (work / f"figures-{tag}.json").write_text(json.dumps(figures, sort_keys=True, default=str))
    pairs = sess / "data" / "near_duplicates.parquet"
    return {
        "source_s": round(t_source, 1),
        "split_s": round(t_split, 1),
        "rss_peak_mb": round(state["peak"], 1),
        "pairs_sha256": hashlib.sha256(pairs.read_bytes()).hexdigest() if pairs.exists() else "",
        "near_pairs": rec.check("source.near_duplicates").measured.get("pairs"),
        "coverage": {c.id: c.coverage for c in [*rec.checks, *sp.checks] if "memory:" in c.coverage},
    }


def same_figures(work: Path, a: str, b: str) -> bool:
    """Runs a and b recorded the same measured values, statuses, summaries and coverage (without its
    memory part) for every check."""
    x, y = work / f"figures-{a}.json", work / f"figures-{b}.json"
    if not (x.exists() and y.exists()):
        return False
    ja, jb = json.loads(x.read_text()), json.loads(y.read_text())
    for d in (ja, jb):  # the session's own paths differ by the run's folder
        for f in d.values():
            for k in ("pairs_path", "families_path"):
                if isinstance(f["measured"], dict):
                    f["measured"].pop(k, None)
    return ja == jb


def one_run(work: Path, data: str, tag: str, budget: str, limit: int) -> dict:
    from cgroup_limit import evict, run_limited

    # The source's pages leave the page cache first: the run reads them anew, into its own cgroup
    # (cached pages stay charged to the cgroup that read them, here an earlier run's).
    evict(work / DATA_FILES[data])
    cmd = [sys.executable, __file__, "--phase", "stages", "--work", str(work), "--data", data]
    cmd += ["--budget", budget, "--tag", tag]
    env = {k: v for k, v in os.environ.items() if k != "CLAIMCHECK_MEMORY_BUDGET"}
    load = os.getloadavg()[0]
    res = run_limited(cmd, limit, env=env)
    steps = res.stderr.strip().splitlines()
    out = {
        "tag": tag,
        "limit_mb": round(limit / 2**20),
        "returncode": res.returncode,
        "oom_killed": res.oom_killed,
        "cgroup_max_usage_mb": round((res.max_usage_bytes or 0) / 2**20, 1),
        "maxrss_mb": round(res.maxrss_bytes / 2**20, 1),
        "wall_s": res.wall_s,
        "load_at_start": round(load, 1),
    }
    if res.returncode == 0:
        out.update(json.loads(res.stdout.strip().splitlines()[-1]))
    else:
        out["last_steps"] = steps[-4:]
        # Each step line ends with the step that starts next: a killed run died in the last one named.
        named = [line.rsplit("  -> ", 1)[1] for line in steps if "  -> " in line]
        out["died_in"] = named[-1] if named else "start"
    (work / f"steps-{tag}.txt").write_text(res.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--data", choices=list(DATA_FILES), default="convs")
    ap.add_argument("--rows", type=int, default=0, help="corpus rows (else --target-mb)")
    ap.add_argument("--target-mb", type=float, default=1700.0, help="corpus CSV size to generate")
    ap.add_argument("--limit-mb", type=int, default=512, help="the cgroup memory limit (MiB)")
    ap.add_argument("--runs", default="unlimited,limited", help="unlimited,limited,limited-inmemory")
    ap.add_argument("--phase", default="")
    ap.add_argument("--probe", choices=["read", "neardup"], help="one step alone, under --limit-mb (0: none)")
    ap.add_argument("--budget", default="")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    work = Path(args.work)
    if args.phase == "stages":
        print(json.dumps(phase_stages(work, args.data, args.budget, args.tag), default=str))
        return 0
    if args.phase.startswith("probe-"):
        phase_probe(work, args.data, args.phase.removeprefix("probe-"))
        return 0
    if args.probe:
        from cgroup_limit import evict, run_limited

        evict(work / DATA_FILES[args.data])
        cmd = [
            sys.executable,
            __file__,
            "--phase",
            f"probe-{args.probe}",
            "--work",
            str(work),
            "--data",
            args.data,
        ]
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        res = run_limited(cmd, (args.limit_mb << 20) or physical, echo=True)
        print(f"exit {res.returncode}, OOM-killed {res.oom_killed}, peak RSS {res.maxrss_bytes >> 20} MB")
        return 0
    from cgroup_limit import unavailable

    why = unavailable()
    if why:
        print(f"{why}; use bench/memory.py --limit-mb (RLIMIT_DATA) instead", file=sys.stderr)
        return 3
    work.mkdir(parents=True, exist_ok=True)
    csv = work / DATA_FILES[args.data]
    if not csv.exists() and args.data != "tickets":
        t = time.perf_counter()
        if not (work / "convs.csv").exists():
            print(f"generate: {generate(work / 'convs.csv', args.rows, args.target_mb)}")
        if args.data == "convs-parquet":
            to_parquet(work / "convs.csv", csv)
        print(f"generated in {time.perf_counter() - t:.0f} s")
    size_mb = csv.stat().st_size / 2**20
    limit = args.limit_mb << 20
    print(f"source {csv} {size_mb:.0f} MB = {size_mb / args.limit_mb:.2f}x the {args.limit_mb} MB limit")
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    plan = {"unlimited": (BIG, physical), "limited": ("", limit), "limited-inmemory": (BIG, limit)}
    results = {}
    for tag in args.runs.split(","):
        budget, lim = plan[tag]
        results[tag] = one_run(work, args.data, tag, budget, lim)
        print(json.dumps(results[tag], default=str), flush=True)
    if "unlimited" in results and "limited" in results:
        a, b = results["unlimited"], results["limited"]
        print(
            f"measured values equal: {same_figures(work, 'unlimited', 'limited')}; pairs sha256 equal: "
            f"{bool(a.get('pairs_sha256')) and a.get('pairs_sha256') == b.get('pairs_sha256')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
