"""Benchmark: the source + split audit on a generated ticket-like data set, against reference implementations.

    .venv/bin/python bench/audit.py --rows 1000000

Deepchecks, datasketch and pandas are not installed in this environment (and nothing may be installed),
so the comparisons run against plain-Python implementations of the same definitions:
- DataDuplicates / ConflictingLabels / TrainTestSamplesMix: dict / Counter over row tuples (what a
  pandas groupby computes, row by row);
- IdentifierLabelCorrelation: per-column cell → majority label lookup in Python dicts;
- datasketch MinHashLSH: its algorithm (per-document MinHash.update over SHA1-hashed shingles with
  128 permutations mod the Mersenne prime 2^61-1, then per-band dict buckets), with the same bands /
  rows as ours so the theoretical recall matches; both candidate sets are verified by exact Jaccard.
Peak memory is the process's maxrss against the data's in-memory size (Polars estimated_size).
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUEUES = ["billing", "technical", "account", "shipping", "returns", "security"]


def make_data(n: int, seed: int = 7) -> pl.DataFrame:
    """Ticket-like rows: bodies from a sentence pool + unique numbers, planted copies, families, leaky columns."""
    rng = np.random.default_rng(seed)
    sample = ROOT / "sample_data" / "tickets.csv"
    if sample.exists():
        bodies = pl.read_csv(sample, infer_schema=False).get_column("body").drop_nulls()
        pool = bodies.str.split(". ").explode().str.strip_chars()
        pool = pool.filter(pool.str.len_chars() > 15).unique(maintain_order=True)
    else:
        pool = pl.Series(
            [f"sentence number {i} about an order problem with the account" for i in range(3000)]
        )
    q = rng.choice(len(QUEUES), size=n, p=[0.26, 0.27, 0.18, 0.14, 0.13, 0.02])
    k = 4
    idx = rng.integers(0, pool.len(), size=(n, k))
    parts = [pool.gather(idx[:, j]) for j in range(k)]
    order_no = pl.Series(rng.integers(10**7, 10**8, size=n)).cast(pl.String)
    body = pl.select(
        pl.concat_str([*[pl.lit(p) for p in parts], pl.lit("order " + order_no)], separator=". ")
    ).to_series()
    df = pl.DataFrame({"body": body, "queue": np.asarray(QUEUES)[q]})
    # Plant exact copies (2%) and one-word-edit near copies (1%) of earlier rows.
    src = rng.integers(0, n, size=n)
    kind = rng.random(n)
    bodies = df.get_column("body")
    copied = bodies.gather(src)
    edited = copied.str.replace(r"\border\b", "ordr")
    body = pl.select(
        pl.when(pl.Series(kind < 0.02))
        .then(copied)
        .when(pl.Series(kind < 0.03))
        .then(edited)
        .otherwise(bodies)
    ).to_series()
    cust = rng.integers(0, n // 5, size=n)
    thread = np.where(rng.random(n) < 0.3, cust * 3 + rng.integers(0, 3, size=n), -1)
    ref = np.asarray([(qq + 1) * 10_000_000 for qq in q]) + rng.integers(0, 9_000_000, size=n)
    return pl.DataFrame(
        {
            "ticket_id": np.arange(n) * 3 + 100000,
            "ref_code": pl.Series(ref).cast(pl.String),
            "subject": pl.Series(
                np.asarray(["help needed", "question", "problem with order", "urgent"])[rng.integers(0, 4, n)]
            ),
            "body": body,
            "channel": pl.Series(np.asarray(["email", "chat", "phone", "web"])[rng.integers(0, 4, n)]),
            "customer_id": pl.Series(cust).cast(pl.String),
            "thread_id": pl.Series(thread).cast(pl.String).replace("-1", None),
            "created_at": pl.datetime_range(
                pl.datetime(2024, 1, 1), pl.datetime(2025, 6, 30), interval="1m", eager=True
            )
            .sample(n, with_replacement=True, seed=seed)
            .sort()
            .dt.strftime("%Y-%m-%dT%H:%M:%S"),
            "queue": df.get_column("queue"),
            "resolution_code": pl.Series(
                np.asarray(QUEUES)[np.where(rng.random(n) < 0.97, q, rng.integers(0, 6, n))]
            ).str.to_uppercase(),
        }
    )


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


# ---------------------------------------------------------------- plain-Python references


def ref_duplicates(rows: list[tuple]) -> tuple[int, int]:
    c = Counter(rows)
    dup = [v for v in c.values() if v > 1]
    return len(dup), sum(dup)


def ref_conflicts(rows: list[tuple], labels: list[str]) -> tuple[int, int]:
    g: dict[tuple, Counter] = defaultdict(Counter)
    for r, y in zip(rows, labels, strict=True):
        g[r][y] += 1
    bad = [c for c in g.values() if len(c) > 1]
    return len(bad), sum(sum(c.values()) for c in bad)


def ref_samples_mix(train: list[tuple], test: list[tuple]) -> int:
    s = set(train)
    return sum(1 for r in test if r in s)


def ref_identifier(values: list, labels: list[str], folds: np.ndarray, bins: int = 100) -> float:
    order = sorted(range(len(values)), key=lambda i: values[i])
    cell = [0] * len(values)
    for rank, i in enumerate(order):
        cell[i] = rank * bins // len(values)
    correct = 0
    for f in range(5):
        counts: dict[int, Counter] = defaultdict(Counter)
        for i, c in enumerate(cell):
            if folds[i] != f:
                counts[c][labels[i]] += 1
        best = {c: cnt.most_common(1)[0][0] for c, cnt in counts.items()}
        correct += sum(1 for i, c in enumerate(cell) if folds[i] == f and best.get(c) == labels[i])
    return correct / len(values)


_MERSENNE = (1 << 61) - 1


def datasketch_like(texts: list[str], k: int, num_perm: int, bands: int, rows: int) -> set[tuple[int, int]]:
    """datasketch's MinHash + MinHashLSH algorithm, per document (its update_batch is numpy per doc)."""
    gen = np.random.RandomState(1)
    a = gen.randint(1, _MERSENNE, size=num_perm, dtype=np.uint64)
    b = gen.randint(0, _MERSENNE, size=num_perm, dtype=np.uint64)
    tables: list[dict[bytes, list[int]]] = [defaultdict(list) for _ in range(bands)]
    for d, text in enumerate(texts):
        w = text.split(" ")
        sh = {" ".join(w[i : i + k]) for i in range(max(len(w) - k + 1, 1))}
        hv = np.array(
            [int.from_bytes(hashlib.sha1(s.encode()).digest()[:4], "little") for s in sh], dtype=np.uint64
        )
        with np.errstate(over="ignore"):
            phv = ((hv[:, None] * a + b) % np.uint64(_MERSENNE)) & np.uint64(0xFFFFFFFF)
        sig = phv.min(axis=0)
        for band in range(bands):
            tables[band][sig[band * rows : (band + 1) * rows].tobytes()].append(d)
    cands: set[tuple[int, int]] = set()
    for t in tables:
        for members in t.values():
            for i in range(len(members)):
                for j in range(i + 1, len(members)):
                    cands.add((members[i], members[j]))
    return cands


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--ref-rows", type=int, default=0, help="rows for the slow references (default: all)")
    args = ap.parse_args(argv)
    from engine.context import StageContext
    from engine.stages import source, split

    t0 = time.perf_counter()
    df = make_data(args.rows)
    gen_s = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp(prefix="ccbench-"))
    df.write_csv(tmp / "tickets.csv")
    data_mb = df.estimated_size("mb")
    del df
    base_mb = peak_mb()
    print(
        f"generated {args.rows:,} rows in {gen_s:.1f}s; in-memory size {data_mb:.0f} MB; CSV {(tmp / 'tickets.csv').stat().st_size / 1e6:.0f} MB"
    )
    ctx = StageContext(session_dir=tmp / "session", workspace=tmp)
    inputs = source.Inputs(
        files=["tickets.csv"],
        label_column="queue",
        input_columns=["subject", "body", "channel", "ref_code"],
        text_columns=["body"],
        id_column="ticket_id",
        entity_columns=["customer_id", "thread_id"],
        time_column="created_at",
        unavailable_columns=["resolution_code"],
        availability={"subject": "yes", "body": "yes", "channel": "yes", "ref_code": "yes"},
        as_of="2026-01-01",
    )
    rec, t_source = timed(source.run, inputs, {}, ctx)
    sp, t_split = timed(split.run, split.Inputs(strategy="random", rationale="bench"), {"source": rec}, ctx)
    ours_peak = peak_mb()
    print(f"ours: source stage {t_source:.1f}s, split stage {t_split:.1f}s, total {t_source + t_split:.1f}s")
    print(
        f"peak RSS {ours_peak:.0f} MB (before the audit {base_mb:.0f} MB); data in memory {data_mb:.0f} MB; ratio {ours_peak / data_mb:.1f}x"
    )

    # Our per-check times on the loaded frame, for like-for-like comparisons.
    from engine import data as D
    from engine.audit import duplicates, leakage, neardup

    ds = D.load_dataset(rec.inputs, ctx).collect()
    cols = D.model_inputs(rec.inputs)
    _, t_dup = timed(duplicates.duplicate_stats, ds, cols, "none")
    _, t_conf = timed(duplicates.conflict_stats, ds, cols)
    mem = pl.read_parquet(ctx.session_dir / "data" / "split.parquet")
    j = ds.join(mem, on="row_id")

    def mix() -> int:
        tr = j.filter(pl.col("split") == "train").select(cols).unique()
        return j.filter(pl.col("split") == "test").join(tr, on=cols, how="semi", nulls_equal=True).height

    n_mix, t_mix = timed(mix)
    sm, _ = leakage.sample(ds)
    _, t_id = timed(leakage.single_feature_score, sm, "ref_code")
    nd, t_nd = timed(neardup.near_duplicates, ds, ["body"])

    n_ref = args.ref_rows or ds.height
    sub = ds.head(n_ref)
    rows = list(zip(*(sub.get_column(c).to_list() for c in cols), strict=True))
    labels = sub.get_column("target").to_list()
    (_, t_rdup) = timed(ref_duplicates, rows)
    (_, t_rconf) = timed(ref_conflicts, rows, labels)
    js = sub.join(mem, on="row_id")
    tr_rows = list(
        zip(*(js.filter(pl.col("split") == "train").get_column(c).to_list() for c in cols), strict=True)
    )
    te_rows = list(
        zip(*(js.filter(pl.col("split") == "test").get_column(c).to_list() for c in cols), strict=True)
    )
    (_, t_rmix) = timed(ref_samples_mix, tr_rows, te_rows)
    smr = sm.head(min(n_ref, sm.height))
    folds = (leakage.unit_position(smr.get_column("row_id").to_numpy(), leakage.SEED) % np.uint64(5)).astype(
        int
    )
    (_, t_rid) = timed(
        ref_identifier, smr.get_column("ref_code").to_list(), smr.get_column("target").to_list(), folds
    )
    scale = ds.height / n_ref
    scale_id = sm.height / smr.height
    print(f"\nreference rows: {n_ref:,} (times scaled ×{scale:.1f} to the full data where smaller)")
    print("check                      ours(s)   reference(s)  ratio")
    for name, a, b in [
        ("DataDuplicates", t_dup, t_rdup * scale),
        ("ConflictingLabels", t_conf, t_rconf * scale),
        ("TrainTestSamplesMix", t_mix, t_rmix * scale),
        ("IdentifierLabelCorrelation", t_id, t_rid * scale_id),
    ]:
        print(f"{name:26s} {a:8.2f}   {b:12.2f}  {b / a:6.1f}x")

    # Near-duplicates vs the datasketch algorithm at the same bands/rows (equal theoretical recall).
    texts, text_rows = neardup._texts(ds, ["body"], "row_id")
    nd_docs = min(len(text_rows), args.ref_rows or 100_000)
    tl = texts.get_column("text").head(nd_docs).to_list()
    sub_nd = pl.DataFrame({"row_id": np.arange(nd_docs), "body": tl})
    ours_sub, t_ours_sub = timed(neardup.near_duplicates, sub_nd, ["body"])
    cands, t_ds = timed(datasketch_like, tl, 5, neardup.NUM_PERM, neardup.BANDS, neardup.ROWS_PER_BAND)
    ours_pairs = set(zip(ours_sub.pairs["row_a"].to_list(), ours_sub.pairs["row_b"].to_list(), strict=True))

    def jac(x: str, y: str) -> float:
        def sh(t: str) -> set[str]:
            w = t.split(" ")
            return {" ".join(w[i : i + 5]) for i in range(max(len(w) - 4, 1))}

        a, b = sh(x), sh(y)
        return len(a & b) / len(a | b)

    ds_pairs = {(a, b) for a, b in cands if jac(tl[a], tl[b]) >= 0.8}
    union = ours_pairs | ds_pairs
    rec_ours = len(ours_pairs) / max(len(union), 1)
    rec_ds = len(ds_pairs) / max(len(union), 1)
    print(
        f"\nnear-duplicates on {nd_docs:,} distinct texts: ours {t_ours_sub:.2f}s, datasketch algorithm {t_ds:.2f}s "
        f"(+ verification), ratio {t_ds / t_ours_sub:.1f}x; verified pairs ours {len(ours_pairs)}, datasketch {len(ds_pairs)}; "
        f"recall vs union ours {rec_ours:.4f}, datasketch {rec_ds:.4f}"
    )
    print(
        f"near-duplicates full data: {t_nd:.1f}s, {nd.pairs.height:,} pairs, {nd.texts:,} texts, {nd.candidates:,} candidates"
    )
    print(f"split checks: TrainTestSamplesMix rows {n_mix:,}; peak RSS at end {peak_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
