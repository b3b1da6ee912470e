"""The join's fuel: a big batch is joined in bounded pieces, resumed across activations, with
exactly the output of joining it at once.

The property runs repeat the backbone's random programs with a fuel of one output per
activation, so every join yields after each key and resumes while other batches arrive, traces
advance their compaction and the other input's arrangement keeps receiving batches.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import strategies as strat
from support.harness import run_and_check
from support.strategies import program_and_script

import timelypy as tp
from timelypy.differential.join import JoinOperator

FUEL_SETTINGS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@pytest.fixture
def tiny_fuel(monkeypatch):
    monkeypatch.setattr(JoinOperator, "fuel", 1)


@FUEL_SETTINGS
@given(program_and_script())
def test_random_programs_with_tiny_fuel(tiny_fuel, case):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=1)


@FUEL_SETTINGS
@given(program_and_script(strat.iterative_programs(max_depth=3)), st.sampled_from([1, 2]))
def test_random_iterative_programs_with_tiny_fuel(tiny_fuel, case, workers):
    program, script, n_inputs = case
    run_and_check(program, script, n_inputs, workers=workers)


def _skip_level(n: int, workers: int, fuel: int, monkeypatch):
    """Skip-level over n people, then every person changes manager, all in one open loop;
    returns the accumulated output and the largest message the join sent."""
    monkeypatch.setattr(JoinOperator, "fuel", fuel)

    def build(worker):
        out: Counter = Counter()
        largest = [0]

        def define(scope):
            session, manages = scope.new_collection()
            joined = manages.map(lambda mp: (mp[1], mp[0])).join(manages)
            joined.inner.inspect_batch(
                lambda t, data: largest.__setitem__(0, max(largest[0], len(data)))
            )
            probe = joined.inspect(lambda u: out.__setitem__(u[0], out[u[0]] + u[2])).probe()
            return session, probe

        session, probe = worker.dataflow(define)
        for p in range(worker.index, n, worker.peers):
            session.insert((p // 2, p))
        for p in range(1, n):
            session.advance_to(p)
            if p % worker.peers == worker.index:
                session.remove((p // 2, p))
                session.insert((p // 3, p))
        session.close()
        while worker.step():
            pass
        return {k: v for k, v in out.items() if v}, largest[0]

    results = tp.execute(build, workers=workers)
    merged: Counter = Counter()
    for rows, _ in results:
        merged.update(rows)
    return {k: v for k, v in merged.items() if v}, max(largest for _, largest in results)


@pytest.mark.parametrize("workers", [1, 2])
def test_fuel_bounds_each_output_message_and_keeps_the_result(workers, monkeypatch):
    n = 3000
    expected_manager = {0: 0}
    expected_manager.update({p: p // 3 for p in range(1, n)})
    expected = Counter()
    for q, m in expected_manager.items():  # (m, (manager of m, q)) for q managed by m
        expected[(m, (expected_manager[m], q))] += 1
    unfuelled, largest_unfuelled = _skip_level(n, workers, 10**9, monkeypatch)
    fuelled, largest_fuelled = _skip_level(n, workers, 50, monkeypatch)
    assert unfuelled == dict(expected)
    assert fuelled == dict(expected)
    # A key's pairs are never split, so a message may exceed the fuel by one key's outputs
    # (here at most a handful); without fuel one message carries a whole batch's join.
    assert largest_fuelled <= 50 + 20
    assert largest_unfuelled > 1000
