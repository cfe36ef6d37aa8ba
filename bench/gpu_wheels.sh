#!/usr/bin/env bash
# Download exactly the wheels the GPU run ships (bench/gpu_wheels.txt) for CPython 3.12 manylinux
# x86-64 into bench/.gpu_wheels/ (git-ignored), print their total size, fail above 56 MiB (one run
# ships at most 64 MiB with the working tree). Needs PyPI; the GPU machine never downloads.
#
#   bench/gpu_wheels.sh [DEST]        DEST default bench/.gpu_wheels
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
DEST="${1:-bench/.gpu_wheels}"
REQ=$(mktemp)
trap 'rm -f "$REQ"' EXIT
"$PY" bench/gpu_deps.py requirements shipped > "$REQ"
rm -rf "$DEST"
mkdir -p "$DEST"
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$DEST" -r "$REQ"
echo "== the shipped wheels in $DEST"
"$PY" bench/gpu_deps.py wheels "$DEST"
