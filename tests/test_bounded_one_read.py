"""The bounded path's duplicate keys read the text store once: the exact and the normalised key hashes
made in one pass over the spill file are the ones each pass alone makes (engine/audit/duplicates.py)."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_series_equal

from claimcheck.engine.audit import textstore
from claimcheck.engine.audit.duplicates import stored_key_hashes, stored_key_hashes_each
from claimcheck.engine.data.rows import ROW_ID, TARGET


@pytest.fixture
def stored(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> tuple[pl.DataFrame, textstore.TextStore]:
    # A few hundred bytes a slice: many slices, each decoded once for both hashes.
    monkeypatch.setattr("claimcheck.engine.audit.neardup.hashing.STORE_SLICE_BYTES", 512)
    monkeypatch.setattr(textstore, "ROW_GROUP", 16)
    n = 400
    frame = pl.DataFrame(
        {
            ROW_ID: range(n),
            "body": [
                None if i % 37 == 0 else f"  Body {i % 50}\t text " + ("X" if (i // 10) % 2 else "x")
                for i in range(n)
            ],
            "kind": [["a", None][i % 2] for i in range(n)],
            "n": [i % 2 for i in range(n)],
            TARGET: [str(i % 2) for i in range(n)],
        }
    )
    ds, store = textstore.spill(frame.lazy(), ["body"])
    yield ds, store
    store.close()


def test_one_read_gives_each_pass_hashes(stored: tuple[pl.DataFrame, textstore.TextStore]) -> None:
    ds, store = stored
    cols = ["body", "kind", "n"]
    reads = []
    real = store.by_slices

    def counted(*args: object, **kwargs: object) -> object:
        reads.append(args[0])
        return real(*args, **kwargs)

    object.__setattr__(store, "by_slices", counted)
    exact, norm = stored_key_hashes_each(ds, cols, ["none", "lower_strip_ws"], store)
    assert len(reads) == 1
    assert_series_equal(exact, stored_key_hashes(ds, cols, "none", store))
    assert_series_equal(norm, stored_key_hashes(ds, cols, "lower_strip_ws", store))
    assert len(reads) == 3 and exact.len() == ds.height
    # Normalising merges rows the exact comparison keeps apart ("X" / "x", spaces, tabs).
    assert norm.n_unique() < exact.n_unique()
    (only,) = stored_key_hashes_each(ds, cols, ["none"], store)
    assert_series_equal(only, exact)
