"""Live job views that never mislead, the verdict said plainly, checks tables at 80 columns.

Readers are tested on the real session (tests/real_session.py); the live job is the real session's
job folder with its files rewritten by the test (a job beating in training, then done), watched by
the app at 80x24 with no key pressed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.color import Color, ColorSystem

from claimcheck.engine.evidence import StageRecord
from claimcheck.engine.ledger.session import Session
from claimcheck.engine.providers.snapshot import JobSnapshot
from claimcheck.engine.report.figures import Lines
from claimcheck.engine.training import jobfiles, pace
from claimcheck.engine.training.jobfiles import Progress
from claimcheck.engine.training.jobrecords import (
    EvalLine,
    HeartbeatFile,
    MetricLine,
    PidFile,
    StatusFile,
    StepLine,
    TrivialLine,
)
from claimcheck.tui import app as tui_app
from claimcheck.tui.panels import job_curves, pace_line
from claimcheck.tui.plots import lines
from claimcheck.tui.screens import ConfirmScreen
from claimcheck.tui.stage_words import (
    artifact_readiness,
    failing_first,
    freeze_question,
    stage_banner,
    state_words,
    verdict_line,
    verdict_of,
)
from claimcheck.tui.values import format_value
from claimcheck.tui.widgets import ChecksTable, StageNavigator
from tests import real_session as rs
from tests.test_tui_support import screen_text, wait_for

SIZE = (80, 24)


@pytest.fixture(scope="module")
def session(real_session: Path) -> Session:
    return Session.open(real_session)


def _with_status(record: StageRecord, check_id: str, status: str) -> StageRecord:
    rec = record.model_copy(deep=True)
    chk = rec.check(check_id)
    assert chk is not None
    chk.status = status  # type: ignore[assignment]
    return rec


# ---------------------------------------------------------------- banners, verdict, freeze dialog


def test_a_stage_with_failing_checks_never_gets_an_ok_banner(session: Session) -> None:
    rec = session.record("contract")
    assert rec is not None and not any(c.status == "fail" for c in rec.checks)
    calm = stage_banner("frozen", rec)
    assert not calm.plain.startswith("✖")
    failing = _with_status(_with_status(rec, "contract.digest", "fail"), "contract.memory", "fail")
    banner = stage_banner("frozen", failing)
    assert banner.plain.startswith("✖ state: frozen") and "2 FAIL: memory, digest" in banner.plain
    assert "red" in str(banner.spans[0].style)
    # failing checks are listed first in the table's order too
    rank = [{"fail": 0, "warn": 1}.get(c.status, 2) for c in failing_first(failing.checks)]
    assert rank[:2] == [0, 0] and rank == sorted(rank)


def test_the_verdict_is_said_plainly_in_the_banner_and_navigator(session: Session) -> None:
    rec = session.record("artifact")
    v = verdict_of(rec)
    assert v is not None
    met, line = verdict_line(v)
    assert met == v.claim_met
    # the record's claim verdict and reason, verbatim (Verdict.claim_line), never re-derived
    assert line.endswith(v.claim_line()) and line.split(" ", 1)[0] in ("✔", "✖", "▲")
    assert state_words("frozen", rec).endswith(f"· {v.claim_word()}")
    assert stage_banner("frozen", rec).plain.splitlines()[0] == line


def test_freeze_question_defaults_to_no_on_failing_checks_or_an_unfinished_job(session: Session) -> None:
    dispatch = session.record("dispatch")
    assert dispatch is not None
    body, risky = freeze_question(dispatch, [])
    assert not risky and "has not finished" not in body.plain
    body, risky = freeze_question(_with_status(dispatch, "dispatch.identity", "fail"), ["artifact"])
    assert risky and "1 check(s) FAIL: dispatch.identity" in body.plain and "artifact" in body.plain
    unfinished = dispatch.model_copy(deep=True)
    progress = unfinished.check("dispatch.progress")
    progress.measured = {
        **progress.measured,
        "job_state": "incomplete",
        "stage": "initial-eval",
        "last_step": 0,
    }
    body, risky = freeze_question(unfinished, [])
    assert risky and "The job has not finished: incomplete, phase initial-eval, step 0 of" in body.plain


async def test_the_freeze_dialog_answers_no_on_enter_when_no_is_the_default() -> None:
    from textual.app import App

    answers: list[bool | None] = []

    class Host(App):
        def on_mount(self) -> None:
            self.push_screen(ConfirmScreen("Freeze?", "body", default_no=True), answers.append)

    async with Host().run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
        assert pilot.app.focused is not None and pilot.app.focused.id == "no"
        await pilot.press("enter")
        await wait_for(pilot, lambda: answers == [False])


def test_artifact_says_when_it_can_run(session: Session) -> None:
    dispatch = session.record("dispatch")
    assert "Can run now" in artifact_readiness("frozen", dispatch, None)
    assert "is frozen" in artifact_readiness("draft", dispatch, None)
    assert "launched" in artifact_readiness("not_run", None, None)
    unfinished = dispatch.model_copy(deep=True)
    progress = unfinished.check("dispatch.progress")
    progress.measured = {**progress.measured, "job_state": "incomplete", "stage": "training"}
    job = JobSnapshot(op_id="x", phase="training", step=4, total_steps=12)
    assert job.running
    assert "Waits for the job: training, step 4 of 12." == artifact_readiness("frozen", unfinished, job)


# ---------------------------------------------------------------- checks table and detail at 80 columns


async def test_checks_table_at_80_columns_fails_first_and_shows_the_summary(
    real_workspace: Path, tmp_path: Path
) -> None:
    path = rs.copy_workspace(real_workspace, tmp_path)
    rec = Session.open(path).record("dispatch")
    app = tui_app.make_app(path, workspace=path.parents[1])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(
            pilot, lambda: isinstance(app.screen, tui_app.SessionScreen) and app.screen.view() is not None
        )
        await pilot.press("ctrl+l", "6")
        await wait_for(
            pilot, lambda: app.screen.view("dispatch") is not None and app.screen.view("dispatch")._ready
        )
        await pilot.press("f3")
        table = app.screen.view("dispatch").query_one(ChecksTable)
        await wait_for(pilot, lambda: table.row_count == len(rec.checks) and table.narrow)
        shown = [c.status for c in table._checks]
        rank = [{"fail": 0, "warn": 1}.get(s, 2) for s in shown]
        assert rank == sorted(rank)
        summary = table.ordered_columns[-1]
        assert summary.label.plain == "summary" and summary.width >= 30
        first = table._checks[0]
        words = first.summary.split()[:3]
        await wait_for(pilot, lambda: " ".join(words) in screen_text(app), timeout=20)
        # narrow: the icon alone, no status word
        assert "warn " not in screen_text(app).split("summary", 1)[1].splitlines()[1]


def test_requested_vs_effective_is_a_table_that_fits(session: Session) -> None:
    rec = session.record("contract")
    measured = rec.check("contract.requested_vs_effective").measured
    lines_ = format_value(measured, width=58)
    assert not any('""' in ln for ln in lines_), "empty values are shown as –, not quoted"
    assert all(len(ln) <= 58 for ln in lines_), "\n".join(ln for ln in lines_ if len(ln) > 58)
    head = next(ln for ln in lines_ if "setting" in ln)
    assert head.split() == ["setting", "requested", "effective", "outcome"]
    firsts = [ln.split()[0] for ln in lines_[lines_.index(head) + 2 :] if ln[:4].strip()]
    settings = [row["setting"] for row in measured["table"]]
    assert len(firsts) == len(settings), "one row per setting, never a [i] block per setting"
    for shown, setting in zip(firsts, settings, strict=True):
        assert shown == setting or (shown.endswith("…") and setting.startswith(shown[:-1]))


# ---------------------------------------------------------------- curves, pace


def test_one_evaluation_is_a_point_with_its_value_and_evaluations_are_marked() -> None:
    steps = [_step(s, loss) for s, loss in ((1, 2.0), (2, 1.8), (3, 1.7), (4, 1.5))]
    dev = EvalLine(
        kind="eval",
        split="dev",
        step=2,
        time=2.0,
        metric="macro_f1",
        value=0.41,
        loss=1.0,
        train_value=0.5,
        train_rows=8,
        rows=8,
        phase="training",
        selected_step=-1,
    )
    trivial = TrivialLine(kind="trivial", step=0, metric="macro_f1", value=0.3, majority_class="a")
    job = JobSnapshot(op_id="x", phase="training", steps=steps, evals=[dev], checkpoints=[4], trivial=trivial)
    assert job.loss_points == [(1.0, 2.0), (2.0, 1.8), (3.0, 1.7), (4.0, 1.5)] and job.dev_points == [
        (2.0, 0.41)
    ]
    text = job_curves(job, 56).plain
    dev = text.split("live dev macro_f1", 1)[1]
    assert "one point, 0.41 at step 2" in dev
    assert "█" not in dev and "┤" not in dev, "one point is never drawn as a chart or a bar block"
    assert "trivial baseline 0.3" in dev
    loss = text.split("live dev", 1)[0]
    axis = next(ln for ln in loss.splitlines() if "└" in ln)
    assert axis.count("▲") == 1 and "dev evaluations at step 2" in loss and "checkpoints at step 4" in loss
    # nothing yet: said in words, on lines of their own
    empty = job_curves(JobSnapshot(op_id="x", phase="loading"), 56).plain
    assert empty.splitlines() == ["live loss: no optimizer step yet", "live dev metric: no evaluation yet"]
    # a recorded-style figure of one point: the same
    one = lines(Lines("t", {"dev": [(0.0, 0.5)]}, "step", reference=0.2, reference_label="trivial")).plain
    assert "one point, 0.5 at step 0" in one and "┤" not in one


def _eval(step: int, at: float) -> EvalLine:
    return EvalLine(
        kind="eval", split="dev", step=step, time=at, metric="macro_f1", value=0.5, loss=1.0,
        train_value=0.5, train_rows=10, rows=10, phase="training", selected_step=-1,
    )  # fmt: skip


def test_pace_elapsed_step_and_evaluation_time_eta_and_a_running_evaluation() -> None:
    now = 1_000_000.0
    iso = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(t))  # noqa: E731
    steps: list[MetricLine] = [_step(s, 1.0, at=now - 200 + 20 * s, seconds=19.5) for s in range(1, 6)]
    status = StatusFile(phase="training", step=5, total_steps=300, started_at=iso(now - 400))
    beat = HeartbeatFile(time=now, phase="training", evaluating=False)
    p = pace.pace(Progress(status, beat), steps, now, eval_every=100)
    assert p.elapsed_s == pytest.approx(400, abs=1) and p.step_s == pytest.approx(19.5)
    # no evaluation timed yet: the steps alone, said to be a lower bound
    assert p.evals_left == 3 and p.eval_s is None and p.eta_floor
    assert p.eta_s == pytest.approx(295 * 19.5)
    line = pace_line(p, running=True).plain
    assert "elapsed 6 min 40 s" in line and "19.5 s/step" in line and "steps/s" not in line
    assert "ETA ≥ 1 h 35 min (no evaluation timed yet)" in line
    # an evaluation at step 5 that took 60 s (from its step line to its own): every evaluation left
    # (steps 100 and 200, and the final one) counts at that time, in the same unit
    timed = [*steps, _eval(5, now - 100 + 60)]
    p = pace.pace(Progress(status, beat), timed, now, eval_every=100)
    assert p.eval_s == pytest.approx(60) and not p.eta_floor
    assert p.eta_s == pytest.approx(295 * 19.5 + 3 * 60)
    assert "60 s/evaluation" in pace_line(p, running=True).plain
    # the first evaluation at step 0 of 300: 13.5 minutes with no step — said, not silent
    first = StatusFile(phase="initial-eval", step=0, total_steps=300, started_at=iso(now - 820))
    first.updated_at = iso(now - 810)
    p = pace.pace(Progress(first, None), [], now)
    assert p.evaluation == "initial" and p.evaluating_s == pytest.approx(810, abs=1)
    assert "◆ initial dev evaluation running for 13 min 30 s" in pace_line(p, running=True).plain
    # a periodic evaluation between steps (from the heartbeat): the ETA moves on while it runs
    evaluating = HeartbeatFile(time=now, phase="training", evaluating=True, evaluating_since=now - 45)
    p = pace.pace(Progress(status, evaluating), timed, now, eval_every=100)
    assert p.evaluation == "periodic" and p.evaluating_s == pytest.approx(45)
    assert p.eta_s == pytest.approx(295 * 19.5 + 3 * 60 + 15)
    later = pace.pace(Progress(status, evaluating), timed, now + 10, eval_every=100)
    assert later.eta_s == pytest.approx(p.eta_s - 10)
    # the final evaluation: no step left, its own remaining time, said as such
    final = status.model_copy(update={"phase": "final-eval", "step": 300, "updated_at": iso(now - 20)})
    p = pace.pace(Progress(final, None), timed, now, eval_every=100)
    assert p.evals_left == 0 and p.eta_s == pytest.approx(40, abs=1)
    line = pace_line(p, running=True).plain
    assert "ETA 40 s (final evaluation)" in line and "◆ final evaluation running for 20 s" in line
    assert "no timed step" not in line
    # an ended job: elapsed to its last word, no ETA
    done = status.model_copy(update={"phase": "done", "step": 300, "updated_at": iso(now - 100)})
    p = pace.pace(Progress(done, None), steps, now)
    assert p.eta_s is None and p.elapsed_s == pytest.approx(300, abs=1)


# ---------------------------------------------------------------- colours


@pytest.mark.parametrize(
    ("env", "depth"),
    [
        ({"TERM": "xterm"}, "16"),
        ({"TERM": "screen"}, "16"),
        ({"TERM": "xterm-256color"}, "256"),
        ({"TERM": "xterm-256color", "COLORTERM": "truecolor"}, "truecolor"),
        ({"TEXTUAL_COLOR_SYSTEM": "standard", "COLORTERM": "truecolor"}, "16"),
    ],
)
def test_warn_and_fail_never_share_a_colour(env: dict[str, str], depth: str) -> None:
    from textual.app import App

    assert tui_app.colour_depth(env) == depth
    theme = App().get_theme(tui_app.THEME_FOR_COLOURS[depth])
    assert theme is not None
    system = {"16": ColorSystem.STANDARD, "256": ColorSystem.EIGHT_BIT, "truecolor": ColorSystem.TRUECOLOR}[
        depth
    ]

    def drawn(name: str) -> object:
        if name.startswith("ansi_"):
            return name  # the terminal's own palette entry
        return Color.parse(name).downgrade(system).get_truecolor()

    assert drawn(theme.warning) != drawn(theme.error)
    if depth == "16":
        assert theme.warning == "ansi_yellow" and theme.error == "ansi_red"
        # the reason: the dark theme's amber comes out as red in 16 colours
        amber = Color.parse(App().get_theme("textual-dark").warning).downgrade(ColorSystem.STANDARD)
        assert amber.number in (1, 9)


# ---------------------------------------------------------------- live refresh, no key pressed


def _step(step: int, loss: float, at: float = 0.0, seconds: float = 0.1) -> StepLine:
    return StepLine(
        kind="step", step=step, time=at, loss=loss, lr=1e-3, grad_norm=1.0, seconds=seconds, epoch=0.1
    )


def _fake_job_process(job_dir: Path) -> subprocess.Popen:
    """A process the local provider takes for the job (its command line names the module and folder)."""
    code = "import time; time.sleep(120)"
    return subprocess.Popen(
        [sys.executable, "-c", code, "-m", "claimcheck.engine.training.job", str(job_dir.resolve())]
    )


async def test_a_job_that_ends_updates_the_screen_with_no_key_pressed(
    real_workspace: Path, tmp_path: Path
) -> None:
    path = rs.copy_workspace(real_workspace, tmp_path)
    [job_dir] = [p for p in (path / "jobs").iterdir() if p.is_dir()]
    done_status = jobfiles.read_status(job_dir)
    assert done_status is not None
    proc = _fake_job_process(job_dir)
    beating = threading.Event()

    def heartbeat() -> HeartbeatFile:
        return HeartbeatFile(time=time.time(), beats=1, interval=2.0, step=6, phase="training")

    try:
        jobfiles.write_pid(job_dir, PidFile(pid=proc.pid, pgid=proc.pid, host="x", starts=[]))
        running = done_status.model_copy(update={"phase": "training", "step": 6, "reason": ""})
        jobfiles.write_status(job_dir, running)

        def beat() -> None:  # the job's heartbeat thread, until the job ends
            while not beating.wait(0.5):
                jobfiles.write_heartbeat(job_dir, heartbeat())

        jobfiles.write_heartbeat(job_dir, heartbeat())
        threading.Thread(target=beat, daemon=True).start()
        app = tui_app.make_app(path, workspace=path.parents[1])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(
                pilot, lambda: isinstance(app.screen, tui_app.SessionScreen) and app.screen.view() is not None
            )
            await pilot.press("ctrl+l", "6")
            await wait_for(
                pilot, lambda: app.screen.view("dispatch") is not None and app.screen.view("dispatch")._ready
            )
            await pilot.press("f4")

            def nav(name: str) -> str:
                nav_ = app.screen.query_one(StageNavigator)
                item = next(i for i in nav_.children if i.name == name)
                return str(item.query_one(".nav-state").render()).strip()

            await wait_for(
                pilot, lambda: "· training" in screen_text(app) and nav("dispatch").startswith("running"), 30
            )
            assert "step 6 of 12" in screen_text(app)
            # dispatch recorded while the job trains: a draft (r2) that says "training"
            await pilot.press("ctrl+r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            view = app.screen.view("dispatch")
            await wait_for(pilot, lambda: view.runs_finished == 1, timeout=120)
            draft = Session.open(path).record("dispatch")
            assert draft.provenance.revision == 2 and not draft.provenance.frozen
            assert draft.check("dispatch.progress").measured["stage"] == "training"
            # the job ends: its files say done, its process exits — no key is pressed from here
            beating.set()
            jobfiles.write_status(job_dir, done_status)
            proc.terminate()
            proc.wait(timeout=30)
            # (the run showed the Checks tab: the job view is read from its widget)
            head = view.query_one("#job-head")
            await wait_for(pilot, lambda: "· done" in str(head.render()), timeout=60)
            assert "step 12 of 12" in str(head.render()) and "ETA" not in str(head.render())
            # the draft record no longer said what the job did: recorded again on its own
            await wait_for(pilot, lambda: view.runs_finished == 2, timeout=120)
            again = Session.open(path).record("dispatch")
            assert (
                again.provenance.computed_at >= draft.provenance.computed_at and not again.provenance.frozen
            )
            assert again.check("dispatch.progress").measured["job_state"] == "finished"
            await wait_for(pilot, lambda: nav("dispatch") == "draft", timeout=30)
    finally:
        beating.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_real_stall_alarm_says_what_it_compared(session: Session) -> None:
    """The dispatch record's stall alarm, as the real job wrote it: the longest stretch without a
    step held to a limit in seconds, within that limit on a healthy run."""
    stall = session.record("dispatch").check("dispatch.alarms.stall")
    assert stall is not None, "the dispatch record has no stall alarm"
    if stall.measured["state"] == "not_run":
        # a job quicker than one heartbeat interval between its first and last step: nothing to judge
        # (the rule itself is tested on written heartbeats in tests/test_jobfiles.py)
        assert "no heartbeat recorded during training" in stall.summary, stall.summary
        return
    assert stall.measured["state"] == "clear", stall.summary
    assert "longest stretch without an optimizer step" in stall.summary
    assert stall.measured["longest_without_step_s"] <= stall.measured["stall_limit_s"]


async def test_the_run_bar_clock_moves_while_a_stage_step_reports_nothing(
    tmp_path: Path, monkeypatch
) -> None:
    """A long silent step (an evaluation) still shows the run going: the elapsed time ticks."""
    from claimcheck.engine.evidence import Check
    from claimcheck.tui.stage_view import StageView
    from tests.test_tui_support import patch_modules, toy_module

    released = threading.Event()

    def slow(inputs):  # the stage says nothing until the test has seen the clock move
        assert released.wait(120), "the run bar's clock never reached 2 s"
        return [Check(id="claim.rows", status="pass", summary="3 rows", measured={"rows": 3})]

    patch_modules(monkeypatch, {"claim": toy_module("claim", slow)})
    session = Session.create(tmp_path / "runs" / "s", workspace=tmp_path)
    app = tui_app.make_app(session.path, workspace=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(
            pilot, lambda: isinstance(app.screen, tui_app.SessionScreen) and app.screen.view() is not None
        )
        view: StageView = app.screen.view("claim")
        await wait_for(pilot, lambda: view._ready)
        editor = view.query_one("#toml-editor")
        editor.text = editor.text.replace("delay_steps = 0", "delay_steps = 1")
        await pilot.pause()
        await pilot.press("ctrl+r")
        label = view.query_one(".run-text")
        await wait_for(pilot, lambda: str(label.render()).startswith("2 s · step 0 of 1"), timeout=60)
        released.set()
        await wait_for(pilot, lambda: not view.running, timeout=60)


def test_the_report_svg_marks_dev_evaluations_under_the_loss_curve() -> None:
    from claimcheck.engine.report.svg import line_chart

    svg = line_chart("loss", {"loss": [(1.0, 2.0), (2.0, 1.5), (3.0, 1.2)]}, events=[2.0])
    assert svg.count("<polygon") == 1
    assert "<polygon" not in line_chart("loss", {"loss": [(1.0, 2.0), (2.0, 1.5)]})


async def test_the_eta_during_the_final_evaluation_counts_its_time(
    real_workspace: Path, tmp_path: Path
) -> None:
    """The real job's files, rewritten as if its final dev evaluation were running for 10 s and its
    periodic one (step 6) had taken 40 s: the job view says 'final evaluation' and an ETA of the
    evaluation's remaining ~30 s, in the evaluation's own unit — never a frozen or '?' ETA."""
    import re

    path = rs.copy_workspace(real_workspace, tmp_path)
    [job_dir] = [p for p in (path / "jobs").iterdir() if p.is_dir()]
    records = jobfiles.read_metrics(job_dir)
    status = jobfiles.read_status(job_dir)
    assert status is not None and status.total_steps == 12
    last = max(i for i, r in enumerate(records) if isinstance(r, StepLine) and r.step == 12)
    kept = records[: last + 1]  # the final evaluation has not written its line yet
    at6 = next(r.time for r in kept if isinstance(r, StepLine) and r.step == 6)
    kept = [
        r.model_copy(update={"time": at6 + 40.0}) if isinstance(r, EvalLine) and r.step == 6 else r
        for r in kept
    ]
    (job_dir / jobfiles.METRICS).write_text("".join(json.dumps(jobfiles.dump_line(r)) + "\n" for r in kept))
    assert pace.eval_seconds(kept) == [pytest.approx(40.0)]
    now = time.time()
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(now - 10))
    jobfiles.write_status(
        job_dir, status.model_copy(update={"phase": "final-eval", "reason": "", "updated_at": iso})
    )
    proc = _fake_job_process(job_dir)
    beating = threading.Event()

    def beat() -> None:
        while not beating.wait(0.5):
            jobfiles.write_heartbeat(
                job_dir,
                HeartbeatFile(time=time.time(), beats=1, interval=2.0, step=12, phase="final-eval", evaluating=True,
                              evaluating_since=now - 10),
            )  # fmt: skip

    try:
        jobfiles.write_pid(job_dir, PidFile(pid=proc.pid, pgid=proc.pid, host="x", starts=[]))
        threading.Thread(target=beat, daemon=True).start()
        app = tui_app.make_app(path, workspace=path.parents[1])
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, tui_app.SessionScreen), timeout=60)
            assert app.screen.current == "dispatch"  # a job runs: the session opens on it
            await wait_for(
                pilot, lambda: app.screen.view("dispatch") is not None and app.screen.view("dispatch")._ready
            )
            await pilot.press("f4")
            view = app.screen.view("dispatch")
            head = view.query_one("#job-head")
            await wait_for(pilot, lambda: "final evaluation running" in str(head.render()), timeout=30)
            text = str(head.render())
            assert "step 12 of 12" in text and "40 s/evaluation" in text and "s/step" in text
            assert "steps/s" not in text and "no timed step" not in text
            assert re.search(r"ETA (\d+) s \(final evaluation\)", text) is not None, text

            def eta_counts_the_running_evaluation() -> bool:
                # the view redraws as the job is polled; a first draw before the heartbeat is read
                # may not yet count the 10 s already spent
                eta = re.search(r"ETA (\d+) s \(final evaluation\)", str(head.render()))
                return eta is not None and 15 <= int(eta.group(1)) <= 31

            await wait_for(pilot, eta_counts_the_running_evaluation, timeout=30)
    finally:
        beating.set()
        proc.kill()
        proc.wait()
