"""Time the baseline stage on the sample tickets and on a generated 200,000-row set.

    .venv/bin/python bench/baseline.py            # sample data (sample_data/tickets.csv)
    .venv/bin/python bench/baseline.py --rows 200000

Upstream records are built here the way the source and split stages build them (families by
union-find over the entity columns, a family-grouped split), so the stage runs unchanged. The
generated set resamples the sample tickets with word dropout and fresh ids (replicates never share
a family), which keeps a realistic vocabulary and class mix.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from claimcheck.engine.audit.families import compute_families  # noqa: E402
from claimcheck.engine.data import splits  # noqa: E402
from claimcheck.engine.data.rows import load_dataset  # noqa: E402
from claimcheck.engine.evidence import Check, StageRecord  # noqa: E402
from claimcheck.engine.pipeline.context import StageContext  # noqa: E402
from claimcheck.engine.stages.baseline import run as baseline  # noqa: E402

SAMPLE = ROOT / "sample_data" / "tickets.csv"
ENTITIES = ["customer_id", "thread_id", "case_id"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def generated(rows: int, out: Path, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    base = pl.read_csv(SAMPLE, infer_schema_length=None)
    idx = rng.integers(0, base.height, rows)
    rep = np.arange(rows) // base.height
    frame = base[idx].with_columns(pl.Series("rep", rep))
    bodies = []
    for text in frame["body"].fill_null("").to_list():
        words = text.split()
        keep = rng.random(len(words)) > 0.1
        bodies.append(" ".join(w for w, k in zip(words, keep, strict=True) if k))
    frame = frame.with_columns(
        pl.Series("body", bodies),
        pl.Series("ticket_id", np.arange(rows) + 1_000_000),
        *[(pl.col(c) + "-" + pl.col("rep").cast(pl.String)).alias(c) for c in ENTITIES],
    ).drop("rep")
    path = out / "generated.csv"
    frame.write_csv(path)
    return path


def build(workspace: Path, csv: Path, ceiling: float) -> tuple[dict[str, StageRecord], StageContext]:
    session = workspace / "session"
    (session / "data").mkdir(parents=True, exist_ok=True)
    ctx = StageContext(session_dir=session, workspace=workspace, stage="baseline")
    labels = list(tomllib.loads((ROOT / "sample_data" / "defects.toml").read_text())["label_counts"])
    src_inputs = {
        "files": [str(csv)],
        "label_column": "queue",
        "id_column": "ticket_id",
        "time_column": "created_at",
        "input_columns": ["subject", "body", "channel", "product"],
        "text_columns": ["subject", "body"],
        "entity_columns": ENTITIES,
        "unavailable_columns": ["resolution_code", "ref_code"],
    }
    frame = load_dataset(src_inputs, ctx).collect()
    fam = compute_families(frame, ENTITIES)
    fam.write_parquet(session / "data" / "families.parquet")
    part = splits.assign_groups(
        fam["family_id"].to_numpy(), {"train": 0.7, "dev": 0.15, "calibration": 0.05, "test": 0.1}, 0
    )
    pl.DataFrame(
        {"row_id": fam["row_id"], "split": np.asarray(splits.SPLITS)[part], "fold": np.full(fam.height, -1)}
    ).write_parquet(session / "data" / "split.parquet")
    claim = StageRecord(
        stage="claim",
        inputs={
            "task_kind": "text_classification",
            "primary_metric": "macro_f1",
            "metric_averaging": "macro",
            "class_order": labels,
        },
    )
    source = StageRecord(
        stage="source",
        inputs=src_inputs,
        checks=[
            Check(
                id="source.entity_families",
                status="info",
                summary="bench",
                measured={
                    # the counts are not used by the baseline stage; the shape wants them
                    **dict.fromkeys(("rows", "families", "singleton_families", "largest_family_rows"), 0),
                    **dict.fromkeys(
                        ("rows_in_multi_row_families", "rows_without_entity_id", "multi_row_families"), 0
                    ),
                    "entity_columns": [],
                    "families_path": "data/families.parquet",
                    "families_sha256": _sha(session / "data" / "families.parquet"),
                },
            ),
            Check(
                id="source.conflicting_labels",
                status="info",
                summary="bench (from defects.toml)",
                measured={
                    "columns": [],
                    "groups": 0,
                    "rows": 0,
                    "noise_ceiling_accuracy": ceiling,
                    "rows_above_ceiling": 0,
                },
            ),
        ],
    )
    split = StageRecord(
        stage="split",
        inputs={"strategy": "group"},
        checks=[
            Check(
                id="split.membership",
                status="info",
                summary="bench",
                measured={
                    "path": "data/split.parquet",
                    "sha256": _sha(session / "data" / "split.parquet"),
                    "rows": 0,
                    "sizes": {},
                    "excluded": {},
                },
            )
        ],
    )
    return {"claim": claim, "source": source, "split": split}, ctx


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=0, help="generate this many rows instead of the sample file")
    ap.add_argument("--resamples", type=int, default=1000)
    args = ap.parse_args()
    ceiling = float(
        tomllib.loads((ROOT / "sample_data" / "defects.toml").read_text())["noise_ceiling_accuracy"]
    )
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        csv = generated(args.rows, ws) if args.rows else SAMPLE
        upstream, ctx = build(ws, csv, ceiling)
        t0 = time.perf_counter()
        rec = baseline.run(baseline.Inputs(bootstrap_resamples=args.resamples), upstream, ctx)
        wall = time.perf_counter() - t0
    for c in rec.checks:
        print(f"{c.id:26s} {c.status:7s} {c.summary}")
    print(f"stage wall time: {wall:.1f} s on {csv.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
