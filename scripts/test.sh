#!/usr/bin/env bash
# Set up a virtual environment from the project's own files, check the house rules (ruff, the
# import layers) and run the test suite.
# GPU tests (marker "gpu") skip themselves where CuPy finds no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
# a distributed release that lists only 5 workers in scheduler_info(), beside the venv, for
# tests/cluster/test_workers.py (which skips without it)
if [ ! -d .venv/affected-distributed ]; then
  .venv/bin/python -m pip install -q --no-deps --target .venv/affected-distributed \
    -r tests/cluster/affected-distributed.txt || echo "test.sh: affected distributed not installed"
fi
# the house rules: lint, formatting, and the import layers of pyproject.toml's contracts
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/lint-imports --no-cache
.venv/bin/python benchmarks/report.py --check   # benchmarks/README.md is its results' document
exec .venv/bin/python -m pytest "$@"
