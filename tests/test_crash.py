"""Crash consistency of the ledger: kill `claimcheck run --answers` at every write / rename point
and at random times, then check what it left.

Each kill leaves a session folder that must satisfy: every TOML parses; replay never says
`tampered` (claimcheck wrote every byte); reopening it (taking the stale lock over) leaves no
temp file; and the session can be continued to the end (every answered stage frozen).

Kill points: CLAIMCHECK_CRASH_AFTER_WRITES=N makes the run end itself with os._exit at the Nth
write or rename point (engine.evidence.crash_point), as SIGKILL would: no finally, no cleanup.
The run is forked from this (already warm) process so a point costs no interpreter start; a few
runs are real `python -m tui.cli run --answers` processes SIGKILLed at random times.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine import stages as registry
from engine.answers import load_answers
from engine.evidence import CRASH_ENV, CRASH_EXIT, is_temp_name, load_record
from engine.replay import replay
from engine.session import SESSION_FILE, Session

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "answers-example.toml"
SAMPLE = ROOT / "sample_data" / "tickets.csv"
ROWS = 60
RANDOM_FORKED = 76
RANDOM_PROCESSES = 4
CHILD_TIMEOUT_S = 120.0

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash test forks")


def write_workspace(ws: Path, rows: int = ROWS) -> Path:
    """A tiny copy of the sample data and the docs' answers file cut to the cheap stages."""
    lines = SAMPLE.read_text().splitlines(keepends=True)
    (ws / "tiny.csv").write_text("".join(lines[: rows + 1]))
    text = EXAMPLE.read_text()
    text = text[: text.index("[contract]")]
    text = text.replace("sample_data/tickets.csv", "tiny.csv").replace('workspace = ".."', 'workspace = "."')
    text = text.replace("class_support_floor = 20", "class_support_floor = 1")
    text = text.replace('learners = ["most_frequent", "prior", "tfidf_logreg"]', 'learners = ["most_frequent", "prior"]')
    text = text.replace("bootstrap_resamples = 1000", "bootstrap_resamples = 100")
    answers = ws / "answers.toml"
    answers.write_text(text)
    return answers


# ---------------------------------------------------------------- running and killing
#
# The runs are forked from a separate driver process (`python -m tests.test_crash DIR`) that only
# imports: a process that has run polars (the test process has) must not fork, its thread pool
# can deadlock the child.


def _child(answers: Path, session_dir: Path, crash_after: int | None) -> None:
    """In the forked child: run the CLI, end without cleanup."""
    rc = 1
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        if crash_after is not None:
            os.environ[CRASH_ENV] = str(crash_after)
        from tui.cli import main

        rc = main(["run", "--answers", str(answers), str(session_dir)])
    except BaseException:  # noqa: BLE001 - the exit code says it
        rc = 3
    finally:
        os._exit(rc)


def _wait(pid: int, timeout: float, kill_after: float | None = None) -> int:
    """Wait for a child; SIGKILL it after kill_after seconds (or at the timeout). Its exit code,
    -9 when it was killed."""
    start = time.monotonic()
    killed = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        elapsed = time.monotonic() - start
        if not killed and ((kill_after is not None and elapsed >= kill_after) or elapsed >= timeout):
            os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.002)


def run_forked(answers: Path, session_dir: Path, crash_after: int | None = None, kill_after: float | None = None) -> int:
    pid = os.fork()
    if pid == 0:
        _child(answers, session_dir, crash_after)
    return _wait(pid, CHILD_TIMEOUT_S, kill_after)


def _warm_imports(modules_file: Path) -> None:
    """Import (never run) what a complete run imported, so each forked run starts warm."""
    import importlib

    for name in modules_file.read_text().split():
        if name.split(".")[0] in ("torch", "transformers", "peft", "tui", "textual") or name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - warming only
            continue


def drive(root: Path, random_kills: int, seed: int) -> dict:
    """Kill `run --answers` at every write/rename point, then at random times; one folder each."""
    answers = root / "answers.toml"
    modules = root / "modules.txt"
    pid = os.fork()
    if pid == 0:  # a complete run, which also lists what it imported
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        from tui.cli import main

        rc = main(["run", "--answers", str(answers), str(root / "full")])
        modules.write_text("\n".join(sorted(sys.modules)))
        os._exit(rc)
    assert _wait(pid, CHILD_TIMEOUT_S) == 0, "the complete run failed"
    _warm_imports(modules)
    t0 = time.monotonic()
    assert run_forked(answers, root / "full2") == 0
    full_s = time.monotonic() - t0
    out: dict = {"full_s": full_s, "points": [], "random": []}
    n = 0
    while True:
        n += 1
        session_dir = root / f"p{n:04d}"
        rc = run_forked(answers, session_dir, crash_after=n)
        if rc == 0:
            shutil.rmtree(session_dir)
            break
        out["points"].append({"dir": session_dir.name, "exit": rc})
    rng = random.Random(seed)
    for i in range(random_kills):
        session_dir = root / f"r{i:03d}"
        after = rng.uniform(0.0, full_s)
        rc = run_forked(answers, session_dir, kill_after=after)
        out["random"].append({"dir": session_dir.name, "exit": rc, "after_s": round(after, 3)})
    return out


# ---------------------------------------------------------------- what a killed run must leave


@dataclass
class Figures:
    points: int = 0
    crashed: int = 0
    completed: int = 0
    unparsable: list[str] = field(default_factory=list)
    tampered: list[str] = field(default_factory=list)
    not_continuable: list[str] = field(default_factory=list)
    temp_surviving: list[str] = field(default_factory=list)
    interrupted_named: int = 0
    no_session_yet: int = 0

    def line(self) -> str:
        return (
            f"{self.points} kill points ({self.crashed} killed mid-run, {self.completed} finished first): "
            f"{len(self.unparsable)} corrupt files, {len(self.tampered)} false tampered, "
            f"{len(self.not_continuable)} not continuable, {len(self.temp_surviving)} temp files surviving reopen; "
            f"{self.interrupted_named} replays named an interrupted write, {self.no_session_yet} killed before session.toml"
        )


def _temp_files(session_dir: Path) -> list[str]:
    return sorted(
        str(p.relative_to(session_dir))
        for p in session_dir.rglob("*")
        if is_temp_name(p.name) and "jobs" not in p.relative_to(session_dir).parts
    )


def check_killed(session_dir: Path, answers: Path, label: str, figs: Figures) -> None:
    figs.points += 1
    for p in sorted(session_dir.rglob("*.toml")):
        try:
            tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            figs.unparsable.append(f"{label}: {p.name}: {exc}")
    if not (session_dir / SESSION_FILE).exists():
        # Killed before the session existed: continuing is running the answers again.
        figs.no_session_yet += 1
        rc = run_forked(answers, session_dir)
        if rc != 0 or not (session_dir / SESSION_FILE).exists():
            figs.not_continuable.append(f"{label}: re-running the answers into the folder gave exit {rc}")
        figs.temp_surviving += [f"{label}: {t}" for t in _temp_files(session_dir)]
        return
    result = replay(session_dir)
    bad = [r for r in result.rows if r.outcome == "tampered"]
    if result.error or bad:
        figs.tampered.append(f"{label}: {result.error or bad[0].detail}")
    figs.interrupted_named += any("interrupted write" in r.detail for r in result.rows)
    continue_session(session_dir, answers, label, figs)


def continue_session(session_dir: Path, answers: Path, label: str, figs: Figures) -> None:
    """Reopen as the app does (taking the dead run's lock over) and run/freeze what is left."""
    try:
        session = Session.open(session_dir)
        session.lock.acquire(take_over_stale=True)
    except Exception as exc:  # noqa: BLE001 - a figure, not a crash of the test
        figs.not_continuable.append(f"{label}: reopen: {exc}")
        return
    try:
        figs.temp_surviving += [f"{label}: {t}" for t in _temp_files(session_dir)]
        plan = load_answers(answers).stages
        for name, inputs in plan.items():
            if session.state(name) != "frozen":
                session.run_stage(name, inputs)
                session.freeze(name)
        states = session.states()
        not_frozen = [n for n in plan if states[n] != "frozen"]
        if not_frozen:
            figs.not_continuable.append(f"{label}: still not frozen: {not_frozen}")
        for name in plan:
            rec = load_record(session.record_path(name))
            entry = Session.open(session_dir).meta.stages[name]
            if entry.digest != rec.provenance.digest or rec.compute_digest() != rec.provenance.digest:
                figs.not_continuable.append(f"{label}: {name}: session.toml and the record disagree")
    except Exception as exc:  # noqa: BLE001
        figs.not_continuable.append(f"{label}: continuing: {type(exc).__name__}: {exc}")
    finally:
        session.lock.release()


# ---------------------------------------------------------------- the test


@pytest.mark.slow
def test_killing_run_answers_anywhere_leaves_a_session_that_continues(tmp_path: Path) -> None:
    answers = write_workspace(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(CRASH_ENV, None)
    t0 = time.monotonic()
    driven = subprocess.run(
        [sys.executable, "-m", "tests.test_crash", str(tmp_path), str(RANDOM_FORKED), "14"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    assert driven.returncode == 0, driven.stderr[-3000:]
    kills = json.loads(driven.stdout.strip().splitlines()[-1])
    kill_s = time.monotonic() - t0
    figs = Figures()
    for p in kills["points"]:
        assert p["exit"] == CRASH_EXIT, f"{p['dir']}: the run exited {p['exit']}, not at its crash point"
        figs.crashed += 1
        check_killed(tmp_path / p["dir"], answers, f"point {p['dir']}", figs)
    for r in kills["random"]:
        figs.crashed += r["exit"] != 0
        figs.completed += r["exit"] == 0
        check_killed(tmp_path / r["dir"], answers, f"random {r['dir']} after {r['after_s']}s", figs)
    # A few real claimcheck processes, SIGKILLed at random times.
    rng = random.Random(15)
    for i in range(RANDOM_PROCESSES):
        session_dir = tmp_path / f"k{i:03d}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "run", "--answers", str(answers), str(session_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
        )
        time.sleep(rng.uniform(0.3, 0.3 + 2 * kills["full_s"]))
        proc.send_signal(signal.SIGKILL)
        rc = proc.wait()
        figs.crashed += rc != 0
        figs.completed += rc == 0
        check_killed(session_dir, answers, f"process {i} (exit {rc})", figs)
    write_points = len(kills["points"])
    print(
        f"\ncrash test: {write_points} write/rename points + {len(kills['random']) + RANDOM_PROCESSES} random "
        f"kills (kills {kill_s:.0f}s, checks {time.monotonic() - t0 - kill_s:.0f}s); {figs.line()}"
    )
    assert not figs.unparsable, figs.unparsable[:5]
    assert not figs.tampered, figs.tampered[:5]
    assert not figs.not_continuable, figs.not_continuable[:5]
    assert not figs.temp_surviving, figs.temp_surviving[:5]
    assert write_points >= 100, f"only {write_points} write/rename points in a run"
    assert figs.points >= 200, figs.line()


if __name__ == "__main__":  # the driver: python -m tests.test_crash DIR RANDOM_KILLS SEED
    print(json.dumps(drive(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
