"""The source stage's checks of where the data came from: the preprocessing scripts that produced
the data files (pinned, optionally rebuilt) and the interpreter they ran under."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import Check
from claimcheck.engine.pipeline.checks import not_run
from claimcheck.engine.pipeline.context import StageContext, StageInputError
from claimcheck.engine.stages.source.inputs import Inputs, Preprocessing

PB_CODE = (
    "Retain inspectable transformation code. Fix retained transformation logic and rebuild from its source "
    "rather than stacking opaque repair datasets."
)
NO_SCRIPT = "no preprocessing script declared: the code that produced the data files is not retained"


def _path(ctx: StageContext, name: str, what: str) -> Path:
    p = ctx.resolve(name, inside=True, field="preprocessing")
    if not p.is_file():
        raise StageInputError(f"source 'preprocessing': {what} {name!r} not found (looked at {p})")
    return p


def _one(p: Preprocessing, inp: Inputs, ctx: StageContext, data_sha: dict[str, str]) -> dict[str, Any]:
    """The pin of one declared script and, with rebuild = true, what re-running it produced."""
    from claimcheck.engine.data import preprocessing as pre

    script = _path(ctx, p.script, "script")
    reads = [_path(ctx, r, f"file read by {p.script}") for r in p.reads]
    try:
        pinned = pre.pin(script, reads, Path(ctx.workspace))
    except pre.PreprocessingError as exc:
        raise StageInputError(f"source 'preprocessing': {exc}") from None
    output = p.output or (inp.files[0] if len(inp.files) == 1 else "")
    entry: dict[str, Any] = {
        "sha256": pinned["sha256"],
        "bytes": pinned["bytes"],
        "args": list(p.args),
        "output": output,
        "imports": [i["module"] for i in pinned["imports"]],
        "local_modules": pinned["local_modules"],
        "reads": pinned["reads"],
        "rebuild": p.rebuild,
    }
    if p.rebuild:
        ctx.progress(None, f"rebuilding {output} with {p.script}")
        got = pre.rebuild(script, list(p.args), reads, output, Path(ctx.workspace))
        entry["rebuilt"] = {
            "returncode": got["returncode"],
            "sha256": got["sha256"],
            "matches": bool(got["sha256"]) and got["sha256"] == data_sha.get(output, ""),
            **({"stderr_tail": got["stderr_tail"]} if "stderr_tail" in got else {}),
        }
        entry["_seconds"] = got.get("seconds", 0.0)
    return entry


def preprocessing(inp: Inputs, ctx: StageContext, checksum: Check) -> list[Check]:
    """source.preprocessing (the scripts, pinned and rebuilt) and source.preprocessing_environment."""
    if not inp.preprocessing:
        return [
            not_run(
                "source.preprocessing", NO_SCRIPT, why="Only retained code lets a reader rebuild the data."
            ),
            not_run("source.preprocessing_environment", f"not run: {NO_SCRIPT}"),
        ]
    data_sha = {f["path"]: f["sha256"] for f in checksum.measured["files"]}
    scripts = {p.script: _one(p, inp, ctx, data_sha) for p in inp.preprocessing}
    seconds = {k: v.pop("_seconds") for k, v in scripts.items() if "_seconds" in v}
    failed = [k for k, v in scripts.items() if v["rebuild"] and not v["rebuilt"]["matches"]]
    rebuilt = [k for k, v in scripts.items() if v["rebuild"] and v["rebuilt"]["matches"]]
    parts = [f"{len(scripts)} script(s) pinned by sha256 (replay fails if a byte of one changes)"]
    if rebuilt:
        parts.append(
            "rebuilt byte-identical: "
            + ", ".join(f"{scripts[k]['output']} by {k} ({seconds.get(k, 0):.1f} s)" for k in rebuilt)
        )
    for k in failed:
        r = scripts[k]["rebuilt"]
        why = (
            f"exit code {r['returncode']}"
            if r["returncode"]
            else ("no output written" if not r["sha256"] else "a different sha256")
        )
        parts.append(f"{k} did NOT rebuild {scripts[k]['output']} ({why})")
    return [
        Check(
            id="source.preprocessing",
            status="fail" if failed else "pass",
            summary="; ".join(parts),
            measured={"scripts": scripts},
            why="The evidence holds for data these exact scripts produced; a rebuild shows the data file is their output.",
            playbook=PB_CODE,
        ),
        _environment(inp, ctx),
    ]


def _environment(inp: Inputs, ctx: StageContext) -> Check:
    """The interpreter and the versions of what the scripts import (an observation: it is this machine's)."""
    from claimcheck.engine.data import preprocessing as pre

    imports: dict[str, dict[str, str]] = {}
    for p in inp.preprocessing:
        script = _path(ctx, p.script, "script")
        for i in pre.pin(script, [], Path(ctx.workspace))["imports"]:
            imports[i["module"]] = {k: v for k, v in i.items() if k != "module"}
    env = pre.environment()
    unresolved = sorted(m for m, i in imports.items() if i["kind"] == "unresolved")
    installed = ", ".join(f"{i['distribution']} {i['version']}" for i in imports.values() if "version" in i)
    return Check(
        id="source.preprocessing_environment",
        status="warn" if unresolved else "info",
        summary=f"{env['implementation']} {env['python']}; "
        + (installed or "no third-party imports")
        + (f"; import(s) not found on this machine: {', '.join(unresolved)}" if unresolved else ""),
        measured={**env, "imports": dict(sorted(imports.items()))},
        replay="observation",
        why="A script's output can depend on the interpreter and library versions it ran under.",
        playbook=PB_CODE,
    )


# ---------------------------------------------------------------- labels and selection

PB_LABELS = (
    "Define the population and sampling/label-generation process, including synthetic or teacher-generated "
    "data. Record annotation uncertainty, selection bias, delayed labels and relevant subgroup coverage."
)
REAL_WORLD = "real_world_decision"


def teacher_label(measured: dict[str, Any]) -> str:
    """'teacher model ID@REVISION' when a source.label_provenance record says a model wrote the labels, else ''."""
    if measured.get("method") != "teacher_model":
        return ""
    return f"teacher model {measured.get('teacher_model', '')}@{measured.get('teacher_revision', '')}"


def label_provenance(inp: Inputs, ctx: StageContext, claim: dict[str, Any]) -> Check:
    """source.label_provenance: how the labels were made, their agreement and delay (a decision)."""
    from claimcheck.engine.data.rows import sha256_file
    from claimcheck.engine.shapes.data import LabelProvenance

    lp = inp.label_provenance
    if not lp.method:
        return not_run(
            "source.label_provenance",
            "how the labels were made is not stated (label_provenance.method): their quality is unknown",
            why="Who or what wrote the labels bounds what any figure scored against them can mean.",
        )
    digest = ""
    if lp.script:
        p = ctx.resolve(lp.script, inside=True, field="label_provenance.script")
        if not p.is_file():
            raise StageInputError(
                f"source 'label_provenance.script': {lp.script!r} not found (looked at {p})"
            )
        digest = sha256_file(p)
    shape = LabelProvenance(**lp.model_dump(), script_sha256=digest)
    teacher = teacher_label(shape.model_dump())
    problems, status = [], "pass"
    if lp.method == "unknown":
        problems.append("how the labels were made is unknown")
    if teacher:
        problems.append(
            f"labels written by {teacher}: every figure measures agreement with it, not correctness"
        )
    if not lp.agreement.strip():
        problems.append("annotation uncertainty not stated (give an agreement figure or 'not measured')")
    if problems:
        status = "warn"
    if teacher and claim.get("target_kind") == REAL_WORLD:
        status = "fail"
        problems.insert(0, "the claim is about real-world decisions but the labels are a model's output")
    who = {
        "human": f"human annotators{f' ({lp.annotators})' if lp.annotators else ''}",
        "teacher_model": teacher,
        "rule": f"a rule in {lp.script} (sha256 {digest[:12]}…)",
        "script": f"a script {lp.script} (sha256 {digest[:12]}…)",
        "unknown": "unknown",
    }[lp.method]
    said = [f"labels by {who}", f"agreement: {lp.agreement or 'not stated'}"]
    said.append(f"final {lp.label_delay_days:g} day(s) after the observation")
    return Check(
        id="source.label_provenance",
        status=status,
        basis="decided",
        summary="; ".join(said) + ("; " + "; ".join(problems) if problems else ""),
        measured=shape.dump(),
        why="Teacher, rule or human labels differ in what a figure scored against them can claim.",
        playbook=PB_LABELS,
    )


def label_maturity(kept: Any, inp: Inputs, cov: str) -> Check:
    """source.label_maturity: rows observed less than label_delay_days before as_of (labels not yet final)."""
    import datetime as dt

    import polars as pl

    from claimcheck.engine.data.rows import resolve_time_unit, time_expr

    delay = inp.label_provenance.label_delay_days
    if not inp.label_provenance.method:
        return not_run(
            "source.label_maturity",
            "how the labels were made is not stated (label_provenance), so neither is their delay",
            coverage=cov,
        )
    if not inp.time_column:
        return not_run(
            "source.label_maturity",
            "no time column declared: whether labels were final at the time cut cannot be checked",
            coverage=cov,
        )
    unit = resolve_time_unit(inp.time_column, kept.schema[inp.time_column], inp.time_unit)
    if unit == "ordinal":
        return not_run(
            "source.label_maturity", "the time column is an order, not a date: no label delay applies"
        )
    as_of = (
        dt.datetime.fromisoformat(inp.as_of.replace("Z", "+00:00")).replace(tzinfo=None)
        if inp.as_of
        else dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)
    )
    cut = as_of - dt.timedelta(days=delay)
    t = kept.select(time_expr(inp.time_column, kept.schema[inp.time_column], unit).alias("t"))
    immature = int(t.select(((pl.col("t") > cut) & (pl.col("t") <= as_of)).sum()).item())
    dated = int(t.get_column("t").is_not_null().sum())
    share = immature / dated if dated else 0.0
    return Check(
        id="source.label_maturity",
        status="warn" if immature else "pass",
        summary=(
            f"{immature:,} of {dated:,} dated row(s) ({share:.1%}) observed after {cut.isoformat()}: "
            f"their labels were not final at {as_of.isoformat()} (label delay {delay:g} days)"
            if immature
            else f"every dated row's label was final at {as_of.isoformat()} (label delay {delay:g} days)"
        )
        + ("" if inp.as_of else " (the run time; set 'as_of' to pin it)"),
        coverage=cov,
        measured={
            "label_delay_days": delay,
            "as_of": as_of.isoformat(),
            "mature_before": cut.isoformat(),
            "dated_rows": dated,
            "immature_rows": immature,
            "immature_share": share,
        },
        replay="compare" if inp.as_of else "observation",
        why="A label not yet final at the time cut is a guess the data records as an outcome.",
        playbook=PB_LABELS,
    )


def selection(inp: Inputs) -> Check:
    """source.selection: how rows came into the data set (a recorded decision)."""
    if not inp.selection.strip():
        return not_run(
            "source.selection",
            "how rows were selected into the data set is not stated: selection bias cannot be assessed",
        )
    return Check(
        id="source.selection",
        status="pass",
        basis="decided",
        summary=f"selection recorded: {inp.selection.strip()[:300]}",
        measured={"selection": inp.selection},
        why="Which rows reached the data set decides which population the figures speak for.",
        playbook=PB_LABELS,
    )
