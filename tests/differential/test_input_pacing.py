"""Input pacing (``InputSession.max_pending``): an open-loop producer that feeds many times of
changes without stepping gets them taken in by the dataflow in bounded chunks, and the output is
exactly what one step at the end gives.

* the skip-level join fed 600 changes without a step, with a tiny bound: the same output at
  every time as without pacing and as a from-scratch reference (and unpaced on two workers);
* with pacing the arrangements stay near the live data while the producer runs (each chunk is
  sealed, joined and compacted); without it every change is held until the end;
* no pacing from inside a step (an operator's function feeding another session), nor on a
  driver session's workers (their service steps them).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Dict, List, Optional, Tuple

import pytest

import timelypy as tp
from timelypy.differential.input import InputSession
from timelypy.workers.sessions.service import HandleService

pytestmark = pytest.mark.timeout(120)

PEOPLE = 600


@pytest.fixture
def small_buffers(monkeypatch):
    """Sessions send every 8 updates, so a bound of 40 is reached after a few changes."""
    monkeypatch.setattr(InputSession, "BUFFER", 8)


def _changes() -> List[Tuple[int, Tuple[int, int], Tuple[int, int]]]:
    return [(p, (p // 2, p), (p // 3, p)) for p in range(1, PEOPLE)]


def _reference() -> Dict[int, Counter]:
    """The skip-level join accumulated at every time, from scratch."""
    manages = Counter((p // 2, p) for p in range(PEOPLE))
    out: Dict[int, Counter] = {}
    for t in range(PEOPLE):
        if t:
            _, old, new = _changes()[t - 1]
            manages[old] -= 1
            manages[new] += 1
        by_m = defaultdict(list)
        for (m, p), c in manages.items():
            if c:
                by_m[m].append(p)
        out[t] = Counter(
            {(k, (a, b)): 1 for (a, k), c in manages.items() if c for b in by_m.get(k, ())}
        )
    return out


def _run(workers: int, bound: Optional[int]):
    """Feed the people at time 0, then every change at its own time, without stepping; returns
    the output updates and the largest stored count seen in the arrangements meanwhile."""

    def build(worker):
        spines = []

        def dataflow(scope):
            session, manages = scope.new_collection("manages")
            by_manager = manages.arrange_by_key()
            by_person = manages.map(lambda mp: (mp[1], mp[0])).arrange_by_key()
            spines.extend([by_manager.spine, by_person.spine])
            return session, by_person.join(by_manager).capture()

        session, captured = worker.dataflow(dataflow)
        largest = 0
        steps_while_feeding = worker.steps
        for p in range(worker.index, PEOPLE, worker.peers):
            session.insert((p // 2, p))
        for k, (t, old, new) in enumerate(_changes()):
            if k % worker.peers == worker.index:
                session.remove(old)
                session.insert(new)
            session.advance_to(t + 1)
            largest = max(largest, sum(s.stored_updates() for s in spines))
        steps_while_feeding = worker.steps - steps_while_feeding
        session.close()
        worker.step_until_done(timeout=60)
        return captured.updates(), largest, steps_while_feeding

    InputSession.max_pending = bound
    try:
        return tp.execute(build, workers=workers)
    finally:
        InputSession.max_pending = 200_000


def _accumulated(results) -> Dict[int, Counter]:
    per_time: Dict[int, Counter] = defaultdict(Counter)
    for updates, _, _ in results:
        for record, t, diff in updates:
            per_time[t][record] += diff
    out, acc = {}, Counter()
    for t in range(PEOPLE):
        acc.update(per_time.get(t, {}))
        out[t] = Counter({r: c for r, c in acc.items() if c})
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_paced_open_loop_is_exact_at_every_time(small_buffers, workers):
    paced = _run(workers, 40)
    # the producer was paced, on every worker (with peers too: each takes its chunks in)
    assert all(steps > 0 for _, _, steps in paced)
    unpaced = _run(workers, None)
    assert all(steps == 0 for _, _, steps in unpaced)
    reference = _reference()
    assert _accumulated(paced) == reference
    assert _accumulated(unpaced) == reference


def test_pacing_keeps_arrangements_near_the_live_data(small_buffers):
    ((_, paced_largest, _),) = _run(1, 40)
    ((_, unpaced_largest, _),) = _run(1, None)
    live = 2 * PEOPLE  # each of the two arrangements holds one update per live record
    assert unpaced_largest == 0  # without pacing nothing is taken in before the end
    # Paced, the arrangements take the changes in while the producer runs, holding the live
    # records plus what compaction has not folded away yet (every change at its own time
    # would be 3 * live).
    assert live <= paced_largest <= 2 * live


def test_no_pacing_from_inside_a_step(small_buffers):
    """A session fed from an operator's function buffers, and never steps the worker inside
    the step it is part of."""

    def build(worker):
        inner_steps = []
        fed, fed_collection = None, None

        def feeding(scope):
            nonlocal fed, fed_collection
            fed, fed_collection = scope.new_collection("fed")
            return fed, fed_collection.count().capture()

        InputSession.max_pending = 4
        try:
            fed, counted = worker.dataflow(feeding)
        finally:
            InputSession.max_pending = 200_000

        def feed(update):
            before = worker.steps
            value, t, diff = update
            for i in range(20):
                fed.update_at(value * 100 + i, t + i, diff)
            fed.advance_to(t + 1)
            inner_steps.append(worker.steps - before)

        def source(scope):
            session, xs = scope.new_collection("xs")
            return session, xs.inspect(feed).probe()

        session, probe = worker.dataflow(source)
        for x in range(3):
            session.insert(x)
            session.advance_to(x + 1)
            session.flush()
            worker.step_until(probe, x + 1, timeout=30)
        session.close()
        fed.close()
        worker.step_until_done(timeout=30)
        return inner_steps

    (inner_steps,) = tp.execute(build)
    assert inner_steps == [0, 0, 0]


def test_no_pacing_while_a_dataflow_is_built(small_buffers):
    """Changes made while building (before the dataflow exists) are held, not stepped."""

    def build(worker):
        def dataflow(scope):
            session, xs = scope.new_collection("xs")
            for t in range(30):
                session.insert(t)
                session.advance_to(t + 1)
            return session, xs.count().capture(), worker.steps

        session, counted, steps_while_building = worker.dataflow(dataflow)
        session.close()
        worker.step_until_done(timeout=30)
        return steps_while_building, counted.consolidated()

    InputSession.max_pending = 4
    try:
        ((steps, counted),) = tp.execute(build)
    finally:
        InputSession.max_pending = 200_000
    assert steps == 0
    # every record counted once, at its own time
    assert sorted((record, time, diff) for record, time, diff in counted) == [
        ((t, 1), t, 1) for t in range(30)
    ]


def test_driver_session_workers_are_not_paced():
    worker = tp.Worker()

    def dataflow(scope):
        session, xs = scope.new_collection("xs")
        return {"xs": session, "probe": xs.probe()}

    service = HandleService(worker, dataflow)
    assert service.worker.pace_inputs is False
