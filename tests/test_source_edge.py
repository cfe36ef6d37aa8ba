"""Small hand-made frames: each check gives a clear result or a clear error, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split


def _run(tmp_path: Path, text: str | bytes, name: str = "d.csv", **kw):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    base = {
        "files": [name],
        "label_column": "lab",
        "input_columns": ["txt", "num"],
        "text_columns": ["txt"],
        "availability": {"txt": "yes", "num": "yes"},
        "entity_columns": ["cust"],
        "time_column": "ts",
        "as_of": "2030-01-01",
    }
    base.update(kw)
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    return source.run(source.Inputs(**base), {}, ctx), ctx


HEADER = "txt,num,cust,ts,lab\n"


def test_empty_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StageInputError, match="empty"):
        _run(tmp_path, b"")


def test_header_only_fails_schema(tmp_path: Path) -> None:
    rec, _ = _run(tmp_path, HEADER)
    assert rec.check("source.schema").status == "fail"


def test_one_row(tmp_path: Path) -> None:
    rec, _ = _run(tmp_path, HEADER + "hello world,1,c1,2024-01-01T00:00:00,a\n")
    assert rec.check("source.schema").measured["rows"] == 1
    assert rec.check("source.class_coverage").status == "fail"  # a single class
    assert rec.check("source.entity_families").measured["families"] == 1


def test_all_null_label(tmp_path: Path) -> None:
    rec, _ = _run(tmp_path, HEADER + "a,1,c1,2024-01-01,\nb,2,c2,2024-01-02,\n")
    cc = rec.check("source.class_coverage")
    assert cc.status == "fail" and cc.measured["null_labels"] == 2
    assert rec.check("source.transformations").measured["rows_kept"] == 0


def test_unparseable_and_future_dates(tmp_path: Path) -> None:
    rows = "a,1,c1,2024-01-01T10:00:00,x\nb,2,c2,not a date,y\nc,3,c3,2031-05-01T00:00:00,x\nd,4,c4,2024-03-05T00:00:00Z,y\n"
    rec, _ = _run(tmp_path, HEADER + rows)
    t = rec.check("source.time_range")
    assert t.measured["unparseable"] == 1 and t.status == "warn"
    assert rec.check("source.future_timestamps").measured["future"] == 1
    assert rec.check("source.future_timestamps").replay == "compare"


def test_non_utf8_bytes_are_located(tmp_path: Path) -> None:
    raw = (HEADER + "caf").encode() + b"\xe9" + b",1,c1,2024-01-01,x\nok,2,c2,2024-01-02,y\n"
    rec, _ = _run(tmp_path, raw)
    s = rec.check("source.schema")
    assert s.status == "warn" and s.measured["non_utf8_lines"] == 1
    assert s.measured["malformed_by_file"][0]["locations"][0]["line"] == 2


def test_ragged_rows_are_kept_and_located(tmp_path: Path) -> None:
    rec, _ = _run(tmp_path, HEADER + "a,1,c1,2024-01-01,x\nb,2,c2,2024-01-02,y,EXTRA\nc,3\n")
    s = rec.check("source.schema")
    assert s.measured["rows"] == 3 and s.measured["malformed_records"] == 2
    assert [loc["line"] for loc in s.measured["malformed_by_file"][0]["locations"]] == [3, 4]


def test_mixed_types_in_a_column(tmp_path: Path) -> None:
    rows = (
        "".join(f"t{i},{i},c{i},2024-01-01,{'xy'[i % 2]}\n" for i in range(300)) + "z,abc,c9,2024-01-01,x\n"
    )
    rec, _ = _run(tmp_path, HEADER + rows)
    assert rec.check("source.schema").measured["columns"]["num"] == "String"


def test_malformed_jsonl_is_a_clear_error(tmp_path: Path) -> None:
    good = json.dumps({"txt": "a", "num": 1, "cust": "c", "ts": "2024-01-01", "lab": "x"})
    with pytest.raises(StageInputError, match="line 2"):
        _run(tmp_path, good + "\n{broken\n", name="d.jsonl")


def test_unknown_column_and_label_in_inputs(tmp_path: Path) -> None:
    with pytest.raises(StageInputError, match="entity_columns"):
        _run(tmp_path, HEADER + "a,1,c1,2024-01-01,x\n", entity_columns=["nope"])
    # A static mistake is refused by the Inputs model itself, before any data is read.
    with pytest.raises(ValidationError, match="label column"):
        _run(tmp_path, HEADER + "a,1,c1,2024-01-01,x\n", input_columns=["txt", "lab"])


def test_filters_mapping_availability_sensitive(tmp_path: Path) -> None:
    rows = "".join(f"t{i},{i},c{i % 3},2024-01-0{1 + i % 9},{'xyz'[i % 3]}\n" for i in range(30))
    rec, _ = _run(
        tmp_path,
        HEADER + rows,
        filters=[{"reason": "drop small", "where": "num >= 3"}],
        label_mapping={"x": "X", "y": "Y", "w": "W"},
        availability={"txt": "yes", "num": "unresolved"},
        sensitive_columns=["txt"],
    )
    steps = rec.check("source.transformations").measured["steps"]
    assert steps[0]["removed"] == 3 and steps[1]["removed"] == 9  # 9 rows labelled z have no mapping
    cc = rec.check("source.class_coverage").measured
    assert cc["unmapped_raw_values"] == {"z": 9} and cc["unused_mapping_keys"] == ["w"]
    av = rec.check("source.prediction_time_availability")
    assert av.status == "warn" and av.measured["unresolved"] == ["num"]
    assert any(n.tag == "limitation" and "num" in n.text for n in rec.notes)
    sens = rec.check("source.sensitive_columns")
    assert sens.status == "pass" and sens.measured["removed_from_inputs"] == ["txt"]
    assert "txt" not in rec.check("source.transformations").measured["model_inputs"]


def test_duplicates_and_conflicts_small(tmp_path: Path) -> None:
    rows = "Hello  World,1,c1,2024-01-01,x\nhello world,1,c2,2024-01-01,y\nHello  World,1,c3,2024-01-01,y\nother,2,c4,2024-01-01,x\n"
    rec, _ = _run(tmp_path, HEADER + rows)
    d = rec.check("source.duplicate_inputs").measured
    assert (d["exact"]["groups"], d["exact"]["rows"]) == (1, 2)
    assert (d["normalised"]["groups"], d["normalised"]["rows"]) == (1, 3)
    c = rec.check("source.conflicting_labels").measured
    assert c["groups"] == 1 and c["noise_ceiling_accuracy"] == 0.75


def test_preview_says_so(tmp_path: Path) -> None:
    rows = "".join(f"t{i},{i},c{i},2024-01-01,{'xy'[i % 2]}\n" for i in range(50))
    rec, _ = _run(tmp_path, HEADER + rows, preview_rows=10)
    cov = rec.check("source.schema").coverage
    assert cov.startswith("preview: first 10 rows · memory: in memory (budget ")
    assert rec.check("source.pass_kind").status == "warn"


def test_split_stage_errors_and_time_split(tmp_path: Path) -> None:
    rows = "".join(
        f"text number {i} here,{i},c{i // 4},2024-{1 + i % 12:02d}-{1 + i % 27:02d},{'xy'[i % 2]}\n"
        for i in range(120)
    )
    rec, ctx = _run(tmp_path, HEADER + rows)
    with pytest.raises(ValidationError, match="add up"):  # refused by Inputs, before any data is read
        split.Inputs(fractions={"train": 0.5, "test": 0.2})
    r = split.run(split.Inputs(strategy="time", rationale="next months", gap_days=10), {"source": rec}, ctx)
    assert r.check("split.chronology").status == "pass"
    assert r.check("split.membership").measured["excluded"]["inside the gap before a later split"] > 0
    r2 = split.run(
        split.Inputs(strategy="group_kfold", fractions={"train": 0.8, "test": 0.2}, k=3, rationale="small"),
        {"source": rec},
        ctx,
    )
    assert r2.check("split.folds").measured["families_spanning_folds"] == 0
    assert r2.check("split.family_intersection").measured["families_crossing"] == 0
    r3 = split.run(split.Inputs(strategy="random", rationale=""), {"source": rec}, ctx)
    assert r3.check("split.rationale").status == "fail"


def test_rerun_is_identical_and_replay_does_not_write(tmp_path: Path) -> None:
    rows = "".join(
        f"text number {i} here,{i},c{i // 4},2024-{1 + i % 12:02d}-01,{'xy'[i % 2]}\n" for i in range(60)
    )
    rec1, ctx = _run(tmp_path, HEADER + rows)
    rec2, _ = _run(tmp_path, HEADER + rows)
    for a, b in zip(rec1.checks, rec2.checks, strict=True):
        if a.replay == "compare":
            assert a.measured == b.measured, a.id
    fam_file = ctx.session_dir / "data" / "families.parquet"
    fam_file.unlink()
    replay_ctx = StageContext(session_dir=ctx.session_dir, workspace=tmp_path, replay=True)
    rec3 = source.run(source.Inputs(**rec1.inputs), {}, replay_ctx)
    assert not fam_file.exists()
    assert rec3.check("source.entity_families").measured == rec1.check("source.entity_families").measured
