#!/usr/bin/env bash
# Set up a virtual environment and label a synthetic 256^3 volume zarr to zarr on a local CPU
# cluster, printing the one-line summary.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e .
.venv/bin/tilelabel synth sample.zarr --shape 256,256,256 --density 0.2 --granularity 1 \
    --chunks 64,64,64 --seed 1 --overwrite
.venv/bin/tilelabel label sample.zarr labels.zarr --backend "${BACKEND:-cpu}" --overwrite
