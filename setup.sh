#!/usr/bin/env bash
# Creates .venv in the project folder and installs tisa into it (idempotent).
# PyTorch is pinned first to the CPU build; a looser requirement would pull a CUDA build.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[dev,context]"
echo "tisa installed in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
