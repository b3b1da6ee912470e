"""The kernels of ``timelypy.progress.kernel`` against their plain twins in
``oracle.kernels.progress.kernel``: the same tables, sums and frontiers on random updates (the
count-table contract: no zero count after any write), and the engine runs on the twins when
``TIMELYPY_KERNELS`` names them."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any, Dict, List, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st
from oracle.kernels.progress import kernel as plain
from support.paths import ROOT

from timelypy.order import Product, less_equal
from timelypy.progress import kernel

EXAMPLES = int(os.environ.get("TIMELYPY_EXAMPLES", "200"))
ints = st.integers(0, 6)
products = st.builds(Product, ints, ints)
deltas = st.integers(-3, 3)


def _table(pairs: List[Tuple[Any, int]]) -> Dict[Any, int]:
    table: Dict[Any, int] = {}
    for t, d in pairs:
        plain.update(table, t, d)
    return table


def _no_zero(table: Dict[Any, int]) -> None:
    assert all(table.values()), table


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(ints, deltas)), st.lists(st.tuples(ints, deltas)))
def test_update_and_update_many(start, pairs):
    fast, slow = _table(start), _table(start)
    for t, d in pairs:
        kernel.update(fast, t, d)
        plain.update(slow, t, d)
    assert fast == slow
    _no_zero(fast)
    fast, slow = _table(start), _table(start)
    assert kernel.update_many(fast, iter(pairs)) == plain.update_many(slow, pairs)
    assert fast == slow
    _no_zero(fast)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(ints, deltas)), st.lists(st.tuples(ints, deltas)))
def test_total_frontier_kernels(start, pairs):
    fast, slow = _table(start), _table(start)
    old = plain.least_positive(fast)
    assert kernel.least_positive(fast) == old
    moved, lowered = kernel.update_total(fast, iter(pairs), old)
    plain_moved, changed = plain.update_total(slow, pairs, old)
    assert (fast, moved) == (slow, plain_moved)
    _no_zero(fast)
    assert lowered or not changed  # "may have moved" whenever the frontier did move
    new = kernel.least_positive(fast)
    assert new == plain.least_positive(slow)
    if not lowered:
        assert new == old
    kernel.move(fast, old, new)
    plain.move(slow, old, new)
    assert fast == slow
    _no_zero(fast)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(products, deltas)), st.lists(st.tuples(products, deltas)))
def test_partial_frontier_kernels(start, pairs):
    fast, slow = _table(start), _table(start)
    frontier = plain.minimal_positive(fast, less_equal)
    assert kernel.minimal_positive(fast, less_equal) == frontier
    may_move = kernel.update_partial(fast, frontier, iter(pairs), less_equal)
    changed = plain.update_partial(slow, frontier, pairs, less_equal)
    assert fast == slow
    _no_zero(fast)
    assert may_move or not changed
    new = kernel.minimal_positive(fast, less_equal)
    assert new == plain.minimal_positive(slow, less_equal)
    if not may_move:
        assert new == frontier
    assert sorted(kernel.frontier_changes(frontier, new)) == sorted(
        plain.frontier_changes(frontier, new)
    )


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(products, unique=True, max_size=4), st.lists(products, unique=True, max_size=4))
def test_frontier_changes(old, new):
    assert kernel.frontier_changes(old, new) == plain.frontier_changes(old, new)
    assert kernel.frontier_changes(old[:1], new[:1]) == plain.frontier_changes(old[:1], new[:1])


def test_the_engine_runs_on_the_plain_twins():
    """``TIMELYPY_KERNELS=oracle.kernels`` swaps the progress kernels for the twins, and a
    dataflow with a loop (total and partial orders) still computes the right answer."""
    root = ROOT
    tests = ROOT / "tests"
    script = (
        "import timelypy as tp, timelypy.kernels as k\n"
        "from timelypy.progress import kernel\n"
        "assert k.chosen()['timelypy.progress.kernel'] == 'oracle.kernels.progress.kernel'\n"
        "assert kernel.least_positive.__module__ == 'oracle.kernels.progress.kernel'\n"
        "def build(worker):\n"
        "    def dataflow(scope):\n"
        "        inp, s = scope.new_input()\n"
        "        def loop(child):\n"
        "            handle, cycle = child.feedback()\n"
        "            body = s.enter(child).concat(cycle)\n"
        "            body.filter(lambda x: x < 3).map(lambda x: x + 1).connect_loop(handle)\n"
        "            return body.filter(lambda x: x >= 3).leave()\n"
        "        return inp, scope.iterative(loop).capture()\n"
        "    inp, cap = worker.dataflow(dataflow)\n"
        "    inp.send(0)\n"
        "    inp.advance_to(2)\n"
        "    inp.send(2)\n"
        "    return cap\n"
        "(cap,) = tp.execute(build)\n"
        "print(sorted(cap.records()))\n"
    )
    env = dict(os.environ, TIMELYPY_KERNELS="oracle.kernels")
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(tests), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(0, 3), (2, 3)]", done.stdout
