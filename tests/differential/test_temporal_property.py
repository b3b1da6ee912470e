"""Temporal filters and freeze_at in random programs, against the from-scratch reference.

Programs of every operator (``support.strategies.programs(temporal=True)``) also hold
``temporal_filter`` and ``freeze_at`` stages, at the root scope and inside ``iterate`` bodies
(``Product`` times: the bounds act on the outer coordinate, the rounds are kept), under random
driver scripts (retractions, ``update_at`` into the future, uneven ``advance_to``). At every
time up to ``reference.BOUND_MAX`` past the inputs' last one, the engine's accumulated output
must equal the program evaluated from scratch at that time: a record of a temporal filter is
present exactly while ``lower <= T < upper``, a frozen record has the weight it had just
before its cutoff. Built through the plan (``TemporalFilter``/``FreezeAt`` lowered) and with
the Collection methods directly.

Longer run::

    TIMELYPY_EXAMPLES=2000 python -m pytest tests/differential/test_temporal_property.py
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from support import strategies as strat
from support.harness import run_and_check
from support.strategies import program_and_script

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "200"))


def _settings(n: int) -> settings:
    return settings(
        max_examples=max(5, n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


TEMPORAL = strat.programs(max_depth=4, temporal=True)
ITERATIVE = strat.iterative_programs(max_depth=3, temporal=True)


@_settings(EXAMPLES)
@given(program_and_script(TEMPORAL))
def test_temporal_programs_one_worker(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=1)


@_settings(EXAMPLES // 2)
@given(program_and_script(TEMPORAL))
def test_temporal_programs_built_directly_one_worker(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=1, direct=True)


@_settings(EXAMPLES // 2)
@given(program_and_script(ITERATIVE))
def test_temporal_stages_inside_iterate_one_worker(case):
    """Product times: the loop's body filters and freezes on the outer coordinate."""
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=1)


@_settings(EXAMPLES // 4)
@given(program_and_script(TEMPORAL))
def test_temporal_programs_three_inline_workers(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=3, backend="inline")


@_settings(EXAMPLES // 4)
@given(program_and_script(ITERATIVE))
def test_temporal_stages_inside_iterate_three_inline_workers(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=3, backend="inline", direct=True)


@pytest.mark.processes
@_settings(EXAMPLES // 20)
@given(program_and_script(TEMPORAL))
def test_temporal_programs_two_processes(case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=2, backend="processes")
