"""Typed evidence shapes (engine/shapes): enforced when a check is built, read back by `parse`,
documented in docs/evidence-format.md, and fitting the records a real session wrote."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from claimcheck.engine.evidence import SCHEMA_VERSION, Check, EvidenceError, load_record
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.shapes import ShapeError, parse, registered, shape_for
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import training as training_shapes

DOC = Path(__file__).resolve().parents[1] / "docs" / "evidence-format.md"


def test_a_check_whose_values_do_not_fit_its_shape_cannot_be_built() -> None:
    with pytest.raises(ValueError, match=r"artifact.arms: measured.arms.candidate.scored"):
        Check(
            id="artifact.arms",
            status="pass",
            summary="x",
            measured={"arms": {"candidate": {"requested": 3, "failed": 0, "missing": 0}}},
        )
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        Check(id="contract.digest", status="pass", summary="x", measured={"digest": "d", "model_name": "m"})


def test_parse_gives_the_model_or_a_clear_error() -> None:
    chk = Check(
        id="contract.digest", status="pass", summary="x", measured=training_shapes.Digest(digest="sha256:ab")
    )
    assert parse(chk, training_shapes.Digest).digest == "sha256:ab"
    with pytest.raises(ShapeError, match="is read as Comparison but its shape is Digest"):
        parse(chk, artifact_shapes.Comparison)
    empty = Check(id="artifact.comparison", status="not_run", summary="no rows", basis="not_run")
    assert (
        parse(empty, artifact_shapes.Comparison) is None and parse(None, artifact_shapes.Comparison) is None
    )
    assert shape_for("dispatch.alarms.stall") is training_shapes.Alarm


def test_every_shape_is_documented_with_its_fields() -> None:
    doc = DOC.read_text()
    for check_id, cls in registered().items():
        assert f"### `{check_id}` — `{cls.__name__}`" in doc, check_id
        for name, field in cls.model_fields.items():
            assert f"| `{field.alias or name}` |" in doc, f"{check_id}.{name}"


@pytest.mark.slow
def test_the_real_session_fits_every_shape(real_session: Path) -> None:
    """Every shaped check a real session wrote parses, and most shapes are exercised by it."""
    records = Session.open(real_session).records()
    seen = set()
    for rec in records.values():
        assert rec.provenance.schema_version == SCHEMA_VERSION
        for chk in rec.checks:
            cls = shape_for(chk.id)
            if cls is not None and chk.measured:
                assert isinstance(parse(chk, cls), cls)
                seen.add(cls)
    # baseline.operating_point and artifact.operating_point run only when an operating point is
    # declared (not in the example; tests/test_operating_point.py reads the artifact's);
    # the numeric-target shapes only for a regression claim (tests/test_regression.py reads them);
    # artifact.generation only for causal-LM SFT (tests/test_sft_end_to_end.py); source.preprocessing
    # only with declared scripts (tests/test_provenance.py reads it); the retrieval shapes only for a
    # retrieval claim; the search shapes only for a contract with a declared search (tests/test_tuning.py)
    missing = {c.__name__ for c in registered().values()} - {c.__name__ for c in seen}
    assert missing == {
        "OperatingPoint",
        "OperatingPointShape",
        "TargetDistribution",
        "SplitTargetDistribution",
        "TargetRange",
        "Errors",
        "Generation",
        # a weight column / an ordinal claim only (tests/test_weights_end_to_end.py,
        # tests/test_ordinal_end_to_end.py read them)
        "SampleWeights",
        "SplitWeightMass",
        "BaselineSampleWeights",
        "Ordinal",
        "Preprocessing",
        # a retrieval claim's (tests/test_retrieval_end_to_end.py reads them)
        "SourceRetrieval",
        "QueryIntegrity",
        "BaselineRetrieval",
        "Ranking",
        # a declared search's (tests/test_tuning.py reads them)
        "SearchDeclaration",
        "SearchTrials",
        "SearchSelection",
        "SearchConcurrency",
    }


@pytest.mark.slow
def test_a_version_1_record_is_read_by_the_same_shapes(real_session: Path, tmp_path: Path) -> None:
    text = (real_session / "07-artifact.toml").read_text()
    old = tmp_path / "07-artifact.toml"
    old.write_text(re.sub(r"(\[provenance\]\nschema_version = )2", r"\g<1>1", text))
    rec = load_record(old)
    assert rec.provenance.schema_version == 1
    assert parse(rec.check("artifact.arms"), artifact_shapes.Arms).arms["candidate"].scored > 0
    # a version-1 record whose values do not fit is an error naming the file, check and field
    bad = tmp_path / "bad.toml"
    bad.write_text(old.read_text().replace("shared_rows = ", "shared_row = ", 1))
    with pytest.raises(EvidenceError) as info:
        load_record(bad)
    assert "bad.toml" in str(info.value) and "artifact.comparison" in str(info.value)
    assert tomllib.loads(bad.read_text())  # still valid TOML: the shape, not the syntax, is wrong
