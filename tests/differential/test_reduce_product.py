"""reduce, distinct and threshold at Product(int, int) times (an iterative scope in a root scope).

Updates go in at random ``(outer, inner)`` times (the inner part through ``join_function``), in
random interleavings of input, ``advance_to`` and steps: sometimes every outer time is
buffered before the first step (as the reachability benchmark does), sometimes each is
processed alone. The output captured inside the scope must equal, at every time of the grid,
the logic applied to the input accumulated at that time. Each variant runs through every path
into the operator: the collection method, an explicit arrangement (batches), and the
arrangement-free operators :func:`reduce_product` / :func:`threshold_product`.

Then whole loops: reachability with all changes buffered (the reachability benchmark's shape)
and connected components (``examples/connectivity.py``) against breadth-first search and
union-find.
"""

from __future__ import annotations

import random
import sys
import zlib
from collections import defaultdict
from typing import Any, Callable, Dict, List, Tuple

import pytest
from oracle.graphs import reachable
from support.cases import over_seeds
from support.dataflows import reachability
from support.paths import EXAMPLES

import timelypy as tp
from timelypy.differential.collection import Collection
from timelypy.differential.reduce import (
    distinct_logic,
    is_product_order,
    reduce_product,
    threshold_logic,
    threshold_product,
)

OUTER = 5
INNER = 5


def _min_logic(key, vals):
    return [(vals[0][0], 1)]


def _sum_logic(key, vals):
    total = sum(v * c for v, c in vals)
    return [(total, 1)] if total else []


def _spread_logic(key, vals):
    # Several output values, counts other than 1, and nothing for some inputs.
    out = [(v, c) for v, c in vals if v % 2 == 0]
    if len(vals) > 1:
        out.append(("many", len(vals)))
    return out


def _at_least_two(record, count):
    return 1 if count >= 2 else 0


def _signed(record, count):
    return -1 if count < 0 else 2


LOGICS = {"min": _min_logic, "sum": _sum_logic, "spread": _spread_logic}
THRESHOLDS = {"distinct": None, "at_least_two": _at_least_two, "signed": _signed}


def _random_updates(rng: random.Random, keyed: bool, n: int) -> List[Tuple[Any, int, int, int]]:
    """``(record, outer, inner, diff)``: mostly insertions, some retractions and cancellations."""
    out = []
    for _ in range(n):
        key = rng.randrange(4)
        rec = (key, rng.randrange(5)) if keyed else key
        o, i = rng.randrange(OUTER), rng.randrange(INNER)
        d = rng.choice([1, 1, 1, 2, -1])
        out.append((rec, o, i, d))
        if rng.random() < 0.15:  # the same update undone, at the same or a later time
            out.append(
                (
                    rec,
                    o + rng.randrange(2) if o + 1 < OUTER else o,
                    i + rng.randrange(2) if i + 1 < INNER else i,
                    -d,
                )
            )
    return out


def _expected(updates, evaluate: Callable[[Dict[Any, int]], Dict[Any, int]]):
    """``{(o, i): content}`` from scratch at every time of the grid."""
    out = {}
    for o in range(OUTER):
        for i in range(INNER):
            acc: Dict[Any, int] = defaultdict(int)
            for rec, a, b, d in updates:
                if a <= o and b <= i:
                    acc[rec] += d
            out[(o, i)] = evaluate({r: c for r, c in acc.items() if c})
    return out


def _reduce_reference(logic):
    def evaluate(content):
        groups: Dict[Any, Dict[Any, int]] = defaultdict(dict)
        for (k, v), c in content.items():
            groups[k][v] = c
        out = {}
        for k, vals in groups.items():
            for v, c in logic(k, sorted(vals.items())):
                if c:
                    out[(k, v)] = out.get((k, v), 0) + c
        return {r: c for r, c in out.items() if c}

    return evaluate


def _threshold_reference(f):
    def evaluate(content):
        out = {}
        for rec, c in content.items():
            r = (1 if c > 0 else 0) if f is None else f(rec, c)
            if r:
                out[rec] = r
        return out

    return evaluate


def _run(
    updates, body: Callable[[Collection], Collection], schedule: str, seed: int, workers: int = 1
):
    """Feed ``updates`` (``record, outer, inner, diff``) through ``body`` inside an iterative
    scope; return the captured output accumulated at every time of the grid."""
    rng = random.Random(seed)
    by_outer = defaultdict(list)
    for rec, o, i, d in updates:
        # Entered at an outer time at or before its own (joined with it inside the scope), so
        # updates for later outer times are often in the scope while earlier ones are
        # evaluated.
        by_outer[rng.randrange(o + 1)].append(((rec, o, i), d))

    def build(worker):
        rng = random.Random(seed)

        def dataflow(scope):
            session, coll = scope.new_collection()

            def inner(child):
                placed = coll.enter(child).join_function(
                    lambda roi: [(roi[0], tp.Product(roi[1], roi[2]), 1)]
                )
                assert is_product_order(child.order)
                out = body(placed)
                return out.capture(), out.leave().probe()

            cap, probe = scope.iterative(inner)
            return session, cap, probe

        session, cap, probe = worker.dataflow(dataflow)
        for o in range(OUTER):
            if worker.index == 0:
                for ri, d in by_outer[o]:
                    session.update(ri, d)
            session.advance_to(o + 1)
            if schedule == "each":
                session.flush()
                worker.step_until(probe, o + 1, timeout=60)
            elif schedule == "random":
                session.flush()
                for _ in range(rng.randrange(4)):
                    worker.step()
        session.close()
        worker.step_until_done(timeout=60)
        return {(o, i): cap.at(tp.Product(o, i)) for o in range(OUTER) for i in range(INNER)}

    parts = tp.execute(build, workers=workers, backend="inline")
    merged = {}
    for t in parts[0]:
        acc: Dict[Any, int] = defaultdict(int)
        for part in parts:
            for rec, c in part[t].items():
                acc[rec] += c
        merged[t] = {r: c for r, c in acc.items() if c}
    return merged


REDUCE_PATHS = {
    "collection": lambda c, logic: c.reduce(logic),
    "arranged": lambda c, logic: c.arrange_by_key().reduce(logic),
    "updates": lambda c, logic: Collection(c.scope, reduce_product(c.inner, logic)),
}

THRESHOLD_PATHS = {
    "collection": lambda c, f: c.distinct() if f is None else c.threshold(f),
    "arranged": lambda c, f: (
        c.arrange_by_self()
        .reduce(distinct_logic if f is None else threshold_logic(f))
        .map(lambda kv: kv[0])
    ),
    "updates": lambda c, f: Collection(c.scope, threshold_product(c.inner, f)),
}


@pytest.mark.parametrize("schedule", ["buffered", "each", "random"])
@pytest.mark.parametrize("path", sorted(REDUCE_PATHS))
@pytest.mark.parametrize("logic", sorted(LOGICS))
@over_seeds(range(8))
def test_reduce_at_product_times_matches_from_scratch(seed, logic, path, schedule):
    rng = random.Random(seed * 7919 + zlib.crc32(logic.encode()) % 101)
    updates = _random_updates(rng, keyed=True, n=rng.randrange(5, 40))
    got = _run(updates, lambda c: REDUCE_PATHS[path](c, LOGICS[logic]), schedule, seed)
    assert got == _expected(updates, _reduce_reference(LOGICS[logic]))


@pytest.mark.parametrize("schedule", ["buffered", "each", "random"])
@pytest.mark.parametrize("path", sorted(THRESHOLD_PATHS))
@pytest.mark.parametrize("name", sorted(THRESHOLDS))
@over_seeds(range(8))
def test_threshold_at_product_times_matches_from_scratch(seed, name, path, schedule):
    rng = random.Random(seed * 104729 + len(name))
    updates = _random_updates(rng, keyed=False, n=rng.randrange(5, 40))
    f = THRESHOLDS[name]
    got = _run(updates, lambda c: THRESHOLD_PATHS[path](c, f), schedule, seed)
    assert got == _expected(updates, _threshold_reference(f))


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("path", ["collection", "updates"])
def test_reduce_at_product_times_on_several_workers(workers, path):
    rng = random.Random(workers)
    updates = _random_updates(rng, keyed=True, n=60)
    got = _run(updates, lambda c: REDUCE_PATHS[path](c, _min_logic), "random", 3, workers)
    assert got == _expected(updates, _reduce_reference(_min_logic))
    updates = _random_updates(rng, keyed=False, n=60)
    got = _run(updates, lambda c: THRESHOLD_PATHS[path](c, None), "buffered", 3, workers)
    assert got == _expected(updates, _threshold_reference(None))


def test_distinct_logic_on_values_other_than_unit_evaluates_groups():
    """``distinct_logic`` on an arrangement by key (values other than ``()``) is a logic like
    any other: it looks at the first value's count, which the count-only path cannot do."""
    rng = random.Random(5)
    updates = _random_updates(rng, keyed=True, n=40)
    got = _run(updates, lambda c: c.arrange_by_key().reduce(distinct_logic), "buffered", 1)
    assert got == _expected(updates, _reduce_reference(distinct_logic))


def test_reduce_output_error_at_product_times():
    with pytest.raises(tp.ReduceOutputError):
        _run([((1, 2), 0, 0, 1)], lambda c: c.reduce(lambda k, vals: [(1, "x")]), "buffered", 0)
    with pytest.raises(tp.ReduceOutputError):
        _run([(1, 0, 0, 1)], lambda c: c.threshold(lambda r, n: "x"), "buffered", 0)


# ------------------------------------------------------------------------------- whole loops
@pytest.mark.parametrize("buffered", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_reachability_with_buffered_changes(seed, buffered):
    """The reachability benchmark's program and driver on a small graph: every change buffered
    before the first step (all outer times in the loop at once), or each change stepped to
    completion."""
    rng = random.Random(seed)
    n = 60
    edges = set()
    while len(edges) < 2 * n:
        edges.add((rng.randrange(n), rng.randrange(n)))
    changes, current = [], set(edges)
    for t in range(1, 40):
        old = rng.choice(sorted(current))
        new = (rng.randrange(n), rng.randrange(n))
        if new in current:
            continue
        current.discard(old)
        current.add(new)
        changes.append((t, old, new))
    roots = (1,)

    def build(worker):
        reach: Dict[Any, int] = defaultdict(int)
        snapshots = []

        def dataflow(scope):
            es, e = scope.new_collection()
            rs, r = scope.new_collection()
            out = reachability(e, r)
            probe = out.inspect(lambda u: reach.__setitem__(u[0], reach[u[0]] + u[2])).probe()
            return es, rs, probe

        es, rs, probe = worker.dataflow(dataflow)
        for x in roots:
            rs.insert(x)
        rs.close()
        for edge in sorted(edges):
            es.insert(edge)
        es.advance_to(1)
        es.flush()
        worker.step_until(probe, 1, timeout=60)
        snapshots.append({x for x, c in reach.items() if c > 0})
        for t, old, new in changes:
            es.remove(old)
            es.insert(new)
            es.advance_to(t + 1)
            if not buffered:
                es.flush()
                worker.step_until(probe, t + 1, timeout=60)
                snapshots.append({x for x, c in reach.items() if c > 0})
        es.close()
        worker.step_until_done(timeout=60)
        assert all(c in (0, 1) for c in reach.values())
        snapshots.append({x for x, c in reach.items() if c > 0})
        return snapshots

    snapshots = tp.execute(build, workers=1, backend="inline")[0]
    assert snapshots[0] == reachable(edges, roots)
    assert snapshots[-1] == reachable(current, roots)
    if not buffered:
        state = set(edges)
        for (t, old, new), snap in zip(changes, snapshots[1:]):
            state.discard(old)
            state.add(new)
            assert snap == reachable(state, roots), t


def test_connected_components_under_micro_batches():
    """``examples/connectivity.py``'s view after a load and batches of edge changes."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        from connectivity import connected_labels, union_find_labels
    finally:
        sys.path.pop(0)
    rng = random.Random(11)
    n = 300
    graph = set()
    while len(graph) < n:
        a, b = rng.randrange(n), rng.randrange(n)
        if a != b:
            graph.add((min(a, b), max(a, b)))
    batches = []
    current = set(graph)
    for _ in range(4):
        batch = []
        for victim in rng.sample(sorted(current), 15):
            current.discard(victim)
            batch.append((victim, -1))
        while len(batch) < 30:
            a, b = rng.randrange(n), rng.randrange(n)
            if a != b and (min(a, b), max(a, b)) not in current:
                current.add((min(a, b), max(a, b)))
                batch.append(((min(a, b), max(a, b)), 1))
        batches.append(batch)

    def expected(g):
        directed = g | {(b, a) for a, b in g}
        return {(x, lbl): 1 for x, lbl in union_find_labels(directed).items()}

    def dataflow(scope):
        session, edges = scope.new_collection("edges")
        labels = connected_labels(edges.flat_map(lambda e: [e, (e[1], e[0])]))
        return {"edges": session, "labels": labels.capture(), "probe": labels.probe()}

    with tp.open_session(dataflow, workers=1, backend="inline", timeout=120) as s:
        labels: Dict[Any, int] = {}

        def take():
            for data, _t, diff in s.changes("labels"):
                labels[data] = labels.get(data, 0) + diff
                if not labels[data]:
                    del labels[data]

        s.update_many("edges", sorted(graph))
        s.advance_to(1)
        s.wait("probe")
        take()
        state = set(graph)
        assert labels == expected(state)
        for i, batch in enumerate(batches):
            for e, d in batch:
                (s.insert if d > 0 else s.remove)("edges", e)
                (state.add if d > 0 else state.discard)(e)
            s.advance_to(i + 2)
            s.wait("probe")
            take()
            assert labels == expected(state), i


# ------------------------------------------------------------------------------- the kernels
def _joins_brute_force(fresh, times):
    """Every join of a non-empty subset of ``fresh | times`` that holds a fresh time."""
    out = set(fresh)
    frontier = set(fresh)
    pool = set(fresh) | set(times)
    while frontier:
        new = set()
        for c in frontier:
            for x in pool:
                j = (max(c[0], x[0]), max(c[1], x[1]))
                if j not in out:
                    new.add(j)
        out |= new
        frontier = new
    return out


@over_seeds(range(300))
def test_closure_is_every_join_with_a_fresh_time(seed):
    from timelypy.differential.kernel.histories import closure as _closure

    rng = random.Random(seed)

    def some_times(k):
        return [(rng.randrange(5), rng.randrange(5)) for _ in range(k)]

    fresh = set(some_times(rng.randrange(1, 4)))
    hin = [("v", a, b, 1) for a, b in some_times(rng.randrange(0, 8))]
    hout = [("w", a, b, -1) for a, b in some_times(rng.randrange(0, 5))] or None
    known = set(some_times(rng.randrange(0, 4))) | set(fresh)
    got = _closure(fresh, hin, hout, known)
    times = {(a, b) for _, a, b, _ in hin + (hout or [])} | known
    assert got | known == _joins_brute_force(fresh, times) | known


@over_seeds(range(100))
def test_minimal_and_compaction_kernels(seed):
    from timelypy.differential.kernel.histories import compact_flat as _compact_flat
    from timelypy.differential.kernel.histories import minimal as _minimal

    rng = random.Random(seed)
    times = {(rng.randrange(6), rng.randrange(6)) for _ in range(rng.randrange(12))}
    minimal = [t for t in times if not any(u != t and u[0] <= t[0] and u[1] <= t[1] for u in times)]
    low: Dict[int, int] = {}
    for a, b in times:
        low[b] = min(a, low.get(b, a))
    assert sorted(_minimal(low)) == sorted(minimal)
    hist = [
        (rng.randrange(3), rng.randrange(6), rng.randrange(6), rng.choice([1, -1, 2]))
        for _ in range(rng.randrange(15))
    ]
    m0, m1 = rng.randrange(4), rng.randrange(4)
    compacted = _compact_flat(hist, m0, m1)
    # The same accumulation at every time at or beyond (m0, m1); consolidated.
    for o in range(m0, 7):
        for i in range(m1, 7):

            def acc(h, o=o, i=i):
                out: Dict[Any, int] = defaultdict(int)
                for v, a, b, r in h:
                    if a <= o and b <= i:
                        out[v] += r
                return {v: r for v, r in out.items() if r}

            assert acc(compacted) == acc(hist)
    keys = [(v, a, b) for v, a, b, _ in compacted]
    assert len(keys) == len(set(keys)) and all(r for *_, r in compacted)
    assert all(a >= m0 and b >= m1 for _, a, b, _ in compacted)
