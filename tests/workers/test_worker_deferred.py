"""``Worker.defer_until_quiet``: work that belongs to no update runs at the end of the next step
that leaves the worker quiet, never inside a busy step, and at the latest once every dataflow
has completed and been released."""

from __future__ import annotations

from typing import List

import timelypy as tp


def test_a_callback_deferred_inside_a_step_runs_after_it_once_quiet():
    worker = tp.Worker()
    calls: List[bool] = []  # was the worker inside a step when the callback ran?
    deferred: List[int] = []

    def defer_once(record):
        if not deferred:
            deferred.append(worker.steps)
            worker.defer_until_quiet(lambda: calls.append(worker.stepping))

    def dataflow(scope):
        session, xs = scope.new_collection("xs")
        return session, xs.inspect(defer_once).count().probe()

    session, probe = worker.dataflow(dataflow)
    for x in range(100):
        session.insert(x)
    session.advance_to(1)
    worker.step_until(probe, 1, timeout=30)
    assert deferred and calls == [False]  # after the busy step, not inside it
    assert worker.quiet()
    worker.step()
    assert calls == [False]  # once
    session.close()
    worker.step_until_done(timeout=30)


def test_a_deferred_callback_runs_once_the_dataflows_are_released():
    worker = tp.Worker()
    calls: List[str] = []

    def dataflow(scope):
        session, xs = scope.new_collection("xs")
        return session, xs.probe()

    session, _ = worker.dataflow(dataflow)
    session.close()
    worker.step_until_done(timeout=30)  # completes the dataflow; no step was quiet with it
    worker.defer_until_quiet(lambda: calls.append("released"))
    worker.release_completed()
    assert calls == ["released"]
    assert not worker.has_dataflows()
