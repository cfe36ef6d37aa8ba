"""claimcheck.engine.data.rows and claimcheck.engine.data.splits: row identity, filters, families file, locked test, train-only fitting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.data import rows as data
from claimcheck.engine.data import splits
from claimcheck.engine.evidence import Check, EvidenceError, StageRecord
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from tests.training_fixtures import FAMILY_COUNTS


def _ctx(tmp_path: Path) -> StageContext:
    return StageContext(session_dir=tmp_path / "session", workspace=tmp_path)


def test_scan_files_row_identity_across_formats(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("x,y\n1,a\n2,b\n")
    pl.DataFrame({"x": [3], "y": ["c"]}).write_parquet(tmp_path / "b.parquet")
    (tmp_path / "c.jsonl").write_text(
        json.dumps({"x": 4, "y": "d"}) + "\n" + json.dumps({"x": 5, "y": "e"}) + "\n"
    )
    df = data.scan_files([tmp_path / "a.csv", tmp_path / "b.parquet", tmp_path / "c.jsonl"]).collect()
    assert df.get_column(data.ROW_ID).to_list() == [0, 1, 2, 3, 4]
    assert df.get_column(data.SOURCE_FILE).to_list() == ["a.csv", "a.csv", "b.parquet", "c.jsonl", "c.jsonl"]
    assert df.get_column(data.SOURCE_LINE).to_list() == [1, 2, 1, 1, 2]
    assert df.get_column("x").to_list() == [1, 2, 3, 4, 5]


def test_scan_files_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(StageInputError, match="empty"):
        data.scan_files([tmp_path / "empty.csv"])
    with pytest.raises(StageInputError, match="not found"):
        data.scan_files([tmp_path / "missing.csv"])
    (tmp_path / "x.xlsx").write_text("x")
    with pytest.raises(StageInputError, match="unsupported"):
        data.scan_files([tmp_path / "x.xlsx"])
    (tmp_path / "r.csv").write_text("row_id,y\n1,2\n")
    with pytest.raises(StageInputError, match="reserves"):
        data.scan_files([tmp_path / "r.csv"])


def test_load_dataset_filters_keep_row_id_and_map_labels(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("t,lab,n\na,x,1\nb,y,2\nc,z,3\nd,,4\ne,x,5\n")
    inputs = {
        "files": ["d.csv"],
        "label_column": "lab",
        "label_mapping": {"x": "X", "y": "Y"},
        "filters": [{"reason": "drop n=5", "where": "n < 5"}],
    }
    df = data.load_dataset(inputs, _ctx(tmp_path)).collect()
    # z has no mapping, the 4th row has no label, the 5th is filtered: ids 0 and 1 stay, unchanged.
    assert df.get_column(data.ROW_ID).to_list() == [0, 1]
    assert df.get_column(data.TARGET).to_list() == ["X", "Y"]
    assert "lab" in df.columns and "n" in df.columns
    with pytest.raises(StageInputError, match="label_column"):
        data.load_dataset({**inputs, "label_column": "nope"}, _ctx(tmp_path))


def test_model_inputs_drop_unavailable_sensitive_and_no() -> None:
    inp = {
        "input_columns": ["a", "b", "c", "d", "e"],
        "unavailable_columns": ["b"],
        "sensitive_columns": ["c"],
        "availability": {"d": "no", "e": "unresolved"},
        "text_columns": ["a", "c"],
    }
    assert data.model_inputs(inp) == ["a", "e"]
    assert data.text_inputs(inp) == ["a"]


def _families_record(tmp_path: Path, ctx: StageContext) -> StageRecord:
    from claimcheck.engine.audit.families import compute_families

    df = pl.DataFrame(
        {"row_id": [0, 1, 2, 3, 4], "cust": ["a", "b", None, "a", None], "case": [None, "k", "k", None, None]}
    )
    fam = compute_families(df, ["cust", "case"])
    path = ctx.data_dir / "families.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    fam.write_parquet(path)
    check = Check(
        id="source.entity_families",
        status="info",
        summary="",
        measured=FAMILY_COUNTS
        | {"families_path": "data/families.parquet", "families_sha256": data.sha256_file(path)},
    )
    return StageRecord(stage="source", checks=[check])


def test_families_connect_through_several_ids_and_detect_tampering(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    rec = _families_record(tmp_path, ctx)
    fam = data.families(rec, ctx)
    ids = dict(zip(fam["row_id"].to_list(), fam["family_id"].to_list(), strict=True))
    assert ids[0] == ids[3]  # same customer
    assert ids[1] == ids[2]  # customer b links case k
    assert ids[4] not in (ids[0], ids[1])  # no entity id: its own family
    assert sorted(set(ids.values())) == [0, 1, 2]
    pl.DataFrame({"row_id": [0], "family_id": [9]}).write_parquet(ctx.data_dir / "families.parquet")
    with pytest.raises(EvidenceError, match="sha256"):
        data.families(rec, ctx)


def test_seeded_assignment_is_deterministic_and_exact() -> None:
    ids = np.arange(1000)
    fr = {"train": 0.7, "dev": 0.1, "calibration": 0.1, "test": 0.1}
    a, b = splits.assign_rows(ids, fr, 3), splits.assign_rows(ids, fr, 3)
    assert (a == b).all()
    assert np.bincount(a).tolist() == [700, 100, 100, 100]
    assert not (splits.assign_rows(ids, fr, 4) == a).all()
    # Stable across processes: a fixed value, not Python's hash().
    assert int(splits.unit_position(np.array([1]), 0)[0]) == int(splits.unit_position(np.array([1]), 0)[0])
    fams = np.repeat(np.arange(200), 5)
    lab = splits.assign_groups(fams, fr, 0)
    assert all(len(set(lab[fams == f])) == 1 for f in range(200))


def _split_session(tmp_path: Path) -> tuple[dict[str, StageRecord], StageContext]:
    ctx = _ctx(tmp_path)
    (tmp_path / "d.csv").write_text("t,lab\n" + "".join(f"text {i},{'xy'[i % 2]}\n" for i in range(10)))
    fam = pl.DataFrame({"row_id": list(range(10)), "family_id": list(range(10))})
    ctx.data_dir.mkdir(parents=True)
    fam.write_parquet(ctx.data_dir / "families.parquet")
    mem = pl.DataFrame(
        {"row_id": list(range(10)), "split": ["train"] * 6 + ["dev"] * 2 + ["test"] * 2, "fold": [-1] * 10}
    )
    mem.write_parquet(ctx.data_dir / "split.parquet")
    src = StageRecord(
        stage="source",
        inputs={"files": ["d.csv"], "label_column": "lab"},
        checks=[
            Check(
                id="source.entity_families",
                status="info",
                summary="",
                measured=FAMILY_COUNTS
                | {
                    "families_path": "data/families.parquet",
                    "families_sha256": data.sha256_file(ctx.data_dir / "families.parquet"),
                },
            )
        ],
    )
    spl = StageRecord(
        stage="split",
        checks=[
            Check(
                id="split.membership",
                status="pass",
                summary="",
                measured={
                    "path": "data/split.parquet",
                    "sha256": data.sha256_file(ctx.data_dir / "split.parquet"),
                    "rows": 0,
                    "sizes": {},
                    "excluded": {},
                },
            )
        ],
    )
    return {"source": src, "split": spl}, ctx


def test_rows_guards_the_locked_test_and_logs_reads(tmp_path: Path) -> None:
    up, ctx = _split_session(tmp_path)
    train = splits.rows("train", up, ctx, caller="baseline")
    assert train.get_column("row_id").to_list() == [0, 1, 2, 3, 4, 5]
    assert {"target", "family_id", "split"} <= set(train.columns)
    with pytest.raises(splits.LockedTestError, match="baseline"):
        splits.rows("test", up, ctx, caller="baseline")
    assert splits.locked_reads(ctx) == []
    unlabelled = splits.rows("test", up, ctx, caller="contract", labels=False)
    assert "target" not in unlabelled.columns and "lab" not in unlabelled.columns
    test = splits.rows("test", up, ctx, caller="artifact")
    assert test.height == 2
    assert [r["caller"] for r in splits.locked_reads(ctx)] == ["contract", "artifact"]
    pl.DataFrame({"row_id": [0], "split": ["test"], "fold": [-1]}).write_parquet(
        ctx.data_dir / "split.parquet"
    )
    with pytest.raises(EvidenceError):
        splits.membership(up["split"], ctx)


def test_fit_on_train_state_ignores_dev_and_test_rows() -> None:
    from sklearn.feature_extraction.text import TfidfVectorizer

    frame = pl.DataFrame(
        {
            "text": [
                "refund my card",
                "card declined",
                "reset password",
                "login fails",
                "parcel lost",
                "zebra quartz",
            ],
            "split": ["train", "train", "train", "dev", "test", "test"],
        }
    )
    a = splits.fit_on_train(TfidfVectorizer(), frame, "text")
    changed = frame.with_columns(
        pl.when(pl.col("split") != "train")
        .then(pl.lit("entirely new vocabulary words"))
        .otherwise(pl.col("text"))
        .alias("text")
    )
    b = splits.fit_on_train(TfidfVectorizer(), changed, "text")
    assert a.digest == b.digest and a.train_rows == 3
    assert "zebra" not in a.estimator.vocabulary_ and "login" not in a.estimator.vocabulary_
    c = splits.fit_on_train(
        TfidfVectorizer(), frame.with_columns(pl.lit("other words").alias("text")), "text"
    )
    assert c.digest != a.digest
    splits.verify_state(a)
    a.estimator.fit(["refit on everything zebra"])
    with pytest.raises(EvidenceError):
        splits.verify_state(a)
