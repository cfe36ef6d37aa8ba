"""split.subgroup_support: rows per subgroup value × split × class (engine/data/subgroups.py)."""

from __future__ import annotations

from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_run

PB_SUBGROUPS = (
    "Define the population and sampling/label-generation process, including synthetic or teacher-generated "
    "data. Record annotation uncertainty, selection bias, delayed labels and relevant subgroup coverage."
)


def subgroup_support(joined: Any, source_inputs: dict[str, Any]) -> Check:
    from claimcheck.engine.data import rows as data
    from claimcheck.engine.data import splits
    from claimcheck.engine.data import subgroups as sg
    from claimcheck.engine.textsafe import visible

    columns = list(source_inputs.get("subgroup_columns", []))
    if not columns:
        return not_run("split.subgroup_support", "no subgroup columns declared (source subgroup_columns)")
    present = [s for s in splits.SPLITS if s in set(joined.get_column(splits.SPLIT).unique().to_list())]
    sup = sg.support(joined, columns, splits.SPLIT, data.TARGET)
    low = sg.below_floor(sup, present)
    in_test = [x for x in low if x["split"] == "test"]
    status = "fail" if in_test else ("warn" if low else "pass")
    n_values = sum(len(per) for per in sup.values())
    shown = "; ".join(
        f"{visible(x['column'])}={visible(x['value'])} {x['rows']} in {x['split']}" for x in low[:6]
    )
    summary = f"{n_values} subgroup value(s) over {', '.join(map(visible, columns))}; " + (
        f"{len(low)} value × split cell(s) under {sg.SUBGROUP_MIN_SUPPORT} rows: {shown}"
        if low
        else f"every value has at least {sg.SUBGROUP_MIN_SUPPORT} rows in every split"
    )
    return Check(
        id="split.subgroup_support",
        status=status,
        summary=summary + (" — too few in the locked test for a per-subgroup figure" if in_test else ""),
        measured={"floor": sg.SUBGROUP_MIN_SUPPORT, "columns": columns, "support": sup, "below_floor": low},
        why="A claim about a subgroup needs rows of it in train to learn from and in the test to be judged on.",
        playbook=PB_SUBGROUPS,
    )
