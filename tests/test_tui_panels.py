"""The visual panels on the real session (tests/real_session.py): each stage's panel draws what its
record holds, read through the typed shapes; the numbers asserted here are read from the record
through the same shapes, never written into the test. Plus the terminal figures (tui/plots.py) on
their own: one-point curves, unambiguous abbreviations, 80 columns, literal labels.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.cells import cell_len

from claimcheck.engine import shapes
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.report.figures import Forest, Grouped, Heatmap, Histogram, Lines, figures_for
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.engine.shapes import training as training_shapes
from claimcheck.tui.plots import abbreviate, num, plot
from claimcheck.tui.stage_panels import PANEL_WIDTH, RENDERERS, render_dispatch_record
from tests import real_session as rs

BAR = "[█▏▎▍▌▋▊▉░]+"
STAGES = ("claim", "source", "split", "baseline", "contract", "dispatch", "artifact")


@pytest.fixture(scope="module")
def session(real_session: Path) -> Session:
    return Session.open(real_session)


def shape(session: Session, stage: str, check_id: str, cls: type[shapes.Shape]):
    value = shapes.parse(session.record(stage).check(check_id), cls)
    assert value is not None, f"{check_id} measured nothing in the real session"
    return value


def conv_check(session: Session):
    return session.record("baseline").check("baseline.conventional")


def panel(session: Session, stage: str) -> str:
    record = session.record(stage)
    if stage == "dispatch":
        return render_dispatch_record(record).plain
    return RENDERERS[stage](record, session).plain


def line_of(text: str, pattern: str) -> str:
    found = [ln for ln in text.splitlines() if re.search(pattern, ln)]
    assert len(found) == 1, f"{pattern!r} matched {len(found)} lines in:\n{text}"
    return found[0]


def assert_named(shown: list[str], names: list[str], text: str) -> None:
    """Each label shown whole, or cut and explained in the figure's legend ("techni… = technical")."""
    assert len(shown) == len(names), (shown, names)
    for short, name in zip(shown, names, strict=True):
        assert short == name or f"{short} = {name}" in text, f"{short!r} for {name!r} is not explained"


def block(text: str, title: str) -> list[str]:
    """The lines of the figure whose title line contains `title`, up to the next blank line."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if title in ln)
    out = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        out.append(ln)
    return out


# ---------------------------------------------------------------- each stage's panel


def test_claim_panel_shows_the_criterion(session: Session) -> None:
    crit = shape(session, "claim", "claim.success_criterion", training_shapes.SuccessCriterion)
    text = panel(session, "claim")
    assert f"success criterion: {crit.criterion}" in text
    assert session.record("claim").inputs["primary_metric"] in text


def test_source_panel_class_counts_and_missingness(session: Session) -> None:
    cov = shape(session, "source", "source.class_coverage", data_shapes.ClassCoverage)
    miss = shape(session, "source", "source.missingness", data_shapes.Missingness)
    text = panel(session, "source")
    rows = block(text, "source.class_coverage · rows per class")
    assert len(rows) == len(cov.per_target)
    for cls, n in cov.per_target.items():
        line_of("\n".join(rows), rf"^{re.escape(cls)}\s+{BAR}\s+{n:,}$")
    assert f"{len(cov.per_target)} classes, {cov.rows:,} rows" in text
    shares = block(text, "source.missingness · share of nulls per column")
    assert [ln.split()[0] for ln in shares] == [k for k, v in miss.null_share.items() if v > 0]
    none = sum(1 for v in miss.null_share.values() if v == 0)
    assert f"{none} of {len(miss.null_share)} columns have no missing values" in text
    noise = shape(session, "source", "source.conflicting_labels", data_shapes.ConflictingLabels)
    assert f"accuracy ceiling {noise.noise_ceiling_accuracy:.4f}" in text


def test_split_panel_sizes_and_prevalence(session: Session) -> None:
    member = shape(session, "split", "split.membership", data_shapes.Membership)
    prev = shape(session, "split", "split.prevalence", data_shapes.Prevalence)
    text = panel(session, "split")
    for split, n in member.sizes.items():
        line_of(text, rf"^{split}\s+{BAR} {n:,}$")
    rows = block(text, "split.prevalence · class share per split")
    assert_named(rows[0].split(), ["whole", *prev.per_split], text)
    for cls, share in prev.whole.items():
        line = line_of("\n".join(rows), rf"^{re.escape(cls)} ")
        expected = [f"{share:.3f}"] + [f"{prev.per_split[s][cls]:.3f}" for s in prev.per_split]
        assert re.findall(r"\d+\.\d{3}", line) == expected


def test_baseline_panel_shows_the_confusion_matrix(session: Session) -> None:
    conv = shape(session, "baseline", "baseline.conventional", baseline_shapes.Conventional)
    learn = shape(session, "baseline", "baseline.learnability", baseline_shapes.Learnability)
    text = panel(session, "baseline")
    drawn = [n for n, rep in conv.learners.items() if rep.confusion and rep.per_class]
    assert drawn, "the real session's conventional learner has a confusion matrix"
    for name in drawn:
        rep = conv.learners[name]
        rows = block(text, f"baseline.conventional · confusion matrix of {name}")
        classes = [r.class_ for r in rep.per_class]
        # six class names do not fit the panel as column heads: columns numbered as the rows
        assert "predicted" in rows[0] and rows[1].split()[2:] == [str(i + 1) for i in range(len(classes))]
        assert "columns are numbered as the rows" in rows[-1]
        for i, (cls, counts) in enumerate(zip(classes, rep.confusion, strict=True), start=1):
            line = line_of("\n".join(rows), rf"^{i} {re.escape(cls)}\s")
            assert [int(x.replace(",", "")) for x in line.split()[2:]] == counts
        # with room, the columns carry the class names whole
        wide = plot(next(f for f in figures_for(conv_check(session), None) if name in f.title), 120).plain
        assert wide.splitlines()[2].split()[2:] == classes
    report = conv.learners[learn.learner]
    for r in report.per_class:
        line_of(
            text, rf"^{re.escape(r.class_)}\s+{r.precision:.3f}\s+{r.recall:.3f}\s+{r.f1:.3f}\s+{r.support:,}"
        )
    d = learn.difference
    assert f"{learn.learner} − {learn.reference}" in text
    assert f"{d.estimate:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}]" in text
    assert f"McNemar p = {learn.mcnemar.p_value:.4g}" in text


def test_contract_panel_histogram_marks_max_length(session: Session) -> None:
    lengths = shape(session, "contract", "contract.prepared_lengths", training_shapes.PreparedLengths)
    text = panel(session, "contract")
    rows = block(text, "contract.prepared_lengths · prepared token lengths before truncation")
    bins = lengths.bins()
    assert len(bins) == len(lengths.histogram)
    for lo, hi, n in bins:
        line = line_of("\n".join(rows), rf"^\s*{lo}-{hi} │")
        assert re.search(rf"█* +{n:,}( ←|$)", line), line
    marked = [ln for ln in rows if "← max_length" in ln]
    inside = [(lo, hi) for lo, hi, _ in bins if lo <= lengths.max_length <= hi]
    assert len(marked) == 1 and marked[0].lstrip().startswith(f"{inside[0][0]}-{inside[0][1]} │")
    assert marked[0].endswith(f"← max_length {lengths.max_length}")
    assert f"truncated {lengths.truncated:,} of {lengths.count:,}" in text
    samples = shape(session, "contract", "contract.prepared_samples", training_shapes.PreparedSamples)
    assert f"example 1, id {samples.samples[0].id}" in text


def test_dispatch_record_marks_checkpoint_steps(session: Session) -> None:
    ckpt = shape(session, "dispatch", "dispatch.checkpoints", training_shapes.Checkpoints)
    loss = shape(session, "dispatch", "dispatch.loss_curve", training_shapes.LossCurve)
    dev = shape(session, "dispatch", "dispatch.dev_metric", training_shapes.DevMetric)
    assert ckpt.steps, "the real session saved checkpoints"
    text = panel(session, "dispatch")
    steps = ", ".join(str(s) for s in ckpt.steps)
    chart = "\n".join(block(text, "dispatch.loss_curve · training loss per optimizer step"))
    grid = [ln for ln in chart.splitlines() if " ┤" in ln or " │" in ln]
    assert len(grid) == 8, chart
    # one vertical mark per checkpoint, the same column on every row of the chart
    cols = {i for ln in grid for i, ch in enumerate(ln) if ch == "┆"}
    assert len(cols) == len(ckpt.steps)
    assert f"┆ checkpoints at step {steps}" in chart
    assert f"● loss: {len(loss.step)} points (step {loss.step[0]}–{loss.step[-1]})" in text
    assert f"last {num(loss.loss[-1])}" in text
    dev_chart = "\n".join(block(text, f"dispatch.dev_metric · {dev.metric} at each evaluation"))
    assert f"┆ checkpoints at step {steps}" in dev_chart
    assert f"┄ trivial baseline {num(dev.trivial_value)}" in dev_chart
    assert f"checkpoints: {', '.join(f'step {s}' for s in ckpt.steps)}" in text


def test_artifact_panel_arms_table_differences_and_verdict(session: Session) -> None:
    arms = shape(session, "artifact", "artifact.arms", artifact_shapes.Arms)
    comp = shape(session, "artifact", "artifact.comparison", artifact_shapes.Comparison)
    verdict = shape(session, "artifact", "artifact.verdict", artifact_shapes.Verdict)
    text = panel(session, "artifact")
    assert set(arms.arms) == {"candidate", "trivial_baseline", "base_model", "frozen_probe", "best_baseline"}
    assert f"Locked test, {comp.metric} (raw), arms side by side" in text
    for arm, n in arms.arms.items():
        line_of(
            text,
            rf"^{arm}\s+{n.requested:,}\s+{n.scored:,}\s+{n.failed:,}\s+{n.missing:,}\s+{comp.values[arm]:.4f}\s*$",
        )
    for arm, d in comp.differences.items():
        forest = line_of(text, rf"^candidate − {arm} ")
        assert forest.endswith(f"{d.estimate:+.4f} [{d.lo:+.4f}, {d.hi:+.4f}]")
        line = line_of(text, rf"^  candidate − {arm}: ")
        assert ("not shown better" not in line) == comp.candidate_better[arm]
        assert f"McNemar p = {comp.mcnemar[arm].p_value:.4g}" in line
    for label, flag in (
        ("job finished", verdict.job_finished),
        ("artifact verified", verdict.artifact_verified),
        ("candidate better than every comparator", verdict.candidate_better),
    ):
        line_of(text, rf"^  {label}: {'yes' if flag else 'no'}$")
    # the claim's outcome in the record's three words (met / not met / not decided), with its reason
    assert f"\n  claim {verdict.claim_word()}: {verdict.reason()}\n" in text
    assert "claim met: " not in text
    # the rule and the measured value apart, never the one-line form that reads as if it held
    assert verdict.judgement() in text and verdict.criterion not in text
    assert "latency" not in text.lower(), "latency is not drawn (it is not deterministic)"


def test_reliability_curve_of_one_point_is_a_point_with_its_value(session: Session) -> None:
    cal = shape(session, "artifact", "artifact.calibrated", artifact_shapes.Calibrated)
    text = panel(session, "artifact")
    singles = [
        (arm, kind, getattr(fig.reliability, kind))
        for arm, fig in cal.arms.items()
        for kind in ("raw", "calibrated")
        if len(getattr(fig.reliability, kind).confidence) == 1
    ]
    for arm, kind, rel in singles:
        chart = "\n".join(block(text, f"reliability of {arm} "))
        assert f"{kind}: one point, {num(rel.accuracy[0])} at confidence {num(rel.confidence[0])}" in chart
    one = Lines("t", {"dev": [(6.0, 0.25)]}, "step", marks=[6.0], mark_label="checkpoints")
    drawn = plot(one).plain
    assert "dev: one point, 0.25 at step 6" in drawn
    assert "└" not in drawn and "┤" not in drawn, "one point is not drawn as a chart"


@pytest.mark.parametrize("width", [78, PANEL_WIDTH])
def test_every_real_figure_fits_the_width(session: Session, width: int) -> None:
    kinds = set()
    for stage in STAGES:
        record = session.record(stage)
        for check in record.checks:
            for fig in figures_for(check, record):
                kinds.add(type(fig))
                drawn = plot(fig, width).plain
                widest = max(cell_len(ln) for ln in drawn.splitlines()[1:])  # the title may wrap
                assert widest <= width, f"{check.id}: {widest} columns\n{drawn}"
    assert kinds == {Heatmap, Lines, Forest, Histogram, Grouped}


async def test_each_visual_tab_draws_the_real_record(real_workspace: Path, tmp_path: Path) -> None:
    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.panels import NOT_MEASURED
    from tests.test_tui_support import screen_text, wait_for

    path = rs.copy_workspace(real_workspace, tmp_path)
    app = make_app(path, workspace=path.parents[1])
    expected = {
        "source": "rows per class",
        "split": "Rows per split",
        "baseline": "predicted →",
        "contract": "← max_length",
        "dispatch": "job ",
        "artifact": "Verdict: four outcomes",
    }
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen) and app.screen.view() is not None)
        for i, stage in enumerate(STAGES, start=1):
            if stage not in expected:
                continue
            await pilot.press("ctrl+l", str(i))
            await wait_for(
                pilot, lambda s=stage: app.screen.view(s) is not None and app.screen.view(s)._ready
            )
            await pilot.press("f4")
            await wait_for(pilot, lambda s=stage: expected[s] in screen_text(app))
            body = str(
                app.screen.view(stage)
                .query_one("#job-body" if stage == "dispatch" else "#visual-body")
                .render()
            )
            assert "unexpected shape" not in body and ": measured." not in body, body
            assert f"{NOT_MEASURED}:" not in body, body


# ---------------------------------------------------------------- the terminal figures on their own


def test_abbreviations_are_never_ambiguous() -> None:
    labels = ["account_closed", "account_opened", "acc", "billing", "b"]
    short = abbreviate(labels, 5)
    assert len(set(short)) == len(labels) and all(len(s) <= 5 for s in short)
    assert short[2] == "acc" and short[4] == "b", "labels that fit stay whole"
    cells = [[float(i == j) for j in range(5)] for i in range(5)]
    # columns that are not the rows: cut, all different, and named in a legend
    text = plot(Heatmap("m", labels, labels[::-1], cells), width=40).plain
    lines = text.splitlines()
    cols = lines[2].split()[2:]
    assert len(set(cols)) == len(labels) and cols != labels[::-1], "cut, and still all different"
    assert_named(cols, labels[::-1], text)
    assert_named([ln.split()[0] for ln in lines[3:8]], labels, text)
    assert max(cell_len(ln) for ln in lines) <= 40
    # a confusion matrix (columns = rows): the columns are numbered, the numbered rows are the legend
    lines = plot(Heatmap("m", labels, labels, cells), width=40).plain.splitlines()
    assert lines[2].split()[2:] == ["1", "2", "3", "4", "5"]
    assert [ln.split()[0] for ln in lines[3:8]] == ["1", "2", "3", "4", "5"]
    assert_named([ln.split()[1] for ln in lines[3:8]], labels, "\n".join(lines))
    assert "columns are numbered as the rows" in lines[-1]


def test_figure_labels_are_literal() -> None:
    hostile = "[bold]x[/bold]\x1b[31m"
    for fig in (
        Heatmap(hostile, [hostile, "b"], [hostile, "b"], [[1.0, 2.0], [3.0, 4.0]]),
        Grouped(hostile, {hostile: {hostile: 1.0}}),
        Forest(hostile, [(hostile, 0.1, -0.1, 0.2)]),
        Lines(hostile, {hostile: [(1.0, 2.0), (2.0, 3.0)]}, hostile, reference=2.5, reference_label=hostile),
    ):
        text = plot(fig).plain
        assert "[bold]x[/bold]␛[31m" in text and "\x1b" not in text


def test_histogram_marks_the_bin_holding_the_marker_and_says_when_none_does() -> None:
    fig = Histogram("h", [(0, 9, 3), (10, 19, 5), (20, 29, 1)], 12, "max_length")
    lines = plot(fig).plain.splitlines()
    assert lines[2].endswith("← max_length 12") and lines[2].lstrip().startswith("10-19")
    assert "bins wholly past max_length" in plot(fig).plain
    past = plot(Histogram("h", [(0, 9, 3)], 64, "max_length")).plain
    assert "max_length 64 lies past every bin" in past


async def test_a_reopened_session_opens_where_it_needs_attention(
    real_workspace: Path, tmp_path: Path
) -> None:
    """Every stage frozen: the verdict (artifact); a job still running: dispatch; a stage made a
    draft again: that stage. From the real session's records."""
    import json

    from claimcheck.engine.ledger.session import Session
    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.session_screen import needs_attention
    from tests.test_tui_support import wait_for

    path = rs.copy_workspace(real_workspace, tmp_path)
    session = Session.open(path)
    assert all(state == "frozen" for state in session.states().values())
    assert needs_attention(session) == "artifact"
    app = make_app(path, workspace=path.parents[1])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), timeout=60)
        assert app.screen.current == "artifact"
    status = next((path / "jobs").glob("*/status.json"))
    doc = json.loads(status.read_text())
    status.write_text(json.dumps({**doc, "phase": "training"}))
    assert needs_attention(Session.open(path)) == "dispatch"


async def test_the_report_key_writes_the_set_and_shows_report_md(
    real_workspace: Path, tmp_path: Path
) -> None:
    from textual.widgets import Markdown

    from claimcheck.tui.app import SessionScreen, make_app
    from claimcheck.tui.screens import ReportScreen, report_sections
    from tests.test_tui_support import screen_text, wait_for

    path = rs.copy_workspace(real_workspace, tmp_path)
    for name in ("report.md", "report.html", "model-index.yaml"):
        (path / name).unlink(missing_ok=True)
    app = make_app(path, workspace=path.parents[1])
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen), timeout=60)
        await pilot.press("f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen), timeout=120)
        assert "report.html" in screen_text(app)
        sections = report_sections((path / "report.md").read_text("utf-8"))
        assert sections[0][0] == "Summary" and "CLAIM" in sections[0][1]
        assert app.screen.query_one(Markdown).source == sections[0][1]
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: app.screen.query_one(Markdown).source == sections[1][1], timeout=60)
        assert f"section 2 of {len(sections)}" in screen_text(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
    assert (path / "report.html").exists() and (path / "model-index.yaml").exists()
