"""Bad-input campaign: every case of tests/test_bad_inputs.py against a code tree, each in a subprocess.

    python bench/bad_inputs.py [CODE_DIR] [TIMEOUT_S] [OUT.json]

CODE_DIR (default: this checkout) is laid out as a wheel would install it (tests/package_layout.py) in a
temporary folder put first on PYTHONPATH for `python -m claimcheck.tui.cli`, so another tree (a `git archive`
of an earlier commit with the `claimcheck` package-dir mapping) can be compared. Each outcome: clear_error (exit 2, one line naming
the file and field, nothing written), silent_accept (exit 0/1), traceback, hang (past TIMEOUT_S),
unclear_or_late_error (exit 2 after writing, or a message without the field), error_on_stdout.

The "stage" cases (tests/test_stage_refusals.py: a single class, non-finite numbers) are data that
passes every up-front check and is caught by a stage: clear_error there means exit 2, no traceback,
the failing check recorded, and exactly one line saying the next stage was not run because of it.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
code = sys.argv[1] if len(sys.argv) > 1 else str(ROOT)
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 20
sys.path.insert(0, str(ROOT))
import tests.test_bad_inputs as T  # noqa: E402
import tests.test_stage_refusals as S  # noqa: E402
from tests.package_layout import stage_package  # noqa: E402

PY = sys.executable
staged = stage_package(Path(tempfile.mkdtemp(prefix="bad-inputs-code-")), Path(code).resolve())
env = dict(os.environ, PYTHONPATH=str(staged))


def snapshot(root):
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run(argv, cwd):
    t = time.time()
    try:
        p = subprocess.run(
            [PY, "-m", "claimcheck.tui.cli", *argv],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None, "", "", time.time() - t
    return p.returncode, p.stdout, p.stderr, time.time() - t


def classify(rc, out, err, created, expect):
    if rc is None:
        return "hang"
    if "Traceback" in err or "Traceback" in out:
        return "traceback"
    if rc in (0, 1):
        return "silent_accept"
    lines = [line for line in err.splitlines() if line.strip()]
    if rc == 2 and len(lines) == 1 and not created and all(e in lines[0] for e in expect):
        return "clear_error"
    return "unclear_or_late_error"


results = []
root = Path(tempfile.mkdtemp(prefix="badin_campaign_"))
cases = (
    [("table", c) for c in T.CASES]
    + [("session", c) for c in T.SESSION_CASES]
    + [("replay", c) for c in T.REPLAY_CASES]
    + [("stage", c) for c in S.BENCH_CASES]
)
for i, (kind, case) in enumerate(cases):
    d = root / f"c{i}"
    ws = d / "top" / "ws"
    ws.mkdir(parents=True)
    (ws / "data.csv").write_text(T._csv(), encoding="utf-8")
    if kind == "table":
        content = case.setup(ws)
        answers = ws / case.answers_name
        (answers.write_bytes if isinstance(content, bytes) else answers.write_text)(content)
        before = snapshot(ws.parent)
        sess = ws.parent / "session"
        rc, out, err, dt = run(["run", "--answers", str(answers), str(sess)], d)
        created = sess.exists() or snapshot(ws.parent) != before
        name, expect = case.name, (case.answers_name, *case.expect)
    elif kind == "session":
        name, make, exp = case
        target = make(ws.parent) if name != "an existing session" else None
        if target is None:  # needs a real session made by this code tree
            a = T._good_answers(ws)
            run(["run", "--answers", str(a), str(ws.parent / "sess")], d)
            target = ws.parent / "sess"
        answers = T._good_answers(ws)
        before = snapshot(ws.parent)
        rc, out, err, dt = run(["run", "--answers", str(answers), str(target)], d)
        created = snapshot(ws.parent) != before
        expect = ("sess", exp)
    elif kind == "stage":
        name, make, check_id = case
        (ws / "answers.toml").write_text(make(ws), encoding="utf-8")
        sess = ws.parent / "session"
        rc, out, err, dt = run(["run", "--answers", str(ws / "answers.toml"), str(sess)], d)
        said = [line for line in (out + err).splitlines() if "not run —" in line]
        recorded = any(
            c["id"] == check_id and c["status"] == "fail"
            for p in sess.glob("0*.toml")
            for c in tomllib.loads(p.read_text(encoding="utf-8")).get("checks", [])
        )
        ok = rc == 2 and "Traceback" not in out + err and len(said) == 1 and check_id in said[0] and recorded
        outcome = (
            "clear_error" if ok else ("traceback" if "Traceback" in out + err else "unclear_or_late_error")
        )
        msg = (said or [err.strip()[-300:]])[0][:300]
        results.append(
            {"kind": kind, "name": name, "outcome": outcome, "rc": rc, "s": round(dt, 1), "msg": msg}
        )
        print(results[-1], flush=True)
        shutil.rmtree(d, ignore_errors=True)
        continue
    else:
        name, make = case
        target = make(ws.parent)
        before = snapshot(ws.parent)
        rc, out, err, dt = run(["--replay", str(target)], d)
        created = snapshot(ws.parent) != before
        expect = ()
        if rc == 2 and out.strip() and not err.strip():
            results.append(
                {
                    "kind": kind,
                    "name": name,
                    "outcome": "error_on_stdout",
                    "rc": rc,
                    "s": round(dt, 1),
                    "msg": out.strip()[:300],
                }
            )
            print(results[-1], flush=True)
            continue
    outcome = classify(rc, out, err, created, expect)
    msg = (err.strip().splitlines() or [""])[-1][:300]
    results.append({"kind": kind, "name": name, "outcome": outcome, "rc": rc, "s": round(dt, 1), "msg": msg})
    print(results[-1], flush=True)
    shutil.rmtree(d, ignore_errors=True)

counts = {}
for r in results:
    counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
print(json.dumps({"tried": len(results), **counts}))
Path(sys.argv[3] if len(sys.argv) > 3 else "bad_inputs_campaign.json").write_text(
    json.dumps(results, indent=1)
)
