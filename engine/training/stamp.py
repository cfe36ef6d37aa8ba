"""The runtime stamp: which process ran a training job, and whether it is the one the contract names.

The job writes the stamp (runtime.json, typed as jobrecords.RuntimeFile) once its base model is
loaded: library versions, a digest of the engine source files the process imported, the device, and
the digest of the base model's files computed exactly as the contract pins `model_sha256`. The job
writes it itself, so on a Ray cluster it is the worker's, not the submitting machine's.

`compare` holds a stamp against the frozen contract: the model digest must match (else fail);
library versions and the engine's source files should match the contract's environment record
(`contract.environment`, from `environment_record`), else warn. The contract records every engine
source file's sha256, so the job's imported subset can be digested the same way on both sides.

Cheap at import: no torch (only `device_info` asks torch, when a GPU is in use).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import platform
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claimcheck.engine.data.rows import sha256_file
from claimcheck.engine.evidence import digest_of, now_iso
from claimcheck.engine.training.jobrecords import RuntimeFile

ENGINE = "claimcheck.engine"
# The libraries a fine-tuning run depends on: recorded by the contract's environment check and by
# each job's stamp, compared between them (python is recorded beside them as "python").
TORCH_STACK = ("torch", "transformers", "peft", "bitsandbytes", "accelerate", "tokenizers", "numpy")
NOT_INSTALLED = "not installed"


def library_versions(names: tuple[str, ...] = TORCH_STACK) -> dict[str, str]:
    out = {}
    for pkg in names:
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = NOT_INSTALLED
    return out


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([ENGINE, *parts])


def engine_sources() -> dict[str, str]:
    """sha256 of every engine source file on disk, by module name (what the contract records)."""
    import claimcheck.engine as engine

    root = Path(engine.__file__).resolve().parent
    files = sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    return {_module_name(root, p): sha256_file(p) for p in sorted(files, key=lambda p: _module_name(root, p))}


def imported_sources() -> dict[str, str]:
    """sha256 of the source file of every claimcheck.engine module this process has imported."""
    out = {}
    for name, mod in sorted(dict(sys.modules).items()):  # a copy: another thread may import meanwhile
        if name != ENGINE and not name.startswith(ENGINE + "."):
            continue
        path = getattr(mod, "__file__", None)
        if path and str(path).endswith(".py") and Path(path).is_file():
            out[name] = sha256_file(Path(path))
    return out


def engine_digest(modules: dict[str, str]) -> str:
    """The digest over (module name, file sha256) pairs, sorted by module name."""
    return digest_of([[name, modules[name]] for name in sorted(modules)])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_bytes() -> int:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0


def _driver() -> str:
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        return ""
    words = [w for w in first.split() if w[:1].isdigit() and "." in w]
    return words[0] if words else first.strip()


def device_info(device: str) -> dict[str, str | int]:
    """The CPU model and memory; on a GPU also its name, memory, the CUDA runtime and the driver."""
    info: dict[str, str | int] = {
        "device": device,
        "cpu_model": _cpu_model(),
        "memory_bytes": _memory_bytes(),
    }
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index or 0
        props = torch.cuda.get_device_properties(index)
        info.update(gpu=str(props.name), gpu_memory_bytes=int(props.total_memory))
        info.update(cuda=str(torch.version.cuda or ""), driver=_driver())
    return info


def model_digest(model_dir: Path) -> tuple[str, int]:
    """(digest, file count) of a model folder, as the contract pins `model_sha256`."""
    from claimcheck.engine.training.models import file_manifest

    manifest = file_manifest(model_dir)
    return digest_of(manifest), len(manifest)


@dataclass
class Loaded:
    """What the job knows when it stamps: its device, the model folder it loaded, its run number."""

    device: str
    model_sha256: str
    model_files: int
    run: int = 1


def stamp(loaded: Loaded) -> RuntimeFile:
    """The stamp of this process, now (after the model is loaded: its modules are imported)."""
    modules = imported_sources()
    return RuntimeFile(
        written_at=now_iso(),
        run=loaded.run,
        host=socket.gethostname(),
        pid=os.getpid(),
        versions={"python": platform.python_version(), **library_versions()},
        engine_sha256=engine_digest(modules),
        engine_modules=modules,
        device=device_info(loaded.device),
        model_sha256=loaded.model_sha256,
        model_files=loaded.model_files,
    )


def environment_record() -> dict[str, Any]:
    """The engine part of the contract's environment record: every source file's sha256 and their digest."""
    modules = engine_sources()
    return {"sha256": engine_digest(modules), "modules": modules}


# ---------------------------------------------------------------- the stamp held to the contract


@dataclass
class Comparison:
    """A stamp held to the contract: what fails (the model) and what warns (libraries, engine code)."""

    model_ok: bool
    version_diffs: dict[str, list[str]] = field(default_factory=dict)  # name: [contract, job]
    engine_changed: list[str] = field(default_factory=list)  # modules whose source differs
    engine_unknown: list[str] = field(default_factory=list)  # modules the contract's engine lacks
    engine_compared: bool = False  # the contract recorded the engine's sources

    @property
    def engine_ok(self) -> bool:
        return not self.engine_changed and not self.engine_unknown


def compare(
    rt: RuntimeFile, model_sha256: str, versions: dict[str, str], sources: dict[str, str] | None
) -> Comparison:
    """`rt` against the contract's pinned model digest, the library versions its environment check
    recorded (python included) and, when it recorded them, the engine's source files."""
    diffs = {
        name: [versions[name], version]
        for name, version in rt.versions.items()
        if versions.get(name) and versions[name] != version
    }
    out = Comparison(model_ok=rt.model_sha256 == model_sha256, version_diffs=diffs)
    if sources is not None:
        out.engine_compared = True
        out.engine_unknown = sorted(m for m in rt.engine_modules if m not in sources)
        out.engine_changed = sorted(
            m for m, sha in rt.engine_modules.items() if m in sources and sources[m] != sha
        )
    return out
