"""Random relational plans under random fact changes: the lowering against the plan evaluator.

Every generated plan (:mod:`plans`) is lowered onto the engine and run over random changes of
its input relations (one time per batch of changes); at every time, the output's content must
equal ``evaluate_plan`` on the inputs accumulated up to that time. On inline 1 and 3 workers
and on 2 worker processes.

Longer run::

    TIMELYPY_EXAMPLES=2000 python -m pytest tests/plan/test_lower_property.py
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings
from oracle.plan import NonConvergenceError, evaluate_plan

from timelypy.plan import Plan, lower_one
from timelypy.testing import contents_at, run_changes

from . import plans as S

# Worker processes do not have tests/ on their path: ship the program by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "150"))


def _settings(n: int) -> Any:
    return settings(
        max_examples=max(5, n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


class _Lowered:
    """The program ``run_changes`` builds: the plan lowered over the named inputs."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def __call__(self, **inputs: Any) -> Any:
        return lower_one(self.plan, inputs)


def check(plan: Plan, changes: S.Changes, workers: int, backend: str = "inline") -> None:
    """Run ``plan`` over ``changes`` on the engine and compare every time with the oracle."""
    expected = []
    for t in range(len(changes)):
        try:
            expected.append(evaluate_plan(plan, S.accumulated(changes, t), max_iterations=200))
        except NonConvergenceError:  # pragma: no cover - the strategies make loops converge
            pytest.fail(f"the generated plan does not converge: {plan!r}")
    batches: Dict[str, Any] = {name: [step[name] for step in changes] for name in S.INPUTS}
    got = run_changes(_Lowered(plan), batches, workers=workers, backend=backend, timeout=120)
    for t, want in enumerate(expected):
        have = contents_at(got, t)
        assert have == want, f"time {t}: engine {have} != oracle {want} for {plan!r}"


@_settings(EXAMPLES)
@given(S.relational_plans(), S.fact_changes())
def test_relational_plans_one_worker(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=1)


@_settings(EXAMPLES // 2)
@given(S.recursive_plans(), S.fact_changes())
def test_mutually_recursive_fixpoints_one_worker(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=1)


@_settings(EXAMPLES // 3)
@given(S.relational_plans(), S.fact_changes())
def test_relational_plans_three_inline_workers(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=3)


@pytest.mark.processes
@_settings(EXAMPLES // 15)
@given(S.relational_plans(max_depth=2), S.fact_changes(max_times=3))
def test_relational_plans_two_processes(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=2, backend="processes")
