"""Byte pins of a session folder: what session.toml's stage table pins beyond the record digests,
and the rules that read them (docs/evidence-format.md, "What each digest covers").

- a record file's exact bytes (`file_sha256`) and each history/ revision's (`history`);
- symbolic links: a session holds plain files only, so a link anywhere in it is refused;
- the pre-image of an interrupted write: a journal entry is completed only when it starts from what
  session.toml records for the stage (Session._journal_outcome);
- the upgrade of a session.toml written before the pins: its first write pins the files that verify.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from claimcheck.engine.evidence import (
    EvidenceError,
    StageEntry,
    StageRecord,
    load_record,
    record_to_toml,
    sha256_bytes,
)
from claimcheck.engine.pipeline import registry

HISTORY_DIR = "history"
LINK_PROBLEM = "is a symbolic link; a session holds plain files only, and a link can stand for any file"
LINK_FIX = "replace the link with a copy of the file it points to, or remove it"


def history_name(stage: str, revision: int) -> str:
    """A revision's archive path, relative to the session: history/NN-<stage>.rK.toml."""
    spec = registry.get(stage)
    return f"{HISTORY_DIR}/{spec.index:02d}-{spec.name}.r{revision}.toml"


def find_links(session_dir: Path) -> list[str]:
    """Every symbolic link inside the session folder (never followed), relative, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(session_dir):
        for fn in [*dirnames, *filenames]:
            p = os.path.join(dirpath, fn)
            if os.path.islink(p):
                out.append(os.path.relpath(p, session_dir))
    return sorted(out)


def file_sha256(path: Path) -> str:
    return sha256_bytes(Path(path).read_bytes())


def verified_sha256(path: Path, digest: str = "") -> str:
    """The byte pin of a record file that verifies on its own (content digest sealed, exactly the bytes
    claimcheck writes for it, and `digest` when given), else ""."""
    if Path(path).is_symlink():
        return ""
    try:
        raw = Path(path).read_bytes()
        rec = load_record(Path(path))
    except (OSError, EvidenceError):
        return ""
    sealed = rec.compute_digest() == rec.provenance.digest and (not digest or digest == rec.provenance.digest)
    return sha256_bytes(raw) if sealed and record_to_toml(rec).encode("utf-8") == raw else ""


def pins_for(session_dir: Path, name: str, entry: StageEntry) -> StageEntry:
    """The upgrade of an entry written before the byte pins: pin the record and the history revisions
    that verify now (a file that does not verify stays unpinned, and replay names it)."""
    out = entry.model_copy(deep=True)
    if out.digest and not out.file_sha256:
        out.file_sha256 = verified_sha256(Path(session_dir) / registry.get(name).file_name, out.digest)
    if not out.history:
        for rev in range(1, out.revision):
            rel = history_name(name, rev)
            if sha := verified_sha256(Path(session_dir) / rel):
                out.history[Path(rel).name] = sha
    return out


def journal_preimage_problem(
    session_dir: Path, entry: StageEntry | None, rec: StageRecord, journal: dict[str, Any]
) -> str:
    """Why a journal whose `new` the record holds is not claimcheck's interrupted write of it ("" when it
    is): its pre-image must be what session.toml records for the stage (digest, byte pin), and the
    record must be the revision a save from that pre-image writes (a frozen pre-image is archived in
    history/ first and the record is its next revision; a draft is saved at its own revision)."""
    entry = entry or StageEntry()
    if entry.digest and entry.digest == journal.get("new"):
        return ""  # session.toml was written; only the journal's removal was missed
    old = str(journal.get("old", ""))
    if old != entry.digest:
        return f"its pre-image {old[:19] or '(none)'} is not what session.toml records ({entry.digest[:19] or 'none'})"
    if entry.file_sha256 and "old_sha256" in journal and journal["old_sha256"] != entry.file_sha256:
        return "its pre-image bytes are not the ones session.toml pins"
    if not entry.digest:
        return ""
    archive = Path(session_dir) / history_name(rec.stage, entry.revision)
    was_frozen = entry.state == "frozen" or bool(verified_sha256(archive, entry.digest))
    if was_frozen and not verified_sha256(archive, entry.digest):
        return (
            f"the frozen revision it replaces was not archived as {history_name(rec.stage, entry.revision)}"
        )
    want = entry.revision + 1 if was_frozen else entry.revision
    if rec.provenance.revision != want:
        return f"a save from revision {entry.revision} writes revision {want}, the record is revision {rec.provenance.revision}"
    return ""
