"""Each stateful operator's snapshot and restore, on inline workers driven by the test.

A dataflow runs to a closed time, every worker's state is taken, the same program is built on
fresh workers (as many or another number), restored, and fed the rest; what it answers
(captured contents, ``lookup``, later changes) is what an uninterrupted run answers.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import pytest

from timelypy.dataflow.state import OperatorState, Stateful
from timelypy.differential.arrange import ArrangeOperator
from timelypy.differential.reduce import CountTotal, ProductDistinct, ReduceOperator
from timelypy.errors import RecoveryError
from timelypy.recovery.snapshot import (
    closed_at,
    program_fingerprint,
    restore_worker,
    snapshot_worker,
)
from timelypy.workers.launch.inline import local_workers
from timelypy.workers.worker import Worker

Build = Callable[[Any], Any]


def build_all(workers: List[Worker], build: Build) -> List[Any]:
    return [w.dataflow(build) for w in workers]


def settle(workers: List[Worker], t: int) -> None:
    for _ in range(100_000):
        for w in workers:
            w.step()
        if all(closed_at(w, t) for w in workers):
            return
    raise AssertionError(f"time {t} did not close")


def feed(workers: List[Worker], built: List[Any], rounds: List[List[Any]], start: int) -> None:
    """Insert ``rounds[t - start]`` at time ``t`` (spread over the workers), closing each."""
    for offset, records in enumerate(rounds):
        t = start + offset
        for k, rec in enumerate(records):
            session = built[k % len(workers)][0]
            if isinstance(rec, tuple) and len(rec) == 2 and rec[0] == "-":
                session.remove(rec[1])
            else:
                session.insert(rec)
        for b in built:
            b[0].advance_to(t + 1)
            b[0].flush()
        settle(workers, t + 1)


def accumulated(built: List[Any], t: int) -> Dict[Any, int]:
    out: Dict[Any, int] = {}
    for b in built:
        for rec, n in b[1].at(t).items():
            out[rec] = out.get(rec, 0) + n
    return {r: n for r, n in out.items() if n}


def restart(build: Build, before: int, after: int, first: List[List[Any]], rest: List[List[Any]]):
    """Run ``first`` on ``before`` workers, snapshot at the closed time, restore onto ``after``
    workers, run ``rest``; also the uninterrupted run. Returns both (workers, built)."""
    old = local_workers(before)
    old_built = build_all(old, build)
    feed(old, old_built, first, 0)
    closed = len(first)
    snaps = [snapshot_worker(w) for w in old]
    new = local_workers(after)
    new_built = build_all(new, build)
    for w in new:
        restore_worker(w, snaps, closed)
    settle(new, closed)
    feed(new, new_built, rest, closed)
    whole = local_workers(before)
    whole_built = build_all(whole, build)
    feed(whole, whole_built, first + rest, 0)
    return (new, new_built), (whole, whole_built), closed


ROUNDS = [[1, 2, 3, 4, 5, 6], [2, 3, 7, ("-", 1)], [8, 8, ("-", 2)]]
LATER = [[1, 9, ("-", 3)], [10, ("-", 8)], []]


def counts(scope: Any) -> Tuple[Any, Any]:
    session, numbers = scope.new_collection(name="numbers")
    return session, numbers.map(lambda x: x % 4).count().capture()


def distinct_pairs(scope: Any) -> Tuple[Any, Any]:
    session, numbers = scope.new_collection(name="numbers")
    pairs = numbers.map(lambda x: (x % 3, x))
    return session, pairs.reduce(lambda k, vals: [(max(v for v, _ in vals), 1)]).capture()


def joined(scope: Any) -> Tuple[Any, Any]:
    session, numbers = scope.new_collection(name="numbers")
    left = numbers.map(lambda x: (x % 3, x))
    right = numbers.map(lambda x: (x % 2, -x))
    return session, left.join(right).distinct().capture()


def reach(scope: Any) -> Tuple[Any, Any]:
    session, numbers = scope.new_collection(name="numbers")
    edges = numbers.map(lambda x: (x, x + 1))
    roots = numbers.filter(lambda x: x == 1)

    def body(inner: Any) -> Any:
        e = edges.enter(inner.scope)
        return (
            inner.map(lambda n: (n, ()))
            .join(e)
            .map(lambda kv: kv[1][1])
            .concat(roots.enter(inner.scope))
            .distinct()
        )

    return session, roots.iterate(body).capture()


@pytest.mark.parametrize("build", [counts, distinct_pairs, joined, reach])
@pytest.mark.parametrize("scale", [(1, 1), (2, 3), (3, 1), (1, 2)])
def test_restore_equals_uninterrupted(build: Build, scale: Tuple[int, int]) -> None:
    (_, restored), (_, whole), closed = restart(build, scale[0], scale[1], ROUNDS, LATER)
    for t in range(closed, closed + len(LATER) + 1):
        assert accumulated(restored, t) == accumulated(whole, t), (build.__name__, t)
    assert accumulated(restored, closed + len(LATER))  # not trivially empty


def test_changes_at_or_before_the_closed_time_are_not_delivered_again() -> None:
    (_, restored), _, closed = restart(counts, 2, 2, ROUNDS, LATER)
    # The restored capture holds the checkpointed run's messages once, and the new run's
    # changes are all at times at or after the closed time.
    before = [m for b in restored for m in b[1].updates() if m[1] < closed]
    whole = local_workers(2)
    wb = build_all(whole, counts)
    feed(whole, wb, ROUNDS, 0)
    assert sorted(before) == sorted(m for b in wb for m in b[1].updates())


def test_operators_that_keep_state_are_stateful() -> None:
    w = Worker()
    w.dataflow(distinct_pairs)
    w.dataflow(counts)
    w.dataflow(reach)
    kinds = set(program_fingerprint(w).values())
    assert any(k.startswith("ArrangeOperator") or k.startswith("_TotalArrange") for k in kinds)
    assert any(k.startswith("ReduceOperator") for k in kinds)
    assert any(k.startswith("CountTotal") for k in kinds)
    assert any(k.startswith("ProductDistinct") for k in kinds)
    assert any(k.startswith("InputSession") or k.startswith("InputOperator") for k in kinds)
    assert issubclass(ReduceOperator, Stateful) and issubclass(ArrangeOperator, Stateful)
    assert issubclass(CountTotal, Stateful) and issubclass(ProductDistinct, Stateful)


def test_arrangement_restored_answers_lookup() -> None:
    def build(scope: Any) -> Tuple[Any, Any, Any]:
        session, edges = scope.new_collection(name="edges")
        arranged = edges.arrange_by_key()
        return session, arranged.as_collection().capture(), arranged

    old = local_workers(2)
    ob = build_all(old, build)
    feed(old, ob, [[(1, 2), (1, 3), (2, 3)], [("-", (1, 3)), (1, 4)]], 0)
    snaps = [snapshot_worker(w) for w in old]
    new = local_workers(3)
    nb = build_all(new, build)
    for w in new:
        restore_worker(w, snaps, 2)
    settle(new, 2)

    def lookup(built: List[Any], key: Any) -> Dict[Any, int]:
        out: Dict[Any, int] = {}
        for b in built:
            out.update(b[2].lookup(key))
        return out

    assert lookup(nb, 1) == {2: 1, 4: 1} == lookup(ob, 1)
    assert lookup(nb, 2) == {3: 1}
    spine = next(b[2].spine for b in nb if b[2].spine.batches)
    batch = spine.batches[0]
    assert batch.lower == [0] and batch.upper == [2] and batch.since == [2]
    # Later changes are joined against it: remove (1, 2), add (1, 5).
    feed(new, nb, [[("-", (1, 2)), (1, 5)]], 2)
    assert lookup(nb, 1) == {4: 1, 5: 1}


def test_restore_refuses_another_program() -> None:
    old = local_workers(1)
    build_all(old, counts)
    settle(old, 0)
    snaps = [snapshot_worker(w) for w in old]
    new = local_workers(1)
    build_all(new, distinct_pairs)
    with pytest.raises(RecoveryError, match=r"operator 'dataflow1/\d'"):
        restore_worker(new[0], snaps, 0)


def test_closed_at_waits_for_every_operator() -> None:
    w = Worker()
    session, _ = w.dataflow(reach)
    for x in range(20):
        session.insert(x)
    session.advance_to(1)
    session.flush()
    assert not closed_at(w, 1)  # the updates are still on their way
    settle([w], 1)
    assert closed_at(w, 1) and not closed_at(w, 2)


def test_snapshot_refuses_pending_work() -> None:
    w = Worker()
    built = w.dataflow(counts)
    feed([w], [built], ROUNDS, 0)
    count = next(op for op in w.dataflows()[0].children if isinstance(op, CountTotal))
    count.pending[1] = {1: 1}  # as if an update at time 1 (the frontier has passed it) waited
    with pytest.raises(RecoveryError, match=r"CountTotal.*pending holds 1 entries.*earliest 1"):
        snapshot_worker(w)
    del count.pending[1]
    count.pending[len(ROUNDS) + 2] = {1: 1}  # a future time (a temporal filter's) is state
    assert snapshot_worker(w)


def test_input_position_is_restored() -> None:
    old = local_workers(1)
    ob = build_all(old, counts)
    feed(old, ob, ROUNDS, 0)
    state = snapshot_worker(old[0])["dataflow1/1"]
    assert isinstance(state, OperatorState) and state.shared["time"] == len(ROUNDS)
    new = local_workers(1)
    nb = build_all(new, counts)
    restore_worker(new[0], [snapshot_worker(old[0])], len(ROUNDS))
    assert nb[0][0].time == len(ROUNDS)


def test_imported_trace_is_restored_with_its_exporter() -> None:
    """A second dataflow reads the first one's arrangement: after a restore it sees the
    restored trace, and its own join answers as in the uninterrupted run."""

    def build(worker: Worker) -> Tuple[Any, Any]:
        session, arranged = worker.dataflow(
            lambda scope: (lambda s_c: (s_c[0], s_c[1].arrange_by_key()))(
                scope.new_collection(name="pairs")
            )
        )
        trace = arranged.trace

        def second(scope: Any) -> Any:
            imported = trace.import_(scope)
            q_in, queries = scope.new_collection(name="queries")
            return q_in, queries.map(lambda k: (k, ())).join(imported.as_collection()).capture()

        q_in, captured = worker.dataflow(second)
        return (session, q_in), captured

    def run(workers: List[Worker], built: List[Any], rounds: List[Tuple[list, list]], start: int):
        for offset, (pairs, queries) in enumerate(rounds):
            t = start + offset
            for k, p in enumerate(pairs):
                built[k % len(workers)][0][0].insert(p)
            for k, q in enumerate(queries):
                built[k % len(workers)][0][1].insert(q)
            for b in built:
                for s in b[0]:
                    s.advance_to(t + 1)
                    s.flush()
            settle(workers, t + 1)

    first = [([(1, "a"), (2, "b")], [1]), ([(1, "c")], [3])]
    rest = [([(3, "d")], [2]), ([(1, "e")], [])]
    old = local_workers(2)
    ob = [build(w) for w in old]
    run(old, ob, first, 0)
    snaps = [snapshot_worker(w) for w in old]
    new = local_workers(3)
    nb = [build(w) for w in new]
    for w in new:
        restore_worker(w, snaps, 2)
    settle(new, 2)
    run(new, nb, rest, 2)
    whole = local_workers(2)
    wb = [build(w) for w in whole]
    run(whole, wb, first + rest, 0)

    def acc(built: List[Any], t: int) -> Dict[Any, int]:
        out: Dict[Any, int] = {}
        for b in built:
            for r, n in b[1].at(t).items():
                out[r] = out.get(r, 0) + n
        return {r: n for r, n in out.items() if n}

    for t in range(2, 5):
        assert acc(nb, t) == acc(wb, t), t
    assert acc(nb, 4) == {
        (1, ((), "a")): 1,
        (1, ((), "c")): 1,
        (1, ((), "e")): 1,
        (2, ((), "b")): 1,
        (3, ((), "d")): 1,
    }


def test_timely_input_and_capture_are_restored() -> None:
    def build(scope: Any) -> Tuple[Any, Any]:
        handle, stream = scope.new_input(name="numbers")
        return handle, stream.map(lambda x: x * 10).capture()

    old = local_workers(2)
    ob = build_all(old, build)
    for t, records in enumerate([[1, 2], [3]]):
        for k, r in enumerate(records):
            ob[k % 2][0].send(r)
        for h, _ in ob:
            h.advance_to(t + 1)
        settle(old, t + 1)
    snaps = [snapshot_worker(w) for w in old]
    new = local_workers(1)
    nb = build_all(new, build)
    restore_worker(new[0], snaps, 2)
    assert nb[0][0].time == 2
    nb[0][0].send(4)
    nb[0][0].advance_to(3)
    settle(new, 3)
    assert sorted(nb[0][1].records()) == [(0, 10), (0, 20), (1, 30), (2, 40)]
