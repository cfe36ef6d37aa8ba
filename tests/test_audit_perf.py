"""The exact near-duplicate search (prefix filtering + sketch bound) against brute force on small data."""

from __future__ import annotations

import itertools
import random

import polars as pl
import pytest

from engine.audit import neardup


def _shingles(text: str, k: int) -> set[str]:
    w = text.split(" ")
    if len(w) < k:
        return {" ".join(w)}
    return {" ".join(w[i : i + k]) for i in range(len(w) - k + 1)}


def _brute(df: pl.DataFrame, cols: list[str], t: float, k: int) -> set[tuple[int, int]]:
    norm = df.select("row_id", *[neardup.norm_text_expr(c).alias(c) for c in cols])
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
def test_matches_brute_force(seed: int, t: float, k: int) -> None:
    df = _frame(seed, 160)
    res = neardup.near_duplicates(df, ["subject", "body"], threshold=t, shingle_size=k)
    got = set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True))
    want = _brute(df, ["subject", "body"], t, k)
    assert want, "the fixture should hold near duplicates"
    assert got == want
    assert res.candidates >= res.verified_text_pairs


def test_long_and_tiny_texts_take_the_single_shingle_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # A small LONG_PREFIX forces every text through the single-shared-shingle path; results must not change.
    df = _frame(7, 120)
    want = _brute(df, ["body"], 0.7, 2)
    monkeypatch.setattr(neardup, "LONG_PREFIX", 2)
    res = neardup.near_duplicates(df, ["body"], threshold=0.7, shingle_size=2)
    assert set(zip(res.pairs["row_a"].to_list(), res.pairs["row_b"].to_list(), strict=True)) == want


def test_chunking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    df = _frame(8, 150)
    full = neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=3)
    for name, value in [
        ("CHUNK_TEXTS", 7),
        ("PAIR_BLOCK", 5),
        ("VERIFY_SHINGLES", 11),
        ("SIG_BLOCK", 13),
        ("GEN_BLOCK", 5),
    ]:
        monkeypatch.setattr(neardup, name, value)
    small = neardup.near_duplicates(df, ["body"], threshold=0.6, shingle_size=3)
    assert small.pairs.equals(full.pairs)
    assert full.pairs.height > 0


def test_sketch_bound_never_drops_a_true_pair() -> None:
    import numpy as np

    df = _frame(9, 100)
    texts, _, _ = neardup._texts(df, ["body"], "row_id")
    _, _, sizes, sketch = neardup._prefixes(texts, 2, 0.5)
    n = texts.len()
    a, b = np.triu_indices(n, 1)
    codes = (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)
    ok = neardup._sketch_ok(codes, sizes, sketch, 0.5)
    _, _, jac = neardup._verify(texts, codes, sizes, 2)
    assert ok[jac >= 0.5].all()
    assert not ok.all(), "the bound should prune something"


def _source_and_split(tmp_path, **split_kw):
    from engine.context import StageContext
    from engine.stages import source, split

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
    # The same definition recomputed (no saved file recorded) gives the identical check.
    bare = src.model_copy(deep=True)
    bare.check("source.near_duplicates").measured.pop("pairs_path")
    recomputed = split.run(inputs, {"source": bare}, ctx).check("split.near_duplicate_overlap")
    assert calls == [1, 1]
    assert recomputed.measured == reused.measured


def test_tampered_pairs_file_is_refused(tmp_path) -> None:
    from engine.evidence import EvidenceError

    src, split, inputs, ctx = _source_and_split(tmp_path)
    path = ctx.session_dir / src.check("source.near_duplicates").measured["pairs_path"]
    pl.read_parquet(path).head(1).write_parquet(path)
    with pytest.raises(EvidenceError, match="pairs_sha256"):
        split.run(inputs, {"source": src}, ctx)


def test_replay_compares_pairs_hash_without_writing(tmp_path) -> None:
    from engine.context import StageContext
    from engine.stages import source

    src, _, _, ctx = _source_and_split(tmp_path)
    path = ctx.session_dir / src.check("source.near_duplicates").measured["pairs_path"]
    path.unlink()
    replay_ctx = StageContext(session_dir=ctx.session_dir, workspace=tmp_path, replay=True)
    again = source.run(source.Inputs(**src.inputs), {}, replay_ctx)
    assert not path.exists()
    assert again.check("source.near_duplicates").measured == src.check("source.near_duplicates").measured
