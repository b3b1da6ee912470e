"""The plan's temporal nodes: ``TemporalFilter`` and ``FreezeAt`` lowered onto
``Collection.temporal_filter`` / ``freeze_at``, against the plan evaluator at every time.

Random relational plans (:mod:`plans` with ``temporal=True``: bounds are expressions over the
row, at the root and inside fixpoints) run over random fact changes, one time per batch; at
every time ``T`` up to a few past the last batch the output must equal ``evaluate_plan(plan,
inputs at T, time=T, history=...)``. On inline 1 and 3 workers and on 2 worker processes.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings
from oracle.plan import evaluate_plan

from timelypy.plan import (
    Arith,
    Column,
    Const,
    FreezeAt,
    Plan,
    PlanError,
    Scan,
    TemporalFilter,
    lower_one,
)
from timelypy.plan.nodes import Fn
from timelypy.testing import contents_at, run_changes

from . import plans as S

cloudpickle.register_pickle_by_value(sys.modules[__name__])

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "150"))
EXTRA_TIMES = 8
"""Times checked past the last batch: records leave (and freeze) after the inputs stop."""


def _settings(n: int) -> Any:
    return settings(
        max_examples=max(5, n),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


class _Lowered:
    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def __call__(self, **inputs: Any) -> Any:
        return lower_one(self.plan, inputs)


def check(plan: Plan, changes: S.Changes, workers: int, backend: str = "inline") -> None:
    """``plan`` on the engine over ``changes`` (one time each), then no change for
    :data:`EXTRA_TIMES` times; every time equals the oracle at that time."""
    changes = changes + [{name: {} for name in S.INPUTS}] * EXTRA_TIMES
    last = len(changes) - 1

    def history(t: int) -> Dict[str, Any]:
        return S.accumulated(changes, t)

    expected = [
        evaluate_plan(plan, history(t), time=t, history=history, max_iterations=200)
        for t in range(len(changes))
    ]
    batches: Dict[str, Any] = {name: [step[name] for step in changes] for name in S.INPUTS}
    got = run_changes(_Lowered(plan), batches, workers=workers, backend=backend, timeout=120)
    for t, want in enumerate(expected):
        have = contents_at(got, t)
        assert have == want, f"time {t} of {last}: engine {have} != oracle {want} for {plan!r}"


@_settings(EXAMPLES)
@given(S.relational_plans(temporal=True), S.fact_changes())
def test_temporal_plans_one_worker(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=1)


@_settings(EXAMPLES // 3)
@given(S.relational_plans(temporal=True), S.fact_changes())
def test_temporal_plans_three_inline_workers(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=3)


@pytest.mark.processes
@_settings(EXAMPLES // 15)
@given(S.relational_plans(max_depth=2, temporal=True), S.fact_changes(max_times=3))
def test_temporal_plans_two_processes(plan: Plan, changes: S.Changes) -> None:
    check(plan, changes, workers=2, backend="processes")


def _window(t: int) -> S.Changes:
    """One row ``(0, 2)`` in ``a`` at time 0, removed at time ``t``."""
    steps: S.Changes = [{name: {} for name in S.INPUTS} for _ in range(t + 1)]
    steps[0]["a"][(0, 2)] = 1
    steps[t]["a"][(0, 2)] = -1
    return steps


def test_bounds_may_be_expressions_or_functions():
    start = Column(1)
    end = Arith("+", Column(1), Const(3))
    check(TemporalFilter(Scan("a"), start, end), _window(6), workers=1)
    check(TemporalFilter(Scan("a"), Fn("start", lambda r: r[1]), None), _window(3), workers=1)
    check(FreezeAt(Scan("a"), Fn("end", lambda r: r[1] + 1)), _window(2), workers=1)
    check(FreezeAt(Scan("a"), end), _window(2), workers=1)


def test_a_freeze_at_without_cutoff_is_a_plan_error():
    with pytest.raises(PlanError, match="FreezeAt: the cutoff is None"):
        check(FreezeAt(Scan("a"), None), _window(1), workers=1)  # type: ignore[arg-type]
