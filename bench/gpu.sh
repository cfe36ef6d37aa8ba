#!/usr/bin/env bash
# The CUDA path measured in under 8 minutes: bench/gpu_run.py (peak bf16 matmul, the default
# text-classification QLoRA contract, a causal-LM SFT QLoRA contract on a random ~1.1B Llama).
#
#   bench/gpu.sh             on a CUDA machine
#   bench/gpu.sh --dry-run   every step on CPU at tiny size (no GPU needed)
#
# Nothing is installed or downloaded here. The GPU machine has torch, transformers, peft, accelerate
# and safetensors (bench/gpu_machine.txt); the rest arrives as wheels (bench/gpu_wheels.txt, fetched
# by bench/gpu_wheels.sh) installed with `pip install --no-index --no-deps --target "$GPU_SITE"`
# (bench/README.md, "The CUDA path"). $GPU_SITE (default bench/.gpu_site) goes on PYTHONPATH when it
# exists, after claimcheck's code laid out as the wheel installs it (tests/package_layout.py): the
# checkout itself is not an import root.
#
#   PYTHON    the interpreter (default .venv/bin/python, else python3)
#   GPU_SITE  the folder the shipped wheels are installed in (default bench/.gpu_site)
#   RESULTS   where the JSON lines go: $RESULTS/gpu.jsonl (default results/)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
DRY=""
[ "${1:-}" = "--dry-run" ] && DRY="--dry-run"
START=$(date +%s)
RESULTS="${RESULTS:-results}"
mkdir -p "$RESULTS"
OUT="$RESULTS/gpu${DRY:+-dry-run}.jsonl"
: > "$OUT"

CODE=$(mktemp -d "${TMPDIR:-/tmp}/cc-gpu-code.XXXXXX")
trap 'rm -rf "$CODE"' EXIT
"$PY" -c 'import sys; sys.path.insert(0, "."); from tests.package_layout import stage_package; stage_package(__import__("pathlib").Path(sys.argv[1]))' "$CODE"
SITE="${GPU_SITE:-bench/.gpu_site}"
if [ -d "$SITE" ]; then
  export GPU_SITE="$(cd "$SITE" && pwd)"
  export PYTHONPATH="$CODE:$GPU_SITE"
else
  unset GPU_SITE
  export PYTHONPATH="$CODE"
fi

echo "== 1/3 dependencies ($PY; shipped wheels: ${GPU_SITE:-none, using what is installed})"
"$PY" bench/gpu_deps.py check
"$PY" - <<'PY'
import torch
print(f"  cuda available: {torch.cuda.is_available()}"
      + (f" ({torch.cuda.get_device_name(0)}, bf16 {torch.cuda.is_bf16_supported()})" if torch.cuda.is_available() else ""))
PY

echo "== 2/3 resolve: what the contract becomes on this machine"
"$PY" - <<'PY'
import claimcheck
from claimcheck.engine.training.hardware import probe
from claimcheck.engine.training.resolve import AUTO_ADAPTER
print(f"  claimcheck from {claimcheck.__path__[0]}")
caps = probe()
dev = "cuda" if caps.cuda else "cpu"
print(f"  device {dev}; adapter_mode auto -> {AUTO_ADAPTER[dev][0]}; precision auto -> "
      f"{'bf16' if caps.cuda and caps.bf16 else 'fp32'}; NF4 round trip: {caps.nf4(dev)}")
PY

echo "== 3/3 runs (peak bf16, text-classification QLoRA, causal-LM SFT QLoRA) -> $OUT"
# the whole script must end within 8 minutes on the GPU; the CPU dry run is as slow as the CPU is
LIMIT=440
[ -n "$DRY" ] && LIMIT=1800
timeout -s KILL "$LIMIT" "$PY" bench/gpu_run.py $DRY --out "$OUT"
echo "== total $(( $(date +%s) - START )) s"
