"""What the source, split and baseline panels show for a numeric target (claim target_type
"numeric"): the target's spread, over the source and per split, on one scale, and each learner's
error figures; the class pictures (class distribution, prevalence, confusion matrix) do not apply.

Values come from the typed evidence (source.target_distribution, split.target_distribution,
baseline.trivial / baseline.conventional / baseline.learnability); nothing is computed here but
positions on the drawn scale.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from claimcheck.engine import shapes
from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.shapes import artifact as artifact_shapes
from claimcheck.engine.shapes import baseline as baseline_shapes
from claimcheck.engine.shapes import data as data_shapes
from claimcheck.tui.plots import num
from claimcheck.tui.safe import clean, literal

# Each learner's figures, in this order, the claim's primary metric first.
ERROR_METRICS = ("mae", "rmse", "r2")
METRIC_WORD = {"mae": "MAE", "rmse": "RMSE", "r2": "R²"}


def _section(title: str, source: str) -> Text:
    t = literal(title, "bold")
    t.append(f"  (from {clean(source)})", style="dim")
    t.append("\n")
    return t


def is_numeric(record: StageRecord | None, check_id: str) -> bool:
    """Whether the stage measured the numeric-target check `check_id` (then the class checks are
    not run and the numeric panel is drawn); a categorical target records it as not run."""
    check = record.check(check_id) if record is not None else None
    return check is not None and check.status != "not_run"


def spread_rows(rows: Sequence[tuple[str, data_shapes.TargetSummary]], width: int) -> Text:
    """One line per row set on a shared scale: ─ from the 5th to the 95th percentile, █ from the
    25th to the 75th, ┃ at the median; then the scale's ends and the figures per row."""
    drawn = [(k, s) for k, s in rows if s.p05 is not None and s.p95 is not None]
    t = Text()
    if not drawn:
        return Text("  no values to draw\n", style="dim")
    lo = min(s.p05 for _, s in drawn if s.p05 is not None)
    hi = max(s.p95 for _, s in drawn if s.p95 is not None)
    label_w = min(12, max(len(clean(k)) for k, _ in drawn))
    bar_w = max(10, width - label_w - 3)
    span = (hi - lo) or 1.0

    def pos(v: float | None) -> int:
        return 0 if v is None else max(0, min(bar_w - 1, round((v - lo) / span * (bar_w - 1))))

    for label, s in drawn:
        cells = [" "] * bar_w
        for i in range(pos(s.p05), pos(s.p95) + 1):
            cells[i] = "─"
        for i in range(pos(s.p25), pos(s.p75) + 1):
            cells[i] = "█"
        cells[pos(s.p50)] = "┃"
        t.append_text(literal(clean(label)[:label_w].ljust(label_w)))
        t.append(" ")
        t.append("".join(cells), style="cyan")
        t.append("\n")
    left, right = num(lo), num(hi)
    t.append(" " * (label_w + 1) + left + right.rjust(bar_w - len(left)) + "\n", style="dim")
    t.append(" " * (label_w + 1) + "─ 5–95%  █ 25–75%  ┃ median\n", style="dim")
    for label, s in drawn:
        t.append_text(
            literal(
                f"  {clean(label)} {s.count:,}: median {num(s.p50 or 0.0)}, "
                f"5–95% [{num(s.p05 or 0.0)}, {num(s.p95 or 0.0)}]"
                + (f", mean {num(s.mean)}" if s.mean is not None else ""),
                "dim",
            )
        )
        t.append("\n")
    return t


def source_target(record: StageRecord | None, width: int) -> Text:
    """The numeric target over the kept rows (source.target_distribution)."""
    check = record.check("source.target_distribution") if record is not None else None
    dist = shapes.parse(check, data_shapes.TargetDistribution)
    if dist is None:
        return Text()
    t = _section("Target distribution (numeric)", "source.target_distribution")
    t.append_text(spread_rows([("all rows", dist.summary)], width))
    t.append(f"  {dist.distinct:,} distinct values", style="dim")
    if dist.null_labels:
        t.append(f"; {dist.null_labels:,} rows without a value", style="yellow")
    if dist.non_numeric:
        t.append_text(literal(f"; {dist.non_numeric:,} non-numeric values", "yellow"))
    t.append("\n\n")
    return t


def split_target(record: StageRecord | None, width: int) -> Text:
    """The numeric target per split on one scale (split.target_distribution)."""
    check = record.check("split.target_distribution") if record is not None else None
    dist = shapes.parse(check, data_shapes.SplitTargetDistribution)
    if dist is None:
        return Text()
    t = _section("Target per split", "split.target_distribution")
    t.append_text(spread_rows([("whole", dist.whole), *dist.per_split.items()], width))
    t.append(
        f"  largest median shift from the whole: {dist.max_median_shift_sd:.2f} standard deviations\n\n",
        style="dim",
    )
    return t


def baseline_errors(record: StageRecord | None) -> Text:
    """Each learner's error figures on the evaluated rows (baseline.trivial, baseline.conventional),
    the claim's metric first, with the rows they were measured on."""
    rows: list[tuple[str, baseline_shapes.LearnerReport]] = []
    metric, where = "", ""
    for cid, shape in (
        ("baseline.trivial", baseline_shapes.Trivial),
        ("baseline.conventional", baseline_shapes.Conventional),
    ):
        check = record.check(cid) if record is not None else None
        parsed = shapes.parse(check, shape)
        if parsed is None or check is None:
            continue
        # a numeric target's learners carry error figures; a classifier's do not
        rows.extend(
            (n, r) for n, r in (parsed.learners or {}).items() if r.mae is not None or r.r2 is not None
        )
        metric = metric or (parsed.primary_metric or "")
        where = where or check.coverage
    if not rows:
        return Text()
    order = [m for m in (metric, *ERROR_METRICS) if m in ERROR_METRICS]
    order = list(dict.fromkeys(order))
    t = _section("Error per learner", "baseline.trivial, baseline.conventional")
    name_w = max(7, *(len(clean(n)) for n, _ in rows))
    t.append("  " + "learner".ljust(name_w) + "".join(METRIC_WORD[m].rjust(11) for m in order) + "\n")
    for name, rep in rows:
        cells = ["–" if (v := getattr(rep, m, None)) is None else num(v) for m in order]
        t.append_text(literal("  " + clean(name).ljust(name_w) + "".join(c.rjust(11) for c in cells)))
        t.append("\n")
    direction = "lower" if metric in ("mae", "rmse") else "higher"
    t.append_text(
        literal(
            f"  {METRIC_WORD.get(metric, metric)}: {direction} is better; measured on {where}",
            "dim",
        )
    )
    t.append("\n\n")
    return t


# Density of a predicted-vs-actual cell by its row count (0, 1, 2-3, 4-7, 8+); an empty cell on
# the diagonal (prediction = actual) is drawn as "·" so the line a perfect model would fill shows.
DENSITY = (" ", "░", "▒", "▓", "█")


def _density(n: int) -> str:
    return DENSITY[0 if n == 0 else 1 if n == 1 else 2 if n < 4 else 3 if n < 8 else 4]


def predicted_vs_actual(grid: artifact_shapes.PredictedVsActual) -> Text:
    """The grid as a text plot: actual upwards, predicted rightwards, one 2-column cell per bin."""
    t = Text()
    axis_w = max(len(num(grid.hi)), len(num(grid.lo)), len("actual"))
    for i in reversed(range(grid.bins)):
        label = num(grid.hi) if i == grid.bins - 1 else num(grid.lo) if i == 0 else ""
        label = "actual" if i == grid.bins // 2 else label
        t.append(label.rjust(axis_w) + " │", style="dim")
        for j in range(grid.bins):
            n = grid.counts[i][j]
            cell = "·" if n == 0 and i == j else _density(n)
            t.append(cell * 2, style="cyan" if n else "dim")
        t.append("\n")
    t.append(" " * axis_w + " └" + "─" * (2 * grid.bins) + "\n", style="dim")
    left, right = num(grid.lo), num(grid.hi)
    t.append(" " * (axis_w + 2) + left + right.rjust(2 * grid.bins - len(left)) + "\n", style="dim")
    t.append(" " * (axis_w + 2) + "predicted;  ░ 1  ▒ 2–3  ▓ 4–7  █ 8+ rows\n", style="dim")
    return t


def artifact_errors(record: StageRecord | None, width: int) -> Text:
    """Each arm's predicted − actual on the locked test on one scale, and the candidate's
    predicted-vs-actual plot (artifact.errors)."""
    check = record.check("artifact.errors") if record is not None else None
    errs = shapes.parse(check, artifact_shapes.Errors)
    if errs is None:
        return Text()
    t = _section(f"Error (predicted − actual) per arm, {errs.rows:,} test rows", "artifact.errors")
    t.append_text(spread_rows(list(errs.error.items()), width))
    t.append("\n")
    if errs.predicted_vs_actual is not None:
        t.append_text(_section("Predicted vs actual, candidate", "artifact.errors"))
        t.append_text(predicted_vs_actual(errs.predicted_vs_actual))
        t.append("\n")
    return t


__all__ = [
    "artifact_errors",
    "baseline_errors",
    "is_numeric",
    "predicted_vs_actual",
    "source_target",
    "split_target",
    "spread_rows",
]
