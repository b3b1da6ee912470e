"""The join on column batches: identical answers on the column path and the object path.

Random update streams of fixed-width records (int, float and bool fields, tuple keys, the value
``()`` of a semijoin's keys) go through ``join``, ``semijoin``, ``join_map`` and ``join_core``
with ``TIMELYPY_COLUMNS=auto`` and ``off``: the accumulated output at every time is the same on
both, and equal to the join of the accumulated inputs (the join is bilinear). Some streams carry
a record that does not fit columns (a string), so that column and object batches mix in one
trace. Small column batches (which read the other trace only at their keys) and large ones
(matched on their columns) are both exercised. Deterministic cases check that the column path
is really taken (the join's ``column_batches`` counter), that tiny fuel resumes it exactly, that
diffs whose products would overflow ``int64`` fall back to the object path, and one run on
worker processes.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any, Callable, Dict, List, Sequence, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.differential import arrange_columns
from timelypy.differential import join as join_module
from timelypy.differential.join import JoinOperator
from timelypy.differential.trace.layout import COLUMNS_VARIABLE

Update = Tuple[int, Any, int]
"""``(input, record, diff)``: one input update of a round."""
Rounds = List[List[Update]]


def _core_logic(k: Any, x: Any, y: Any) -> List[Any]:
    return [] if x == y else [(k, x), (y, k)]


PRODUCTS: Dict[str, Callable[[Any, Any], Any]] = {
    "join": lambda a, b: a.join(b),
    "semijoin": lambda a, b: a.semijoin(b),
    "join_map": lambda a, b: a.join_map(b, lambda k, x, y: (y, k, x)),
    "join_core": lambda a, b: a.arrange_by_key().join_core(b.arrange_by_key(), _core_logic),
}


def _oracle(kind: str, a: Counter, b: Counter) -> Counter:
    """The product of the accumulated inputs ``a`` and ``b`` (records -> counts)."""
    out: Counter = Counter()
    for (k, x), c1 in a.items():
        if kind == "semijoin":
            if b.get(k):
                out[(k, x)] += c1 * b[k]
            continue
        for (k2, y), c2 in b.items():
            if k2 != k:
                continue
            if kind == "join":
                out[(k, (x, y))] += c1 * c2
            elif kind == "join_map":
                out[(y, k, x)] += c1 * c2
            else:
                for record in _core_logic(k, x, y):
                    out[record] += c1 * c2
    return Counter({r: c for r, c in out.items() if c})


def _accumulate(updates: Sequence[Tuple[Any, int, int]], t: int) -> Counter:
    acc: Counter = Counter()
    for record, time, diff in updates:
        if time <= t:
            acc[record] += diff
    return Counter({r: c for r, c in acc.items() if c})


def _run(kind: str, rounds: Rounds, mode: str, workers: int, backend: str = "inline"):
    """The join's output updates of every worker, and its batches per path (summed)."""

    driver = os.getpid()

    def build(worker):
        # Set in the worker: a worker process may come from a server started before the test.
        os.environ[COLUMNS_VARIABLE] = mode
        if os.getpid() != driver:  # (inline: the driver's module, patched by the test)
            arrange_columns.COLUMNS_MIN_UPDATES = 1
        out: List[Tuple[Any, int, int]] = []
        ops: List[JoinOperator] = []

        def define(scope):
            sa, a = scope.new_collection()
            sb, b = scope.new_collection()
            joined = PRODUCTS[kind](a, b)
            op = scope.subgraph.children[joined.inner.port.node]
            assert isinstance(op, JoinOperator), op
            ops.append(op)
            return (sa, sb), joined.inspect(out.append).probe()

        sessions, probe = worker.dataflow(define)
        for t, updates in enumerate(rounds):
            for n, (side, record, diff) in enumerate(updates):
                if n % worker.peers == worker.index:
                    sessions[side].update(record, diff)
            for session in sessions:
                session.advance_to(t + 1)
                session.flush()
            while probe.less_than(t + 1):
                worker.step()
        for session in sessions:
            session.close()
        while worker.step():
            pass
        return out, ops[0].column_batches, ops[0].object_batches

    results = tp.execute(build, workers=workers, backend=backend, timeout=300)
    updates = [u for out, _, _ in results for u in out]
    return updates, sum(r[1] for r in results), sum(r[2] for r in results)


def _check_both_paths(kind: str, rounds: Rounds, workers: int, monkeypatch, backend="inline"):
    """Run on both paths; assert equal accumulations at every time, and equal to the oracle.
    Returns the column run's ``(column_batches, object_batches)``."""
    runs = {}
    # the test's batches are small: seal them as columns all the same
    monkeypatch.setattr(arrange_columns, "COLUMNS_MIN_UPDATES", 1)
    for mode in ("auto", "off"):
        monkeypatch.setenv(COLUMNS_VARIABLE, mode)
        runs[mode] = _run(kind, rounds, mode, workers, backend)
    assert runs["off"][1] == 0
    a_in: Counter = Counter()
    b_in: Counter = Counter()
    for t, updates in enumerate(rounds):
        for side, record, diff in updates:
            (a_in if side == 0 else b_in)[record] += diff
        expected = _oracle(kind, a_in, b_in)
        on_columns = _accumulate(runs["auto"][0], t)
        on_objects = _accumulate(runs["off"][0], t)
        assert on_columns == on_objects, (kind, t, rounds)
        assert on_columns == expected, (kind, t, rounds)
    return runs["auto"][1], runs["auto"][2]


# ---------------------------------------------------------------- random streams
FLOATS = st.sampled_from([0.0, 0.5, -2.5, 3.25, 1e300])
SHAPES = {
    # name: (key strategy, value strategy of the first input, of the second)
    "ints": (st.integers(0, 4), st.integers(-3, 3), st.integers(0, 2)),
    "tuple_key": (
        st.tuples(st.integers(0, 2), st.booleans()),
        st.tuples(FLOATS, st.integers(0, 2)),
        st.booleans(),
    ),
    "float_key": (FLOATS, st.booleans(), st.tuples(st.integers(-1, 1), FLOATS)),
}


@st.composite
def streams(draw, kind: str) -> Rounds:
    """Rounds of updates of both inputs; sometimes a string record in a later round."""
    keys, va, vb = SHAPES[draw(st.sampled_from(sorted(SHAPES)))]
    diffs = st.sampled_from([1, 1, 1, -1, 2, -2])

    def update(side: int) -> Any:
        key = draw(keys)
        if side == 1 and kind == "semijoin":
            return (1, key, draw(diffs))
        return (side, (key, draw(va if side == 0 else vb)), draw(diffs))

    n_rounds = draw(st.integers(1, 5))
    rounds = [
        [update(draw(st.sampled_from([0, 1]))) for _ in range(draw(st.integers(0, 8)))]
        for _ in range(n_rounds)
    ]
    if n_rounds > 1 and draw(st.booleans()):  # a record that does not fit: batches mix
        side = draw(st.sampled_from([0, 1]))
        key = draw(keys)
        record = key if side == 1 and kind == "semijoin" else (key, "s")
        rounds[draw(st.integers(1, n_rounds - 1))].append((side, record, 1))
    return rounds


PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


@pytest.mark.parametrize("kind", sorted(PRODUCTS))
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("small", [(0, 0), (16, 0), (16, 1024)])
def test_random_streams_give_the_same_answers_on_both_paths(kind, workers, small, monkeypatch):
    """``small`` is ``(small_batch, small_other)``: ``(0, 0)`` matches every column batch on
    its columns; else the small ones read the other trace's column batches at their keys
    (those of at most ``small_other`` updates through their dictionaries). Every chunk of
    matched pairs that may cancel is consolidated before its records are built."""
    monkeypatch.setattr(JoinOperator, "small_batch", small[0])
    monkeypatch.setattr(JoinOperator, "small_other", small[1])
    monkeypatch.setattr(join_module, "CONSOLIDATE_PAIRS_MIN", 1)

    @PROPERTY
    @given(streams(kind))
    def check(rounds):
        _check_both_paths(kind, rounds, workers, monkeypatch)

    check()


@PROPERTY
@given(st.sampled_from(sorted(PRODUCTS)), st.sampled_from([0, 2]), st.data())
def test_random_streams_with_tiny_fuel(monkeypatch, kind, small_batch, data):
    """A fuel of a few outputs: the column path stops in the middle of a batch and resumes."""
    monkeypatch.setattr(JoinOperator, "fuel", 3)
    monkeypatch.setattr(JoinOperator, "small_batch", small_batch)
    monkeypatch.setattr(JoinOperator, "small_other", 0)
    _check_both_paths(kind, data.draw(streams(kind)), 1, monkeypatch)


# ---------------------------------------------------------------- deterministic cases
def _skip_level(n: int) -> Rounds:
    """People ``p`` managed by ``p // 2``, then some change manager to ``p // 3``."""
    load = [(side, (p // 2, p), 1) for p in range(1, n) for side in (0, 1)]
    moves = [
        [(side, (p // 2, p), -1), (side, (p // 3, p), 1)] for p in range(2, n, 7) for side in (0, 1)
    ]
    return [load] + [m + m2 for m, m2 in zip(moves[::2], moves[1::2])]


@pytest.mark.parametrize("kind", sorted(PRODUCTS))
def test_the_column_path_is_taken(kind, monkeypatch):
    rounds = _skip_level(60)
    if kind == "semijoin":
        rounds = [[(s, r if s == 0 else r[0], d) for s, r, d in u] for u in rounds]
    columns, objects = _check_both_paths(kind, rounds, 2, monkeypatch)
    assert columns > 0 and objects == 0, (columns, objects)


def test_tuple_keys_with_float_and_bool_fields_take_the_column_path(monkeypatch):
    rounds = [
        [(0, ((k % 3, k % 2 == 0), (k * 0.5, k)), 1) for k in range(20)]
        + [(1, ((k % 3, k % 2 == 1), k % 2 == 0), 1) for k in range(10)],
        [(0, ((1, True), (0.5, 1)), -1), (1, ((2, False), True), 2)],
    ]
    columns, objects = _check_both_paths("join", rounds, 1, monkeypatch)
    assert columns > 0 and objects == 0, (columns, objects)


def test_a_record_that_does_not_fit_mixes_the_paths(monkeypatch):
    rounds = _skip_level(40)
    rounds[2].append((0, (1, "a string"), 1))
    columns, objects = _check_both_paths("join", rounds, 1, monkeypatch)
    assert columns > 0 and objects > 0, (columns, objects)


def test_diffs_whose_products_overflow_int64_take_the_object_path(monkeypatch):
    monkeypatch.setattr(JoinOperator, "small_batch", 0)  # (small batches multiply in Python)
    big = (1 << 31) - 1  # each fits int64 columns; a consolidated sum of two does not multiply
    rounds = [
        [(0, (1, 10), big), (0, (1, 10), big), (1, (1, 20), big)],
        [(1, (1, 20), big), (0, (2, 5), 1), (1, (2, 6), 3)],
    ]
    columns, objects = _check_both_paths("join", rounds, 1, monkeypatch)
    assert objects > 0, (columns, objects)


@pytest.mark.processes
def test_worker_processes_give_the_same_answers(monkeypatch):
    rounds = _skip_level(80)
    rounds[3].append((1, (5, "a string"), 1))
    columns, objects = _check_both_paths("join", rounds, 2, monkeypatch, backend="processes")
    assert columns > 0, (columns, objects)


def _history_then_change(
    mode: str,
    first: Callable[[int], Tuple[Any, int]] = lambda k: ((k, 10 + k), 1),
    second: Callable[[int], Tuple[Any, int]] = lambda k: ((k, 10 + k), -1),
) -> List[Tuple[Any, int, int]]:
    """One side's history of eight keys in two batches (``first(k)`` at 0, by default inserts,
    then ``second(k)`` at 1, by default their retractions) while the other side holds time 0
    (so that history is not compacted away), then the other side changes those keys at 2."""
    os.environ[COLUMNS_VARIABLE] = mode

    def build(worker):
        out: List[Tuple[Any, int, int]] = []

        def define(scope):
            sa, a = scope.new_collection()
            sb, b = scope.new_collection()
            return (sa, sb), a.join(b).inspect(out.append).probe()

        (sa, sb), probe = worker.dataflow(define)
        for t, update in ((0, first), (1, second)):
            for k in range(8):
                sb.update(*update(k))
            sb.advance_to(t + 1)
            sb.flush()
            for _ in range(20):
                worker.step()
        sa.advance_to(2)
        for k in range(8):
            sa.insert((k, 100 + k))
        sa.close()
        sb.close()
        while worker.step():
            pass
        return out

    return tp.execute(build, timeout=60)[0]


def test_matched_pairs_that_cancel_are_not_made(monkeypatch):
    """A key's history on one side (an insert, then its retraction), met by a
    later change on the other side: the two pairs land on the same time and cancel. The column
    path consolidates a chunk's pairs before building records, so it makes neither; the object
    path makes both (the answers, accumulated, are the same: nothing)."""
    monkeypatch.setattr(join_module, "CONSOLIDATE_PAIRS_MIN", 1)
    monkeypatch.setattr(JoinOperator, "small_batch", 0)  # (match every batch on its columns)
    monkeypatch.setattr(arrange_columns, "COLUMNS_MIN_UPDATES", 1)
    on_objects = _history_then_change("off")
    assert len(on_objects) == 16 and not _accumulate(on_objects, 2), on_objects
    assert _history_then_change("auto") == []


def test_matched_pairs_of_batches_with_their_own_strings(monkeypatch):
    """Chunks of pairs against several batches whose string values are coded by each batch's
    own dictionary: consolidated or not, the records are the object path's."""
    monkeypatch.setattr(join_module, "CONSOLIDATE_PAIRS_MIN", 1)
    monkeypatch.setattr(JoinOperator, "small_batch", 0)
    monkeypatch.setattr(arrange_columns, "COLUMNS_MIN_UPDATES", 1)

    def made(mode: str) -> Counter:
        updates = _history_then_change(
            mode, lambda k: ((k, "early %d" % k), 1), lambda k: ((k, "late %d" % (k % 3)), 1)
        )
        return _accumulate(updates, 2)

    monkeypatch.setenv(COLUMNS_VARIABLE, "off")
    on_objects = made("off")
    assert len(on_objects) == 16, on_objects
    assert made("auto") == on_objects


def test_a_chunk_against_batches_of_their_own_codes(monkeypatch):
    """The chunk kernel given pairs against two batches whose values are coded differently
    (strings, each batch its own dictionary): the records are those made pair by pair."""
    monkeypatch.setattr(join_module, "CONSOLIDATE_PAIRS_MIN", 1)
    from timelypy.differential.kernel.join_columns import column_pairs
    from timelypy.differential.trace.column_batch import ColumnBatch

    mine = ColumnBatch.from_updates([((k, 100 + k), 5, 1) for k in range(4)], [0], [9])
    early = [((k, "early %d" % k), 1, 1) for k in range(4)] + [((0, "zz"), 2, 1)]
    late = [((k, "late %d" % (k % 2)), 3, -1) for k in range(4)] + [((0, "zz"), 3, -1)]
    others = [ColumnBatch.from_updates(u, [0], [9]) for u in (early, late)]
    parts = []
    for other in others:
        i, j = np.meshgrid(np.arange(mine.count), np.arange(other.count), indexing="ij")
        same = mine.key_cols[0][i.ravel()] == other.key_cols[0][j.ravel()]
        parts.append((other, i.ravel()[same], j.ravel()[same]))
    build = column_pairs(True)
    expected: Counter = Counter()
    for other, i, j in parts:
        for record, t, d in join_module._chunk_outputs(mine, [(other, i, j)], build, False):
            expected[(record, t)] += d
    made: Counter = Counter()
    for record, t, d in join_module._chunk_outputs(mine, parts, build, True):
        made[(record, t)] += d
    assert +made == +expected
    assert ((0, (100, "zz")), 5) not in +made  # inserted at 2, retracted at 3
