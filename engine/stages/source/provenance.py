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
