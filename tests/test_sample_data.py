"""The sample data set and its defect record agree; counts are re-computed here independently of the generator."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "sample_data"
CSV = DATA / "tickets.csv"
COLUMNS = [
    "ticket_id",
    "ref_code",
    "subject",
    "body",
    "channel",
    "product",
    "customer_id",
    "thread_id",
    "case_id",
    "created_at",
    "queue",
    "resolution_code",
    "priority",
]
QUEUES = {"billing", "technical", "account", "shipping", "returns", "security"}


@pytest.fixture(scope="module")
def df() -> pl.DataFrame:
    return pl.read_csv(CSV, infer_schema=False)


@pytest.fixture(scope="module")
def rec() -> dict:
    return tomllib.loads((DATA / "defects.toml").read_text(encoding="utf-8"))


def norm(s: str | None) -> str | None:
    """lower_strip_ws in plain Python (the file is ASCII, so str.split() matches the regex \\s+)."""
    return None if s is None else " ".join(s.lower().split())


def test_shape_columns_and_ids(df: pl.DataFrame, rec: dict) -> None:
    assert df.height >= 20_000
    assert df.height == rec["rows"]
    assert df.columns == COLUMNS == rec["columns"]
    assert df["ticket_id"].n_unique() == df.height
    assert df["ref_code"].str.contains(r"^R-\d{6}$").all()


def test_sha256_matches_record(rec: dict) -> None:
    assert hashlib.sha256(CSV.read_bytes()).hexdigest() == rec["sha256"]


def test_time_span_at_least_18_months(df: pl.DataFrame) -> None:
    times = [datetime.fromisoformat(t) for t in df["created_at"].to_list()]
    lo, hi = min(times), max(times)
    months = (hi.year - lo.year) * 12 + (hi.month - lo.month)
    assert months >= 18


def test_classes_and_rare_class(df: pl.DataFrame, rec: dict) -> None:
    counts = Counter(df["queue"].to_list())
    assert set(counts) == QUEUES
    assert min(counts.values()) < 0.02 * df.height
    assert dict(counts) == rec["label_counts"]


def test_class_shift_recorded(df: pl.DataFrame, rec: dict) -> None:
    by_half: dict[str, Counter] = defaultdict(Counter)
    for t, q in zip(df["created_at"].to_list(), df["queue"].to_list(), strict=True):
        by_half[f"{t[:4]}-H{1 if int(t[5:7]) <= 6 else 2}"][q] += 1
    assert set(by_half) == set(rec["class_count_by_half"])
    for half, counts in by_half.items():
        assert {q: counts.get(q, 0) for q in QUEUES} == rec["class_count_by_half"][half]
    first, last = sorted(by_half)[0], sorted(by_half)[-1]
    share = rec["class_share_by_half"]
    assert share[last]["security"] > share[first]["security"]
    assert share[last]["returns"] > share[first]["returns"]


def test_exact_and_normalised_duplicates_and_conflicts(df: pl.DataFrame, rec: dict) -> None:
    labels: dict[tuple, list[str]] = defaultdict(list)
    norm_count: Counter = Counter()
    subjects, bodies, queues = df["subject"].to_list(), df["body"].to_list(), df["queue"].to_list()
    for s, b, q in zip(subjects, bodies, queues, strict=True):
        labels[(s, b)].append(q)
        norm_count[(norm(s), norm(b))] += 1
    dup = [v for v in labels.values() if len(v) > 1]
    conflict = [v for v in dup if len(set(v)) > 1]
    ceiling = sum(Counter(v).most_common(1)[0][1] for v in labels.values()) / df.height
    assert len(dup) == rec["exact_dup_groups"] > 0
    assert sum(map(len, dup)) == rec["exact_dup_rows"]
    assert len(conflict) == rec["conflict_groups"] > 0
    assert sum(map(len, conflict)) == rec["conflict_rows"]
    assert ceiling == pytest.approx(rec["noise_ceiling_accuracy"], abs=1e-6)
    ndup = [n for n in norm_count.values() if n > 1]
    assert len(ndup) == rec["norm_dup_groups"] > rec["exact_dup_groups"]
    assert sum(ndup) == rec["norm_dup_rows"]


def test_null_counts(df: pl.DataFrame, rec: dict) -> None:
    nulls = {c: sum(v is None for v in df[c].to_list()) for c in df.columns}
    assert nulls == rec["nulls"]
    for planted in ("channel", "product", "body", "customer_id"):
        assert nulls[planted] > 0
    assert nulls["subject"] == nulls["queue"] == 0


def test_leaky_columns(df: pl.DataFrame, rec: dict) -> None:
    order = ["billing", "technical", "account", "shipping", "returns", "security"]
    queues = df["queue"].to_list()
    ref_hits = sum(
        order[int(r[2:]) // 100_000 - 1] == q for r, q in zip(df["ref_code"].to_list(), queues, strict=True)
    )
    assert ref_hits / df.height == pytest.approx(rec["ref_code_range_purity"], abs=1e-6)
    by_code: dict[str, Counter] = defaultdict(Counter)
    for c, q in zip(df["resolution_code"].to_list(), queues, strict=True):
        by_code[c][q] += 1
    agree = sum(c.most_common(1)[0][1] for c in by_code.values()) / df.height
    assert agree == pytest.approx(rec["resolution_code_label_agreement"], abs=1e-6)
    assert agree > 0.95


def test_entity_families(df: pl.DataFrame, rec: dict) -> None:
    # Breadth-first search over a row-value graph: a different method from the generator's union-find.
    rows_of: dict[tuple[str, str], list[int]] = defaultdict(list)
    keys_of: list[list[tuple[str, str]]] = [[] for _ in range(df.height)]
    for col in ("customer_id", "thread_id", "case_id"):
        for i, v in enumerate(df[col].to_list()):
            if v is not None:
                rows_of[(col, v)].append(i)
                keys_of[i].append((col, v))
    seen = [False] * df.height
    sizes = []
    for start in range(df.height):
        if seen[start]:
            continue
        seen[start], stack, size = True, [start], 0
        while stack:
            i = stack.pop()
            size += 1
            for key in keys_of[i]:
                for j in rows_of.pop(key, []):
                    if not seen[j]:
                        seen[j] = True
                        stack.append(j)
        sizes.append(size)
    assert len(sizes) == rec["family_count"]
    assert max(sizes) == rec["largest_family_rows"]
    assert sum(s >= 2 for s in sizes) == rec["multi_row_families"]
    assert sum(not k for k in keys_of) == rec["rows_without_entity_id"] > 0


def test_near_duplicates_brute_force(df: pl.DataFrame, rec: dict) -> None:
    """Every pair of rows, via a sparse shingle-incidence product: an exhaustive check of the prefix filter."""
    import numpy as np
    import scipy.sparse as sp

    keys = [(norm(s), norm(b)) for s, b in zip(df["subject"].to_list(), df["body"].to_list(), strict=True)]
    vocab: dict[str, int] = {}
    r, c = [], []
    for i, (s, b) in enumerate(keys):
        words = " ".join(x for x in (s, b) if x).split(" ")
        sh = (
            {" ".join(words)}
            if len(words) < 5
            else {" ".join(words[j : j + 5]) for j in range(len(words) - 4)}
        )
        for x in sh:
            r.append(i)
            c.append(vocab.setdefault(x, len(vocab)))
    x = sp.csr_matrix((np.ones(len(r), dtype=np.int32), (r, c)), shape=(len(keys), len(vocab)))
    size = np.asarray(x.sum(axis=1)).ravel()
    xt = x.T.tocsr()
    found = set()
    for a in range(0, x.shape[0], 2000):
        p = (x[a : a + 2000] @ xt).tocoo()
        i, j, inter = p.row + a, p.col, p.data
        keep = (j > i) & (5 * inter >= 4 * (size[i] + size[j] - inter))  # Jaccard >= 0.8, in integers
        found.update((int(u), int(v)) for u, v in zip(i[keep], j[keep], strict=True) if keys[u] != keys[v])
    assert len(found) == rec["near_dup_pairs_at_0_8"]
    planted = {tuple(p) for p in rec["near_dup_planted_row_pairs"]}
    assert len(planted) == rec["near_dup_planted_pairs"]
    assert len(planted & found) == rec["near_dup_planted_pairs_at_0_8"] >= 0.6 * len(planted)
    # Planted rewrites sit on different threads, and the ticket ids recorded name the same rows.
    threads, tickets = df["thread_id"].to_list(), df["ticket_id"].to_list()
    assert all(threads[a] != threads[b] for a, b in planted)
    rows_as_tickets = sorted([int(tickets[a]), int(tickets[b])] for a, b in planted)
    assert rows_as_tickets == sorted(rec["near_dup_planted_ticket_pairs"])


def test_datasheet_quotes_the_record(rec: dict) -> None:
    sheet = (DATA / "DATASHEET.md").read_text(encoding="utf-8")
    assert rec["sha256"] in sheet
    for key in ("exact_dup_groups", "conflict_groups", "near_dup_pairs_at_0_8", "family_count"):
        assert f"**{rec[key]}**" in sheet


def test_regeneration_is_byte_identical(tmp_path: Path, rec: dict) -> None:
    script = DATA / "make_tickets.py"
    subprocess.run(
        [sys.executable, str(script), "--no-check", "--out", str(tmp_path)], check=True, capture_output=True
    )
    assert hashlib.sha256((tmp_path / "tickets.csv").read_bytes()).hexdigest() == rec["sha256"]
    assert (tmp_path / "defects.toml").read_bytes() == (DATA / "defects.toml").read_bytes()
