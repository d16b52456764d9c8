#!/usr/bin/env bash
# Set up a virtual environment from the project's own files and run the test suite.
# GPU tests (marker "gpu") skip themselves where CuPy finds no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
exec .venv/bin/python -m pytest "$@"
