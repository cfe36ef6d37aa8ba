"""The session folder as a whole: every file in it is accounted for by a record or by session.toml.

`folder_rows(session, loaded)` (engine/headless/integrity.py calls it for replay, the report and the
exports) returns rows for:

- symbolic links (`tampered`): a session holds plain files only;
- history/ revisions: each one session.toml pins (`stages.<stage>.history`) is present, has the pinned
  bytes and verifies on its own (`missing` / `tampered`); in a session.toml written before the pins,
  a revision that verifies on its own is an `observation` ("not pinned");
- temp files an interrupted write left (`incomplete`: opening the session removes them), and a
  stage's data/ file no record pins yet (`incomplete`: a run killed before it saved its record);
- every other file no record and no session.toml entry accounts for (`tampered`, check
  `(unaccounted files)`), one row per file; a job folder no record names that holds a job's own
  files (contract.toml, pid.json or status.json: an earlier dispatch attempt, or a job being
  launched) is one `observation` row.

What accounts for a file is listed in docs/evidence-format.md ("What replay checks in the folder").
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from claimcheck.engine.audit.neardup import PAIRS_FILE
from claimcheck.engine.baseline.records import PREDICTIONS_FILE
from claimcheck.engine.data.rows import FAMILIES_FILE
from claimcheck.engine.data.splits import MEMBERSHIP_FILE
from claimcheck.engine.evidence import REPORT_FILES, is_temp_name, sha256_bytes
from claimcheck.engine.headless.outcomes import Row
from claimcheck.engine.ledger.drafts import is_draft
from claimcheck.engine.ledger.lock import LOCK_FILE
from claimcheck.engine.ledger.pins import HISTORY_DIR, find_links, history_name, verified_sha256
from claimcheck.engine.ledger.session import JOURNAL_FILE, REPAIR_LOG, SESSION_FILE, Session
from claimcheck.engine.ledger.signing import SIGNATURE_FILE
from claimcheck.engine.pipeline import registry
from claimcheck.engine.training import jobfiles

FILES_ROW = "session"
UNACCOUNTED = "(unaccounted files)"
# Files of a job folder its dispatch record names that no hash pins: liveness, logs, the contract
# copy and the manifest (the files they describe are pinned: engine/headless/integrity.py), and the
# runtime stamp (rewritten by each run of the job; replay recomputes dispatch.runtime from it).
JOB_OWN = (
    jobfiles.CONTRACT,
    jobfiles.STATUS,
    jobfiles.HEARTBEAT,
    jobfiles.LOG,
    jobfiles.PID_FILE,
    jobfiles.RAY_RECORD,
    jobfiles.LAUNCH_LOCK,
    jobfiles.RUNTIME,
)
JOB_KNOWN = (
    *JOB_OWN,
    jobfiles.TRAIN_FILE,
    jobfiles.DEV_FILE,
    *jobfiles.LEGACY_DATA_FILES,
    f"{jobfiles.FINAL}/{jobfiles.MANIFEST}",
)
# What a stage writes into data/ before its record is saved: a kill in between leaves the file, not
# yet pinned by any record (an interrupted run, not an edit).
STAGE_DATA = {
    f"data/{PAIRS_FILE}": "source",
    f"data/{FAMILIES_FILE}": "source",
    f"data/{MEMBERSHIP_FILE}": "split",
    f"data/{PREDICTIONS_FILE}": "baseline",
}
# What the exports write inside the session by default (engine/exports/: model card, Croissant, the
# MLflow store): outputs derived from the records, like the report files, not evidence.
EXPORTS_DIR = "exports"
_HISTORY = re.compile(r"^(\d\d)-([a-z_]+)\.r(\d+)\.toml$")


def all_files(root: Path) -> list[str]:
    """Every file under the session folder, relative, links left out (find_links names them)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for fn in filenames:
            p = os.path.join(dirpath, fn)
            if not os.path.islink(p):
                out.append(Path(os.path.relpath(p, root)).as_posix())
    return sorted(out)


def _top_level() -> set[str]:
    names = {SESSION_FILE, SIGNATURE_FILE, LOCK_FILE, JOURNAL_FILE, REPAIR_LOG, *REPORT_FILES}
    return names | {spec.file_name for spec in registry.STAGES}


def _job_ids(pinned: set[str], session: Session, records: dict) -> set[str]:
    """Job folders a record names: by a pinned path, or by name in the dispatch record (as replay
    reads a job's state)."""
    ids = {p.split("/")[1] for p in pinned if p.startswith("jobs/") and p.count("/") >= 2}
    rec = records.get("dispatch")
    jobs = session.path / "jobs"
    if rec is not None and jobs.is_dir():
        blob = json.dumps(rec.model_dump(mode="json"), ensure_ascii=False)
        ids |= {p.name for p in jobs.iterdir() if p.is_dir() and p.name in blob}
    return ids


def _history_rows(session: Session, files: set[str]) -> tuple[list[Row], set[str]]:
    """Rows for history/ revisions and the set of history files they account for."""
    rows, seen = [], set()
    for spec in registry.STAGES:
        entry = session.meta.stages.get(spec.name)
        for fname, sha in sorted((entry.history if entry is not None else {}).items()):
            rel = f"{HISTORY_DIR}/{fname}"
            seen.add(rel)
            path = session.path / rel
            if rel not in files:
                why = f"{rel}, pinned by session.toml, is gone"
                rows.append(Row(spec.name, "(history)", "missing", "", why))
            elif sha256_bytes(path.read_bytes()) != sha or not verified_sha256(path):
                why = f"{rel} was edited after it was archived: its bytes are not the ones session.toml pins"
                rows.append(Row(spec.name, "(history)", "tampered", "", why))
    for rel in sorted(f for f in files if f.startswith(f"{HISTORY_DIR}/") and f not in seen):
        m = _HISTORY.match(rel.removeprefix(f"{HISTORY_DIR}/"))
        if (
            m is None
            or m.group(2) not in session.meta.stages
            or rel != history_name(m.group(2), int(m.group(3)))
        ):
            continue
        if _copy_of_current(session, rel, m.group(2)):
            seen.add(rel)
        elif not session.meta.seal and _old_revision(session, rel, int(m.group(3)), m.group(2)):
            seen.add(rel)
            why = f"{rel} is not pinned (session.toml written before claimcheck pinned history/); it verifies on its own"
            rows.append(Row(m.group(2), "(history)", "observation", "", why))
    return rows, seen


def _copy_of_current(session: Session, rel: str, stage: str) -> bool:
    """A revision archived by a save that was then interrupted (or is under way): the copy of the
    record as it is now, which the journal names or which a rolled-back save left."""
    entry = session.meta.stages.get(stage)
    return bool(entry and entry.digest and verified_sha256(session.path / rel, entry.digest))


def _old_revision(session: Session, rel: str, revision: int, stage: str) -> bool:
    """An earlier revision of the stage that verifies on its own (a session.toml without history pins)."""
    return revision < session.meta.stages[stage].revision and bool(verified_sha256(session.path / rel))


def _job_folder_rows(session: Session, rel_files: list[str], ids: set[str]) -> tuple[list[Row], set[str]]:
    """Files in jobs/<op>/ of a job the records name, by their known names; a whole job folder no record
    names but holding a job's own files is one observation."""
    rows, seen, other = [], set(), {}
    for rel in rel_files:
        parts = rel.split("/")
        if parts[0] != "jobs" or len(parts) < 3:
            continue
        inner = "/".join(parts[2:])
        if parts[1] in ids and (inner in JOB_KNOWN or is_temp_name(parts[-1])):
            seen.add(rel)
        elif parts[1] not in ids:
            other.setdefault(parts[1], []).append(rel)
    for op, files in sorted(other.items()):
        inner = {f.split("/", 2)[2] for f in files}
        if inner & {jobfiles.CONTRACT, jobfiles.PID_FILE, jobfiles.STATUS}:
            seen.update(files)
            why = f"jobs/{op}: a training job no record names (an earlier dispatch attempt?), {len(files)} file(s)"
            rows.append(Row(FILES_ROW, UNACCOUNTED, "observation", "", why))
    return rows, seen


def _search_files(rel_files: list[str], records: dict) -> set[str]:
    """The study's own files of a search revision the contract record declares (search/r<N>/: the
    journal, its lock, and the trial jobs' folders); the declaration and ledger files are pinned by
    hash (engine/headless/integrity.py)."""
    rec = records.get("contract")
    search = rec.inputs.get("search") if rec is not None else None
    if not isinstance(search, dict):
        return set()
    current = int(search.get("revision", 1))
    out = set()
    for rel in rel_files:
        m = re.match(r"^search/r(\d+)/", rel)
        if m is None or int(m.group(1)) > current:
            continue
        # the current revision's ledger is pinned; an earlier revision is kept whole, as it was left
        if int(m.group(1)) < current or not rel.startswith(f"search/r{current}/trials/"):
            out.add(rel)
    return out


def _is_draft(name: str) -> bool:
    return is_draft(name) and any(
        name.startswith(f"{spec.index:02d}-{spec.name}.") for spec in registry.STAGES
    )


def _report_temp(name: str) -> bool:
    """A report file being written (or a report stopped before its renames): an output, not evidence."""
    return is_temp_name(name) and any(name.startswith(f".{r}.") for r in REPORT_FILES)


def folder_rows(session: Session, pinned: set[str], records: dict) -> list[Row]:
    """Rows about the folder itself: links, history revisions, leftovers and unaccounted files.
    `pinned`: every path (relative to the session) a record pins by hash."""
    rows = [
        Row(
            FILES_ROW,
            "(files)",
            "tampered",
            "",
            f"{rel} is a symbolic link: refused; a session holds plain files only",
        )
        for rel in find_links(session.path)
    ]
    rel_files = all_files(session.path)
    files = set(rel_files)
    history, seen = _history_rows(session, files)
    jobs, job_seen = _job_folder_rows(session, rel_files, _job_ids(pinned, session, records))
    search_seen = _search_files(rel_files, records)
    accounted = _top_level() | pinned | seen | job_seen | search_seen
    leftovers = []
    for rel in rel_files:
        top = "/" not in rel
        if rel in accounted or (top and (_is_draft(rel) or _report_temp(rel))):
            continue
        if rel.split("/")[0] == EXPORTS_DIR:
            continue
        if is_temp_name(Path(rel).name) and rel.split("/")[0] in ("data", HISTORY_DIR, Path(rel).name):
            leftovers.append(rel)
            continue
        if rel in STAGE_DATA:
            why = (
                f"{rel} was written by a run of the {STAGE_DATA[rel]} stage that recorded nothing pinning it "
                "(interrupted, or under way); the stage's next run replaces it"
            )
            rows.append(Row(FILES_ROW, UNACCOUNTED, "incomplete", "", why))
            continue
        why = f"unaccounted file {rel}: no record and no session.toml entry accounts for it"
        rows.append(Row(FILES_ROW, UNACCOUNTED, "tampered", "", why))
    if leftovers:
        why = f"temp files of an interrupted write ({', '.join(leftovers)}): opening the session removes them"
        rows.append(Row(FILES_ROW, "(files)", "incomplete", "", why))
    return rows + history + jobs
