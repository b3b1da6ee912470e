"""Each kernel of ``timelypy.differential.kernel`` against its plain twin in ``oracle.kernels``.

The twins (``tests/oracle/kernels/differential/kernel/``) state each contract in the plainest
code; here hypothesis checks that the engine's kernels meet it on random inputs, at totally
ordered and at ``Product(int, int)`` times. Where a contract leaves the representation free (a
merge may keep unadvanced updates that a later compaction consolidates), the results are
compared as what every reader sees: each key's updates advanced to ``since`` and consolidated.
The last test runs a slice of the property suite with the engine built on the twins
(``TIMELYPY_KERNELS=oracle.kernels``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.kernels.differential.kernel import consolidation as plain_consolidation
from oracle.kernels.differential.kernel import grouping as plain_grouping
from oracle.kernels.differential.kernel import join as plain_join
from oracle.kernels.differential.kernel import merge as plain_merge
from support.paths import ROOT

from timelypy.differential.kernel import consolidation, grouping, join, merge
from timelypy.order import INT_ORDER, Product, order_for

PRODUCT = order_for(Product(0, 0))

int_times = st.integers(0, 6)
product_times = st.builds(Product, st.integers(0, 4), st.integers(0, 4))
diffs = st.integers(-2, 2).filter(bool)
vals = st.sampled_from(["a", "b", "c", ()])


def _antichain(times: List[Any], order: Any) -> List[Any]:
    """The minimal elements of ``times``."""
    distinct = list(dict.fromkeys(times))
    return sorted(t for t in distinct if not any(order.le(u, t) and u != t for u in distinct))


@st.composite
def timed(draw: Any, product: bool) -> Tuple[Any, List[Any]]:
    """An order and a frontier (an antichain, possibly empty) of it."""
    if product:
        return PRODUCT, _antichain(draw(st.lists(product_times, max_size=3)), PRODUCT)
    return INT_ORDER, draw(st.lists(int_times, max_size=1))


def updates(times: Any) -> Any:
    return st.lists(st.tuples(vals, times, diffs), max_size=8)


def _seen(vals_: List[Tuple[Any, Any, int]], since: List[Any], order: Any) -> List[Any]:
    """What a reader sees of a key's updates: advanced to ``since``, consolidated, sorted."""
    out = plain_consolidation.advance_and_consolidate(vals_, since, order)
    return sorted(out, key=repr)


def _view(data: Dict[Any, Any], since: List[Any], order: Any) -> Dict[Any, Any]:
    view = {k: _seen(v, since, order) for k, v in data.items()}
    return {k: v for k, v in view.items() if v}


settings_ = settings(max_examples=200, deadline=None)


# ------------------------------------------------------------------ consolidation
@settings_
@given(st.booleans(), st.data())
def test_consolidation_kernels_match_their_twins(product: bool, data: Any) -> None:
    order, since = data.draw(timed(product))
    times = product_times if product else int_times
    ups = data.draw(updates(times))
    assert consolidation.consolidate(ups) == plain_consolidation.consolidate(ups)
    assert consolidation.advance_and_consolidate(
        ups, since, order
    ) == plain_consolidation.advance_and_consolidate(ups, since, order)
    pairs = [((v, t), r) for v, t, r in ups]
    assert consolidation.accumulate(pairs) == plain_consolidation.accumulate(pairs)
    at = data.draw(times)
    assert consolidation.accumulate_at(ups, at, order.le) == plain_consolidation.accumulate_at(
        ups, at, order.le
    )
    acc1: Dict[Any, int] = {}
    acc2: Dict[Any, int] = {}
    consolidation.accumulate_into(acc1, ups)
    plain_consolidation.accumulate_into(acc2, ups)
    assert acc1 == acc2
    for _, t, _ in ups:
        assert consolidation.advance_time(
            t, since, order.join, order.meet
        ) == plain_consolidation.advance_time(t, since, order.join, order.meet)


# ------------------------------------------------------------------ grouping
@settings_
@given(st.booleans(), st.data())
def test_grouping_kernels_match_their_twins(product: bool, data: Any) -> None:
    times = product_times if product else int_times
    pending = data.draw(
        st.lists(st.tuples(st.tuples(st.integers(0, 4), vals), times, diffs), max_size=20)
    )
    if product:
        upper = _antichain(data.draw(st.lists(product_times, max_size=3)), PRODUCT)

        def beyond(t: Any) -> bool:
            return any(PRODUCT.le(u, t) for u in upper)

        got, want = (
            grouping.group_not_beyond(pending, beyond),
            plain_grouping.group_not_beyond(pending, beyond),
        )
    else:
        bound = data.draw(st.one_of(st.none(), int_times))
        got, want = (
            grouping.group_before(pending, bound),
            plain_grouping.group_before(pending, bound),
        )
    assert got == want
    (g, _), (w, _) = got, want
    assert grouping.consolidate_groups(g) == plain_grouping.consolidate_groups(w)
    assert g == w


# ------------------------------------------------------------------ merge
def _data(draw: Any, times: Any) -> Dict[Any, List[Any]]:
    raw = draw(st.dictionaries(st.integers(0, 5), updates(times), max_size=5))
    return {k: v for k, v in raw.items() if v}


@settings_
@given(st.booleans(), st.data())
def test_merge_kernels_match_their_twins(product: bool, data: Any) -> None:
    order, since = data.draw(timed(product))
    times = product_times if product else int_times
    older = _data(data.draw, times)
    newer = _data(data.draw, times)
    # What a spine stores is consolidated per key at since (its merges and compactions made it).
    older = {
        k: v for k, v in ((k, plain_consolidation.consolidate(v)) for k, v in older.items()) if v
    }
    count = sum(map(len, older.values()))
    a = {k: list(v) for k, v in older.items()}
    b = {k: list(v) for k, v in older.items()}
    if product and since:
        sa: Any = {k for k, v in a.items() if len(v) != 1}
        sb: Any = set(sa)
        got = merge.merge_product(a, list(newer.items()), count, since, order, sa)
        want = plain_merge.merge_product(b, list(newer.items()), count, since, order, sb)
        assert sa == {k for k, v in a.items() if len(v) != 1}
        assert sb == {k for k, v in b.items() if len(v) != 1}
    else:
        got = merge.merge_consolidating(a, list(newer.items()), count, since, order)
        want = plain_merge.merge_consolidating(b, list(newer.items()), count, since, order)
    assert got == sum(map(len, a.values())) and want == sum(map(len, b.values()))
    assert all(a.values())
    assert _view(a, since, order) == _view(b, since, order)
    # Compaction: every key (totally ordered times) or the given keys.
    if since:
        if order.is_total:
            kept = merge.compact_total(a, since, order)
            assert kept == plain_merge.compact_total(b, since, order)
            assert kept == sum(map(len, a.values()))
            assert a == {k: v for k, v in b.items()}
        else:
            keys = [k for k, v in a.items() if len(v) != 1]
            kept, still = merge.compact_keys(a, keys, since, order)
            bkeys = [k for k, v in b.items() if len(v) != 1]
            plain_merge.compact_keys(b, bkeys, since, order)
            assert still == {k for k in keys if k in a and len(a[k]) != 1}
            assert kept == sum(len(a[k]) for k in keys if k in a)
            assert _view(a, since, order) == _view(b, since, order)


# ------------------------------------------------------------------ join
PRODUCTS = ["pairs", "semijoin_pairs", "mapped", "core"]


def _logic(name: str) -> Any:
    if name == "mapped":
        return lambda k, v1, v2: (k, v1, v2)
    if name == "core":
        return lambda k, v1, v2: [(k, v1), (k, v2)] if v1 != v2 else []
    return None


@settings_
@given(st.booleans(), st.sampled_from(PRODUCTS), st.booleans(), st.data())
def test_join_kernels_match_their_twins(product: bool, name: str, first: bool, data: Any) -> None:
    order = PRODUCT if product else INT_ORDER
    times = product_times if product else int_times
    mine = _data(data.draw, times)
    others = [_data(data.draw, times) for _ in range(data.draw(st.integers(0, 3)))]
    fuel = data.draw(st.integers(1, 40))
    kernel = getattr(join, name)(order, first, _logic(name))
    twin = getattr(plain_join, name)(order, first, _logic(name))
    for key, vals_ in mine.items():
        for theirs in others:
            if key in theirs:
                out1: List[Any] = []
                out2: List[Any] = []
                kernel(key, vals_, theirs[key], out1)
                twin(key, vals_, theirs[key], out2)
                assert out1 == out2
    keys1 = iter(list(mine.items()))
    keys2 = iter(list(mine.items()))
    got = join.join_keys(keys1, [o.get for o in others], kernel, fuel)
    want = plain_join.join_keys(keys2, [o.get for o in others], twin, fuel)
    assert got == want
    if others:
        assert list(keys1) == list(keys2)  # both stopped at the same key


# ------------------------------------------------------------------ the engine on the twins
_ON_THE_TWINS = """
import sys
import timelypy, timelypy.kernels as k
chosen = k.chosen()
for name in ("consolidation", "grouping", "merge", "join", "histories"):
    module = "timelypy.differential.kernel." + name
    assert chosen[module] == "oracle.kernels.differential.kernel." + name, (module, chosen)
assert chosen["timelypy.progress.kernel"] == "oracle.kernels.progress.kernel", chosen
from timelypy.differential import arrange, join
from timelypy.differential.trace import spine
for used in (arrange.group_before, join.join_keys, join.pairs, spine.merge_consolidating):
    assert used.__module__.startswith("oracle.kernels."), used  # what the operators call
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-x", "-m", "not slow",
                      "-k", "one_worker", "tests/differential/test_differential_property.py"]))
"""


def test_the_property_suite_runs_on_the_plain_kernels() -> None:
    """A slice of the property suite (one worker, a few dozen examples) with every kernel of
    ``timelypy.differential.kernel`` taken from its twin."""
    env = dict(os.environ)
    env["TIMELYPY_KERNELS"] = "oracle.kernels"
    env["TIMELYPY_EXAMPLES"] = "30"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", _ON_THE_TWINS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout, done.stdout[-3000:]
