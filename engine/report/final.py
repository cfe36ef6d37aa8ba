"""The report's final-comparison and latency sections, read from the artifact stage's typed shapes:
per arm the requested / scored / failed / missing counts, the primary metric and the candidate's
paired difference with its interval and McNemar p; the verdict's four outcomes; latency apart."""

from __future__ import annotations

from typing import Any

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.report import figures as F
from claimcheck.engine.report.render import Banner, Block, Fig, Heading, Para, Table, fmt_value, status_text
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import parse

ARM_HEADERS = ["Arm", "Requested", "Scored", "Failed", "Missing"]


def comparison_blocks(rec: StageRecord | None, state: str) -> list[Block]:
    out: list[Block] = [Heading(2, "Final comparison on the locked test")]
    if rec is None:
        return out + [Banner("not_run", "No final comparison exists: the artifact stage has no record.")]
    if state != "frozen":
        out.append(Banner(state, f"The artifact stage is {state}: the comparison below is not established."))
    arms = parse(rec.check("artifact.arms"), artifact_shapes.Arms)
    comp_check = rec.check("artifact.comparison")
    comp = parse(comp_check, artifact_shapes.Comparison)
    if arms is None:
        return out + [
            Para("The artifact record holds no arms table: no arm was asked for on the locked test.")
        ]
    out.append(arms_table(arms, comp))
    if comp is None:
        why = comp_check.summary if comp_check is not None else "no comparison was recorded"
        out.append(Para(f"No paired comparison: {why}.", lead="artifact.comparison"))
    else:
        out.append(Para(f"{status_text(comp_check.status, state)}: {comp_check.summary}", lead=comp_check.id))
        out += [Fig(fig) for fig in F.figures_for(comp_check, rec)]
    return out + _outcomes(rec)


def arms_table(arms: artifact_shapes.Arms, comp: artifact_shapes.Comparison | None) -> Table:
    """One row per arm: its counts, the primary metric, and the candidate's paired difference to it."""
    rows = []
    for name, a in arms.arms.items():
        value = comp.values.get(name) if comp else None
        diff = comp.differences.get(name) if comp else None
        mcn = comp.mcnemar.get(name) if comp else None
        counts = [str(a.requested), str(a.scored), str(a.failed), str(a.missing)]
        rows.append(
            [name, *counts]
            + [
                fmt_value(value) if value is not None else "—",
                _interval_text(diff) if diff else ("reference" if name == "candidate" else "—"),
                f"{mcn.p_value:.3g}" if mcn else "—",
                fmt_value(a.what, 200),
            ]
        )
    unit = f" over {comp.shared_rows} rows every arm scored ({comp.unit} bootstrap)" if comp else ""
    outside = arms.labels_outside_class_order
    note = "A failed or missing prediction is missing evidence, never a zero score." + (
        f" {outside} test rows carry a label outside the class order." if outside else ""
    )
    metric = comp.metric if comp else "metric"
    headers = [*ARM_HEADERS, metric, "Candidate − arm [interval]", "McNemar p", "What"]
    return Table(headers, rows, f"Arms on the locked test{unit}", note)


def _interval_text(d: Any) -> str:
    if d.lo is None or d.hi is None:
        return f"{d.estimate:+.4f} (interval undefined)"
    return f"{d.estimate:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}] ({int(d.level * 100)}%)"


def _outcomes(rec: StageRecord) -> list[Block]:
    v = parse(rec.check("artifact.verdict"), artifact_shapes.Verdict)
    if v is None:
        return []
    yes = {True: "yes", False: "no"}
    rows = [
        ["The training job finished", yes[v.job_finished]],
        ["The artifact is verified (identity and reload parity)", yes[v.artifact_verified]],
        ["The candidate beats every comparator (interval excludes zero)", yes[v.candidate_better]],
        [
            "The claim's success criterion is met",
            v.claim_word(),
        ],
    ]
    note = f"Success criterion: {v.claim_line()}"
    return [Table(["Outcome", "Holds"], rows, "Four outcomes, kept apart", note)]


def latency_blocks(rec: StageRecord | None, state: str) -> list[Block]:
    out: list[Block] = [Heading(2, "Latency (a separate axis from quality)")]
    lat = parse(rec.check("artifact.latency"), artifact_shapes.ArtifactLatency) if rec else None
    if lat is None:
        return out + [Para("No latency was measured.")]
    chk = rec.check("artifact.latency")
    rows = [[arm, f"{x.p50_ms:.1f}", f"{x.p95_ms:.1f}", str(x.examples)] for arm, x in lat.arms.items()]
    caption = (
        f"{status_text(chk.status, state)}: batch {lat.batch_size}, device {lat.device} ({chk.coverage})"
    )
    out.append(Para("Timing is reported apart from quality; it is not a serving benchmark."))
    return out + [Table(["Arm", "p50 ms", "p95 ms", "Examples"], rows, caption)]
