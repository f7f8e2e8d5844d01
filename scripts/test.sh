#!/usr/bin/env bash
# Set up everything the tests need and run them: lint, types, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
.venv/bin/ruff check harness tests benchmarks
.venv/bin/mypy
exec .venv/bin/python -m pytest -q "$@"
