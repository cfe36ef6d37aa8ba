#!/usr/bin/env bash
# One benchmark round for issue 16: every ratio measured in one run on this machine, with its load.
#   bench/round.sh OUT_DIR        (about 40 minutes on an idle 2-core box; nothing else should run)
# Needs `pip install -e '.[bench]'` (rensa) and the generated data, which the races make on first use:
#   /tmp/nd1m (1,000,000-row tickets.csv), /tmp/nd2long20k (20,000 long documents). The default demo
#   runs headless from bench/demo-answers.toml (the default recipe's stage tables, the app's Enter).
set -u
cd "$(dirname "$0")/.."
OUT=${1:?an output folder}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
PY=.venv/bin/python
echo "== start $(date -u +%H:%M:%S) $(uptime)"; nproc; git log --oneline -1
echo "== nd tickets 1M, rensa numpy shingling (prescribed)"
$PY bench/neardup_race.py --corpus tickets --rows 1000000 --rounds 2 --work /tmp/nd1m 2>&1
echo "== nd tickets 1M, rensa with our compiled shingling"
$PY bench/neardup_race.py --corpus tickets --rows 1000000 --rounds 1 --work /tmp/nd1m --rensa-shingles compiled 2>&1
echo "== nd long 20k, rensa numpy"
$PY bench/neardup_race.py --corpus long --docs 20000 --rounds 3 --work /tmp/nd2long20k 2>&1
echo "== nd long 20k, rensa compiled"
$PY bench/neardup_race.py --corpus long --docs 20000 --rounds 2 --work /tmp/nd2long20k --rensa-shingles compiled 2>&1
echo "== 1M row pairs $(date -u +%H:%M:%S)"
$PY -c "
import claimcheck.tui.cli, time, polars as pl
from claimcheck.engine.audit import neardup
df = pl.read_csv('/tmp/nd1m/tickets.csv', columns=['body']).with_row_index('row_id')
t = time.perf_counter(); r = neardup.near_duplicates(df, ['body'])
print('row pairs', r.pairs.height, 'text pairs', r.verified_text_pairs, 'candidates', r.candidates,
      'seconds', round(time.perf_counter() - t, 2))"
echo "== source + split stages at 1M (memory) $(date -u +%H:%M:%S) $(uptime)"
$PY bench/audit.py --phase ours --work /tmp/nd1m 2>&1 | tail -3
# Training: hand and job alternate in fresh processes (hand, job, job, hand, ...), each round's ratio kept
echo "== training hand vs job, 2 threads, 3 interleaved rounds $(date -u +%H:%M:%S) $(uptime)"
$PY bench/training.py --rounds 3 --phase job --mode lora --mode qlora --steps 20 --train-rows 400 --dev-rows 32 2>&1 | grep '^{'
echo "== training hand vs jobcpu, 1 thread CPU-s, 2 interleaved rounds $(date -u +%H:%M:%S) $(uptime)"
$PY bench/training.py --rounds 2 --phase jobcpu --mode lora --mode qlora --threads 1 --steps 20 --train-rows 400 2>&1 | grep '^{'
echo "== training hand and job step by step in one process (paired), 2 threads then 1 $(date -u +%H:%M:%S) $(uptime)"
$PY bench/training.py --phase paired --mode lora --mode qlora --steps 20 --train-rows 400 2>&1 | grep '^{'
$PY bench/training.py --phase paired --mode lora --mode qlora --steps 20 --train-rows 400 --threads 1 2>&1 | grep '^{'
echo "== fitting check $(date -u +%H:%M:%S) $(uptime)"
$PY bench/training.py --phase fit --mode lora 2>&1 | grep '^{'
echo "== demo $(date -u +%H:%M:%S) $(uptime)"
rm -rf "$OUT/demo"
/usr/bin/time -v .venv/bin/claimcheck run --answers bench/demo-answers.toml "$OUT/demo" --json > "$OUT/demo.json" 2> "$OUT/demo.err"
echo "rc $?"; grep -E "Elapsed|Maximum resident" "$OUT/demo.err"
echo "== end $(date -u +%H:%M:%S) $(uptime)"
