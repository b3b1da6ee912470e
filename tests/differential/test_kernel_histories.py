"""The histories kernels (``timelypy.differential.kernel.histories``) against their plain
second implementation (``oracle.kernels.differential.kernel.histories``) on random inputs, and
the engine run on the plain kernels through ``TIMELYPY_KERNELS``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.kernels.differential.kernel import histories as plain
from support.paths import ROOT

from timelypy.differential.kernel import histories as fast
from timelypy.order import Product, order_for

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None)

coords = st.integers(0, 5)
times = st.tuples(coords, coords)
time_sets = st.sets(times, max_size=8)
flat = st.lists(st.tuples(st.integers(0, 3), coords, coords, st.integers(-2, 2)), max_size=14)
quads = st.lists(st.tuples(st.integers(0, 1), coords, coords, st.integers(-2, 2)), max_size=10)


def _quad_list(qs):
    h = [0, 0]
    for q in qs:
        h.extend(q)
    h[0] = len(h) // 2  # any size and mark: the kernels read only the quads
    h[1] = h[0]
    return h


def test_every_kernel_has_a_plain_twin():
    assert set(fast.__all__) == set(plain.__all__)
    assert all(callable(getattr(plain, name)) for name in fast.__all__)


@SETTINGS
@given(flat, times)
def test_reading_a_flat_history_at_a_time(hist, t):
    o, i = t
    assert fast.accumulate_at(hist, o, i) == plain.accumulate_at(hist, o, i)
    assert fast.count_at(hist, o, i) == plain.count_at(hist, o, i)
    c, above = fast.count_and_above(hist, o, i)
    c2, above2 = plain.count_and_above(hist, o, i)
    assert c == c2 and sorted(above) == sorted(above2)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 3), times, st.integers(-2, 2)), max_size=14), times)
def test_accumulate_at_any_order(hist, t):
    le = order_for(Product(0, 0)).le
    products = [(v, Product(a, b), r) for v, (a, b), r in hist]
    assert fast.accumulate(products, Product(*t), le) == plain.accumulate(products, Product(*t), le)


@SETTINGS
@given(quads, times)
def test_reading_a_quad_list_at_a_time(qs, t):
    h = _quad_list(qs)
    o, i = t
    assert fast.quad_counts_at(h, o, i) == plain.quad_counts_at(h, o, i)
    for end in (len(h), max(2, len(h) - 4)):
        c, have, above = fast.quad_counts_and_above(h, end, o, i)
        c2, have2, above2 = plain.quad_counts_and_above(h, end, o, i)
        assert (c, have) == (c2, have2) and sorted(above) == sorted(above2)
    hin, hout = fast.split_quads(h)
    assert (hin, hout) == plain.split_quads(h)
    assert h == _quad_list(qs)  # arguments untouched


@SETTINGS
@given(flat, quads, times)
def test_compaction_to_a_meet(hist, qs, meet):
    m0, m1 = meet
    before = list(hist)
    assert sorted(fast.compact_flat(hist, m0, m1)) == sorted(plain.compact_flat(hist, m0, m1))
    assert hist == before
    h = _quad_list(qs)
    got, want = fast.compact_quads(h, m0, m1), plain.compact_quads(h, m0, m1)
    assert got[0] == got[1] == len(got) and want[0] == want[1] == len(want)
    assert sorted(plain._quads(got)) == sorted(plain._quads(want))


@SETTINGS
@given(st.dictionaries(coords, coords, max_size=6))
def test_minimal_times(low):
    assert sorted(fast.minimal(low)) == sorted(plain.minimal(low))


@SETTINGS
@given(st.sets(times, min_size=1, max_size=3), time_sets)
def test_joins_holding_a_fresh_time(fresh, others):
    kept = (set(fresh), set(others))
    assert fast.joins(fresh, others) == plain.joins(fresh, others)
    assert (fresh, others) == kept


@SETTINGS
@given(times, time_sets)
def test_joins_with_one_time(s, others):
    above = {t for t in others if not (t[0] <= s[0] and t[1] <= s[1])}
    if above:
        assert fast.joins_with_one(s, above) == plain.joins_with_one(s, above)


@SETTINGS
@given(st.sets(times, min_size=1, max_size=3), flat, st.one_of(st.none(), flat), time_sets)
def test_closure_of_fresh_times(fresh, hin, hout, known):
    hin = hin + [("new", a, b, 1) for a, b in sorted(fresh)]  # fresh: times of new input
    assert fast.closure(fresh, hin, hout, known) == plain.closure(fresh, hin, hout, known)


@SETTINGS
@given(quads, st.lists(times, min_size=1, max_size=3), time_sets)
def test_quad_closure_of_the_quads_after_an_index(qs, fresh, known):
    h = _quad_list(qs)
    start = len(h)
    for k, (a, b) in enumerate(fresh):
        h += (0, a, b, 1 - 2 * (k % 2))  # fresh: new input quads
    kept = (list(h), set(known))
    assert fast.quad_closure(h, start, known) == plain.quad_closure(h, start, known)
    assert (h, known) == kept
    hin, hout = fast.split_quads(h)
    assert fast.quad_closure(h, start, known) == fast.closure(set(fresh), hin, hout, known)


@SETTINGS
@given(st.sets(times, min_size=1, max_size=3), st.lists(times, max_size=8))
def test_close_under_joins_at_any_order(seeds, history):
    order = order_for(Product(0, 0))
    s = {Product(*t) for t in seeds}
    h = [Product(*t) for t in history]
    assert fast.close_under_joins(s, h, order.le, order.join) == plain.close_under_joins(
        s, h, order.le, order.join
    )


def test_the_engine_runs_on_the_plain_kernels():
    """``TIMELYPY_KERNELS=oracle.kernels``: the histories kernels come from the plain twin, and
    reduce, distinct and threshold at Product times and an iterative reachability still give
    the from-scratch answers (the checks of ``test_reduce_product``)."""
    root = ROOT
    tests = ROOT / "tests"
    script = textwrap.dedent(
        """
        import timelypy.kernels as kernels
        from timelypy.differential.kernel import histories
        assert kernels.chosen()["timelypy.differential.kernel.histories"] == (
            "oracle.kernels.differential.kernel.histories"), kernels.chosen()
        assert histories.closure.__module__ == "oracle.kernels.differential.kernel.histories"
        from tests.differential import test_reduce_product as t
        for seed in range(2):
            for logic in sorted(t.LOGICS):
                for path in sorted(t.REDUCE_PATHS):
                    t.test_reduce_at_product_times_matches_from_scratch(seed, logic, path, "random")
            for name in sorted(t.THRESHOLDS):
                for path in sorted(t.THRESHOLD_PATHS):
                    t.test_threshold_at_product_times_matches_from_scratch(seed, name, path, "each")
            t.test_reachability_with_buffered_changes(seed, seed == 0)
        print("ok")
        """
    )
    env = dict(os.environ)
    env["TIMELYPY_KERNELS"] = "oracle.kernels"
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(tests)])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
