"""A killed run continues with the same command: kill `claimcheck run --answers` and `claimcheck sign`
with SIGKILL or SIGTERM at random early times, then run the very same command again (killed again,
or left to finish) until one run completes, with no human step in between.

Each chain is one session folder: a few kills of `run --answers`, then a run that must complete
(exit 0), then the same for `sign`. After every kill, every TOML file in the folder must parse; a
rerun must never be refused (the lock a killed run left is taken over, said in one line); at the
end of a chain the session passes every integrity check (no "tampered", a valid signature) and
every answered stage is frozen.

As in tests/test_crash.py the runs are forked from a warm driver process (`python -m
tests.test_kill_chain ...`) that only imports, so a kill costs no interpreter start; the forked
child runs the real CLI entry point (`main`), SIGTERM handler included.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.test_crash import CHILD_TIMEOUT_S, _wait, _warm_imports, run_drivers, write_workspace

ROOT = Path(__file__).resolve().parents[1]
KILLS = 100  # at least this many kills in all, over both lanes
LANES = 2
KILLS_PER_CHAIN = (2, 6)  # kills of one command before the run left to finish, drawn in this range
EARLY = 0.6  # kill times are drawn in [0, EARLY x the shortest complete run seen]
RERUN_REFUSED = "refused"

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the kill test forks")


def _checkout_env() -> dict[str, str]:
    """This process's environment with this checkout importable (`tests.*` in child processes)."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# ---------------------------------------------------------------- in the driver


def _child(argv: list[str], log: Path) -> None:
    """In the forked child: the CLI as a user runs it, output to `log`, ended without cleanup."""
    rc = 3
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from claimcheck.tui.cli import main

        rc = main(argv)
    except BaseException:  # noqa: BLE001 - the exit code says it
        rc = 3
    finally:
        os._exit(rc)


def run_once(argv: list[str], log: Path, kill: tuple[int, float] | None) -> int:
    """Fork one run; send it `kill` = (signal, after seconds) unless it ended first. Its exit code,
    -N when a signal ended it."""
    pid = os.fork()
    if pid == 0:
        _child(argv, log)
    if kill is None:
        return _wait(pid, CHILD_TIMEOUT_S)
    return _wait(pid, CHILD_TIMEOUT_S, kill_after=kill[1], sig=kill[0])


def toml_problems(session_dir: Path) -> list[str]:
    out = []
    for p in sorted(session_dir.rglob("*.toml")):
        try:
            tomllib.loads(p.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            out.append(f"{p.relative_to(session_dir)}: {exc}")
    return out


def chain(argv: list[str], log: Path, window: list[float], rng: random.Random, session_dir: Path) -> dict:
    """Kill the command a few times at random early times, each followed by the same command; then
    one run left to finish. A rerun that exits with anything but 0 or a kill is a finding.
    window: [the shortest complete run seen], shrunk when a run finishes before its kill."""
    out: dict = {"kills": 0, "sigterm": 0, "took_over": 0, "findings": []}
    for _ in range(rng.randint(*KILLS_PER_CHAIN)):
        sig = rng.choice((signal.SIGKILL, signal.SIGTERM))
        t0 = time.monotonic()
        rc = run_once(argv, log, (sig, rng.uniform(0.0, EARLY * window[0])))
        text = log.read_text(errors="replace")
        out["took_over"] += "took over the lock" in text
        if rc == 0:
            window[0] = min(window[0], time.monotonic() - t0)
            return out  # finished before its time: the chain is complete
        if rc not in (-signal.SIGKILL, -signal.SIGTERM, 130, 143):
            out["findings"].append(f"{RERUN_REFUSED}: {' '.join(argv[:1])} exit {rc}: {text[-300:]}")
            return out
        out["kills"] += 1
        out["sigterm"] += sig == signal.SIGTERM
        if sig == signal.SIGTERM and rc == 143 and "run the same command to continue" not in text:
            out["findings"].append(f"SIGTERM without its line: {text[-300:]}")
        out["findings"] += [f"unparsable {p}" for p in toml_problems(session_dir)]
    rc = run_once(argv, log, None)
    text = log.read_text(errors="replace")
    out["took_over"] += "took over the lock" in text
    if rc != 0:
        out["findings"].append(f"{RERUN_REFUSED}: the completing {argv[0]} exited {rc}: {text[-300:]}")
    return out


def timed(argv: list[str], log: Path) -> float:
    t0 = time.monotonic()
    rc = run_once(argv, log, None)
    assert rc == 0, log.read_text(errors="replace")[-2000:]
    return time.monotonic() - t0


def drive(root: Path, lane: int, kills: int, seed: int) -> dict:
    """Chains of kills in one session folder after another until this lane killed `kills` runs."""
    answers, key = root / "answers.toml", root / "key.pem"
    log = root / f"log{lane}.txt"
    modules = root / f"modules{lane}.txt"
    pid = os.fork()
    if pid == 0:  # a complete run and sign, which also list what they imported
        from claimcheck.tui.cli import main

        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        rc = main(["run", "--answers", str(answers), str(root / f"warm{lane}")])
        rc = rc or main(["sign", str(root / f"warm{lane}"), "--key", str(key)])
        modules.write_text("\n".join(sorted(sys.modules)))
        os._exit(rc)
    assert os.waitpid(pid, 0)[1] == 0, "the complete run and sign failed"
    _warm_imports(modules)
    run_window = [timed(["run", "--answers", str(answers), str(root / f"timed{lane}")], log)]
    sign_window = [timed(["sign", str(root / f"timed{lane}"), "--key", str(key)], log)]
    rng = random.Random(seed * 100 + lane)
    out: dict = {"run_s": run_window[0], "sign_s": sign_window[0], "chains": []}
    done = 0
    while done < kills:
        session_dir = root / f"c{lane}-{len(out['chains']):03d}"
        ran = chain(["run", "--answers", str(answers), str(session_dir)], log, run_window, rng, session_dir)
        signed = chain(["sign", str(session_dir), "--key", str(key)], log, sign_window, rng, session_dir)
        out["chains"].append({"dir": session_dir.name, "run": ran, "sign": signed})
        done += ran["kills"] + signed["kills"]
    return out


# ---------------------------------------------------------------- the test


def verify_chain_end(session_dir: Path, answers: Path) -> list[str]:
    """A finished chain: every answered stage frozen, every integrity check passing, signed."""
    from claimcheck.engine.headless import integrity
    from claimcheck.engine.headless.answers import load_answers
    from claimcheck.engine.ledger.session import Session

    if not session_dir.is_dir():
        return [f"{session_dir.name}: no session folder after its chain"]
    session = Session.open(session_dir)
    states = session.states()
    out = [
        f"{session_dir.name}: {n} is {states[n]}"
        for n in load_answers(answers).stages
        if states[n] != "frozen"
    ]
    out += [
        f"{session_dir.name}: {r.stage} {r.check} {r.outcome}: {r.detail}"
        for r in integrity.verify(session)
        if r.failing
    ]
    if not (session_dir / "signature.toml").is_file():
        out.append(f"{session_dir.name}: not signed")
    return out


def test_every_killed_run_and_sign_continues_with_the_same_command(tmp_path: Path) -> None:
    from claimcheck.engine.ledger import signing

    answers = write_workspace(tmp_path)
    signing.new_key(tmp_path / "key.pem")
    env = _checkout_env()
    t0 = time.monotonic()
    per_lane = -(-KILLS // LANES)
    lanes = run_drivers(
        "tests.test_kill_chain",
        [[str(tmp_path), str(lane), str(per_lane), "28"] for lane in range(LANES)],
        env,
    )
    chains = [c for lane in lanes for c in lane["chains"]]
    kill_s = time.monotonic() - t0
    findings = [f for c in chains for part in ("run", "sign") for f in c[part]["findings"]]
    for c in chains:
        findings += verify_chain_end(tmp_path / c["dir"], answers)
    kills = {part: sum(c[part]["kills"] for c in chains) for part in ("run", "sign")}
    sigterm = sum(c[part]["sigterm"] for c in chains for part in ("run", "sign"))
    took_over = sum(c[part]["took_over"] for c in chains for part in ("run", "sign"))
    print(
        f"\nkill chains: {sum(kills.values())} kills ({kills['run']} of run --answers, {kills['sign']} of "
        f"sign; {sigterm} SIGTERM, the rest SIGKILL) in {len(chains)} chains, each ended by the same "
        f"command completing; {took_over} reruns took a dead holder's lock over; kills {kill_s:.0f}s, "
        f"checks {time.monotonic() - t0 - kill_s:.0f}s; {len(findings)} findings"
    )
    for line in findings[:10]:
        print(f"  {line}")
    assert not findings, findings[:5]
    assert sum(kills.values()) >= KILLS
    assert kills["sign"] > 0 and sigterm > 0 and took_over > 0


if __name__ == "__main__":  # the driver: python -m tests.test_kill_chain DIR LANE KILLS SEED
    print(json.dumps(drive(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:5]))))


# ---------------------------------------------------------------- the lock and the signals, one by one


def _cli(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "claimcheck.tui.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_checkout_env(),
        cwd=cwd,
    )


def _holding_lock(session_dir: Path) -> subprocess.Popen:
    code = (
        "import sys,time; from claimcheck.engine.ledger.session import Session; s=Session.open(sys.argv[1]); "
        "s.lock.acquire(); print('locked', flush=True); time.sleep(120)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(session_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_reused_pid_is_a_dead_holder_and_a_live_one_is_not(tmp_path: Path) -> None:
    from claimcheck.engine.ledger.lock import process_start
    from claimcheck.engine.ledger.session import Session

    session = Session.create(tmp_path / "s", workspace=tmp_path)
    proc = _holding_lock(session.path)
    try:
        holder = session.lock.holder()
        assert holder["started"] == process_start(proc.pid)
        assert not session.lock.holder_is_dead(holder)
        # The same pid with another start time: the pid was reused by a later process.
        assert session.lock.holder_is_dead({**holder, "started": holder["started"] + "0"})
        # Another host is never judged dead.
        assert not session.lock.holder_is_dead({**holder, "host": "elsewhere", "pid": 1 << 30})
    finally:
        proc.kill()
        proc.wait()
    assert session.lock.holder_is_dead(holder)


def test_run_and_sign_take_a_dead_holders_lock_over_and_refuse_a_live_one(tmp_path: Path) -> None:
    from claimcheck.engine.ledger import signing
    from claimcheck.tui.cli import main

    answers = write_workspace(tmp_path)
    signing.new_key(tmp_path / "key.pem")
    session_dir = tmp_path / "s"
    assert main(["run", "--answers", str(answers), str(session_dir)]) == 0
    proc = _holding_lock(session_dir)
    try:
        for argv in (["run", "--answers", "answers.toml", "s"], ["sign", "s", "--key", "key.pem"]):
            live = _cli(*argv, cwd=tmp_path)
            out, err = live.communicate(timeout=300)
            assert live.returncode == 2 and f"pid {proc.pid}" in err + out and "took over" not in err
    finally:
        proc.kill()
        proc.wait()
    for argv in (["run", "--answers", "answers.toml", "s"], ["sign", "s", "--key", "key.pem"]):
        (session_dir / ".lock").write_text(
            json.dumps({"pid": proc.pid, "host": socket.gethostname(), "since": "then"})
        )
        rerun = _cli(*argv, cwd=tmp_path)
        out, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err
        (line,) = [ln for ln in err.splitlines() if "took over" in ln]
        assert (
            line
            == f"took over the lock of session s, left by pid {proc.pid} on {socket.gethostname()} since then: that process is gone"
        )
        assert not (session_dir / ".lock").exists()


@pytest.mark.parametrize(
    ("sig", "code", "said"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_ctrl_c_and_sigterm_end_with_one_line_and_the_same_command_continues(
    tmp_path: Path, sig: int, code: int, said: str
) -> None:
    write_workspace(tmp_path)
    proc = _cli("run", "--answers", "answers.toml", "s", cwd=tmp_path)
    lines = []
    for line in proc.stderr:  # wait until the run is inside a stage, then interrupt it
        lines.append(line)
        if line.startswith("source: running"):
            break
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, err
    assert err.strip().splitlines()[-1] == f"{said}; run the same command to continue"
    assert "Traceback" not in err and not (tmp_path / "s" / ".lock").exists()
    again = _cli("run", "--answers", "answers.toml", "s", cwd=tmp_path)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert "claim: kept" in err and "took over" not in err


def _fresh_python(code: str, timeout: int) -> subprocess.CompletedProcess[str]:
    """`python -c code` in a fresh process importing this checkout (tests/stop_signals.py's checks)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_checkout_env(),
        cwd=ROOT,
        timeout=timeout,
    )


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("how", ["wrapped", "reported", "swallowed"])
def test_a_stop_signal_that_comes_back_as_another_error_still_ends_with_its_line(sig: int, how: str) -> None:
    done = _fresh_python(f"from tests.stop_signals import check_stop; check_stop({int(sig)}, {how!r})", 300)
    assert done.returncode == 0, done.stderr[-3000:]
    said = "terminated" if sig == signal.SIGTERM else "interrupted"
    assert done.stderr.splitlines()[-1] == f"{said}; run the same command to continue", done.stderr
    assert done.stdout.strip() == f"said {said}" and "Traceback" not in done.stderr
    assert "Exception ignored" not in done.stderr


def test_nothing_measured_after_a_stop_signal_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stop signal whose exception a library swallowed (Polars printed "Exception ignored in:
    'DataTypeClass'" for one, then went on) must not let the run commit what it measured after it."""
    from claimcheck.engine import stops
    from claimcheck.engine.headless.replay import replay
    from claimcheck.engine.ledger.session import Session
    from claimcheck.engine.pipeline import core
    from claimcheck.tui.cli import main

    answers = write_workspace(tmp_path)
    session_dir = tmp_path / "s"
    compute = core.compute

    def swallowed(stage: str, *args: object) -> object:
        if stage == "split":  # the handler ran here and its exception went no further
            stops.received(signal.SIGTERM)
        return compute(stage, *args)

    monkeypatch.setattr(core, "compute", swallowed)
    assert main(["run", "--answers", str(answers), str(session_dir)]) == 143
    assert capsys.readouterr().err.splitlines()[-1] == "terminated; run the same command to continue"
    assert Session.open(session_dir).states() == {
        **dict.fromkeys(["claim", "source"], "frozen"),
        **dict.fromkeys(["split", "baseline", "contract", "dispatch", "artifact"], "not_run"),
    }
    assert stops.last() is None  # forgotten when the command ended: this process commits again
    monkeypatch.setattr(core, "compute", compute)
    assert main(["run", "--answers", str(answers), str(session_dir)]) == 0
    assert replay(session_dir).exit_code == 0


def test_ctrl_c_inside_a_polars_query_ends_with_one_line() -> None:
    done = _fresh_python(
        "from tests.stop_signals import check_ctrl_c_in_a_query; check_ctrl_c_in_a_query()", 400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == "interrupted; run the same command to continue", done.stderr
    assert "Traceback" not in done.stderr and done.stdout.strip() == "said interrupted"
