"""Crash consistency of the ledger: kill `claimcheck run --answers` at every class of write / rename
point and at random times, then check what it left.

Each kill leaves a session folder that must satisfy: every TOML parses; replay never says
`tampered` (claimcheck wrote every byte); reopening it (taking the stale lock over) leaves no
temp file; and the session can be continued to the end (every answered stage frozen).

Kill points: CLAIMCHECK_CRASH_AFTER_WRITES=N makes the run end itself with os._exit at the Nth
write or rename point (claimcheck.engine.evidence.crash_point), as SIGKILL would: no finally, no cleanup.
The run is forked from this (already warm) process so a point costs no interpreter start; a few
runs are real `python -m claimcheck.tui.cli run --answers` processes SIGKILLed at random times.

The points killed are one of each class (point_classes): a complete run traces its points, and a
point's class is the stage whose transaction it falls in (transactions end at the session's commit
point; the session's creation is one of its own), its call site (temp file made, written, renamed;
lock created; commit) and the file it writes. A stage's later transactions repeat its first one's
classes, so each class is killed at one of its occurrences, drawn with a fixed seed: every class,
about half the points of a run.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from claimcheck.engine.evidence import CRASH_ENV, CRASH_EXIT, is_temp_name, load_record
from claimcheck.engine.headless.answers import load_answers, run_answers
from claimcheck.engine.headless.replay import replay
from claimcheck.engine.ledger.session import SESSION_FILE, Session

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "answers-example.toml"
SAMPLE = ROOT / "sample_data" / "tickets.csv"
ROWS = 60
# A complete run passes at least this many write / rename points (every one is traced and classed).
MIN_POINTS = 100
# Forked runs SIGKILLed at random times (a few random runs finish before their time and are not counted).
RANDOM_FORKED = 40
POINT_SEED = 14
RANDOM_PROCESSES = 4
LANES = 2
CHILD_TIMEOUT_S = 120.0

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash test forks")


def write_workspace(ws: Path, rows: int = ROWS) -> Path:
    """A tiny copy of the sample data and the docs' answers file cut to the cheap stages."""
    lines = SAMPLE.read_text().splitlines(keepends=True)
    (ws / "tiny.csv").write_text("".join(lines[: rows + 1]))
    (ws / "sample_data").mkdir(exist_ok=True)  # the example's label script (source.label_provenance)
    (ws / "sample_data" / "make_tickets.py").write_bytes((SAMPLE.parent / "make_tickets.py").read_bytes())
    text = EXAMPLE.read_text()
    text = text[: text.index("[contract]")]
    text = text.replace("sample_data/tickets.csv", "tiny.csv").replace('workspace = ".."', 'workspace = "."')
    text = text.replace("class_support_floor = 20", "class_support_floor = 1")
    text = text.replace(
        'learners = ["most_frequent", "prior", "tfidf_logreg"]', 'learners = ["most_frequent", "prior"]'
    )
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
        from claimcheck.tui.cli import main

        rc = main(["run", "--answers", str(answers), str(session_dir)])
    except BaseException:  # noqa: BLE001 - the exit code says it
        rc = 3
    finally:
        os._exit(rc)


def _wait(pid: int, timeout: float, kill_after: float | None = None, sig: int = signal.SIGKILL) -> int:
    """Wait for a child; send it `sig` after kill_after seconds, SIGKILL at the timeout. Its exit
    code, -N when signal N ended it."""
    start = time.monotonic()
    sent = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        elapsed = time.monotonic() - start
        if not sent and kill_after is not None and elapsed >= kill_after:
            os.kill(pid, sig)
            sent = True
        if elapsed >= timeout:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)


def run_forked(
    answers: Path, session_dir: Path, crash_after: int | None = None, kill_after: float | None = None
) -> int:
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


def _trace_points(root: Path, name: str) -> list[list]:
    """In a forked child before its run: record every write / rename point instead of counting it,
    as [function, line, file relative to the session (or "")]."""
    from claimcheck.engine import evidence
    from claimcheck.engine.ledger import lock, session

    session_dir, trace = root / name, []

    def record() -> None:
        frame = sys._getframe(1)
        path = frame.f_locals.get("path")
        inside = isinstance(path, Path) and path.is_relative_to(session_dir)
        rel = path.relative_to(session_dir).as_posix() if inside else ""
        trace.append([frame.f_code.co_name, frame.f_lineno, rel])

    for module in (evidence, lock, session):  # each calls crash_point through its own global name
        module.crash_point = record
    return trace


def point_classes(trace: list[list]) -> dict[tuple, list[int]]:
    """Each class of the traced points -> its points (1-based), in order. A transaction ends at the
    session's commit point (the session's creation, at the lock's); its stage is the stage record it
    writes; a class is (stage, function, line, file, the how-many-th such point in its transaction)."""
    classes: dict[tuple, list[int]] = {}
    start = 0
    for end, (func, _, _) in enumerate(trace):
        if func not in ("_commit", "_create") and end < len(trace) - 1:
            continue
        tx = trace[start : end + 1]
        records = [f for _, _, f in tx if f.endswith(".toml") and f[:2].isdigit()]
        stage = records[0] if records else ""
        seen: dict[tuple, int] = {}
        for i, (func, line, rel) in enumerate(tx, start + 1):
            k = (func, line, rel)
            seen[k] = seen.get(k, -1) + 1
            classes.setdefault((stage, *k, seen[k]), []).append(i)
        start = end + 1
    return classes


def chosen_points(trace: list[list], seed: int = POINT_SEED) -> list[int]:
    """One point of each class, the occurrence drawn with `seed`; sorted."""
    rng = random.Random(seed)
    return sorted(rng.choice(points) for points in point_classes(trace).values())


def drive(root: Path, lane: int, lanes: int, seed: int) -> dict:
    """Kill `run --answers` at this lane's share of the chosen write/rename points (every lanes-th
    of chosen_points, from the lane-th), then at random times; one folder each."""
    answers = root / "answers.toml"
    modules = root / f"modules{lane}.txt"
    pid = os.fork()
    if pid == 0:  # a complete run, which also lists what it imported and traces its points
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        from claimcheck.tui.cli import main

        trace = _trace_points(root, f"full{lane}")
        rc = main(["run", "--answers", str(answers), str(root / f"full{lane}")])
        modules.write_text("\n".join(sorted(sys.modules)))
        (root / f"trace{lane}.json").write_text(json.dumps(trace))
        os._exit(rc)
    assert _wait(pid, CHILD_TIMEOUT_S) == 0, "the complete run failed"
    trace = json.loads((root / f"trace{lane}.json").read_text())
    _warm_imports(modules)
    t0 = time.monotonic()
    assert run_forked(answers, root / f"full{lane}b") == 0
    full_s = time.monotonic() - t0
    out: dict = {"full_s": full_s, "trace": trace, "points": [], "random": []}
    for n in chosen_points(trace)[lane::lanes]:
        session_dir = root / f"p{n:04d}"
        rc = run_forked(answers, session_dir, crash_after=n)
        out["points"].append({"dir": session_dir.name, "exit": rc, "point": n})
    dirs = (root / f"r{i:03d}" for i in itertools.count(lane, lanes))
    rng = random.Random(seed * lanes + lane)
    out["random"] = random_kills(answers, dirs, len(range(lane, RANDOM_FORKED, lanes)), full_s, rng)
    return out


def random_kills(
    answers: Path, dirs: Iterator[Path], wanted: int, full_s: float, rng: random.Random
) -> list[dict]:
    """SIGKILL forked runs at random times until `wanted` of them were killed before they ended.

    The window is 0.9 x the shortest run seen: the timed complete run may have been slowed by the
    other lane (or a busy machine) and later runs be faster, so a run that finishes before its time
    shrinks the window to its own length rather than leaving the test short of kills."""
    window, runs = full_s, []
    while sum(r["exit"] != 0 for r in runs) < wanted and len(runs) < 3 * wanted:
        session_dir = next(dirs)
        after = rng.uniform(0.0, 0.9 * window)
        t0 = time.monotonic()
        rc = run_forked(answers, session_dir, kill_after=after)
        if rc == 0:
            window = min(window, time.monotonic() - t0)
        runs.append({"dir": session_dir.name, "exit": rc, "after_s": round(after, 3)})
    return runs


# ---------------------------------------------------------------- what a killed run must leave


FINDINGS = ("unparsable", "tampered", "not_continuable", "temp_surviving")


def _temp_files(session_dir: Path) -> list[str]:
    return sorted(
        str(p.relative_to(session_dir))
        for p in session_dir.rglob("*")
        if is_temp_name(p.name) and "jobs" not in p.relative_to(session_dir).parts
    )


def check_killed(session_dir: Path, answers: Path, label: str) -> dict:
    """What one killed run left, as findings: lists of problems (empty when all is well)."""
    out: dict = {k: [] for k in FINDINGS} | {"interrupted_named": False, "no_session_yet": False}
    for p in sorted(session_dir.rglob("*.toml")):
        try:
            tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            out["unparsable"].append(f"{label}: {p.name}: {exc}")
    if not (session_dir / SESSION_FILE).exists():
        # Killed before the session existed: continuing is running the answers into the folder again.
        out["no_session_yet"] = True
        try:
            result = run_answers(answers, session_dir)
            if result.exit_code != 0:
                out["not_continuable"].append(f"{label}: re-running the answers: exit {result.exit_code}")
        except Exception as exc:  # noqa: BLE001 - a finding, not a crash of the test
            out["not_continuable"].append(f"{label}: re-running the answers: {type(exc).__name__}: {exc}")
        out["temp_surviving"] += [f"{label}: {t}" for t in _temp_files(session_dir)]
        return out
    result = replay(session_dir)
    bad = [r for r in result.rows if r.outcome == "tampered"]
    if result.error or bad:
        out["tampered"].append(f"{label}: {result.error or bad[0].detail}")
    out["interrupted_named"] = any("interrupted write" in r.detail for r in result.rows)
    continue_session(session_dir, answers, label, out)
    return out


def continue_session(session_dir: Path, answers: Path, label: str, out: dict) -> None:
    """Reopen as the app does (taking the dead run's lock over) and run/freeze what is left."""
    try:
        session = Session.open(session_dir)
        session.lock.acquire(take_over_stale=True)
    except Exception as exc:  # noqa: BLE001
        out["not_continuable"].append(f"{label}: reopen: {type(exc).__name__}: {exc}")
        return
    try:
        out["temp_surviving"] += [f"{label}: {t}" for t in _temp_files(session_dir)]
        plan = load_answers(answers).stages
        for name, inputs in plan.items():
            if session.state(name) != "frozen":
                session.run_stage(name, inputs)
                session.freeze(name)
        states = session.states()
        not_frozen = [n for n in plan if states[n] != "frozen"]
        if not_frozen:
            out["not_continuable"].append(f"{label}: still not frozen: {not_frozen}")
        meta = Session.open(session_dir).meta
        for name in plan:
            rec = load_record(session.record_path(name))
            if (
                meta.stages[name].digest != rec.provenance.digest
                or rec.compute_digest() != rec.provenance.digest
            ):
                out["not_continuable"].append(f"{label}: {name}: session.toml and the record disagree")
    except Exception as exc:  # noqa: BLE001
        out["not_continuable"].append(f"{label}: continuing: {type(exc).__name__}: {exc}")
    finally:
        session.lock.release()


def _check_job(job: tuple[str, str, str]) -> dict:
    return check_killed(Path(job[0]), Path(job[1]), job[2])


# ---------------------------------------------------------------- the test


def run_drivers(module: str, lane_args: list[list[str]], env: dict[str, str]) -> list[dict]:
    """One driver process a lane (`python -m MODULE ARGS`), all at once; the JSON each printed last."""
    drivers = [
        subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for args in lane_args
    ]
    out = []
    for d in drivers:
        stdout, stderr = d.communicate(timeout=900)
        assert d.returncode == 0, stderr[-3000:]
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def kill_processes(answers: Path, dirs: list[Path], after_s: list[float], env: dict[str, str]) -> list[int]:
    """`claimcheck run --answers` into each folder, as real processes all started together, each
    SIGKILLed `after_s` seconds after its start (or left to finish first); their exit codes."""
    cmd = [sys.executable, "-m", "claimcheck.tui.cli", "run", "--answers", str(answers)]
    procs = []
    for session_dir, after in zip(dirs, after_s, strict=True):
        proc = subprocess.Popen(
            [*cmd, str(session_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT
        )
        procs.append((time.monotonic() + after, proc))
    exits = []
    for deadline, proc in procs:
        time.sleep(max(0.0, deadline - time.monotonic()))
        proc.send_signal(signal.SIGKILL)
        exits.append(proc.wait(timeout=CHILD_TIMEOUT_S))
    return exits


@pytest.mark.slow
def test_killing_run_answers_anywhere_leaves_a_session_that_continues(tmp_path: Path) -> None:
    answers = write_workspace(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(CRASH_ENV, None)
    t0 = time.monotonic()
    lanes = run_drivers(
        "tests.test_crash",
        [[str(tmp_path), str(lane), str(LANES), "14"] for lane in range(LANES)],
        env,
    )
    kills: dict = {"full_s": 0.0, "points": [], "random": []}
    for lane in lanes:
        kills["full_s"] = max(kills["full_s"], lane["full_s"])
        kills["points"] += lane["points"]
        kills["random"] += lane["random"]
    trace = lanes[0]["trace"]
    assert all(lane["trace"] == trace for lane in lanes), "two complete runs passed different points"
    assert len(trace) >= MIN_POINTS, f"only {len(trace)} write/rename points in a run"
    classes = point_classes(trace)
    points = sorted(p["point"] for p in kills["points"])
    assert points == chosen_points(trace), "the lanes left a chosen point out"
    missed = [c for c, at in classes.items() if not set(at) & set(points)]
    assert not missed, f"classes of write points never killed: {missed[:5]}"
    jobs = []
    for p in kills["points"]:
        assert p["exit"] == CRASH_EXIT, f"{p['dir']}: the run exited {p['exit']}, not at its crash point"
        jobs.append((str(tmp_path / p["dir"]), str(answers), f"point {p['point']}"))
    jobs += [
        (str(tmp_path / r["dir"]), str(answers), f"random {r['dir']} at {r['after_s']}s")
        for r in kills["random"]
    ]
    # A few real claimcheck processes, SIGKILLed at random times; all started at once, each killed
    # at its own time after its own start.
    rng = random.Random(15)
    exits = [r["exit"] for r in kills["random"]]
    dirs = [tmp_path / f"k{i:03d}" for i in range(RANDOM_PROCESSES)]
    after_s = [rng.uniform(0.3, 0.3 + 2 * kills["full_s"]) for _ in dirs]
    for i, (session_dir, code) in enumerate(
        zip(dirs, kill_processes(answers, dirs, after_s, env), strict=True)
    ):
        exits.append(code)
        jobs.append((str(session_dir), str(answers), f"process {i} (exit {code})"))
    kill_s = time.monotonic() - t0
    # The checks run in fresh (spawned) processes, two at a time.
    with ProcessPoolExecutor(LANES, mp_context=multiprocessing.get_context("spawn")) as pool:
        found = list(pool.map(_check_job, jobs))
    merged = {k: [x for f in found for x in f[k]] for k in FINDINGS}
    write_points = len(kills["points"])
    print(
        f"\ncrash test: {len(jobs)} kills = {write_points} write/rename points (one of each of "
        f"{len(classes)} classes, of {len(trace)} points in a run) + {len(exits)} random times "
        f"({sum(e == 0 for e in exits)} of those finished first); kills {kill_s:.0f}s, checks "
        f"{time.monotonic() - t0 - kill_s:.0f}s: "
        + ", ".join(f"{len(merged[k])} {k}" for k in FINDINGS)
        + f"; {sum(f['interrupted_named'] for f in found)} replays named an interrupted write, "
        f"{sum(f['no_session_yet'] for f in found)} killed before session.toml existed"
    )
    for k in FINDINGS:
        for line in merged[k][:10]:
            print(f"  {k}: {line}")
    assert not any(merged.values()), {k: v[:3] for k, v in merged.items() if v}
    random_killed = sum(r["exit"] != 0 for r in kills["random"])
    assert random_killed >= RANDOM_FORKED, f"only {random_killed} random runs were killed before they ended"


if __name__ == "__main__":  # the driver: python -m tests.test_crash DIR LANE LANES SEED
    print(json.dumps(drive(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:5]))))
