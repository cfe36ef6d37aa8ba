"""The exact near-duplicate search (prefix filtering + sketch bound) against brute force on small data."""

from __future__ import annotations

import itertools
import random
import shutil

import polars as pl
import pytest

from claimcheck.engine.audit import neardup
from claimcheck.engine.audit import texts as texts_mod
from claimcheck.engine.audit.neardup import candidates, hashing, kernels, shingles, verify

# Where no C compiler built the loops (the install goes on without them), their tests skip with the
# reason and the numpy path is tested alone; where a compiler exists, the build must have happened.
compiled = pytest.mark.skipif(
    not kernels.available(), reason="the compiled loops were not built (no C compiler at install)"
)


@pytest.fixture(params=[pytest.param("compiled", marks=compiled), "numpy"])
def loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the compiled loops (engine/audit/neardup/_kernels.c) and with the numpy path."""
    if request.param == "numpy":
        monkeypatch.setattr(kernels, "available", lambda: False)
    return request.param


def _shingles(text: str, k: int) -> set[str]:
    w = text.split(" ")
    if len(w) < k:
        return {" ".join(w)}
    return {" ".join(w[i : i + k]) for i in range(len(w) - k + 1)}


def _brute(df: pl.DataFrame, cols: list[str], t: float, k: int) -> set[tuple[int, int]]:
    norm = df.select("row_id", *[texts_mod.norm_text_expr(c).alias(c) for c in cols])
    rows = norm.rows()
    out = set()
    for (ra, *ka), (rb, *kb) in itertools.combinations(rows, 2):
        if ka == kb:
            continue  # the same normalised text: an exact duplicate, not a near one
        ta = " ".join(" ".join(x for x in ka if x).split())
        tb = " ".join(" ".join(x for x in kb if x).split())
        sa, sb = _shingles(ta, k), _shingles(tb, k)
        if len(sa & sb) / len(sa | sb) >= t - 1e-12:
            out.add((min(ra, rb), max(ra, rb)))
    return out


def _frame(seed: int, n: int) -> pl.DataFrame:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(30)]
    base = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 25))) for _ in range(n // 3)]
    subj, body = [], []
    for _ in range(n):
        words = rng.choice(base).split(" ")
        for _ in range(rng.randint(0, 2)):  # light edits make near copies
            words[rng.randrange(len(words))] = rng.choice(vocab)
        text = " ".join(words)
        body.append(text.upper() if rng.random() < 0.1 else text)
        subj.append(rng.choice([None, "", "Help", "help  me", "w1 w2 w3 w4 w5 w6"]))
    return pl.DataFrame({"row_id": list(range(n)), "subject": subj, "body": body})


@pytest.mark.parametrize(
    ("seed", "t", "k"), [(1, 0.8, 5), (2, 0.5, 3), (3, 0.8, 1), (4, 1.0, 2), (5, 0.3, 5)]
)
def test_matches_brute_force(seed: int, t: float, k: int, loops: str) -> None:
    df = _frame(seed, 160)
    res = neardup.near_duplicates(df, ["subject", "body"], threshold=t, shingle_size=k)
    got = set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True))
    want = _brute(df, ["subject", "body"], t, k)
    assert want, "the fixture should hold near duplicates"
    assert got == want
    assert res.candidates >= res.verified_text_pairs


@compiled
@pytest.mark.parametrize(("seed", "t", "k"), [(6, 0.8, 5), (7, 0.5, 3)])
def test_the_numpy_path_gives_the_compiled_pairs(seed: int, t: float, k: int, monkeypatch) -> None:
    df = _frame(seed, 160)
    compiled_pairs = neardup.near_duplicates(df, ["subject", "body"], threshold=t, shingle_size=k).pairs
    monkeypatch.setattr(kernels, "available", lambda: False)
    numpy_pairs = neardup.near_duplicates(df, ["subject", "body"], threshold=t, shingle_size=k).pairs
    assert compiled_pairs.height > 0 and numpy_pairs.equals(compiled_pairs)


def _templated(seed: int, n: int) -> pl.DataFrame:
    """Texts of very different lengths built from shared sentences, each with a unique tail and some
    light edits: shared shingles that co-occur, unique ones, and pairs near every threshold."""
    rng = random.Random(seed)
    sentences = [" ".join(f"s{j}w{i}" for i in range(rng.randint(3, 9))) for j in range(12)]
    base = [" ".join(rng.choice(sentences) for _ in range(rng.randint(1, 7))) for _ in range(25)]
    body = []
    for i in range(n):
        words = (rng.choice(base) + f" order{i}").split(" ")
        for _ in range(rng.randint(0, 3)):
            words[rng.randrange(len(words))] = f"e{rng.randint(0, 5)}"
        body.append(" ".join(words))
    return pl.DataFrame({"row_id": list(range(n)), "body": body})


@pytest.mark.parametrize(("seed", "t", "k"), [(11, 0.8, 5), (12, 0.6, 3), (13, 0.9, 2), (14, 0.5, 4)])
def test_shared_shingle_and_positional_filters_lose_no_pair(seed: int, t: float, k: int, loops: str) -> None:
    df = _templated(seed, 220)
    want = _brute(df, ["body"], t, k)
    res = neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=k)
    assert want, "the fixture should hold near duplicates"
    assert set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True)) == want


def test_long_and_tiny_texts_take_the_single_shingle_path(
    monkeypatch: pytest.MonkeyPatch, loops: str
) -> None:
    # A small LONG_PREFIX forces every text through the single-shared-shingle path; results must not change.
    df = _frame(7, 120)
    want = _brute(df, ["body"], 0.7, 2)
    monkeypatch.setattr(candidates, "LONG_PREFIX", 2)
    res = neardup.near_duplicates(df, ["body"], threshold=0.7, shingle_size=2)
    assert set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True)) == want


def test_texts_with_one_shingle_each_make_no_signatures() -> None:
    # Every text shorter than k words: no prefix pairs at all, only the single-shingle path.
    df = pl.DataFrame({"row_id": [0, 1, 2, 3], "body": ["a b", "a b", "a c", "x"]})
    res = neardup.near_duplicates(df, ["body"], threshold=0.8, shingle_size=5)
    assert res.pairs.height == 0 and res.texts == 3


def test_chunking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    df = _frame(8, 150)
    full = neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=3)
    for module, name, value in [
        (shingles, "CHUNK_TEXTS", 7),
        (shingles, "CHUNK_BYTES", 300),
        (candidates, "PAIR_BLOCK", 5),
        (verify, "VERIFY_SHINGLES", 11),
        (candidates, "SIG_BLOCK", 13),
        (candidates, "GEN_BLOCK", 5),
    ]:
        monkeypatch.setattr(module, name, value)
    small = neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=3)
    assert small.pairs.equals(full.pairs) and small.candidates == full.candidates
    assert full.pairs.height > 0
    # Small chunks hashed (and rows hashed) by worker threads, or inline: the same result.
    from claimcheck.engine import threads

    monkeypatch.setattr(texts_mod, "HASH_SLICE", 20)
    monkeypatch.setattr(shingles, "THREADED_MIN_BYTES", 0)  # these short texts too
    for workers in (1, 3):
        monkeypatch.setattr(threads, "thread_cap", lambda w=workers: w)
        again = neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=3)
        assert again.pairs.equals(full.pairs) and again.candidates == full.candidates


def test_signature_key_collisions_only_add_candidates(monkeypatch: pytest.MonkeyPatch) -> None:
    # Packed signatures keep only some hash bits; with 4 bits nearly every key collides, and the
    # filters and exact verification must still give the same pairs.
    df = _templated(15, 200)
    shared: list[int] = []
    real_runs = candidates._size_runs  # the numpy pair path groups its runs here
    real_unpack = kernels.unpack_runs  # the fused pair path, here

    def counting(key, *rest):
        shared.append(key.size)
        return real_runs(key, *rest)

    def counting_unpack(*args):
        got = real_unpack(*args)
        shared.append(got[0].size)
        return got

    monkeypatch.setattr(candidates, "_size_runs", counting)
    monkeypatch.setattr(kernels, "unpack_runs", counting_unpack)
    full = neardup.near_duplicates(df, ["body"], threshold=0.7, shingle_size=3)
    shared_full = sum(shared)
    shared.clear()
    real = candidates.Packing

    def four_key_bits(doc_bits: int, pos_bits: int) -> candidates.Packing:
        return real(64 - 4 - pos_bits, pos_bits)

    monkeypatch.setattr(candidates, "Packing", four_key_bits)
    monkeypatch.setattr(candidates, "SIG_BLOCK", 50)  # several spilled passes
    crowded = neardup.near_duplicates(df, ["body"], threshold=0.7, shingle_size=3)
    assert crowded.pairs.equals(full.pairs)
    assert sum(shared) > shared_full  # the collisions did put more signatures in runs
    assert full.pairs.height > 0


def test_unusable_temporary_folder_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    import tempfile

    from claimcheck.engine.pipeline.context import StageInputError

    missing = tmp_path / "no-such-folder"
    monkeypatch.setattr(tempfile, "tempdir", str(missing))
    with pytest.raises(StageInputError, match="TMPDIR") as err:
        neardup.near_duplicates(_frame(3, 30), ["body"], threshold=0.8, shingle_size=2)
    assert str(missing) in str(err.value)


def test_sketch_bound_never_drops_a_true_pair() -> None:
    import numpy as np

    df = _frame(9, 100)
    texts, _, _ = texts_mod.distinct_texts(df, ["body"], "row_id")
    pre = shingles.build_prefixes(texts, 2, 0.5)
    sizes = pre.sizes
    n = texts.len()
    a, b = np.triu_indices(n, 1)
    codes = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    ok = candidates.sketch_ok(codes, pre, 0.5)
    _, _, jac = verify.verify_pairs(texts, codes, sizes, 2)
    assert ok[jac >= 0.5].all()
    assert not ok.all(), "the bound should prune something"


def _source_and_split(tmp_path, **split_kw):
    from claimcheck.engine.pipeline.context import StageContext
    from claimcheck.engine.stages.source import run as source
    from claimcheck.engine.stages.split import run as split

    df = _frame(5, 240).with_columns(
        lab=pl.Series(["xy"[i % 2] for i in range(240)]),
        cust=pl.Series([f"c{i // 3}" for i in range(240)]),
        ts=pl.Series([f"2024-{1 + i % 12:02d}-01" for i in range(240)]),
    )
    df.drop("row_id").write_csv(tmp_path / "d.csv")
    ctx = StageContext(session_dir=tmp_path / "s", workspace=tmp_path)
    src = source.run(
        source.Inputs(
            files=["d.csv"],
            label_column="lab",
            input_columns=["subject", "body"],
            text_columns=["subject", "body"],
            availability={"subject": "yes", "body": "yes"},
            entity_columns=["cust"],
            time_column="ts",
            near_dup_threshold=0.6,
            shingle_size=3,
        ),
        {},
        ctx,
    )
    inputs = split.Inputs(rationale="bench", near_dup_threshold=0.6, shingle_size=3, **split_kw)
    return src, split, inputs, ctx


def test_split_reuses_source_pairs_exactly(tmp_path, monkeypatch) -> None:
    src, split, inputs, ctx = _source_and_split(tmp_path, strategy="time", gap_days=20)
    m = src.check("source.near_duplicates").measured
    assert m["pairs"] > 0 and (ctx.session_dir / m["pairs_path"]).is_file()
    reused = split.run(inputs, {"source": src}, ctx).check("split.near_duplicate_overlap")
    assert reused.measured["pairs_crossing"] > 0
    calls = []
    real = neardup.near_duplicates
    monkeypatch.setattr(neardup, "near_duplicates", lambda *a, **k: calls.append(1) or real(*a, **k))
    # A different definition cannot reuse the saved pairs: recomputed.
    split.run(inputs.model_copy(update={"shingle_size": 2}), {"source": src}, ctx)
    assert calls == [1]
    # The same definition recomputed (the saved pairs not used) gives the identical check.
    from claimcheck.engine.stages.split import checks as split_checks

    monkeypatch.setattr(split_checks, "source_pairs", lambda *a: None)
    recomputed = split.run(inputs, {"source": src}, ctx).check("split.near_duplicate_overlap")
    assert calls == [1, 1]
    assert recomputed.measured == reused.measured


def test_tampered_pairs_file_is_refused(tmp_path) -> None:
    from claimcheck.engine.evidence import EvidenceError

    src, split, inputs, ctx = _source_and_split(tmp_path)
    path = ctx.session_dir / src.check("source.near_duplicates").measured["pairs_path"]
    pl.read_parquet(path).head(1).write_parquet(path)
    with pytest.raises(EvidenceError, match="pairs_sha256"):
        split.run(inputs, {"source": src}, ctx)


def test_replay_compares_pairs_hash_without_writing(tmp_path) -> None:
    from claimcheck.engine.pipeline.context import StageContext
    from claimcheck.engine.stages.source import run as source

    src, _, _, ctx = _source_and_split(tmp_path)
    path = ctx.session_dir / src.check("source.near_duplicates").measured["pairs_path"]
    path.unlink()
    replay_ctx = StageContext(session_dir=ctx.session_dir, workspace=tmp_path, replay=True)
    again = source.run(source.Inputs(**src.inputs), {}, replay_ctx)
    assert not path.exists()
    assert again.check("source.near_duplicates").measured == src.check("source.near_duplicates").measured


# ---------------------------------------------------------------- hashed duplicate keys


def _dup_frame(seed: int, n: int = 400) -> pl.DataFrame:
    rng = random.Random(seed)
    words = ["Refund", "refund ", "  REFUND", "late  parcel", None, "login"]
    return pl.DataFrame(
        {
            "row_id": list(range(n)),
            "a": [rng.choice(words) for _ in range(n)],
            "b": [rng.choice([1, 2, None]) for _ in range(n)],
            "c": [rng.randint(0, 60) for _ in range(n)],
            "target": [rng.choice("xyz") for _ in range(n)],
        }
    )


def _by_definition(df: pl.DataFrame, cols: list[str], norm: bool) -> dict:
    """Plain group-by on the (normalised) values: the definition the hashed path must reproduce."""
    from claimcheck.engine.audit.duplicates import key_exprs

    keyed = df.select(*key_exprs(df.schema, cols, "lower_strip_ws" if norm else "none"), "target")
    g = keyed.group_by(cols).agg(pl.len().alias("n"), pl.col("target").n_unique().alias("k"))
    top = keyed.group_by([*cols, "target"]).len().group_by(cols).agg(pl.col("len").max())
    many = g.filter(pl.col("n") > 1)
    return {
        "groups": many.height,
        "rows": int(many["n"].sum()),
        "conflict_rows": int(g.filter(pl.col("k") > 1)["n"].sum()),
        "best": int(top["len"].sum()),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hashed_duplicates_match_the_definition_even_when_every_hash_collides(monkeypatch, seed) -> None:
    from claimcheck.engine.audit import duplicates

    df = _dup_frame(seed)
    cols = ["a", "b", "c"]
    runs = []
    for collide in (False, True):
        if collide:  # every row gets one hash: only the exact comparison of values can separate them
            monkeypatch.setattr(
                duplicates, "key_hashes", lambda d, c, n: pl.Series("h", [7] * d.height, dtype=pl.UInt64)
            )
        runs.append(
            (
                duplicates.duplicate_stats(df, cols, "none"),
                duplicates.duplicate_stats(df, cols, "lower_strip_ws"),
                duplicates.conflict_stats(df, cols),
            )
        )
    assert runs[0] == runs[1]
    exact, norm, conf = runs[0]
    ref, ref_norm = _by_definition(df, cols, False), _by_definition(df, cols, True)
    assert (exact["groups"], exact["rows"]) == (ref["groups"], ref["rows"])
    assert (norm["groups"], norm["rows"]) == (ref_norm["groups"], ref_norm["rows"])
    assert norm["rows"] > exact["rows"] > 0
    assert conf["rows"] == ref["conflict_rows"] and conf["rows_above_ceiling"] == df.height - ref["best"]


def test_split_exact_overlap_is_exact_under_hash_collisions(tmp_path, monkeypatch) -> None:
    from claimcheck.engine.audit import duplicates

    src, split, inputs, ctx = _source_and_split(tmp_path, strategy="random")
    honest = split.run(inputs, {"source": src}, ctx).check("split.exact_overlap").measured
    monkeypatch.setattr(
        duplicates, "key_hashes", lambda d, c, n: pl.Series("h", [7] * d.height, dtype=pl.UInt64)
    )
    collided = split.run(inputs, {"source": src}, ctx).check("split.exact_overlap").measured
    assert honest == collided


# ---------------------------------------------------------------- single-feature scores


def _oof_by_definition(df: pl.DataFrame, column: str) -> float:
    """Out-of-fold accuracy of the per-cell majority class, fold by fold in plain Python."""
    from collections import Counter

    import numpy as np

    from claimcheck.engine.audit import leakage
    from claimcheck.engine.data.splits import unit_position

    cells = leakage.cell_codes(df, column)[0].tolist()
    fold = (unit_position(df["row_id"].to_numpy(), leakage.SEED) % np.uint64(leakage.FOLDS)).tolist()
    y = df["target"].to_list()
    correct = 0
    for f in range(leakage.FOLDS):
        train = [(c, t) for c, t, g in zip(cells, y, fold, strict=True) if g != f]
        by_cell: dict[int, Counter] = {}
        for c, t in train:
            by_cell.setdefault(c, Counter())[t] += 1
        overall = Counter(t for _, t in train)
        majority = min(overall, key=lambda t: (-overall[t], t))
        for c, t, g in zip(cells, y, fold, strict=True):
            if g == f:
                cnt = by_cell.get(c)
                correct += (min(cnt, key=lambda k: (-cnt[k], k)) if cnt else majority) == t
    return correct / df.height


def test_single_feature_scores_match_the_per_fold_definition() -> None:
    from claimcheck.engine.audit import leakage

    rng = random.Random(3)
    n = 3000
    y = [rng.choice(["a", "b", "c", "d"]) for _ in range(n)]
    df = pl.DataFrame(
        {
            "row_id": list(range(n)),
            "target": y,
            "ident": [i * 3 + "abcd".index(t) * 10_000 for i, t in enumerate(y)],  # ids in per-class ranges
            "tied": [i // 2 if i % 7 else None for i in range(n)],  # ties across rank-bin edges, nulls
            "small": [rng.randint(0, 20) for _ in range(n)],
            "real": [rng.random() for _ in range(n)],
            "text": [rng.choice(["p", "q", None]) for _ in range(n)],
            "many": [f"v{rng.randint(0, 1500)}" for _ in range(n)],
        }
    )
    cols = ["ident", "tied", "small", "real", "text", "many"]
    scores = leakage.single_feature_scores(df, cols)
    for c in cols:
        assert scores[c]["accuracy"] == round(_oof_by_definition(df, c), 6), c
        assert scores[c]["distinct"] == df[c].n_unique(), c
    assert scores["ident"]["gain"] > 0.9 and scores["real"]["gain"] < 0.1
    assert scores["tied"]["encoding"] == scores["many"]["encoding"] == "rank bins (100)"
    assert scores["small"]["encoding"] == "categories"


def test_stable_argsort_matches_numpy_on_sorted_tied_and_random_values() -> None:
    import numpy as np

    from claimcheck.engine.audit import leakage

    rng = np.random.default_rng(0)
    cases = [
        np.arange(50),  # already in order: the shortcut
        np.repeat(np.arange(10), 5),  # in order with ties
        np.arange(50)[::-1].copy(),
        rng.integers(-5, 5, 200),
        rng.random(100),
        np.sort(rng.random(100)),
        rng.random(30) < 0.5,
        np.array([7]),
        np.array([], dtype=np.int64),
    ]
    for v in cases:
        assert np.array_equal(leakage._stable_argsort(v), np.argsort(v, kind="stable")), v


def test_normalisation_matches_its_definition_on_unicode_whitespace() -> None:
    """lower_strip_ws = lowercase, strip, every whitespace run → one space (the faster regex is exact)."""
    rng = random.Random(5)
    alphabet = ["A", "b", " ", "  ", "\t", "\n", "\u00a0", "\u2003", "\u3000", "\x85", "\r\n", "É", "x y"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(5000)]
    got = pl.DataFrame({"t": texts}).select(texts_mod.norm_text_expr("t")).to_series().to_list()
    assert got == [" ".join(t.lower().split()) for t in texts]


@pytest.mark.parametrize("with_rank", [False, True])
def test_packed_sort_order_is_exact_when_hash_high_bits_tie(with_rank: bool) -> None:
    # Hashes that differ only in their low 12 bits tie on the packed key's hash bits: the tied runs
    # must still come out in full (text, rank, hash) order, exactly as a sort on the three columns.
    import numpy as np

    rng = np.random.default_rng(3)
    n = 20_000
    d = rng.integers(0, 300, size=n)
    h = rng.integers(0, 1 << 12, size=n).astype(np.uint64) | np.uint64(0xABCD << 48)
    h[::7] = rng.integers(0, 2**63, size=h[::7].size).astype(np.uint64)  # and ordinary hashes
    rank = (h % np.uint64(5)).astype(np.uint32) if with_rank else None  # a shingle's count: one per hash
    order = shingles._order(d, rank, h).order
    want = np.lexsort((h, d) if rank is None else (h, rank, d))
    cols = [d, h] if rank is None else [d, rank, h]
    assert all(np.array_equal(c[order], c[want]) for c in cols)
    pairs = set(zip(d.tolist(), h.tolist(), strict=True))
    for dd in (d, np.sort(d)):  # pass 1's texts come in order: dedupe then skips gathering d
        got_h, got_d, got_rank = shingles.dedupe(h, dd, rank)
        want = np.lexsort((h, dd) if rank is None else (h, rank, dd))
        ws = [c[want] for c in (h, dd)]
        keep = np.ones(n, dtype=bool)
        keep[1:] = (ws[0][1:] != ws[0][:-1]) | (ws[1][1:] != ws[1][:-1])
        assert np.array_equal(got_h, ws[0][keep]) and np.array_equal(got_d, ws[1][keep])
        assert got_rank is None if rank is None else np.array_equal(got_rank, rank[want][keep])
        assert len(got_h) == len(set(zip(dd.tolist(), h.tolist(), strict=True)))
    assert len(pairs) > 0


@pytest.mark.parametrize("wide_min", [3, 20])
def test_wide_sketch_bound_never_drops_a_true_pair(monkeypatch: pytest.MonkeyPatch, wide_min: int) -> None:
    # Every text (or the longer ones) gets the wide sketch: the bound must keep every true pair, prune
    # some false ones, and the search must still match brute force.
    import numpy as np

    monkeypatch.setattr(shingles, "WIDE_MIN", wide_min)
    monkeypatch.setattr(shingles, "WIDE_BATCH", 5)
    df = _templated(16, 150)
    texts, _, _ = texts_mod.distinct_texts(df, ["body"], "row_id")
    pre = shingles.build_prefixes(texts, 2, 0.6)
    assert (pre.wide_of >= 0).sum() == pre.wide.shape[0] == (pre.sizes >= wide_min).sum() > 0
    a, b = np.triu_indices(texts.len(), 1)
    codes = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    ok = candidates.sketch_ok(codes, pre, 0.6)
    _, _, jac = verify.verify_pairs(texts, codes, pre.sizes, 2)
    assert ok[jac >= 0.6].all()
    monkeypatch.setattr(shingles, "WIDE_MIN", 10**9)
    narrow = candidates.sketch_ok(codes, shingles.build_prefixes(texts, 2, 0.6), 0.6)
    assert (narrow & ~ok).any(), "the wide sketch should prune pairs the narrow one keeps"
    monkeypatch.setattr(shingles, "WIDE_MIN", wide_min)
    res = neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=2)
    want = _brute(df, ["body"], 0.6, 2)
    assert want and set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True)) == want


def test_chunks_are_bounded_by_bytes_and_cover_every_text(monkeypatch: pytest.MonkeyPatch) -> None:
    df = _templated(17, 90)
    texts, _, _ = texts_mod.distinct_texts(df, ["body"], "row_id")
    monkeypatch.setattr(shingles, "CHUNK_BYTES", 200)
    bounds = shingles.chunks(texts)
    assert bounds[0][0] == 0 and bounds[-1][1] == texts.len() and len(bounds) > 3
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    for lo, hi in bounds:
        nbytes = texts.slice(lo, hi - lo).str.len_bytes().sum()  # normalising never lengthens a text
        assert hi - lo == 1 or nbytes <= 200


@pytest.mark.parametrize("single_share", [0.05, 0.9])
def test_shared_with_matches_isin_then_group(single_share: float) -> None:
    # Both branches (few single entries: binary search; most: one sort) keep exactly the entries whose
    # shingle a single entry holds too and that another entry shares, as a multiset of (shingle, text,
    # position), grouped by shingle.
    import numpy as np

    from claimcheck.engine.audit.neardup import candidates

    rng = np.random.default_rng(7)
    n = 5_000
    tok = rng.integers(0, 800, size=n).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    doc = rng.integers(0, 600, size=n).astype(np.int32)
    pos = rng.integers(0, 40, size=n).astype(np.uint16)
    single = rng.random(n) < single_share
    sizes = rng.integers(1, 3_000, size=600)
    runs = candidates._shared_with(tok, doc, pos, single, sizes)
    cut = np.uint64(runs.shift)
    short = tok >> cut  # the key keeps the hash's high bits (none collide here)
    assert np.unique(short).size == np.unique(tok).size
    part = np.isin(short, short[single])
    held = np.unique(short[part], return_counts=True)
    part &= np.isin(short, held[0][held[1] >= 2])
    want = sorted(zip(short[part].tolist(), doc[part].tolist(), pos[part].tolist(), strict=True))
    got_k = runs.combo >> cut
    assert np.all(runs.combo[1:] >= runs.combo[:-1])  # by shingle, then by size
    assert np.array_equal(runs.combo & np.uint64((1 << runs.shift) - 1), sizes[runs.doc])
    assert sorted(zip(got_k.tolist(), runs.doc.tolist(), runs.pos.tolist(), strict=True)) == want
    assert len(want) > 100


def test_dedupe_by_text_matches_dedupe() -> None:
    # The long-text path (per-text in-place sorts, one packed sort) gives exactly dedupe's arrays: repeats
    # within a text, hashes tied on their high bits, ranks above the 16-bit clamp, texts of one shingle.
    import numpy as np

    rng = np.random.default_rng(5)
    sizes = np.concatenate([rng.integers(1, 900, size=60), [1, 1, 2]])
    d = np.repeat(np.arange(sizes.size), sizes)
    pool = rng.integers(0, 2**63, size=3_000).astype(np.uint64)
    pool[:200] = (pool[:200] & np.uint64(0xFFF)) | np.uint64(0xABCD << 48)  # high bits tie
    h = pool[rng.integers(0, pool.size, size=d.size)]  # many repeats within a text
    table = rng.integers(1, 80_000, size=1 << 10).astype(np.uint32)

    def rank_of(x: np.ndarray) -> np.ndarray:
        return table[(x & np.uint64(1023)).astype(np.int64)]

    want = shingles.dedupe(h, d, rank_of(h))
    got = shingles.dedupe_by_text(h, d, rank_of)
    assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want, strict=True))
    assert want[0].size < h.size and (want[2] == (1 << 16) - 1).any()


@pytest.mark.parametrize(("seed", "t", "k"), [(21, 0.8, 5), (22, 0.6, 3)])
def test_text_by_text_dedupe_path_matches_brute_force(monkeypatch: pytest.MonkeyPatch, seed, t, k) -> None:
    # LONG_TEXT = 1 sends every chunk whose texts come in order through dedupe_by_text (long documents'
    # numpy path); the pairs must still be exactly the brute-force ones, with small chunks too.
    monkeypatch.setattr(kernels, "available", lambda: False)
    df = _templated(seed, 160)
    want = _brute(df, ["body"], t, k)
    monkeypatch.setattr(shingles, "LONG_TEXT", 1)
    res = neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=k)
    assert want and set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True)) == want
    monkeypatch.setattr(shingles, "CHUNK_TEXTS", 9)
    assert neardup.near_duplicates(df, ["body"], threshold=t, shingle_size=k).pairs.equals(res.pairs)


@pytest.mark.skipif(
    not any(shutil.which(cc) for cc in ("cc", "gcc", "clang")), reason="no C compiler on this machine"
)
def test_compiled_loops_are_built() -> None:
    # `pip install -e .` compiles them (pyproject.toml); CI must test them, not only the numpy fallback.
    assert kernels.available(), "engine/audit/neardup/_kernels.c was not built: run pip install -e ."


@compiled
def test_a_stale_or_unloadable_build_means_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # A library without the functions (an older build) or that cannot be loaded: no error, numpy path.
    import ctypes

    real = ctypes.CDLL

    def stale(path: str) -> ctypes.CDLL:
        return real(None)  # this process's own symbols: no cc_* function

    def broken(path: str) -> ctypes.CDLL:
        raise OSError("wrong ELF class")

    try:
        for fake in (stale, broken):
            kernels._lib.cache_clear()
            monkeypatch.setattr(kernels.ctypes, "CDLL", fake)
            assert not kernels.available()
            df = _frame(3, 60)
            assert neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=2).pairs.height > 0
    finally:
        monkeypatch.undo()
        kernels._lib.cache_clear()
    assert kernels.available()


@compiled
def test_compiled_shingle_hashes_match_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Texts shorter than k words (one shingle each, after the others), of one word, and longer ones.
    import numpy as np

    rng = random.Random(4)
    words = ["a", "b", "c", "dd", "e", "ff", "g"]
    lens = [0, 1, 2, 3, 4, 5, 6, 7, 40]
    series = pl.Series([" ".join(rng.choice(words) for _ in range(rng.choice(lens))) for _ in range(2000)])
    for k in (1, 2, 5, 7):
        got = hashing.doc_shingles(series, k)
        with monkeypatch.context() as m:
            m.setattr(kernels, "available", lambda: False)
            want = hashing.doc_shingles(series, k)
        assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want, strict=True))


def _word_hash_reference(word: bytes) -> int:
    """The word hash as hashing.word_hashes defines it, in plain Python."""
    mask = (1 << 64) - 1
    h = int(hashing._WORD_SEED) ^ (len(word) * int(hashing._WORD_LEN) & mask)
    for j in range(0, len(word), 8):
        h = ((h ^ int.from_bytes(word[j : j + 8], "little")) * int(hashing._WORD_BLOCK)) & mask
        h ^= h >> 29
    h = (h + 0x9E3779B97F4A7C15) & mask  # splitmix64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & mask
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & mask
    return h ^ (h >> 31)


@pytest.mark.parametrize("loops", [pytest.param("compiled", marks=compiled), "numpy"])
def test_word_hashes_match_their_definition(monkeypatch: pytest.MonkeyPatch, loops: str) -> None:
    # Words of every length around the 8-byte blocks, multi-byte UTF-8, NUL and other control bytes,
    # empty texts and empty words (two spaces), a null, and a slice (Arrow offsets that do not start
    # at 0): each word's hash is the reference's, whatever Polars' own hash does.
    rng = random.Random(9)
    alphabet = ["a", "Z", "é", "😀", "\x00", "\x1b", "ü", "  ", " ", "xyzxyzxyz"]
    texts = ["", " ", "a  b", "abcdefgh", "abcdefghi jklmnopqrstuvwx", "x" * 1000, None]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(400)]
    series = pl.Series(texts, dtype=pl.String)
    if loops == "numpy":
        monkeypatch.setattr(kernels, "available", lambda: False)
    for s in (series, series.slice(3, 200)):
        words = [w.encode() for t in s.fill_null("").to_list() for w in t.split(" ")]
        flat, lens = hashing.word_hashes(s)
        assert lens.tolist() == [t.count(" ") + 1 for t in s.fill_null("").to_list()]
        assert flat.tolist() == [_word_hash_reference(w) for w in words]


@compiled
def test_compiled_distinct_keeps_first_occurrences_and_counts_every_shingle() -> None:
    import numpy as np

    rng = np.random.default_rng(8)
    per = np.concatenate([rng.integers(0, 700, size=80), [0, 1, 2]])
    pool = rng.integers(0, 2**63, size=500).astype(np.uint64)
    pool[0] = 0  # the hash set's empty marker is a value like any other
    h = pool[rng.integers(0, pool.size, size=int(per.sum()))]
    counts = np.zeros(1 << 10, dtype=np.uint32)
    out, sizes = kernels.distinct(h, per)
    kernels.count(h, counts)
    want, off = [], 0
    for m in per.tolist():
        want.append(list(dict.fromkeys(h[off : off + m].tolist())))
        off += m
    assert sizes.tolist() == [len(w) for w in want]
    assert out.tolist() == [x for w in want for x in w]
    assert np.array_equal(counts, np.bincount((h & np.uint64(1023)).astype(np.int64), minlength=1 << 10))
    assert (h == 0).any()


@pytest.mark.parametrize(("t", "wide_min"), [(0.8, 256), (0.5, 3), (1.0, 40)])
@compiled
def test_compiled_prefixes_and_sketches_match_numpy(t: float, wide_min: int) -> None:
    # Both paths from the same distinct shingles and count table: counts above the 16-bit clamp and of 1,
    # hashes tied on their high 48 bits (the packed key), texts short and long (the sampled pivot).
    import numpy as np

    rng = np.random.default_rng(9)
    sizes = np.concatenate([rng.integers(1, 2500, size=40), [1, 2, 3, 600, 5000]])
    pool = np.unique(rng.integers(1, 2**63, size=30_000).astype(np.uint64))
    pool[:300] = (pool[:300] & np.uint64(0xFFFF)) | np.uint64(0xABCD << 48)
    pool = np.unique(pool)
    h = np.concatenate([rng.choice(pool, size=int(m), replace=False) for m in sizes])
    counts = rng.integers(2, 50, size=1 << 12).astype(np.uint32)
    counts[rng.integers(0, counts.size, size=200)] = 1  # shingles of one text: a prefix place, not kept
    counts[rng.integers(0, counts.size, size=300)] = rng.integers(60_000, 90_000, size=300).astype(np.uint32)
    d = np.repeat(np.arange(sizes.size), sizes)
    lay = kernels.Layout(t, shingles.SKETCH_BUCKETS, wide_min, shingles.WIDE_BUCKETS)
    tok, rank, kept, ext, sketch, wide = kernels.long_prefixes(h, sizes, counts, lay)
    orig = shingles.WIDE_MIN
    shingles.WIDE_MIN = wide_min
    try:
        want = shingles._chunk_prefixes(h, d, sizes.size, counts, t)
    finally:
        shingles.WIDE_MIN = orig
    assert np.array_equal(want.size, sizes)
    for got, ref in zip(
        (tok, rank, kept, ext, sketch, wide),
        (want.tok, want.rank, want.kept, want.ext, want.sketch, want.wide),
        strict=True,
    ):
        assert got.dtype == ref.dtype and np.array_equal(got, ref)
    assert tok.size > (1000 if t < 1 else 0) and wide.shape[0] > 0


@pytest.mark.parametrize(("single_share", "t"), [(0.05, 0.8), (0.9, 0.8), (0.9, 0.5)])
@compiled
def test_compiled_single_shingle_pairs_match_numpy(single_share: float, t: float) -> None:
    # Both branches (few single entries: only their full toks take part; most: every entry), toks that
    # collide on the high bits the run key keeps, repeated toks within a text, tiny and big texts.
    import types

    import numpy as np

    rng = np.random.default_rng(12)
    n_docs, n = 500, 30_000
    sizes = rng.integers(2, 3000, size=n_docs)
    sizes[rng.random(n_docs) < 0.1] = 1  # tiny at any t < 1
    tiny = sizes <= (1 + t) / t - 1 + 1e-9
    big = sizes > (150 if single_share > 0.5 else 2950)
    doc = rng.integers(0, n_docs, size=n).astype(np.int32)
    pool = rng.integers(0, 2**63, size=700).astype(np.uint64)
    pool[:60] = (pool[:60] & np.uint64(0xFF)) | np.uint64(0x1234 << 48)  # same high bits, other toks
    tok = pool[rng.integers(0, pool.size, size=n)]
    pos = np.minimum(rng.integers(0, 1 << 16, size=n) % np.maximum(sizes[doc] // 4, 1), 65535).astype(
        np.uint16
    )
    single = tiny[doc] | big[doc]
    assert (2 * single.sum() < n) == (single_share < 0.5)
    p = types.SimpleNamespace(tok=tok, rank=pos, sizes=sizes)
    want = candidates._single_pairs(p, doc, single, tiny, big, t)  # type: ignore[arg-type]
    got = kernels.single_pairs(tok, doc, pos, single, sizes, tiny, big, t)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert want.size > 100


def _tricky_frame(rng: random.Random, rows: int, n_cols: int) -> pl.DataFrame:
    """Text columns where Unicode rules matter: non-ASCII whitespace (NBSP, NEL, ideographic space, line
    separator), characters whose lowercase is ASCII (Kelvin sign) or longer (dotted capital I), a final
    sigma, control bytes that are not whitespace, ASCII whitespace of every kind; nulls, empty values,
    and repeats that only normalising makes equal."""
    ascii_pool = list("abcXYZ  \t\n\r\x0b\x0c")
    pool = ascii_pool + [
        "\u00a0",
        "\u212a",
        "\u0130",
        "\u03a3",
        "\u0085",
        "\u3000",
        "é",
        "\x1c",
        "\x1f",
        "ß",
        "\u2028",
    ]

    def value() -> str | None:
        r = rng.random()
        if r < 0.05:
            return None
        if r < 0.1:
            return ""
        chars = ascii_pool if rng.random() < 0.6 else pool
        if rng.random() < 0.3:  # longer values, mostly letters and lone spaces (the 8-byte path)
            return "".join(rng.choice(chars + list("abcdefgHIJ ") * 4) for _ in range(rng.randint(30, 200)))
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, 30)))

    cols = {}
    for j in range(n_cols):
        v = [value() for _ in range(rows // 2)]
        cols[f"c{j}"] = v + [x.upper() + " \t" if x and rng.random() < 0.5 else x for x in v]
    return pl.DataFrame(cols).with_row_index("row_id")


@pytest.mark.parametrize("n_cols", [1, 3])
@compiled
def test_compiled_normalisation_is_polars_byte_for_byte(n_cols: int) -> None:
    # Rows all ASCII are normalised by the compiled loops, the others by Polars, spliced back in order:
    # the bytes are those of the Polars expressions alone, for every text and for a subset.
    import numpy as np

    assert kernels.available()
    df = _tricky_frame(random.Random(11 + n_cols), 4000, n_cols)
    cols = [f"c{j}" for j in range(n_cols)]
    texts, _, _ = texts_mod.distinct_texts(df, cols, "row_id")
    ok = kernels.normalise([hashing.utf8(texts.frame.get_column(c)) for c in cols])[2]
    assert 0.2 < ok.mean() < 0.9  # both paths take part
    for idx in (np.arange(texts.len()), np.arange(texts.len())[3::7]):
        data, offs = hashing.normalised_utf8(texts, idx)
        want, w_offs = hashing.utf8(texts.gather(idx))
        assert np.array_equal(offs, w_offs - w_offs[0])
        assert np.array_equal(data, want[w_offs[0] : w_offs[-1]])


def test_normalised_row_hashes_group_rows_as_their_normalised_values() -> None:
    # The compiled row hashes make the same distinct texts as Polars' struct hash: one hash per
    # distinct tuple of normalised values (a null apart from an empty value).
    import numpy as np

    df = _tricky_frame(random.Random(5), 5000, 2)
    cols = ["c0", "c1"]
    h = hashing.normalised_row_hashes(df, cols)
    assert h is not None
    keyed = df.select([texts_mod.norm_text_expr(c).alias(c) for c in cols]).with_columns(h=h)
    per_key = keyed.group_by(cols).agg(pl.col("h").n_unique())
    assert (per_key["h"] == 1).all() and h.n_unique() == per_key.height
    assert keyed.filter(pl.col("c0").is_null()).height and keyed.filter(pl.col("c0") == "").height
    want = texts_mod.distinct_texts(df, cols, "row_id")
    got = texts_mod.distinct_texts(df, cols, "row_id", h)
    assert all(np.array_equal(g, w) for g, w in zip(got[1:], want[1:], strict=True))
    assert np.array_equal(got[0].reps, want[0].reps)


@compiled
def test_compiled_jaccard_is_the_exact_set_ratio() -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    sets = [
        np.unique(rng.integers(0, 400, size=int(rng.integers(1, 300))).astype(np.uint64)) for _ in range(60)
    ]
    flat = np.concatenate([rng.permutation(s) for s in sets])  # unsorted within each text
    offs = np.zeros(len(sets) + 1, dtype=np.int64)
    np.cumsum([s.size for s in sets], out=offs[1:])
    a, b = rng.integers(0, len(sets), size=500), rng.integers(0, len(sets), size=500)
    got = kernels.jaccard(flat, offs, a, b)
    want = [
        np.intersect1d(sets[i], sets[j]).size / np.union1d(sets[i], sets[j]).size
        for i, j in zip(a, b, strict=True)
    ]
    assert got.tolist() == want


@compiled
def test_compiled_sort_is_numpys_sort() -> None:
    # Empty, one key, many equal top bits (one bucket), equal keys, and keys over the full 64 bits.
    import numpy as np

    rng = np.random.default_rng(12)
    full = rng.integers(0, 2**64 - 1, size=50_000, dtype=np.uint64)
    cases = [full[:0], full[:1], full & np.uint64(0xFFFF), np.repeat(full[:7], 300), full]
    for keys in cases:
        got = keys.copy()
        kernels.sort(got)
        assert np.array_equal(got, np.sort(keys))


def _sentence_tickets(seed: int, n: int) -> pl.DataFrame:
    """Tickets of 2-4 sentences from a pool of 20 and a unique order number: many texts share a
    sentence or two (so a prefix pair: long runs) without being near copies."""
    import numpy as np

    rng = np.random.default_rng(seed)
    pool = [" ".join(f"s{j}w{i}" for i in range(int(rng.integers(5, 10)))) for j in range(20)]
    body = [
        " ".join(pool[int(s)] for s in rng.choice(20, size=int(rng.integers(2, 5)), replace=False))
        + f" order{i}"
        for i in range(n)
    ]
    return pl.DataFrame({"row_id": list(range(n)), "body": body})


def count_handed_on(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts, while the test runs, the distinct codes each pass hands on: by the fused loop
    (kernels.run_pairs) under "fused", by the numpy pairs (candidates._positional_pairs) under "numpy"."""
    import numpy as np

    from claimcheck.engine.audit.neardup.arrays import unique

    made = {"fused": 0, "numpy": 0}
    real_run, real_pos = kernels.run_pairs, candidates._positional_pairs

    def fused(*a, **k):
        blocks = list(real_run(*a, **k))
        made["fused"] += unique(np.concatenate(blocks)).size if blocks else 0
        yield from blocks

    def numpy_pairs(*a, **k):
        out = real_pos(*a, **k)
        made["numpy"] += unique(np.concatenate([c for c, _ in out])).size if out else 0
        return out

    monkeypatch.setattr(kernels, "run_pairs", fused)
    monkeypatch.setattr(candidates, "_positional_pairs", numpy_pairs)
    return made


def _fused_frames(kind: str) -> pl.DataFrame:
    """Sentence tickets (long runs of one prefix pair), templated texts (near copies) or random texts."""
    if kind == "tickets":
        return _sentence_tickets(21, 900)
    return _templated(21, 700) if kind == "templated" else _frame(22, 400)


@pytest.mark.parametrize("kind", ["tickets", "templated", "random"])
@pytest.mark.parametrize("t", [0.5, 0.7, 0.9])
def test_fused_pair_loop_gives_the_numpy_candidates(
    kind: str, t: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prefix-pair path's compiled loop (pairs, filters and the held sketches' bound at once) gives
    the numpy path's final candidates, and on sentence tickets hands on far fewer codes than it makes."""
    import numpy as np

    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    texts, _, _ = texts_mod.distinct_texts(_fused_frames(kind), ["body"], "row_id")
    pre = shingles.build_prefixes(texts, 2, t)
    made = count_handed_on(monkeypatch)
    monkeypatch.setattr(candidates, "PAIR_BLOCK", 97)  # many output blocks of the loop
    if t == 0.7:  # the sketch rows read by text, not gathered per entry
        monkeypatch.setattr(candidates, "ENTRY_ROW_BYTES", 0)
    got = candidates.find_candidates(pre, t)
    assert made["numpy"] == 0 and made["fused"] > 0
    with monkeypatch.context() as m:
        m.setattr(kernels, "available", lambda: False)
        want = candidates.find_candidates(pre, t)
    assert want.size > 0 and np.array_equal(got, want)
    assert made["fused"] <= made["numpy"]
    if kind == "tickets" and t < 0.9:
        assert 2 * made["fused"] < made["numpy"]  # the sketch bound ran in the loop


@pytest.mark.parametrize("nibbles", [False, True])
@pytest.mark.parametrize("t", [0.4, 0.6, 0.85])
def test_fused_sketch_bound_is_the_numpy_bound_saturation_included(nibbles: bool, t: float) -> None:
    """kernels.run_pairs' fused bound keeps exactly the pairs of _run_pairs that candidates._bound
    (64 one-byte buckets) or blockjoin.coarse_ok (4-bit buckets) keeps, on sketches with saturated
    buckets (pairs kept only because a bucket saturated are among them), output cut in tiny blocks."""
    from types import SimpleNamespace

    import numpy as np

    from claimcheck.engine.audit.neardup import blockjoin, ondisk
    from claimcheck.engine.audit.neardup.arrays import split_codes, unique

    if not kernels.available():
        pytest.skip("the compiled loops were not built")
    rng = np.random.default_rng(int(t * 100) + nibbles)
    n_text, n_entry = 300, 3000
    sizes = rng.integers(20, 1500, size=n_text).astype(np.int64)  # past a saturated bucket's 255
    fine = rng.integers(0, 4, size=(n_text, 64)).astype(np.uint8)
    fine[::3] = rng.integers(0, 12, size=(len(fine[::3]), 64))  # sums past the coarse saturation
    fine[::5, rng.integers(0, 64)] = 255  # a saturated bucket in every fifth text
    rows = ondisk.coarse_sketch(fine) if nibbles else fine
    key = np.sort(rng.integers(0, 40, size=n_entry)).astype(np.uint64)  # runs of ~75 entries
    doc = rng.integers(0, n_text, size=n_entry).astype(np.int64)
    pos = rng.integers(0, 12, size=n_entry).astype(np.int64)
    runs = candidates._size_runs(key, doc, pos, sizes)
    made = unique(np.concatenate([c for c, _ in candidates._run_pairs(runs, sizes, t)]))
    a, b = split_codes(made)
    if nibbles:
        keep = blockjoin.coarse_ok(made, SimpleNamespace(coarse=rows, sizes=sizes), t)  # type: ignore[arg-type]
    else:
        keep = candidates._bound(sizes[a], sizes[b], np.minimum(fine[a], fine[b]), t)
    want = made[keep]
    for per_entry in (False, True):  # rows by text, or gathered in the entries' order
        held = rows[runs.doc] if per_entry else rows
        blocks = list(kernels.run_pairs(runs, t, (held, nibbles, per_entry), 7))
        assert len(blocks) > 3 and all(c.size <= 7 for c in blocks)
        assert np.array_equal(unique(np.concatenate(blocks)), want)
    plain = list(kernels.run_pairs(runs, t, None, 1000))
    assert np.array_equal(unique(np.concatenate(plain)), made)  # no sketch: _run_pairs' pairs
    # Pairs that only a saturated bucket keeps: a sum of the minima alone would drop them.
    full = 15 if nibbles else 255
    lo, hi = (rows[a] & 15, rows[b] & 15) if nibbles else (rows[a], rows[b])
    m = np.minimum(lo, hi)
    if nibbles:
        m = np.concatenate([m, np.minimum(rows[a] >> 4, rows[b] >> 4)], axis=1)
    saturated = (m == full).any(axis=1)
    by_sum = candidates._reaches(sizes[a], sizes[b], m.sum(axis=1, dtype=np.int64), t)
    assert (keep & saturated & ~by_sum).sum() > 0 and (~keep).sum() > 0
