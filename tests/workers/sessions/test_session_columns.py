"""The column road of a session's bulk load: ``update_many`` hashes records column-wise, keeps
them per worker and input as columns, and the workers check and apply whole columns.

Each fast piece is checked against the slow piece it replaces: the column-wise hash against
``stable_hash`` of each record, the cheap sendability test against really encoding, the
column check against the per-update check, and a session fed through ``update_many`` against
one fed one ``update`` at a time (on 1 and 3 workers, inline and in processes).
"""

from __future__ import annotations

import pickle
import random
from typing import Any, Dict, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.communication import wire
from timelypy.errors import SessionInputError
from timelypy.hashing import owners, stable_hash, stable_hashes
from timelypy.workers.sessions.batch import Batch, Update, check_update, check_updates
from timelypy.workers.sessions.service import clean_columns, clean_updates

pytestmark = pytest.mark.timeout(300)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
ANY_INT = st.one_of(
    INT64,
    st.integers(min_value=2**63, max_value=2**70),
    st.integers(max_value=-(2**63) - 1, min_value=-(2**70)),
)


# ------------------------------------------------------------------------------------------
# hashing column-wise


@st.composite
def rows(draw: Any) -> List[Any]:
    """A list that may or may not take the column-wise road: ints, tuples of ints of one
    width, with sometimes an odd one out (another width, a big int, a bool, a string)."""
    n = draw(st.integers(min_value=0, max_value=200))
    width = draw(st.integers(min_value=0, max_value=4))
    if draw(st.booleans()):
        values: List[Any] = draw(st.lists(INT64, min_size=n, max_size=n))
    else:
        values = [tuple(draw(st.lists(INT64, min_size=width, max_size=width))) for _ in range(n)]
    if values and draw(st.booleans()):
        odd = draw(
            st.one_of(
                ANY_INT,
                st.booleans(),
                st.text(max_size=3),
                st.tuples(INT64),
                st.tuples(INT64, st.booleans()),
            )
        )
        values[draw(st.integers(min_value=0, max_value=len(values) - 1))] = odd
    return values


@settings(max_examples=300, deadline=None)
@given(rows(), st.integers(min_value=1, max_value=5))
def test_column_wise_hash_equals_stable_hash_of_each(values: List[Any], workers: int) -> None:
    assert stable_hashes(values) == [stable_hash(v) for v in values]
    assert [int(o) for o in owners(values, workers)] == [stable_hash(v) % workers for v in values]


def test_column_wise_hash_of_a_large_load() -> None:
    rng = random.Random(3)
    values = [(rng.randrange(-(2**63), 2**63), rng.randrange(1000)) for _ in range(5000)]
    assert stable_hashes(values) == [stable_hash(v) for v in values]
    values = [rng.randrange(2**64) for _ in range(5000)]  # beyond int64: one at a time
    assert stable_hashes(values) == [stable_hash(v) for v in values]


# ------------------------------------------------------------------------------------------
# the cheap test of sendability

LEAVES = st.one_of(
    ANY_INT,
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.binary(max_size=4),
    st.text(max_size=4),
    st.just("\ud800"),
    st.frozensets(st.integers(), max_size=2),
)
NESTED = st.recursive(LEAVES, lambda inner: st.tuples(inner, inner), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(NESTED, max_size=30))
def test_plainly_sendable_values_encode_and_pickle(values: List[Any]) -> None:
    if not wire.plainly_sendable(values):
        return
    assert list(wire.decode(wire.encode(values))) == values  # the wire gives tuples
    assert pickle.loads(pickle.dumps(values)) == values


def test_plainly_sendable_says_no_to_what_may_not_travel() -> None:
    assert wire.plainly_sendable([(1, "a", b"x", None, 2.5, True)] * 100)
    assert not wire.plainly_sendable(["ok", "\ud800"])  # msgpack refuses lone surrogates
    assert not wire.plainly_sendable([(1, 2), (1, 2, 3)])  # ragged: not known
    assert not wire.plainly_sendable([object()])
    assert not wire.plainly_sendable([{1: 2}])


# ------------------------------------------------------------------------------------------
# the column check in the worker


class _FakeHandle:
    """An input at time ``time``; retracting like ``InputSession`` or not."""

    def __init__(self, time: Any) -> None:
        self.time = time


class _FakeRetracting(_FakeHandle):
    def update_at(self, data: Any, time: Any, diff: int) -> None:
        raise AssertionError("not called")

    def send_updates(self, updates: Any) -> None:
        raise AssertionError("not called")

    def advance_to(self, time: Any) -> None:
        raise AssertionError("not called")

    def flush(self) -> None:
        raise AssertionError("not called")

    def close(self) -> None:
        raise AssertionError("not called")

    @property
    def closed(self) -> bool:
        return False


UPDATE = st.tuples(
    st.one_of(st.integers(), st.text(max_size=2), st.just([1])),
    st.one_of(st.integers(min_value=-1, max_value=4), st.just(1.5)),
    st.one_of(st.integers(min_value=-2, max_value=2), st.just(True)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(UPDATE, max_size=20), st.booleans(), st.integers(min_value=0, max_value=2))
def test_column_check_never_passes_what_the_update_check_refuses(
    updates: List[Tuple[Any, Any, Any]], retracts: bool, now: int
) -> None:
    handle = (_FakeRetracting if retracts else _FakeHandle)(now)
    records = [u[0] for u in updates]
    times = [u[1] for u in updates]
    diffs = [u[2] for u in updates]
    if clean_columns(handle, records, times, diffs):
        assert clean_updates(handle, updates)
        assert all(type(d) is int and d != 0 for d in diffs)


# ------------------------------------------------------------------------------------------
# the batch kept as columns


def test_batch_keeps_call_order_across_single_and_column_updates() -> None:
    batch = Batch()
    calls: List[Update] = []
    rng = random.Random(5)
    for round_ in range(6):
        if round_ % 2:
            update = check_update("a", ("one", round_), 1, 0, 0, 3, True)
            batch.add(update)
            calls.append(update)
        else:
            records = [(rng.randrange(50), rng.randrange(50)) for _ in range(100)]
            columns = check_updates("b" if round_ else "a", records, -1, 2, 0, 3, True)
            batch.extend_columns(columns)
            calls += [Update(columns.input, r, 2, -1, stable_hash(r) % 3) for r in records]
    assert len(batch) == len(calls)
    parts = batch.parts(3)
    seen: Dict[int, Update] = {}
    for worker, by_input in parts.items():
        for name, records, times, diffs, positions in by_input:
            for r, t, d, p in zip(records, times, diffs, positions):
                seen[p] = Update(name, r, t, d, worker)
    assert [seen[p] for p in range(len(calls))] == calls
    taken = batch.take_out([0, 5, 150])
    assert taken == [calls[0], calls[5], calls[150]]
    rest = [u for p, u in enumerate(calls) if p not in (0, 5, 150)]
    assert batch.clear() == rest and len(batch) == 0


# ------------------------------------------------------------------------------------------
# end to end: bulk and one at a time agree


def _flow(scope: Any) -> Dict[str, Any]:
    pairs_in, pairs = scope.new_collection()
    return {"pairs": pairs_in, "probe": pairs.probe(), "out": pairs.count().capture()}


def _consolidated(changes: List[Tuple[Any, Any, int]]) -> Dict[Any, int]:
    acc: Dict[Any, int] = {}
    for data, time, diff in changes:
        acc[(data, time)] = acc.get((data, time), 0) + diff
    return {k: v for k, v in acc.items() if v}


@pytest.mark.parametrize("workers,backend", [(1, "inline"), (3, "inline"), (2, "processes")])
def test_bulk_int_pairs_equal_one_update_per_record(workers: int, backend: str) -> None:
    rng = random.Random(workers)
    epochs = []
    for t in range(3):
        records = [(rng.randrange(20), rng.randrange(-(2**40), 2**40)) for _ in range(400)]
        diffs = [rng.choice([1, 2, -1]) for _ in records]
        times = [t + rng.randrange(2) for _ in records]
        epochs.append((records, diffs, times))
    with (
        tp.open_session(_flow, workers=workers, backend=backend) as bulk,
        tp.open_session(_flow, workers=workers, backend=backend) as single,
    ):
        for t, (records, diffs, times) in enumerate(epochs):
            bulk.update_many("pairs", records, diffs, times)
            bulk.update("pairs", ("single", t), 1)
            for r, d, u in zip(records, diffs, times):
                single.update("pairs", r, d, u)
            single.update("pairs", ("single", t), 1)
            for s in (bulk, single):
                s.advance_to(t + 1)
                s.wait("probe")
            got = _consolidated(bulk.changes("out"))
            assert got == _consolidated(single.changes("out")) and got


def test_a_record_that_cannot_travel_is_refused_by_the_flush_naming_it() -> None:
    def flow(scope: Any) -> Dict[str, Any]:
        pairs_in, pairs = scope.new_collection()
        return {"pairs": pairs_in, "probe": pairs.probe(), "out": pairs.capture()}

    class Unpicklable(tuple):
        def __reduce__(self) -> Any:
            raise TypeError("no pickling here")

    with tp.open_session(flow, workers=2, backend="processes") as s:
        s.update_many("pairs", [(i, i) for i in range(300)])
        s.update("pairs", Unpicklable((1, 2)))
        with pytest.raises(SessionInputError, match="cannot be sent") as info:
            s.flush()
        assert "no pickling here" in str(info.value)
        assert s.pending == 300  # the others stay buffered, nothing was applied
        s.advance_to(1)
        s.wait("probe")
        assert sorted(d for d, _, _ in s.changes("out")) == [(i, i) for i in range(300)]
