"""Artifact identity and reload parity on a job trained in-process on a tiny encoder."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest

from tests import test_job_kit as kit


@pytest.fixture(scope="module")
def finished_job(tmp_path_factory) -> Path:
    import torch

    from claimcheck.engine.training.job import Job

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("artifact")
    model_dir = kit.make_model(root)
    jd = kit.job_dir(root, model_dir)
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        assert Job(jd).run() == 0
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
    return jd


def test_identity_passes_then_catches_a_truncated_adapter(finished_job: Path, tmp_path: Path) -> None:
    from claimcheck.engine.training.artifact_files import verify_artifact
    from claimcheck.engine.training.evaluate import TRAINABLE

    ok = verify_artifact(finished_job / "final")
    assert ok["ok"] and ok["tensor_count"] == ok["tensor_count_recorded"] > 0
    copy = tmp_path / "final"
    shutil.copytree(finished_job / "final", copy)
    data = (copy / TRAINABLE).read_bytes()
    (copy / TRAINABLE).write_bytes(data[: len(data) // 2])
    bad = verify_artifact(copy)
    assert not bad["ok"]
    assert any("sha256" in p for p in bad["problems"]) and any("cannot be read" in p for p in bad["problems"])


def test_zero_lora_b_is_caught(finished_job: Path, tmp_path: Path) -> None:
    import json

    from safetensors.torch import load_file, save_file

    from claimcheck.engine.training.artifact_files import MANIFEST, file_hashes, verify_artifact
    from claimcheck.engine.training.evaluate import TRAINABLE

    copy = tmp_path / "final"
    shutil.copytree(finished_job / "final", copy)
    state = load_file(str(copy / TRAINABLE))
    state = {k: (v * 0 if "lora_B" in k else v) for k, v in state.items()}
    save_file(state, str(copy / TRAINABLE))
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["files"] = file_hashes(copy)  # even a consistent manifest cannot hide an untrained adapter
    (copy / MANIFEST).write_text(json.dumps(manifest))
    bad = verify_artifact(copy)
    assert not bad["ok"] and any("LoRA B" in p for p in bad["problems"])


def test_reload_parity_matches_the_recorded_predictions(finished_job: Path) -> None:
    from claimcheck.engine.training.artifact_files import reload_parity

    # In-process here for speed; the artifact stage runs the same function in a fresh process
    # (tests/test_dispatch.py::test_artifact_stage_compares_on_the_locked_test).
    r = reload_parity(finished_job / "final", finished_job, finished_job.parent, 1e-5)
    assert r["ok"], r
    assert r["compared"] == 24 and r["prediction_mismatches"] == 0 and r["max_abs_proba_diff"] <= 1e-5
    assert r["missing_keys"] == [] and r["unexpected_keys"] == []


def test_reload_parity_catches_a_serving_mismatch(finished_job: Path) -> None:
    from claimcheck.engine.training.artifact_files import reload_parity

    # Serving with a shorter max_length than training: truncation changes the inputs.
    r = reload_parity(
        finished_job / "final", finished_job, finished_job.parent, 1e-5, overrides={"max_length": 3}
    )
    assert not r["ok"] and r["max_abs_proba_diff"] > 1e-5


def test_reload_parity_reads_a_job_folder_recorded_before_row_files(
    finished_job: Path, tmp_path: Path
) -> None:
    """A session recorded when job folders held Parquet (data/*.parquet, final/dev_predictions.parquet)
    replays: reload parity reads those files and reproduces the recorded predictions."""
    import polars as pl
    import tomlkit

    from claimcheck.engine.training import jobfiles
    from claimcheck.engine.training.artifact_files import reload_parity
    from claimcheck.engine.training.rowfiles import read_rows

    old = tmp_path / finished_job.name
    shutil.copytree(finished_job, old)
    doc = tomlkit.parse((old / jobfiles.CONTRACT).read_text())
    for name, legacy in zip(("train", "dev"), jobfiles.LEGACY_DATA_FILES, strict=True):
        rows = read_rows(old / doc["data"][name])
        pl.DataFrame(rows.rows, orient="row", schema=rows.columns).write_parquet(old / legacy)
        (old / doc["data"][name]).unlink()
        doc["data"][name] = legacy
    (old / jobfiles.CONTRACT).write_text(tomlkit.dumps(doc))
    preds = read_rows(old / jobfiles.FINAL / jobfiles.DEV_PREDICTIONS)
    pl.DataFrame(
        {c: preds[c].to_list() for c in preds.columns}, schema_overrides={"proba": pl.List(pl.Float64)}
    ).write_parquet(old / jobfiles.FINAL / "dev_predictions.parquet")
    (old / jobfiles.FINAL / jobfiles.DEV_PREDICTIONS).unlink()
    r = reload_parity(old / "final", old, finished_job.parent, 1e-5)
    assert r["ok"], r
    assert r["compared"] == 24 and r["prediction_mismatches"] == 0
