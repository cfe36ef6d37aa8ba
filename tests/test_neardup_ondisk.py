"""The bounded near-duplicate search with its per-text arrays on disk (engine/audit/neardup/ondisk.py,
sharded.py): with tiny shards and reads it gives the in-memory search's pairs, candidates and counts,
on the compiled loops and on the numpy path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from claimcheck.engine import threads
from claimcheck.engine.audit import neardup
from claimcheck.engine.audit.neardup import blockjoin, candidates, kernels, ondisk, sharded
from tests.test_audit_perf import _sentence_tickets, count_handed_on


def _mixed(seed: int) -> pl.DataFrame:
    """Tickets with planted near and exact copies, long texts (wide sketches) with near copies, texts
    shorter than k words, empty and null texts, and one text copied many times."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(300)])
    body: list[str | None] = [" ".join(rng.choice(words, size=int(rng.integers(6, 30)))) for _ in range(1500)]
    for i in range(150, 1500, 7):
        src = body[int(rng.integers(0, i))]
        assert src is not None
        body[i] = src if i % 2 else src.replace("w1 ", "w2 ", 1) + " w299"
    for _ in range(60):  # long texts: 300 shingles and more get the wide sketch
        doc = rng.choice(words, size=int(rng.integers(300, 420))).tolist()
        body.append(" ".join(doc))
        near = list(doc)
        near[int(rng.integers(0, len(near)))] = "zz"
        body.append(" ".join(near + ["tail"]))
    body += [" ".join(rng.choice(words, size=int(rng.integers(1, 3)))) for _ in range(200)]  # < k words
    body += ["w1 w2", "w1 w2", "w2 w1", "", "", None, None] + ["w5 w6 w7 w8 w9 w10 w11"] * 40
    order = rng.permutation(len(body))
    return pl.DataFrame({"row_id": np.arange(len(body), dtype=np.int64), "body": [body[i] for i in order]})


@pytest.fixture(params=["compiled", "numpy"])
def loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "compiled" and not kernels.available():
        pytest.skip("the compiled loops were not built")
    if request.param == "numpy":
        monkeypatch.setattr(kernels, "available", lambda: False)
    return str(request.param)


def _tiny_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidates, "BOUNDED_SIG_BLOCK", 500)
    monkeypatch.setattr(sharded, "BOUNDED_SIG_BLOCK", 500)
    monkeypatch.setattr(sharded, "BOUND_BATCH", 300)
    monkeypatch.setattr(candidates, "SKETCH_CHUNK", 64)
    monkeypatch.setattr(ondisk, "SPAN_ENTRIES", 300)
    monkeypatch.setattr(ondisk, "READ_GAP", 256)
    monkeypatch.setattr(ondisk, "READ_SPAN", 4096)
    monkeypatch.setattr(blockjoin, "RANGE_BYTES", 64 * 37)  # ranges of 37 texts: many cells
    monkeypatch.setattr(blockjoin, "CELL_CODES", 50)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(("t", "k"), [(0.8, 5), (0.7, 2), (0.5, 3)])
def test_on_disk_search_gives_the_in_memory_pairs(
    loops: str, t: float, k: int, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    df = _mixed(seed=int(t * 10) + k)
    full = neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=k)
    _tiny_shards(monkeypatch)
    monkeypatch.setattr(threads, "thread_cap", lambda: workers)  # the passes matched inline or on threads
    disk = neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=k, bounded=True)
    assert full.pairs.height > 100
    assert neardup.pairs_payload(full.pairs) == neardup.pairs_payload(disk.pairs)
    got = (disk.texts, disk.candidates, disk.verified_text_pairs, disk.shingles)
    assert got == (full.texts, full.candidates, full.verified_text_pairs, full.shingles)


def test_long_documents_take_the_sharded_single_shingle_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where most prefix entries are single (long documents) the same pairs come from shingle shards."""
    rng = np.random.default_rng(11)
    words = np.array([f"v{i}" for i in range(2000)])
    docs = [rng.choice(words, size=int(rng.integers(300, 600))).tolist() for _ in range(120)]
    body = [" ".join(d) for d in docs] + [" ".join(d[5:] + ["x", "y"]) for d in docs[:40]]
    df = pl.DataFrame({"row_id": np.arange(len(body), dtype=np.int64), "body": body})
    full = neardup.near_duplicates(df, ["body"], threshold=0.8, shingle_size=5)
    _tiny_shards(monkeypatch)
    disk = neardup.near_duplicates(df, ["body"], threshold=0.8, shingle_size=5, bounded=True)
    assert full.pairs.height >= 40
    assert neardup.pairs_payload(full.pairs) == neardup.pairs_payload(disk.pairs)
    assert (full.candidates, full.verified_text_pairs) == (disk.candidates, disk.verified_text_pairs)


def test_rows_are_read_back_exactly(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = np.random.default_rng(0).integers(0, 256, size=(5000, 64), dtype=np.uint8)
    rows.tofile(tmp_path / "r")
    monkeypatch.setattr(ondisk, "READ_GAP", 64 * 3)
    monkeypatch.setattr(ondisk, "READ_SPAN", 64 * 50)
    for ids in (
        np.array([0, 4999]),
        np.arange(0, 5000, 2),
        np.unique(np.random.default_rng(1).integers(0, 5000, 700)),
    ):
        assert (ondisk.read_rows(tmp_path / "r", 64, ids) == rows[ids]).all()
    assert ondisk.read_rows(tmp_path / "r", 64, np.zeros(0, dtype=np.int64)).shape == (0, 64)


@pytest.mark.parametrize("t", [0.5, 0.8])
def test_sharded_single_shingle_pairs_equal_the_whole_search_before_bounds(
    loops: str, t: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the sketch bounds: shared counts summed over many shingle shards keep the same pairs
    (pairs counted once in two shards included)."""
    from claimcheck.engine.audit.neardup.hashing import normalised_row_hashes
    from claimcheck.engine.audit.neardup.shingles import build_prefixes
    from claimcheck.engine.audit.texts import distinct_texts

    rng = np.random.default_rng(5)
    words = np.array([f"v{i}" for i in range(25)])
    body = [" ".join(rng.choice(words, size=int(rng.integers(280, 400)))) for _ in range(150)]
    df = pl.DataFrame({"row_id": np.arange(len(body), dtype=np.int64), "body": body})
    texts, _, _ = distinct_texts(df, ["body"], "row_id", normalised_row_hashes(df, ["body"], None), None)
    held = build_prefixes(texts, 3, t)
    plen = np.diff(held.offs)
    doc = np.repeat(np.arange(plen.size, dtype=np.int32), plen)
    tiny = held.sizes <= (1 + t) / t - 1 + 1e-9
    big = held.ext > candidates.LONG_PREFIX
    assert 2 * int((tiny | big)[doc].sum()) >= doc.size  # every entry takes part
    whole = candidates._single_pairs(held, doc, (tiny | big)[doc], tiny, big, t)
    monkeypatch.setattr(sharded, "BOUNDED_SIG_BLOCK", 97)
    monkeypatch.setattr(ondisk, "SPAN_ENTRIES", 1000)
    disk = build_prefixes(texts, 3, t, gather=ondisk.spill)
    try:
        parts = sharded._single(disk, (disk.sizes, tiny, big), t, lambda c: c)
    finally:
        disk.close()
    assert whole.size > 20
    assert np.array_equal(whole, np.unique(np.concatenate(parts)))


def test_row_hash_pass_gives_each_texts_bytes(tmp_path) -> None:
    """The text bytes read with the row hashes (in memory and from a text store) are _text_bytes'."""
    from claimcheck.engine.audit.neardup import hashing, shingles
    from claimcheck.engine.audit.texts import distinct_texts
    from claimcheck.engine.audit.textstore import spill

    df = _mixed(seed=3)
    titles = ["Ünïcode  Title", None, "", "x", "same"]
    df = df.with_columns(pl.Series("title", [titles[i % 5] for i in range(df.height)]))
    cols = ["body", "title"]
    h, nbytes = hashing.row_hashes_and_bytes(df, cols)
    texts, _, _ = distinct_texts(df, cols, "row_id", h, None)
    assert np.array_equal(nbytes[texts.reps], shingles._text_bytes(texts))
    frame, store = spill(df.lazy(), cols)
    try:
        h2, nbytes2 = hashing.row_hashes_and_bytes(frame, cols, store)
        texts2, _, _ = distinct_texts(frame, cols, "row_id", h2, store)
        assert np.array_equal(nbytes2[texts2.reps], shingles._text_bytes(texts2))
        assert np.array_equal(nbytes2, nbytes) and h2.equals(h)
    finally:
        store.close()


@pytest.mark.parametrize("span", [1, 37, 256])
def test_block_join_bounds_every_pair_as_the_held_sketches_do(
    span: int, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pair of 300 texts (long ones with wide sketches among them), through the cell files and
    ranges of `span` texts (one text, a prime cut, more than all): the same verdicts as sketch_ok on the
    sketches held in memory, so no cell, range boundary or chunk of a cell is skipped or misaligned."""
    from claimcheck.engine.audit.neardup.arrays import pair_codes
    from claimcheck.engine.audit.neardup.hashing import normalised_row_hashes
    from claimcheck.engine.audit.neardup.shingles import build_prefixes
    from claimcheck.engine.audit.texts import distinct_texts

    df = _mixed(seed=9).head(300)
    texts, _, _ = distinct_texts(df, ["body"], "row_id", normalised_row_hashes(df, ["body"], None), None)
    held = build_prefixes(texts, 2, 0.5)
    n = held.sizes.size
    a, b = np.triu_indices(n, k=1)
    codes = pair_codes(a, b)
    want = np.sort(codes[candidates.sketch_ok(codes, held, 0.5)])
    assert 0 < want.size < codes.size and (held.wide_of >= 0).sum() > 5
    monkeypatch.setattr(blockjoin, "RANGE_BYTES", 64 * span)
    monkeypatch.setattr(blockjoin, "CELL_CODES", 997)
    disk = build_prefixes(texts, 2, 0.5, gather=ondisk.spill)
    try:
        cells = blockjoin.Cells(tmp_path, n)
        rng = np.random.default_rng(span)
        for part in np.array_split(rng.permutation(codes), 7):  # in batches, in no order
            cells.add(part)
        assert cells.codes == codes.size
        assert cells.filled == set(zip((a // span).tolist(), (b // span).tolist(), strict=True))
        assert cells.m == -(-n // span)
        got = np.sort(np.concatenate(blockjoin.bound_cells(cells, disk, 0.5)))
    finally:
        disk.close()
    assert np.array_equal(got, want)
    assert not list(tmp_path.iterdir())  # each cell's file removed once bounded


@pytest.mark.parametrize("t", [0.5, 0.8])
def test_coarse_bound_keeps_every_pair_the_sketch_bound_keeps(t: float) -> None:
    """The coarse sketches' bound (blockjoin.coarse_ok, before the cells are written) is looser than the
    64-bucket bound: on sketches with small, large and saturated counts it never drops a pair that
    candidates._bound keeps, and it does drop pairs."""
    from types import SimpleNamespace

    from claimcheck.engine.audit.neardup.arrays import pair_codes

    rng = np.random.default_rng(int(t * 10))
    n = 400
    base = rng.integers(0, 4, size=(n, 64))
    base[::7] = rng.integers(0, 40, size=(len(base[::7]), 64))  # sums past the coarse saturation
    base[::11, rng.integers(0, 64)] = 255  # a saturated fine bucket
    copies = np.maximum(base[: n // 2] - rng.integers(0, 2, size=(n // 2, 64)), 0)  # near copies
    sketch = np.minimum(np.concatenate([base, copies]), 255).astype(np.uint8)
    sizes = sketch.sum(axis=1, dtype=np.int64)
    a, b = np.triu_indices(sketch.shape[0], k=1)
    fine = candidates._bound(sizes[a], sizes[b], np.minimum(sketch[a], sketch[b]), t)
    p = SimpleNamespace(coarse=ondisk.coarse_sketch(sketch), sizes=sizes)
    coarse = blockjoin.coarse_ok(pair_codes(a, b), p, t)  # type: ignore[arg-type]
    assert fine.sum() > 100 and not (fine & ~coarse).any()
    assert (~coarse).sum() > 1000
    both = np.flatnonzero((sketch == 255).any(axis=1))
    assert (fine & np.isin(a, both) & np.isin(b, both)).any()  # saturated pairs among those kept


def test_cell_files_are_removed_when_the_bounds_fail(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cell files (and the per-text files) live in the search's temporary folders, removed on error
    (an OSError there is the stage's clear error about its temporary folder)."""
    import tempfile

    from claimcheck.engine.pipeline.context import StageInputError

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _tiny_shards(monkeypatch)
    seen: list[int] = []

    def fail(cells: blockjoin.Cells, p: ondisk.DiskPrefixes, threshold: float) -> list[np.ndarray]:
        seen.append(len(list(cells.folder.iterdir())))
        raise OSError("disk gone")

    monkeypatch.setattr(sharded, "bound_cells", fail)
    with pytest.raises(StageInputError, match="disk gone"):
        neardup.near_duplicates(_mixed(seed=4), ["body"], threshold=0.7, shingle_size=3, bounded=True)
    assert seen and seen[0] > 10  # many cell files were written
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("seed", "t"), [(31, 0.5), (32, 0.7), (33, 0.9)])
def test_fused_pair_loop_gives_the_numpy_candidates_on_the_bounded_path(
    seed: int, t: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the bounded path the compiled pair loop bounds its pairs by the coarse sketches: the final
    candidates (after the cells' sketch bounds) are the numpy path's, with many passes and cells, on
    mixed texts and sentence tickets (long runs of one prefix pair)."""
    from claimcheck.engine.audit.neardup.hashing import normalised_row_hashes
    from claimcheck.engine.audit.neardup.shingles import build_prefixes
    from claimcheck.engine.audit.texts import distinct_texts

    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    tickets = _sentence_tickets(seed, 900)["body"].to_list()
    mixed = _mixed(seed)
    df = pl.DataFrame(
        {"row_id": np.arange(mixed.height + 900, dtype=np.int64), "body": mixed["body"].to_list() + tickets}
    )
    texts, _, _ = distinct_texts(df, ["body"], "row_id", normalised_row_hashes(df, ["body"], None), None)
    _tiny_shards(monkeypatch)
    monkeypatch.setattr(candidates, "PAIR_BLOCK", 101)
    made = count_handed_on(monkeypatch)
    disk = build_prefixes(texts, 3, t, gather=ondisk.spill)
    try:
        got = sharded.find_candidates(disk, t)
        assert made["fused"] > 0 and made["numpy"] == 0
        with monkeypatch.context() as m:
            m.setattr(kernels, "available", lambda: False)
            want = sharded.find_candidates(disk, t)
    finally:
        disk.close()
    assert want.size > 100 and np.array_equal(got, want)
    assert made["fused"] < made["numpy"]  # the loop's coarse bound dropped pairs it made


@pytest.mark.parametrize(
    ("passes", "n", "budget"), [(2, 5000, 8 * 2 * 512), (97, 40_000, 4096), (1236, 90_000, 1 << 20)]
)
def test_compiled_pass_split_writes_the_numpy_split_files(
    passes: int, n: int, budget: int, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kernels.scatter (one compiled loop a block, a buffer a pass) writes each pass file byte for byte
    as the numpy split does (every signature of a pass, in the order generated), with buffers that fill
    many times and a pass's hashes at the ends of its range (high bits 0 and 2^32 - 1)."""
    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    monkeypatch.setattr(kernels, "SCATTER_BYTES", budget)
    monkeypatch.setattr(kernels, "SCATTER_MIN", 3)
    rng = np.random.default_rng(passes)
    blocks = []
    for size in (n // 3, 0, n - n // 3, 1):
        sig = rng.integers(0, 2**64, size=size, dtype=np.uint64)
        high = rng.integers(0, 2**32, size=size, dtype=np.uint64)
        high[: min(size, 4)] = np.array([0, 2**32 - 1, 2**31, 1], dtype=np.uint64)[: min(size, 4)]
        blocks.append((sig, high))
    want, got = tmp_path / "numpy", tmp_path / "compiled"
    want.mkdir(), got.mkdir()
    candidates._split_to_files(iter(blocks), [want / str(r) for r in range(passes)])
    kernels.scatter(iter(blocks), [got / str(r) for r in range(passes)])
    total = 0
    for r in range(passes):
        a, b = (want / str(r)).read_bytes(), (got / str(r)).read_bytes()
        assert a == b
        total += len(a) // 8
    assert total == sum(s.size for s, _ in blocks)
    assert (want / "0").stat().st_size > 0 and (want / str(passes - 1)).stat().st_size > 0


def test_compiled_pass_split_reports_a_failed_write(tmp_path) -> None:
    """A write that fails (a full disk: /dev/full) is an OSError naming it, and every file is closed."""
    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    sig = np.arange(100_000, dtype=np.uint64)
    high = (sig & np.uint64(1)) << np.uint64(31)  # every other signature in the second pass
    with pytest.raises(OSError, match="No space left"):
        kernels.scatter(iter([(sig, high)]), [tmp_path / "a", Path("/dev/full")])


@pytest.mark.parametrize(
    "case", ["mixed", "long runs", "long runs, wide words", "one size", "all distinct", "empty", "one"]
)
def test_compiled_unpack_gives_the_numpy_runs(case: str) -> None:
    """kernels.unpack_runs (Packing.unpack then _size_runs in one loop) keeps the same entries in the
    same runs, each run sorted by size, then text and position: runs short (insertion sort) and long
    (over 32 entries: size, text and position sorted as one word, or where they do not fit in one,
    qsort), ties in size, a text twice in one run, keys held once (dropped), no signatures and one."""
    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    rng = np.random.default_rng(len(case))
    pack = candidates.Packing(50 if "wide" in case else 12, 5)
    n = {"empty": 0, "one": 1}.get(case, 20_000)
    keys = {"long runs": 40, "long runs, wide words": 40, "all distinct": 1 << 40}.get(case, 3000)
    key = rng.integers(0, keys, size=n, dtype=np.uint64)
    if case == "all distinct":
        key = np.arange(n, dtype=np.uint64)
    doc = rng.integers(0, 1 << 12, size=n, dtype=np.uint64)
    pos = rng.integers(0, 32, size=n, dtype=np.uint64)
    packed = (key << np.uint64(pack.low)) | (doc << np.uint64(pack.pos_bits)) | pos
    packed.sort()
    most = 1 << 20 if "wide" in case else 300
    sizes = np.full(1 << 12, 7, dtype=np.int64) if case == "one size" else rng.integers(2, most, size=1 << 12)
    combo, cdoc, cpos, shift = kernels.unpack_runs(packed, pack.low, pack.pos_bits, sizes)
    k, own, at = pack.unpack(packed)
    want = candidates._size_runs(k, own, at, sizes) if k.size else None
    assert combo.size == k.size
    if want is None:
        return
    assert shift == want.shift and np.all(combo[1:] >= combo[:-1])  # runs in order, each by size
    mask = np.uint64((1 << shift) - 1)
    assert np.array_equal(combo & mask, sizes[cdoc].astype(np.uint64))

    def rows(c: np.ndarray, d: np.ndarray, p: np.ndarray) -> np.ndarray:
        return np.sort(
            np.stack([c.astype(np.uint64), d.astype(np.uint64), p.astype(np.uint64)])
            .T.copy()
            .view("u8,u8,u8"),
            axis=0,
        )

    assert np.array_equal(rows(combo, cdoc, cpos), rows(want.combo, want.doc, want.pos))
    at = cdoc * 32 + cpos  # ties in size by text, then position (the packed order)
    assert np.all((combo[1:] != combo[:-1]) | (at[1:] >= at[:-1]))
    wider, wdoc, wpos, wshift = kernels.unpack_runs(packed, pack.low, pack.pos_bits, sizes, shift + 3)
    assert wshift == shift + 3 and np.array_equal(wdoc, cdoc) and np.array_equal(wpos, cpos)
    assert np.array_equal(wider >> np.uint64(wshift), combo >> np.uint64(shift))  # a given shift: the same
    if case.startswith("long runs"):
        assert pack.low + shift > 64 if "wide" in case else pack.low + shift <= 64
        assert np.bincount((combo >> np.uint64(shift)).astype(np.int64)).max() > 32
    if case == "all distinct":
        assert combo.size == 0


@pytest.mark.parametrize("t", [0.5, 0.8, 0.9])
def test_coarse_sketch_word_bound_is_the_bucket_loop(t: float) -> None:
    """The pair loop bounds coarse sketches (8 bytes, 16 nibbles) a word at a time: the same codes as
    its bucket-by-bucket loop (the same rows with 8 empty bytes more), with saturated buckets (15),
    equal texts' sizes and rows, and sizes where the bound is hit exactly."""
    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    rng = np.random.default_rng(int(t * 10))
    n = 3000
    rows = rng.integers(0, 16, size=(n, 16), dtype=np.uint8)
    rows[rng.random((n, 16)) < 0.3] = 0
    rows[rng.random((n, 16)) < 0.02] = 15
    rows[n // 2 : n // 2 + 50] = rows[n // 2]  # equal rows
    word = (rows[:, 0::2] | (rows[:, 1::2] << np.uint8(4))).astype(np.uint8)
    wider = np.ascontiguousarray(np.concatenate([word, np.zeros((n, 8), dtype=np.uint8)], axis=1))
    doc = rng.permutation(n).astype(np.int64)
    sizes = np.where(rows.sum(axis=1) > 0, rows.sum(axis=1), 1).astype(np.int64)[doc]
    sizes[: n // 3] = 40  # ties in size
    key = np.repeat(np.arange(n // 100, dtype=np.uint64), 100)  # runs of 100 entries
    shift = 8
    order = np.lexsort((sizes, key))
    combo = (key << np.uint64(shift)) | sizes[order].astype(np.uint64)
    runs = candidates.Runs(combo, doc[order], np.zeros(n, dtype=np.int64), shift)
    for per_entry in (False, True):
        got, want = (
            np.sort(
                np.concatenate(
                    [np.zeros(0, np.uint64), *kernels.run_pairs(runs, t, (r, True, per_entry), 997)]
                )
            )
            for r in ((word, wider) if not per_entry else (word[runs.doc], wider[runs.doc]))
        )
        assert got.size > 100 and np.array_equal(got, want)
    unbounded = sum(c.size for c in kernels.run_pairs(runs, t, None, 997))
    assert unbounded > got.size  # the sketches did drop pairs
    assert (np.minimum(rows[:, None, :], rows[None, :5, :]) == 15).any()  # saturated minima were met


def _threshold_families(seed: int, t: float) -> pl.DataFrame:
    """Texts of single-word shingles whose pairs sit exactly at the threshold: equal sizes (x and y
    sharing all but one word each), a smaller and a larger text (y = x plus words), ties in length, and
    very short texts (two and three words), among unrelated texts of the same words."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"v{i}" for i in range(4000)])
    body: list[str] = []
    for _ in range(120):
        m = int(rng.integers(4, 24))
        words = rng.choice(vocab, size=m + 6, replace=False).tolist()
        x = words[:m]
        # |x & y| / |x | y| = t exactly: y drops d of x's words and adds a, with (m - d) / (m + a) = t.
        for a in range(0, 6):
            d = m - t * (m + a)
            if abs(d - round(d)) < 1e-9 and 0 <= round(d) < m and (a or round(d)):
                d = int(round(d))
                body += [" ".join(x), " ".join(x[d:] + words[m : m + a])]
    body += [
        " ".join(rng.choice(vocab[:50], size=int(rng.integers(2, 4)), replace=False)) for _ in range(300)
    ]
    body += [" ".join(rng.choice(vocab, size=int(rng.integers(4, 24)), replace=False)) for _ in range(600)]
    order = rng.permutation(len(body))
    return pl.DataFrame({"row_id": np.arange(len(body), dtype=np.int64), "body": [body[i] for i in order]})


@pytest.mark.parametrize(("t", "seed"), [(0.5, 1), (0.6, 2), (0.75, 3), (0.8, 4), (0.9, 5)])
def test_early_signature_filter_keeps_pairs_at_the_threshold(
    loops: str, t: float, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounded path writes late signatures only where an early one holds their key: pairs exactly
    at the threshold (equal sizes, and a smaller text inside a larger one), ties in size and very short
    texts give the in-memory search's pairs and candidates, with the least bitmap (2^16 bits: keys share
    bits) and a large one; and fewer signatures were written than the texts make."""
    df = _threshold_families(seed, t)
    full = neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=1)
    at_t = full.pairs.filter((pl.col("jaccard") - t).abs() < 1e-12).height
    assert at_t > 20
    written: list[int] = []
    real = sharded.match_pass

    def counting(part, *rest):
        written.append(part[0].size)
        return real(part, *rest)

    monkeypatch.setattr(sharded, "match_pass", counting)
    _tiny_shards(monkeypatch)
    for bits, per_text in ((1, 1 / 8), (64, 64)):
        monkeypatch.setattr(sharded, "EARLY_KEY_BITS", bits)
        monkeypatch.setattr(sharded, "EARLY_KEY_BYTES", per_text)
        written.clear()
        disk = neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=1, bounded=True)
        assert neardup.pairs_payload(disk.pairs) == neardup.pairs_payload(full.pairs)
        assert (disk.candidates, disk.verified_text_pairs) == (full.candidates, full.verified_text_pairs)
    prefixes = shingles_build(df, t)
    sel = np.flatnonzero((prefixes.ext <= candidates.LONG_PREFIX) & (np.diff(prefixes.offs) >= 2))
    plen = np.diff(prefixes.offs)[sel]
    assert sum(written) < int((plen * (plen - 1) // 2).sum())


def shingles_build(df: pl.DataFrame, t: float):
    from claimcheck.engine.audit.neardup.hashing import normalised_row_hashes
    from claimcheck.engine.audit.neardup.shingles import build_prefixes
    from claimcheck.engine.audit.texts import distinct_texts

    texts, _, _ = distinct_texts(df, ["body"], "row_id", normalised_row_hashes(df, ["body"], None), None)
    return build_prefixes(texts, 1, t)
