#!/usr/bin/env bash
# Installs what the tests need, runs the linters and the tests. The README's test commands:
#
#   bash scripts/test.sh          the linters, then the whole suite (Ray, Spark, the docs site):
#                                 what CI runs (the in-process tests two at a time, then the
#                                 ones with worker processes, Ray or Spark one at a time)
#   bash scripts/test.sh quick    the linters, then the core tests only (no Ray, Spark, worker
#                                 processes or slow tests), two at a time with pytest-xdist
#   bash scripts/test.sh lint     the linters only
#   bash scripts/test.sh -- ARGS  the whole install, then `pytest ARGS` (no linters)
#
# The linters (configured in pyproject.toml; in the dev extra): `ruff check` and
# `ruff format --check` over the package, the tests, the benchmarks and the examples, and `mypy`
# over the package. A finding fails the run before any test starts. The same checks run on each
# commit with pre-commit (.pre-commit-config.yaml).
#
# System packages: Graphviz renders `timelypy graph --format png`. This script installs it with
# apt-get only under CI (CI=true) or when asked (TIMELYPY_INSTALL_SYSTEM_PACKAGES=1), and says so;
# otherwise the PNG rendering test is skipped.
#
# The Ray tests start their own Ray clusters (token authentication on, a token made for the run)
# with their files under one directory of this run; they shut them down themselves. The trap
# below stops only processes of *those* clusters (found by that directory on their command
# lines) if an interrupted run left any: never `ray stop`, which stops every Ray on the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
LINTED=(timelypy tests benchmarks examples)
lint() {  # every linter runs; any finding fails
    echo "lint: ruff check, ruff format --check (${LINTED[*]}), mypy (timelypy)"
    local failed=0
    python -m ruff check --quiet "${LINTED[@]}" || failed=1
    python -m ruff format --check --quiet "${LINTED[@]}" || failed=1
    python -m mypy || failed=1  # files, strictness, overrides: [tool.mypy] in pyproject.toml
    if [ "$failed" = 1 ]; then
        echo "lint: the findings above fail the run (ruff format fixes the layout)" >&2
        return 1
    fi
}
if [ "${1:-}" = "lint" ]; then
    python -m pip install -q --disable-pip-version-check -e '.[dev]'
    lint
    exit 0
fi
if [ "${1:-}" = "quick" ]; then
    shift
    python -m pip install -q --disable-pip-version-check -e '.[dev]'
    lint
    # fewer generated programs than the full run's 200 (TIMELYPY_EXAMPLES overrides)
    export TIMELYPY_EXAMPLES="${TIMELYPY_EXAMPLES:-150}"
    exec python -m pytest -q -p no:cacheprovider -n 2 \
        -m "not ray and not spark and not processes and not slow" "$@"
fi
run_lint=1
if [ "${1:-}" = "--" ]; then
    shift
    run_lint=0
fi
python -m pip install -q --disable-pip-version-check -e '.[dev,ray,spark,docs]'
if [ "$run_lint" = 1 ]; then
    lint
fi
# The docs site builds without a warning (broken links, missing pages, bad docstring references).
site_dir="$(mktemp -d /tmp/tpy-site-XXXXXX)"
NO_MKDOCS_2_WARNING=1 python -m mkdocs build --strict --quiet --site-dir "$site_dir"
rm -rf "$site_dir"
# Graphviz renders `timelypy graph --format png`; the DOT and Mermaid text need nothing.
if ! command -v dot >/dev/null 2>&1; then
    if [ "${CI:-}" = "true" ] || [ "${TIMELYPY_INSTALL_SYSTEM_PACKAGES:-}" = "1" ]; then
        echo "installing the Debian package graphviz (apt-get) for the PNG rendering test"
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends graphviz) >/dev/null 2>&1 \
            || echo "graphviz could not be installed: the PNG rendering test will be skipped"
    else
        echo "graphviz (dot) is not installed: the PNG rendering test will be skipped" \
             "(TIMELYPY_INSTALL_SYSTEM_PACKAGES=1 lets this script apt-get install it)"
    fi
fi
export RAY_USAGE_STATS_ENABLED=0
TIMELYPY_RAY_TEST_DIR="$(mktemp -d /tmp/tpy-run-XXXXXX)"
export TIMELYPY_RAY_TEST_DIR
cleanup() {
    python - "$TIMELYPY_RAY_TEST_DIR" <<'EOF' || true
import sys
sys.path.insert(0, "tests")
from support.ray_cluster import stop_processes_under
left = stop_processes_under(sys.argv[1], grace=0)
if left:
    print(f"stopped {len(left)} leftover process(es) of this run's Ray clusters: {left}")
EOF
    rm -rf "$TIMELYPY_RAY_TEST_DIR"
}
trap cleanup EXIT
if [ "$#" -eq 0 ]; then
    # The tests that run in this process (the core and the slow ones: most of the suite, and
    # of its CPU) two at a time with pytest-xdist; then, one at a time, those that start
    # worker processes, Ray clusters or Spark (they wait on other processes more than they
    # compute, and each wants the machine's cores for its own workers).
    python -m pytest -q -p no:cacheprovider -n 2 -m "not ray and not spark and not processes" \
        --ignore=tests/connectors/test_spark_ray.py
    python -m pytest -q -p no:cacheprovider -m "ray or spark or processes" \
        --ignore=tests/connectors/test_spark_ray.py
    # Spark on Ray (RayDP) needs a process whose first Spark it is: pyspark keeps one JVM per
    # process, and the plain-Spark tests above started one without RayDP's classes.
    python -m pytest -q -p no:cacheprovider tests/connectors/test_spark_ray.py
else
    python -m pytest -q -p no:cacheprovider "$@"
fi
