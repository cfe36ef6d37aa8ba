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


def test_store_keeps_one_scan_per_file_and_reads_a_rewritten_file_anew(
    stored: tuple[pl.DataFrame, textstore.TextStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read of the spill goes through one kept scan (its footer parsed once), also for a store
    restricted to some rows; a file written anew at the same path (another size and time) gets a scan
    of its own, and its rows are the ones read."""
    import os

    ds, store = stored
    made = []
    real = pl.scan_parquet

    def counted(*args: object, **kwargs: object) -> pl.LazyFrame:
        made.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(textstore.pl, "scan_parquet", counted)
    textstore._file_scan.cache_clear()
    sub = store.restrict(ds.get_column(ROW_ID).to_numpy()[::3])
    before = pl.concat(store.by_slices([ROW_ID, "body"], lambda part: part, 1024))
    assert before.height == ds.height and store.rows([5, 1], ["body"]).height == 2
    assert sub.rows([0, 1], [ROW_ID]).get_column(ROW_ID).to_list() == [0, 3]
    assert made == [store.path]
    st = store.path.stat()
    pl.DataFrame({ROW_ID: [0, 1, 2], "body": ["new a", "new b", None]}).write_parquet(store.path)
    os.utime(store.path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert store.restrict(pl.Series([0, 1, 2]).to_numpy()).rows([1], ["body"]).item() == "new b"
    assert made == [store.path, store.path]
