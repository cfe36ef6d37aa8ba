"""What each stage's visual panel shows, drawn from the typed evidence.

Values are read only through `claimcheck.engine.shapes.parse` (one typed model per check id) and pictures come
only from `claimcheck.engine.report.figures.figures_for`, drawn by tui/plots.py: the terminal shows the same figures
as the HTML report. A check the stage did not record, or one that measured nothing, makes the panel
say "not measured"; a record whose values do not fit their shape raises ShapeError, which the
VisualPanel shows as such instead of drawing anything.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from rich.text import Text

from claimcheck.engine import shapes
from claimcheck.engine.evidence import Check, StageRecord
from claimcheck.engine.report.figures import figures_for
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import training as training_shapes
from claimcheck.tui import numeric_panels
from claimcheck.tui.plots import abbreviate, legend, plot
from claimcheck.tui.safe import clean, literal
from claimcheck.tui.stage_words import VERDICT_STYLE, verdict_line
from claimcheck.tui.widgets import bar_lines

NOT_MEASURED = "not measured"
# The visual panel's width in an 80-column terminal (the stage navigator takes the rest); the
# VisualPanel passes its real width, this is what a caller that does not know it gets.
PANEL_WIDTH = 56
Sh = TypeVar("Sh", bound=shapes.Shape)


def section(title: str, source: str = "") -> Text:
    t = literal(title, "bold")
    if source:
        t.append(f"  (from {clean(source)})", style="dim")
    t.append("\n")
    return t


def not_measured(title: str, why: str = "") -> Text:
    t = section(title)
    t.append(NOT_MEASURED + (f": {why}" if why else "") + "\n\n", style="dim")
    return t


def read(record: StageRecord | None, check_id: str, shape: type[Sh]) -> tuple[Check | None, Sh | None]:
    """The check and its typed values; (None, None) when not recorded, (check, None) when it measured nothing."""
    check = record.check(check_id) if record is not None else None
    return check, shapes.parse(check, shape)


def pictures(record: StageRecord | None, check_id: str, width: int = PANEL_WIDTH) -> Text:
    """Every figure the check's shape calls for, drawn; empty when it has none."""
    check = record.check(check_id) if record is not None else None
    t = Text()
    for fig in figures_for(check, record) if check is not None else []:
        t.append_text(plot(fig, width))
        t.append("\n")
    return t


def _yes(flag: bool | None, yes: str = "yes", no: str = "no") -> Text:
    if flag is None:
        return Text("unknown", style="dim")
    return Text(yes if flag else no, style="bold green" if flag else "bold red")


def _table(head: list[str], rows: list[list[str]], widths: list[int]) -> Text:
    """A plain aligned table: the first column left, the rest right; cells are literal text."""
    t = Text()
    for i, (h, w) in enumerate(zip(head, widths, strict=False)):
        t.append((h.ljust(w) if i == 0 else h.rjust(w)) + " ", style="bold")
    t.append("\n")
    for row in rows:
        for i, (cell, w) in enumerate(zip(row, widths, strict=False)):
            t.append_text(literal((cell.ljust(w) if i == 0 else cell.rjust(w)) + " "))
        t.append("\n")
    return t


# ---------------------------------------------------------------- claim


def render_claim(record: StageRecord | None, session: Any, width: int = PANEL_WIDTH) -> Text:
    if record is None:
        return not_measured("Claim", "run the claim checks first")
    t = section("The claim as recorded")
    for key in ("prediction_unit", "target_meaning", "population", "primary_metric", "run_scope"):
        t.append(f"{key.replace('_', ' ')}: ", style="bold")
        t.append_text(literal(record.inputs.get(key, "") or "(empty)"))
        t.append("\n")
    t.append("\n")
    _, crit = read(record, "claim.success_criterion", training_shapes.SuccessCriterion)
    if crit is not None:
        t.append("success criterion: ", style="bold")
        t.append_text(literal(crit.criterion))
        t.append("\n")
        for problem in crit.problems:
            t.append_text(literal(f"  problem: {problem}", "yellow"))
            t.append("\n")
        t.append("\n")
    prior_check = record.check("claim.prior_sessions")
    prior = shapes.parse(prior_check, training_shapes.PriorSessions)
    pairs = [(k, float(v)) for k, v in prior.counts.items()] if prior else []
    if pairs:
        t.append_text(section("Earlier sessions by outcome", prior_check.id))
        t.append_text(bar_lines(pairs, width=24, fmt="{:.0f}"))
    else:
        t.append_text(not_measured("Earlier sessions by outcome", "none found in the review scope"))
    return t


# ---------------------------------------------------------------- source


def render_source(record: StageRecord | None, session: Any, width: int = PANEL_WIDTH) -> Text:
    t = Text()
    check, cov = read(record, "source.class_coverage", data_shapes.ClassCoverage)
    if cov is not None and cov.per_target:
        t.append_text(pictures(record, "source.class_coverage", width))
        counts = sorted(cov.per_target.items(), key=lambda kv: -kv[1])
        total = sum(n for _, n in counts) or 1
        t.append(f"  {len(counts)} classes, {cov.rows:,} rows; ", style="dim")
        t.append_text(literal(f"smallest {counts[-1][0]} {counts[-1][1] / total:.2%}", "dim"))
        if cov.rare_classes:
            t.append_text(
                literal(f"; rare (< {cov.rare_limit_rows} rows): {', '.join(cov.rare_classes)}", "yellow")
            )
        if cov.null_labels:
            t.append(f"; {cov.null_labels:,} rows without a label", style="yellow")
        t.append("\n\n")
    elif numeric_panels.is_numeric(record, "source.target_distribution"):
        t.append_text(numeric_panels.source_target(record, width))
    else:
        t.append_text(not_measured("Class distribution"))
    check, miss = read(record, "source.missingness", data_shapes.Missingness)
    if miss is not None:
        shown = pictures(record, "source.missingness", width)
        if shown.plain:
            t.append_text(shown)
        else:
            t.append_text(section("Missingness per column", check.id if check else ""))
        none = sum(1 for v in miss.null_share.values() if v == 0)
        t.append(f"  {none} of {len(miss.null_share)} columns have no missing values\n", style="dim")
        if miss.inputs_mostly_null:
            t.append_text(
                literal(f"  model inputs mostly null: {', '.join(miss.inputs_mostly_null)}", "yellow")
            )
            t.append("\n")
        t.append("\n")
    else:
        t.append_text(not_measured("Missingness per column"))
    t.append_text(_label_noise(record, numeric_panels.is_numeric(record, "source.target_distribution")))
    return t


def _label_noise(record: StageRecord | None, numeric: bool = False) -> Text:
    check, noise = read(record, "source.conflicting_labels", data_shapes.ConflictingLabels)
    if noise is None:
        return not_measured("Contradictory labels (noise ceiling)")
    t = section("Contradictory labels on identical inputs", check.id if check else "")
    if numeric:  # an accuracy ceiling is a class figure: a numeric target shows the groups alone
        t.append(f"  {noise.groups:,} groups, {noise.rows:,} rows carry more than one target value\n\n")
        return t
    t.append(
        f"  {noise.groups:,} groups, {noise.rows:,} rows; accuracy ceiling {noise.noise_ceiling_accuracy:.4f}"
        f" ({noise.rows_above_ceiling:,} rows no model can get right)\n\n"
    )
    return t


# ---------------------------------------------------------------- split


def render_split(record: StageRecord | None, session: Any, width: int = PANEL_WIDTH) -> Text:
    t = Text()
    check, member = read(record, "split.membership", data_shapes.Membership)
    if member is not None and member.sizes:
        t.append_text(section("Rows per split", check.id if check else ""))
        t.append_text(bar_lines([(k, float(v)) for k, v in member.sizes.items()], width=24, fmt="{:,.0f}"))
        for why, n in member.excluded.items():
            t.append_text(literal(f"  excluded: {n:,} rows ({why})", "dim"))
            t.append("\n")
        t.append("\n")
    else:
        t.append_text(not_measured("Rows per split"))
    _, prev = read(record, "split.prevalence", data_shapes.Prevalence)
    if prev is not None:
        t.append_text(pictures(record, "split.prevalence", width))
        t.append(
            f"  largest share difference from the whole: {prev.max_abs_share_difference:.3f}\n\n", style="dim"
        )
    elif numeric_panels.is_numeric(record, "split.target_distribution"):
        t.append_text(numeric_panels.split_target(record, width))
    else:
        t.append_text(not_measured("Prevalence per split"))
    _, support = read(record, "split.class_support", data_shapes.ClassSupport)
    if support is not None:
        t.append_text(pictures(record, "split.class_support", width))
        for split, classes in support.below_floor.items():
            if classes:
                t.append_text(
                    literal(f"  below {support.floor} rows in {split}: {', '.join(classes)}", "yellow")
                )
                t.append("\n")
        t.append("\n")
    return t


# ---------------------------------------------------------------- baseline


def _learner(record: StageRecord | None) -> tuple[str, str, baseline_shapes.LearnerReport | None]:
    """(check id, learner, report) of the conventional learner to tabulate: the one learnability names."""
    check, conv = read(record, "baseline.conventional", baseline_shapes.Conventional)
    if conv is None or not conv.learners:
        return "", "", None
    _, learn = read(record, "baseline.learnability", baseline_shapes.Learnability)
    name = (
        learn.learner if learn is not None and learn.learner in conv.learners else next(iter(conv.learners))
    )
    return check.id if check else "", name, conv.learners[name]


def render_baseline(record: StageRecord | None, session: Any, width: int = PANEL_WIDTH) -> Text:
    t = Text()
    errors = numeric_panels.baseline_errors(record)
    if errors.plain:  # a numeric target: error figures per learner, no confusion matrix or class table
        t.append_text(errors)
        t.append_text(_learnability(record, width))
        return t
    shown = pictures(record, "baseline.conventional", width)
    if shown.plain:
        t.append("Confusion matrices (rows true, columns predicted)\n", style="bold")
        t.append_text(shown)
    else:
        t.append_text(not_measured("Confusion matrix"))
    cid, name, report = _learner(record)
    if report is not None and report.per_class:
        labels = abbreviate([r.class_ for r in report.per_class], 16)
        lab_w = max(5, *(len(x) for x in labels))
        rows = [
            [lab]
            + [("–" if v is None else f"{v:.3f}") for v in (r.precision, r.recall, r.f1)]
            + [f"{r.support:,}"]
            for lab, r in zip(labels, report.per_class, strict=False)
        ]
        t.append_text(section(f"Per class, {name}", cid))
        t.append_text(_table(["class", "precision", "recall", "f1", "support"], rows, [lab_w, 9, 9, 9, 8]))
        t.append_text(legend([r.class_ for r in report.per_class], labels, "classes", width))
        bits = [
            f"{k} {v:.4f}"
            for k in ("macro_f1", "accuracy", "balanced_accuracy", "log_loss")
            if (v := report.metric(k)) is not None
        ]
        t.append("  " + "  ".join(bits) + "\n\n", style="dim")
    else:
        t.append_text(not_measured("Per-class table"))
    t.append_text(_learnability(record, width))
    return t


def beats_words(learn: baseline_shapes.Learnability) -> str:
    """Whether the learner beats the trivial reference when no interval was drawn: not decided, the
    point estimate read in the metric registry's direction (engine/stats/registry.py)."""
    from claimcheck.engine.stats import registry

    d = learn.difference
    name = learn.metric or d.metric
    entry = registry.by_key(name)
    lower = bool(entry and entry.lower_is_better)
    ahead = d.estimate < 0 if lower else d.estimate > 0
    return (
        f"not decided: no interval ({d.refused or 'too few defined resamples'}); the point estimate "
        f"{d.estimate:+.4g} is {'better' if ahead else 'not better'} ({name}: "
        f"{'lower' if lower else 'higher'} is better)"
    )


def _learnability(record: StageRecord | None, width: int) -> Text:
    check, learn = read(record, "baseline.learnability", baseline_shapes.Learnability)
    if learn is None:
        return not_measured("Learnability")
    t = pictures(record, "baseline.learnability", width)
    if not t.plain:
        t.append_text(section(f"{learn.learner} − {learn.reference}", check.id if check else ""))
        t.append("  no bounded interval\n", style="dim")
    t.append("  beats the trivial baseline: ")
    if learn.difference.bounded:
        t.append_text(_yes(learn.beats_trivial))
    else:  # no interval: the point estimate, read in the metric's direction (engine/stats/registry.py)
        t.append_text(literal(beats_words(learn), "yellow"))
    if learn.mcnemar is not None:
        t.append(f"; McNemar p = {learn.mcnemar.p_value:.4g}")
    t.append("\n")
    if learn.noise_ceiling is not None:
        t.append(f"  label-noise ceiling {learn.noise_ceiling:.4f}")
        if learn.accuracy is not None:
            t.append(f", accuracy {learn.accuracy:.4f}")
        if learn.gap_to_ceiling is not None:
            t.append(f", gap {learn.gap_to_ceiling:+.4f}")
        t.append("\n")
        if learn.ceiling_comparison:
            t.append_text(literal(f"  ceiling comparison: {learn.ceiling_comparison}", "dim"))
            t.append("\n")
    t.append("\n")
    return t


# ---------------------------------------------------------------- contract


def render_contract(record: StageRecord | None, session: Any, width: int = PANEL_WIDTH) -> Text:
    t = Text()
    _, lengths = read(record, "contract.prepared_lengths", training_shapes.PreparedLengths)
    shown = pictures(record, "contract.prepared_lengths", width)
    if lengths is not None and shown.plain:
        t.append_text(shown)
        t.append(
            f"  p50 {lengths.p50} · p95 {lengths.p95} · p99 {lengths.p99} · max {lengths.max} · "
            f"truncated {lengths.truncated:,} of {lengths.count:,} ({lengths.truncated_share:.1%})\n",
            style="dim",
        )
        if lengths.targets_cut:
            t.append(f"  {lengths.targets_cut:,} SFT targets cut by truncation\n", style="bold red")
        t.append("\n")
    elif (cand := record.check("contract.candidate") if record is not None else None) is not None:
        # a claim without fine-tuning: the pinned scikit-learn candidate, no tokens to measure
        t.append_text(section("Candidate", cand.id))
        t.append_text(literal(f"  {cand.summary}"))
        t.append("\n\n")
    else:
        t.append_text(not_measured("Token-length histogram"))
    t.append_text(_changed_settings(record))
    check, samples = read(record, "contract.prepared_samples", training_shapes.PreparedSamples)
    if samples is not None and samples.samples:
        t.append_text(
            section(
                "Decoded examples: supervised text bold and underlined, masked text dim",
                check.id if check else "",
            )
        )
        for i, sample in enumerate(samples.samples[:4]):
            t.append_text(_decoded(sample, i))
            t.append("\n")
    elif record is None or record.check("contract.candidate") is None:
        t.append_text(not_measured("Decoded examples"))
    return t


def _changed_settings(record: StageRecord | None) -> Text:
    check, table = read(record, "contract.requested_vs_effective", training_shapes.RequestedVsEffective)
    if table is None:
        return Text()
    changed = [row for row in table.table if row.outcome != "as requested"]
    if not changed:
        return Text(f"All {len(table.table)} settings take effect as requested.\n\n", "dim")
    t = section("Settings resolved or refused (requested → effective)", check.id if check else "")
    for row in changed:
        t.append_text(
            literal(
                f"  {row.setting}: {row.requested} → {row.effective} ({row.outcome})",
                "bold red" if row.outcome.startswith("refused") else "",
                limit=160,
            )
        )
        t.append("\n")
    t.append("\n")
    return t


def _decoded(sample: training_shapes.Sample, i: int) -> Text:
    """One decoded example as training sees it."""
    t = Text()
    head = f"example {i + 1}, id {clean(sample.id)}, {sample.tokens} tokens"
    if sample.label is not None:
        head += f", label {clean(sample.label)}"
    if sample.supervised_tokens is not None:
        head += f", {sample.supervised_tokens} supervised / {sample.masked_tokens} masked"
    if sample.truncated:
        head += ", TRUNCATED"
    t.append(head + "\n", style="italic")
    # SFT samples mark supervised spans ⟦…⟧; everything outside is masked from the loss.
    supervised = sample.label is None
    for j, part in enumerate(re.split(r"⟦|⟧", sample.decoded[:1200])):
        style = "bold underline" if (supervised and j % 2 == 1) else ("dim" if supervised else "")
        t.append_text(literal(part, style, keep_newlines=True))
    t.append("\n")
    return t


# ---------------------------------------------------------------- dispatch (the record's part)


def render_dispatch_record(record: StageRecord | None, width: int = PANEL_WIDTH) -> Text:
    """The recorded curves (checkpoint steps marked, the trivial baseline as reference) and checkpoints."""
    t = Text()
    if record is None or record.check("dispatch.no_job") is not None:
        return t  # no job: no curves to draw (the panel's head line says why)
    for check_id, what in (
        ("dispatch.loss_curve", "Recorded loss curve"),
        ("dispatch.dev_metric", "Recorded dev metric"),
    ):
        shown = pictures(record, check_id, width)
        t.append_text(shown if shown.plain else not_measured(what))
    _, ckpt = read(record, "dispatch.checkpoints", training_shapes.Checkpoints)
    if ckpt is not None:
        t.append("checkpoints: ", style="bold")
        t.append(", ".join(f"step {s}" for s in ckpt.steps) or "none saved")
        if ckpt.incomplete:
            t.append(" · incomplete: " + ", ".join(str(s) for s in ckpt.incomplete), style="bold red")
        t.append("\n")
    return t


# ---------------------------------------------------------------- artifact


def render_artifact(record: StageRecord | None, session: Any, width: int = PANEL_WIDTH) -> Text:
    t = _verdict(record)
    t.append_text(_arms_table(record, width))
    _, comp = read(record, "artifact.comparison", artifact_shapes.Comparison)
    if comp is not None:
        t.append_text(pictures(record, "artifact.comparison", width))
        for arm, d in comp.differences.items():
            # the interval is in the forest plot above; one without bounds is not drawn there
            shown = "" if d.bounded else f" {d.estimate:+.4f} (no interval)"
            t.append_text(literal(f"  candidate − {arm}:{shown}"))
            better = comp.candidate_better.get(arm)
            t.append(" better" if better else " not shown better", style="bold green" if better else "yellow")
            if arm in comp.mcnemar:
                t.append(f"; McNemar p = {comp.mcnemar[arm].p_value:.4g}")
            t.append("\n")
        t.append(
            f"  {comp.shared_rows:,} rows scored by every arm; intervals over {clean(comp.unit)}\n\n",
            style="dim",
        )
    t.append_text(numeric_panels.artifact_errors(record, width))
    shown = pictures(record, "artifact.per_class", width)
    if shown.plain:
        t.append_text(shown)
    t.append_text(_calibration(record, width))
    return t


def _verdict(record: StageRecord | None) -> Text:
    check, v = read(record, "artifact.verdict", artifact_shapes.Verdict)
    if v is None:
        return not_measured("Verdict")
    _, line = verdict_line(v)
    t = literal(line, VERDICT_STYLE[v.claim_word()])
    t.append("\n")
    t.append_text(section("Verdict: four outcomes, kept apart", check.id if check else ""))
    for label, flag in (
        ("job finished", v.job_finished),
        ("artifact verified", v.artifact_verified),
        ("candidate better than every comparator", v.candidate_better),
    ):
        t.append(f"  {label}: ")
        t.append_text(_yes(flag))
        t.append("\n")
    # the claim's outcome is the record's three-way claim_state (met / not met / not decided), never
    # the yes/no claim_met flag, which is also false when the verdict is not decided
    t.append_text(literal(f"  claim {v.claim_word()}: {v.reason()}", "bold"))
    t.append("\n\n")
    return t


def _arms_table(record: StageRecord | None, width: int) -> Text:
    check, arms = read(record, "artifact.arms", artifact_shapes.Arms)
    _, comp = read(record, "artifact.comparison", artifact_shapes.Comparison)
    if arms is None:
        return not_measured("Base / candidate / baseline comparison")
    metric = clean(comp.metric) if comp is not None else "metric"
    names = abbreviate(list(arms.arms), 16)
    arm_w = max(3, *(len(n) for n in names))
    rows = []
    for name, (arm, n) in zip(names, arms.arms.items(), strict=False):
        value = comp.values.get(arm) if comp is not None else None
        rows.append(
            [
                name,
                f"{n.requested:,}",
                f"{n.scored:,}",
                f"{n.failed:,}",
                f"{n.missing:,}",
                "–" if value is None else f"{value:.4f}",
            ]
        )
    t = section(f"Locked test, {metric} (raw), arms side by side", check.id if check else "")
    t.append_text(
        _table(
            ["arm", "requested", "scored", "failed", "missing", metric[:12]],
            rows,
            [arm_w, 9, 7, 7, 7, max(6, min(12, len(metric)))],
        )
    )
    t.append_text(legend(list(arms.arms), names, "arms", width))
    for arm, n in arms.arms.items():
        if n.what:  # what each arm is (the trivial predictor named, the rows it was fitted on)
            t.append_text(literal(f"  {arm}: {n.what}", "dim", limit=300))
            t.append("\n")
    for arm, why in arms.excluded.items():  # a comparator of the claim that is not an arm, and why
        t.append_text(literal(f"  {arm} not an arm: {why}", "yellow", limit=400))
        t.append("\n")
    for arm, n in arms.arms.items():
        for err in n.errors[:3]:
            t.append_text(literal(f"  {arm}: {err}", "red", limit=200))
            t.append("\n")
    t.append("\n")
    return t


def _calibration(record: StageRecord | None, width: int) -> Text:
    check, cal = read(record, "artifact.calibrated", artifact_shapes.Calibrated)
    if cal is None or not cal.arms:
        comp = record.check("artifact.comparison") if record is not None else None
        metric = str((comp.measured or {}).get("metric", "")) if comp is not None else ""
        if metric in numeric_panels.ERROR_METRICS:  # a numeric target has no probabilities
            return Text()
        return not_measured("Calibration", "the artifact record holds no calibrated arm")
    t = section(f"Calibration ({cal.method}): ECE raw → calibrated", check.id if check else "")
    names = abbreviate(list(cal.arms), 18)
    for name, v in zip(names, cal.arms.values(), strict=False):
        raw, calv = v.raw.ece, v.calibrated.ece
        line = f"  {name:<18} " + (f"{raw:.3f} → {calv:.3f}" if raw is not None and calv is not None else "–")
        extra = v.calibrated_metric()
        if extra is not None:
            line += f"; calibrated {extra[0]} {extra[1]:.4f}"
        t.append_text(literal(line))
        t.append("\n")
    t.append("\n")
    t.append_text(pictures(record, "artifact.calibrated", width))
    return t


RENDERERS = {
    "claim": render_claim,
    "source": render_source,
    "split": render_split,
    "baseline": render_baseline,
    "contract": render_contract,
    "artifact": render_artifact,
}
