"""The source + split stages on bench/memory.py's data, each step's peak RSS and elapsed time printed
as it ends (a psutil sampler, 50 ms); the process stops itself past an RSS cap.

    .venv/bin/python bench/memory_steps.py WORK_DIR MEMORY_BUDGET CAP_MB   # e.g. /tmp/w10m 64M 6000
"""

# ruff: noqa: E401, E402, E702, E501, I001
import os, sys, threading, time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import psutil
import audit
import claimcheck.tui.cli  # noqa: F401  (the app's allocator setting)
from claimcheck.engine.pipeline.context import StageContext
from claimcheck.engine.stages.source import run as source
from claimcheck.engine.stages.split import run as split

work = Path(sys.argv[1])
budget = sys.argv[2]
cap = float(sys.argv[3])
proc = psutil.Process()
t0 = time.perf_counter()
state = {"step": "start", "peak": 0.0, "step_peak": 0.0}


def sample():
    while True:
        r = proc.memory_info().rss / 2**20
        state["peak"] = max(state["peak"], r)
        state["step_peak"] = max(state["step_peak"], r)
        if r > cap:
            print(f"KILLED: RSS {r:.0f} MB over the cap {cap:.0f} MB in {state['step']}", flush=True)
            os._exit(3)
        time.sleep(0.05)


threading.Thread(target=sample, daemon=True).start()


def prog(stage):
    def f(x, label):
        print(
            f"{time.perf_counter() - t0:8.1f} s  {state['step']:40s} step peak {state['step_peak']:7.0f} MB  (peak so far {state['peak']:.0f})  load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        state["step"] = f"{stage}: {label}"
        state["step_peak"] = 0.0

    return f


ctx = StageContext(session_dir=work / "sess-10m", workspace=work, progress=prog("source"))
t = time.perf_counter()
rec = source.run(source.Inputs(**audit.INPUTS, memory_budget=budget), {}, ctx)
ts = time.perf_counter() - t
print(f"SOURCE {ts:.1f} s peak {state['peak']:.0f} MB", flush=True)
ctx = StageContext(session_dir=work / "sess-10m", workspace=work, progress=prog("split"))
t = time.perf_counter()
sp = split.run(split.Inputs(strategy="random", rationale="bench"), {"source": rec}, ctx)
print(
    f"SPLIT {time.perf_counter() - t:.1f} s; source + split {ts + time.perf_counter() - t:.1f} s; peak {state['peak']:.0f} MB",
    flush=True,
)
for c in rec.checks:
    if c.id in (
        "source.schema",
        "source.duplicate_inputs",
        "source.near_duplicates",
        "source.entity_families",
    ):
        print(c.id, c.summary[:160], "|", c.coverage, flush=True)
print("split.membership", sp.check("split.membership").summary[:160], flush=True)
