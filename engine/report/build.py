"""The printable evidence report: report.md and a self-contained report.html, plus a model-index block.

Both documents are rendered from one list of blocks built from the records, so they carry the same
content: the claim, each stage's decisions, checks, figures and notes, the final comparison with
counts and intervals, latency apart from quality, the verdict against the success criterion,
limitations, and what the evidence does not establish. Stages that are stale, draft or not run are
marked so and never shown as established. Nothing here reads the clock: the same session gives the
same bytes (the golden test relies on it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from claimcheck.engine import __version__
from claimcheck.engine.audit.budget import strip_note
from claimcheck.engine.evidence import MODEL_INDEX, REPORT_HTML, REPORT_MD, Check, StageRecord, temp_beside
from claimcheck.engine.headless import integrity
from claimcheck.engine.headless.outcomes import Row
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.pipeline import registry
from claimcheck.engine.report import coverage
from claimcheck.engine.report import figures as F
from claimcheck.engine.report.final import comparison_blocks, latency_blocks
from claimcheck.engine.report.model_card import model_index_yaml
from claimcheck.engine.report.provenance import provenance_blocks, teacher_qualifier
from claimcheck.engine.report.render import (
    STATUS_MARK,
    Banner,
    Block,
    Bullets,
    Fig,
    Heading,
    Para,
    Table,
    anchor,
    fmt_value,
    status_text,
    to_html,
    to_markdown,
)
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse
from claimcheck.engine.shapes import training as training_shapes

# Shown in their own sections ("Final comparison", "Latency"), not under the artifact stage's checks.
COMPARISON_IDS = ("artifact.arms", "artifact.comparison")
LATENCY_IDS = ("artifact.latency",)

# Each line traces to the playbook; they hold whatever the records say.
DOES_NOT_ESTABLISH = (
    "Process success is not model improvement: a valid file, a completed job, a lower loss and a useful "
    "model are four different outcomes.",
    "A tiny fitting check is not a quality pilot: memorising a few training examples says nothing about "
    "generalisation.",
    "Calibrated scores on the data used to fit the calibration are in-sample; they are not final results.",
    "Zero exact overlap between splits is not proof of independence from near duplicates, pretraining data "
    "or identities the data does not record.",
    "Latency measured here is not a serving benchmark; timing and quality are separate experiments.",
    "Weight reload parity is not proof of optimizer resume or of exact stochastic reproducibility.",
    "Nothing here establishes production safety, readiness for activation, or ongoing monitoring.",
)
LABEL_LINE = "Predicting a recorded workflow label is not making a correct real-world decision."
# The sentence on what the label is, per claim.target_kind (LABEL_LINE for a workflow label or none).
LABEL_LINES = {
    "measured_quantity": (
        "Predicting a measured quantity as it was recorded is not predicting its true value: "
        "measurement and recording error are in the labels the figures are scored against."
    )
}


@dataclass
class _Ctx:
    session: Session
    records: dict[str, StageRecord]
    states: dict[str, str]
    # Integrity rows that failed (engine/headless/integrity.py), by stage ("session" for session.toml and
    # signature.toml), and the session digest this report describes.
    failing: dict[str, list[Row]] = field(default_factory=dict)
    digest: str = ""
    blocks: list[Block] = field(default_factory=list)

    def add(self, *blocks: Block) -> None:
        self.blocks += blocks

    def established(self, stage: str) -> bool:
        return self.states.get(stage) == "frozen"


# ---------------------------------------------------------------- building


def _load(session_dir: Path) -> _Ctx:
    session = Session.open(Path(session_dir))
    loaded = integrity.load(session)
    # A broken chain ("stale") is shown by the stage's own STALE banner, as before: the record is
    # what claimcheck wrote, only computed from an older upstream. Everything else is a failure.
    rows = [r for r in integrity.verify(session, loaded) if r.outcome != "stale"]
    failing = integrity.failing_by_stage(rows)
    states = dict(session.states())
    for name in registry.STAGE_NAMES:
        if name in failing:
            states[name] = TAMPERED
        elif any(u in failing for u in registry.upstream_names(name)) and name in loaded.records:
            states[name] = "stale"
    return _Ctx(session, loaded.records, states, failing, integrity.current_digest(session, loaded))


TAMPERED = "integrity failed"


def _integrity_text(rows: list[Row]) -> str:
    shown = "; ".join(f"{r.check} {r.outcome}: {r.detail}" for r in rows[:4])
    return shown + (f"; and {len(rows) - 4} more" if len(rows) > 4 else "")


def _claim_section(c: _Ctx) -> None:
    c.add(Heading(2, coverage.CLAIM_SECTION, coverage.section_anchor("claim", "input")))
    rec = c.records.get("claim")
    if rec is None:
        c.add(
            Banner(
                "not_run", "No claim has been recorded: nothing below can be read as evidence for a claim."
            )
        )
        return
    _state_banner(c, "claim")
    i = rec.inputs
    success = i.get("success", {}) if isinstance(i.get("success"), dict) else {}
    criterion = _criterion(c)
    rows = [
        ("Task kind", i.get("task_kind", "")),
        ("Prediction unit", i.get("prediction_unit", "")),
        ("Target meaning", i.get("target_meaning", "")),
        ("Target kind", i.get("target_kind", "")),
        ("Inference-time inputs", i.get("inference_inputs", [])),
        ("Population", i.get("population", "")),
        (
            "Primary metric",
            f"{i.get('primary_metric', '')} ({i.get('metric_averaging', '') or 'no averaging stated'})",
        ),
        ("Class order", i.get("class_order", [])),
        ("Success criterion", criterion or fmt_value(success)),
        ("Comparators", i.get("comparators", [])),
        ("Run scope", i.get("run_scope", "")),
        ("Label-quality limits", i.get("label_quality_limits", "") or "not stated"),
    ]
    c.add(Table(["Field", "Value"], [[k, fmt_value(v, 400)] for k, v in rows]))


def _glance(c: _Ctx) -> None:
    c.add(Heading(2, "Stages at a glance"))
    rows = []
    for spec in registry.STAGES:
        rec = c.records.get(spec.name)
        state = c.states.get(spec.name, "not_run")
        counts = {s: 0 for s in STATUS_MARK}
        for chk in rec.checks if rec else []:
            counts[chk.status] += 1
        summary = ", ".join(f"{n} {STATUS_MARK[s].lower()}" for s, n in counts.items() if n) or "—"
        rows.append(
            [
                str(spec.index),
                spec.title,
                state,
                str(rec.provenance.revision) if rec else "—",
                summary,
                (rec.provenance.digest[:19] + "…") if rec else "—",
            ]
        )
    c.add(Table(["#", "Stage", "State", "Revision", "Checks", "Digest"], rows))


def _state_banner(c: _Ctx, name: str) -> None:
    rec = c.records.get(name)
    state = c.states.get(name, "not_run")
    if name in c.failing:
        c.add(
            Banner(
                "fail",
                "INTEGRITY FAILED — nothing in this stage is certified: " + _integrity_text(c.failing[name]),
            )
        )
    elif rec is None:
        c.add(Banner("not_run", "Not run: there is no evidence for this stage."))
    elif state == "stale" and (bad := [u for u in registry.upstream_names(name) if u in c.failing]):
        c.add(
            Banner(
                "fail",
                f"NOT CERTIFIED: this record rests on '{bad[0]}', which failed its integrity checks.",
            )
        )
    elif state == "stale":
        c.add(
            Banner(
                "stale",
                "STALE: this record rests on an upstream record that changed since. Nothing in this stage is "
                "established until it is re-run and frozen.",
            )
        )
    elif state == "draft":
        c.add(Banner("draft", "DRAFT: computed but never frozen. Nothing in this stage is established yet."))
    else:
        c.add(_frozen_banner(rec))


def _frozen_banner(rec: StageRecord) -> Banner:
    """A frozen stage's banner says what its checks say: freezing records a decision, it does not
    turn a failing check into a passing one."""
    when = (
        f"Frozen at {rec.provenance.frozen_at or '?'} (revision {rec.provenance.revision}, "
        f"digest {rec.provenance.digest[:19]}…)"
    )
    by = {s: [c.id for c in rec.checks if c.status == s] for s in ("fail", "warn")}
    if by["fail"]:
        n = len(by["fail"])
        return Banner(
            "fail",
            f"{when} with {n} failing check{'s' if n > 1 else ''}: {', '.join(by['fail'])}. "
            "The person froze it anyway; read those checks before relying on this stage.",
            label=f"FROZEN WITH {n} FAILING",
        )
    if by["warn"]:
        n = len(by["warn"])
        return Banner("warn", f"{when}; {n} check{'s' if n > 1 else ''} warn: {', '.join(by['warn'])}.")
    return Banner("ok", when + "; no check fails or warns.")


def _check_details(c: _Ctx, chk: Check, rec: StageRecord) -> None:
    """The pictures a check's typed shape calls for (its summary sits in the checks table), each
    after the teacher-label qualifier when a teacher model wrote the labels (stages after the source)."""
    teacher = _teacher(c) if rec.stage not in ("claim", "source") else ""
    for fig in F.figures_for(chk, rec):
        if teacher:
            c.add(Para(teacher))
        c.add(Fig(fig))


def _teacher(c: _Ctx) -> str:
    return teacher_qualifier(c.records.get("source"))


def _stage_section(c: _Ctx, spec: registry.StageSpec) -> None:
    rec = c.records.get(spec.name)
    state = c.states.get(spec.name, "not_run")
    c.add(Heading(2, f"{spec.index}. {spec.title} — {state.replace('_', ' ')}", anchor("stage", spec.name)))
    c.add(Para(spec.question))
    _state_banner(c, spec.name)
    if rec is None:
        return
    if spec.name != "claim" and rec.inputs:
        c.add(Heading(3, coverage.SECTION_PARTS["input"], coverage.section_anchor(spec.name, "input")))
        c.add(Table(["Input", "Value"], [[k, fmt_value(v)] for k, v in rec.inputs.items()]))
    c.add(Heading(3, coverage.SECTION_PARTS["check"], coverage.section_anchor(spec.name, "check")))
    if not rec.checks:
        c.add(Para("This record holds no checks."))
    rows = [
        [status_text(chk.status, state), chk.id, chk.basis, chk.coverage, fmt_value(chk.summary, 400)]
        for chk in rec.checks
    ]
    if rows:
        c.add(Table(["Status", "Check", "Basis", "Coverage", "Summary"], rows))
    for chk in rec.checks:
        if chk.id not in COMPARISON_IDS + LATENCY_IDS:
            _check_details(c, chk, rec)
    if rec.notes:
        c.add(Heading(3, coverage.SECTION_PARTS["note"], coverage.section_anchor(spec.name, "note")))
        c.add(Bullets([f"[{n.tag.replace('_', ' ')}] {n.text} ({n.at})" for n in rec.notes]))


def _criterion(c: _Ctx) -> str:
    rec = c.records.get("claim")
    crit = parse(rec.check("claim.success_criterion"), training_shapes.SuccessCriterion) if rec else None
    return crit.criterion if crit else ""


def verdict(c: _Ctx) -> Banner:
    """The verdict against the success criterion, only from a frozen artifact stage: the claim's state
    as the banner's word, then the rule and the measured value apart, then the other outcomes."""
    criterion = _criterion(c) or "(no success criterion recorded)"
    if c.failing:
        return Banner(
            "fail",
            f"the session failed its integrity checks ({', '.join(c.failing)}); "
            f"'{criterion}' is not established by this report.",
            label="NOT CERTIFIED",
        )
    rec = c.records.get("artifact")
    state = c.states.get("artifact", "not_run")
    if rec is None:
        return Banner(
            "not_run",
            f"the locked-test comparison has not been run, so '{criterion}' is untested.",
            label="NO VERDICT",
        )
    if state != "frozen":
        return Banner(
            state,
            f"the artifact stage is {state}; '{criterion}' is not established.",
            label="NO ESTABLISHED VERDICT",
        )
    v = parse(rec.check("artifact.verdict"), artifact_shapes.Verdict)
    if v is None:
        return Banner(
            "not_run", f"the artifact record holds no check against '{criterion}'.", label="NO VERDICT"
        )
    # The record's claim verdict and its reason, verbatim (Verdict.claim_line: the one wording).
    word, reason = v.claim_line().split(": ", 1)
    yes = {True: "yes", False: "no"}
    rest = (
        f" Job finished: {yes[v.job_finished]}; artifact verified: {yes[v.artifact_verified]}; "
        f"candidate better than every comparator: {yes[v.candidate_better]}."
    )
    kind = {"met": "ok", "not met": "fail"}.get(v.claim_word(), "warn")
    teacher = f" {_teacher(c)}" if _teacher(c) else ""
    return Banner(kind, _arm_values(rec) + reason.rstrip(".") + "." + rest + teacher, label=word)


def _arm_values(rec: StageRecord) -> str:
    """The compared arms' values on the locked test, candidate first ("macro_f1 on the locked test:
    candidate 0.529, frozen probe 0.411, best baseline 0.672; "), so a difference is read beside them."""
    comp = parse(rec.check("artifact.comparison"), artifact_shapes.Comparison)
    if comp is None or not comp.values:
        return ""
    order = ["candidate", *(a for a in comp.values if a != "candidate")]
    shown = [f"{a.replace('_', ' ')} {comp.values[a]:.3f}" for a in order if a in comp.values]
    return f"{comp.metric} on the locked test: {', '.join(shown)}; "


def _tuning(c: _Ctx) -> None:
    """The search's disclosure (a contract with a declared search only): trials run, failed, the rule."""
    from claimcheck.engine.shapes import tuning as TU

    rec = c.records.get("contract")
    if rec is None or rec.check("contract.search_declaration") is None:
        return
    decl = parse(rec.check("contract.search_declaration"), TU.SearchDeclaration)
    trials = parse(rec.check("contract.search_trials"), TU.SearchTrials)
    sel = parse(rec.check("contract.search_selection"), TU.SearchSelection)
    if decl is None:
        return
    text = (
        f"Tuning: search revision {decl.revision} ({decl.sampler}, {decl.n_trials} trials declared, frozen "
        f"{decl.frozen_at}; hypothesis: {decl.hypothesis}) on dev {decl.metric}"
    )
    if decl.refused:
        text += "; REFUSED: " + "; ".join(decl.refused)
    if trials is not None:
        text += (
            f"; {trials.trials} trials run: {trials.complete} complete, {trials.failed} failed, "
            f"{trials.pruned} pruned, {trials.cancelled} cancelled; {trials.repeats} seed repeats"
        )
    if sel is not None:
        text += f"; selection on dev only — {sel.rule}; the contract cites trial {sel.chosen_trial} ({sel.chosen_digest[:19]}…)"
    if decl.earlier_revisions:
        text += f"; {len(decl.earlier_revisions)} earlier revision(s) of the search kept in the session"
    conc = parse(rec.check("contract.search_concurrency"), TU.SearchConcurrency)
    if conc is not None:
        text += f"; {conc.bound} trial(s) at a time of {conc.declared} declared ({conc.provider})"
    if trials is not None and any(r.resources_from is not None for r in trials.rows):
        reused = sum(r.resources_from is not None for r in trials.rows)
        text += f"; {reused} trial(s) reused an earlier trial's memory estimate and step time"
    c.add(Heading(2, "Tuning"), Para(text + "."))


def _verdict_section(c: _Ctx) -> None:
    c.add(Heading(2, "Verdict against the success criterion"))
    c.add(verdict(c))


def _limitations(c: _Ctx) -> None:
    c.add(Heading(2, "Limitations"))
    items: list[str] = []
    unfinished = [f"{n} ({s})" for n, s in c.states.items() if s != "frozen"]
    if unfinished:
        items.append("Stages not established: " + ", ".join(unfinished) + ".")
    claim = c.records.get("claim")
    if claim is not None:
        limits = str(claim.inputs.get("label_quality_limits", "")).strip()
        items.append(
            f"Label quality: {limits}" if limits else "Label quality is unknown; that remains a limitation."
        )
    for name, rec in c.records.items():
        for n in rec.notes:
            if n.tag == "limitation":
                items.append(f"{name}: {n.text}")
        for chk in rec.checks:
            if chk.status in ("warn", "fail"):
                items.append(f"{chk.id} ({chk.status}): {fmt_value(chk.summary, 300)}")
            elif chk.status == "not_run":
                items.append(f"{chk.id} was not measured: {fmt_value(chk.summary, 300)}")
            # The memory part of a coverage line says how the step ran, not what it covered.
            extent = strip_note(chk.coverage)
            # "full", "full: all 300 dev rows", "full dev split (303 rows)": all of what it reads
            whole = extent == "full" or extent.startswith(("full:", "full "))
            if not whole and chk.replay != "observation":
                items.append(f"{chk.id} covers {extent}, not the full data.")
    c.add(Bullets(items or ["None recorded."]))


def _not_established(c: _Ctx) -> None:
    c.add(Heading(2, "What this evidence does not establish"))
    items = list(DOES_NOT_ESTABLISH)
    claim = c.records.get("claim")
    kind = claim.inputs.get("target_kind") if claim is not None else None
    if kind in LABEL_LINES:
        items.insert(1, LABEL_LINES[kind])
    elif kind != "real_world_decision":
        items.insert(1, LABEL_LINE)
    if teacher := _teacher(c):
        items.insert(1, teacher.replace("this figure measures", "every figure here measures"))
    c.add(Bullets(items))


def build_blocks(session_dir: Path) -> tuple[_Ctx, list[Block]]:
    c = _load(session_dir)
    meta = c.session.meta
    c.add(Heading(1, f"Evidence report: {meta.title or meta.id}"))
    c.add(
        Para(
            f"Session {meta.id}, created {meta.created_at} with claimcheck {meta.tool_version}"
            + (f", recipe {meta.recipe}" if meta.recipe else "")
            + f"; report written by claimcheck {__version__} from the session's records."
        )
    )
    c.add(Para(f"Session digest {c.digest} (each of the three files this report writes names it)."))
    if c.failing:
        c.add(
            Banner(
                "fail",
                "INTEGRITY FAILED — the session was changed after it was sealed, or a file its evidence "
                "rests on is gone or changed ("
                + ", ".join(c.failing)
                + "); claimcheck --replay names every row. "
                + _integrity_text(c.failing.get(integrity.SESSION_ROW, [])),
            )
        )
    c.add(verdict(c))
    cov = coverage.compute(c.records, c.states)
    c.add(coverage.summary_table(cov))
    _claim_section(c)
    c.add(*provenance_blocks(c.records.get("source"), c.states.get("source", "not_run")))
    _glance(c)
    for spec in registry.STAGES:
        _stage_section(c, spec)
    artifact, state = c.records.get("artifact"), c.states.get("artifact", "not_run")
    final = comparison_blocks(artifact, state)
    if artifact is not None and _teacher(c):
        final.insert(1, Para(_teacher(c)))
    c.add(*final)
    c.add(*latency_blocks(artifact, state))
    _tuning(c)
    _verdict_section(c)
    _limitations(c)
    _not_established(c)
    c.add(*coverage.appendix_blocks(cov))
    return c, c.blocks


# ---------------------------------------------------------------- entry point


def render(session_dir: Path) -> tuple[str, str]:
    c, blocks = build_blocks(session_dir)
    title = f"claimcheck evidence report: {c.session.meta.title or c.session.meta.id}"
    return to_markdown(blocks), to_html(blocks, title)


@dataclass
class Written:
    md: Path
    html: Path
    model_index: Path
    digest: str
    # Integrity rows that failed, by stage: the CLI exits 1 when there are any.
    failing: dict[str, list[Row]]


def write_report_set(session_dir: Path) -> Written:
    """Render report.md, report.html and model-index.yaml, then write them as one set (`_write_set`).
    Each names the session digest it describes, so a set mixed by a crash mid-rename shows."""
    session_dir = Path(session_dir)
    c, blocks = build_blocks(session_dir)
    title = f"claimcheck evidence report: {c.session.meta.title or c.session.meta.id}"
    head = f"# session digest: {c.digest}\n"
    if c.failing:
        head += "# INTEGRITY FAILED: " + ", ".join(c.failing) + " (claimcheck --replay names every row)\n"
    files = {
        REPORT_MD: to_markdown(blocks),
        REPORT_HTML: to_html(blocks, title),
        MODEL_INDEX: head + model_index_yaml(c.session),
    }
    _write_set(session_dir, files)
    return Written(
        session_dir / REPORT_MD,
        session_dir / REPORT_HTML,
        session_dir / MODEL_INDEX,
        c.digest,
        c.failing,
    )


def _write_set(folder: Path, files: dict[str, str]) -> None:
    """Every file to a temp name first (written and synced), then each renamed into place: a crash
    before the renames changes nothing; only one during them (microseconds) can mix two runs."""
    temps: list[tuple[str, Path]] = []
    try:
        for name, text in files.items():
            fd, tmp = temp_beside(folder / name)
            temps.append((tmp, folder / name))
            with os.fdopen(fd, "wb") as fh:
                fh.write(text.encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
        for tmp, dest in temps:
            os.replace(tmp, dest)
    finally:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)


def write_report(session_dir: Path) -> tuple[Path, Path]:
    """Write report.md, report.html and model-index.yaml into the session; return the first two paths."""
    written = write_report_set(session_dir)
    return written.md, written.html
