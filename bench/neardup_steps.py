"""Where the near-duplicate search's time goes: each step of `near_duplicates` timed apart (wall / CPU s).

    .venv/bin/python bench/neardup_steps.py /tmp/nd2long20k/nd_long.parquet [--parts]

The parquet is one that bench/neardup_race.py writes (a `body` column). `--parts` also times pass 1's
pieces one thread at a time over the engine's chunks: normalisation (with the Arrow byte views), word
hashes, shingle hashes, per-text dedupe and the count table (needs the compiled loops).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import claimcheck.tui.cli  # noqa: E402, F401  (the app's Polars allocator option, before polars loads)

# isort: split
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from claimcheck.engine.audit.neardup import candidates, hashing, kernels, shingles, verify  # noqa: E402
from claimcheck.engine.audit.neardup.arrays import small_pages  # noqa: E402
from claimcheck.engine.audit.texts import distinct_texts  # noqa: E402


def timed(out: dict, name: str, f, *args):
    t, c = time.perf_counter(), time.process_time()
    r = f(*args)
    out[name] = (round(time.perf_counter() - t, 3), round(time.process_time() - c, 3))
    return r


def pass1_parts(texts) -> dict[str, float]:
    acc: dict[str, float] = {}

    def add(name, f, *args):
        t = time.perf_counter()
        r = f(*args)
        acc[name] = acc.get(name, 0.0) + time.perf_counter() - t
        return r

    counts = np.zeros(1 << shingles.COUNT_BITS, dtype=np.uint32)
    for lo, hi in shingles.chunks(texts, 1):
        data, offs = add("normalise", hashing.normalised_utf8, texts, np.arange(lo, hi))
        words, lens = add("word hashes", kernels.word_hashes, data, offs)
        h, d = add("shingle hashes", hashing.shingles_of_words, words, lens, 5)
        add("dedupe", kernels.distinct, h, np.bincount(d, minlength=hi - lo))
        add("count table", kernels.count, h, counts)
    return {k: round(v, 3) for k, v in acc.items()}


def main(argv: list[str]) -> int:
    with small_pages():  # as near_duplicates runs
        return _steps(argv)


def _steps(argv: list[str]) -> int:
    body = pl.read_parquet(argv[0]).get_column("body")
    df = pl.DataFrame({"row_id": np.arange(body.len()), "body": body})
    steps: dict[str, tuple[float, float]] = {}
    t0 = time.perf_counter()
    hashes = timed(steps, "row hashes", hashing.normalised_row_hashes, df, ["body"])
    texts, _, _ = timed(steps, "distinct texts", distinct_texts, df, ["body"], "row_id", hashes)
    if "--parts" in argv:
        if not kernels.available():
            print("--parts needs the compiled loops (pip install -e .)", file=sys.stderr)
            return 2
        print("pass 1, one thread:", pass1_parts(texts))
    pre = timed(steps, "build_prefixes", shingles.build_prefixes, texts, 5, 0.8)
    codes = timed(steps, "candidates", candidates.find_candidates, pre, 0.8)
    _, _, jac = timed(steps, "verify", verify.verify_pairs, texts, codes, pre.sizes, 5)
    print("steps (wall s, CPU s):", steps)
    print(
        f"total {time.perf_counter() - t0:.3f} s; {codes.size} candidates, "
        f"{int((jac >= 0.8 - 1e-12).sum())} text pairs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
