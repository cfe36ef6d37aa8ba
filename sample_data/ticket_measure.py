"""The independent measurement of sample_data/tickets.csv as written (read back from disk), by code in this
folder only - nothing from engine/ - so the audit engine can be tested against it: exact and normalised
duplicates, conflicting labels, exact near-duplicate pairs, leaking codes, entity families, nulls, the class
mix by half-year, and a TF-IDF separability check."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import polars as pl
from ticket_spec import NEAR_DUP_THRESHOLD, QUEUES, SEED, SHINGLE


def norm_expr(col: str) -> pl.Expr:
    """lower_strip_ws: lowercase, strip, collapse whitespace runs to one space (null stays null)."""
    return pl.col(col).str.to_lowercase().str.strip_chars().str.replace_all(r"\s+", " ").alias(col)


def dup_stats(df: pl.DataFrame) -> dict:
    g = df.group_by(["subject", "body"]).agg(pl.len().alias("n"), pl.col("queue").n_unique().alias("k"))
    dup = g.filter(pl.col("n") > 1)
    conflict = g.filter(pl.col("k") > 1)
    top = df.group_by(["subject", "body", "queue"]).agg(pl.len().alias("n"))
    top = top.group_by(["subject", "body"]).agg(pl.col("n").max())
    ndf = df.select(norm_expr("subject"), norm_expr("body"))
    ng = ndf.group_by(["subject", "body"]).agg(pl.len().alias("n")).filter(pl.col("n") > 1)
    return {
        "exact_dup_groups": dup.height,
        "exact_dup_rows": int(dup["n"].sum()),
        "norm_dup_groups": ng.height,
        "norm_dup_rows": int(ng["n"].sum()),
        "conflict_groups": conflict.height,
        "conflict_rows": int(conflict["n"].sum()),
        "noise_ceiling_accuracy": round(int(top["n"].sum()) / df.height, 6),
    }


def shingles(text: str) -> set[str]:
    words = text.split(" ") if text else []
    if len(words) < SHINGLE:
        return {" ".join(words)}
    return {" ".join(words[i : i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}


def near_dup_pairs(df: pl.DataFrame, threshold: float) -> set[tuple[int, int]]:
    """Exact set of unordered row pairs with Jaccard >= threshold that are not normalised duplicates.

    Completeness: prefix filtering (Chaudhuri et al. 2006). Shingles are ordered rarest-first; if
    J(x, y) >= t then |x & y| >= ceil(t * max(|x|, |y|)), so the first |x| - ceil(t|x|) + 1 shingles of x
    and the first |y| - ceil(t|y|) + 1 of y must share one. Every pair meeting that condition is verified exactly.
    """
    n = df.select(norm_expr("subject"), norm_expr("body"))
    keys = list(zip(n["subject"].to_list(), n["body"].to_list(), strict=True))
    # Rows with the same normalised (subject, body) are one text; pairs between different texts expand later.
    text_rows: dict[tuple, list[int]] = defaultdict(list)
    for i, k in enumerate(keys):
        text_rows[k].append(i)
    uniq = list(text_rows)
    sets = []
    for s, b in uniq:
        joined = " ".join(x for x in (s or "", b or "") if x)
        sets.append(shingles(" ".join(joined.split())))
    freq = Counter(sh for st in sets for sh in st)
    ordered = [sorted(st, key=lambda sh: (freq[sh], sh)) for st in sets]
    index: dict[str, list[int]] = defaultdict(list)
    found: set[tuple[int, int]] = set()
    for x, sx in enumerate(ordered):
        size = len(sx)
        prefix = size - int(np.ceil(threshold * size - 1e-9)) + 1
        cands: set[int] = set()
        for sh in sx[:prefix]:
            cands.update(index[sh])
        setx = sets[x]
        for y in cands:
            sy = sets[y]
            lo, hi = sorted((size, len(sy)))
            if lo < threshold * hi - 1e-9:
                continue
            inter = len(setx & sy)
            if inter / (len(setx) + len(sy) - inter) >= threshold - 1e-12:
                found.add((y, x))
        for sh in sx[:prefix]:
            index[sh].append(x)
    pairs = set()
    for a, b in found:
        for ra in text_rows[uniq[a]]:
            for rb in text_rows[uniq[b]]:
                pairs.add((min(ra, rb), max(ra, rb)))
    return pairs


def families(df: pl.DataFrame) -> dict:
    parent = list(range(df.height))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for col in ("customer_id", "thread_id", "case_id"):
        first: dict[str, int] = {}
        for i, v in enumerate(df[col].to_list()):
            if v is None:
                continue
            if v in first:
                a, b = find(first[v]), find(i)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                first[v] = i
    sizes = Counter(find(i) for i in range(df.height))
    no_id = df.filter(
        pl.col("customer_id").is_null() & pl.col("thread_id").is_null() & pl.col("case_id").is_null()
    ).height
    return {
        "family_count": len(sizes),
        "largest_family_rows": max(sizes.values()),
        "multi_row_families": sum(1 for v in sizes.values() if v >= 2),
        "rows_without_entity_id": no_id,
    }


def measure(path: Path, planted_pairs: list[tuple[int, int]]) -> dict:
    raw = path.read_bytes()
    df = pl.read_csv(path, infer_schema=False)  # every column as stored text; empty field = null
    rec: dict = {"rows": df.height, "columns": df.columns, "sha256": hashlib.sha256(raw).hexdigest()}
    rec.update(dup_stats(df))
    pairs = near_dup_pairs(df, NEAR_DUP_THRESHOLD)
    rec["near_dup_pairs_at_0_8"] = len(pairs)
    rec["near_dup_planted_pairs"] = len(planted_pairs)
    rec["near_dup_planted_pairs_at_0_8"] = sum(1 for a, b in planted_pairs if (min(a, b), max(a, b)) in pairs)
    # Defect 4: majority mapping code -> queue.
    cq = df.group_by(["resolution_code", "queue"]).agg(pl.len().alias("n"))
    best = (
        cq.sort(["n", "queue"], descending=[True, False]).group_by("resolution_code").agg(pl.col("n").first())
    )
    rec["resolution_code_label_agreement"] = round(int(best["n"].sum()) / df.height, 6)
    # Defect 5: ref code range -> queue.
    rng_q = (pl.col("ref_code").str.slice(2).cast(pl.Int64) // 100_000 - 1).alias("k")
    ref = df.select(rng_q, pl.col("queue"))
    hits = sum(1 for k, q in zip(ref["k"].to_list(), ref["queue"].to_list(), strict=True) if QUEUES[k] == q)
    rec["ref_code_range_purity"] = round(hits / df.height, 6)
    rec.update(families(df))
    rec["nulls"] = {c: int(df[c].null_count()) for c in df.columns}
    rec["label_counts"] = {q: int((df["queue"] == q).sum()) for q in QUEUES}
    half = (pl.col("created_at").str.slice(0, 4) + "-H" + pl.when(pl.col("created_at").str.slice(5, 2) <= "06")
            .then(pl.lit("1")).otherwise(pl.lit("2"))).alias("half")  # fmt: skip
    hc = df.select(half, "queue").group_by(["half", "queue"]).agg(pl.len().alias("n"))
    shares: dict = {}
    counts: dict = {}
    for h in sorted(hc["half"].unique().to_list()):
        sub = hc.filter(pl.col("half") == h)
        total = int(sub["n"].sum())
        got = dict(zip(sub["queue"].to_list(), sub["n"].to_list(), strict=True))
        counts[h] = {q: int(got.get(q, 0)) for q in QUEUES}
        shares[h] = {q: round(got.get(q, 0) / total, 6) for q in QUEUES}
    rec["class_share_by_half"] = shares
    rec["class_count_by_half"] = counts
    rec["created_at_min"] = df["created_at"].min()
    rec["created_at_max"] = df["created_at"].max()
    return rec


def tfidf_check(path: Path) -> dict:
    """How separable is the text? A TF-IDF + logistic regression on subject + body, random 80/20 split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import accuracy_score, f1_score

    df = pl.read_csv(path, infer_schema=False)
    text = (df["subject"] + " " + df["body"].fill_null("")).to_list()
    y = np.array(df["queue"].to_list())
    idx = np.random.default_rng(SEED + 1).permutation(len(text))
    cut = int(0.8 * len(text))
    tr, te = idx[:cut], idx[cut:]
    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    xtr = vec.fit_transform([text[i] for i in tr])
    xte = vec.transform([text[i] for i in te])
    clf = LogisticRegression(max_iter=2000, C=4.0)
    clf.fit(xtr, y[tr])
    pred = clf.predict(xte)
    return {
        "split": f"random 80/20 by row, seed {SEED + 1} (not group-aware; near-duplicates may inflate it)",
        "model": "TfidfVectorizer(ngram_range=(1,2), min_df=2, sublinear_tf=True) + LogisticRegression(C=4)",
        "test_rows": len(te),
        "accuracy": round(float(accuracy_score(y[te], pred)), 3),
        "macro_f1": round(float(f1_score(y[te], pred, average="macro")), 3),
    }
