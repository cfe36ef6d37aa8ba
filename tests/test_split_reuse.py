"""The split stage reads the source stage's spill on the bounded path (engine/audit/textstore.py
hand_over / take_over): the same records and membership file as its own read of the files and as the
in-memory path; a spill whose files, inputs or bytes moved is not trusted, and none outlives its use."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.audit import budget as B
from claimcheck.engine.audit import textstore
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split
from tests.test_audit_memory import _planted

SRC = dict(
    files=["d.csv"],
    label_column="label",
    label_mapping={"x": "x", "y": "y", "z": "z"},
    input_columns=["body", "kind", "score"],
    text_columns=["body"],
    entity_columns=["cust"],
    time_column="when",
    as_of="2026-01-01",
    filters=[{"reason": "drop some", "where": "id % 13 <> 0"}],
    non_finite="exclude_rows",
    near_dup_threshold=0.7,
    shingle_size=2,
)
SPLIT = dict(strategy="random", rationale="test", near_dup_threshold=0.7, shingle_size=2)


def _data(n: int, seed: int = 5) -> pl.DataFrame:
    """test_audit_memory's planted texts (exact and near copies, families, labels the mapping leaves
    out) with gaps in the text and a 0/1 score holding NaNs (non_finite = exclude_rows)."""
    frame = _planted(n, seed)
    body = frame.get_column("body").to_list()
    for i in range(0, n, 41):
        body[i] = None
    score = np.random.default_rng(seed).integers(0, 2, size=n).astype(float)
    score[::53] = np.nan
    return frame.with_columns(pl.Series("body", body), pl.Series("score", score))


@pytest.fixture
def bounded(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Small files read as large (the read's estimate x1000: a 1 MiB budget sends them bounded), small
    row groups; counts each spill written and each spill taken over."""
    monkeypatch.setattr(B, "PARSE_FACTOR", 1000.0)
    monkeypatch.setattr(textstore, "ROW_GROUP", 256)
    textstore.drop_handed()  # what an earlier test's source run left
    counts = {"spills": 0, "taken": 0}
    real_spill, real_take = textstore.spill, textstore.take_over

    def spill(lf: pl.LazyFrame, cols: list[str]):
        counts["spills"] += 1
        return real_spill(lf, cols)

    def take(inputs: dict, paths: list[Path]):
        got = real_take(inputs, paths)
        counts["taken"] += got is not None
        return got

    monkeypatch.setattr(textstore, "spill", spill)
    monkeypatch.setattr(textstore, "take_over", take)
    yield counts
    textstore.drop_handed()


def _source(ws: Path, tag: str, budget: str, src: dict | None = None):
    ctx = StageContext(session_dir=ws / f"s-{tag}", workspace=ws)
    return source.run(source.Inputs(**(src or SRC), memory_budget=budget), {}, ctx), ctx


def _split(rec, ctx: StageContext):
    """The split record and its membership file's bytes."""
    sp = split.run(split.Inputs(**SPLIT), {"source": rec}, ctx)
    return sp, (ctx.session_dir / "data" / "split.parquet").read_bytes()


def _same(a, b) -> None:
    """Two split records and their membership files: equal, coverage included."""
    left = [c.model_dump(mode="json") for c in a[0].checks]
    right = [c.model_dump(mode="json") for c in b[0].checks]
    assert json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)
    assert a[1] == b[1]


def test_split_on_the_source_spill_is_the_split_on_the_files(tmp_path: Path, bounded: dict) -> None:
    """Bounded, the split reads the source's spill (no second read or spill) and writes the record and
    membership its own read of the files writes; their figures are the in-memory path's."""
    _data(3000).write_csv(tmp_path / "d.csv")
    rec, ctx = _source(tmp_path, "reuse", "1M")
    assert bounded == {"spills": 1, "taken": 0}
    folder = textstore._handed[0].store.path.parent
    reused = _split(rec, ctx)
    assert bounded == {"spills": 1, "taken": 1}
    assert not folder.exists() and textstore._handed == []  # the split removed the spill it took
    # The same split on its own read of the files: nothing handed over any more.
    again = _split(rec, ctx)
    assert bounded == {"spills": 2, "taken": 1}
    _same(reused, again)
    assert reused[0].check("split.exact_overlap").measured["rows"]["test"] > 0
    mem_rec, mem_ctx = _source(tmp_path, "mem", "1000G")
    mem = _split(mem_rec, mem_ctx)
    for a, b in zip(mem[0].checks, reused[0].checks, strict=True):
        assert (a.id, a.measured, a.status, a.summary) == (b.id, b.measured, b.status, b.summary)
        assert B.strip_note(a.coverage) == B.strip_note(b.coverage)
    assert mem[1] == reused[1]


def test_a_changed_file_is_read_again(tmp_path: Path, bounded: dict) -> None:
    """The data file rewritten after the source stage: the split reads it, as without a spill."""
    _data(2000).write_csv(tmp_path / "d.csv")
    rec, ctx = _source(tmp_path, "a", "1M")
    _data(2000, seed=6).write_csv(tmp_path / "d.csv")
    got = _split(rec, ctx)
    assert bounded == {"spills": 2, "taken": 0}
    fresh = _split(rec, ctx)
    _same(got, fresh)
    # Only the modification time moved: not trusted either.
    rec, ctx = _source(tmp_path, "c", "1M")
    st = os.stat(tmp_path / "d.csv")
    os.utime(tmp_path / "d.csv", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    _split(rec, ctx)
    assert bounded == {"spills": 5, "taken": 0}


def test_a_missing_or_rewritten_spill_or_other_inputs_are_not_trusted(tmp_path: Path, bounded: dict) -> None:
    _data(2000).write_csv(tmp_path / "d.csv")
    want = None
    for case in ("missing", "rewritten", "inputs", "kept"):
        rec, ctx = _source(tmp_path, case, "1M")
        (handed,) = textstore._handed
        if case == "missing":
            handed.store.path.unlink()
        elif case == "rewritten":
            pl.read_parquet(handed.store.path).head(10).write_parquet(handed.store.path)
        elif case == "inputs":
            rec = rec.model_copy(update={"inputs": {**rec.inputs, "shingle_size": 2, "as_of": "2026-01-02"}})
        got = _split(rec, ctx)
        assert not handed.store.path.exists()  # removed, used or not
        if want is None:
            want = got
        elif case != "inputs":
            _same(want, got)
    # Only the last one was taken; the others read the file again.
    assert bounded == {"spills": 7, "taken": 1}


def test_a_preview_hands_nothing_over_and_a_new_source_replaces_the_spill(
    tmp_path: Path, bounded: dict
) -> None:
    _data(2000).write_csv(tmp_path / "d.csv")
    _source(tmp_path, "p", "1M", {**SRC, "preview_rows": 500})
    assert textstore._handed == []
    _source(tmp_path, "q", "1M")
    assert len(textstore._handed) == 1
    # A new source run replaces (and removes) the spill handed over before it.
    old = textstore._handed[0].store.path
    _source(tmp_path, "r", "1M")
    assert not old.exists() and len(textstore._handed) == 1
    textstore.drop_handed()
    assert textstore._handed == []


def test_headless_run_and_replay_read_the_spill_and_reproduce(
    tmp_path: Path, bounded: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`claimcheck run --answers` on the bounded path: the split reads the source's spill; the replay
    (source and split again, one process) does too, and every check reproduces."""
    import tomllib

    import tomlkit

    from claimcheck.engine.headless.answers import run_answers
    from claimcheck.engine.headless.replay import replay

    root = Path(__file__).resolve().parents[1]
    sample = root / "sample_data" / "tickets.csv"
    if not sample.exists():
        pytest.skip("sample_data/tickets.csv is not generated")
    (tmp_path / "sample_data").mkdir()
    (tmp_path / "sample_data" / "tickets.csv").write_bytes(sample.read_bytes())
    example = tomllib.loads((root / "docs" / "answers-example.toml").read_text())
    answers = {k: example[k] for k in ("session", "claim", "source", "split")}
    for rel in filter(None, [answers["source"].get("label_provenance", {}).get("script", "")]):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((root / rel).read_bytes())
    for p in answers["source"].get("preprocessing", []):
        (tmp_path / p["script"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / p["script"]).write_bytes((root / p["script"]).read_bytes())
    answers["session"]["workspace"] = "."
    (tmp_path / "answers.toml").write_text(tomlkit.dumps(answers))
    monkeypatch.setenv(B.ENV, "1M")
    made = run_answers(tmp_path / "answers.toml", tmp_path / "s")
    assert made.exit_code == 0, made.render_table()
    assert bounded["taken"] == 1
    result = replay(tmp_path / "s")
    assert result.exit_code == 0, result.render_table()
    assert bounded["taken"] == 2
    rows = {(r.stage, r.check): r.outcome for r in result.rows}
    assert rows[("split", "split.membership")] == "reproduced"
    assert rows[("split", "split.exact_overlap")] == "reproduced"
