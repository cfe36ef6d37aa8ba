"""The code that produced a data file: its scripts pinned by sha256, their imports, and a rebuild.

A source stage declares each script (`preprocessing` in engine/stages/source/inputs.py). `pin` hashes
the script, finds its imports with `ast` (never by running it), classifies each as the standard
library, an installed distribution (with its version), a module beside the script (hashed too, so
a change to a helper module is a change to the code) or unresolved, and hashes the extra files the
script reads. `rebuild` copies the script, its local modules and what it reads into a scratch
folder with the same relative paths, runs it there with this interpreter, and hashes the output it
wrote, which the source stage compares with the pinned data file.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# A rebuild running longer than this is stopped and reported (not a hang of the source stage).
REBUILD_TIMEOUT_S = 600.0
# Characters of a failed rebuild's stderr kept in the record.
STDERR_TAIL = 600


class PreprocessingError(ValueError):
    """A declared script cannot be read or parsed (the message names it)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def imports_of(source: str, name: str) -> list[str]:
    """The top-level module names a script imports (absolute imports only), sorted."""
    try:
        tree = ast.parse(source, filename=name)
    except SyntaxError as exc:
        raise PreprocessingError(f"{name} is not valid Python (line {exc.lineno}: {exc.msg})") from None
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return sorted(found)


def _distributions() -> dict[str, list[str]]:
    try:
        return importlib.metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - a broken metadata entry must not stop the audit
        return {}


def classify(module: str, script_dir: Path, dists: dict[str, list[str]]) -> dict[str, str]:
    """Where an imported module comes from: stdlib, local (beside the script), installed or unresolved."""
    if (script_dir / f"{module}.py").is_file():
        return {"module": module, "kind": "local"}
    if module in sys.stdlib_module_names:
        return {"module": module, "kind": "stdlib"}
    for dist in dists.get(module, []):
        try:
            return {"module": module, "kind": "installed", "distribution": dist,
                    "version": importlib.metadata.version(dist)}  # fmt: skip
        except importlib.metadata.PackageNotFoundError:
            continue
    return {"module": module, "kind": "unresolved"}


def local_modules(script: Path, root: Path) -> dict[Path, str]:
    """Every module beside `script` that it imports, transitively: path -> its source text."""
    seen: dict[Path, str] = {}
    todo = [script]
    while todo:
        cur = todo.pop()
        text = _read(cur, root)
        for mod in imports_of(text, _rel(cur, root)):
            dep = script.parent / f"{mod}.py"
            if dep.is_file() and dep != script and dep not in seen:
                seen[dep] = _read(dep, root)
                todo.append(dep)
    return seen


def _rel(p: Path, root: Path) -> str:
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(p)


def _read(p: Path, root: Path) -> str:
    try:
        return p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise PreprocessingError(f"{_rel(p, root)} cannot be read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise PreprocessingError(f"{_rel(p, root)} is not UTF-8 text, so not a Python script") from None


def pin(script: Path, reads: list[Path], root: Path) -> dict[str, Any]:
    """A script's pin: its sha256 and size, its imports, its local modules' and read files' sha256."""
    text = _read(script, root)
    raw = script.read_bytes()
    dists = _distributions()
    mods = imports_of(text, _rel(script, root))
    local = local_modules(script, root)
    for dep_text in local.values():  # the helpers' own third-party imports are the script's too
        mods = sorted(set(mods) | set(imports_of(dep_text, "helper")))
    return {
        "sha256": sha256_bytes(raw),
        "bytes": len(raw),
        "imports": [classify(m, script.parent, dists) for m in mods],
        "local_modules": {_rel(p, root): sha256_bytes(p.read_bytes()) for p in sorted(local)},
        "reads": {_rel(p, root): _sha256_file(p) for p in reads},
    }


def _sha256_file(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def environment() -> dict[str, str]:
    """The interpreter a rebuild runs with (and the scripts were pinned under)."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": Path(sys.executable).name,
    }


def rebuild(
    script: Path,
    args: list[str],
    reads: list[Path],
    output: str,
    root: Path,
    timeout: float = REBUILD_TIMEOUT_S,
) -> dict[str, Any]:
    """Run `script` in a scratch copy of what it needs and hash `output` (workspace-relative) there.

    The scratch folder mirrors the workspace's relative paths for the script, its local modules and
    `reads`; nothing else of the workspace is visible. Returns returncode, the output's sha256 ("" when
    it was not written), seconds, and the tail of stderr (the scratch folder written `<scratch>`) when
    the run failed."""
    scratch = Path(tempfile.mkdtemp(prefix="claimcheck-rebuild-"))
    try:
        for src in [script, *local_modules(script, root), *reads]:
            dest = scratch / _rel(src, root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
        target = scratch / _rel(script, root)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(  # noqa: S603 - the person's own declared script, run on request
                [sys.executable, str(target), *args],
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"returncode": -1, "sha256": "", "stderr_tail": f"stopped after {timeout:.0f} s"}
        out = scratch / output
        got = _sha256_file(out) if out.is_file() else ""
        res: dict[str, Any] = {"returncode": proc.returncode, "sha256": got}
        res["seconds"] = round(time.perf_counter() - t0, 2)
        if proc.returncode != 0 or not got:
            err = proc.stderr.decode("utf-8", "replace").replace(str(scratch), "<scratch>")
            tail = err[-STDERR_TAIL:]
            res["stderr_tail"] = tail or f"{output} was not written"
        return res
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
