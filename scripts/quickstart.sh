#!/usr/bin/env bash
# Set up and run the default suite (suites/smoke.yaml) against the auto-chosen profile.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/harness run "$@"
