"""artifact.subgroups: every arm's primary metric per subgroup value (the source's subgroup_columns) on
the locked-test rows every arm scored, each with its bootstrap interval over the independent unit,
and the candidate's paired difference to every comparator; the largest regression is named."""

from __future__ import annotations

from typing import Any

from claimcheck.engine.artifact.common import PB_REPORT, band
from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_run


def _renorm(p: Any) -> Any:
    import numpy as np

    p = np.clip(np.asarray(p, dtype=np.float64), 0.0, None)
    return p / p.sum(axis=1, keepdims=True)


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    """An interval as TOML values (numpy scalars as Python numbers; None left out)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if v is None:
            continue
        out[k] = v.item() if hasattr(v, "item") else v
    return out


def _one(sc: Any, shared: Any, mask: Any) -> dict[str, Any]:
    """Each arm's interval and the candidate's paired differences on the rows of one subgroup value."""
    from claimcheck.engine.stats import registry, uncertainty

    ys = sc.y[shared][mask]
    us = sc.units[shared][mask] if sc.units is not None else None
    labels = sorted(set(ys.tolist()))
    boot = uncertainty.Bootstrap(
        n=sc.inputs.bootstrap_resamples, seed=sc.inputs.seed, classes=sc.classes, labels=labels
    )
    m, scoring = registry.get(sc.metric), sc.scoring(labels)
    proba = {a: _renorm(p["proba"][shared][mask]) for a, p in sc.preds.items()}
    arms, diffs = {}, {}
    for a, p in proba.items():
        try:
            arms[a] = _plain(registry.interval(m, (ys, p, us), boot, scoring))
        except ValueError as exc:  # the metric is undefined on these rows (one class only, for AUROC)
            arms[a] = {"undefined": str(exc)}
    for comp in (a for a in proba if a != "candidate"):
        try:
            rows = (ys, proba["candidate"], proba[comp], us)
            diffs[comp] = _plain(registry.paired_difference(m, rows, boot, scoring))
        except ValueError as exc:
            diffs[comp] = {"undefined": str(exc)}
    return {"rows": int(mask.sum()), "arms": arms, "differences": diffs}


def _worst(table: dict[str, Any], lower: bool) -> dict[str, Any] | None:
    """The subgroup × comparator where the candidate does worst (its paired difference most against it)."""
    sign = 1.0 if lower else -1.0
    cands = [
        {"subgroup": key, "versus": comp, **d}
        for key, entry in table.items()
        for comp, d in entry["differences"].items()
        if "estimate" in d and sign * d["estimate"] > 0
    ]
    return max(cands, key=lambda r: sign * r["estimate"], default=None)


def subgroups(sc: Any, shared: Any) -> Check:
    import numpy as np

    from claimcheck.engine.data import subgroups as sg
    from claimcheck.engine.stats import registry
    from claimcheck.engine.textsafe import visible

    if not sc.subgroups:
        return not_run("artifact.subgroups", "no subgroup columns declared (source subgroup_columns)")
    table: dict[str, Any] = {}
    left_out = []
    for col in sc.subgroups:
        vals = np.asarray(sg.values_of(sc.test.get_column(col)), dtype=object)[shared]
        for v in sorted(set(vals.tolist())):
            mask = vals == v
            if int(mask.sum()) < sg.SUBGROUP_MIN_SUPPORT:
                left_out.append({"subgroup": f"{col}={v}", "rows": int(mask.sum())})
                continue
            table[f"{col}={v}"] = {"column": col, "value": v, **_one(sc, shared, mask)}
    lower = registry.lower_is_better(sc.metric)
    worst = _worst(table, lower)
    significant = [
        f"{key} vs {comp}"
        for key, entry in table.items()
        for comp, d in entry["differences"].items()
        if "lo" in d and ((d["lo"] > 0) if lower else (d["hi"] < 0))
    ]
    parts = [f"{sc.metric} in {len(table)} subgroup(s) over {', '.join(map(visible, sc.subgroups))}"]
    if worst:
        parts.append(
            f"largest regression: {visible(worst['subgroup'])} vs {worst['versus']} "
            f"{worst['estimate']:+.4f} {band(worst)}"
        )
    else:
        parts.append("the candidate is at least as good as every comparator in every subgroup")
    if significant:
        parts.append(f"interval excludes zero against the candidate in {', '.join(significant[:4])}")
    if left_out:
        parts.append(f"{len(left_out)} value(s) under {sg.SUBGROUP_MIN_SUPPORT} rows left out")
    return Check(
        id="artifact.subgroups",
        status="warn" if significant or left_out else "pass",
        summary="; ".join(parts),
        coverage=f"{int(shared.sum())} test rows scored by every arm",
        measured={
            "metric": sc.metric,
            "unit": sc.unit_kind,
            "floor": sg.SUBGROUP_MIN_SUPPORT,
            "subgroups": table,
            "largest_regression": {k: v for k, v in (worst or {}).items()},
            "left_out": left_out,
        },
        why="A claim that holds on average can fail a group it must serve; each figure carries its interval.",
        playbook=PB_REPORT,
    )
