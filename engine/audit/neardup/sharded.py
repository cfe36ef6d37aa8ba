"""Candidate pairs on the bounded path, from the prefix entries and sketches on disk (ondisk.py): the
same codes as candidates.find_candidates, found shard by shard.

- Single-shingle path: where single entries (tiny or long-prefix texts) are the fewer, their shingles
  are gathered first, then only the entries holding one of them are read back (tickets: a few); else
  (long documents) the entries are read back one shard of shingle hashes at a time (shingle_shards).
- Ordered pairs of prefix shingles: generated a span of texts at a time from the entry files and
  written to one file per pass of pair hashes (candidates.shard_passes), each pass matched in turn.
- The sketch bounds read the sketches of each block's candidate ids only.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from claimcheck.engine.audit.neardup.arrays import unique
from claimcheck.engine.audit.neardup.candidates import (
    BOUNDED_SIG_BLOCK,
    LONG_PREFIX,
    Packing,
    _pair_signatures,
    match_pass,
    shard_passes,
    single_pairs_of,
    sketch_ok,
)
from claimcheck.engine.audit.neardup.ondisk import DiskPrefixes


def find_candidates(p: DiskPrefixes, threshold: float) -> np.ndarray:
    """candidates.find_candidates(prefixes, threshold, bounded=True) on prefixes held on disk."""
    sizes = p.sizes

    def bound(c: np.ndarray) -> np.ndarray:
        return c[sketch_ok(c, p, threshold)]

    plen = np.diff(p.offs)
    tiny = sizes <= (1 + threshold) / threshold - 1 + 1e-9
    big = p.ext > LONG_PREFIX
    out: list[np.ndarray] = []
    if (plen[tiny | big] > 0).any():
        out.append(bound(_single(p, tiny, big, threshold)))
    sel = np.flatnonzero(~big & (plen >= 2))
    for part in _passes(p, sel):
        out.extend(match_pass(part, sizes, threshold, bound))
    return unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


def _single(p: DiskPrefixes, tiny: np.ndarray, big: np.ndarray, threshold: float) -> np.ndarray:
    """The single-shingle path's pairs before the sketch bound (candidates._single_pairs)."""
    single_text = tiny | big
    plen = np.diff(p.offs)
    n_single = int(plen[single_text].sum())
    held: np.ndarray | None = None
    if 2 * n_single < int(p.offs[-1]):
        # As candidates._shared_with does where single entries are the fewer: only the entries whose
        # shingle a single entry holds take part.
        parts = []
        for lo, hi in p.spans(np.where(single_text, plen, 0)):
            tok, _ = p.entries(lo, hi)
            doc = np.repeat(np.arange(lo, hi), plen[lo:hi])
            parts.append(tok[single_text[doc]])
        held = unique(np.concatenate(parts))
        del parts
    toks, docs, ranks = [], [], []
    for lo, hi in p.spans():
        local, doc = p.local(lo, hi)
        tok, rank = local.tok, local.rank
        if held is not None:
            at = np.minimum(np.searchsorted(held, tok), held.size - 1)
            keep = held[at] == tok
            tok, rank, doc = tok[keep], rank[keep], doc[keep]
        toks.append(tok)
        docs.append(doc)
        ranks.append(rank)
    tok, doc, rank = np.concatenate(toks), np.concatenate(docs), np.concatenate(ranks)
    del toks, docs, ranks
    return single_pairs_of(tok, doc, rank, single_text[doc], (p.sizes, tiny, big), threshold)


def _passes(p: DiskPrefixes, sel: np.ndarray) -> Iterator[tuple[np.ndarray, Packing]]:
    """The prefix-pair signatures of the texts `sel` (candidates._signature_passes on the bounded path:
    the same passes), generated from the entry files a span of texts at a time."""
    if sel.size == 0:
        return
    n = p.sizes.size
    plen = np.diff(p.offs)
    n_sig = np.zeros(n, dtype=np.int64)
    n_sig[sel] = plen[sel] * (plen[sel] - 1) // 2
    passes = max(1, -(-int(n_sig.sum()) // BOUNDED_SIG_BLOCK))
    # A second shingle's position is below its text's extended prefix length (<= LONG_PREFIX here).
    pack = Packing(max(int(n - 1).bit_length(), 1), max(int(p.ext[sel].max() - 1).bit_length(), 1))

    def gen() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        # Spans weighed by their signatures and entries (long-prefix texts' entries are read too).
        for lo, hi in p.spans(n_sig + plen, BOUNDED_SIG_BLOCK):
            mine = sel[np.searchsorted(sel, lo) : np.searchsorted(sel, hi)]
            if mine.size:
                local, doc = p.local(lo, hi)
                yield _pair_signatures(local, doc, mine, pack)

    yield from shard_passes(gen(), passes, pack)
