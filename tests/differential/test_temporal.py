"""``Collection.temporal_filter`` and ``Collection.freeze_at``: exact at total and ``Product``
times (the bounds on the outer coordinate, nested loops too), ``None`` bounds, errors that name
the operator, the record, the bound and the time, fusion with the chain around them, and
compaction: an arrangement downstream of a temporal filter forgets a record once the frontier
has passed its upper bound, so a sliding window over an endless stream stays bounded."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import pytest

import timelypy as tp
from timelypy.dataflow.graph import graph_of
from timelypy.differential.temporal import before, outer_time, presence, with_outer_at_least
from timelypy.errors import OperatorError
from timelypy.order import Product


def _lo(r: Tuple[Any, Any]) -> Any:
    return r[0]


def _hi(r: Tuple[Any, Any]) -> Any:
    return r[1]


# ----------------------------------------------------------------------------- the stages
def test_presence_at_total_times():
    f = presence(_lo, _hi)
    assert list(f((2, 5), 0)) == [(2, 1), (5, -1)]
    assert list(f((2, 5), 3)) == [(3, 1), (5, -1)]  # arrives inside: from its arrival
    assert list(f((2, 5), 5)) == []  # arrives when it has left already
    assert list(f((5, 2), 0)) == []  # an empty interval is never present
    assert list(f((2, 2), 0)) == []


def test_presence_at_product_times_moves_the_outer_coordinate_only():
    f = presence(_lo, _hi)
    assert list(f((2, 5), Product(0, 3))) == [(Product(2, 3), 1), (Product(5, 3), -1)]
    assert list(f((2, 5), Product(4, 1))) == [(Product(4, 1), 1), (Product(5, 1), -1)]
    assert list(f((2, 5), Product(5, 0))) == []
    nested = Product(Product(1, 7), 2)
    assert list(f((2, 5), nested)) == [
        (Product(Product(2, 7), 2), 1),
        (Product(Product(5, 7), 2), -1),
    ]
    assert outer_time(nested) == 1
    assert with_outer_at_least(nested, 0) == nested


def test_none_bounds():
    assert list(presence(None, _hi)((2, 5), 1)) == [(1, 1), (5, -1)]
    assert list(presence(_lo, None)((2, 5), 1)) == [(2, 1)]
    assert list(presence(lambda r: None, lambda r: None)((2, 5), 1)) == [(1, 1)]
    assert list(presence(None, None)((2, 5), Product(1, 1))) == [(Product(1, 1), 1)]
    assert list(presence(_lo, lambda r: None)((2, 5), Product(1, 4))) == [(Product(2, 4), 1)]


def test_before_at_total_and_product_times():
    f = before(_hi)
    assert list(f((0, 3), 2)) == [(2, 1)]
    assert list(f((0, 3), 3)) == []
    assert list(f((0, 3), Product(2, 9))) == [(Product(2, 9), 1)]
    assert list(f((0, 3), Product(Product(3, 0), 0))) == []
    assert list(before(lambda r: None)((0, 3), 7)) == [(7, 1)]


def test_incomparable_bounds_are_type_errors_naming_record_bound_and_time():
    with pytest.raises(TypeError, match=r"temporal_filter: the bounds of \('a', 5\) \(lower 'a'"):
        presence(_lo, _hi)(("a", 5), 0)
    with pytest.raises(TypeError, match=r"upper 'z'.*time Product\(1, 0\)"):
        presence(None, _hi)((0, "z"), Product(1, 0))
    with pytest.raises(TypeError, match=r"freeze_at: the cutoff of \(0, 'z'\) \('z'\)"):
        before(_hi)((0, "z"), 1)


# ----------------------------------------------------------------------------- dataflows
def _run(make, pushes: List[Tuple[Any, int, int]], until: int):
    """Build ``make(collection)`` on one input, push ``(record, time, diff)``, run to
    ``until``; returns the captured output and the operators' names."""

    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection(name="events")
            out = make(c)
            return scope, session, out.capture(), out.probe()

        scope, session, cap, probe = worker.dataflow(dataflow)
        for record, t, diff in pushes:
            session.update_at(record, t, diff)
        session.advance_to(until)
        session.flush()
        worker.step_until(probe, until, timeout=60)
        names = [n.name for n in graph_of(scope).operators()]
        session.close()
        return cap, names

    ((cap, names),) = tp.execute(build)
    return cap, names


def test_temporal_filter_is_exact_at_every_time():
    pushes = [((2, 5), 0, 1), ((0, 1), 0, 1), ((3, 3), 0, 1), ((1, 4), 2, 2), ((2, 5), 3, -1)]
    cap, _ = _run(lambda c: c.temporal_filter(_lo, _hi), pushes, 8)
    for t in range(8):
        expected: Dict[Any, int] = {}
        for r, s, d in pushes:
            if s <= t and r[0] <= t < r[1]:
                expected[r] = expected.get(r, 0) + d
        assert cap.at(t) == {r: d for r, d in expected.items() if d}, t


def test_freeze_at_keeps_each_record_as_it_was_before_its_cutoff():
    pushes = [((0, 2), 0, 1), ((0, 2), 1, 1), ((0, 2), 2, 1), ((0, 4), 3, 1), ((0, 0), 0, 1)]
    cap, _ = _run(lambda c: c.freeze_at(_hi), pushes, 6)
    assert cap.at(0) == {(0, 2): 1}
    assert cap.at(1) == {(0, 2): 2}
    assert cap.at(5) == {(0, 2): 2, (0, 4): 1}  # the update at 2 came at the cutoff: dropped
    late, _ = _run(lambda c: c.concat(c.freeze_at(_hi).negate()), pushes, 6)
    assert late.at(5) == {(0, 2): 1, (0, 0): 1}  # only what came at or after the cutoff


def test_map_temporal_filter_filter_is_one_operator():
    cap, names = _run(
        lambda c: (
            c.map(lambda r: (r[0], r[1] + 1)).temporal_filter(_lo, _hi).filter(lambda r: r[0] != 1)
        ),
        [((2, 5), 0, 1), ((1, 4), 0, 1)],
        10,
    )
    assert [n for n in names if n.startswith("Linear")] == ["Linear[map>temporal>filter]"]
    assert cap.updates() == [((2, 6), 2, 1), ((2, 6), 6, -1)]
    _, names = _run(lambda c: c.freeze_at(_hi).map(lambda r: r).negate(), [], 1)
    assert [n for n in names if n.startswith("Linear")] == ["Linear[temporal>map>negate]"]


def test_both_bounds_none_is_the_collection_itself():
    def build(worker):
        def dataflow(scope):
            _session, c = scope.new_collection()
            return c.temporal_filter() is c

        return worker.dataflow(dataflow)

    assert tp.execute(build) == [True]


@pytest.mark.parametrize("stage", ["temporal_filter", "freeze_at"])
def test_an_incomparable_bound_fails_the_operator_naming_it(stage):
    def make(c):
        if stage == "temporal_filter":
            return c.map(lambda r: r).temporal_filter(_lo, _hi)
        return c.map(lambda r: r).freeze_at(_hi)

    with pytest.raises(OperatorError) as info:
        _run(make, [((0, 1), 0, 1), (("x", "y"), 1, 3)], 3)
    message = str(info.value)
    assert "operator 'Linear[map>temporal]'" in message
    assert "TypeError" in message and "('x', 'y')" in message and "at time 1" in message
    assert "with diff 3" in message
    assert info.value.record == ("x", "y") and info.value.time == 1 and info.value.diff == 3


# ----------------------------------------------------------------------------- nested scopes
def test_inside_iterate_the_bounds_act_on_the_outer_time():
    """Reachability over edges that each live during ``[lower, upper)``: at every outer time
    the loop's result is reachability over the edges present then."""
    edges = [((0, 1), 0, 4), ((1, 2), 2, 6), ((2, 3), 1, 3), ((0, 3), 5, 7)]

    def make(c):
        roots = c.filter(lambda r: r[0] == "root").map(lambda r: r[1])
        links = c.filter(lambda r: r[0] == "edge").map(lambda r: r[1])

        def body(reach):
            live = links.enter(reach.scope).temporal_filter(lambda e: e[1], lambda e: e[2])
            step = reach.map(lambda n: (n, ())).join(live.map(lambda e: (e[0][0], e[0][1])))
            return step.map(lambda kv: kv[1][1]).concat(roots.enter(reach.scope)).distinct()

        return roots.iterate(body)

    pushes = [(("root", 0), 0, 1)] + [(("edge", e), 0, 1) for e in edges]
    cap, _ = _run(make, pushes, 9)

    def reach(t: int) -> Dict[int, int]:
        live = {e for e, lo, hi in edges if lo <= t < hi}
        seen, frontier = {0}, [0]
        while frontier:
            n = frontier.pop()
            for a, b in live:
                if a == n and b not in seen:
                    seen.add(b)
                    frontier.append(b)
        return {n: 1 for n in seen}

    for t in range(9):
        assert cap.at(t) == reach(t), t


def test_in_a_loop_inside_a_loop_the_bounds_act_on_the_outermost_time():
    pushes = [((2, 5), 0, 1), ((0, 3), 1, 1)]

    def make(c):
        def outer(x):
            def inner(y):
                return y.temporal_filter(_lo, _hi).concat(y).distinct()

            return x.iterate(inner).temporal_filter(_lo, _hi).concat(x).distinct()

        return c.temporal_filter(_lo, _hi).iterate(outer)

    cap, _ = _run(make, pushes, 7)
    for t in range(7):
        assert cap.at(t) == {r: 1 for r, s, _ in pushes if s <= t and r[0] <= t < r[1]}, t


# ----------------------------------------------------------------------------- compaction
@pytest.mark.parametrize("events", [2_000])
def test_an_arrangement_downstream_forgets_records_whose_upper_passed(events):
    """A sliding window of ``width`` over a stream of ``events`` (one per time, ``keys``
    keys): the arranged window and its per-key counts hold updates only for the records still
    in the window (a bounded multiple of ``width``), and none for a record whose upper the
    frontier has passed."""
    width, keys = 16, 4

    def build(worker):
        def dataflow(scope):
            session, c = scope.new_collection(name="stream")
            window = c.temporal_filter(lambda e: e[1], lambda e: e[1] + width)
            arranged = window.map(lambda e: (e[0] % keys, e)).arrange_by_key(name="Window")
            counts = window.map(lambda e: e[0] % keys).count().arrange_by_self(name="Counts")
            probe = arranged.as_collection().probe()
            return session, arranged, counts, counts.as_collection().capture(), probe

        session, arranged, counts, cap, probe = worker.dataflow(dataflow)
        worst = 0
        for t in range(events):
            session.advance_to(t)
            session.insert((t, t))
            if t % 50 == 49:
                session.advance_to(t + 1)
                session.flush()
                worker.step_until(probe, t + 1, timeout=60)
                worst = max(worst, arranged.spine.stored_updates(), counts.spine.stored_updates())
        last = events - 1
        session.advance_to(events + width)
        session.flush()
        worker.step_until(probe, events + width, timeout=60)
        for a in (arranged, counts):
            a.spine.compact()
        stored = (arranged.spine.stored_updates(), counts.spine.stored_updates())
        kept = arranged.spine.keys()
        window_at_last = cap.at(last)
        session.close()
        return worst, stored, kept, window_at_last

    ((worst, stored, kept, window_at_last),) = tp.execute(build)
    assert worst <= 8 * width + 100, worst  # live records: width (+1 and -1 of each)
    assert stored == (0, 0), stored  # every record's upper has passed: nothing is held
    assert kept == set()
    expected: Dict[Tuple[int, int], int] = {}
    for e in range(events - width, events):
        expected[e % keys] = expected.get(e % keys, 0) + 1
    assert window_at_last == {(k, n): 1 for k, n in expected.items()}
