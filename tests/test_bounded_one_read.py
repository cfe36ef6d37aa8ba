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


def test_store_slices_on_threads_keep_frame_order(stored: tuple[pl.DataFrame, textstore.TextStore]) -> None:
    """by_slices on several threads: the slices' results in frame order, each row once, also for a
    store restricted to some rows; the same as one slice at a time."""
    import threading
    import time

    ds, store = stored
    sub = store.restrict(ds.get_column(ROW_ID).to_numpy()[::3])
    seen: set[int] = set()

    def fn(part: pl.DataFrame) -> pl.DataFrame:
        seen.add(threading.get_ident())
        if part.get_column(ROW_ID)[0] % 2 == 0:  # some slices finish after the next one
            time.sleep(0.01)
        return part

    for s in (store, sub):
        one = pl.concat(s.by_slices([ROW_ID, "body"], fn, 1024))
        many = s.by_slices([ROW_ID, "body"], fn, 1024, workers=3)
        assert len(many) > 3
        got = pl.concat(many)
        assert got.equals(one)
        assert got.get_column(ROW_ID).to_list() == s.ids.tolist()
    assert len(seen) > 1
