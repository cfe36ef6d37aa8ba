"""Near-duplicate race: claimcheck's exact pass vs rensa (Rust MinHash + LSH) at equal recall.

    .venv/bin/python bench/neardup_race.py --corpus tickets --rows 200000 --rounds 2
    .venv/bin/python bench/neardup_race.py --corpus long --docs 20000 --rounds 2

`pip install -e .[bench]` brings rensa (pinned in constraints.txt). Two corpora:
- tickets: the distinct normalised bodies of bench/audit.py's generated tickets.csv (--rows; reused
  from --work when already generated);
- long: news-article-length documents (500-3,000 words), each a deterministic run of the sample
  data's sentences, with planted near copies (a few sentences replaced, dropped or inserted).

Each side runs in a fresh subprocess of this script (its peak RSS, ru_maxrss, is its own), A/B/A/B
for --rounds rounds; the driver prints `uptime` before and after. The texts are written once to a
parquet file both sides read (not timed).

rensa's pipeline, built to be fair to it: the same 5-word shingles of the same normalised texts,
shingled by vectorised Polars + numpy code (`--rensa-shingles numpy`, the default, as the issue
prescribes: words split and hashed by Polars, shingles by claimcheck.engine.audit.neardup.hashing's
numpy path; `--rensa-shingles compiled` hands it our compiled word and shingle loops, more generous);
`RMinHash.digest_matrix_from_flat_token_hashes` (128 permutations) a chunk at a time; the matrix to
numpy (`to_rows`: rensa 0.5.0 exposes no buffer, so this copy is timed apart and left out of its
total); LSH banding vectorised in numpy (one packed uint64 sort per band); its candidates verified by
our exact Jaccard (generous to it: no false positive survives). Band/row settings from few bands to
many run until its recall against our exact pair set reaches 1.0.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import claimcheck.tui.cli  # noqa: E402, F401  (the app's Polars allocator option, before polars loads)

# isort: split
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

NUM_PERM = 128
SEED = 42
# (bands, rows) from the LSH threshold ~0.8 down: (1/b)^(1/r) = 0.77, 0.71, 0.61, 0.53, 0.42, 0.29.
SETTINGS = [(9, 14), (16, 8), (20, 6), (25, 5), (32, 4), (42, 3)]
CHUNK = 0  # texts shingled and digested at a time (0: the engine's chunks; --rensa-chunk)
SHINGLES = (
    "numpy"  # rensa's shingle hashing: the vectorised numpy path, or our compiled loop (--rensa-shingles)
)


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _pool() -> pl.Series:
    bodies = (
        pl.read_csv(ROOT / "sample_data" / "tickets.csv", infer_schema=False).get_column("body").drop_nulls()
    )
    pool = bodies.str.split(". ").explode().str.strip_chars()
    return pool.filter(pool.str.len_chars() > 15).unique(maintain_order=True).sort()


def make_long_docs(n: int, seed: int = 11) -> pl.Series:
    """n documents of 500-3,000 words from the sample sentences; 3% are near copies of an earlier one
    (1-15% of its sentences replaced, and one dropped or inserted): deterministic for a seed."""
    rng = np.random.default_rng(seed)
    pool = _pool()
    words_per = pool.str.split(" ").list.len().mean()
    n_sent = np.ceil(rng.uniform(500, 3000, size=n) / words_per).astype(np.int64)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_sent, out=offs[1:])
    idx = rng.integers(0, pool.len(), size=int(offs[-1]))
    copy = rng.random(n) < 0.03
    copy[0] = False
    docs: list[np.ndarray] = []
    for i in range(n):
        if copy[i]:
            src = docs[int(rng.integers(0, i))].copy()
            swap = rng.random(src.size) < rng.uniform(0.01, 0.15)
            src[swap] = rng.integers(0, pool.len(), size=int(swap.sum()))
            at = int(rng.integers(0, src.size))
            src = (
                np.delete(src, at) if rng.random() < 0.5 else np.insert(src, at, rng.integers(0, pool.len()))
            )
            docs.append(src)
        else:
            docs.append(idx[offs[i] : offs[i + 1]])
    lens = np.array([d.size for d in docs])
    flat = pool.gather(np.concatenate(docs))
    doc_of = np.repeat(np.arange(n), lens)
    return (
        pl.DataFrame({"d": doc_of, "s": flat})
        .group_by("d", maintain_order=True)
        .agg(pl.col("s").str.join(". "))
        .get_column("s")
        .alias("body")
    )


def prepare(work: Path, corpus: str, rows: int, docs: int) -> Path:
    """The distinct normalised texts of a corpus, as one parquet column `body` (row i = text i)."""
    from claimcheck.engine.audit.texts import distinct_texts

    out = work / f"nd_{corpus}.parquet"
    if out.exists():
        return out
    if corpus == "tickets":
        csv = work / "tickets.csv"
        if not csv.exists():
            sys.path.insert(0, str(ROOT / "bench"))
            from audit import make_data

            make_data(rows).write_csv(csv)
        body = pl.read_csv(csv, columns=["body"]).get_column("body")
    else:
        body = make_long_docs(docs)
    frame = pl.DataFrame({"row_id": np.arange(body.len()), "body": body})
    texts, _, _ = distinct_texts(frame, ["body"], "row_id")
    texts.slice(0, texts.len()).alias("body").to_frame().write_parquet(out)
    return out


def _frame(path: Path) -> pl.DataFrame:
    body = pl.read_parquet(path).get_column("body")
    return pl.DataFrame({"row_id": np.arange(body.len()), "body": body})


def phase_ours(path: Path) -> dict:
    from claimcheck.engine.audit import neardup

    frame = _frame(path)
    base = rss_mb()
    t, c = time.perf_counter(), time.process_time()
    res = neardup.near_duplicates(frame, ["body"])
    secs, cpu = time.perf_counter() - t, time.process_time() - c
    res.pairs.write_parquet(path.with_suffix(".pairs.parquet"))
    return {
        "texts": frame.height,
        "words": int(frame.select(pl.col("body").str.count_matches(" ").sum()).item()) + frame.height,
        "seconds": secs,
        "cpu_s": cpu,
        "pairs": res.pairs.height,
        "candidates": res.candidates,
        "rss_before_mb": base,
        "rss_peak_mb": rss_mb(),
    }


def _shingles(texts: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """rensa's shingle hashes: words split and hashed by Polars, shingles by our numpy path (numpy);
    or our compiled word and shingle loops (compiled)."""
    from claimcheck.engine.audit.neardup import hashing, kernels

    if SHINGLES == "compiled":
        return hashing.doc_shingles(texts, 5)
    words = pl.DataFrame({"w": texts.str.split(" ")})
    lens = words.select(pl.col("w").list.len()).to_series().to_numpy().astype(np.int64)
    flat = words.select(pl.col("w").explode().hash(20240917)).to_series().to_numpy()
    del words
    compiled = kernels.available
    kernels.available = lambda: False  # type: ignore[assignment]
    try:
        return hashing.shingles_of_words(flat, lens, 5)
    finally:
        kernels.available = compiled  # type: ignore[assignment]


def _digests(texts, n: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Every text's 128 MinHash values (uint32, n x 128) by rensa, and raw shingle counts."""
    import rensa

    from claimcheck.engine.audit.neardup.shingles import chunks

    t_sh = t_mh = t_cv = 0.0
    mat = np.empty((n, NUM_PERM), dtype=np.uint32)
    counts = np.zeros(n, dtype=np.int64)
    # The engine's chunks (CHUNK_TEXTS texts, and CHUNK_BYTES of text: long documents make smaller
    # ones), so that rensa's shingling is as cache-friendly as ours (one 20,000-document chunk of 35 M
    # shingles cost it ~2 s more); --rensa-chunk 25000 gives the fixed 25,000-text chunks of round 6.
    bounds = chunks(texts) if CHUNK <= 0 else [(lo, min(lo + CHUNK, n)) for lo in range(0, n, CHUNK)]
    for lo, hi in bounds:
        t = time.perf_counter()
        h, d = _shingles(texts.slice(lo, hi - lo))
        if d.size > 1 and (d[1:] < d[:-1]).any():  # short texts come after the long ones
            order = np.argsort(d, kind="stable")
            h, d = h[order], d[order]
        m = hi - lo
        per = np.bincount(d, minlength=m)
        offs = np.zeros(m + 1, dtype=np.uint64)
        np.cumsum(per, out=offs[1:])
        counts[lo : lo + m] = per
        t_sh += time.perf_counter() - t
        t = time.perf_counter()
        dm = rensa.RMinHash.digest_matrix_from_flat_token_hashes(h, offs, NUM_PERM, SEED)
        t_mh += time.perf_counter() - t
        t = time.perf_counter()
        mat[lo : lo + m] = np.asarray(dm.to_rows(), dtype=np.uint32)
        t_cv += time.perf_counter() - t
    return mat, counts, {"shingle_s": t_sh, "minhash_s": t_mh, "to_numpy_s": t_cv, "shingles": SHINGLES}


def band_candidates(mat: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """Text pairs that agree on all `rows` values of at least one of `bands` bands (pair codes).

    Per band: the rows' values hashed to one uint64 whose low bits are replaced by the text index, so
    one plain sort groups equal bands (two bands whose kept 44 hash bits collide only add a
    candidate, which verification drops)."""
    from claimcheck.engine.audit.neardup.arrays import pair_codes, ranges, unique
    from claimcheck.engine.data.splits import splitmix64

    n = mat.shape[0]
    doc_bits = max(int(n - 1).bit_length(), 1)
    doc = np.arange(n, dtype=np.uint64)
    out = []
    for b in range(bands):
        key = np.zeros(n, dtype=np.uint64)
        for j in range(b * rows, (b + 1) * rows):
            key = splitmix64(key ^ mat[:, j].astype(np.uint64))
        packed = ((key >> np.uint64(doc_bits)) << np.uint64(doc_bits)) | doc
        packed.sort()
        k = packed >> np.uint64(doc_bits)
        new = np.ones(n, dtype=bool)
        new[1:] = k[1:] != k[:-1]
        start = np.flatnonzero(new)
        size = np.diff(np.append(start, n))
        multi = size > 1
        start, size = start[multi], size[multi]
        if start.size == 0:
            continue
        # Every pair within each run: entry e of a run pairs with the later entries of its run.
        entry = ranges(start, size)
        later = np.repeat(start + size, size) - entry - 1
        left = np.repeat(entry, later)
        right = left + 1 + ranges(np.zeros(later.size, dtype=np.int64), later)
        ids = (packed & np.uint64((1 << doc_bits) - 1)).astype(np.int64)
        out.append(unique(pair_codes(ids[left], ids[right])))
    return unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


def phase_rensa(path: Path) -> dict:
    import rensa  # noqa: F401  (import errors surface here, before timing)

    from claimcheck.engine.audit.neardup import verify
    from claimcheck.engine.audit.neardup.arrays import small_pages
    from claimcheck.engine.audit.texts import Texts

    frame = _frame(path)
    truth_df = pl.read_parquet(path.with_suffix(".pairs.parquet"))
    truth = (truth_df["row_a"].to_numpy().astype(np.uint64) << np.uint64(32)) | truth_df[
        "row_b"
    ].to_numpy().astype(np.uint64)
    base = rss_mb()
    texts = Texts(frame, ["body"], np.arange(frame.height))
    c = time.process_time()
    # The page setting our search runs under (arrays.small_pages), for rensa's side too: a setting of
    # the process, not part of either method.
    with small_pages():
        mat, counts, pre = _digests(texts, frame.height)
    pre_cpu = time.process_time() - c  # includes to_rows
    runs = []
    for bands, rows in SETTINGS:
        t, c = time.perf_counter(), time.process_time()
        with small_pages():
            cand = band_candidates(mat, bands, rows)
        t_band = time.perf_counter() - t
        t = time.perf_counter()
        with small_pages():
            a, b, jac = verify.verify_pairs(texts, cand, counts, 5)
        hit = jac >= 0.8 - 1e-12
        found = (a[hit].astype(np.uint64) << np.uint64(32)) | b[hit].astype(np.uint64)
        t_ver = time.perf_counter() - t
        cpu = pre_cpu + time.process_time() - c
        recall = float(np.isin(truth, found).mean()) if truth.size else 1.0
        total = pre["shingle_s"] + pre["minhash_s"] + t_band + t_ver
        runs.append(
            pre
            | {"bands_rows": [bands, rows], "band_s": t_band, "verify_s": t_ver, "total_s": total}
            | {
                "cpu_s_with_to_rows": cpu,
                "candidates": int(cand.size),
                "recall": recall,
                "extra_pairs": int(np.setdiff1d(found, truth).size),
            }
        )
        if recall >= 1.0:
            break
    return {"version": "0.5.0", "runs": runs, "rss_before_mb": base, "rss_peak_mb": rss_mb()}


def _run(args: list[str]) -> dict:
    t = time.perf_counter()
    # RUSAGE_CHILDREN is the largest peak of any waited-for child: each phase also reports its own.
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if p.returncode != 0:
        return {"failed": p.stderr[-3000:]}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t
    return res


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", choices=["tickets", "long"], default="tickets")
    ap.add_argument("--rows", type=int, default=1_000_000, help="tickets.csv rows (tickets corpus)")
    ap.add_argument("--docs", type=int, default=20_000, help="documents (long corpus)")
    ap.add_argument("--rounds", type=int, default=2, help="A/B rounds (ours, then rensa)")
    ap.add_argument("--work", default="")
    ap.add_argument("--phase", default="")
    ap.add_argument(
        "--rensa-chunk", type=int, default=0, help="rensa's texts per chunk (0: the engine's chunks)"
    )
    ap.add_argument("--rensa-shingles", choices=["numpy", "compiled"], default="numpy")
    args = ap.parse_args(argv)
    global CHUNK, SHINGLES
    CHUNK, SHINGLES = args.rensa_chunk, args.rensa_shingles
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ccnd-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.phase:
        path = work / f"nd_{args.corpus}.parquet"
        fn = {
            "prepare": lambda: {"path": str(prepare(work, args.corpus, args.rows, args.docs))},
            "ours": lambda: phase_ours(path),
            "rensa": lambda: phase_rensa(path),
        }[args.phase]
        print(json.dumps(fn()))
        return 0
    common = [
        "--corpus",
        args.corpus,
        "--work",
        str(work),
        "--rows",
        str(args.rows),
        "--docs",
        str(args.docs),
        "--rensa-chunk",
        str(args.rensa_chunk),
        "--rensa-shingles",
        args.rensa_shingles,
    ]
    print(json.dumps({"prepare": _run(["--phase", "prepare", *common])}), flush=True)
    print(f"uptime before: {_uptime()}", flush=True)
    ours_t, rensa_t = [], []
    for r in range(args.rounds):
        o = _run(["--phase", "ours", *common])
        print(f"[round {r + 1} ours] {json.dumps(o)}", flush=True)
        z = _run(["--phase", "rensa", *common])
        print(f"[round {r + 1} rensa] {json.dumps(z)}", flush=True)
        if "seconds" in o and "runs" in z:
            last = z["runs"][-1]
            ours_t.append(o["seconds"])
            rensa_t.append(last["total_s"])
            print(
                f"  round {r + 1}: {o['texts']:,} texts; ours {o['seconds']:.2f}s ({o['pairs']:,} row pairs, "
                f"{o['rss_peak_mb']:.0f} MB peak); rensa b={last['bands_rows'][0]} r={last['bands_rows'][1]} "
                f"{last['total_s']:.2f}s (+{last['to_numpy_s']:.2f}s to_rows), recall {last['recall']:.4f}, "
                f"{z['rss_peak_mb']:.0f} MB peak; ratio {last['total_s'] / o['seconds']:.2f}x",
                flush=True,
            )
    print(f"uptime after: {_uptime()}")
    if ours_t:
        print(
            f"median: ours {np.median(ours_t):.2f}s, rensa {np.median(rensa_t):.2f}s, "
            f"ratio of medians {np.median(rensa_t) / np.median(ours_t):.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
