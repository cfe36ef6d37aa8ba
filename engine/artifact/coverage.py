"""artifact.coverage_bias: when some arm failed (or a label lies outside the class order) on locked-test
rows, the paired figures are computed on the rows every arm scored; this check compares those rows with
the ones left out — the target (class mix, or a numeric target's distribution), the free-text input's
length and each slice column's mix — so a reader sees whether the shared rows are a biased subset."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from claimcheck.engine.artifact.common import PB_ARMS
from claimcheck.engine.evidence import Check
from claimcheck.engine.shapes import artifact as shapes

# A scored / unscored difference from which the check warns: a class or slice value's share differing
# by more than BIAS_SHARE; the unscored rows' median input length differing from the scored rows' by
# more than BIAS_LENGTH of the scored median; a numeric target's median differing by more than
# BIAS_TARGET_SD standard deviations of the scored rows' target.
BIAS_SHARE = 0.10
BIAS_LENGTH = 0.25
BIAS_TARGET_SD = 0.25


@dataclass(frozen=True)
class Coverage:
    """What the check compares: the locked test rows, which of them every arm scored, and how many
    each arm left unscored."""

    test: Any  # the locked test rows (polars DataFrame, with `target`)
    scored: Any  # bool per row: every arm scored it and its label counts
    unscored_by_arm: dict[str, int]
    numeric: bool  # a numeric target (regression) rather than classes
    slice_columns: list[str]
    text_columns: list[str]
    coverage: str = "full"  # the locked test read: all of it, or a sample (artifact inputs.max_test_rows)


def _shares(values: Any) -> dict[str, float]:
    import numpy as np

    if values.size == 0:
        return {}
    keys, counts = np.unique(values, return_counts=True)
    return {str(k): round(float(c) / values.size, 6) for k, c in zip(keys, counts, strict=True)}


def _mix(values: Any, scored: Any) -> shapes.MixDifference:
    """Shares of each value among the scored and the unscored rows, their largest difference and a
    chi-square test of independence on the 2 × values table (None when it cannot be formed)."""
    import numpy as np
    from scipy import stats

    a, b = _shares(values[scored]), _shares(values[~scored])
    keys = sorted(set(a) | set(b))
    diff = max((abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys), default=0.0)
    table = np.array([[np.sum(values[m] == k) for k in keys] for m in (scored, ~scored)])
    table = table[:, table.sum(axis=0) > 0]
    p = None
    if table.shape[1] > 1 and (table.sum(axis=1) > 0).all():
        p = float(stats.chi2_contingency(table)[1])
    return shapes.MixDifference(scored=a, unscored=b, max_share_difference=round(diff, 6), p_value=p)


def _lengths(test: Any, cols: list[str], scored: Any) -> shapes.LengthDifference | None:
    """Characters over the free-text inputs per row: medians of scored and unscored rows and a
    Mann-Whitney U test between them."""
    import numpy as np
    import polars as pl
    from scipy import stats

    if not cols:
        return None
    n = test.select(
        pl.sum_horizontal(pl.col(c).cast(pl.String).fill_null("").str.len_chars() for c in cols)
    ).to_series()
    n = n.to_numpy().astype(np.float64)
    a, b = n[scored], n[~scored]
    p = float(stats.mannwhitneyu(a, b).pvalue) if a.size and b.size else None
    return shapes.LengthDifference(
        columns=cols,
        scored_median=float(np.median(a)) if a.size else 0.0,
        unscored_median=float(np.median(b)) if b.size else 0.0,
        p_value=p,
    )


def _target(cov: Coverage) -> tuple[shapes.MixDifference | None, shapes.TargetDifference | None]:
    import numpy as np

    if not cov.numeric:
        return _mix(
            np.asarray([str(v) for v in cov.test["target"].to_list()], dtype=object), cov.scored
        ), None
    y = cov.test["target"].cast(float, strict=False).to_numpy().astype(np.float64)
    a, b = y[cov.scored & np.isfinite(y)], y[~cov.scored & np.isfinite(y)]
    sd = float(np.std(a)) if a.size > 1 else 0.0
    return None, shapes.TargetDifference(
        scored_median=float(np.median(a)) if a.size else 0.0,
        unscored_median=float(np.median(b)) if b.size else 0.0,
        scored_sd=sd,
    )


def _differs(m: shapes.CoverageBias) -> list[str]:
    """The aspects whose scored / unscored difference passes its threshold."""
    out = []
    if m.class_mix is not None and m.class_mix.max_share_difference > BIAS_SHARE:
        out.append("class mix")
    t = m.target
    if (
        t is not None
        and t.scored_sd > 0
        and abs(t.unscored_median - t.scored_median) > BIAS_TARGET_SD * t.scored_sd
    ):
        out.append("target")
    ln = m.input_length
    if ln is not None and abs(ln.unscored_median - ln.scored_median) > BIAS_LENGTH * max(
        ln.scored_median, 1.0
    ):
        out.append("input length")
    out.extend(f"slice {c}" for c, s in m.slices.items() if s.max_share_difference > BIAS_SHARE)
    return out


def coverage_bias(cov: Coverage) -> Check:
    """Compare the rows every arm scored with the rest; `pass` when there is no rest."""
    import numpy as np

    scored = np.asarray(cov.scored, dtype=bool)
    n, k = int(scored.size), int(scored.sum())
    m = shapes.CoverageBias(rows=n, scored_rows=k, unscored_rows=n - k, unscored_by_arm=cov.unscored_by_arm)
    if k == n:
        summary = f"every arm scored all {n} locked-test rows: the paired figures cover them all"
        return _check("pass", summary, m, cov.coverage)
    cov = replace(cov, scored=scored)
    class_mix, target = _target(cov)
    slices = {
        c: _mix(np.asarray([str(v) for v in cov.test[c].to_list()], dtype=object), scored)
        for c in cov.slice_columns
        if c in cov.test.columns
    }
    m = m.model_copy(
        update={
            "class_mix": class_mix,
            "target": target,
            "input_length": _lengths(
                cov.test, [c for c in cov.text_columns if c in cov.test.columns], scored
            ),
            "slices": slices,
        }
    )
    m = m.model_copy(update={"differs": _differs(m)})
    return _check("warn" if m.differs else "info", _summary(m), m, cov.coverage)


def _summary(m: shapes.CoverageBias) -> str:
    arms = ", ".join(f"{a} {v}" for a, v in m.unscored_by_arm.items() if v)
    parts = [
        f"{m.unscored_rows} of {m.rows} locked-test rows not scored by every arm ({arms or 'labels outside the class order'})"
    ]
    if m.class_mix is not None:
        parts.append(f"class shares differ by up to {m.class_mix.max_share_difference:.3f}")
    if m.target is not None:
        parts.append(
            f"target median {m.target.scored_median:.4g} scored vs {m.target.unscored_median:.4g} unscored"
        )
    if m.input_length is not None:
        parts.append(
            f"median input length {m.input_length.scored_median:.0f} vs {m.input_length.unscored_median:.0f} characters"
        )
    parts += [f"slice {c} shares differ by up to {s.max_share_difference:.3f}" for c, s in m.slices.items()]
    tail = f"paired figures use the {m.scored_rows} rows every arm scored"
    lead = (
        f"unscored rows differ in {', '.join(m.differs)}"
        if m.differs
        else "no difference beyond the thresholds"
    )
    return f"{lead}: " + "; ".join(parts) + f"; {tail}"


def _check(status: str, summary: str, m: shapes.CoverageBias, coverage: str) -> Check:
    return Check(
        id="artifact.coverage_bias",
        status=status,
        summary=summary,
        coverage=coverage,
        measured=m,
        why="Paired figures on the rows every arm scored describe those rows; when failures cluster in one "
        "class, length or slice, they are not the test the claim names.",
        playbook=PB_ARMS,
    )


def arms_coverage(
    test: Any, label_ok: Any, preds: dict[str, Any], inputs: Any, upstream: dict[str, Any], coverage: str
) -> Check:
    """coverage_bias over the arms' locked-test predictions (arm → {"ok": bool per row, ...}):
    the shared rows are those every arm scored whose label counts (`label_ok`); `coverage` is the
    locked test's (full, or the sample the artifact inputs bound)."""
    import numpy as np

    from claimcheck.engine.data.rows import text_inputs
    from claimcheck.engine.stats.registry import target_type

    n = test.height
    oks = [np.asarray(p["ok"][:n], dtype=bool) for p in preds.values()]
    shared = np.logical_and.reduce([np.asarray(label_ok, dtype=bool), *oks])
    return coverage_bias(
        Coverage(
            test=test,
            scored=shared,
            unscored_by_arm={a: int(n - ok.sum()) for a, ok in zip(preds, oks, strict=True)},
            numeric=target_type(upstream["claim"].inputs) == "numeric",
            slice_columns=list(inputs.slice_columns),
            text_columns=text_inputs(upstream["source"].inputs),
            coverage=coverage,
        )
    )
