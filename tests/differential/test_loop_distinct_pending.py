"""``distinct`` at ``Product`` times keeps the times of updates not yet evaluated in
``pending_times`` only: a key registered twice at a time (two updates, or an update and a join)
is evaluated there once, and the operator's future state lists it once."""

from __future__ import annotations

from typing import Any, List

from timelypy.differential.reduce import ProductDistinct
from timelypy.order import Product
from timelypy.workers.worker import Worker


def _distinct_in_a_loop() -> ProductDistinct:
    """The ``distinct`` of a loop in a built (not yet run) dataflow."""
    worker = Worker()
    graphs: List[Any] = []

    def program(scope: Any) -> Any:
        session, roots = scope.new_collection()
        graphs.append(scope.subgraph)
        return session, roots.iterate(lambda inner: inner.distinct()).probe()

    worker.dataflow(program)
    found = []
    stack = list(graphs[0].children)
    while stack:
        child = stack.pop()
        if isinstance(child, ProductDistinct):
            found.append(child)
        stack.extend(getattr(child, "children", ()))
    (op,) = found
    return op


def test_a_time_registered_twice_is_future_state_once() -> None:
    op = _distinct_in_a_loop()
    op._ingest([(5, (3, 2), 1), (5, (3, 2), 1), (6, (4, 1), -1)], False)
    assert sorted(op.pending_times[(3, 2)]) == [5, 5]
    pieces = sorted(op.future_state(), key=repr)
    assert pieces == [(5, "pending", [((3, 2), None)]), (6, "pending", [((4, 1), None)])]
    assert op.pending == {}


def test_a_time_registered_twice_is_evaluated_once() -> None:
    op = _distinct_in_a_loop()
    op._ingest([(5, (3, 2), 1), (5, (3, 2), 1), (6, (4, 1), -1), (7, (1, 1), 1)], False)
    op.add_pending_time((1, 1), 7)  # as a join at the time of an update not yet evaluated
    op.pending[7] = (1, 1)
    ready = op._ready([(9, 9)])
    assert sorted(ready[5]) == [(3, 2), (3, 2)] and sorted(ready[7]) == [(1, 1), (1, 1)]
    output: Any = {}
    op._evaluate_keys(ready, [(9, 9)], output)
    got = sorted((t, data) for t, (_, data) in output.items())
    assert got == [((1, 1), [(7, Product(1, 1), 1)]), ((3, 2), [(5, Product(3, 2), 1)])]
    assert op.pending == {} and op.pending_times == {}
    assert op.state[5][2:] == [0, 3, 2, 1, 0, 3, 2, 1, 1, 3, 2, 1]  # one output quad
    assert op.state[6][2:] == [0, 4, 1, -1] and op.state[7][2:] == [0, 1, 1, 1, 1, 1, 1, 1]
