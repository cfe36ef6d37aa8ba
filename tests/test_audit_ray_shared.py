"""Ray tasks that read their texts from the spill file themselves (`audit_ray_texts = "shared"`,
engine/audit/onray/shared.py) give the figures of tasks sent their texts by the driver: the same pairs
file byte for byte and the same measured values, on the loopback Ray head (two worker processes), with
the coverage line saying how the tasks got their texts; a spill file the workers cannot read is
refused with its path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from claimcheck.engine.audit import onray, textstore
from claimcheck.engine.audit.onray import shared
from tests.test_audit_memory import _planted
from tests.test_audit_ray import RAY_IDS, _figures, _source

pytestmark = pytest.mark.ray


def _spilled(frame: pl.DataFrame) -> tuple[pl.DataFrame, textstore.TextStore]:
    lf = frame.lazy().with_row_index("row_id").with_columns(pl.col("row_id").cast(pl.Int64))
    return textstore.spill(lf, ["body"])


def test_a_tasks_reads_are_the_rows_the_driver_would_send(tmp_path: Path) -> None:
    """Without Ray: the slices and the rows a task reads from the file are the driver's, row for row,
    for a frame holding a subset of the file's rows (several row groups)."""
    frame, store = _spilled(_planted(30_000))
    try:
        keep = np.flatnonzero(np.arange(frame.height) % 3 != 1)
        sub = frame[keep]
        part = textstore.restricted(store, sub)
        assert part is not None
        cols = ["body", "kind"]
        sent = pl.concat(part.by_slices(cols, lambda p: p, 1 << 20))
        read = pl.concat([shared.frame_of(s, cols) for s in shared.slices(part, 1 << 20)])
        assert len(shared.slices(part, 1 << 20)) > 1
        assert read.equals(sent)
        at = np.sort(np.random.default_rng(3).choice(sub.height, 500, replace=False))
        assert shared.frame_of(shared.rows_of(part, at), ["body"]).equals(part.rows(at, ["body"]))
    finally:
        store.close()


def test_shared_reads_give_the_sent_figures_on_ray(tmp_path: Path, ray_head: Any) -> None:
    """The bounded path (a 1 MiB budget) on Ray, the tasks sent their texts and reading them: every
    figure and the pairs file identical, something found, and the coverage names the way."""
    _planted(4000).write_csv(tmp_path / "d.csv")
    inputs = dict(
        files=["d.csv"],
        label_column="label",
        label_mapping={"x": "x", "y": "y", "z": "z"},
        input_columns=["body", "kind"],
        text_columns=["body"],
        near_dup_threshold=0.7,
        shingle_size=2,
        normalisation="lower_strip_ws",
        memory_budget="1M",
        audit_backend="ray",
        audit_ray_address=ray_head.client_address,
    )
    sent, sent_dir = _source(tmp_path, "sent", inputs)
    read, read_dir = _source(tmp_path, "shared", inputs | {"audit_ray_texts": "shared"})
    assert _figures(read) == _figures(sent)
    pairs = "data/near_duplicates.parquet"
    assert (read_dir / pairs).read_bytes() == (sent_dir / pairs).read_bytes()
    assert read.check("source.near_duplicates").measured["pairs"] > 0
    assert read.check("source.duplicate_inputs").measured["exact"]["groups"] > 0
    for cid in RAY_IDS:
        assert sent.check(cid).coverage.endswith(onray.TEXTS_ON_DISK)
        assert read.check(cid).coverage.endswith(onray.TEXTS_ON_SHARED_PATH), read.check(cid).coverage


def test_a_spill_file_the_workers_cannot_read_is_refused_with_its_path(
    tmp_path: Path,
    ray_head: Any,
) -> None:
    """shared.check on the cluster, and the reads in a task, name the file and the way out."""
    gone = textstore.TextStore(tmp_path / "gone.parquet", np.arange(3, dtype=np.int64), pl.Schema())
    with onray.connect(ray_head.client_address, onray.SHARED) as (ray, cluster):
        assert shared.wanted(cluster, gone)
        with pytest.raises(onray.RayAuditError, match="cannot read the spill file .*gone.parquet"):
            shared.check(ray, gone)
    with pytest.raises(onray.RayAuditError, match="audit_ray_texts = 'sent'"):
        shared.frame_of(gone, ["body"])
    with pytest.raises(onray.RayAuditError, match="'audit_ray_texts' = 'both'"):
        with onray.connect(ray_head.client_address, "both"):
            pass


def test_one_worker_runs_the_candidates_and_keys_in_one_task_with_the_same_figures(
    tmp_path: Path,
    ray_head: Any,
) -> None:
    """A cluster of one worker CPU: the candidates (the local passes in one task) and the duplicate keys
    (the local check in one task, the texts in the frame or read from the spill file) give the
    shuffles' and the local run's figures, pairs byte for byte."""
    import dataclasses

    from claimcheck.engine.audit import duplicates as local_dup
    from claimcheck.engine.audit.neardup import near_duplicates, pairs_payload
    from claimcheck.engine.audit.onray import duplicates as ray_dup
    from claimcheck.engine.audit.onray import neardup as ray_near
    from claimcheck.engine.data.rows import TARGET

    planted = _planted(6000).rename({"label": TARGET})
    frame, store = _spilled(planted)
    held = planted.with_row_index("row_id").with_columns(pl.col("row_id").cast(pl.Int64))
    cols = ["body", "kind"]
    try:
        here = near_duplicates(held, ["body"], threshold=0.7, shingle_size=2)
        cand = local_dup.candidate_rows(held, cols, "none")
        want = (
            local_dup.duplicate_stats(held, cols, "none", cand),
            local_dup.duplicate_stats(held, cols, "lower_strip_ws"),
            local_dup.conflict_stats(held, cols, cand),
        )
        assert here.pairs.height > 0 and want[0]["groups"] > 0 and want[2]["groups"] > 0
        with onray.connect(ray_head.client_address, onray.SHARED) as (ray, two):
            one = dataclasses.replace(two, workers=1)
            for cluster in (two, one):
                for df, st in ((held, None), (frame, store)):
                    got = ray_near.near_duplicates(
                        ray, cluster, df, ["body"], threshold=0.7, shingle_size=2, store=st
                    )
                    assert pairs_payload(got.pairs) == pairs_payload(here.pairs)
                    assert (got.candidates, got.texts, got.shingles) == (
                        here.candidates,
                        here.texts,
                        here.shingles,
                    )
                    assert ray_dup.identity_stats(ray, cluster, df, cols, "lower_strip_ws", st) == want
    finally:
        store.close()


def test_shared_texts_without_the_ray_backend_are_refused_up_front() -> None:
    """Only Ray tasks read the spill file themselves: `shared` with the local backend would be accepted and
    not honoured, so the source's inputs refuse it, naming the field and the way out."""
    from pydantic import ValidationError

    from claimcheck.engine.stages.source.inputs import Inputs

    with pytest.raises(ValidationError, match="audit_ray_texts(.|\n)*set audit_backend = ray"):
        Inputs(files=["x.csv"], label_column="y", audit_ray_texts="shared")
    assert Inputs(files=["x.csv"], label_column="y", audit_backend="ray", audit_ray_texts="shared")
