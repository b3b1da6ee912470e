"""Property tests of timelypy.progress: ChangeBatch, Antichain, MutableAntichain, reachability.

Each property is checked against a brute-force oracle (``oracle.order``,
``oracle.reachability``); the invariants checked are I1 (no frontier regresses), I4 (the
tracker agrees with a from-scratch computation) and I7 (cycles must advance time).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle.order import PS, grid, is_antichain, minimal_elements, upset
from oracle.reachability import (
    brute_force_summaries,
    identity_cycle_nodes,
    identity_graph,
    reachable_sets,
)
from support.progress_strategies import SHAPES, GraphSpec, graphs, times_of_shape

from timelypy.errors import CycleError
from timelypy.order import (
    INT_ORDER,
    MAX_INT_TIME,
    IntSummary,
    Product,
    join,
    less_equal,
)
from timelypy.progress import (
    Antichain,
    ChangeBatch,
    MutableAntichain,
    ReachabilityBuilder,
    Source,
    Target,
    antichain_join,
    antichain_meet,
)

FAST = settings(max_examples=150, deadline=None)

SMALL_GRIDS = {
    "int": grid("int", 4),
    "p": grid("p", 3),
    "pp": grid("pp", 2),
    "p_inner": grid("p_inner", 2),
}


@st.composite
def grid_sets(draw, n_sets=2, max_size=5):
    """``(shape, universe, [set1, set2, ...])`` with every element drawn from a finite grid."""
    shape = draw(st.sampled_from(SHAPES))
    g = SMALL_GRIDS[shape]
    sets = [draw(st.lists(st.sampled_from(g), max_size=max_size)) for _ in range(n_sets)]
    return shape, g, sets


# ======================================================================================
# ChangeBatch


@FAST
@given(
    st.sampled_from(["int", "p"]).flatmap(
        lambda shape: st.lists(
            st.lists(st.tuples(times_of_shape(shape, 0, 3), st.integers(-3, 3)), max_size=6),
            max_size=6,
        )
    )
)
def test_change_batch_equals_dict_accumulation(batches):
    cb = ChangeBatch()
    model: dict = {}
    for k, batch in enumerate(batches):
        if k % 2:
            cb.extend(batch)
        else:
            for item, d in batch:
                cb.update(item, d)
        for item, d in batch:
            model[item] = model.get(item, 0) + d
        expected = sorted((i, c) for i, c in model.items() if c != 0)
        assert cb.items() == expected
        assert list(cb) == expected
        assert len(cb) == len(expected)
        assert cb.is_empty() == (not expected) == (not cb)
        for item in model:
            assert cb.get(item) == model[item]
        assert ChangeBatch(batch_pair for b in batches[: k + 1] for batch_pair in b) == cb
    drained = cb.drain()
    assert drained == sorted((i, c) for i, c in model.items() if c != 0)
    assert all(c != 0 for _, c in drained)
    assert [i for i, _ in drained] == sorted(i for i, _ in drained)
    assert cb.is_empty() and len(cb) == 0 and cb.items() == [] and cb.drain() == []


@FAST
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(-2, 2)), max_size=12),
    st.lists(st.tuples(st.integers(0, 5), st.integers(-2, 2)), max_size=12),
)
def test_change_batch_drain_into_and_unsorted(a, b):
    x, y = ChangeBatch(a), ChangeBatch(b)
    expected = Counter()
    for i, d in a + b:
        expected[i] += d
    x.drain_into(y)
    assert x.is_empty()
    assert dict(y.items()) == {i: c for i, c in expected.items() if c}
    z = ChangeBatch(b)
    assert sorted(z.drain_unsorted()) == sorted((i, c) for i, c in _acc(b).items() if c)
    assert z.is_empty()


def _acc(pairs):
    out: dict = {}
    for i, d in pairs:
        out[i] = out.get(i, 0) + d
    return out


def test_change_batch_drops_zero_and_single_zero():
    cb = ChangeBatch()
    cb.update(3, 0)
    assert cb.is_empty() and cb.items() == []
    cb.update(3, 1)
    cb.update(1, 2)
    cb.update(3, -1)
    assert cb.drain() == [(1, 2)]
    assert cb.is_empty()


# ======================================================================================
# Antichain


@FAST
@given(grid_sets(n_sets=1, max_size=10))
def test_antichain_insert_keeps_minimal_elements(x):
    shape, _, (ts,) = x
    a = Antichain()
    inserted = []
    for t in ts:
        before = list(a)
        expected_insert = not any(less_equal(e, t) for e in before)
        assert a.insert(t) == expected_insert
        inserted.append(t)
        assert set(a) == minimal_elements(inserted)
        assert is_antichain(list(a))
        assert a.elements() == sorted(a)
    assert Antichain(ts) == a
    assert len(Antichain(ts)) == len(minimal_elements(ts))
    assert hash(Antichain(ts)) == hash(Antichain(list(reversed(ts))))
    assert Antichain(ts) == Antichain(minimal_elements(ts))
    assert a.is_empty() == (not ts) == (not a)


@FAST
@given(grid_sets(n_sets=2, max_size=6))
def test_antichain_less_equal_less_than_brute_force(x):
    shape, g, (ts, probes) = x
    a = Antichain(ts)
    for t in probes + g[:: max(1, len(g) // 10)]:
        assert a.less_equal(t) == any(less_equal(u, t) for u in ts)
        assert a.less_than(t) == any(less_equal(u, t) and u != t for u in ts)


@FAST
@given(grid_sets(n_sets=2, max_size=5))
def test_antichain_order_is_upper_set_inclusion(x):
    _, g, (xs, ys) = x
    A, B = Antichain(xs), Antichain(ys)
    # A <= B iff B's upper set (within the grid) is contained in A's
    assert A.le(B) == (upset(B, g) <= upset(A, g))
    assert B.le(A) == (upset(A, g) <= upset(B, g))
    assert A.le(A)
    if A.le(B) and B.le(A):
        assert A == B
    # [] is the greatest antichain, [min] the least
    assert A.le(Antichain())
    assert Antichain([g[0]]).le(A)
    if A:
        assert not Antichain().le(A)


@FAST
@given(grid_sets(n_sets=3, max_size=4))
def test_antichain_order_transitive(x):
    _, _, (xs, ys, zs) = x
    A, B, C = Antichain(xs), Antichain(ys), Antichain(zs)
    if A.le(B) and B.le(C):
        assert A.le(C)


@FAST
@given(grid_sets(n_sets=2, max_size=5))
def test_antichain_meet_join_brute_force(x):
    _, g, (xs, ys) = x
    m = antichain_meet(xs, ys)
    j = antichain_join(xs, ys, join)
    # meet: upper set is the union; join: upper set is the intersection (grid closed under join)
    assert set(m) == minimal_elements(upset(xs, g) | upset(ys, g))
    assert set(j) == minimal_elements(upset(xs, g) & upset(ys, g))
    assert is_antichain(list(m)) and is_antichain(list(j))
    A, B = Antichain(xs), Antichain(ys)
    # greatest lower bound / least upper bound in the antichain order
    assert m.le(A) and m.le(B)
    assert A.le(j) and B.le(j)
    for zs in (xs[:1], ys[:1], xs[:1] + ys[-1:], []):
        C = Antichain(zs)
        if C.le(A) and C.le(B):
            assert C.le(m)
        if A.le(C) and B.le(C):
            assert j.le(C)


def test_antichain_vectors():
    a = Antichain([Product(1, 2), Product(2, 1), Product(2, 2)])
    assert sorted(a) == [Product(1, 2), Product(2, 1)]
    assert a.less_equal(Product(2, 2)) and a.less_than(Product(2, 2))
    assert a.less_equal(Product(1, 2)) and not a.less_than(Product(1, 2))
    assert not a.less_equal(Product(0, 5))
    assert antichain_join([Product(3, 7)], [Product(4, 6)], join) == Antichain([Product(4, 7)])
    assert antichain_meet([Product(3, 7)], [Product(4, 6)]) == Antichain(
        [Product(3, 7), Product(4, 6)]
    )
    assert antichain_join([], [Product(1, 1)], join) == Antichain()  # [] is the top
    assert antichain_meet([], [Product(1, 1)]) == Antichain([Product(1, 1)])
    assert Antichain.from_elem(5) == Antichain([5])


@FAST
@given(
    st.lists(
        st.builds(
            Product, st.builds(Product, st.integers(0, 2), st.integers(0, 2)), st.integers(0, 2)
        ),
        max_size=8,
    )
)
def test_antichain_with_custom_order(ts):
    order = INT_ORDER.nested().nested()
    a = Antichain(ts, le=order.le)
    assert set(a) == minimal_elements(ts)
    m = MutableAntichain(order.le)
    m.update_iter((t, 1) for t in ts)
    m._check()
    assert set(m.frontier) == set(a)


# ======================================================================================
# MutableAntichain


def _apply_changes(prev, changes):
    c = Counter(prev)
    for t, d in changes:
        c[t] += d
    return c


def _check_mutable(m, counts, prev, changes):
    positive = [t for t, c in counts.items() if c > 0]
    expected = minimal_elements(positive)
    assert set(m.frontier) == expected
    assert len(m.frontier) == len(expected)
    m._check()
    # the frontier changes turn the previous frontier into the new one (as a multiset)
    times = [t for t, _ in changes]
    assert len(times) == len(set(times)), changes  # consolidated
    assert all(d in (1, -1) for _, d in changes), changes
    c = _apply_changes(prev, changes)
    assert all(v in (0, 1) for v in c.values()), (prev, changes)
    assert {t for t, v in c.items() if v == 1} == set(m.frontier)
    for t, cnt in counts.items():
        assert m.count_for(t) == cnt
    assert {t: v for t, v in m.counts().items()} == {t: v for t, v in counts.items() if v}
    assert m.is_empty() == (not expected)
    assert set(m.antichain()) == expected


@FAST
@given(
    st.sampled_from(["int", "p", "pp"]).flatmap(
        lambda shape: st.lists(
            st.lists(
                st.tuples(times_of_shape(shape, 0, 3), st.integers(-2, 2)), min_size=1, max_size=5
            ),
            max_size=12,
        )
    )
)
def test_mutable_antichain_random_updates(batches):
    m = MutableAntichain()
    counts: dict = {}
    for k, batch in enumerate(batches):
        prev = list(m.frontier)
        if k % 3 == 2 and len(batch) == 1:
            changes = m.update(*batch[0])
        else:
            changes = m.update_iter(batch)
        for t, d in batch:
            counts[t] = counts.get(t, 0) + d
        _check_mutable(m, counts, prev, changes)
        probe = batch[0][0]
        pos = [t for t, c in counts.items() if c > 0]
        assert m.less_equal(probe) == any(less_equal(u, probe) for u in pos)
        assert m.less_than(probe) == any(less_equal(u, probe) and u != probe for u in pos)
    # cancel everything: the frontier empties
    prev = list(m.frontier)
    changes = m.update_iter((t, -c) for t, c in list(counts.items()))
    counts = {t: 0 for t in counts}
    _check_mutable(m, counts, prev, changes)
    assert m.frontier == [] and m.is_empty()


@FAST
@given(
    st.lists(
        st.tuples(st.builds(Product, st.integers(0, 3), st.integers(0, 3)), st.integers(1, 2)),
        min_size=1,
        max_size=8,
    ),
    st.randoms(),
)
def test_mutable_antichain_transient_negatives(pos, rnd):
    """Retractions that arrive before their insertions (in separate batches) are ignored by the
    frontier until the matching positive arrives; then both cancel."""
    m = MutableAntichain()
    counts: dict = {}
    neg = [(t, -d) for t, d in pos]
    rnd.shuffle(neg)
    for t, d in neg:
        prev = list(m.frontier)
        ch = m.update(t, d)
        counts[t] = counts.get(t, 0) + d
        _check_mutable(m, counts, prev, ch)
        assert m.frontier == []
    for t, d in pos:
        prev = list(m.frontier)
        ch = m.update(t, d)
        counts[t] = counts.get(t, 0) + d
        _check_mutable(m, counts, prev, ch)
    assert m.frontier == [] and m.counts() == {}


@st.composite
def capability_scripts(draw):
    """Scripts of a capability holder: acquire at or after a held time, downgrade, release."""
    shape = draw(st.sampled_from(["int", "p", "pp"]))
    start = draw(st.lists(times_of_shape(shape, 0, 2), min_size=1, max_size=3))
    n_steps = draw(st.integers(1, 15))
    steps = []
    for _ in range(n_steps):
        steps.append(
            (
                draw(st.sampled_from(["acquire", "release", "downgrade", "batch"])),
                draw(st.integers(0, 1000)),
                draw(times_of_shape(shape, 0, 2)),
            )
        )
    return shape, start, steps


def _advance(t, delta):
    """``t`` moved forward by the (same-shaped) non-negative offset ``delta``."""
    if isinstance(t, Product):
        return Product(_advance(t[0], delta[0]), _advance(t[1], delta[1]))
    return t + delta


@FAST
@given(capability_scripts())
def test_mutable_antichain_frontier_never_regresses(script):
    """I1: counts that only ever move forward (new times are at or after a held time) never make
    the frontier regress: each new frontier F' satisfies F <= F'."""
    _, start, steps = script
    m = MutableAntichain()
    counts: Counter = Counter()
    m.update_iter((t, 1) for t in start)
    counts.update(start)
    for kind, pick, delta in steps:
        held = sorted(t for t, c in counts.items() if c > 0)
        if not held:
            break
        h = held[pick % len(held)]
        t = _advance(h, delta)
        if kind == "acquire":
            batch = [(t, 1)]
        elif kind == "release":
            batch = [(h, -1)]
        elif kind == "downgrade":
            batch = [(t, 1), (h, -1)]
        else:  # a batch with a transient negative: release first, then re-acquire later
            batch = [(h, -1), (t, 1), (t, 1), (t, -1)]
        prev = list(m.frontier)
        changes = m.update_iter(batch)
        for x, d in batch:
            counts[x] += d
        _check_mutable(m, counts, prev, changes)
        assert Antichain(prev).le(Antichain(m.frontier)), (prev, m.frontier)
        assert all(any(less_equal(p, f) for p in prev) for f in m.frontier)


def test_mutable_antichain_vectors():
    m = MutableAntichain()
    assert m.update_iter([(3, 1), (5, 1)]) == [(3, 1)]
    assert sorted(m.update_iter([(3, -1)])) == [(3, -1), (5, 1)]
    assert m.update_iter([(7, 1)]) == []  # beyond the frontier: no change
    assert m.update_iter([(2, -1)]) == []  # negative where nothing was: ignored
    assert m.frontier == [5] and m.count_for(2) == -1
    assert m.update_iter([(2, 1)]) == []  # cancels the transient negative
    assert sorted(m.update_iter([(5, -1), (7, -1)])) == [(5, -1)]
    assert m.is_empty()
    f = MutableAntichain.from_elem(Product(0, 0))
    f._check()
    assert f.frontier == [Product(0, 0)] and f.count_for(Product(0, 0)) == 1
    p = MutableAntichain()
    assert sorted(p.update_iter([(Product(1, 0), 1), (Product(0, 1), 1), (Product(1, 1), 1)])) == [
        (Product(0, 1), 1),
        (Product(1, 0), 1),
    ]
    assert sorted(p.update_iter([(Product(1, 0), -1)])) == [(Product(1, 0), -1)]
    assert p.frontier == [Product(0, 1)]


# ======================================================================================
# Reachability: cycle detection


def _names_in_cycle_message(msg):
    """Operator names listed after the last ': ' (``a -> b -> a``), in order."""
    tail = msg.rsplit(": ", 1)[-1]
    return [n.strip() for n in tail.split("->") if n.strip()]


def _assert_message_names_a_cycle(spec: GraphSpec, msg: str):
    """The message lists operators in cycle order (closing the cycle or not): every one lies on
    an identity cycle, consecutive distinct ones (cyclically) are joined by a dataflow edge, and
    all of them are on one identity cycle (same strongly connected component)."""
    names = _names_in_cycle_message(msg)
    assert names, msg
    assert all(re.fullmatch(r"op\d+", n) for n in names), msg
    nodes = [int(n[2:]) for n in names]
    on_cycles = identity_cycle_nodes(spec)
    assert set(nodes) <= on_cycles, (msg, on_cycles)
    # the cyclic sequence of operators (consecutive repeats merged, closing repeat dropped)
    seq = [n for k, n in enumerate(nodes) if k == 0 or n != nodes[k - 1]]
    if len(seq) > 1 and seq[-1] == seq[0]:
        seq.pop()
    edge_pairs = {(s.node, t.node) for s, t in spec.edges}
    for a, b in zip(seq, seq[1:] + seq[:1]):  # a one-operator cycle needs a self edge
        assert (a, b) in edge_pairs, (msg, a, b)
    # and all of them lie on one identity cycle (same strongly connected component)
    reach = reachable_sets(identity_graph(spec))
    cyc = [loc for loc, r in reach.items() if loc in r]
    anchors = [loc for loc in cyc if loc.node == nodes[0]]
    assert any(
        all(
            any((loc in reach[a] and a in reach[loc]) for loc in cyc if loc.node == n)
            for n in set(nodes)
        )
        for a in anchors
    ), msg


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_cycle_check_matches_brute_force(spec):
    on_cycle = identity_cycle_nodes(spec)
    b = spec.builder()
    if on_cycle:
        with pytest.raises(CycleError) as e1:
            b.check_acyclic()
        _assert_message_names_a_cycle(spec, str(e1.value))
        with pytest.raises(CycleError) as e2:
            spec.builder().build(less_equal)
        _assert_message_names_a_cycle(spec, str(e2.value))
    else:
        b.check_acyclic()
        tracker = b.build(less_equal)
        assert set(tracker.implications) == {t for t in spec.targets() if t.node != 0}


# ======================================================================================
# Reachability: path summaries


def _acyclic_graphs(**kw):
    return graphs(**kw).filter(lambda g: not identity_cycle_nodes(g))


def _as_sets(d):
    return {loc: set(ss) for loc, ss in d.items()}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(_acyclic_graphs())
def test_summaries_from_matches_path_enumeration(spec):
    b = spec.builder()
    for loc in spec.locations():
        got = b.summaries_from(loc)
        for tgt, ss in got.items():
            assert not tgt.is_source
            assert len(ss) == len(set(ss))
            assert all(not x.less_equal(y) for x, y in itertools.permutations(ss, 2)), ss
        assert _as_sets(got) == brute_force_summaries(spec, loc), (loc, got)
    if 0 in spec.nodes:
        n_out, n_in = spec.nodes[0][0], spec.nodes[0][1]
        sc = b.scope_summary(n_in, n_out)
        for i in range(n_in):
            bf = brute_force_summaries(spec, Source(0, i))
            for j in range(n_out):
                assert set(sc[i][j]) == bf.get(Target(0, j), set())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(_acyclic_graphs(max_nodes=4))
def test_path_enumeration_bound_is_enough(spec):
    """Sanity check of the oracle: doubling the walk-length bound finds nothing new."""
    n = len(spec.locations())
    for loc in spec.locations():
        assert brute_force_summaries(spec, loc, n) == brute_force_summaries(spec, loc, 2 * n + 2)


# ======================================================================================
# Reachability: the tracker (I4)


_INNER = st.one_of(st.integers(0, 3), st.sampled_from([MAX_INT_TIME - 1, MAX_INT_TIME]))
_TRACKER_TIMES = st.builds(Product, st.integers(0, 3), _INNER)


def _brute_implications(spec, summaries, counts, tgt, skip_node0=False):
    out = set()
    for (loc, t), c in counts.items():
        if c <= 0 or (skip_node0 and loc.node == 0):
            continue
        for s in summaries[loc].get(tgt, ()):
            u = s.results_in(t)
            if u is not None:
                out.add(u)
    return minimal_elements(out)


@settings(
    max_examples=70,
    deadline=None,
    suppress_health_check=[
        HealthCheck.filter_too_much,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(_acyclic_graphs(), st.data())
def test_tracker_matches_brute_force(spec, data):
    b = spec.builder()
    tracker = b.build(less_equal)
    locs = spec.locations()
    summaries = {loc: brute_force_summaries(spec, loc) for loc in locs}
    counts: Counter = Counter()
    history = []  # every update applied, for retractions
    targets = [t for t in spec.targets() if t.node != 0]
    outputs = [Target(0, j) for j in range(spec.nodes[0][0])] if 0 in spec.nodes else []

    def check(pushed, prev_frontiers):
        tracker._check()
        for tgt in targets:
            imp = tracker.implications[tgt]
            imp._check()
            expected = _brute_implications(spec, summaries, counts, tgt)
            assert set(imp.frontier) == expected, (tgt, imp.frontier, expected)
            assert set(tracker.frontier_at(tgt)) == expected
            # the reported changes turn the previous frontier into the new one
            c = _apply_changes(prev_frontiers[tgt], pushed.get(tgt, []))
            assert {t for t, v in c.items() if v} == expected, (tgt, pushed.get(tgt))
            assert all(v in (0, 1) for v in c.values())
        assert set(pushed) <= set(targets)
        # scope outputs: implications caused by locations inside the scope
        for out in outputs:
            oc = tracker.output_changes.get(out.port, ChangeBatch())
            assert all(v > 0 for _, v in oc.items())
            got = minimal_elements(t for t, _ in oc.items())
            assert got == _brute_implications(spec, summaries, counts, out, skip_node0=True)
        assert tracker.total_counts == sum(counts.values())
        for n in spec.nodes:
            caps = sum(c for (loc, _), c in counts.items() if loc.is_source and loc.node == n)
            assert tracker.holds_capabilities(n) == (caps > 0)
        # Any non-zero count (a transient -n must not hide a real +n elsewhere).
        assert tracker.tracking_anything() == any(c != 0 for c in counts.values())

    n_rounds = data.draw(st.integers(1, 6), label="rounds")
    for _ in range(n_rounds):
        batch = []
        for _ in range(data.draw(st.integers(1, 5), label="batch size")):
            kind = data.draw(st.sampled_from(["add", "add", "retract", "neg"]), label="kind")
            if kind == "retract" and history:
                loc, t, d = data.draw(st.sampled_from(history), label="retract")
                batch.append((loc, t, -d))
            else:
                loc = data.draw(st.sampled_from(locs), label="loc")
                t = data.draw(_TRACKER_TIMES, label="time")
                batch.append((loc, t, -1 if kind == "neg" else 1))
        prev = {tgt: list(tracker.implications[tgt].frontier) for tgt in targets}
        for loc, t, d in batch:
            tracker.update(loc, t, d)
            counts[(loc, t)] += d
        assert tracker.has_staged()
        pushed = tracker.propagate_all()
        assert not tracker.has_staged()
        history.extend(batch)
        check(pushed, prev)
    # cancel everything that is left: every implication empties
    prev = {tgt: list(tracker.implications[tgt].frontier) for tgt in targets}
    for (loc, t), c in list(counts.items()):
        if c:
            tracker.update(loc, t, -c)
            counts[(loc, t)] = 0
    pushed = tracker.propagate_all()
    check(pushed, prev)
    assert all(tracker.implications[tgt].is_empty() for tgt in targets)
    assert tracker.total_counts == 0
    assert tracker.propagate_all() == {}


# ======================================================================================
# Fixed vectors (I7)


def test_chain_input_map_probe():
    b = ReachabilityBuilder(IntSummary(0))
    b.add_node(1, 0, 1, [], name="input")
    b.add_node(2, 1, 1, [[[IntSummary(0)]]], name="map")
    b.add_node(3, 1, 0, [[]], name="probe")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(3, 0))
    assert b.summaries_from(Source(1, 0)) == {
        Target(2, 0): [IntSummary(0)],
        Target(3, 0): [IntSummary(0)],
    }
    tr = b.build(INT_ORDER.le)
    tr.update_source(1, 0, 0, 1)
    pushed = tr.propagate_all()
    assert pushed == {Target(2, 0): [(0, 1)], Target(3, 0): [(0, 1)]}
    # the input advances to 3 and sends a message at 1
    tr.update_source(1, 0, 3, 1)
    tr.update_source(1, 0, 0, -1)
    tr.update_target(2, 0, 1, 1)
    tr.propagate_all()
    tr._check()
    assert tr.frontier_at(Target(2, 0)) == [1] and tr.frontier_at(Target(3, 0)) == [1]
    # map consumes it and forwards it
    tr.update_target(2, 0, 1, -1)
    tr.update_target(3, 0, 1, 1)
    tr.propagate_all()
    assert tr.frontier_at(Target(2, 0)) == [3] and tr.frontier_at(Target(3, 0)) == [1]
    tr.update_target(3, 0, 1, -1)
    tr.update_source(1, 0, 3, -1)  # input closed
    tr.propagate_all()
    tr._check()
    assert tr.frontier_at(Target(2, 0)) == [] and tr.frontier_at(Target(3, 0)) == []
    assert not tr.tracking_anything()


def _loop_builder(feedback_summary):
    """input(1) -> concat(2).0 ; concat -> body(3) ; body -> feedback(4) -> concat.1 ;
    body -> probe(5)."""
    ident = PS(0, 0)
    b = ReachabilityBuilder(ident)
    b.add_node(1, 0, 1, [], name="input")
    b.add_node(2, 2, 1, [[[ident]], [[ident]]], name="concat")
    b.add_node(3, 1, 1, [[[ident]]], name="body")
    b.add_node(4, 1, 1, [[[feedback_summary]]], name="feedback")
    b.add_node(5, 1, 0, [[]], name="probe")
    b.add_edge(Source(1, 0), Target(2, 0))
    b.add_edge(Source(2, 0), Target(3, 0))
    b.add_edge(Source(3, 0), Target(4, 0))
    b.add_edge(Source(4, 0), Target(2, 1))
    b.add_edge(Source(3, 0), Target(5, 0))
    return b


def test_loop_with_advancing_feedback_builds_and_completes():
    b = _loop_builder(PS(0, 1))
    b.check_acyclic()
    assert b.summaries_from(Target(2, 0))[Target(2, 1)] == [PS(0, 1)]
    assert b.summaries_from(Target(2, 1))[Target(2, 1)] == [PS(0, 0)]
    assert b.summaries_from(Source(4, 0))[Target(5, 0)] == [PS(0, 0)]
    tr = b.build(less_equal)
    P = Product
    tr.update_source(1, 0, P(0, 0), 1)
    tr.propagate_all()
    tr._check()
    assert tr.frontier_at(Target(2, 1)) == [P(0, 1)]
    assert tr.frontier_at(Target(5, 0)) == [P(0, 0)]
    # one record enters at (0, 0); the input then closes
    tr.update_target(2, 0, P(0, 0), 1)
    tr.update_source(1, 0, P(0, 0), -1)
    tr.propagate_all()
    tr._check()
    # the record circulates 5 times through concat -> body -> feedback, then is dropped
    probe_frontiers = [list(tr.frontier_at(Target(5, 0)))]
    loc, t = Target(2, 0), P(0, 0)
    for i in range(5):
        for nxt in (Target(3, 0), Target(4, 0)):
            tr.update(loc, t, -1)
            tr.update(nxt, t, 1)
            tr.propagate_all()
            tr._check()
            loc = nxt
        t2 = P(0, i + 1)
        tr.update(loc, t, -1)
        tr.update(Target(2, 1), t2, 1)
        tr.propagate_all()
        tr._check()
        loc, t = Target(2, 1), t2
        probe_frontiers.append(list(tr.frontier_at(Target(5, 0))))
    tr.update(loc, t, -1)
    tr.propagate_all()
    tr._check()
    probe_frontiers.append(list(tr.frontier_at(Target(5, 0))))
    assert probe_frontiers == [[P(0, 0)], [P(0, 1)], [P(0, 2)], [P(0, 3)], [P(0, 4)], [P(0, 5)], []]
    assert not tr.tracking_anything()


@pytest.mark.parametrize("call", ["check_acyclic", "build"])
def test_loop_with_identity_feedback_raises_cycle_error(call):
    b = _loop_builder(PS(0, 0))
    with pytest.raises(CycleError) as e:
        b.check_acyclic() if call == "check_acyclic" else b.build(less_equal)
    msg = str(e.value)
    for name in ("concat", "body", "feedback"):
        assert name in msg, msg
    for name in ("input", "probe"):
        assert name not in _names_in_cycle_message(msg), msg


def test_loop_with_outer_advancing_feedback_builds():
    # a cycle that advances only the outer coordinate is still strictly advancing
    b = _loop_builder(PS(1, 0))
    b.build(less_equal)


def test_loop_summaries_overflow_drop():
    """A pointstamp whose loop-around would overflow contributes only where it is."""
    b = _loop_builder(PS(0, 1))
    tr = b.build(less_equal)
    t = Product(0, MAX_INT_TIME)
    tr.update_target(3, 0, t, 1)
    tr.propagate_all()
    tr._check()
    assert tr.frontier_at(Target(3, 0)) == [t]
    assert tr.frontier_at(Target(4, 0)) == [t]
    assert tr.frontier_at(Target(2, 1)) == []  # feedback result overflowed: dropped
    tr.update_target(3, 0, t, -1)
    tr.propagate_all()
    assert all(tr.frontier_at(x) == [] for x in tr.implications)


def test_edge_validation():
    b = ReachabilityBuilder(PS(0, 0))
    b.add_node(1, 1, 1, [[[PS(0, 0)]]])
    b.add_node(2, 1, 1, [[[PS(0, 0)]]])
    b.add_edge(Source(1, 0), Target(2, 0))
    with pytest.raises(ValueError):
        b.add_edge(Source(1, 0), Target(2, 0))  # a target has at most one incoming edge
    with pytest.raises(ValueError):
        b.add_edge(Target(1, 0), Target(2, 0))
    with pytest.raises(ValueError):
        b.add_node(3, 2, 1, [[[PS(0, 0)]]])  # wrong summary shape
