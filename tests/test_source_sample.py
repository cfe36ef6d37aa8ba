"""Every planted defect in sample_data is found with the exact count the generator recorded."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.pipeline.context import StageContext

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data"

pytestmark = pytest.mark.skipif(
    not (SAMPLE / "tickets.csv").exists() or not (SAMPLE / "defects.toml").exists(),
    reason="sample_data not generated",
)

INPUTS = {
    "files": ["sample_data/tickets.csv"],
    "label_column": "queue",
    "input_columns": ["subject", "body"],
    "text_columns": ["subject", "body"],
    "id_column": "ticket_id",
    "entity_columns": ["customer_id", "thread_id", "case_id"],
    "time_column": "created_at",
    "unavailable_columns": ["resolution_code"],
    "availability": {"subject": "yes", "body": "yes"},
    "as_of": "2026-01-01",
}


@pytest.fixture(scope="module")
def defects() -> dict:
    return tomllib.loads((SAMPLE / "defects.toml").read_text())


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> tuple[StageRecord, StageContext]:
    from claimcheck.engine.stages.source import run as source

    sdir = tmp_path_factory.mktemp("session")
    ctx = StageContext(session_dir=sdir, workspace=ROOT, stage="source")
    return source.run(source.Inputs(**INPUTS), {}, ctx), ctx


def m(rec: StageRecord, check: str) -> dict:
    c = rec.check(check)
    assert c is not None, check
    return c.measured


def test_checksum_rows_and_nulls(session, defects) -> None:
    rec, _ = session
    assert m(rec, "source.checksum")["files"][0]["sha256"] == defects["sha256"]
    assert m(rec, "source.schema")["rows"] == defects["rows"]
    assert list(m(rec, "source.schema")["columns"]) == defects["columns"]
    assert m(rec, "source.schema")["malformed_records"] == 0
    shares = m(rec, "source.missingness")["null_share"]
    for col, nulls in defects["nulls"].items():
        assert shares[col] == round(nulls / defects["rows"], 6), col


def test_duplicates_conflicts_and_noise_ceiling(session, defects) -> None:
    rec, _ = session
    d = m(rec, "source.duplicate_inputs")
    assert (d["exact"]["groups"], d["exact"]["rows"]) == (
        defects["exact_dup_groups"],
        defects["exact_dup_rows"],
    )
    assert (d["normalised"]["groups"], d["normalised"]["rows"]) == (
        defects["norm_dup_groups"],
        defects["norm_dup_rows"],
    )
    c = m(rec, "source.conflicting_labels")
    assert (c["groups"], c["rows"]) == (defects["conflict_groups"], defects["conflict_rows"])
    assert c["noise_ceiling_accuracy"] == defects["noise_ceiling_accuracy"]
    assert rec.check("source.conflicting_labels").status == "warn"


def test_near_duplicates_exact_count(session, defects) -> None:
    rec, _ = session
    assert m(rec, "source.near_duplicates")["pairs"] == defects["near_dup_pairs_at_0_8"]


def test_entity_families(session, defects) -> None:
    rec, ctx = session
    f = m(rec, "source.entity_families")
    assert f["families"] == defects["family_count"]
    assert f["largest_family_rows"] == defects["largest_family_rows"]
    assert f["multi_row_families"] == defects["multi_row_families"]
    assert f["rows_without_entity_id"] == defects["rows_without_entity_id"]
    from claimcheck.engine.data.rows import families

    assert families(rec, ctx).height == defects["rows"]


def test_time_and_classes(session, defects) -> None:
    rec, _ = session
    t = m(rec, "source.time_range")
    assert t["min"] == defects["created_at_min"] and t["max"] == defects["created_at_max"]
    assert t["unparseable"] == 0
    assert m(rec, "source.class_coverage")["per_target"] == defects["label_counts"]
    assert "security" in m(rec, "source.class_coverage")["rare_classes"]


def test_outcome_and_identifier_leaks_are_flagged(session, defects) -> None:
    rec, _ = session
    leak = m(rec, "source.single_feature_leakage")
    assert "resolution_code" in leak["suspected"]
    score = next(s for s in leak["scores"] if s["column"] == "resolution_code")
    # The out-of-fold lookup cannot beat the generator's in-sample majority agreement.
    assert (
        defects["resolution_code_label_agreement"] - 0.01
        <= score["accuracy"]
        <= defects["resolution_code_label_agreement"]
    )
    ident = m(rec, "source.identifier_shortcut")
    assert "ref_code" in ident["flagged"] and "ticket_id" in ident["candidates"]
    ref = next(s for s in ident["scores"] if s["column"] == "ref_code")
    assert ref["accuracy"] >= defects["ref_code_range_purity"] - 0.02
    # Neither is a model input here, so neither fails the stage.
    assert rec.check("source.single_feature_leakage").status == "info"


def _split(session, strategy: str):
    from claimcheck.engine.stages.split import run as split

    rec, ctx = session
    sctx = StageContext(session_dir=ctx.session_dir, workspace=ctx.workspace, stage="split")
    return split.run(
        split.Inputs(strategy=strategy, rationale="new customers next quarter", seed=1), {"source": rec}, sctx
    )


def test_random_split_leaks_families_and_duplicates(session) -> None:
    r = _split(session, "random")
    assert r.check("split.family_intersection").measured["families_crossing"] > 100
    assert r.check("split.family_intersection").status == "warn"
    assert r.check("split.exact_overlap").measured["rows"]["test"] > 0
    assert r.check("split.near_duplicate_overlap").measured["held_out_rows_with_train_near_copy"]["test"] > 0


def test_group_split_has_no_family_intersection(session) -> None:
    r = _split(session, "group")
    fam = r.check("split.family_intersection")
    assert fam.status == "pass" and fam.measured["families_crossing"] == 0
    assert all(v == 0 for v in fam.measured["pairs"].values())
    assert r.check("split.membership").measured["rows"] == m(session[0], "source.schema")["rows"]
