"""count, distinct and threshold at ``int`` times answer the same on the column path as on the
object path, for every kind of record.

Every dataflow runs twice, with ``TIMELYPY_COLUMNS=off`` and ``auto``, with
``column_count.COLUMNS_MIN_UPDATES`` lowered so that the small messages of the examples take the
column path; the outputs, consolidated per time, must be equal. Records are drawn from one kind
per stream (ints, ``(int, float)`` pairs, bools, nested tuples) and, in some streams, mixed
with records that do not fit (strings, ints beyond ``int64``); diffs are sometimes large, so
that counts leave ``int64`` and the column path hands the time to the object path.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.differential.kernel.reduce_counts import count_changes, threshold_changes
from timelypy.differential.reduce import CountTotal, ThresholdTotal, column_count
from timelypy.differential.trace.layout import COLUMNS_VARIABLE
from timelypy.workers.worker import Worker

Update = Tuple[Any, int, int]
"""``(record, ahead, diff)``: the update is at the round's time + ``ahead``."""

OPS = ("count", "distinct", "threshold")


def _odd(record: Any, count: int) -> int:
    return count % 2


def _build(rounds: List[List[Update]], mode: str) -> Any:
    def build(worker: Any) -> Dict[str, Any]:
        os.environ[COLUMNS_VARIABLE] = mode
        graphs: List[Any] = []

        def program(scope: Any) -> Any:
            session, coll = scope.new_collection()
            graphs.append(scope.subgraph)
            outs = {
                "count": coll.count(),
                "distinct": coll.distinct(),
                "threshold": coll.threshold(_odd),
            }
            probe = outs["count"].concat(outs["distinct"]).probe()
            return session, probe, {name: out.capture() for name, out in outs.items()}

        session, probe, caps = worker.dataflow(program)
        t = 0
        for i, updates in enumerate(rounds):
            for j, (record, ahead, diff) in enumerate(updates):
                if (i + j) % worker.peers == worker.index:
                    session.update_at(record, t + ahead, diff)
            t += 1
            session.advance_to(t)
            session.flush()
            if i % 2 == 0:
                worker.step_until(probe, t)
        session.close()
        while worker.step():
            pass
        ops = [op for op in graphs[0].children if isinstance(op, (CountTotal, ThresholdTotal))]
        out: Dict[str, Any] = {name: cap.consolidated() for name, cap in caps.items()}
        out["column_batches"] = sum(op.column_batches for op in ops)
        return out

    return build


def _run(rounds: List[List[Update]], mode: str, workers: int) -> Dict[str, Any]:
    merged: Dict[str, Any] = {name: {} for name in OPS}
    merged["column_batches"] = 0
    for part in tp.execute(_build(rounds, mode), workers=workers):
        for name in OPS:
            for d, t, r in part[name]:
                key = (repr(d), t)  # repr: True and 1 are one record to a dict, not to us
                merged[name][key] = merged[name].get(key, 0) + r
        merged["column_batches"] += part["column_batches"]
    for name in OPS:
        merged[name] = {k: r for k, r in merged[name].items() if r}
    return merged


def _same(
    monkeypatch: pytest.MonkeyPatch, rounds: List[List[Update]], workers: int
) -> Dict[str, Any]:
    monkeypatch.setattr(column_count, "COLUMNS_MIN_UPDATES", 2)
    monkeypatch.setattr(column_count, "COLUMNS_PER_TIME", 1)
    monkeypatch.setenv(COLUMNS_VARIABLE, "off")
    objects = _run(rounds, "off", workers)
    monkeypatch.setenv(COLUMNS_VARIABLE, "auto")
    columns = _run(rounds, "auto", workers)
    for name in OPS:
        assert columns[name] == objects[name], name
    assert objects["column_batches"] == 0
    return columns


KINDS = {
    "int": st.integers(-5, 5),
    "pair": st.tuples(st.integers(0, 3), st.sampled_from([0.5, 1.0, -2.25])),
    "bool": st.booleans(),
    "nested": st.tuples(st.integers(0, 2), st.tuples(st.booleans(), st.integers(0, 2))),
    "str": st.sampled_from(["a", "b", "", "é", "a\x00"]),
    "bytes": st.sampled_from([b"a", b"", b"\xff", b"a\x00"]),
    "word_pair": st.tuples(st.sampled_from(["x", "y", "z"]), st.integers(0, 2)),
}
MISFITS = st.sampled_from(["a", "b", 1 << 70, (1, "x"), 1.5])


@st.composite
def streams(draw: Any) -> List[List[Update]]:
    kind = draw(st.sampled_from(sorted(KINDS)))
    records = KINDS[kind]
    if draw(st.booleans()):
        records = st.one_of(records, records, records, MISFITS)
    diffs = st.sampled_from([-2, -1, 1, 1, 2, 1 << 61] if draw(st.booleans()) else [-1, 1, 1, 2])
    update = st.tuples(records, st.integers(0, 2), diffs)
    return draw(st.lists(st.lists(update, max_size=24), min_size=1, max_size=6))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=streams(), workers=st.sampled_from([1, 2]))
def test_random_streams_give_the_same_answers_on_both_paths(
    monkeypatch: pytest.MonkeyPatch, rounds: List[List[Update]], workers: int
) -> None:
    _same(monkeypatch, rounds, workers)


def test_int_records_take_the_column_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    rounds = [
        [
            (int(k), int(a), int(d))
            for k, a, d in zip(
                rng.integers(0, 40, 200), rng.integers(0, 3, 200), rng.choice([-1, 1, 1], 200)
            )
        ]
        for _ in range(6)
    ]
    columns = _same(monkeypatch, rounds, 2)
    assert columns["column_batches"] >= 6 * 3


@pytest.mark.parametrize("kind", ["str", "bytes", "pair"])
def test_string_records_take_the_column_path(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    rng = np.random.default_rng(5)
    words = ["w%d" % i for i in range(30)]

    def record(k: int, a: int) -> Any:
        word = words[k]
        return word.encode() if kind == "bytes" else (word, a) if kind == "pair" else word

    rounds = [
        [
            (record(int(k), int(a)), int(a), int(d))
            for k, a, d in zip(
                rng.integers(0, 30, 200), rng.integers(0, 3, 200), rng.choice([-1, 1, 1], 200)
            )
        ]
        for _ in range(6)
    ]
    columns = _same(monkeypatch, rounds, 2)
    assert columns["column_batches"] >= 6 * 3


def test_counts_beyond_int64_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    big = 1 << 61
    rounds = [[(1, 0, big), (1, 0, big), (2, 0, 1)], [(1, 0, big), (1, 0, big), (2, 0, 1)]]
    columns = _same(monkeypatch, rounds, 1)
    assert columns["count"][("(1, 4611686018427387904)", 0)] == 1
    assert columns["count"][("(1, 9223372036854775808)", 1)] == 1


def test_a_checkpoint_takes_the_held_columns_back_as_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(column_count, "COLUMNS_MIN_UPDATES", 2)
    monkeypatch.setattr(column_count, "COLUMNS_PER_TIME", 1)
    monkeypatch.setenv(COLUMNS_VARIABLE, "auto")
    worker = Worker()
    graphs: List[Any] = []

    def program(scope: Any) -> Any:
        session, coll = scope.new_collection()
        graphs.append(scope.subgraph)
        return session, coll.count().probe()

    session, probe = worker.dataflow(program)
    session.update_at(7, 5, 2)
    session.update_at(8, 5, 1)
    session.update_at(7, 6, -1)
    session.advance_to(1)
    session.flush()
    worker.step_until(probe, 1)
    (op,) = [c for c in graphs[0].children if isinstance(c, CountTotal)]
    assert op.column_batches == 1 and set(op._columns.chunks) == {5, 6}
    pieces = sorted(op.future_state(), key=repr)
    assert pieces == [(7, "pending", [(5, 2), (6, -1)]), (8, "pending", [(5, 1)])]
    assert not op._columns.chunks
    assert op.pending == {5: {7: 2, 8: 1}, 6: {7: -1}}


def test_count_changes_builds_retractions_insertions_and_the_state() -> None:
    pairs: Dict[Any, Any] = {1: (1, 3), 2: (2, 1)}
    out = count_changes([1, 2, 3], np.array([1, -1, 4]), pairs, 9)
    assert out is not None
    assert sorted(out) == [((1, 3), 9, -1), ((1, 4), 9, 1), ((2, 1), 9, -1), ((3, 4), 9, 1)]
    assert pairs == {1: (1, 4), 3: (3, 4)}
    assert count_changes([1], np.array([1]), {1: (1, 1 << 62)}, 0) is None


def test_threshold_changes_calls_f_on_non_zero_counts_only() -> None:
    counts: Dict[Any, int] = {"a": 2}
    calls: List[Tuple[Any, int]] = []

    def f(record: Any, count: int) -> int:
        calls.append((record, count))
        return min(count, 2)

    out = threshold_changes(["a", "b"], np.array([-2, 3]), counts, f, 4)
    assert out is not None and sorted(out) == [("a", 4, -2), ("b", 4, 2)]
    assert sorted(calls) == [("a", 2), ("b", 3)]
    assert counts == {"b": 3}
    distinct = threshold_changes(["b", "c"], np.array([-5, -1]), counts, None, 5)
    assert distinct == [("b", 5, -1)] and counts == {"b": -2, "c": -1}


def test_an_open_loop_s_messages_stay_on_the_object_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two updates at each of many times in one message: below COLUMNS_PER_TIME per time.
    monkeypatch.setattr(column_count, "COLUMNS_MIN_UPDATES", 2)
    pending: Dict[Any, Dict[Any, int]] = {}
    cols = column_count.RecordColumns(enabled=True)
    loop = [(p % 5, p // 2, 1 - 2 * (p % 2)) for p in range(200)]
    assert not cols.absorb(loop, pending) and not pending and cols.misses == 1
    assert cols.absorb([(p % 5, 0, 1) for p in range(200)], pending) and set(pending) == {0}


def test_a_new_count_pair_holds_the_record_object_the_state_holds() -> None:
    # Words split afresh are equal, not identical: the output pair reuses the state's object.
    first, later = "".join(["wo", "rd"]), "".join(["w", "ord"])
    assert first == later and first is not later
    seen: List[Any] = []
    worker = Worker()

    def program(scope: Any) -> Any:
        session, coll = scope.new_collection()
        return session, coll.count().inspect(seen.append).probe()

    session, probe = worker.dataflow(program)
    session.insert(first)
    session.advance_to(1)
    session.flush()
    worker.step_until(probe, 1)
    session.insert(later)
    session.advance_to(2)
    session.flush()
    worker.step_until(probe, 2)
    assert sorted((u[0][1], u[2]) for u in seen) == [(1, -1), (1, 1), (2, 1)]
    assert all(u[0][0] is first for u in seen)
