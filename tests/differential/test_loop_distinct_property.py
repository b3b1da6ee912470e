"""``distinct`` at ``Product`` times inside an iterate loop, as reachability runs it: random
graphs and random edge changes (several per outer time, edges removed and added back, roots
changing too), fed open loop (every change before the first step: many outer times in flight
at once, so keys hold updates of several outer times and interesting times are joins across
them) or closed loop (stepped to completion after each time), on one and two workers. The
output's accumulation at every outer time must be that time's reachable set from scratch,
each node once."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Dict, List, Set, Tuple

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle.graphs import reachable
from support.dataflows import reachability

import timelypy as tp

Edge = Tuple[int, int]


@st.composite
def _scenarios(draw: Any) -> Tuple[Set[Edge], Set[int], List[Tuple[List[Edge], List[Edge]]]]:
    """``(edges, roots, rounds)``: each round removes some current edges and adds some."""
    n = draw(st.integers(2, 14))
    node = st.integers(0, n - 1)
    edges = set(draw(st.lists(st.tuples(node, node), max_size=3 * n)))
    roots = set(draw(st.lists(node, min_size=1, max_size=2)))
    rounds = []
    current = set(edges)
    for _ in range(draw(st.integers(1, 8))):
        gone = draw(st.lists(st.sampled_from(sorted(current)), max_size=3)) if current else []
        gone = sorted(set(gone))
        added = sorted(set(draw(st.lists(st.tuples(node, node), max_size=3))) - current)
        current.difference_update(gone)
        current.update(added)
        rounds.append((gone, added))
    return edges, roots, rounds


def _run(
    edges: Set[Edge],
    roots: Set[int],
    rounds: List[Tuple[List[Edge], List[Edge]]],
    workers: int,
    open_loop: bool,
) -> List[Any]:
    def build(worker: Any) -> List[Any]:
        def dataflow(scope: Any) -> Any:
            es, e = scope.new_collection()
            rs, r = scope.new_collection()
            out = reachability(e, r)
            return es, rs, out.probe(), out.capture()

        es, rs, probe, cap = worker.dataflow(dataflow)
        mine = worker.index == 0
        if mine:
            for x in sorted(roots):
                rs.insert(x)
        for k, edge in enumerate(sorted(edges)):
            if k % worker.peers == worker.index:
                es.insert(edge)
        for t, (gone, added) in enumerate(rounds, 1):
            es.advance_to(t)
            rs.advance_to(t)
            if not open_loop:
                es.flush()
                rs.flush()
                worker.step_until(probe, es.time, timeout=60)
            for k, edge in enumerate(gone):
                if k % worker.peers == worker.index:
                    es.remove(edge)
            for k, edge in enumerate(added):
                if k % worker.peers == worker.index:
                    es.insert(edge)
            if mine and t % 3 == 0:  # the least root leaves, and comes back 3 rounds later
                (rs.remove if t % 2 else rs.insert)(min(roots))
        es.close()
        rs.close()
        worker.step_until_done(timeout=60)
        return cap.consolidated()

    return [u for part in tp.execute(build, workers=workers, backend="inline") for u in part]


def _expected(
    edges: Set[Edge], roots: Set[int], rounds: List[Tuple[List[Edge], List[Edge]]]
) -> List[Set[int]]:
    """The reachable set at every outer time, from scratch (the roots change as in _run)."""
    state, rs = set(edges), set(roots)
    first = min(roots)
    want = [reachable(state, rs)]
    for t, (gone, added) in enumerate(rounds, 1):
        state.difference_update(gone)
        state.update(added)
        if t % 3 == 0:
            (rs.discard if t % 2 else rs.add)(first)
        want.append(reachable(state, rs))
    return want


def _check(updates: List[Any], want: List[Set[int]]) -> None:
    for t, reach in enumerate(want):
        acc: Dict[Any, int] = defaultdict(int)
        for x, time, d in updates:
            if time <= t:
                acc[x] += d
        assert all(c in (0, 1) for c in acc.values()), (t, dict(acc))
        assert {x for x, c in acc.items() if c} == reach, t


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(_scenarios(), st.booleans())
def test_reachability_loop_exact_at_every_time_one_worker(scenario: Any, open_loop: bool) -> None:
    """One worker, open or closed loop: exact at every outer time."""
    edges, roots, rounds = scenario
    _check(_run(edges, roots, rounds, 1, open_loop), _expected(edges, roots, rounds))


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(_scenarios())
def test_reachability_loop_exact_at_every_time_two_workers(scenario: Any) -> None:
    """Two workers, open loop (keys split between the workers' distinct operators): exact at
    every outer time, and the same updates as one worker."""
    edges, roots, rounds = scenario
    two = _run(edges, roots, rounds, 2, True)
    _check(two, _expected(edges, roots, rounds))
    one = _run(edges, roots, rounds, 1, True)
    net: Dict[Any, int] = defaultdict(int)
    for x, t, d in two:
        net[(x, t)] += d
    assert sorted((x, t, d) for (x, t), d in net.items() if d) == sorted(one)


def _as_version_1(state: Any) -> Any:
    """A version 2 state of distinct at Product times written as version 1 was: each quad list
    ``[size, mark, quads...]`` as ``[size, quads...]`` and the quads past the mark (updates
    not yet evaluated) apart, in ``fresh``."""
    from timelypy.dataflow.state import OperatorState

    keyed = []
    for h, (key, parts) in state.all_keyed():
        parts = dict(parts)
        quads = parts.pop("state", None)
        if quads is not None:
            mark = quads[1]
            parts["state"] = [quads[0] - 1] + quads[2:mark]
            fresh = [x for i in range(mark, len(quads), 4) for x in quads[i + 1 : i + 4]]
            if fresh:
                parts["fresh"] = fresh
        keyed.append((h, (key, parts)))
    return OperatorState(keyed=keyed, shared=state.shared, version=1)


def test_a_version_1_state_is_restored() -> None:
    """A checkpoint written before the quad lists had a mark restores to the same answers as an
    uninterrupted run; another version is refused, naming the operator."""
    import pytest

    from tests.recovery import test_state_operators as t
    from timelypy.dataflow.state import OperatorState
    from timelypy.differential.reduce import ProductDistinct
    from timelypy.errors import RecoveryError
    from timelypy.recovery.snapshot import restore_worker, snapshot_worker
    from timelypy.workers.launch.inline import local_workers

    old = local_workers(1)
    old_built = t.build_all(old, t.reach)
    t.feed(old, old_built, t.ROUNDS, 0)
    closed = len(t.ROUNDS)
    snap = snapshot_worker(old[0])
    distincts = [oid for oid, s in snap.items() if s.version == 2]
    assert distincts and all(snap[oid].keyed for oid in distincts)
    snap = {oid: (_as_version_1(s) if oid in distincts else s) for oid, s in snap.items()}
    new = local_workers(1)
    new_built = t.build_all(new, t.reach)
    restore_worker(new[0], [snap], closed)
    t.settle(new, closed)
    t.feed(new, new_built, t.LATER, closed)
    whole = local_workers(1)
    whole_built = t.build_all(whole, t.reach)
    t.feed(whole, whole_built, t.ROUNDS + t.LATER, 0)
    for time in range(closed, closed + len(t.LATER) + 1):
        assert t.accumulated(new_built, time) == t.accumulated(whole_built, time), time
    bare = ProductDistinct.__new__(ProductDistinct)
    with pytest.raises(RecoveryError, match="state version 7"):
        bare.restore_state(OperatorState(version=7))
