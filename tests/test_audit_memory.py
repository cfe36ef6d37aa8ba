"""The audit under a memory budget (engine/audit/budget.py): the bounded paths give the figures of the
in-memory ones, byte for byte; the budget is read, chosen and recorded as documented; and a run under a
memory limit finishes on the bounded path where the in-memory path is killed."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.audit import budget as B
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "tickets.csv"
HUGE = "1000G"  # every check in memory
TINY = "1M"  # every check bounded


def _example(section: str, answers: str = "answers-example.toml") -> dict:
    return tomllib.loads((ROOT / "docs" / answers).read_text())[section]


def _stages(ws: Path, tag: str, source_inputs: dict, split_inputs: dict, budget: str):
    ctx = StageContext(session_dir=ws / f"s-{tag}", workspace=ws)
    rec = source.run(source.Inputs(**source_inputs, memory_budget=budget), {}, ctx)
    sp = split.run(split.Inputs(**split_inputs), {"source": rec}, ctx)
    return rec, sp, ctx.session_dir


def _figures(*records) -> dict:
    """Every check's measured values, status, summary and coverage without its memory part."""
    return {
        c.id: {
            "measured": c.measured,
            "status": c.status,
            "summary": c.summary,
            "coverage": B.strip_note(c.coverage),
        }
        for r in records
        for c in r.checks
    }


def _assert_same(ws: Path, source_inputs: dict, split_inputs: dict) -> tuple:
    big = _stages(ws, "mem", source_inputs, split_inputs, HUGE)
    small = _stages(ws, "bounded", source_inputs, split_inputs, TINY)
    a, b = _figures(big[0], big[1]), _figures(small[0], small[1])
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)
    for name in ("near_duplicates.parquet", "families.parquet", "split.parquet"):
        left, right = big[2] / "data" / name, small[2] / "data" / name
        assert left.exists() == right.exists(), name
        assert not left.exists() or left.read_bytes() == right.read_bytes(), name
    return big, small


def _bring_scripts(ws: Path, src: dict) -> None:
    """The scripts a source declares (its label script, preprocessing scripts), copied beside the data."""
    named = [src.get("label_provenance", {}).get("script", "")]
    named += [p["script"] for p in src.get("preprocessing", [])]
    for rel in filter(None, named):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes((ROOT / rel).read_bytes())


@pytest.mark.parametrize("answers", ["answers-example.toml", "answers-sft.toml", "answers-tabular.toml"])
def test_bounded_paths_give_the_in_memory_figures_on_the_sample(tmp_path: Path, answers: str) -> None:
    """The documented examples: text tickets (CSV), chat conversations (JSONL, nested), tabular with a filter."""
    src = _example("source", answers)
    data = ROOT / src["files"][0]
    if not data.exists():
        pytest.skip(f"{data} is not generated")
    (tmp_path / "sample_data").mkdir()
    (tmp_path / src["files"][0]).write_bytes(data.read_bytes())
    _bring_scripts(tmp_path, src)
    big, small = _assert_same(tmp_path, src, _example("split", answers))
    if not src.get("text_columns"):
        return
    # The path each run took is written on the checks that have two.
    for rec, path in ((big[0], B.IN_MEMORY), (small[0], B.BOUNDED)):
        for cid in ("source.schema", "source.near_duplicates"):
            assert f"memory: {path} (budget " in rec.check(cid).coverage, cid
    assert "memory: bounded (budget 1.0 MiB, setting)" in small[1].check("split.membership").coverage


def _planted(n: int, seed: int = 3) -> pl.DataFrame:
    """Texts with exact and near copies, families, a time column and rows the split leaves out."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(400)])
    body = [" ".join(rng.choice(words, size=int(rng.integers(6, 30)))) for _ in range(n)]
    for i in range(n // 10, n, 7):  # near copies (one word changed) and exact copies
        src = body[int(rng.integers(0, i))]
        body[i] = src if i % 2 else src.replace("w1 ", "w2 ", 1) + " w399"
    days = rng.integers(0, 400, size=n)
    return pl.DataFrame(
        {
            "id": np.arange(n),
            "body": body,
            "kind": rng.choice(["a", "b", None], size=n).tolist(),
            "label": rng.choice(["x", "y", "z", "unmapped"], size=n, p=[0.5, 0.3, 0.15, 0.05]).tolist(),
            "cust": rng.integers(0, n // 4, size=n).astype(str).tolist(),
            "score": rng.normal(size=n),
            "when": (np.datetime64("2024-01-01") + days).astype(str).tolist(),
        }
    )


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_bounded_paths_give_the_in_memory_figures_with_gaps_and_exclusions(tmp_path: Path, kind: str) -> None:
    frame = _planted(3000)
    frame.write_csv(tmp_path / "d.csv") if kind == "csv" else frame.write_parquet(tmp_path / "d.parquet")
    src = dict(
        files=[f"d.{kind}"],
        label_column="label",
        label_mapping={"x": "x", "y": "y", "z": "z"},
        input_columns=["body", "kind"],
        text_columns=["body"],
        entity_columns=["cust"],
        time_column="when",
        as_of="2026-01-01",
        filters=[{"reason": "drop some", "where": "id % 17 <> 0"}],
        near_dup_threshold=0.7,
        shingle_size=2,
    )
    # A time split with a gap leaves rows unassigned: the bounded join must leave them out too.
    spl = dict(strategy="group_time", gap_days=20.0, rationale="test", grouping="duplicates_and_near")
    big, _ = _assert_same(tmp_path, src, spl)
    assert big[0].check("source.near_duplicates").measured["pairs"] > 0
    assert big[0].check("source.duplicate_inputs").measured["exact"]["groups"] > 0
    assert sum(big[1].check("split.membership").measured["excluded"].values()) > 0


def test_sharded_near_duplicate_search_gives_identical_pairs(monkeypatch: pytest.MonkeyPatch) -> None:
    from claimcheck.engine.audit import neardup
    from claimcheck.engine.audit.neardup import candidates

    df = _planted(4000, seed=5).with_row_index("row_id").with_columns(pl.col("row_id").cast(pl.Int64))
    full = neardup.near_duplicates(df, ["body"], threshold=0.7, shingle_size=2)
    # Shards of 2,000 signatures: many passes through their files, one at a time.
    monkeypatch.setattr(candidates, "BOUNDED_SIG_BLOCK", 2000)
    sharded = neardup.near_duplicates(df, ["body"], threshold=0.7, shingle_size=2, bounded=True)
    assert full.pairs.height > 50
    assert neardup.pairs_payload(full.pairs) == neardup.pairs_payload(sharded.pairs)
    assert (full.candidates, full.verified_text_pairs) == (sharded.candidates, sharded.verified_text_pairs)


def test_budget_is_read_from_setting_environment_and_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(B.ENV, "2G")
    assert B.resolve("512M") == B.Budget(512 << 20, "setting")
    assert B.resolve("") == B.Budget(2 << 30, "environment")
    monkeypatch.delenv(B.ENV)
    default = B.resolve("")
    assert default.bytes == int(B.machine_memory() * B.DEFAULT_FRACTION)
    assert default.origin.startswith("default: 50% of ")
    assert B.parse_size("1.5GiB", "x") == int(1.5 * (1 << 30))
    with pytest.raises(StageInputError, match="'lots' is not a size"):
        B.parse_size("lots", "source input 'memory_budget'")
    monkeypatch.setenv(B.ENV, "12 parsecs")
    with pytest.raises(StageInputError, match=f"environment variable {B.ENV}"):
        B.resolve("")
    with pytest.raises(ValueError, match="not a size"):
        source.Inputs(memory_budget="a lot")


def test_replay_ignores_the_memory_part_of_coverage() -> None:
    from claimcheck.engine.evidence import Check
    from claimcheck.engine.headless.compare import compare_check

    here = B.Budget(64 << 30, "default: 50% of 128.0 GiB")
    there = B.Budget(1 << 30, "environment")
    old = Check(id="source.schema", status="pass", summary="s", coverage=here.covered("full", B.IN_MEMORY))
    new = old.model_copy(update={"coverage": there.covered("full", B.BOUNDED)})
    assert compare_check("source", old, new).outcome == "reproduced"
    other = old.model_copy(update={"coverage": there.covered("preview: first 10 rows", B.BOUNDED)})
    assert compare_check("source", old, other).outcome == "differs"
    alone = there.covered("", B.BOUNDED)
    assert alone.startswith("memory: bounded") and B.strip_note(alone) == ""


def test_cli_memory_budget_is_checked_and_handed_to_the_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from claimcheck.tui.cli import main

    monkeypatch.delenv(B.ENV, raising=False)
    code = main(
        ["run", "--memory-budget", "lots", "--answers", str(tmp_path / "a.toml"), str(tmp_path / "s")]
    )
    assert code == 2 and "--memory-budget = 'lots' is not a size" in capsys.readouterr().err
    assert B.ENV not in os.environ
    main(["run", "--memory-budget", "3G", "--answers", str(tmp_path / "a.toml"), str(tmp_path / "s")])
    assert os.environ[B.ENV] == "3G" and B.resolve("") == B.Budget(3 << 30, "environment")


def test_replay_on_a_smaller_budget_reproduces_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session recorded in memory, replayed where the budget sends every step down its bounded path:
    every check reproduces (the memory part of the coverage lines is not compared)."""
    import tomlkit

    from claimcheck.engine.headless.answers import run_answers
    from claimcheck.engine.headless.replay import replay

    if not SAMPLE.exists():
        pytest.skip("sample_data/tickets.csv is not generated")
    (tmp_path / "sample_data").mkdir()
    (tmp_path / "sample_data" / "tickets.csv").write_bytes(SAMPLE.read_bytes())
    example = tomllib.loads((ROOT / "docs" / "answers-example.toml").read_text())
    answers = {k: example[k] for k in ("session", "claim", "source", "split")}
    _bring_scripts(tmp_path, answers["source"])
    answers["session"]["workspace"] = "."
    (tmp_path / "answers.toml").write_text(tomlkit.dumps(answers))
    monkeypatch.setenv(B.ENV, "64G")
    made = run_answers(tmp_path / "answers.toml", tmp_path / "s")
    assert made.exit_code == 0, made.render_table()
    monkeypatch.setenv(B.ENV, "1M")
    result = replay(tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    rows = {(r.stage, r.check): r.outcome for r in result.rows}
    assert rows[("source", "source.near_duplicates")] == "reproduced"
    assert rows[("split", "split.membership")] == "reproduced"
    # The report's limitations do not mistake the memory part of a coverage line for partial coverage.
    from claimcheck.engine.report.build import render

    markdown = render(tmp_path / "s")[0]
    assert "memory: in memory (budget 64.0 GiB, environment)" in markdown
    assert "not the full data" not in markdown


@pytest.mark.parametrize("how", ["left", "inner"])
def test_bounded_attach_is_the_join(how: str) -> None:
    """The split's bounded alignment gives a join's rows and values, whatever order the other side is
    in and whichever rows it lacks (or holds beyond ds)."""
    rng = np.random.default_rng(11)
    ds = pl.DataFrame({"row_id": np.arange(0, 4000, 2, dtype=np.int64), "x": rng.normal(size=2000)})
    ids = rng.permutation(np.arange(0, 5000, 3, dtype=np.int64))
    other = pl.DataFrame({"row_id": ids, "split": rng.choice(["train", "test"], size=ids.size)})
    want = ds.join(other, on="row_id", how=how).sort("row_id")
    got = split._attach(ds, other, how, B.BOUNDED)
    assert got.equals(want)
    assert split._attach(ds, other.head(0), how, B.BOUNDED).height == (ds.height if how == "left" else 0)


def _with_gaps(n: int) -> pl.DataFrame:
    """_planted with missing and non-ASCII texts (Unicode case and spaces: Polars' normalisation)."""
    frame = _planted(n, seed=9)
    body = frame.get_column("body").to_list()
    for i in range(0, n, 41):
        body[i] = None
    for i in range(5, n, 97):
        body[i] = f"ÉTÉ\u00a0{body[i - 5] or 'w1'} ÇA  w3"
    return frame.with_columns(pl.Series("body", body))


def _spied(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every textstore.spill call's text columns and the frame it handed back. The small files here
    count as large (the read's estimate x1000), so that the 1 MiB budget sends the reads bounded."""
    from claimcheck.engine.audit import textstore

    monkeypatch.setattr(B, "PARSE_FACTOR", 1000.0)
    calls: list = []
    real = textstore.spill

    def spy(lf: pl.LazyFrame, cols: list[str]):
        frame, store = real(lf, cols)
        calls.append((cols, frame))
        return frame, store

    monkeypatch.setattr(textstore, "spill", spy)
    return calls


def test_text_columns_stay_on_disk_on_the_bounded_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded, the source and split frames hold stand-ins for the text ("" or null) and every text
    check reads the spill file: the same figures, pairs and membership as in memory."""
    _with_gaps(3000).write_csv(tmp_path / "d.csv")
    src = dict(
        files=["d.csv"],
        label_column="label",
        label_mapping={"x": "x", "y": "y", "z": "z"},
        input_columns=["body", "kind"],
        text_columns=["body"],
        entity_columns=["cust"],
        time_column="when",
        as_of="2026-01-01",
        filters=[{"reason": "drop some", "where": "id % 13 <> 0"}],
        near_dup_threshold=0.7,
        shingle_size=2,
    )
    calls = _spied(monkeypatch)
    from claimcheck.engine.audit import textstore

    # Row groups of 256 rows, one per slice: many slices and reads across groups.
    monkeypatch.setattr(textstore, "ROW_GROUP", 256)
    monkeypatch.setattr(textstore, "SLICE_BYTES", 1)
    spl = dict(strategy="random", rationale="test", near_dup_threshold=0.7, shingle_size=2)
    big, small = _assert_same(tmp_path, src, spl)
    # The source's read spills; the split reads that spill, handed over (textstore.take_over).
    assert [c[0] for c in calls] == [["body"]]
    for _, frame in calls:
        assert set(frame.get_column("body").drop_nulls().unique().to_list()) == {""}
        assert frame.get_column("body").null_count() > 0
    m = big[0].check("source.near_duplicates").measured
    assert m["pairs"] > 0 and big[0].check("source.duplicate_inputs").measured["exact"]["groups"] > 0
    assert big[0].check("source.missingness").measured["null_share"]["body"] > 0
    assert big[1].check("split.exact_overlap").measured["rows"]["test"] > 0
    assert (
        small[0]
        .check("source.near_duplicates")
        .coverage.endswith("memory: bounded (budget 1.0 MiB, setting)")
    )


def test_text_read_as_something_else_stays_in_the_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filter on the text column, or a grouping by duplicates in the split: the text is loaded as in
    memory (no spill of it), the figures unchanged."""
    from claimcheck.engine.audit.textstore import columns_on_disk

    _with_gaps(1500).write_csv(tmp_path / "d.csv")
    src = dict(
        files=["d.csv"],
        label_column="label",
        input_columns=["body", "kind"],
        text_columns=["body"],
        filters=[{"reason": "short ones", "where": "body <> 'w1'"}],
        near_dup_threshold=0.7,
        shingle_size=2,
    )
    calls = _spied(monkeypatch)
    _assert_same(tmp_path, src, dict(strategy="group", rationale="test", grouping="duplicates"))
    assert calls == []
    schema = pl.Schema({"body": pl.String, "cust": pl.String})
    assert columns_on_disk({"text_columns": ["body"]}, schema, {}) == ["body"]
    assert columns_on_disk({"text_columns": ["body"], "entity_columns": ["body"]}, schema, {}) == []
    assert columns_on_disk({"text_columns": ["body"]}, schema, {"task_kind": "retrieval"}) == []
    assert columns_on_disk({"text_columns": ["body"]}, pl.Schema({"body": pl.List(pl.String)}), {}) == []


def test_families_file_does_not_follow_the_frames_chunks(tmp_path: Path) -> None:
    """The families file (and its sha256) is the same whether the frame came in one chunk (the
    bounded read) or in the CSV reader's many chunks (in memory)."""
    from claimcheck.engine.stages.source import identity

    n = 300_000
    cust = np.random.default_rng(4).integers(0, n // 6, size=n).astype(str)
    pl.DataFrame({"row_id": np.arange(n, dtype=np.int64), "cust": cust}).write_csv(tmp_path / "d.csv")
    parts = pl.read_csv(tmp_path / "d.csv")  # in the CSV reader's chunks, as in memory
    frame = parts.rechunk()
    inp = source.Inputs(
        files=["d.csv"], label_column="label", input_columns=["body"], entity_columns=["cust"]
    )
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    one = identity.families(frame, inp, ctx, "full").measured
    many = identity.families(parts, inp, ctx, "full").measured
    assert one["families_sha256"] == many["families_sha256"] and one == many


LIMIT_MB = 1024  # RLIMIT_DATA of the limited run: the bounded run here fails near 450 MB (bench/README.md)
_LIMITED = """
import json, resource, sys
from pathlib import Path
lim = int(sys.argv[3]) << 20
resource.setrlimit(resource.RLIMIT_DATA, (lim, lim))
import claimcheck.tui.cli  # noqa: F401  (the app's allocator setting)
from claimcheck.engine.audit import budget as B
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split
ws = Path(sys.argv[1])
src, spl = json.loads(sys.argv[2])
ctx = StageContext(session_dir=ws / "s-limited", workspace=ws)
rec = source.run(source.Inputs(**src, memory_budget="1M"), {}, ctx)
sp = split.run(split.Inputs(**spl), {"source": rec}, ctx)
fig = {c.id: {"measured": c.measured, "status": c.status, "summary": c.summary,
              "coverage": B.strip_note(c.coverage)} for r in (rec, sp) for c in r.checks}
print(json.dumps({"figures": fig, "schema": rec.check("source.schema").coverage}, sort_keys=True, default=str))
"""


def test_bounded_run_under_a_memory_limit_gives_the_in_memory_figures(tmp_path: Path) -> None:
    """A process held to RLIMIT_DATA = LIMIT_MB audits 20,000 rows on the bounded path (texts left on
    disk) and records the figures of an unlimited in-memory run. The limit keeps a wide margin over
    what the bounded run needs; it does not stop the in-memory run of data this small either."""
    import subprocess
    import sys

    _with_gaps(20_000).write_csv(tmp_path / "d.csv")
    src = dict(
        files=["d.csv"],
        label_column="label",
        input_columns=["body", "kind"],
        text_columns=["body"],
        entity_columns=["cust"],
        near_dup_threshold=0.7,
        shingle_size=2,
    )
    spl = dict(strategy="random", rationale="test", near_dup_threshold=0.7, shingle_size=2)
    args = [sys.executable, "-c", _LIMITED, str(tmp_path), json.dumps([src, spl]), str(LIMIT_MB)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    limited = json.loads(done.stdout.strip().splitlines()[-1])
    assert limited["schema"].endswith("memory: bounded (budget 1.0 MiB, setting)")
    big = _stages(tmp_path, "mem", src, spl, HUGE)
    want = json.loads(json.dumps(_figures(big[0], big[1]), sort_keys=True, default=str))
    assert limited["figures"] == want
    assert (tmp_path / "s-limited" / "data" / "near_duplicates.parquet").read_bytes() == (
        big[2] / "data" / "near_duplicates.parquet"
    ).read_bytes()
