"""Replay's comparisons: a recorded check against its re-computation, and a record against itself.

- `diff_values`, `compare_check`, `compare_records`: what a re-run measured now against what was
  recorded, exactly or within the absolute tolerance the recorded check declares;
- `integrity`: a record's digest, its exact bytes and session.toml's stage table must agree;
- `chain`: the upstream digests a record was computed from must be the current ones.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from claimcheck.engine.audit.budget import strip_note
from claimcheck.engine.evidence import Check, StageRecord, digest_of, record_to_toml, sha256_bytes
from claimcheck.engine.headless.outcomes import Difference, Row
from claimcheck.engine.ledger.pins import journal_preimage_problem
from claimcheck.engine.ledger.session import Session, read_journal, read_repairs
from claimcheck.engine.pipeline import registry

# ---------------------------------------------------------------- comparison


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def diff_values(old: Any, new: Any, tolerance: float | None = None, key: str = "") -> list[Difference]:
    """Differences between two TOML values; numbers within `tolerance` (absolute) count as equal."""
    if _is_number(old) and _is_number(new):
        if isinstance(old, float) and isinstance(new, float) and math.isnan(old) and math.isnan(new):
            return []
        if tolerance is None:
            return [] if old == new else [Difference(key, old, new)]
        return [] if abs(old - new) <= tolerance else [Difference(key, old, new, tolerance)]
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[Difference] = []
        for k in list(old) + [k for k in new if k not in old]:
            sub = f"{key}.{k}" if key else k
            if k not in new:
                out.append(Difference(sub, old[k], "(absent)"))
            elif k not in old:
                out.append(Difference(sub, "(absent)", new[k]))
            else:
                out += diff_values(old[k], new[k], tolerance, sub)
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [Difference(key, old, new, tolerance)]
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += diff_values(a, b, tolerance, f"{key}[{i}]")
        return out
    if type(old) is not type(new) or old != new:
        return [Difference(key, old, new)]
    return []


# Measured keys a later claimcheck added to a check: a record made before has none, and its re-run's
# value is not compared (engine/headless/integrity.py says the files are not pinned). One-way: once recorded,
# the key is compared like any other.
LATER_KEYS: dict[str, tuple[str, ...]] = {
    "baseline.trivial": ("reference", "fitted_on", "fit_rows"),
    "dispatch.identity": ("job_files",),
    "artifact.verdict": ("rule", "measured_value"),
    "source.missingness": ("rows_with_any_null", "rows_with_any_null_share"),
    "source.time_range": ("unit",),
    "source.entity_families": ("independent_rows_declared",),
    "split.membership": (
        "realised_fractions",
        "largest_fraction_shift",
        "grouping",
        "families",
        "unit",
        "units",
        "kept_together",
    ),
    "baseline.conventional": ("unit", "units", "folds", "units_spanning_folds"),
    "split.chronology": ("unit", "test_rows_at_max_train"),
    "source.class_order": ("unicode_twins",),
    "dispatch.dev_metric": ("rows", "dev_rows", "ended"),
}

# Checks a later claimcheck added to a stage: a record made before has none, and the re-run's is an
# observation (shown, not compared). One-way, as above: once recorded, it is compared. A record cannot
# lose a check unnoticed: its digest covers its checks (engine/headless/integrity.py).
LATER_CHECKS: frozenset[str] = frozenset(
    {
        "source.class_order",
        "contract.memory_measured",
        "source.non_finite",
        "split.train_classes",
        "artifact.coverage_bias",
        "artifact.operating_point",
        "dispatch.runtime",
        "artifact.base_model_identity",
        "source.preprocessing",
        "source.preprocessing_environment",
        "source.label_provenance",
        "source.label_maturity",
        "source.selection",
        "split.subgroup_support",
        "artifact.subgroups",
        "artifact.errors",
        "contract.search_concurrency",
    }
)


def compare_check(stage: str, old: Check, new: Check) -> Row:
    """One recorded check against its re-computation; tolerances come from the recorded check."""
    diffs: list[Difference] = []
    later = [k for k in LATER_KEYS.get(old.id, ()) if k not in old.measured]
    if later:
        new = new.model_copy(update={"measured": {k: v for k, v in new.measured.items() if k not in later}})
    for attr in ("status", "basis"):
        if getattr(old, attr) != getattr(new, attr):
            diffs.append(Difference(attr, getattr(old, attr), getattr(new, attr)))
    # The memory part of a coverage line (which path the budget chose) is this machine's, not the data's.
    if strip_note(old.coverage) != strip_note(new.coverage):
        diffs.append(Difference("coverage", old.coverage, new.coverage))
    for key in list(old.measured) + [k for k in new.measured if k not in old.measured]:
        if key not in new.measured:
            diffs.append(Difference(f"measured.{key}", old.measured[key], "(absent)"))
        elif key not in old.measured:
            diffs.append(Difference(f"measured.{key}", "(absent)", new.measured[key]))
        else:
            diffs += diff_values(
                old.measured[key], new.measured[key], old.tolerance.get(key), f"measured.{key}"
            )
    if old.replay == "observation":
        detail = "observation (not compared)" + ("; it changed since recorded" if diffs else "")
        return Row(stage, old.id, "observation", old.status, detail, diffs)
    within = any(d.tolerance is not None for d in diffs) or any(k in old.tolerance for k in old.measured)
    if diffs:
        return Row(stage, old.id, "differs", old.status, "", diffs)
    return Row(stage, old.id, "reproduced", old.status, "within declared tolerance" if within else "")


def _with_added_defaults(stage: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The recorded inputs plus every input field added to the stage since, at its default value:
    a record made before a field existed was made with what that field's default now means
    (the documented one-way rule, docs/evidence-format.md)."""
    module = registry.get(stage).module()
    fields = getattr(getattr(module, "Inputs", None), "model_fields", {})
    out = dict(old)
    for key, value in new.items():
        if key in old or key not in fields:
            continue
        default = fields[key].get_default(call_default_factory=True)
        if hasattr(default, "model_dump"):
            default = default.model_dump(mode="json")
        if default == value:
            out[key] = value
    return out


# Effective contract settings a later claimcheck added, each at the value that means what a contract
# made before it did (attention: the library's own default for the architecture, which was SDPA;
# eval_rows 0: every dev row). A record made before has none of them: the re-run's contract is read
# without them (its digest recomputed), so the same training job still reproduces. One-way, as above.
LATER_EFFECTIVE: dict[str, Any] = {"attn_implementation": "sdpa", "eval_rows": 0}


# A default a later claimcheck resolves when it could never take effect: the worse-than-trivial alarm's
# default step past the contract's step budget becomes -1 (from half-way; engine/stages/contract/run.py).
# A record made before kept the default: the re-run is read with it, so the same job still reproduces.
LATER_RESOLVED = "alarms.worse_than_trivial_after_step"


def _older_alarm_step(old_eff: dict[str, Any], new_eff: dict[str, Any]) -> dict[str, Any] | None:
    """The re-run's alarms with the default step the recorded contract kept, or None."""
    from claimcheck.engine.training.schema import Alarms

    key = "worse_than_trivial_after_step"
    default, resolved = Alarms.model_fields[key].default, -1
    was, now = (old_eff.get("alarms") or {}).get(key), (new_eff.get("alarms") or {}).get(key)
    if was != default or now != resolved or int(old_eff.get("optimizer_steps", 0)) >= default:
        return None
    return {**new_eff["alarms"], key: default}


def _as_older_contract(old: StageRecord, new: StageRecord) -> StageRecord:
    """The re-run contract record as a claimcheck before LATER_EFFECTIVE / LATER_RESOLVED would have
    written it, when the recorded one predates them and the re-run's hold their old meaning."""
    old_chk = old.check("contract.effective")
    old_eff = old_chk.measured.get("effective") if old_chk is not None else None
    new_chk = new.check("contract.effective")
    if not isinstance(old_eff, dict) or new_chk is None:
        return new
    new_eff = dict(new_chk.measured.get("effective", {}))
    later = [k for k, v in LATER_EFFECTIVE.items() if k not in old_eff and new_eff.get(k) == v]
    alarms = _older_alarm_step(old_eff, new_eff)
    if alarms is not None:
        later.append(LATER_RESOLVED)
    if not later:
        return new
    out = new.model_copy(deep=True)
    eff = {k: v for k, v in new_eff.items() if k not in later}
    if alarms is not None:
        eff["alarms"] = alarms
    for chk in out.checks:
        if chk.id == "contract.effective":
            chk.measured["effective"] = eff
        elif chk.id == "contract.digest":
            chk.measured["digest"] = digest_of(eff)
        elif chk.id == "contract.requested_vs_effective":
            chk.measured["table"] = [
                r for r in chk.measured.get("table", []) if r.get("setting") not in later
            ]
    return out


def compare_records(stage: str, old: StageRecord, new: StageRecord) -> list[Row]:
    rows: list[Row] = []
    if stage == "contract":
        new = _as_older_contract(old, new)
    recorded = _with_added_defaults(stage, old.inputs, new.inputs)
    in_diffs = diff_values(recorded, new.inputs, None, "inputs")
    if in_diffs:
        rows.append(
            Row(stage, "(inputs)", "differs", "", "the stage now records its inputs differently", in_diffs)
        )
    new_by_id = {c.id: c for c in new.checks}
    for chk in old.checks:
        now = new_by_id.pop(chk.id, None)
        if now is None:
            rows.append(Row(stage, chk.id, "missing", chk.status, "recorded, but not produced by the re-run"))
        else:
            rows.append(compare_check(stage, chk, now))
    for chk in new_by_id.values():
        if chk.id in LATER_CHECKS:
            why = "added by a later claimcheck; this record predates it (observation, not compared)"
            rows.append(Row(stage, chk.id, "observation", chk.status, why))
        else:
            rows.append(
                Row(stage, chk.id, "new", chk.status, "produced by the re-run, absent from the record")
            )
    return rows


# ---------------------------------------------------------------- integrity


def _record_row(stage: str, outcome: str, detail: str) -> Row:
    """A row about a record file as a whole (not one of its checks)."""
    return Row(stage, "(record)", outcome, "", detail)


def integrity(session: Session, name: str, path: Path, rec: StageRecord, raw: bytes) -> list[Row]:
    """A record against itself (content digest, exactly the bytes claimcheck writes for it) and against
    session.toml's stage table (its digest and the pin of its exact bytes)."""
    rel = path.name
    rows = []
    if rec.stage != name:
        rows.append(_record_row(name, "tampered", f"{rel} says it is stage '{rec.stage}'"))
    actual = rec.compute_digest()
    if actual != rec.provenance.digest:
        rows.append(
            _record_row(
                name,
                "tampered",
                f"{rel} was edited after it was sealed: its content digest is {actual[:19]}…, "
                f"its provenance says {rec.provenance.digest[:19]}…",
            )
        )
    elif record_to_toml(rec).encode("utf-8") != raw:
        why = f"{rel}: bytes differ from what claimcheck wrote (edited by hand: line endings, spacing or comments)"
        rows.append(_record_row(name, "tampered", why))
    entry = session.meta.stages.get(name)
    recorded = entry.digest if entry is not None else ""
    interrupted = _interrupted(session, name, rel, rec, recorded) if not rows else []
    if interrupted:
        return interrupted
    rows += _repaired(session, name, rel, rec, recorded)
    if recorded and recorded != rec.provenance.digest:
        rows.append(
            _record_row(
                name,
                "tampered",
                f"session.toml records digest {entry.digest[:19]}… for {rel}, the file holds "
                f"{rec.provenance.digest[:19]}…",
            )
        )
    else:
        rows += _byte_pin(session, name, rel, raw)
    return rows


def _byte_pin(session: Session, name: str, rel: str, raw: bytes) -> list[Row]:
    """The record's exact bytes against the pin session.toml holds (a sealed session.toml pins every
    record it lists; one written before the pins has none)."""
    entry = session.meta.stages.get(name)
    if entry is None or not entry.digest:
        return []
    if entry.file_sha256 and sha256_bytes(raw) != entry.file_sha256:
        why = f"{rel}: bytes differ from the ones session.toml pins (reordered keys, line endings, spacing)"
        return [_record_row(name, "tampered", why)]
    if not entry.file_sha256 and session.meta.seal:
        return [_record_row(name, "tampered", f"session.toml is sealed but pins no bytes for {rel}")]
    return []


def _interrupted(session: Session, name: str, rel: str, rec: StageRecord, recorded: str) -> list[Row]:
    """A save claimcheck started and did not finish (killed, or still writing): not an edit."""
    journal = read_journal(session.path)
    if not journal or journal.get("stage") != name:
        return []
    entry = session.meta.stages.get(name)
    if (
        rec.provenance.digest == journal.get("new")
        and recorded == journal.get("old", "")
        and not journal_preimage_problem(session.path, entry, rec, journal)
    ):
        return [
            _record_row(
                name,
                "incomplete",
                f"interrupted write: claimcheck wrote {rel} ({rec.provenance.digest[:19]}…) at "
                f"{journal.get('at', '?')} and was stopped before recording it in session.toml; "
                "opening the session completes it",
            )
        ]
    if rec.provenance.digest == journal.get("old") == recorded:
        return [
            _record_row(
                name,
                "incomplete",
                f"interrupted write: claimcheck was stopped before replacing {rel}, which still holds "
                "the revision session.toml records; opening the session clears it",
            )
        ]
    return []


def _repaired(session: Session, name: str, rel: str, rec: StageRecord, recorded: str) -> list[Row]:
    """Interrupted writes that opening the session completed: observations, not failures."""
    return [
        _record_row(
            name,
            "observation",
            f"interrupted write, repaired: claimcheck was stopped after writing {rel} at "
            f"{repair.get('at', '?')}; reopening it on {repair.get('repaired_at', '?')} "
            "recorded it in session.toml",
        )
        for repair in read_repairs(session.path)
        if repair.get("stage") == name and repair.get("new") == rec.provenance.digest == recorded
    ]


def chain(name: str, rec: StageRecord, records: dict[str, StageRecord]) -> list[Row]:
    rows = []
    for up in registry.upstream_names(name):
        recorded = rec.provenance.upstream.get(up, "")
        current = records.get(up)
        if current is None:
            rows.append(Row(name, "(chain)", "stale", "", f"rests on '{up}', whose record is missing"))
        elif recorded != current.provenance.digest:
            rows.append(
                Row(
                    name,
                    "(chain)",
                    "stale",
                    "",
                    f"computed from '{up}' {recorded[:19] or '(none)'}…, the current '{up}' is "
                    f"{current.provenance.digest[:19]}…",
                )
            )
    return rows
