"""The baseline stage on the sample tickets: trivial = dev majority rate, TF-IDF beats it, collapse is flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimcheck.engine.stages.baseline import run as baseline

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "tickets.csv"

pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="sample_data/tickets.csv not generated")


def test_sample_data_learnability(tmp_path):
    import tomllib

    from bench.baseline import build

    ceiling = float(
        tomllib.loads((ROOT / "sample_data" / "defects.toml").read_text())["noise_ceiling_accuracy"]
    )
    upstream, ctx = build(tmp_path, SAMPLE, ceiling)
    rec = baseline.run(baseline.Inputs(bootstrap_resamples=300), upstream, ctx)
    triv = rec.check("baseline.trivial").measured["learners"]["most_frequent"]
    assert triv["accuracy"] == triv["majority_rate"]
    learn = rec.check("baseline.learnability")
    assert learn.status == "pass" and learn.measured["difference"]["lo"] > 0
    assert learn.measured["difference"]["unit"] == "family"
    # the always-majority model: accuracy at the majority rate, zero recall on every other class
    collapsed = rec.check("baseline.per_class").measured["collapsed"]["most_frequent"]
    assert len(collapsed) == len(triv["per_class"]) - 1
    assert rec.check("baseline.locked_test").status == "pass"
    conv = rec.check("baseline.conventional").measured["learners"]["tfidf_logreg"]
    assert conv["accuracy"] < learn.measured["noise_ceiling"]
