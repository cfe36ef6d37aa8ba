"""Per-stage visual panels: what people would rather look at than read.

Every panel reads the stage record's `measured` values defensively: a value the stage did not
record makes the panel say "not measured" — it never draws a made-up figure. The dispatch panel
also polls the job's own files (status.json, heartbeat, metrics.jsonl) once a second through the
engine's cheap file-protocol helpers, so a job started in an earlier app run shows up live.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Sparkline, Static

from engine.evidence import StageRecord
from tui.safe import clean, literal
from tui.widgets import bar_lines

NOT_MEASURED = "not measured"


def find_measured(
    record: StageRecord | None, keys: Sequence[str], kind: type | tuple[type, ...] = object
) -> tuple[str, Any]:
    """(check id, value) of the first check whose measured dict has one of `keys` of type `kind`."""
    if record is None:
        return "", None
    for key in keys:
        for check in record.checks:
            value = check.measured.get(key)
            if value is not None and isinstance(value, kind) and value != {} and value != []:
                return check.id, value
    return "", None


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    return None


def _pairs(value: Any) -> list[tuple[str, float]]:
    """A {label: number} dict, or a list of {label/name/class, count/value/share}, as (label, number)."""
    out: list[tuple[str, float]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            n = _num(v) if not isinstance(v, dict) else _num(v.get("count", v.get("share", v.get("value"))))
            if n is not None:
                out.append((str(k), n))
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                label = item.get("label", item.get("name", item.get("class", item.get("column", ""))))
                n = _num(item.get("count", item.get("share", item.get("value"))))
                if n is not None:
                    out.append((str(label), n))
    return out


def section(title: str, source: str = "") -> Text:
    t = Text(title, style="bold")
    if source:
        t.append(f"  (from {source})", style="dim")
    t.append("\n")
    return t


def not_measured(title: str, why: str = "") -> Text:
    t = section(title)
    t.append(NOT_MEASURED + (f": {why}" if why else "") + "\n\n", style="dim")
    return t


# ---------------------------------------------------------------- per-stage renderers


def render_claim(record: StageRecord | None, session: Any) -> Text:
    t = Text()
    if record is None:
        return not_measured("Claim", "run the claim checks first")
    inp = record.inputs
    t.append_text(section("The claim as recorded"))
    for key in ("prediction_unit", "target_meaning", "population", "primary_metric", "run_scope"):
        t.append(f"{key.replace('_', ' ')}: ", style="bold")
        t.append_text(literal(inp.get(key, "") or "(empty)"))
        t.append("\n")
    cid, counts = find_measured(record, ["counts"], dict)
    t.append("\n")
    if counts:
        t.append_text(section("Earlier sessions by outcome", cid))
        t.append_text(bar_lines(_pairs(counts), width=24, fmt="{:.0f}"))
    else:
        t.append_text(not_measured("Earlier sessions by outcome", "none found in the review scope"))
    return t


def render_source(record: StageRecord | None, session: Any) -> Text:
    t = Text()
    cid, classes = find_measured(
        record,
        ["per_target", "class_counts", "label_counts", "target_counts", "class_distribution"],
        (dict, list),
    )
    if classes and _pairs(classes):
        pairs = sorted(_pairs(classes), key=lambda p: -p[1])
        total = sum(v for _, v in pairs) or 1.0
        t.append_text(section("Class distribution", cid))
        t.append_text(bar_lines(pairs, width=24, fmt="{:,.0f}"))
        t.append(
            f"  {len(pairs)} classes, {total:,.0f} rows; smallest {pairs[-1][1] / total:.2%}\n\n", style="dim"
        )
    else:
        t.append_text(not_measured("Class distribution"))
    cid, miss = find_measured(
        record,
        ["null_share", "missing_share", "missingness", "missing_by_column", "null_counts"],
        (dict, list),
    )
    pairs = _pairs(miss) if miss else []
    if pairs:
        share = all(0.0 <= v <= 1.0 for _, v in pairs)
        shown = sorted((p for p in pairs if p[1] > 0), key=lambda p: -p[1])
        t.append_text(section("Missingness per column" + (" (share of rows)" if share else " (rows)"), cid))
        t.append_text(
            bar_lines(shown, width=24, fmt="{:.1%}" if share else "{:,.0f}", scale=1.0 if share else None)
        )
        t.append(f"  {len(pairs) - len(shown)} of {len(pairs)} columns have no missing values\n", style="dim")
    else:
        t.append_text(not_measured("Missingness per column"))
    return t


def _matrix_text(rows: list[str], cols: list[str], cell: Any, fmt: str, width: int = 9) -> Text:
    t = Text()
    lw = min(14, max((len(r) for r in rows), default=4))
    t.append(" " * (lw + 1))
    for c in cols:
        t.append_text(literal(clean(c)[: width - 1].rjust(width)))
    t.append("\n")
    for r in rows:
        t.append_text(literal(clean(r)[:lw].ljust(lw) + " "))
        for c in cols:
            v = cell(r, c)
            t.append((fmt.format(v) if isinstance(v, int | float) else "–").rjust(width))
        t.append("\n")
    return t


def render_split(record: StageRecord | None, session: Any) -> Text:
    t = Text()
    cid, prev = find_measured(
        record, ["per_split", "prevalence", "prevalence_per_split", "class_share_by_split"], dict
    )
    if prev and all(isinstance(v, dict) for v in prev.values()):
        splits = list(prev)
        classes = sorted({c for v in prev.values() for c in v})
        t.append_text(section("Prevalence per split", cid))
        t.append_text(_matrix_text(classes, splits, lambda r, c: _num(prev[c].get(r)), "{:.1%}"))
        t.append("\n")
    else:
        t.append_text(not_measured("Prevalence per split"))
    cid, sizes = find_measured(record, ["sizes", "rows_per_split", "split_sizes", "counts"], dict)
    if sizes and _pairs(sizes):
        t.append_text(section("Rows per split", cid))
        t.append_text(bar_lines(_pairs(sizes), width=24, fmt="{:,.0f}"))
    else:
        t.append_text(not_measured("Rows per split"))
    return t


def _learner_report(record: StageRecord | None) -> tuple[str, str, dict[str, Any]]:
    """(check id, learner name, report) of the conventional learner to picture: the best one if named."""
    if record is None:
        return "", "", {}
    conv = record.check("baseline.conventional")
    learners = conv.measured.get("learners") if conv else None
    if not isinstance(learners, dict) or not learners:
        cid, learners = find_measured(record, ["learners"], dict)
        if not learners:
            return "", "", {}
    else:
        cid = conv.id
    best = ""
    for check in record.checks:
        for key in ("best", "best_learner", "learner"):
            if isinstance(check.measured.get(key), str) and check.measured[key] in learners:
                best = check.measured[key]
                break
        if best:
            break
    name = best or next(iter(learners))
    report = learners[name] if isinstance(learners[name], dict) else {}
    return cid, name, report


def render_baseline(record: StageRecord | None, session: Any) -> Text:
    t = Text()
    cid, name, report = _learner_report(record)
    per = report.get("per_class")
    if not report:
        _, cm = find_measured(record, ["confusion", "confusion_matrix"], list)
        _, per = find_measured(record, ["per_class"], list)
        report = {"confusion": cm, "per_class": per}
    per = per if isinstance(per, list) else []
    labels = [str(p.get("class", i)) for i, p in enumerate(per) if isinstance(p, dict)]
    cm = report.get("confusion")
    if isinstance(cm, list) and cm and all(isinstance(r, list) for r in cm):
        labels = labels if len(labels) == len(cm) else [str(i) for i in range(len(cm))]
        idx = {lab: i for i, lab in enumerate(labels)}
        t.append_text(
            section(f"Confusion matrix of {clean(name) or 'the learner'} (rows true, columns predicted)", cid)
        )
        t.append_text(
            _matrix_text(
                labels,
                labels,
                lambda r, c: cm[idx[r]][idx[c]] if idx[c] < len(cm[idx[r]]) else None,
                "{:,.0f}",
                width=8,
            )
        )
        t.append("\n")
    else:
        t.append_text(not_measured("Confusion matrix"))
    if per:
        rows = {lab: p for lab, p in zip(labels, per, strict=False) if isinstance(p, dict)}
        cols = [c for c in ("precision", "recall", "f1", "support") if any(c in v for v in rows.values())]
        t.append_text(section("Per class", cid))
        t.append_text(_matrix_text(list(rows), cols, lambda r, c: _num(rows[r].get(c)), "{:.3g}", width=10))
        for key in ("macro_f1", "accuracy", "balanced_accuracy", "log_loss"):
            if _num(report.get(key)) is not None:
                t.append(f"{key} {report[key]:.4f}  ", style="dim")
        t.append("\n")
    else:
        t.append_text(not_measured("Per-class table"))
    return t


def _histogram(values: Any) -> tuple[list[float], list[float]] | None:
    """(edges, counts) from {"edges"/"bins", "counts"} or a raw list of lengths."""
    if isinstance(values, dict):
        edges = values.get("edges", values.get("bins"))
        counts = values.get("counts")
        if isinstance(edges, list) and isinstance(counts, list) and counts:
            return [float(e) for e in edges], [float(c) for c in counts]
        return None
    if isinstance(values, list) and values and all(_num(v) is not None for v in values):
        lo, hi = min(values), max(values)
        n = 12
        step = max(1.0, (hi - lo) / n)
        counts = [0.0] * n
        for v in values:
            counts[min(n - 1, int((v - lo) / step))] += 1
        return [lo + i * step for i in range(n + 1)], counts
    return None


_BIN = re.compile(r"^\s*(\d+)-(\d+)")


def render_contract(record: StageRecord | None, session: Any) -> Text:
    t = Text()
    check = record.check("contract.prepared_lengths") if record else None
    m = check.measured if check else {}
    max_len = m.get("max_length") if isinstance(m.get("max_length"), int) else None
    hist = m.get("histogram")
    if isinstance(hist, list) and hist and all(isinstance(h, str) for h in hist):
        t.append_text(
            section(
                "Token lengths before truncation" + (f" — context line at {max_len}" if max_len else ""),
                check.id if check else "",
            )
        )
        for line in hist:
            bin_ = _BIN.match(line)
            over = bool(max_len and bin_ and int(bin_.group(1)) > max_len)
            t.append_text(literal(line.replace(" ← max_length", ""), "red" if over else ""))
            t.append("\n")
            if max_len and bin_ and int(bin_.group(1)) <= max_len <= int(bin_.group(2)):
                t.append(f"{'─' * 14} max_length {max_len} {'─' * 14}\n", style="bold")
        bits = [f"{k} {m[k]}" for k in ("p50", "p95", "p99", "max") if k in m]
        if "truncated" in m:
            bits.append(f"truncated {m['truncated']} ({_num(m.get('truncated_share')) or 0:.1%})")
        t.append("  " + " · ".join(bits) + "\n\n", style="dim")
    else:
        t.append_text(not_measured("Token-length histogram"))
    samples_check = record.check("contract.prepared_samples") if record else None
    samples = samples_check.measured.get("samples") if samples_check else None
    if isinstance(samples, list) and samples:
        t.append_text(
            section(
                "Decoded examples: supervised text bold and underlined, masked text dim", samples_check.id
            )
        )
        for i, sample in enumerate(samples[:4]):
            t.append_text(_decoded(sample, i))
            t.append("\n")
    else:
        t.append_text(not_measured("Decoded examples"))
    return t


def _decoded(sample: Any, i: int) -> Text:
    t = Text()
    if not isinstance(sample, dict):
        return literal(sample, limit=600)
    head = f"example {i + 1}, id {clean(sample.get('id', '?'))}, {sample.get('tokens', '?')} tokens"
    if "label" in sample:
        head += f", label {clean(sample['label'])}"
    if "supervised_tokens" in sample:
        head += f", {sample['supervised_tokens']} supervised / {sample.get('masked_tokens', '?')} masked"
    if sample.get("truncated"):
        head += ", TRUNCATED"
    t.append(head + "\n", style="italic")
    text = str(sample.get("decoded", ""))[:1200]
    # SFT samples mark supervised spans ⟦…⟧; everything outside is masked from the loss.
    supervised = "label" not in sample
    for j, part in enumerate(re.split(r"⟦|⟧", text)):
        style = "bold underline" if (supervised and j % 2 == 1) else ("dim" if supervised else "")
        t.append_text(literal(part, style, keep_newlines=True))
    t.append("\n")
    return t


def _curve_values(points: Any) -> list[float]:
    if isinstance(points, list):
        out = []
        for p in points:
            v = _num(p)
            if v is None and isinstance(p, dict):
                v = _num(p.get("loss", p.get("value")))
            if v is None and isinstance(p, list) and len(p) == 2:
                v = _num(p[1])
            if v is not None:
                out.append(v)
        return out
    return []


def render_artifact(record: StageRecord | None, session: Any) -> Text:
    t = Text()
    comp = record.check("artifact.comparison") if record else None
    values = comp.measured.get("values") if comp else None
    if isinstance(values, dict) and values:
        diffs = comp.measured.get("differences", {})
        metric = clean(comp.measured.get("metric", "metric"))
        t.append_text(section(f"Locked test, {metric} (raw), arms side by side", comp.id))
        pairs = [(str(a), float(v)) for a, v in values.items() if _num(v) is not None]
        lower = metric in ("log_loss", "brier")
        t.append_text(bar_lines(pairs, width=22, fmt="{:.4f}", scale=None if lower else 1.0))
        for arm, d in diffs.items() if isinstance(diffs, dict) else []:
            if isinstance(d, dict) and _num(d.get("estimate")) is not None:
                lo, hi = _num(d.get("lo")), _num(d.get("hi"))
                ci = f" [{lo:+.4f}, {hi:+.4f}]" if lo is not None and hi is not None else " (no interval)"
                t.append_text(literal(f"  candidate − {arm}: {d['estimate']:+.4f}{ci}"))
                better = comp.measured.get("candidate_better", {}).get(arm)
                t.append(
                    "  better" if better else "  not shown better", style="bold green" if better else "yellow"
                )
                t.append("\n")
        t.append("\n")
    else:
        t.append_text(not_measured("Base / candidate / baseline comparison"))
    cal = record.check("artifact.calibrated") if record else None
    arms = cal.measured.get("arms") if cal else None
    if isinstance(arms, dict) and arms:
        t.append_text(section("Calibration: ECE raw → calibrated", cal.id))
        for arm, v in arms.items():
            raw = _num((v.get("raw") or {}).get("ece")) if isinstance(v, dict) else None
            calv = _num((v.get("calibrated") or {}).get("ece")) if isinstance(v, dict) else None
            if raw is not None and calv is not None:
                t.append_text(literal(f"  {clean(arm)[:18]:<18} {raw:.3f} → {calv:.3f}"))
                t.append("\n")
    cid, rel = find_measured(record, ["reliability", "reliability_curve", "calibration_curve"], (list, dict))
    pts: list[tuple[float, float]] = []
    if (
        isinstance(rel, dict)
        and isinstance(rel.get("confidence"), list)
        and isinstance(rel.get("accuracy"), list)
    ):
        pts = [(float(c), float(a)) for c, a in zip(rel["confidence"], rel["accuracy"], strict=False)]
    elif isinstance(rel, list):
        for p in rel:
            if (
                isinstance(p, dict)
                and _num(p.get("confidence")) is not None
                and _num(p.get("accuracy")) is not None
            ):
                pts.append((float(p["confidence"]), float(p["accuracy"])))
    if pts:
        t.append_text(section("Reliability (accuracy per confidence bin; ideal: equal)", cid))
        t.append_text(bar_lines([(f"conf {c:.2f}", a) for c, a in pts], width=24, fmt="{:.2f}", scale=1.0))
    else:
        t.append_text(not_measured("Reliability curve", "the artifact record holds no per-bin accuracy"))
    return t


RENDERERS = {
    "claim": render_claim,
    "source": render_source,
    "split": render_split,
    "baseline": render_baseline,
    "contract": render_contract,
    "artifact": render_artifact,
}


class VisualPanel(VerticalScroll):
    """A stage's pictures, redrawn whenever its record changes."""

    can_focus = True

    def __init__(self, stage: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stage = stage

    def compose(self) -> ComposeResult:
        yield Static(id="visual-body")

    def show(self, record: StageRecord | None, session: Any) -> None:
        render = RENDERERS.get(self.stage)
        body = self.query_one("#visual-body", Static)
        try:
            body.update(render(record, session) if render else Text(NOT_MEASURED))
        except Exception as exc:  # a record shape we did not expect must not take the screen down
            body.update(literal(f"{NOT_MEASURED}: this record's values have an unexpected shape ({exc})"))


# ---------------------------------------------------------------- dispatch: live job view


def poll_jobs(jobs_root: Path, inputs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A snapshot of every job under jobs/: status, step, heartbeat age, losses, dev metric, alarms.

    Each job is judged by its own provider: the one the dispatch inputs name (`inputs`), or the
    one the job's folder records (a Ray job is asked of Ray, not taken for a dead local process).
    """
    if not jobs_root.is_dir():
        return []
    from engine.providers.base import Handle
    from engine.providers.registry import for_job
    from engine.training import alarms as job_alarms
    from engine.training import jobfiles

    out = []
    for job_dir in sorted(p for p in jobs_root.iterdir() if p.is_dir()):
        if not jobfiles.launched(job_dir):
            continue
        provider = for_job(job_dir, inputs)
        st = provider.status(Handle(op_id=job_dir.name, job_dir=job_dir, provider=provider.name))
        records = jobfiles.read_metrics(job_dir)
        steps = jobfiles.latest_by_step(records, "step")
        evals = jobfiles.dev_evals(records)
        try:
            effective = jobfiles.read_contract(job_dir)
        except (OSError, ValueError):
            effective = {}
        try:
            alarms = job_alarms.evaluate(records, effective, jobfiles.read_heartbeat(job_dir), st.total_steps)
        except Exception:  # alarms on a half-written file: show none rather than crash the view
            alarms = []
        out.append(
            {
                "op_id": st.op_id,
                "stage": st.stage,
                "reason": st.reason,
                "step": st.step,
                "total_steps": st.total_steps,
                "alive": st.alive,
                "heartbeat_age_s": st.heartbeat_age_s,
                "losses": [float(s["loss"]) for s in steps if _num(s.get("loss")) is not None],
                "dev": [float(e["value"]) for e in evals if _num(e.get("value")) is not None],
                "dev_metric": str(evals[-1].get("metric", "")) if evals else "",
                "alarms": alarms,
                "running": st.running,
            }
        )
    return out


class DispatchPanel(VerticalScroll):
    """Live view of the session's training jobs, refreshed every second from the job's files."""

    can_focus = True

    class Polled(Message):
        def __init__(self, jobs: list[dict[str, Any]], at: float) -> None:
            self.jobs, self.at = jobs, at
            super().__init__()

    def __init__(self, jobs_root: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.jobs_root = jobs_root
        self.jobs: list[dict[str, Any]] = []
        self._record: StageRecord | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="job-head")
        yield Static("loss", classes="spark-label")
        yield Sparkline([], id="loss-spark")
        yield Static("dev metric", classes="spark-label")
        yield Sparkline([], id="dev-spark")
        yield Static(id="job-body")

    def on_mount(self) -> None:
        self.poll()
        self.set_interval(1.0, self.poll)

    def show(self, record: StageRecord | None, session: Any) -> None:
        self._record = record
        self._draw()

    @work(thread=True, exclusive=True, group="job-poll")
    def poll(self) -> None:
        try:
            jobs = poll_jobs(self.jobs_root, self._record.inputs if self._record else None)
        except Exception as exc:  # unreadable files: say so instead of crashing
            jobs = [
                {
                    "op_id": "?",
                    "stage": "unreadable",
                    "reason": str(exc),
                    "losses": [],
                    "dev": [],
                    "alarms": [],
                }
            ]
        self.post_message(self.Polled(jobs, time.time()))

    def on_dispatch_panel_polled(self, event: Polled) -> None:
        was = any(j.get("running") for j in self.jobs)
        self.jobs = event.jobs
        self._draw()
        if was != any(j.get("running") for j in self.jobs):
            refresh = getattr(self.screen, "refresh_states", None)  # the navigator's "running" word
            if refresh is not None:
                refresh()

    def _draw(self) -> None:
        head = self.query_one("#job-head", Static)
        body = self.query_one("#job-body", Static)
        loss = self.query_one("#loss-spark", Sparkline)
        dev = self.query_one("#dev-spark", Sparkline)
        if not self.jobs:
            head.update(
                Text(
                    "No training job in this session yet: run the dispatch stage to launch one.", style="dim"
                )
            )
            loss.data, dev.data = [], []
            body.update(render_dispatch_record(self._record))
            return
        job = self.jobs[-1]
        t = Text()
        t.append("job ", style="bold")
        t.append_text(literal(job.get("op_id", "")))
        t.append(
            f" · {clean(job.get('stage', ''))}",
            style="bold red" if job.get("stage") in ("failed", "lost", "stalled") else "bold",
        )
        total = job.get("total_steps") or 0
        t.append(f"\nstep {job.get('step', 0)}" + (f" of {total}" if total else ""))
        age = job.get("heartbeat_age_s", -1)
        t.append(
            " · heartbeat "
            + (f"{age:.1f} s ago" if isinstance(age, int | float) and age >= 0 else "none yet")
        )
        if job.get("reason"):
            t.append("\n")
            t.append_text(literal(job["reason"], "dim", limit=200))
        if len(self.jobs) > 1:
            t.append(f"\n({len(self.jobs)} jobs in this session; showing the latest)", style="dim")
        recorded = self._record.check("dispatch.progress") if self._record else None
        if not job.get("running") and recorded and recorded.measured.get("stage") != job.get("stage"):
            t.append("\nThe job's state changed since the record: ctrl+r records it now.", style="bold")
        elif job.get("running"):
            t.append("\nThe job runs on its own: quitting claimcheck leaves it running.", style="dim")
        head.update(t)
        losses, devs = job.get("losses", []), job.get("dev", [])
        loss.data = losses[-200:]
        dev.data = devs[-200:]
        b = Text()
        b.append(
            f"loss: {len(losses)} steps"
            + (f", last {losses[-1]:.4g}, min {min(losses):.4g}" if losses else " (none yet)")
            + "\n"
        )
        b.append(
            f"dev {clean(job.get('dev_metric', '') or 'metric')}: "
            + (f"{len(devs)} evals, last {devs[-1]:.4g}" if devs else "no eval yet")
            + "\n\n"
        )
        b.append("alarms\n", style="bold")
        if not job.get("alarms"):
            b.append(NOT_MEASURED + "\n", style="dim")
        for a in job.get("alarms", []):
            state = str(a.get("state", ""))
            style = {"raised": "bold red", "clear": "green", "disabled": "yellow"}.get(state, "dim")
            b.append(
                f"{'✖' if state == 'raised' else '·'} {clean(a.get('name', '')):<18} {state:<9} ", style=style
            )
            b.append_text(literal(a.get("detail", ""), limit=120))
            b.append("\n")
        b.append("\n")
        b.append_text(render_dispatch_record(self._record))
        body.update(b)


def render_dispatch_record(record: StageRecord | None) -> Text:
    t = Text()
    if record is None:
        return t
    for check_id, key, title in (
        ("dispatch.loss_curve", "loss", "Recorded loss curve"),
        ("dispatch.dev_metric", "value", "Recorded dev metric"),
    ):
        check = record.check(check_id)
        vals = _curve_values(check.measured.get(key)) if check else []
        if vals:
            t.append_text(section(title, check_id))
            t.append_text(_spark_text(vals))
    return t


def _spark_text(values: Iterable[float]) -> Text:
    vals = list(values)[-60:]
    if not vals:
        return Text(NOT_MEASURED, style="dim")
    lo, hi = min(vals), max(vals)
    blocks = "▁▂▃▄▅▆▇█"
    span = (hi - lo) or 1.0
    return Text("".join(blocks[int((v - lo) / span * 7)] for v in vals) + f"  {lo:.3g}…{hi:.3g}\n")
