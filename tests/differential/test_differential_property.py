"""The backbone: random programs and random update streams against a from-scratch reference.

Every generated program (compositions of map, filter, flat_map, negate, concat, consolidate,
join, semijoin, antijoin, reduce, count, distinct, threshold and iterate-based reachability)
is run incrementally under a random driver script (insertions and retractions, update_at into
the future, uneven advance_to, steps), and at every time its accumulated output must equal the
program evaluated from scratch on the accumulated input (the differential correctness property).

Longer run::

    TIMELYPY_EXAMPLES=5000 python -m pytest tests/differential/test_differential_property.py
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import strategies as strat
from support.harness import run_and_check
from support.strategies import program_and_script

# 200 programs on one worker per run, and a share of that on 2-3 inline workers and on
# processes (the same property also runs on Ray, in tests/workers/ray); CI runs it on every
# commit, so the cases add up across runs. Longer runs set TIMELYPY_EXAMPLES.
EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "200"))

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(program_and_script())
def test_random_programs_one_worker(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=1)


@settings(
    max_examples=max(20, EXAMPLES // 3),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program_and_script(strat.iterative_programs(max_depth=3)))
def test_random_iterative_programs_one_worker(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=1)


@settings(
    max_examples=max(20, EXAMPLES // 2),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program_and_script(), st.sampled_from([2, 3]))
def test_random_programs_inline_workers(case, workers):
    """The same programs on 2 and 3 inline workers: identical accumulated output."""
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=workers, backend="inline")


@pytest.mark.processes
@settings(
    max_examples=max(10, EXAMPLES // 6),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program_and_script(), st.sampled_from([2, 3]))
def test_random_programs_processes(case, workers):
    """The same programs on 2 and 3 worker processes: identical accumulated output."""
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=workers, backend="processes")
