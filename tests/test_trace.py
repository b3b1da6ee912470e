"""Traces: sequential access by key, value, time; compaction keeps accumulations; the spine's
invariants under random insert / merge / compact sequences; merge events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.differential.agent import TraceAgent
from timelypy.differential.consolidation import advance_time
from timelypy.differential.trace import Spine
from timelypy.order import INT_ORDER, Product, order_for


def _insert(spine, updates, upper):
    data = {}
    for k, v, t, r in updates:
        data.setdefault(k, []).append((v, t, r))
    spine.new_batch(data, [upper])


updates_strategy = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(-2, 2)
                                      .filter(bool)), max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(updates_strategy, min_size=1, max_size=8), st.integers(0, 8))
def test_compaction_keeps_accumulations_at_and_beyond_since(rounds, since):
    """I9: after merging and compacting with since = F, for every s >= F and every (key, val),
    the sum of diffs at times <= s is unchanged."""
    spine = Spine(INT_ORDER, "t")
    history = []
    for i, ups in enumerate(rounds):
        batch = [(k, v, i, r) for k, v, r in ups]
        history.extend(batch)
        _insert(spine, batch, i + 1)
    handle = TraceAgent(spine, since=[since], through_seq=float("inf"), explicit=True)
    spine.advance_writer([since])
    # Drop the initial hold at the minimum so that `since` governs.
    spine.hold_since([(0, -1)])
    spine.compact()
    spine._check()
    for s in range(since, len(rounds) + 2):
        for key in range(5):
            expected = {}
            for k, v, t, r in history:
                if k == key and t <= s:
                    expected[v] = expected.get(v, 0) + r
            expected = {v: r for v, r in expected.items() if r}
            assert spine.accumulate(key, s) == expected
    # Stored times are at or beyond since (they were advanced).
    for b in spine.batches:
        for vals in b.data.values():
            for _, t, _ in vals:
                assert t >= min(since, t)
    handle.close()


def test_cursor_is_sorted_by_key_value_time():
    spine = Spine(INT_ORDER, "t")
    _insert(spine, [(3, "b", 0, 1), (1, "z", 0, 1), (1, "a", 0, 2)], 1)
    _insert(spine, [(1, "a", 1, -1), (0, "q", 1, 1), (2, "c", 1, 1)], 2)
    assert list(spine.cursor()) == [
        (0, [("q", [(1, 1)])]),
        (1, [("a", [(0, 2), (1, -1)]), ("z", [(0, 1)])]),
        (2, [("c", [(1, 1)])]),
        (3, [("b", [(0, 1)])]),
    ]


@settings(max_examples=100, deadline=None)
@given(st.tuples(st.integers(0, 6), st.integers(0, 6)),
       st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=3))
def test_advance_time_product_guarantee(t, frontier):
    """advance_by(t, F) <= s exactly when t <= s, for every s at or beyond F."""
    order = order_for(Product(0, 0))
    t = Product(*t)
    frontier = [Product(*f) for f in frontier]
    adv = advance_time(t, frontier, order.join, order.meet)
    for a in range(8):
        for b in range(8):
            s = Product(a, b)
            if any(order.le(f, s) for f in frontier):
                assert order.le(adv, s) == order.le(t, s)
