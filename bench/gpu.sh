#!/usr/bin/env bash
# The CUDA path measured in under 8 minutes: bench/gpu_run.py (peak bf16 matmul, the default
# text-classification QLoRA contract, a causal-LM SFT QLoRA contract on a random ~1.1B Llama).
#
#   bench/gpu.sh             on a CUDA machine
#   bench/gpu.sh --dry-run   every step on CPU at tiny size (no GPU needed)
#
# Installs what the CUDA path needs only when PyPI is reachable (pip with the project's
# constraints.txt); otherwise it says so and uses what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
DRY=""
[ "${1:-}" = "--dry-run" ] && DRY="--dry-run"
START=$(date +%s)

echo "== 1/3 dependencies"
NEED="torch transformers peft bitsandbytes accelerate safetensors polars pydantic tomlkit"
if "$PY" - <<'PY' 2>/dev/null; then
import urllib.request
urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=5)
PY
  echo "PyPI is reachable: pip install (constrained by constraints.txt)"
  if [ -n "$DRY" ]; then
    echo "(dry run: would run) $PY -m pip install -c constraints.txt $NEED"
  else
    "$PY" -m pip install -q -c constraints.txt $NEED
  fi
else
  echo "PyPI is NOT reachable from this machine: nothing installed; using what is installed"
fi
"$PY" - <<'PY'
import importlib
missing = []
for m in ("torch", "transformers", "peft", "bitsandbytes", "polars", "pydantic", "tomlkit"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m} {getattr(mod, '__version__', '?')}")
    except Exception as exc:  # noqa: BLE001
        missing.append(f"{m}: {exc}")
if missing:
    raise SystemExit("cannot run the CUDA path, missing: " + "; ".join(missing))
import torch
print(f"  cuda available: {torch.cuda.is_available()}"
      + (f" ({torch.cuda.get_device_name(0)}, bf16 {torch.cuda.is_bf16_supported()})" if torch.cuda.is_available() else ""))
PY

echo "== 2/3 resolve: what the contract becomes on this machine"
PYTHONPATH="$PWD" "$PY" - <<'PY'
from claimcheck.engine.training.hardware import probe
from claimcheck.engine.training.resolve import AUTO_ADAPTER
caps = probe()
dev = "cuda" if caps.cuda else "cpu"
print(f"  device {dev}; adapter_mode auto -> {AUTO_ADAPTER[dev][0]}; precision auto -> "
      f"{'bf16' if caps.cuda and caps.bf16 else 'fp32'}; NF4 round trip: {caps.nf4(dev)}")
PY

echo "== 3/3 runs (peak bf16, text-classification QLoRA, causal-LM SFT QLoRA)"
# the whole script must end within 8 minutes on the GPU; the CPU dry run is as slow as the CPU is
LIMIT=440
[ -n "$DRY" ] && LIMIT=1800
PYTHONPATH="$PWD" timeout -s KILL "$LIMIT" "$PY" bench/gpu_run.py $DRY
echo "== total $(( $(date +%s) - START )) s"
