#!/usr/bin/env bash
# Installs what the tests need and runs the whole suite (the README's test command).
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[dev]'
export RAY_USAGE_STATS_ENABLED=0
python -m pytest -q -p no:cacheprovider "$@"
