"""The product's examples, put where a person can use them: the sample data copied into a workspace
(a new session on the sample, from an installed claimcheck), and `claimcheck examples DIR` (the
answers examples and the sample data in one folder, so the README's headless commands run anywhere).

Files are copied, never overwritten: a file of the same name that differs is left as it is and named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomlkit

from claimcheck.engine import resources

SAMPLE_FOLDER = "sample_data"  # where recipes and the answers examples expect the sample data
SAMPLE_SUFFIXES = (".csv", ".jsonl", ".md", ".toml", ".py")  # the scripts: the data's provenance


@dataclass
class Copied:
    """What a copy did: files written, files already there (identical), files left (different)."""

    written: list[Path] = field(default_factory=list)
    present: list[Path] = field(default_factory=list)
    kept_different: list[Path] = field(default_factory=list)

    def add(self, other: Copied) -> None:
        self.written += other.written
        self.present += other.present
        self.kept_different += other.kept_different


def _copy_new(src: Path, dst: Path, out: Copied, data: bytes | None = None) -> None:
    payload = src.read_bytes() if data is None else data
    if dst.exists():
        (out.present if dst.read_bytes() == payload else out.kept_different).append(dst)
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    tmp.write_bytes(payload)
    tmp.replace(dst)
    out.written.append(dst)


def copy_sample_data(workspace: Path) -> Copied:
    """The sample data set (tickets, chat rendering, datasheet, the scripts that made them) into
    `workspace/sample_data/`."""
    out = Copied()
    src = resources.folder(resources.SAMPLE_DATA)
    for f in sorted(src.iterdir()):
        if f.is_file() and f.suffix in SAMPLE_SUFFIXES and f.name != "__init__.py":
            _copy_new(f, Path(workspace) / SAMPLE_FOLDER / f.name, out)
    return out


def needs_sample_data(files: list[str], workspace: Path) -> bool:
    """Whether a recipe's source files name the sample data and the workspace lacks some of it."""
    wanted = [f for f in files if Path(f).parts[:1] == (SAMPLE_FOLDER,)]
    return any(not (Path(workspace) / f).exists() for f in wanted)


def _answers_here(text: str) -> str:
    """An answers example rewritten to resolve its paths in the folder it is written to."""
    doc = tomlkit.parse(text)
    session = doc.get("session")
    if session is not None and "workspace" in session:
        session["workspace"] = "."
    return tomlkit.dumps(doc)


def write_examples(dest: Path) -> Copied:
    """The answers examples (workspace = their own folder) and the sample data, into `dest`."""
    dest = Path(dest)
    out = copy_sample_data(dest)
    src = resources.folder(resources.EXAMPLES)
    for f in sorted(src.glob("answers-*.toml")):
        _copy_new(f, dest / f.name, out, data=_answers_here(f.read_text("utf-8")).encode("utf-8"))
    return out
