"""The checks that stream (docs/audit-scale.md): missingness, time range and class coverage aggregate a
scan (the spill file on the bounded path), the split's counts, chronology and family crossings
aggregate by group, and the split reloads only the columns it reads. Their figures are the in-memory
path's, byte for byte, on claims the sample tests of tests/test_audit_memory.py do not cover
(multi-label, weights, an ordinal and a numeric target, group k-fold, year and ordinal time units),
and the streamed profile equals counts taken directly from the rows."""

from __future__ import annotations

import datetime as dt
import json
import tomllib
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.audit import budget as B
from claimcheck.engine.audit import profile
from claimcheck.engine.data.rows import TARGET
from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split

ROOT = Path(__file__).resolve().parents[1]


def _run(ws: Path, tag: str, src: dict, spl: dict, claim: dict, budget: str) -> tuple:
    ctx = StageContext(session_dir=ws / f"s-{tag}", workspace=ws)
    up = {"claim": StageRecord(stage="claim", inputs=claim, checks=[])}
    rec = source.run(source.Inputs(**src, memory_budget=budget), up, ctx)
    sp = split.run(split.Inputs(**spl), {"source": rec, **up}, ctx)
    return rec, sp, ctx.session_dir


def _figures(*records) -> str:
    return json.dumps(
        {
            c.id: [c.measured, c.status, c.summary, B.strip_note(c.coverage)]
            for r in records
            for c in r.checks
        },
        sort_keys=True,
        default=str,
    )


def _same(ws: Path, src: dict, spl: dict, claim: dict) -> tuple:
    """The in-memory run, then the bounded one: every step's estimate made larger than any budget, so
    the small data takes every bounded path (the reads, the joins, the near-duplicate shards)."""
    big = _run(ws, "mem", src, spl, claim, "1000G")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(B, "need_parse", lambda paths: 1 << 60)
        mp.setattr(B, "need_neardup", lambda text_bytes: 1 << 60)
        small = _run(ws, "bounded", src, spl, claim, "1M")
    assert _figures(big[0], big[1]) == _figures(small[0], small[1])
    for name in ("near_duplicates.parquet", "families.parquet", "split.parquet"):
        left, right = big[2] / "data" / name, small[2] / "data" / name
        assert left.exists() == right.exists(), name
        assert not left.exists() or left.read_bytes() == right.read_bytes(), name
    assert "memory: bounded" in small[1].check("split.membership").coverage
    assert "memory: bounded" in small[0].check("source.schema").coverage
    return big, small


@pytest.mark.parametrize(
    "answers", ["answers-multilabel.toml", "answers-weights.toml", "answers-ordinal.toml"]
)
def test_bounded_figures_equal_in_memory_ones_for_more_claims(tmp_path: Path, answers: str) -> None:
    doc = tomllib.loads((ROOT / "docs" / answers).read_text())
    src, spl, claim = doc["source"], doc["split"], doc["claim"]
    data = ROOT / src["files"][0]
    (tmp_path / "sample_data").mkdir()
    (tmp_path / src["files"][0]).write_bytes(data.read_bytes())
    big, _ = _same(tmp_path, src, spl, claim)
    assert big[1].check("split.membership").measured["rows"] > 0


def _planted(n: int) -> pl.DataFrame:
    rng = np.random.default_rng(5)
    words = np.array([f"w{i}" for i in range(200)])
    body = [" ".join(rng.choice(words, size=int(rng.integers(5, 20)))) for _ in range(n)]
    for i in range(n // 10, n, 9):
        body[i] = body[int(rng.integers(0, i))]
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "body": body,
            "kind": rng.choice(["a", "b", None], size=n).tolist(),
            "label": rng.choice(["x", "y", "z", None], size=n, p=[0.5, 0.3, 0.15, 0.05]).tolist(),
            "score": rng.normal(size=n).round(3),
            "cust": rng.integers(0, n // 5, size=n).astype(str).tolist(),
            "year": rng.integers(1995, 2030, size=n),
            "w": rng.uniform(0.5, 2.0, size=n),
        }
    )


CASES = {
    # numeric target, a filter, random split
    "numeric": (
        dict(
            label_column="score",
            time_column="year",
            time_unit="year",
            filters=[{"reason": "some", "where": "id % 11 <> 0"}],
        ),
        dict(strategy="random", rationale="test"),
        {"target_type": "numeric", "fine_tuning": False},
    ),
    # weights, an ordinal time, group k-fold over entity families
    "weights_kfold": (
        dict(label_column="label", weight_column="w", time_column="year", time_unit="ordinal"),
        dict(strategy="group_kfold", k=3, rationale="test"),
        {"fine_tuning": False},
    ),
    # a time split with a gap by years, rows left out
    "time_gap": (
        dict(
            label_column="label",
            time_column="year",
            time_unit="year",
            filters=[{"reason": "some", "where": "id % 7 <> 0"}],
        ),
        dict(strategy="time", gap_days=400.0, rationale="test"),
        {"fine_tuning": False},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bounded_figures_equal_in_memory_ones_on_planted_rows(tmp_path: Path, case: str) -> None:
    _planted(2500).write_csv(tmp_path / "d.csv")
    extra, spl, claim = CASES[case]
    src = dict(
        files=["d.csv"],
        input_columns=["body", "kind"],
        text_columns=["body"],
        entity_columns=["cust"],
        as_of="2026-01-01",
        **extra,
    )
    big, _ = _same(tmp_path, src, spl, claim)
    if case == "time_gap":
        assert sum(big[1].check("split.membership").measured["excluded"].values()) > 0


def _rows() -> pl.DataFrame:
    rng = np.random.default_rng(9)
    n = 5000
    stamps = [
        None if i % 97 == 0 else ("not a date" if i % 89 == 0 else f"20{20 + i % 6}-{1 + i % 12:02d}-03")
        for i in range(n)
    ]
    stamps = [s if s is None or not s.startswith("2023-05") else None for s in stamps]  # an empty month
    return pl.DataFrame(
        {
            "row_id": np.arange(n),
            "label": rng.choice(["a", "b", "c", None], size=n).tolist(),
            TARGET: rng.choice(["A", "B", None], size=n).tolist(),
            "x": [None if i % 13 == 0 else float(i) for i in range(n)],
            "when": stamps,
        }
    )


def test_streamed_profile_equals_direct_counts(tmp_path: Path) -> None:
    """missingness, time_profile and class_coverage on the frame and on a Parquet scan of it: the same
    dicts, and the figures counted directly from the rows."""
    df = _rows()
    df.write_parquet(tmp_path / "r.parquet", row_group_size=700)
    scan = pl.scan_parquet(tmp_path / "r.parquet")
    cols = ["label", "x", "when"]
    as_of = dt.datetime(2024, 6, 1)
    for fn, args in (
        (profile.missingness, (cols,)),
        (profile.time_profile, ("when", "date", as_of)),
        (profile.class_coverage, ("label", {"a": "A", "b": "B"}, 0.1, 20)),
    ):
        assert fn(df, *args) == fn(scan, *args), fn.__name__
    m = profile.missingness(scan, cols)
    assert m["overall"]["x"] == round(df.get_column("x").null_count() / df.height, 6)
    assert m["rows_with_any_null"] == sum(any(v is None for v in row) for row in df.select(cols).iter_rows())
    t = profile.time_profile(scan, "when", "date", as_of)
    raw = df.get_column("when").to_list()
    assert t["missing"] == raw.count(None)
    assert t["unparseable"] == raw.count("not a date")
    assert "2023-05" in t["empty_months"]
    months = Counter(s[:7] for s in raw if s and s != "not a date")
    assert t["rows_per_month"] == dict(sorted(months.items()))
    assert t["future"] == sum(1 for s in raw if s and s != "not a date" and s > "2024-06-01")
    c = profile.class_coverage(scan, "label", {"a": "A", "b": "B"}, 0.1, 20)
    labels = Counter(df.get_column("label").to_list())
    assert c["null_labels"] == labels[None] and c["rows"] == df.height
    assert c["per_raw_label"] == {k: labels[k] for k in ("a", "b", "c")}
    assert c["unmapped_raw_values"] == {"c": labels["c"]}


def test_split_reads_only_its_columns() -> None:
    src = {
        "input_columns": ["body", "channel", "secret"],
        "sensitive_columns": ["secret"],
        "time_column": "created_at",
        "weight_column": "w",
        "subgroup_columns": ["region"],
        "label_column": "queue",
        "entity_columns": ["customer_id"],
    }
    cols = split.read_columns(src, {})
    assert cols == {"row_id", TARGET, "body", "channel", "created_at", "w", "region"}
    assert split.read_columns(src, {"task_kind": "retrieval"}) is None
