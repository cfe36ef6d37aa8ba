"""Integrity without recomputing: what replay checks before it re-runs anything, and all the report checks.

`verify(session)` reads the session and returns rows (engine/headless/outcomes.py), in stage order:

- each record: readable (never through a symbolic link), its content digest, exact bytes, the byte
  pin and digest session.toml's stage table holds agree (`compare.integrity`), and its upstream
  digests are the current ones (`compare.chain`);
- the files records pin by sha256, named by their typed shapes: split.membership (path, sha256),
  source.entity_families (families_path, families_sha256), source.near_duplicates (pairs_path,
  pairs_sha256), baseline.predictions (path, sha256), artifact.identity (file_sha256 of the files
  under its path), dispatch.identity job_files (metrics.jsonl and every checkpoint file);
- session.toml: its exact bytes, its seal, and the session meta (title, id, recipe, workspace,
  created_at) against its meta_digest;
- the folder: links, history/ revisions against their byte pins, and every file no record or
  session.toml entry accounts for (engine/headless/inventory.py);
- signature.toml, when present (engine/ledger/signing.py).

Both `claimcheck --replay` and `claimcheck report` call it: one place for "was anything edited".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from claimcheck.engine.data.rows import sha256_file
from claimcheck.engine.evidence import EvidenceError, StageRecord, load_record
from claimcheck.engine.headless.compare import chain, integrity
from claimcheck.engine.headless.inventory import folder_rows
from claimcheck.engine.headless.outcomes import Row
from claimcheck.engine.ledger import signing
from claimcheck.engine.ledger.session import SESSION_FILE, Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.shapes import ShapeError, parse
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import training as training_shapes

SESSION_ROW = "session"  # rows about session.toml and signature.toml, not one stage


@dataclass
class Loaded:
    records: dict[str, StageRecord]
    raw: dict[str, bytes]  # each record file's exact bytes, as read
    rows: dict[str, list[Row]] = field(default_factory=dict)


def load(session: Session) -> Loaded:
    """Every record file the session lists, parsed; a missing or unreadable one is a row."""
    loaded = Loaded({}, {}, {n: [] for n in registry.STAGE_NAMES})
    for spec in registry.STAGES:
        path = session.path / spec.file_name
        entry = session.meta.stages.get(spec.name)
        if not path.exists() and not path.is_symlink():
            if entry is not None and (entry.digest or entry.state != "not_run"):
                loaded.rows[spec.name].append(
                    Row(
                        spec.name,
                        "(record)",
                        "missing",
                        "",
                        f"session.toml lists {spec.file_name}, which is gone",
                    )
                )
            continue
        if path.is_symlink():  # never read through a link (the folder rows name every link too)
            why = f"{spec.file_name} is a symbolic link: refused; a session holds plain files only"
            loaded.rows[spec.name].append(Row(spec.name, "(record)", "tampered", "", why))
            continue
        try:
            raw = path.read_bytes()
            rec = load_record(path)
        except EvidenceError as exc:
            if exc.field.endswith("schema_version"):
                raise
            loaded.rows[spec.name].append(Row(spec.name, "(record)", "tampered", "", str(exc)))
            continue
        except OSError as exc:
            loaded.rows[spec.name].append(
                Row(spec.name, "(record)", "tampered", "", f"{spec.file_name}: {exc}")
            )
            continue
        loaded.records[spec.name], loaded.raw[spec.name] = rec, raw
    return loaded


# ---------------------------------------------------------------- pinned files


def _pins(rec: StageRecord) -> list[tuple[str, str, str]]:
    """(check id, path relative to the session, recorded sha256) of every file the record pins."""
    out: list[tuple[str, str, str]] = []
    wanted = {
        "split.membership": (data_shapes.Membership, "path", "sha256"),
        "source.entity_families": (data_shapes.EntityFamilies, "families_path", "families_sha256"),
        "source.near_duplicates": (data_shapes.NearDuplicates, "pairs_path", "pairs_sha256"),
        "baseline.predictions": (baseline_shapes.Predictions, "path", "sha256"),
    }
    for chk in rec.checks:
        if chk.id in wanted and chk.measured:
            shape, p, s = wanted[chk.id]
            v = parse(chk, shape)
            out.append((chk.id, getattr(v, p), getattr(v, s)))
        elif chk.id == "artifact.identity" and chk.measured:
            v = parse(chk, artifact_shapes.Identity)
            out += [(chk.id, f"{v.path}/{rel}", sha) for rel, sha in sorted((v.file_sha256 or {}).items())]
        elif chk.id == "dispatch.identity" and chk.measured:
            v = parse(chk, training_shapes.DispatchIdentity)
            base = f"jobs/{v.operation_id}"
            out += [(chk.id, f"{base}/{rel}", sha) for rel, sha in sorted((v.job_files or {}).items())]
        elif chk.id == "contract.search_trials" and chk.measured:
            out += [(chk.id, r["file"], r["file_sha256"]) for r in chk.measured.get("rows", [])]
        elif _session_file(chk.measured.get("path")) and isinstance(chk.measured.get("sha256"), str):
            out.append((chk.id, chk.measured["path"], chk.measured["sha256"]))  # any other check's own pin
    return out


def _session_file(path: object) -> bool:
    """A relative path that stays inside the session folder."""
    return isinstance(path, str) and bool(path) and not path.startswith("/") and ".." not in path.split("/")


def _bare(sha: str) -> str:
    return str(sha).removeprefix("sha256:")


def pinned_rows(session: Session, rec: StageRecord) -> list[Row]:
    """Each pinned file present and unchanged, checked by hash only (nothing re-computed)."""
    try:
        pins = _pins(rec)
    except ShapeError as exc:
        return [Row(rec.stage, "(record)", "tampered", "", str(exc))]
    rows = []
    for check_id, rel, sha in pins:
        path = session.path / rel
        if not path.is_file():
            rows.append(Row(rec.stage, check_id, "missing", "", f"pinned file {rel} is gone"))
        elif (got := sha256_file(path)) != _bare(sha):
            rows.append(
                Row(
                    rec.stage,
                    check_id,
                    "tampered",
                    "",
                    f"pinned file {rel} changed: sha256 {got[:12]}…, the record says {_bare(sha)[:12]}…",
                )
            )
    return rows


def _unpinned_job_files(rec: StageRecord) -> list[Row]:
    chk = rec.check("dispatch.identity")
    if chk is None or not chk.measured or "job_files" in chk.measured:
        return []
    why = "metrics.jsonl and checkpoints are not pinned: recorded by a claimcheck that did not pin them"
    return [Row(rec.stage, "dispatch.identity", "observation", chk.status, why)]


# ---------------------------------------------------------------- session meta and signature


def digests(loaded: Loaded) -> dict[str, str]:
    return {n: r.provenance.digest for n, r in loaded.records.items()}


def _meta_row(detail: str, outcome: str = "tampered") -> Row:
    return Row(SESSION_ROW, "(meta)", outcome, "", detail)


def meta_rows(session: Session) -> list[Row]:
    """session.toml: exactly the bytes claimcheck writes for its content, its seal (when it has one;
    one written before the seal gives an observation), and the meta digest of its evidence fields."""
    meta = session.meta
    rows = []
    try:
        raw = (session.path / SESSION_FILE).read_bytes()
    except OSError as exc:
        return [_meta_row(f"{SESSION_FILE}: {exc}")]
    if raw != meta.to_toml().encode("utf-8"):
        rows.append(
            _meta_row(
                f"{SESSION_FILE}: bytes differ from what claimcheck writes for its content (edited by hand: "
                "line endings, spacing, key order or comments)"
            )
        )
    if meta.seal and meta.seal != meta.compute_seal():
        rows.append(
            _meta_row(
                f"{SESSION_FILE} was edited after it was sealed: its schema_version, tool_version, meta_digest "
                "or stage table (digests, byte pins, history/) no longer match its seal"
            )
        )
    elif not meta.seal and any(e.file_sha256 or e.history for e in meta.stages.values()):
        rows.append(_meta_row(f"{SESSION_FILE} pins record bytes but has no seal: its seal was removed"))
    elif not meta.seal:
        why = f"{SESSION_FILE} is not sealed (written before claimcheck sealed it); its next write seals it"
        rows.append(_meta_row(why, "observation"))
    if not meta.meta_digest:
        if meta.seal:
            rows.append(
                _meta_row(f"{SESSION_FILE} has a seal but no meta_digest: its meta_digest was removed")
            )
        else:
            why = "session.toml has no meta_digest (written before claimcheck pinned title and id)"
            rows.append(_meta_row(why, "observation"))
    elif meta.meta_digest != meta.compute_meta_digest():
        rows.append(
            _meta_row(
                "session.toml was edited: its title, id, recipe, workspace or created_at no longer "
                "match its meta_digest"
            )
        )
    return rows


def signature_rows(session: Session, loaded: Loaded) -> list[Row]:
    sig = signing.check(session.path, session.meta, digests(loaded))
    if not sig.present:
        return [Row(SESSION_ROW, "(signature)", "observation", "", "unsigned: record digests are unkeyed")]
    if not sig.valid:
        return [Row(SESSION_ROW, "(signature)", "tampered", "", f"{signing.SIGNATURE_FILE}: {sig.problem}")]
    return [Row(SESSION_ROW, "(signature)", "observation", "", f"signed by key {sig.fingerprint}: valid")]


# ---------------------------------------------------------------- all of it


def stage_rows(session: Session, loaded: Loaded, name: str) -> list[Row]:
    """A stage's integrity rows: load problems, digests and bytes, chain, pinned files."""
    rows = list(loaded.rows.get(name, []))
    rec = loaded.records.get(name)
    if rec is None:
        return rows
    path = session.path / registry.get(name).file_name
    rows += integrity(session, name, path, rec, loaded.raw[name])
    rows += chain(name, rec, loaded.records)
    rows += pinned_rows(session, rec)
    rows += _unpinned_job_files(rec)
    return rows


def pinned_paths(loaded: Loaded) -> set[str]:
    """Every path (relative to the session) a readable record pins by hash."""
    out: set[str] = set()
    for rec in loaded.records.values():
        try:
            out.update(rel for _check, rel, _sha in _pins(rec))
        except ShapeError:
            continue
    return out


def session_rows(session: Session, loaded: Loaded) -> list[Row]:
    """Rows about session.toml, signature.toml and the folder as a whole (engine/headless/inventory.py)."""
    folder = folder_rows(session, pinned_paths(loaded), loaded.records)
    return meta_rows(session) + signature_rows(session, loaded) + folder


def verify(session: Session, loaded: Loaded | None = None) -> list[Row]:
    """Every integrity row of the session, without re-computing any stage."""
    loaded = loaded or load(session)
    rows = session_rows(session, loaded)
    for name in registry.STAGE_NAMES:
        rows += stage_rows(session, loaded, name)
    return rows


def failing_by_stage(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for r in rows:
        if r.failing:
            out.setdefault(r.stage, []).append(r)
    return out


def current_digest(session: Session, loaded: Loaded | None = None) -> str:
    """The session digest (engine/ledger/signing.py's payload) the report names in each of its files."""
    loaded = loaded or load(session)
    return signing.session_digest(session.meta, digests(loaded))
