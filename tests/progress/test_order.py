"""Property tests of timelypy.order: the partial order, lattice, sort order and path summaries.

Every property is checked against brute force (all pairs / a finite grid), never against the
library's own helpers.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.order import grid, opt_le
from support.progress_strategies import (
    SHAPES,
    shaped_times,
    summary_for_shape,
    times_of_shape,
)

from timelypy.order import (
    INT_ORDER,
    MAX_INT_TIME,
    IntSummary,
    Product,
    ProductSummary,
    identity_summary,
    join,
    less_equal,
    less_than,
    meet,
    minimum_like,
    order_for,
)

FAST = settings(max_examples=200, deadline=None)
MEDIUM = settings(max_examples=100, deadline=None)


def coords(t):
    """Flatten a (nested) time to its int coordinates, in order."""
    if isinstance(t, Product):
        return coords(t[0]) + coords(t[1])
    return (t,)


def brute_le(a, b):
    """The product order by definition: every coordinate <=."""
    return all(x <= y for x, y in zip(coords(a), coords(b)))


# --------------------------------------------------------------------------------------
# Partial order


@FAST
@given(shaped_times(n=3))
def test_less_equal_is_a_partial_order(st_):
    _, (a, b, c) = st_
    assert less_equal(a, a)
    assert not less_than(a, a)
    if less_equal(a, b) and less_equal(b, a):
        assert a == b
    if less_equal(a, b) and less_equal(b, c):
        assert less_equal(a, c)
    # agrees with the coordinate-wise definition
    assert less_equal(a, b) == brute_le(a, b)
    assert less_than(a, b) == (brute_le(a, b) and a != b)


@FAST
@given(shaped_times(n=2))
def test_sort_order_extends_partial_order(st_):
    _, (a, b) = st_
    if less_equal(a, b):
        assert a <= b  # Python's (lexicographic) order on the tuple
        assert sorted([b, a]) == [a, b]
    if less_than(a, b):
        assert a < b


def test_product_order_is_not_lexicographic():
    # (1, 3) < (2, 2) lexicographically, but the two are incomparable in the product order
    assert Product(1, 3) < Product(2, 2)
    assert not less_equal(Product(1, 3), Product(2, 2))
    assert not less_equal(Product(2, 2), Product(1, 3))
    assert less_equal(Product(Product(0, 1), 2), Product(Product(0, 1), 3))
    assert not less_equal(Product(Product(0, 2), 0), Product(Product(1, 1), 5))


@pytest.mark.parametrize("shape", SHAPES)
def test_minimum_like_is_least(shape):
    g = grid(shape, 2)
    m = minimum_like(g[-1])
    assert m in g
    assert all(less_equal(m, t) for t in g)


# --------------------------------------------------------------------------------------
# Lattice: join / meet against a finite grid


GRIDS = {shape: grid(shape, 3 if shape in ("int", "p") else 2) for shape in SHAPES}


def brute_join(a, b, g):
    ubs = [u for u in g if less_equal(a, u) and less_equal(b, u)]
    least = [u for u in ubs if all(less_equal(u, v) for v in ubs)]
    assert len(least) == 1
    return least[0]


def brute_meet(a, b, g):
    lbs = [u for u in g if less_equal(u, a) and less_equal(u, b)]
    greatest = [u for u in lbs if all(less_equal(v, u) for v in lbs)]
    assert len(greatest) == 1
    return greatest[0]


@pytest.mark.parametrize("shape", SHAPES)
def test_join_meet_exhaustive_on_grid(shape):
    g = GRIDS[shape]
    # all pairs is affordable on these grids (<= 729 pairs per shape)
    for a, b in itertools.product(g, repeat=2):
        j, m = join(a, b), meet(a, b)
        assert j == brute_join(a, b, g), (a, b)
        assert m == brute_meet(a, b, g), (a, b)
        assert type(j) is type(a) and type(m) is type(a)


@FAST
@given(shaped_times(n=3, hi=50))
def test_lattice_laws(st_):
    _, (a, b, c) = st_
    j, m = join(a, b), meet(a, b)
    # bounds
    assert less_equal(a, j) and less_equal(b, j)
    assert less_equal(m, a) and less_equal(m, b)
    # least / greatest: any other bound c is above/below
    if less_equal(a, c) and less_equal(b, c):
        assert less_equal(j, c)
    if less_equal(c, a) and less_equal(c, b):
        assert less_equal(c, m)
    # algebra
    assert join(a, b) == join(b, a) and meet(a, b) == meet(b, a)
    assert join(a, a) == a and meet(a, a) == a
    assert join(a, meet(a, b)) == a and meet(a, join(a, b)) == a
    assert join(join(a, b), c) == join(a, join(b, c))
    assert meet(meet(a, b), c) == meet(a, meet(b, c))
    assert less_equal(a, b) == (join(a, b) == b) == (meet(a, b) == a)


def test_join_meet_brief_vector():
    assert join(Product(3, 7), Product(4, 6)) == Product(4, 7)
    assert meet(Product(3, 7), Product(4, 6)) == Product(3, 6)


# --------------------------------------------------------------------------------------
# TimeOrder.nested agrees with the generic functions


@pytest.mark.parametrize("depth", [1, 2, 3])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_nested_time_order_agrees_with_generic(depth, data):
    order = INT_ORDER
    for _ in range(depth):
        order = order.nested()
    assert order.depth == depth
    assert not order.is_total
    assert order.outer is not None and order.outer.depth == depth - 1

    def times(d):
        t = st.integers(0, 6)
        for _ in range(d):
            t = st.builds(Product, t, st.integers(0, 6))
        return t

    a, b = data.draw(times(depth)), data.draw(times(depth))
    assert order.le(a, b) == less_equal(a, b) == brute_le(a, b)
    assert order.lt(a, b) == less_than(a, b)
    assert order.join(a, b) == join(a, b)
    assert order.meet(a, b) == meet(a, b)
    assert order.minimum == minimum_like(a)
    assert order.identity == identity_summary(a)
    assert order.identity.is_identity()
    assert order.identity.results_in(a) == a
    assert order_for(a).depth == depth
    assert order_for(a).le(a, b) == less_equal(a, b)


def test_int_order():
    assert INT_ORDER.is_total and INT_ORDER.depth == 0 and INT_ORDER.outer is None
    assert INT_ORDER.minimum == 0
    for a, b in itertools.product(range(4), repeat=2):
        assert INT_ORDER.le(a, b) == less_equal(a, b) == (a <= b)
        assert INT_ORDER.join(a, b) == join(a, b) == max(a, b)
        assert INT_ORDER.meet(a, b) == meet(a, b) == min(a, b)
    assert order_for(5) is INT_ORDER


# --------------------------------------------------------------------------------------
# Path summaries


def apply(s, t):
    return None if t is None else s.results_in(t)


def summary_deltas(s):
    if isinstance(s, ProductSummary):
        return summary_deltas(s.outer) + summary_deltas(s.inner)
    return (s.delta,)


@st.composite
def shape_summaries_times(draw, n_summaries=2, n_times=2):
    shape = draw(st.sampled_from(SHAPES))
    ss = [draw(summary_for_shape(shape)) for _ in range(n_summaries)]
    ts = [draw(times_of_shape(shape, 0, 20)) for _ in range(n_times)]
    return shape, ss, ts


@FAST
@given(shape_summaries_times())
def test_results_in_is_coordinatewise_addition(x):
    _, (s, _), (t, _) = x
    r = s.results_in(t)
    assert coords(r) == tuple(c + d for c, d in zip(coords(t), summary_deltas(s)))
    assert type(r) is type(t)


@FAST
@given(shape_summaries_times(n_summaries=3, n_times=1))
def test_followed_by_is_sequential_application(x):
    _, (a, b, c), (t,) = x
    ab = a.followed_by(b)
    assert ab is not None
    assert ab.results_in(t) == b.results_in(a.results_in(t))
    # associativity of composition
    assert ab.followed_by(c) == a.followed_by(b.followed_by(c))
    # identity is neutral
    ident = identity_summary(t)
    assert ident.is_identity()
    assert a.followed_by(ident) == a and ident.followed_by(a) == a
    assert ident.results_in(t) == t


@FAST
@given(shape_summaries_times(n_summaries=2, n_times=2))
def test_summary_monotonicity(x):
    _, (s1, s2), (t1, t2) = x
    # summary order agrees with the delta-wise definition
    assert s1.less_equal(s2) == all(a <= b for a, b in zip(summary_deltas(s1), summary_deltas(s2)))
    assert s1.less_equal(s1)
    if s1.less_equal(s2) and s2.less_equal(s1):
        assert s1 == s2 and hash(s1) == hash(s2)
    # s1 <= s2 implies s1(t) <= s2(t); t1 <= t2 implies s(t1) <= s(t2)
    if s1.less_equal(s2):
        assert less_equal(s1.results_in(t1), s2.results_in(t1))
    if less_equal(t1, t2):
        assert less_equal(s1.results_in(t1), s1.results_in(t2))
    # results are never below the input (deltas are non-negative)
    assert less_equal(t1, s1.results_in(t1))


@FAST
@given(
    st.integers(0, 10),
    st.integers(0, 10),
    st.integers(MAX_INT_TIME - 12, MAX_INT_TIME),
    st.integers(0, 10),
)
def test_int_summary_overflow(d1, d2, t_high, t_low):
    a, b = IntSummary(d1), IntSummary(d2)
    for t in (t_high, t_low):
        r = a.results_in(t)
        if t + d1 > MAX_INT_TIME:
            assert r is None
        else:
            assert r == t + d1
        ab = a.followed_by(b)
        assert ab.results_in(t) == apply(b, apply(a, t))
        # monotone with None as the top element
        assert opt_le(a.results_in(t), a.results_in(t + 1) if t < MAX_INT_TIME else None)
    assert a.results_in(MAX_INT_TIME) == (MAX_INT_TIME if d1 == 0 else None)


@FAST
@given(
    st.integers(0, 5),
    st.integers(0, 5),
    st.integers(MAX_INT_TIME - 6, MAX_INT_TIME),
    st.integers(0, 10),
)
def test_product_summary_overflow(do, di, inner, outer):
    s = ProductSummary(IntSummary(do), IntSummary(di))
    t = Product(outer, inner)
    r = s.results_in(t)
    if inner + di > MAX_INT_TIME:
        assert r is None
    else:
        assert r == Product(outer + do, inner + di)
    t2 = Product(inner, outer)  # overflow in the outer coordinate
    r2 = s.results_in(t2)
    if inner + do > MAX_INT_TIME:
        assert r2 is None
    else:
        assert r2 == Product(inner + do, outer + di)


def test_followed_by_overflow_returns_none():
    big = IntSummary(MAX_INT_TIME)
    assert big.results_in(0) == MAX_INT_TIME
    assert big.followed_by(IntSummary(0)) == big
    assert big.followed_by(IntSummary(1)) is None
    assert IntSummary(1).results_in(0) == 1
    # and so does a product summary with one overflowing coordinate
    p = ProductSummary(IntSummary(0), big)
    assert p.followed_by(ProductSummary(IntSummary(0), IntSummary(1))) is None
    assert p.followed_by(ProductSummary(IntSummary(0), IntSummary(0))) == p
    # applying the two in sequence also overflows
    assert apply(ProductSummary(IntSummary(0), IntSummary(1)), p.results_in(Product(0, 0))) is None


def test_negative_int_summary_rejected():
    with pytest.raises(ValueError):
        IntSummary(-1)


@FAST
@given(st.integers(0, 1000), st.integers(0, 1000))
def test_loop_summary_strictly_advances(outer, inner):
    loop = ProductSummary(IntSummary(0), IntSummary(1))
    assert not loop.is_identity()
    t = Product(outer, inner)
    r = loop.results_in(t)
    assert less_than(t, r) and r == Product(outer, inner + 1)
    # any path that contains the feedback edge also strictly advances
    for other in (ProductSummary(IntSummary(a), IntSummary(b)) for a in range(2) for b in range(3)):
        for comp in (loop.followed_by(other), other.followed_by(loop)):
            assert not comp.is_identity()
            assert less_than(t, comp.results_in(t))
    # loop at depth two: (outer-identity, +1 on the innermost coordinate)
    loop2 = ProductSummary(ProductSummary(IntSummary(0), IntSummary(0)), IntSummary(1))
    t2 = Product(Product(outer, inner), 3)
    assert less_than(t2, loop2.results_in(t2))
    # the loop summary is not the identity, and nothing below it but the identity
    assert identity_summary(t).less_equal(loop)
    assert not loop.less_equal(identity_summary(t))


def test_loop_summary_at_max_inner_is_none():
    loop = ProductSummary(IntSummary(0), IntSummary(1))
    assert loop.results_in(Product(0, MAX_INT_TIME)) is None
    assert loop.results_in(Product(MAX_INT_TIME, 0)) == Product(MAX_INT_TIME, 1)


@MEDIUM
@given(shaped_times(n=1), st.data())
def test_identity_summary_matches_shape(st_, data):
    shape, (t,) = st_
    ident = identity_summary(t)
    assert ident.is_identity()
    assert ident.results_in(t) == t
    s = data.draw(summary_for_shape(shape))
    assert ident.less_equal(s)
    assert s.is_identity() == (s == ident) == all(d == 0 for d in summary_deltas(s))


def test_summaries_hash_and_eq_by_value():
    a = ProductSummary(IntSummary(1), IntSummary(2))
    b = ProductSummary(IntSummary(1), IntSummary(2))
    c = ProductSummary(IntSummary(2), IntSummary(1))
    assert a == b and hash(a) == hash(b) and a != c
    assert len({a, b, c}) == 2
    assert not a.less_equal(c) and not c.less_equal(a)
    assert IntSummary(3) == IntSummary(3) and IntSummary(3) != IntSummary(4)
    assert not IntSummary(0).less_equal(a) and not a.less_equal(IntSummary(0))
