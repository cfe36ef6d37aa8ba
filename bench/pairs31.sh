#!/usr/bin/env bash
# Issue 31's 10M ratio against a 1M run on each side: the bounded path only, 1M, 10M, 1M, ... (PAIRS 10M
# runs, PAIRS + 1 1M runs), each run's line kept, then every ratio (before / after / over all runs).
#   bench/pairs31.sh OUT_DIR W1M W10M [PAIRS]          # W1M / W10M as for bench/round31.sh; PAIRS: 3
# About 5 minutes a pair on an idle 2-core box; nothing else should run (this box's speed moves ±10 %
# between runs of the same code: bench/README.md, bounded memory round 10).
set -u
cd "$(dirname "$0")/.."
OUT=${1:?an output folder}; W1M=${2:?}; W10M=${3:?}; PAIRS=${4:-3}
mkdir -p "$OUT"
PY=.venv/bin/python
stamp() { echo "== $1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
one() { $PY bench/memory.py --rows 1000000 --work "$W1M" --paths bounded 2>&1 | grep -E '^\[1,000,000 bounded|^bounded'; }
ten() { $PY bench/memory.py --rows 10000000 --work "$W10M" --paths bounded --rss-cap-mb 18000 2>&1 | grep -E '^\[10,000,000 bounded|^bounded'; }
{
stamp start; git log --oneline -1
for i in $(seq 1 "$PAIRS"); do
  stamp "1M bounded ($i)"; one
  stamp "10M bounded ($i)"; ten
done
stamp "1M bounded ($((PAIRS + 1)))"; one
stamp end
} 2>&1 | tee "$OUT/pairs31.txt"
$PY - "$OUT/pairs31.txt" <<'PY'
import json, re, sys
runs = []
for line in open(sys.argv[1]):
    m = re.match(r"^\[(1,000,000|10,000,000) bounded\] (.*)", line)
    if m:
        d = json.loads(m.group(2))
        runs.append((m.group(1) == "10,000,000", d["source_s"] + d["split_s"], d["source_cpu_s"] + d["split_cpu_s"]))
ones, tens = [r for r in runs if not r[0]], [r for r in runs if r[0]]
for i, t in enumerate(tens):
    if i + 1 < len(ones):
        b, a = ones[i], ones[i + 1]
        print(f"pair {i + 1}: 10M {t[1]:.1f} s; 1M {b[1]:.2f} s before, {a[1]:.2f} s after: "
              f"{t[1] / b[1]:.2f}x / {t[1] / a[1]:.2f}x; CPU {t[2] / ((b[2] + a[2]) / 2):.2f}x the two 1M runs' mean")
if ones and tens:
    mean = lambda xs: sum(xs) / len(xs)
    w = mean([t[1] for t in tens]) / mean([o[1] for o in ones])
    c = mean([t[2] for t in tens]) / mean([o[2] for o in ones])
    print(f"over every run: 10M {mean([t[1] for t in tens]):.1f} s, 1M {mean([o[1] for o in ones]):.2f} s: "
          f"{w:.2f}x wall, {c:.2f}x CPU (goal <= 11x)")
PY
