"""Evidence records: exact TOML round-trip, canonical digests, atomic writes."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimcheck.engine.evidence import (
    Check,
    Note,
    Provenance,
    StageRecord,
    atomic_write_text,
    digest_of,
    load_record,
    record_to_toml,
)

keys = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)
text = st.text(max_size=30).filter(lambda s: "\x00" not in s)
scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    text,
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=4)),
    max_leaves=12,
)
checks = st.builds(
    Check,
    id=st.from_regex(r"\A[a-z]{1,6}\.[a-z0-9_]{1,10}\Z"),
    status=st.sampled_from(["pass", "warn", "fail", "info", "not_run"]),
    summary=text,
    basis=st.sampled_from(["measured", "decided", "not_run"]),
    coverage=text,
    measured=st.dictionaries(keys, values, max_size=5),
    tolerance=st.dictionaries(keys, st.floats(min_value=0, max_value=1), max_size=2),
    why=text,
    playbook=text,
)
records = st.builds(
    StageRecord,
    stage=st.sampled_from(["claim", "source", "split"]),
    inputs=st.dictionaries(keys, values, max_size=6),
    checks=st.lists(checks, max_size=4),
    notes=st.lists(
        st.builds(
            Note, tag=st.sampled_from(["fact", "suspected_cause", "untested_remedy", "limitation"]), text=text
        ),
        max_size=3,
    ),
    provenance=st.builds(Provenance, revision=st.integers(1, 50), frozen=st.booleans()),
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(rec=records)
def test_toml_round_trip_is_exact(tmp_path: Path, rec: StageRecord) -> None:
    sealed = rec.sealed()
    path = tmp_path / "r.toml"
    atomic_write_text(path, record_to_toml(sealed))
    back = load_record(path)
    assert back == sealed
    assert back.compute_digest() == sealed.provenance.digest


def test_digest_is_canonical_and_sensitive() -> None:
    assert digest_of({"a": 1, "b": [1.5, "x"]}) == digest_of({"b": [1.5, "x"], "a": 1})
    assert digest_of({"a": 1}) != digest_of({"a": 2})
    assert digest_of({"a": 1.0}) != digest_of({"a": 1})
    assert digest_of({"a": 0.1 + 0.2}) != digest_of({"a": 0.3})


def test_none_is_refused_where_the_record_is_built() -> None:
    with pytest.raises(ValueError, match="TOML has no null"):
        Check(id="x.y", status="pass", summary="", measured={"a": None})


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "f.toml"
    atomic_write_text(path, "old = 1\n")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(path, "new = 2\n")
    assert path.read_text() == "old = 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.toml"]
