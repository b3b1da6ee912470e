#!/usr/bin/env bash
# Installs what the tests need and runs the whole suite: the README's test command, run by CI.
# Ray tests start one local Ray inside the test session (tests/conftest.py) and shut it down;
# the trap below also stops any Ray left behind by an interrupted run.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -e '.[dev,ray]'
export RAY_USAGE_STATS_ENABLED=0
export RAY_AUTH_MODE=disabled
cleanup() { command -v ray >/dev/null 2>&1 && ray stop --force >/dev/null 2>&1 || true; }
trap cleanup EXIT
python -m pytest -q -p no:cacheprovider "$@"
