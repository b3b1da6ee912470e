"""Worked examples and algebraic properties of the Z-set oracle (``oracle.zset``)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.zset import (
    accumulate_at,
    advance_by,
    aggregate,
    consolidate,
    consolidate_data,
    consolidate_trace,
    count,
    distinct,
    distinct_incremental,
    distinct_trace,
    explode,
    filter_updates,
    flat_map_updates,
    index_with,
    inspect,
    join,
    join_function,
    join_trace,
    map_updates,
    minus,
    negate,
    plus,
    threshold,
)

from timelypy.errors import TimeOrderError, UnhashableDataError
from timelypy.order import Product, less_equal

P = Product


def pair_join(key, v1, v2):
    """The pair join function: ``(key, v1, v2) -> (key, (v1, v2))``."""
    return (key, (v1, v2))


# ======================================================================================
# Every worked example of the operator table (Z-set operators as in the DBSP paper)


def test_example_aggregate_count():
    indexed = [((1, "foo"), 0, 1), ((1, "bar"), 0, 1), ((2, "baz"), 0, 1)]
    assert aggregate(count, indexed) == [((1, 2), 0, 1), ((2, 1), 0, 1)]


def test_aggregate_sees_consolidated_sorted_values_per_key_and_time():
    seen = []

    def fn(values):
        seen.append(values)
        return len(values)

    indexed = [
        ((1, "b"), 0, 2),
        ((1, "a"), 0, 1),
        ((1, "c"), 0, 1),
        ((1, "c"), 0, -1),
        ((1, "a"), 1, 1),
        ((2, "z"), 0, 1),
        ((2, "z"), 0, -1),
    ]
    # key 2 cancels entirely at time 0 and produces nothing.
    assert aggregate(fn, indexed) == [((1, 2), 0, 1), ((1, 1), 1, 1)]
    assert seen == [[("a", 1), ("b", 2)], [("a", 1)]]


EXAMPLE_CONSOLIDATE_TRACE = [
    # errata: `{0, 1, 0, 1}.` read as `{0, 1, 0, 1},` and `{2, 4, 0 1}` as `{2, 4, 0, 1}`
    (0, 0, 0, 1),
    (0, 0, 0, -1),
    (0, 1, 0, 1),
    (0, 1, 0, 1),
    (1, 2, 0, 2),
    (1, 3, 0, 1),
    (1, 3, 0, -1),
    (1, 4, 0, -1),
    (2, 2, 0, 1),
    (2, 4, 0, 1),
]
EXAMPLE_CONSOLIDATE_OUT = [((0, 1), 2), ((1, 2), 2), ((1, 4), -1), ((2, 2), 1), ((2, 4), 1)]


def test_example_consolidate():
    trace = EXAMPLE_CONSOLIDATE_TRACE
    # literally: trace -> indexed Z-set at the operator's time (`nil`)
    assert consolidate_trace(trace) == [(kv, None, w) for kv, w in EXAMPLE_CONSOLIDATE_OUT]
    assert consolidate_trace(trace, 0) == [(kv, 0, w) for kv, w in EXAMPLE_CONSOLIDATE_OUT]
    # the same via the (data, time, diff) functions
    as_updates = [((k, v), t, w) for k, v, t, w in trace]
    assert consolidate(as_updates) == [(kv, 0, w) for kv, w in EXAMPLE_CONSOLIDATE_OUT]
    assert list(consolidate_data(as_updates).items()) == EXAMPLE_CONSOLIDATE_OUT


def test_consolidate_trace_merges_across_times():
    trace = [("a", 1, 0, 1), ("a", 1, 3, 1), ("a", 2, 1, 1), ("a", 2, 2, -1)]
    assert consolidate_trace(trace, 7) == [(("a", 1), 7, 2)]


def test_example_distinct():
    assert distinct([(0, 0, 1), (1, 0, 2), (2, 0, -1), (3, 0, 0)]) == [(0, 0, 1), (1, 0, 1)]


def test_example_filter():
    def is_positive(x):
        return x >= 1

    assert filter_updates(is_positive, [(0, 0, 1), (1, 0, 2), (2, 1, -3)]) == [
        (1, 0, 2),
        (2, 1, -3),
    ]


def test_example_index_with():
    def key_function(edge):
        src, _dst, _cost = edge
        return src

    updates = [((0, 1, 1), 0, 1), ((1, 2, 1), 1, 1), ((1, 3, 2), 1, -1)]
    assert index_with(key_function, updates) == [
        ((0, (0, 1, 1)), 0, 1),
        ((1, (1, 2, 1)), 1, 1),
        ((1, (1, 3, 2)), 1, -1),
    ]


def test_example_inspect():
    seen = []
    batch = [(0, 1, 1), (1, 1, 1)]
    out = inspect(seen.append, batch)
    assert out is batch
    assert out == [(0, 1, 1), (1, 1, 1)]
    assert seen == [[(0, 1, 1), (1, 1, 1)]]


def test_example_negate():
    assert negate([(0, 0, 1), (1, 0, -1), (2, 0, -2)]) == [(0, 0, -1), (1, 0, 1), (2, 0, 2)]


# --- distinct_trace at the four product times ------------------------------------------

B00 = [(0, P(0, 0), 1), (2, P(0, 0), 1), (3, P(0, 0), -1)]
B01 = [(5, P(0, 1), 1)]
B10 = [(5, P(1, 0), 1)]
B11 = [(0, P(1, 1), 1), (1, P(1, 1), 1), (2, P(1, 1), -1), (3, P(1, 1), 1), (4, P(1, 1), -1)]
T00: list = []
T01 = T00 + B00
T10 = T01 + B01
T11 = T10 + B10


@pytest.mark.parametrize(
    "batch, trace, time, expected",
    [
        (B00, T00, P(0, 0), [(0, 1), (2, 1)]),
        (B01, T01, P(0, 1), [(5, 1)]),
        (B10, T10, P(1, 0), [(5, 1)]),
        # 5 was output at {0,1} and at {1,0}: at {1,1} one of them must be retracted.
        (B11, T11, P(1, 1), [(1, 1), (2, -1), (5, -1)]),
    ],
    ids=["t00", "t01", "t10", "t11"],
)
def test_example_distinct_trace(batch, trace, time, expected):
    assert distinct_trace(batch, trace, time) == [(d, time, w) for d, w in expected]


def test_example_distinct_trace_outputs_accumulate_to_distinct_of_input():
    inputs = B00 + B01 + B10 + B11
    outputs = []
    for batch, trace, time in [
        (B00, T00, P(0, 0)),
        (B01, T01, P(0, 1)),
        (B10, T10, P(1, 0)),
        (B11, T11, P(1, 1)),
    ]:
        outputs += distinct_trace(batch, trace, time)
    for e, i in itertools.product(range(3), range(3)):
        t = P(e, i)
        assert accumulate_at(outputs, t) == distinct(accumulate_at(inputs, t))


def test_distinct_trace_batch_times_may_be_none_but_not_other_times():
    assert distinct_trace([(5, None, 1)], [], P(0, 1)) == [(5, P(0, 1), 1)]
    with pytest.raises(TimeOrderError, match="distinct_trace"):
        distinct_trace([(5, P(0, 0), 1)], [], P(0, 1))


def test_distinct_trace_ignores_incomparable_and_current_trace_times():
    trace = [(7, P(0, 2), 1), (7, P(2, 0), 1), (8, P(1, 1), 1)]
    assert distinct_trace([(8, P(1, 1), 1)], trace, P(1, 1)) == [(8, P(1, 1), 1)]


def test_distinct_trace_int_times():
    trace = [("a", 0, 1), ("b", 1, 1), ("c", 5, 1)]  # time 5 is not before 3: ignored
    batch = [("a", 3, 1), ("b", 3, -1), ("c", 3, 1)]
    assert distinct_trace(batch, trace, 3) == [("b", 3, -1), ("c", 3, 1)]


def test_distinct_trace_rejects_nested_products():
    with pytest.raises(TypeError, match="int coordinates"):
        distinct_trace([], [], P(P(0, 0), 0))


# --- join_stream / join_trace ------------------------------------------------------------


def test_example_join_stream():
    a = [(("a", 1), 0, 1), (("b", 2), 0, 2), (("c", 2), 0, 1)]
    b = [(("a", 1), 0, 1), (("b", 3), 0, 1), (("b", 4), 0, -1)]
    assert join(pair_join, a, b) == [
        (("a", (1, 1)), 0, 1),
        (("b", (2, 3)), 0, 2),
        (("b", (2, 4)), 0, -2),
    ]


def test_example_join_trace():
    zset = [
        (("a", 0), 0, 1),
        (("a", 0), 0, -1),
        (("a", 1), 0, 1),
        (("b", 2), 0, 2),
        (("c", 2), 0, 1),
    ]
    trace = [("a", 1, 0, 1), ("b", -3, 0, -1), ("b", 3, 0, 1), ("b", 4, 0, -1), ("c", 4, 0, 1)]
    # errata: the flat `{:a, 1, 1}` is read as `{:a, {1, 1}}`
    assert join_trace(pair_join, zset, trace) == [
        (("a", (1, 1)), 0, 1),
        (("b", (2, -3)), 0, -2),
        (("b", (2, 3)), 0, 2),
        (("b", (2, 4)), 0, -2),
        (("c", (2, 4)), 0, 1),
    ]


def test_join_output_time_is_lattice_join():
    a = [(("k", 1), P(2, 0), 1)]
    b = [(("k", 2), P(0, 3), -2)]
    assert join(pair_join, a, b) == [(("k", (1, 2)), P(2, 3), -2)]
    assert join_trace(pair_join, a, [("k", 2, P(0, 3), -2)]) == [(("k", (1, 2)), P(2, 3), -2)]


# --- minus / plus ------------------------------------------------------------------------

EXAMPLE_A = [(0, 0, 1), (1, 0, 1), (2, 0, 2), (3, 0, 1)]
EXAMPLE_B = [(0, 0, 1), (1, 0, -1), (2, 0, 1)]


def test_example_minus():
    assert minus(EXAMPLE_A, EXAMPLE_B) == [(1, 0, 2), (2, 0, 1), (3, 0, 1)]


def test_example_plus():
    assert plus(EXAMPLE_A, EXAMPLE_B) == [(0, 0, 2), (2, 0, 3), (3, 0, 1)]


# --- distinct incremental: its three cases -----------------------------------------------

EXAMPLE_DI_BATCH = [(0, None, 2), (2, None, 1), (3, None, -1)]


@pytest.mark.parametrize(
    "trace, expected",
    [
        ([(0, 0, 1)], [(2, None, 1)]),
        ([(2, 1, 1), (3, 1, 1)], [(0, None, 1), (3, None, -1)]),
        ([(0, 2, -1)], [(0, None, 1), (2, None, 1)]),
    ],
    ids=["present-stays", "absent-appears-present-leaves", "negative-history"],
)
def test_example_distinct_incremental(trace, expected):
    assert distinct_incremental(EXAMPLE_DI_BATCH, trace) == expected


def test_distinct_incremental_at_a_given_time():
    assert distinct_incremental([(1, 4, 1)], [], 4) == [(1, 4, 1)]


# ======================================================================================
# Linear operators: map, join_function, explode

NAMES = [("frank", 6, 1), ("frank", 8, 1), ("david", 8, 1), ("frank", 9, -2)]


def test_linear_example_names_map():
    assert map_updates(lambda x: (x, len(x)), NAMES) == [
        (("frank", 5), 6, 1),
        (("frank", 5), 8, 1),
        (("david", 5), 8, 1),
        (("frank", 5), 9, -2),
    ]


def test_linear_example_join_function_doc_example():
    # creates x copies of 2x from time 3x until 4x, for x from 0 through 9
    source = [(x, 0, 1) for x in range(10)]
    out = join_function(lambda x: [(2 * x, 3 * x, x), (2 * x, 4 * x, -x)], source)
    assert out == [u for x in range(10) for u in [(2 * x, 3 * x, x), (2 * x, 4 * x, -x)]]
    for t in range(40):
        assert accumulate_at(out, t) == {2 * x: x for x in range(1, 10) if 3 * x <= t < 4 * x}


def test_linear_example_join_function_joins_times_and_multiplies_diffs():
    out = join_function(lambda x: [(x, 2, 3), (x, 7, -1)], [("r", 5, -2)])
    assert out == [("r", 5, -6), ("r", 7, 2)]
    out = join_function(lambda x: [(x, P(0, 4), 1)], [("r", P(3, 1), 2)])
    assert out == [("r", P(3, 4), 2)]


def test_linear_example_explode_with_negative_diffs():
    # (key, count) -> count copies of key, without materialising the copies
    updates = [(("a", 3), 0, 1), (("b", -2), 1, 1), (("c", 2), 2, -1), (("d", -4), 3, -1)]
    out = explode(lambda kc: [(kc[0], kc[1])], updates)
    assert out == [("a", 0, 3), ("b", 1, -2), ("c", 2, -2), ("d", 3, 4)]
    # a positive record can become a retraction and vice versa
    assert explode(lambda x: [(x, -1), (x + 1, 2)], [(10, 0, 1)]) == [(10, 0, -1), (11, 0, 2)]


def test_linear_operators_as_join_function():
    u = [(1, 0, 1), (2, 1, -1), (3, 2, 2)]
    assert consolidate(join_function(lambda x: [(x * 10, 0, 1)], u)) == consolidate(
        map_updates(lambda x: x * 10, u)
    )
    assert consolidate(join_function(lambda x: [(x, 0, 1)] if x % 2 else [], u)) == consolidate(
        filter_updates(lambda x: x % 2, u)
    )
    assert consolidate(join_function(lambda x: [(x, 0, -x)], u)) == consolidate(
        explode(lambda x: [(x, -x)], u)
    )


# ======================================================================================
# The couch: output changes at a time no input touched (partially ordered times)


def test_couch_example():
    inputs = [
        ("chair", P(0, 0), 4),
        ("desk", P(0, 0), 2),
        ("towel", P(0, 0), 5),
        ("couch", P(1, 0), 1),
        ("couch", P(0, 1), 1),
    ]
    times = [P(0, 0), P(0, 1), P(1, 0), P(1, 1)]
    outputs = []
    per_time = {}
    for t in times:
        batch = [u for u in inputs if u[1] == t]
        trace = [u for u in inputs if less_equal(u[1], t) and u[1] != t]
        per_time[t] = distinct_trace(batch, trace, t)
        outputs += per_time[t]
    assert per_time[P(0, 0)] == [("chair", P(0, 0), 1), ("desk", P(0, 0), 1), ("towel", P(0, 0), 1)]
    assert per_time[P(1, 0)] == [("couch", P(1, 0), 1)]
    assert per_time[P(0, 1)] == [("couch", P(0, 1), 1)]
    # no new input at (1, 1), yet the couch must go once
    assert per_time[P(1, 1)] == [("couch", P(1, 1), -1)]
    # without that correction the accumulation at (1, 1) would hold two couches
    assert accumulate_at(outputs[:-1], P(1, 1))["couch"] == 2
    expected = {"chair": 1, "couch": 1, "desk": 1, "towel": 1}
    assert distinct(accumulate_at(inputs, P(1, 1))) == expected
    for t in times:
        assert accumulate_at(outputs, t) == distinct(accumulate_at(inputs, t))


# ======================================================================================
# Errors and small behaviours


def test_unhashable_data_is_named():
    with pytest.raises(UnhashableDataError, match=r"consolidate.*\[1, 2\]"):
        consolidate([([1, 2], 0, 1)])
    with pytest.raises(UnhashableDataError, match=r"consolidate_data.*\{'a': 1\}"):
        consolidate_data([({"a": 1}, 0, 1)])
    with pytest.raises(UnhashableDataError, match=r"join.*key.*\[0\]"):
        join(pair_join, [(([0], 1), 0, 1)], [(([0], 2), 0, 1)])
    with pytest.raises(UnhashableDataError, match=r"join output.*\[1, 2\]"):
        join(lambda k, a, b: [a, b], [((0, 1), 0, 1)], [((0, 2), 0, 1)])
    with pytest.raises(UnhashableDataError, match=r"join_trace.*key"):
        join_trace(pair_join, [((0, 1), 0, 1)], [([0], 2, 0, 1)])
    with pytest.raises(UnhashableDataError, match=r"^distinct: data .*\{1\}"):
        distinct([({1}, 0, 1)])
    with pytest.raises(UnhashableDataError, match=r"^plus: "):
        plus([([1], 0, 1)], [])
    with pytest.raises(UnhashableDataError, match=r"aggregate.*value"):
        aggregate(count, [((0, [1]), 0, 1)])
    with pytest.raises(UnhashableDataError, match="distinct_trace"):
        distinct_trace([([1], P(0, 0), 1)], [], P(0, 0))
    with pytest.raises(UnhashableDataError, match="distinct_incremental"):
        distinct_incremental([(1, None, 1)], [([1], 0, 1)])
    assert issubclass(UnhashableDataError, TypeError)


def test_other_type_errors_are_not_reported_as_unhashable():
    with pytest.raises(TypeError) as info:
        consolidate([(1, 0, None)])
    assert not isinstance(info.value, UnhashableDataError)


def test_consolidate_sorts_mixed_data_by_repr():
    u = [("x", 0, 1), (2, 0, 1), (None, 0, 1), (2, 0, 1)]
    # ints, None and str do not compare: ordered by repr of (data, time)
    assert consolidate(u) == [("x", 0, 1), (2, 0, 2), (None, 0, 1)]
    assert consolidate(consolidate(u)) == consolidate(u)


def test_threshold():
    u = [("a", 0, 1), ("b", 0, 3), ("b", 0, 1), ("c", 0, -2)]
    at_least_three = threshold(lambda c: 1 if c >= 3 else 0, u)
    assert at_least_three == [("b", 0, 1)]
    assert threshold(lambda c: 2 * c, {"a": 1, "b": 0}) == {"a": 2}


def test_flat_map_and_accumulate_and_advance_basics():
    assert flat_map_updates(lambda x: [x, -x], [(1, 0, 2)]) == [(1, 0, 2), (-1, 0, 2)]
    assert accumulate_at([("a", P(0, 1), 1), ("a", P(1, 0), 1), ("b", P(2, 0), 1)], P(1, 1)) == {
        "a": 2
    }
    assert advance_by(3, []) == 3
    assert advance_by(P(1, 5), []) == P(1, 5)
    assert advance_by(3, [5]) == 5
    assert advance_by(7, [5]) == 7
    assert advance_by(P(0, 0), [P(2, 3), P(3, 1)]) == P(2, 1)
    assert advance_by(P(0, 4), [P(2, 3), P(3, 1)]) == P(2, 4)


# ======================================================================================
# Properties

small_data = st.one_of(st.integers(0, 4), st.sampled_from(["x", "y"]))
int_times = st.integers(0, 3)
product_times = st.builds(Product, st.integers(0, 3), st.integers(0, 3))
diffs = st.integers(-3, 3)


def batches(data=small_data, times=product_times, max_size=12):
    return st.lists(st.tuples(data, times, diffs), max_size=max_size)


any_batch = st.one_of(batches(times=int_times), batches(times=product_times))
indexed_batches = batches(data=st.tuples(st.integers(0, 2), st.integers(0, 3)))
GRID = [P(e, i) for e in range(4) for i in range(4)]


def _times_for(batch):
    if any(type(u[1]) is Product for u in batch):
        return GRID
    return list(range(4))


@settings(deadline=None)
@given(any_batch)
def test_consolidate_idempotent_and_preserves_accumulations(u):
    c = consolidate(u)
    assert consolidate(c) == c
    assert all(w != 0 for _d, _t, w in c)
    assert len({(d, t) for d, t, _w in c}) == len(c)
    for t in _times_for(u):
        assert accumulate_at(c, t) == accumulate_at(u, t)
    assert consolidate_data(c) == consolidate_data(u)


@settings(deadline=None)
@given(batches(), batches(), batches())
def test_plus_minus_negate_laws(a, b, c):
    assert plus(a, b) == plus(b, a)
    assert plus(plus(a, b), c) == plus(a, plus(b, c))
    assert plus(a, []) == consolidate(a)
    assert plus(a, negate(a)) == []
    assert minus(a, a) == []
    assert minus(a, b) == plus(a, negate(b))
    assert negate(negate(a)) == a
    assert consolidate(negate(a)) == negate(consolidate(a))
    assert plus(minus(a, b), b) == consolidate(a)


def triple_join(k, v1, v2):
    return (k, v1, v2)


@settings(deadline=None)
@given(indexed_batches, indexed_batches, indexed_batches)
def test_join_bilinear(a1, a2, b):
    assert join(triple_join, a1 + a2, b) == plus(join(triple_join, a1, b), join(triple_join, a2, b))
    assert join(triple_join, b, a1 + a2) == plus(join(triple_join, b, a1), join(triple_join, b, a2))
    assert join(triple_join, negate(a1), b) == negate(join(triple_join, a1, b))
    trace = [(k, v, t, w) for (k, v), t, w in b]
    assert join_trace(triple_join, a1, trace) == join(triple_join, a1, b)


@settings(deadline=None)
@given(indexed_batches, indexed_batches, indexed_batches, indexed_batches)
def test_incremental_join_identity(a, b, da, db):
    # join_stream(da, db) + join_trace(da, B) + join_trace_flipped(db, A) is the
    # change of join(A, B) when A grows by da and B by db.
    def flat(x):
        return [(k, v, t, w) for (k, v), t, w in x]

    def flipped(k, v1, v2):
        return triple_join(k, v2, v1)

    before = join(triple_join, a, b)
    after = join(triple_join, a + da, b + db)
    delta = plus(
        plus(join(triple_join, da, db), join_trace(triple_join, da, flat(b))),
        join_trace(flipped, db, flat(a)),
    )
    assert minus(after, before) == delta


def expand(x):
    return [x, x] if isinstance(x, int) and x % 2 else [x, "z"]


@settings(deadline=None)
@given(any_batch)
def test_join_function_at_minimum_time_is_flat_map(u):
    for zero in (0, P(0, 0)):
        if u and (type(u[0][1]) is Product) != (type(zero) is Product):
            continue
        got = join_function(lambda x, zero=zero: [(y, zero, 1) for y in expand(x)], u)
        assert consolidate(got) == consolidate(flat_map_updates(expand, u))


def antichain(times):
    uniq = set(times)
    return [t for t in uniq if not any(s != t and less_equal(s, t) for s in uniq)]


coords = st.integers(0, 6)
products6 = st.builds(Product, coords, coords)


@settings(deadline=None)
@given(products6, st.lists(products6, min_size=0, max_size=4))
def test_advance_by_guarantee(t, times):
    frontier = antichain(times)
    a = advance_by(t, frontier)
    if not frontier:
        assert a == t
        return
    assert less_equal(t, a)
    for s in (P(e, i) for e in range(9) for i in range(9)):
        if any(less_equal(f, s) for f in frontier):
            assert less_equal(a, s) == less_equal(t, s), (t, frontier, s, a)


@settings(deadline=None)
@given(st.integers(0, 6), st.lists(st.integers(0, 6), min_size=1, max_size=3))
def test_advance_by_int_guarantee(t, times):
    frontier = [min(times)]
    a = advance_by(t, frontier)
    for s in range(frontier[0], 10):
        assert less_equal(a, s) == less_equal(t, s)


def _run_distinct_trace(inputs, order):
    outputs = []
    for t in order:
        batch = [u for u in inputs if u[1] == t]
        trace = [u for u in inputs if less_equal(u[1], t) and u[1] != t]
        outputs += distinct_trace(batch, trace, t)
    return outputs


@settings(deadline=None)
@given(
    batches(
        data=st.integers(0, 3),
        times=st.builds(Product, st.integers(0, 2), st.integers(0, 2)),
        max_size=15,
    )
)
def test_distinct_trace_accumulates_to_distinct_in_any_linear_extension(inputs):
    grid = [P(e, i) for e in range(3) for i in range(3)]
    by_epoch = _run_distinct_trace(inputs, sorted(grid))
    by_iteration = _run_distinct_trace(inputs, sorted(grid, key=lambda p: (p[1], p[0])))
    assert consolidate(by_epoch) == consolidate(by_iteration)
    for t in grid:
        assert accumulate_at(by_epoch, t) == distinct(accumulate_at(inputs, t))


@settings(deadline=None)
@given(batches(data=st.integers(0, 3), times=int_times, max_size=15))
def test_distinct_trace_and_incremental_int_times(inputs):
    outputs = _run_distinct_trace(inputs, range(4))
    for t in range(4):
        assert accumulate_at(outputs, t) == distinct(accumulate_at(inputs, t))
        batch = [u for u in inputs if u[1] == t]
        trace = [u for u in inputs if u[1] < t]
        assert distinct_incremental(batch, trace, t) == distinct_trace(batch, trace, t)


@settings(deadline=None)
@given(any_batch)
def test_distinct_is_threshold_of_positive_weights(u):
    d = distinct(u)
    assert d == [(x, t, 1) for x, t, w in consolidate(u) if w > 0]
    assert distinct(d) == d
