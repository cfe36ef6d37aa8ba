"""Benchmark: the source + split audit on a generated ticket-like data set, against the real competitors.

    .venv-bench/bin/python bench/audit.py --rows 1000000

Runs in the separate bench virtualenv (bench/README.md says how to build it: deepchecks, datasketch and
pandas next to claimcheck). One command generates the data, then runs each phase in a fresh
subprocess of this script so that every phase's peak memory (ru_maxrss: it sees Polars' and numpy's
native memory, unlike tracemalloc) is its own:
- ours: the source and split stages end to end, then each check that Deepchecks also has, timed alone;
- deepchecks: DataDuplicates, ConflictingLabels, TrainTestSamplesMix, IdentifierLabelCorrelation on
  the same rows (pandas frames from the same loaded data; Dataset construction timed apart);
  IdentifierLabelCorrelation, a matter of milliseconds, is the median of 5 calls after a warm-up
  on both sides (timed_median); the other checks are one call each;
- neardup: our exact near-duplicate pass and datasketch MinHash + MinHashLSH (128 permutations) on the
  same distinct texts and shingles, datasketch's candidates verified by our exact Jaccard; recall of
  each against the exact pair set (ours is exact by construction; tests/test_audit_perf.py checks it
  against brute force). datasketch runs at threshold 0.8 and at lower LSH thresholds until its recall
  matches ours; the ratio is taken at equal recall.
- rensa (phases nd_ours, nd_rensa; bench/neardup_race.py): our pass and rensa 0.5.0's MinHash with
  numpy LSH banding, each in its own process, on the same distinct bodies; `bench/neardup_race.py`
  alone also runs the long-document corpus and A/B rounds.
A competitor that cannot be imported is reported with its error and compared against a plain pandas
implementation of the same definition instead.
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

# Before polars loads: the app's Polars allocator option, set as `claimcheck` sets it.
import claimcheck.tui.cli  # noqa: E402, F401

# isort: split
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

QUEUES = ["billing", "technical", "account", "shipping", "returns", "security"]
INPUTS = dict(
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


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, *a, **kw):
    t = time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t


def timed_median(fn, runs: int = 5):
    """The median of `runs` timed calls after one untimed warm-up call: for checks that take
    milliseconds, where one cold call measures first-use costs more than the check. Both sides of a
    comparison use it."""
    fn()
    times = []
    for _ in range(runs):
        out, t = timed(fn)
        times.append(t)
    return out, float(np.median(times))


def _ctx(work: Path):
    from claimcheck.engine.pipeline.context import StageContext

    return StageContext(session_dir=work / "session", workspace=work)


def _loaded(work: Path):
    """The dataset as the stages see it, the source record and the split membership."""
    from claimcheck.engine.data import rows as D
    from claimcheck.engine.evidence import StageRecord

    ctx = _ctx(work)
    rec = StageRecord.model_validate_json((work / "source.json").read_text())
    ds = D.load_dataset(rec.inputs, ctx).collect()
    mem = pl.read_parquet(ctx.session_dir / "data" / "split.parquet")
    return ctx, rec, ds, mem


# ---------------------------------------------------------------- phases (each in its own process)


def phase_ours(work: Path) -> dict:
    from claimcheck.engine.stages.source import run as source
    from claimcheck.engine.stages.split import run as split

    base = rss_mb()
    ctx = _ctx(work)
    rec, t_source = timed(source.run, source.Inputs(**INPUTS), {}, ctx)
    (work / "source.json").write_text(rec.model_dump_json())
    sp, t_split = timed(split.run, split.Inputs(strategy="random", rationale="bench"), {"source": rec}, ctx)
    stages_peak = rss_mb()
    return {
        "source_s": t_source,
        "split_s": t_split,
        "rss_before_mb": base,
        "rss_peak_mb": stages_peak,
        "near_pairs": rec.check("source.near_duplicates").measured["pairs"],
        "near_candidates": rec.check("source.near_duplicates").measured["candidates"],
    }


def phase_ours_checks(work: Path) -> dict:
    """Our implementation of each definition Deepchecks also has, timed alone on the loaded frame."""
    from claimcheck.engine.audit import duplicates, leakage
    from claimcheck.engine.data import rows as D

    ctx, rec, ds, mem = _loaded(work)
    data_mb = ds.estimated_size("mb")
    cols = D.model_inputs(rec.inputs)
    dup, t_dup = timed(duplicates.duplicate_stats, ds, cols, "none")
    conf, t_conf = timed(duplicates.conflict_stats, ds, cols)
    j = ds.join(mem, on="row_id")

    def mix() -> int:  # Deepchecks' definition: test rows whose features + label occur in train
        key = [*cols, "target"]
        tr = j.filter(pl.col("split") == "train").select(key).unique()
        return j.filter(pl.col("split") == "test").join(tr, on=key, how="semi", nulls_equal=True).height

    n_mix, t_mix = timed(mix)
    sm, cov = leakage.sample(ds)
    ids = ["ticket_id", "ref_code"]
    scores, t_id = timed_median(
        lambda: {c: r["gain"] for c, r in leakage.single_feature_scores(sm, ids).items()}
    )
    return {
        "data_mb": data_mb,
        "rows": ds.height,
        "dup": [t_dup, 1 - (ds.height - dup["rows"] + dup["groups"]) / ds.height],
        "conf": [t_conf, conf["rows"]],
        "mix": [t_mix, n_mix],
        "ident": [t_id, scores, cov],
        "rss_peak_mb": rss_mb(),
    }


def phase_deepchecks(work: Path) -> dict:
    from claimcheck.engine.data import rows as D

    ctx, rec, ds, mem = _loaded(work)
    cols = D.model_inputs(rec.inputs)
    pdf = ds.select("row_id", *cols, "target").to_pandas()
    out: dict = {"rss_after_load_mb": rss_mb()}
    try:
        import deepchecks
        from deepchecks.tabular import Dataset
        from deepchecks.tabular.checks import (
            ConflictingLabels,
            DataDuplicates,
            IdentifierLabelCorrelation,
            TrainTestSamplesMix,
        )
    except Exception as exc:  # reported, then the pandas reference runs instead
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out | phase_pandas(pdf, mem, ds)
    out["version"] = deepchecks.__version__
    n = len(pdf)
    feats = pdf[cols]
    dset, t_ds = timed(Dataset, pdf[[*cols, "target"]], label="target", cat_features=cols, features=cols)
    r, t = timed(DataDuplicates(n_samples=n).run, dset, with_display=False)
    out["dup"] = [t, float(r.value), t_ds]
    r, t = timed(ConflictingLabels(n_samples=n).run, dset, with_display=False)
    out["conf"] = [t, len(r.value["samples_indices"]) if isinstance(r.value, dict) else str(r.value)]
    split = mem.select("row_id", "split").to_pandas().set_index("row_id")["split"]
    s = split.reindex(pdf["row_id"]).to_numpy()
    tr, te = pdf[s == "train"], pdf[s == "test"]
    d_tr = Dataset(tr[[*cols, "target"]], label="target", cat_features=cols, features=cols)
    d_te = Dataset(te[[*cols, "target"]], label="target", cat_features=cols, features=cols)
    r, t = timed(TrainTestSamplesMix(n_samples=n).run, d_tr, d_te, with_display=False)
    out["mix"] = [t, round(float(r.value["ratio"]) * len(te))]
    from claimcheck.engine.audit import leakage

    sm, _ = leakage.sample(ds)
    dsets = {}
    for c in ("ticket_id", "ref_code"):
        f = sm.select(pl.col(c).cast(pl.Int64), "target").to_pandas()
        dsets[c] = (Dataset(f, label="target", index_name=c, cat_features=[], features=[]), len(f))

    def ident_both() -> dict:
        return {
            c: round(float(IdentifierLabelCorrelation(n_samples=m).run(d, with_display=False).value[c]), 4)
            for c, (d, m) in dsets.items()
        }

    ident, t_id = timed_median(ident_both)
    out["ident"] = [t_id, ident]
    del feats
    out["rss_peak_mb"] = rss_mb()
    return out


def phase_pandas(pdf, mem: pl.DataFrame, ds: pl.DataFrame) -> dict:
    """The same definitions in plain pandas groupby (what Deepchecks runs internally)."""
    cols = [c for c in pdf.columns if c not in ("row_id", "target")]
    g, t = timed(lambda: pdf.groupby(cols, dropna=False).size())
    out = {"dup": [t, 1 - len(g) / len(pdf), 0.0]}

    def conflicts() -> int:
        k = pdf.groupby(cols, dropna=False)["target"].nunique(dropna=False)
        sizes = pdf.groupby(cols, dropna=False).size()
        return int(sizes[k > 1].sum())

    out["conf"] = list(timed(conflicts))[::-1]
    split = mem.select("row_id", "split").to_pandas().set_index("row_id")["split"]
    s = split.reindex(pdf["row_id"]).to_numpy()
    key = [*cols, "target"]
    tr, te = pdf[s == "train"], pdf[s == "test"]
    n, t = timed(lambda: int(te.merge(tr[key].drop_duplicates(), on=key, how="inner").shape[0]))
    out["mix"] = [t, n]
    return out


def _shingle_lists(texts: list[str], k: int) -> list[list[bytes]]:
    out = []
    for t in texts:
        w = t.split(" ")
        sh = {" ".join(w[i : i + k]) for i in range(len(w) - k + 1)} if len(w) >= k else {" ".join(w)}
        out.append([s.encode() for s in sh])
    return out


def phase_neardup(work: Path, n_texts: int) -> dict:
    from claimcheck.engine.audit import neardup
    from claimcheck.engine.audit.neardup import shingles, verify
    from claimcheck.engine.audit.texts import Texts, distinct_texts

    ctx, rec, ds, mem = _loaded(work)
    del mem
    source, _, _ = distinct_texts(ds, ["body"], "row_id")
    texts = source.gather(np.arange(n_texts or source.len()))  # the distinct normalised bodies, as one Series
    del ds, source
    frame = pl.DataFrame({"row_id": np.arange(texts.len()), "body": texts})
    base = rss_mb()
    ours, t_ours = timed(neardup.near_duplicates, frame, ["body"])
    truth = set(zip(ours.pairs["row_a"].to_list(), ours.pairs["row_b"].to_list(), strict=True))
    out: dict = {"texts": texts.len(), "ours": [t_ours, len(truth), ours.candidates], "ours_rss_mb": rss_mb()}
    try:
        import datasketch
        from datasketch import MinHash, MinHashLSH
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    out["version"] = getattr(datasketch, "__version__", "")
    tl = texts.to_list()
    (sh, t_sh) = timed(_shingle_lists, tl, 5)
    mh, t_mh = timed(MinHash.bulk, sh, num_perm=128)
    del sh
    # Set sizes for verification blocks (not timed), over the same texts in the same order.
    same = Texts(frame, ["body"], np.arange(texts.len()))
    sizes = shingles.build_prefixes(same, 5, 0.8).sizes
    runs = []
    for lsh_t in (0.8, 0.7, 0.6, 0.5):
        t0 = time.perf_counter()
        lsh = MinHashLSH(threshold=lsh_t, num_perm=128)
        with lsh.insertion_session() as s:
            for i, m in enumerate(mh):
                s.insert(i, m, check_duplication=False)
        cand = set()
        for i, m in enumerate(mh):
            for j in lsh.query(m):
                if j != i:
                    cand.add((min(i, j), max(i, j)))
        t_lsh = time.perf_counter() - t0
        # Verification of their candidates with our exact, vectorised Jaccard (generous to them).
        t0 = time.perf_counter()
        codes = np.fromiter((a << 32 | b for a, b in cand), dtype=np.uint64, count=len(cand))
        a, b, jac = verify.verify_pairs(same, np.sort(codes), sizes, 5)
        found = {(int(x), int(y)) for x, y, j in zip(a, b, jac, strict=True) if j >= 0.8 - 1e-12}
        t_ver = time.perf_counter() - t0
        recall = len(found & truth) / max(len(truth), 1)
        runs.append(
            {
                "lsh_threshold": lsh_t,
                "bands_rows": [lsh.b, lsh.r],
                "shingle_s": t_sh,
                "minhash_s": t_mh,
                "lsh_s": t_lsh,
                "verify_s": t_ver,
                "total_s": t_sh + t_mh + t_lsh + t_ver,
                "candidates": len(cand),
                "recall": recall,
            }
        )
        del lsh, cand
        if recall >= 1.0:
            break
    out["datasketch"] = runs
    out["rss_peak_mb"] = rss_mb()
    out["rss_before_mb"] = base
    return out


# ---------------------------------------------------------------- driver


def _run_phase(name: str, work: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, __file__, "--phase", name, "--work", str(work), *extra]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"failed": p.stderr[-2000:], "wall_s": time.perf_counter() - t}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["wall_s"] = time.perf_counter() - t
    return res


def _ratio(theirs: float, ours: float) -> str:
    return f"{theirs / ours:6.1f}x" if ours > 0 else "  n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument(
        "--nd-texts", type=int, default=0, help="distinct texts for the datasketch race (0 = all)"
    )
    ap.add_argument("--phase", default="")
    ap.add_argument("--work", default="")
    ap.add_argument("--skip", default="", help="comma-separated phases to skip")
    args = ap.parse_args(argv)
    if args.phase:
        work = Path(args.work)
        fn = {
            "gen": lambda: make_data(args.rows).write_csv(work / "tickets.csv") or {},
            "ours": lambda: phase_ours(work),
            "ours_checks": lambda: phase_ours_checks(work),
            "deepchecks": lambda: phase_deepchecks(work),
            "neardup": lambda: phase_neardup(work, args.nd_texts),
            "nd_ours": lambda: _race().phase_ours(_race().prepare(work, "tickets", args.rows, 0)),
            "nd_rensa": lambda: _race().phase_rensa(_race().prepare(work, "tickets", args.rows, 0)),
        }[args.phase]
        print(json.dumps(fn(), default=str))
        return 0
    # The data is generated in a subprocess too: a child inherits its parent's peak RSS at fork, so the
    # driver must stay small for the phases' ru_maxrss to be their own.
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ccbench-"))
    if not (work / "tickets.csv").exists():
        gen = _run_phase("gen", work, ["--rows", str(args.rows)])
        print(f"generated {args.rows:,} rows in {gen['wall_s']:.1f}s; work dir {work}", flush=True)
    skip = set(filter(None, args.skip.split(",")))
    res = {}
    for name in ("ours", "ours_checks", "deepchecks", "neardup", "nd_ours", "nd_rensa"):
        if name in skip:
            continue
        res[name] = _run_phase(name, work, ["--nd-texts", str(args.nd_texts), "--rows", str(args.rows)])
        print(f"[{name}] {json.dumps(res[name], default=str)}", flush=True)
    o, oc = res.get("ours", {}), res.get("ours_checks", {})
    data_mb = oc.get("data_mb", 0.0)
    print(f"\n== {args.rows:,} rows; loaded data {data_mb:.0f} MB (Polars estimated_size) ==")
    if "source_s" in o:
        print(
            f"ours: source stage {o['source_s']:.1f}s, split stage {o['split_s']:.1f}s; peak RSS "
            f"{o['rss_peak_mb']:.0f} MB (process before the stages {o['rss_before_mb']:.0f} MB) = "
            f"{o['rss_peak_mb'] / max(data_mb, 1e-9):.1f}x the data (goal <= 3x)"
        )
    dc = res.get("deepchecks", {})
    if dc and "dup" in oc:
        label = "deepchecks " + dc.get("version", "") if "error" not in dc else "pandas reference"
        if "error" in dc:
            print(f"deepchecks could not be imported: {dc['error']}")
        print(f"\ncheck                       ours(s)  {label}(s)   ratio (goal >= 10x)")
        for key, name in [
            ("dup", "DataDuplicates"),
            ("conf", "ConflictingLabels"),
            ("mix", "TrainTestSamplesMix"),
            ("ident", "IdentifierLabelCorrelation"),
        ]:
            if key in dc and key in oc:
                print(
                    f"{name:26s} {oc[key][0]:8.2f}  {dc[key][0]:10.2f}   {_ratio(dc[key][0], oc[key][0])}"
                    f"   ours {oc[key][1]} / theirs {dc[key][1]}"
                )
        if "dup" in dc and len(dc["dup"]) > 2:
            print(f"(Deepchecks Dataset construction, not counted above: {dc['dup'][2]:.2f}s)")
        print(
            f"deepchecks phase peak RSS {dc.get('rss_peak_mb', 0):.0f} MB; ours {oc.get('rss_peak_mb', 0):.0f} MB"
        )
    nd = res.get("neardup", {})
    if "ours" in nd:
        print(
            f"\nnear-duplicates on {nd['texts']:,} distinct texts: ours {nd['ours'][0]:.1f}s, "
            f"{nd['ours'][1]:,} pairs, {nd['ours'][2]:,} verified candidates, recall 1 (exact)"
        )
        for r in nd.get("datasketch", []):
            print(
                f"  datasketch LSH threshold {r['lsh_threshold']} (b={r['bands_rows'][0]}, r={r['bands_rows'][1]}): "
                f"{r['total_s']:.1f}s (shingles {r['shingle_s']:.1f}, MinHash {r['minhash_s']:.1f}, "
                f"LSH {r['lsh_s']:.1f}, verify {r['verify_s']:.1f}); {r['candidates']:,} candidates; "
                f"recall {r['recall']:.4f}; ratio {_ratio(r['total_s'], nd['ours'][0])}"
            )
        if "error" in nd:
            print(f"  datasketch could not be imported: {nd['error']}")
    no, nr = res.get("nd_ours", {}), res.get("nd_rensa", {})
    if "seconds" in no and "runs" in nr:
        print(
            f"\nnear-duplicates vs rensa {nr['version']}: ours {no['seconds']:.1f}s, {no['rss_peak_mb']:.0f} MB peak"
        )
        for r in nr["runs"]:
            print(
                f"  rensa b={r['bands_rows'][0]} r={r['bands_rows'][1]}: {r['total_s']:.1f}s (shingles "
                f"{r['shingle_s']:.1f}, MinHash {r['minhash_s']:.1f}, bands {r['band_s']:.1f}, verify "
                f"{r['verify_s']:.1f}; to_rows {r['to_numpy_s']:.1f} not counted); recall {r['recall']:.4f}; "
                f"ratio {_ratio(r['total_s'], no['seconds'])}; {nr['rss_peak_mb']:.0f} MB peak"
            )
    return 0


def _race():
    """bench/neardup_race.py, imported on demand (the rensa phases)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import neardup_race

    return neardup_race


if __name__ == "__main__":
    raise SystemExit(main())
