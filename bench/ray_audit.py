"""Benchmark: the audit's Ray backend (engine/audit/onray) against the local search, with the driver's memory.

    .venv/bin/python bench/ray_audit.py --data /work/data1m/tickets.csv [--paths local,bounded,ray1-frame,...]
    .venv/bin/python bench/ray_audit.py --rows 200000 --work DIR            # generates DIR/tickets.csv

The rows are a CSV's `body` (the text) and `queue` (the target), each row's position its row id: a file
`--data` names (bench/memory.py --phase gen writes one), or bench/audit.py's ticket-like rows generated
into `--work`. Each path runs in a fresh process (so that each peak is its own), timing the
near-duplicate search and the duplicate / conflict keys on the same rows:
- local: the frame read with its texts, the local in-memory search (engine.audit.neardup);
- bounded: the bounded path's spill (engine/audit/textstore.py: the frame holds stand-ins, the texts
  stay in the Parquet file), the local bounded search reading them from the store;
- rayW-frame: the frame read with its texts, the search and keys as Ray tasks on a loopback head with W
  worker CPUs (engine/providers/ray_testhead.py), tasks sent their texts from the frame (the Ray path
  before the texts stayed on disk with it);
- rayW-disk: the bounded path's spill, the Ray tasks sent their texts read from the store a slice at a
  time (the source stage's Ray path whenever the budget picks the bounded path);
- rayW-shared: the bounded path's spill, the Ray tasks reading their texts from the spill file
  themselves (`audit_ray_texts = "shared"`, engine/audit/onray/shared.py): the driver sends row ids;
- PATH@before: PATH run by the code of `--before REV` (default main): `git archive` of that revision
  laid out as the package under a temporary folder put first on PYTHONPATH (the Ray head and its
  workers inherit it), so that one run times the change against what it changed.
The driver's memory is sampled every 20 ms from /proc/self/status while the audit runs (after the
read): VmRSS (everything resident, including the object store's shared pages the driver wrote or
read through a `--driver gcs` connection) and RssAnon (the driver's own heap); ru_maxrss is the whole
process, read included. `near_cpu_s` / `dup_cpu_s`: the CPU seconds (user + system) each step took,
the driver's and, on Ray, every process of the loopback head's tree (GCS, raylet, workers) from /proc:
on a shared box, the overhead that does not move with the load. Every path's pairs (as the source stage writes them) and counts are compared
with the local path's: the script exits 1 on any difference. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

COLS = ["body"]


class Sampler:
    """Peak VmRSS and RssAnon (MB) of this process, sampled every 20 ms on a thread."""

    def __init__(self) -> None:
        self.peak = {"VmRSS": 0, "RssAnon": 0}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> None:
        for line in Path("/proc/self/status").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in self.peak:
                self.peak[key] = max(self.peak[key], int(line.split()[1]))

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._read()

    def __enter__(self) -> Sampler:
        self._read()
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self._read()

    def mb(self) -> dict[str, float]:
        return {f"driver_peak_{k}_mb": round(v / 1024, 1) for k, v in self.peak.items()}


def _cpu_s(root: int | None = None) -> dict[int, float]:
    """CPU seconds (user + system) of this process (key 0) and of each process below `root` (the
    loopback head's tree: GCS, raylet, the Ray workers), with their waited-for children, from /proc."""
    from claimcheck.engine.providers.ray_testhead import _descendants

    t = os.times()
    out = {0: t.user + t.system}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in _descendants(root) if root is not None else ():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended since it was listed: its CPU is not counted
        out[pid] = sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
    return out


def _cpu_since(before: dict[int, float], root: int | None = None) -> float:
    """CPU seconds spent since `before` (_cpu_s) by this process and the processes below `root`
    (those started since counted whole)."""
    now = _cpu_s(root)
    return sum(v - before.get(pid, 0.0) for pid, v in now.items())


def _warm() -> int:
    import claimcheck.engine.audit.onray.duplicates  # noqa: F401
    import claimcheck.engine.audit.onray.neardup  # noqa: F401

    return os.getpid()


def _load(data: Path, on_disk: bool) -> tuple[Any, Any]:
    """The rows as the source stage holds them: the frame with its texts, or (on_disk) the bounded
    path's spill, the frame holding stand-ins and the store the texts."""
    import polars as pl

    from claimcheck.engine.audit import textstore
    from claimcheck.engine.data.rows import TARGET

    lf = (
        pl.scan_csv(data, infer_schema=False)
        .select(*COLS, pl.col("queue").alias(TARGET))
        .with_row_index("row_id")
        .with_columns(pl.col("row_id").cast(pl.Int64))
    )
    if on_disk:
        return textstore.spill(lf, COLS)
    return lf.collect(), None


def _figures(res: Any, dup: Any, conf: Any) -> dict[str, Any]:
    from claimcheck.engine.audit.neardup import pairs_payload

    return {
        "counts": [res.pairs.height, res.candidates, res.verified_text_pairs, res.texts, res.shingles],
        "dup": [dup, conf],
        "pairs_sha256": hashlib.sha256(pairs_payload(res.pairs)).hexdigest(),
    }


def _local(df: Any, store: Any) -> dict[str, Any]:
    from claimcheck.engine.audit.duplicates import candidate_rows, conflict_stats, duplicate_stats
    from claimcheck.engine.audit.neardup import near_duplicates

    with Sampler() as s:
        t, c = time.perf_counter(), _cpu_s()
        res = near_duplicates(df, COLS, bounded=store is not None, store=store)
        near_s, near_cpu = time.perf_counter() - t, _cpu_since(c)
        t, c = time.perf_counter(), _cpu_s()
        cand = candidate_rows(df, COLS, "none", store=store)
        dup = duplicate_stats(df, COLS, "none", cand)
        conf = conflict_stats(df, COLS, cand)
        dup_s, dup_cpu = time.perf_counter() - t, _cpu_since(c)
    return {"near_s": round(near_s, 2), "dup_s": round(dup_s, 2), "near_cpu_s": round(near_cpu, 2),
            "dup_cpu_s": round(dup_cpu, 2), **s.mb(), **_figures(res, dup, conf)}  # fmt: skip


def _on_ray(df: Any, store: Any, workers: int, store_mb: int, how: tuple[str, str]) -> dict[str, Any]:
    """The search and the keys on a loopback head with `workers` CPUs; with `store`, the texts on disk
    (the keyword is left out without one: a `@before` revision may not take it). `how`: the driver's
    connection (client or gcs) and how the tasks get the texts on disk (sent, or shared: left out
    where sent, as the keyword is)."""
    driver, texts = how
    import numpy as np

    from claimcheck.engine.audit.onray import connect
    from claimcheck.engine.audit.onray import neardup as rn
    from claimcheck.engine.audit.onray.duplicates import identity_stats
    from claimcheck.engine.providers.ray_testhead import LoopbackHead

    held: dict[str, Any] = {}
    candidates = rn._candidates

    def measured(ray: Any, cluster: Any, p: Any, threshold: float) -> Any:
        # The prefix arrays (set sizes, sketches, prefixes) where the driver assembles them, bytes per text.
        if isinstance(p, tuple):
            held["driver_prefix_bytes_per_text"] = round(
                sum(a.nbytes for a in p if isinstance(a, np.ndarray)) / max(p.sizes.size, 1), 1
            )
        return candidates(ray, cluster, p, threshold)

    rn._candidates = measured
    head = LoopbackHead(num_cpus=workers, object_store_mb=store_mb)
    head.start()
    steps: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        shared = {"texts": texts} if texts != "sent" else {}
        with connect(head.client_address if driver == "client" else head.gcs_address, **shared) as (
            ray,
            cluster,
        ):
            steps["connect_s"] = time.perf_counter() - t0
            # Start the workers and import the search there (paid once per source stage, like the connection).
            t = time.perf_counter()
            ray.get([ray.remote(_warm).remote() for _ in range(2 * workers)])
            steps["workers_start_s"] = time.perf_counter() - t
            tree = head.proc.pid if head.proc is not None else None
            with Sampler() as s:
                t, c = time.perf_counter(), _cpu_s(tree)
                on_disk = {} if store is None else {"store": store}
                res = rn.near_duplicates(ray, cluster, df, COLS, **on_disk)
                steps["near_s"], steps["near_cpu_s"] = time.perf_counter() - t, _cpu_since(c, tree)
                t, c = time.perf_counter(), _cpu_s(tree)
                dup, _, conf = identity_stats(ray, cluster, df, COLS, "none", **on_disk)
                steps["dup_s"], steps["dup_cpu_s"] = time.perf_counter() - t, _cpu_since(c, tree)
            ident = cluster.note()
    finally:
        head.stop()
    return {**{k: round(v, 2) for k, v in steps.items()}, **s.mb(), **held, "cluster": ident,
            **_figures(res, dup, conf)}  # fmt: skip


def one(path: str, data: Path, store_mb: int, driver: str) -> dict[str, Any]:
    """One path in this process (module docstring)."""
    if driver == "gcs":
        # Ray replaces a 127.0.0.1 GCS address by the machine's own IP (where the loopback head does
        # not listen) unless it is told this node is not part of a multi-machine cluster.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    path = path.split("@")[0]
    on_disk = path == "bounded" or path.endswith(("-disk", "-shared"))
    t = time.perf_counter()
    df, store = _load(data, on_disk)
    out: dict[str, Any] = {"read_s": round(time.perf_counter() - t, 2)}
    try:
        if path in ("local", "bounded"):
            out |= _local(df, store)
        else:
            texts = "shared" if path.endswith("-shared") else "sent"
            out |= _on_ray(df, store, int(path[3:].split("-")[0]), store_mb, (driver, texts))
    finally:
        if store is not None:
            store.close()
    import claimcheck.engine.audit.onray.neardup as code

    out["code"] = str(Path(code.__file__).parents[3])
    out["process_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def _before(rev: str, folder: Path) -> Path:
    """A PYTHONPATH folder whose `claimcheck` package is revision `rev` (pyproject.toml's mapping:
    tui/root is the package, engine/ its `engine` and tui/ its `tui`), with this tree's compiled
    near-duplicate loops (a build output git does not hold)."""
    import shutil
    import tarfile
    import tempfile

    src = folder / "src"
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "-C", str(ROOT), "archive", rev, "engine", "tui"], stdout=tar, check=True)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            t.extractall(src, filter="data")
    for so in (ROOT / "engine" / "audit" / "neardup").glob("_kernels*.so"):
        shutil.copy2(so, src / "engine" / "audit" / "neardup" / so.name)
    pkg = folder / "pp" / "claimcheck"
    shutil.copytree(src / "tui" / "root", pkg)
    (pkg / "engine").symlink_to(src / "engine")
    (pkg / "tui").symlink_to(src / "tui")
    return folder / "pp"


def _data(args: argparse.Namespace) -> Path:
    if args.data:
        return Path(args.data)
    import audit

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    path = work / "tickets.csv"
    audit.make_data(args.rows).select("body", "queue").write_csv(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="", help="a CSV with `body` and `queue` columns")
    ap.add_argument("--rows", type=int, default=200_000, help="rows generated when --data is not given")
    ap.add_argument("--work", default="/tmp/ray-audit-bench", help="where generated rows are written")
    ap.add_argument(
        "--paths",
        default="local,bounded,ray1-frame@before,ray1-frame,ray1-disk,ray2-frame@before,ray2-frame,ray2-disk",
    )
    ap.add_argument("--before", default="main", help="the revision PATH@before runs (git archive)")
    ap.add_argument("--object-store-mb", type=int, default=2048)
    ap.add_argument(
        "--driver",
        choices=("client", "gcs"),
        default="gcs",
        help="client: through Ray Client (ray://, a laptop's path); gcs: a driver on the head node (host:port)",
    )
    ap.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, Path(args.data), args.object_store_mb, args.driver), default=str))
        return 0
    data = _data(args)
    out: dict[str, Any] = {"data": str(data), "cpus": os.cpu_count(), "driver": args.driver,
                           "load_before": os.getloadavg()}  # fmt: skip
    same = True
    import tempfile

    scratch = tempfile.TemporaryDirectory(prefix="ray-audit-before-")
    env = dict(os.environ)
    if any(p.endswith("@before") for p in args.paths.split(",")):
        out["before"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
                                       capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        pp = str(_before(args.before, Path(scratch.name)))
        env["PYTHONPATH"] = os.pathsep.join([pp, env["PYTHONPATH"]]) if env.get("PYTHONPATH") else pp
    for path in args.paths.split(","):
        cmd = [sys.executable, __file__, "--one", path, "--data", str(data),
               "--object-store-mb", str(args.object_store_mb), "--driver", args.driver]  # fmt: skip
        done = subprocess.run(
            cmd, capture_output=True, text=True, check=False, env=env if path.endswith("@before") else None
        )
        if done.returncode:
            print(done.stderr[-3000:], file=sys.stderr)
            out[path] = {"failed": done.returncode}
            same = False
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        if "local" in out and path != "local":
            r["same_as_local"] = all(r[k] == out["local"][k] for k in ("counts", "dup", "pairs_sha256"))
            same &= r["same_as_local"]
            r["near_vs_local"] = round(r["near_s"] / max(out["local"]["near_s"], 1e-9), 2)
            if "near_cpu_s" in r and "near_cpu_s" in out["local"]:
                r["near_cpu_vs_local"] = round(r["near_cpu_s"] / max(out["local"]["near_cpu_s"], 1e-9), 2)
            if "bounded" in out and path != "bounded":
                r["near_vs_bounded"] = round(r["near_s"] / max(out["bounded"]["near_s"], 1e-9), 2)
        out[path] = r
        print(json.dumps({path: r}, default=str), file=sys.stderr, flush=True)
    scratch.cleanup()
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1, default=str))
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
