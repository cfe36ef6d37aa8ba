#!/usr/bin/env bash
# One benchmark round for issue 31: every figure of its "done when" measured in one run, with the load.
#   bench/round31.sh OUT_DIR W1M W10M WLIMIT
# W1M / W10M: folders holding tickets.csv of `bench/memory.py --phase gen` (1M and 10M rows; a hard link
# or a copy, not a symlink); WLIMIT: bench/limit.py's work folder (its convs.csv is generated on first use).
# About 18 minutes on an idle 2-core box with 23 GiB (the 10M in-memory run holds ~8.5 GB); nothing else
# should run.
set -u
cd "$(dirname "$0")/.."
OUT=${1:?an output folder}; W1M=${2:?}; W10M=${3:?}; WLIM=${4:?}
mkdir -p "$OUT"
PY=.venv/bin/python
stamp() { echo "== $1 $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"; }
{
stamp start; nproc; free -m | head -2; git log --oneline -1
stamp "1M: source + split, in memory and bounded"
$PY bench/memory.py --rows 1000000 --work "$W1M" 2>&1 | grep -v '^{'
stamp "1M: per step, bounded"
$PY bench/memory_steps.py "$W1M" 64M 3000 2>&1
stamp "1M: per step, in memory"
$PY bench/memory_steps.py "$W1M" 1000G 6000 2>&1
stamp "10M: source + split, in memory and bounded"
$PY bench/memory.py --rows 10000000 --work "$W10M" --rss-cap-mb 18000 2>&1 | grep -v '^{'
stamp "1M again, bounded (the 10M ratio against a 1M run on each side of it)"
$PY bench/memory.py --rows 1000000 --work "$W1M" --paths bounded 2>&1 | grep -v '^{'
stamp "Ray: local, bounded, 1 worker with the texts in the frame, 1, 2 and 4 workers with them on disk"
$PY bench/ray_audit.py --data "$W1M/tickets.csv" --paths local,bounded,ray1-frame,ray1-disk,ray1-shared,ray2-disk,ray2-shared,ray4-disk,ray4-shared > "$OUT/ray.json" 2> "$OUT/ray.err"; echo "exit $?"; tail -5 "$OUT/ray.err"
stamp "a source 3x a cgroup limit"
$PY bench/limit.py --work "$WLIM" --limit-mb 512 --runs unlimited,limited,limited-inmemory 2>&1 | grep -v '^{"step'
stamp end
} 2>&1 | tee "$OUT/round31.txt"
