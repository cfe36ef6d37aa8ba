"""Unsaved form edits of a stage, kept beside its record so a dropped connection loses nothing.

`<session>/NN-stage.draft.toml` holds the form's inputs exactly as the editor shows them (TOML text,
kept even while it does not parse). A draft is never evidence: it is not a record, session.toml does
not list it, integrity and replay read records by their own names (never by a glob), and replay's
scratch copy leaves drafts out. The app writes it (atomically) as the person edits, removes it once
a run records those inputs or the person discards it, and restores it, with a notice, on reopen.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from claimcheck.engine.evidence import atomic_write_text
from claimcheck.engine.pipeline.registry import get

DRAFT_SUFFIX = ".draft.toml"
HEADER = "# claimcheck draft: unsaved form edits of the {stage} stage, {when}. Not evidence.\n"


def draft_path(session_dir: Path, stage: str) -> Path:
    return Path(session_dir) / f"{get(stage).index:02d}-{stage}{DRAFT_SUFFIX}"


def is_draft(name: str) -> bool:
    return name.endswith(DRAFT_SUFFIX)


def write_draft(session_dir: Path, stage: str, toml_text: str) -> Path:
    path = draft_path(session_dir, stage)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    atomic_write_text(path, HEADER.format(stage=stage, when=when) + toml_text)
    return path


def read_draft(session_dir: Path, stage: str) -> str | None:
    """The draft's TOML text (header line dropped), or None when there is none."""
    path = draft_path(session_dir, stage)
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    first, sep, rest = text.partition("\n")
    return rest if sep and first.startswith("# claimcheck draft") else text


def remove_draft(session_dir: Path, stage: str) -> None:
    draft_path(session_dir, stage).unlink(missing_ok=True)


__all__ = ["DRAFT_SUFFIX", "draft_path", "is_draft", "read_draft", "remove_draft", "write_draft"]
