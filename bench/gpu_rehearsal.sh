#!/usr/bin/env bash
# The GPU run rehearsed on this machine, no GPU needed: a Python 3.12 virtual environment with the
# GPU machine's versions of what it has installed (bench/gpu_machine.txt: torch 2.11 — PyPI's cp312
# build, which runs on CPU — transformers 5.17, peft, accelerate, safetensors), none of the packages
# that machine lacks (what those pulled in of bench/gpu_wheels.txt is uninstalled, and Polars is never
# there), plus ONLY the shipped wheels (bench/gpu_wheels.sh), installed as on the GPU machine with
# `pip install --no-index --no-deps --target`; then `bench/gpu.sh --dry-run` to the end.
#
#   bench/gpu_rehearsal.sh [VENV]     VENV default ${TMPDIR:-/tmp}/cc-gpu-rehearsal/venv (reused when there)
#
#   PYTHON312  a Python 3.12 interpreter to make the venv with (default: python3.12 on PATH, else pyenv's 3.12)
# Needs PyPI (torch 2.11 with its CUDA libraries is about 3 GB the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-${TMPDIR:-/tmp}/cc-gpu-rehearsal/venv}"
WORK="$(dirname "$VENV")/rehearsal"
PY312="${PYTHON312:-python3.12}"
if [ -z "${PYTHON312:-}" ] && ! python3.12 -c '' 2>/dev/null && command -v pyenv >/dev/null; then
  PY312="$(ls -d "$(pyenv root)"/versions/3.12*/bin/python 2>/dev/null | tail -1)"  # a pyenv without 3.12 on PATH
fi
START=$(date +%s)
mkdir -p "$WORK"

echo "== rehearsal 1/4: the GPU machine's packages in $VENV"
[ -x "$VENV/bin/python" ] || "$PY312" -m venv "$VENV"
VPY="$VENV/bin/python"
"$VPY" -c 'import sys; assert sys.version_info[:2] == (3, 12), f"Python {sys.version}: the GPU machine runs 3.12"'
"$VPY" bench/gpu_deps.py requirements machine > "$WORK/machine.txt"
"$VPY" -m pip install -q -r "$WORK/machine.txt"
# the GPU machine has none of the shipped packages, nor Polars: remove what the installs above pulled in
SHIPPED=$("$VPY" bench/gpu_deps.py requirements shipped | sed 's/==.*//')
"$VPY" -m pip uninstall -y -q $SHIPPED polars polars-runtime-32 2>/dev/null || true

echo "== rehearsal 2/4: the shipped wheels"
PYTHON="$VPY" bench/gpu_wheels.sh "$WORK/wheels"

echo "== rehearsal 3/4: installed as on the GPU machine"
rm -rf "$WORK/site"
"$VPY" -m pip install -q --no-index --no-deps --target "$WORK/site" "$WORK/wheels"/*.whl
"$VPY" -m pip list 2>/dev/null | sed 's/^/  venv: /'
ls "$WORK/site" | sed 's/^/  shipped: /'

echo "== rehearsal 4/4: bench/gpu.sh --dry-run"
rm -rf "$WORK/results"
PYTHON="$VPY" GPU_SITE="$WORK/site" RESULTS="$WORK/results" bench/gpu.sh --dry-run
echo "== rehearsal passed in $(( $(date +%s) - START )) s; JSON lines in $WORK/results"
