"""Regression (a numeric target) as a first-class task kind: the claim declares it, the source and
split audits describe the target's distribution instead of classes, the baseline's trivial and
conventional summaries hold their own learners and the primary metric, and the interval on the
difference is sane or refused with its reason. Run on a small firm × year panel written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine.context import StageContext
from engine.core import compute
from engine.evidence import StageRecord
from tests.claim_answers import CLAIM

REG_CLAIM = CLAIM | {
    "task_kind": "tabular",
    "target_type": "numeric",
    "prediction_unit": "one firm in one year",
    "target_meaning": "the firm's reported margin that year",
    "inference_inputs": ["x1", "x2", "size"],
    "population": "listed firms",
    "primary_metric": "r2",
    "metric_averaging": "",
    "class_order": [],
    "success": {"metric": "r2", "op": ">=", "value": 0.0, "relative_to": "trivial_baseline"},
    "comparators": ["trivial_baseline", "best_baseline"],
    "fine_tuning": False,
    "run_scope": "scikit-learn baselines only",
}


def panel(firms: int, years: int = 8, seed: int = 0) -> pl.DataFrame:
    """A firm × year panel: margin = 2·x1 − x2 + a firm effect + noise (rounded, so values repeat)."""
    rng = np.random.default_rng(seed)
    firm = np.repeat(np.arange(firms), years)
    year = np.tile(np.arange(2015, 2015 + years), firms)
    effect = rng.normal(0, 1.0, firms)[firm]
    x1, x2 = rng.normal(size=firm.size), rng.normal(size=firm.size)
    size = np.round(rng.lognormal(3, 1, firms)[firm], 1)
    y = 2 * x1 - x2 + effect + rng.normal(0, 0.5, firm.size)
    return pl.DataFrame(
        {
            "obs_id": np.arange(firm.size),
            "firm_id": [f"F{f:03d}" for f in firm],
            "year": year,
            "x1": np.round(x1, 4),
            "x2": np.round(x2, 4),
            "size": size,
            "margin": np.round(y, 3),
        }
    )


SOURCE = {
    "files": ["panel.csv"],
    "label_column": "margin",
    "input_columns": ["x1", "x2", "size"],
    "id_column": "obs_id",
    "entity_columns": ["firm_id"],
    "license": "synthetic, written by the test",
    "provenance": "tests/test_regression.py",
}


def run_stages(tmp: Path, frame: pl.DataFrame, upto: str = "baseline") -> dict[str, StageRecord]:
    frame.write_csv(tmp / "panel.csv")
    ctx = StageContext(session_dir=tmp / "session", workspace=tmp)
    (tmp / "session" / "data").mkdir(parents=True, exist_ok=True)
    answers = {
        "claim": REG_CLAIM | {"review_scope": []},
        "source": SOURCE,
        "split": {"strategy": "group", "rationale": "new firms"},
        "baseline": {"bootstrap_resamples": 300, "hgb_max_iter": 30},
    }
    up: dict[str, StageRecord] = {}
    for stage, inputs in answers.items():
        up[stage] = compute(stage, inputs, up, ctx)
        if stage == upto:
            break
    return up


@pytest.fixture(scope="module")
def forty_firms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, StageRecord]:
    return run_stages(tmp_path_factory.mktemp("forty"), panel(40))


def test_print(forty_firms):
    for name, rec in forty_firms.items():
        for c in rec.checks:
            print(name, c.id, c.status, c.summary[:300])
