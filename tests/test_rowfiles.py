"""A job's row files (engine/training/rowfiles.py): JSON lines the job reads without Polars, and the
Parquet files of job folders recorded before, still read by the parent."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from claimcheck.engine.training.rowfiles import RowFileError, RowTable, find_rows, read_rows, write_rows
from tests import test_job_kit as kit


def test_a_frame_round_trips_through_a_row_file(tmp_path: Path) -> None:
    df = pl.DataFrame({"row_id": [3, 1], "text": ["é\nline", "plain"], "proba": [[0.1, 0.9], [1 / 3, 2 / 3]]})
    write_rows(tmp_path / "a.jsonl", df)
    t = read_rows(tmp_path / "a.jsonl")
    assert t.columns == df.columns and t.height == 2
    assert t["proba"].to_list() == df["proba"].to_list()  # floats come back bit for bit
    assert list(t.iter_rows(named=True)) == list(df.iter_rows(named=True))
    assert list(t.select("text", "row_id").iter_rows()) == [("é\nline", 3), ("plain", 1)]
    # the same rows as a RowTable write the same bytes (the contract copy pins them by sha256)
    write_rows(tmp_path / "b.jsonl", RowTable.from_columns(df.to_dict(as_series=False)))
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    with pytest.raises(KeyError, match="no column 'target'"):
        t["target"]


def test_a_malformed_row_file_names_the_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "dev.jsonl"
    p.write_text('["row_id", "text"]\n[1, "a"]\n[2]\n')
    with pytest.raises(RowFileError, match=r"dev.jsonl: line 3 does not match"):
        read_rows(p)
    p.write_text("")
    with pytest.raises(RowFileError, match="empty"):
        read_rows(p)


def test_a_folder_recorded_before_row_files_is_read_from_its_parquet(tmp_path: Path) -> None:
    old = pl.DataFrame(
        {"row_id": [7], "pred": [[4, 5]], "proba": [[0.25, 0.5]]},
        schema={"row_id": pl.Int64, "pred": pl.List(pl.Int64), "proba": pl.List(pl.Float64)},
    )
    old.write_parquet(tmp_path / "dev_predictions.parquet")
    path = find_rows(tmp_path, "dev_predictions")
    assert path.name == "dev_predictions.parquet"
    assert list(read_rows(path).iter_rows()) == [(7, [4, 5], [0.25, 0.5])]
    write_rows(tmp_path / "dev_predictions.jsonl", old)
    assert find_rows(tmp_path, "dev_predictions").name == "dev_predictions.jsonl"


def test_the_job_runs_to_its_artifact_without_polars(tmp_path: Path) -> None:
    """The GPU machine has no Polars: the job's process must never import it (an importable stub
    that raises stands in for its absence)."""
    from claimcheck.engine.training import jobfiles

    block = tmp_path / "block" / "polars"
    block.mkdir(parents=True)
    (block / "__init__.py").write_text("raise ImportError('polars is not installed here')\n")
    jd = kit.job_dir(tmp_path, kit.make_model(tmp_path), max_steps=2, eval_every_steps=0)
    assert (jd / jobfiles.TRAIN_FILE).is_file() and (jd / jobfiles.DEV_FILE).is_file()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(block.parent), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "-m", "claimcheck.engine.training.job", str(jd)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    preds = read_rows(jd / jobfiles.FINAL / jobfiles.DEV_PREDICTIONS)
    assert preds.columns == ["row_id", "target", "pred", "proba"] and preds.height == 24
