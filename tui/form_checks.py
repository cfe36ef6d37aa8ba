"""Checks a stage form adds to its inputs' own validation, from the engine's rules (the form computes
nothing itself): the source's named columns against the data files' columns, and the claim's
completeness (claim.completeness's list of open fields).

`form_check(stage, workspace)` gives a function from the form's data to [(field path, problem)], or
None for a stage without such a check. Each runs on every edit: the files' columns are read once
per list of files (a CSV's header line) and kept.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

Problems = list[tuple[str, str]]
FormCheck = Callable[[dict[str, Any]], Problems]


def _source_check(workspace: Path) -> FormCheck:
    import polars as pl

    from claimcheck.engine.data.peek import file_columns, time_unit_problem
    from claimcheck.engine.errors import ClaimcheckError
    from claimcheck.engine.stages.source.inputs import Inputs

    known: dict[tuple[str, ...], list[str] | str] = {}
    units: dict[tuple[tuple[str, ...], str, str], str] = {}

    def check(data: dict[str, Any]) -> Problems:
        inp = Inputs.model_validate(data)
        if not inp.files or inp.allow_outside_workspace:
            return []
        key = tuple(inp.files)
        if key not in known:
            try:
                known[key] = file_columns(workspace, list(key))
            except ClaimcheckError as exc:
                known[key] = str(exc)
        have = known[key]
        if isinstance(have, str):
            return [("files", have)]
        out: Problems = []
        for field, cols in inp.named_columns().items():
            missing = [c for c in cols if c and c not in have]
            if missing:
                out.append(
                    (field, f"column(s) {missing} not in the data file; its columns: {', '.join(have)}")
                )
        unit_key = (key, inp.time_column, inp.time_unit)
        if unit_key not in units:  # the type of the time column needs a scan: once per choice
            try:
                units[unit_key] = time_unit_problem(workspace, list(key), inp.time_column, inp.time_unit)
            except (ClaimcheckError, pl.exceptions.PolarsError) as exc:
                units[unit_key] = str(exc).splitlines()[0]
        if units[unit_key]:
            out.append(("time_unit", units[unit_key]))
        return out

    return check


def _claim_check(_: Path) -> FormCheck:
    from claimcheck.engine.stages.claim.inputs import Inputs, missing_fields

    def check(data: dict[str, Any]) -> Problems:
        return [
            (f, "required (claim.completeness fails while it is open)")
            for f in missing_fields(Inputs.model_validate(data))
        ]

    return check


CHECKS: dict[str, Callable[[Path], FormCheck]] = {"source": _source_check, "claim": _claim_check}


def form_check(stage: str, workspace: Path) -> FormCheck | None:
    """The stage's check, over inputs its own Inputs model accepts (a form of another model — a
    stand-in stage module — gets none)."""
    from pydantic import ValidationError

    make = CHECKS.get(stage)
    if make is None:
        return None
    check = make(workspace)

    def guarded(data: dict[str, Any]) -> Problems:
        try:
            return check(data)
        except ValidationError:
            return []

    return guarded


def column_choices(stage: str, workspace: Path, data: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """The source form's column fields as choices among the data files' own columns — one column
    (label, id, time, weight) or several (input, text, entity, subgroup columns) — read from the files the inputs name ({} for another stage, or when the files cannot
    be read: the field stays typed, and the source check says what is wrong)."""
    if stage != "source":
        return {}
    from pydantic import ValidationError

    from claimcheck.engine.data.peek import file_columns
    from claimcheck.engine.errors import ClaimcheckError
    from claimcheck.engine.stages.source.inputs import Inputs

    try:
        inp = Inputs.model_validate(data)
        if not inp.files or inp.allow_outside_workspace:
            return {}
        have = file_columns(workspace, list(inp.files))
    except (ValidationError, ClaimcheckError, OSError):
        return {}
    named = inp.named_columns()
    one = [f for f in named if Inputs.model_fields[f].annotation is str]
    many = [f for f in named if Inputs.model_fields[f].annotation == list[str]]
    return {f: ("", *have) for f in one} | {f: tuple(have) for f in many}


def own_placeholders(stage: str, workspace: Path, source: dict[str, Any]) -> dict[str, str]:
    """A stage form's placeholders on the person's own file, drawn from it, in place of the model's
    examples from the sample tickets ({} for a session on the sample data; engine/stages/own_data.py)."""
    from claimcheck.engine.data.peek import peek
    from claimcheck.engine.errors import ClaimcheckError
    from claimcheck.engine.stages.own_data import SAMPLE_EXAMPLES, on_own_data, own_examples

    files = [str(f) for f in source.get("files") or []]
    if stage not in SAMPLE_EXAMPLES or not on_own_data(files):
        return {}
    try:
        seen = peek(workspace, files[0])
    except (ClaimcheckError, OSError):
        seen = None  # unreadable here: neutral placeholders (the source check says why)
    return own_examples(stage, source, seen)


def form_order(stage: str, claim: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """(the fields a stage form shows first, a line saying why) for the claim's task: a contract of a
    claim without fine-tuning leads with what its scikit-learn contract reads."""
    if stage == "contract" and claim.get("fine_tuning") is False:
        from claimcheck.engine.stages.contract.learner import FIELDS_READ

        return FIELDS_READ, (
            "The claim has fine_tuning = false: the candidate learner and the fields its contract reads "
            "come first; the fine-tuning fields after them do not apply."
        )
    if stage == "baseline" and claim and _numeric(claim):
        return NUMERIC_BASELINE_FIELDS, (
            "The claim's target is numeric: the regression learners' fields come first; the class and "
            "TF-IDF fields after them do not apply."
        )
    return (), ""


# The baseline inputs a numeric target's learners (engine/baseline/learners.py REG_TRIVIAL,
# REG_CONVENTIONAL) and evaluation read; the others are for classes or free text.
NUMERIC_BASELINE_FIELDS = (
    "learners",
    "cv",
    "cv_folds",
    "cv_below_rows",
    "trivial_reference",
    "hgb_max_iter",
    "seed",
    "unit",
    "bootstrap_resamples",
    "bootstrap_seed",
)


def _numeric(claim: dict[str, Any]) -> bool:
    from claimcheck.engine.stats.registry import target_type

    return target_type(claim) == "numeric"


__all__ = [
    "NUMERIC_BASELINE_FIELDS",
    "FormCheck",
    "column_choices",
    "form_check",
    "form_order",
    "own_placeholders",
]
