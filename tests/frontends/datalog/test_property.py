"""Random stratified programs (dl-lang's strategies) under random fact changes, run through
their sessions and checked at every time against the from-scratch evaluator: inline on 1-3
workers, 2 worker processes, 2 Ray workers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.datalog_programs import fact_changes, random_programs
from support.datalog_runs import check_run

pytestmark = pytest.mark.timeout(900)

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)


@settings(max_examples=40, **SETTINGS)
@given(st.data(), st.integers(1, 3))
def test_random_programs_inline(data, workers):
    program = data.draw(random_programs())
    check_run(program.text, data.draw(fact_changes(program)), workers=workers)


@pytest.mark.processes
@settings(max_examples=4, **SETTINGS)
@given(st.data())
def test_random_programs_two_processes(data):
    program = data.draw(random_programs())
    check_run(program.text, data.draw(fact_changes(program)), 2, "processes")


@pytest.mark.ray
def test_random_programs_two_ray_workers(ray_session):
    @settings(max_examples=3, **SETTINGS)
    @given(st.data())
    def check(data):
        program = data.draw(random_programs())
        check_run(program.text, data.draw(fact_changes(program)), 2, "ray", timeout=180)

    check()
