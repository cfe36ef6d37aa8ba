"""The GPU run's package lists, one source for the scripts that download, install and check them.

    python bench/gpu_deps.py requirements shipped|machine   the pins, one a line (for pip -r)
    python bench/gpu_deps.py wheels DIR                     DIR holds exactly the shipped wheels; prints their size
    python bench/gpu_deps.py check                          every package imports; the shipped ones at their pins
                                                            (and from $GPU_SITE when it is set)

bench/gpu_wheels.txt: the wheels shipped with the run; bench/gpu_machine.txt: what the GPU machine
has installed. Standard library only (it runs before anything is known to import).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LISTS = {"shipped": HERE / "gpu_wheels.txt", "machine": HERE / "gpu_machine.txt"}
MAX_WHEEL_BYTES = 56 * 1024 * 1024  # one run ships at most 64 MiB: the wheels leave room for the code
_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9_.-]+)==(?P<version>[A-Za-z0-9_.+-]+)\s+#\s*import\s+(?P<module>[\w.]+)\s*$"
)


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    module: str

    @property
    def wheel_prefix(self) -> str:
        """How a wheel file of this pin starts (wheel names normalise '-' and '.' to '_')."""
        return f"{_norm(self.name)}-{self.version}-"


def pins(which: str) -> list[Pin]:
    """The pins of list `which` ('shipped' or 'machine'); a malformed line names the file and line."""
    path = LISTS[which]
    out = []
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        m = _LINE.match(raw.strip())
        if not m:
            raise SystemExit(f"{path.name} line {n}: expected 'name==version  # import module', got {raw!r}")
        out.append(Pin(m["name"], m["version"], m["module"]))
    return out


def wheel_problems(folder: Path) -> list[str]:
    """What keeps `folder` from holding exactly one wheel per shipped pin and nothing else."""
    files = sorted(p.name for p in Path(folder).iterdir()) if Path(folder).is_dir() else []
    problems = [] if files else [f"{folder}: no wheels (run bench/gpu_wheels.sh)"]
    matched = set()
    for pin in pins("shipped"):
        hits = [f for f in files if f.lower().startswith(pin.wheel_prefix) and f.endswith(".whl")]
        if len(hits) != 1:
            problems.append(f"{pin.name}=={pin.version}: {len(hits)} wheels in {folder}")
        matched.update(hits)
    problems += [f"{f}: not in bench/gpu_wheels.txt" for f in files if f not in matched]
    return problems


def _wheels(folder: Path) -> int:
    problems = wheel_problems(folder)
    total = sum(p.stat().st_size for p in Path(folder).glob("*.whl"))
    for p in sorted(Path(folder).glob("*.whl")):
        print(f"  {p.stat().st_size / 2**20:7.2f} MiB  {p.name}")
    print(
        f"  total {total / 2**20:.2f} MiB ({total:,} bytes) in {len(list(Path(folder).glob('*.whl')))} wheels; limit {MAX_WHEEL_BYTES / 2**20:.0f} MiB"
    )
    if total > MAX_WHEEL_BYTES:
        problems.append(f"{total / 2**20:.2f} MiB is over the {MAX_WHEEL_BYTES / 2**20:.0f} MiB limit")
    for p in problems:
        print(f"  PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


def _version(pin: Pin, mod: object) -> str:
    """The version of the distribution the module was imported from (its own folder's metadata)."""
    from importlib import metadata

    f = Path(str(getattr(mod, "__file__", "") or "."))
    site = f.parent.parent if f.name == "__init__.py" else f.parent
    for dist in metadata.distributions(path=[str(site)]):
        if _norm(dist.metadata["Name"] or "") == _norm(pin.name):
            return dist.version
    return str(getattr(mod, "__version__", "?"))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _check() -> int:
    """Import every package; a shipped one must be at its pin (the machine's are reported as found)."""
    site = Path(os.environ["GPU_SITE"]).resolve() if os.environ.get("GPU_SITE") else None
    missing = []
    for which in ("machine", "shipped"):
        for pin in pins(which):
            try:
                mod = importlib.import_module(pin.module)
            except Exception as exc:  # noqa: BLE001 - any import failure is a missing package here
                missing.append(f"{pin.name}: {type(exc).__name__}: {exc}")
                continue
            found = _version(pin, mod)
            note = "" if which == "machine" or str(found) == pin.version else f" (shipped pin {pin.version})"
            if note:
                missing.append(f"{pin.name} {found} is not the shipped {pin.version}")
            where = Path(str(getattr(mod, "__file__", "") or ".")).resolve()
            if which == "shipped" and site and not where.is_relative_to(site):
                missing.append(f"{pin.name} imported from {where.parent}, not the shipped wheels in {site}")
            print(f"  {which:8} {pin.name} {found}{note} from {Path(getattr(mod, '__file__', '?')).parent}")
    if missing:
        print("cannot run the CUDA path, missing: " + "; ".join(missing), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "requirements" and argv[1] in LISTS:
        print("\n".join(f"{p.name}=={p.version}" for p in pins(argv[1])))
        return 0
    if len(argv) == 2 and argv[0] == "wheels":
        return _wheels(Path(argv[1]))
    if argv == ["check"]:
        return _check()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
