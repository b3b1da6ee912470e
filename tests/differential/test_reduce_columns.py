"""The reduce family on column batches answers exactly as on the object path.

Every dataflow here runs twice, with ``TIMELYPY_COLUMNS=auto`` and ``off`` (set before the
dataflow is built), and the captured outputs must be equal update for update (consolidated per
time). ``sum`` at ``int`` times reads the column batches of its private arrangement; the
operator's ``column_batches`` / ``object_batches`` counters show which path each batch took.
``count``, ``distinct`` and ``threshold`` at ``int`` times run without an arrangement and sum
large messages of fixed-width records on their own column path (``reduce.column_count``),
counted as ``total_column_batches`` / ``total_object_batches``; ``test_count_columns.py`` tests
it on more kinds of records.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import timelypy as tp
from timelypy.differential import arrange_columns
from timelypy.differential.reduce import CountTotal, ReduceOperator, ThresholdTotal, column_count
from timelypy.differential.reduce.column_sum import sum_column_batch, sum_columns_fit
from timelypy.differential.trace.column_batch import ColumnBatch
from timelypy.differential.trace.layout import COLUMNS_VARIABLE, Layout
from timelypy.workers.worker import Worker

Round = List[Tuple[Tuple[int, int], int, int]]
"""One round's ``((key, val), ahead, diff)``: the update is at the round's time + ``ahead``."""

OPS = ("sum", "count", "distinct", "threshold")
COUNTERS = ("column_batches", "object_batches", "total_column_batches", "total_object_batches")


def _at_least_two(record: Any, count: int) -> int:
    return 1 if count >= 2 else 0


def _program(scope: Any) -> Tuple[Any, Any, Dict[str, Any], Any]:
    session, coll = scope.new_collection()
    outs = {
        "sum": coll.sum(),
        "count": coll.count(),
        "distinct": coll.distinct(),
        "threshold": coll.threshold(_at_least_two),
    }
    probe = outs["sum"].concat(outs["count"]).probe()
    return session, probe, {name: out.capture() for name, out in outs.items()}, scope.subgraph


def _build(rounds: List[Round], mode: str) -> Any:
    def build(worker: Any) -> Dict[str, Any]:
        # Set in the worker: a process backend's workers fork from a server started earlier.
        os.environ[COLUMNS_VARIABLE] = mode
        session, probe, caps, graph = worker.dataflow(_program)
        t = 0
        for i, updates in enumerate(rounds):
            for j, (record, ahead, diff) in enumerate(updates):
                if (i + j) % worker.peers == worker.index:
                    session.update_at(record, t + ahead, diff)
            t += 1
            session.advance_to(t)
            session.flush()
            worker.step_until(probe, t)
        session.close()
        while worker.step():
            pass
        reducers = [op for op in graph.children if isinstance(op, ReduceOperator)]
        out: Dict[str, Any] = {name: cap.consolidated() for name, cap in caps.items()}
        out["column_batches"] = sum(op.column_batches for op in reducers)
        out["object_batches"] = sum(op.object_batches for op in reducers)
        totals = [op for op in graph.children if isinstance(op, (CountTotal, ThresholdTotal))]
        out["total_column_batches"] = sum(op.column_batches for op in totals)
        out["total_object_batches"] = sum(op.object_batches for op in totals)
        return out

    return build


def _run(
    monkeypatch: pytest.MonkeyPatch,
    rounds: List[Round],
    mode: str,
    workers: int = 1,
    backend: str = "inline",
) -> Dict[str, Any]:
    monkeypatch.setenv(COLUMNS_VARIABLE, mode)
    results = tp.execute(_build(rounds, mode), workers=workers, backend=backend)
    merged: Dict[str, Any] = {name: [] for name in OPS}
    for counter in COUNTERS:
        merged[counter] = 0
    for part in results:
        for name in OPS:
            merged[name] += part[name]
        for counter in COUNTERS:
            merged[counter] += part[counter]
    for name in OPS:
        merged[name] = _consolidate(merged[name])
    return merged


def _consolidate(updates: List[Any]) -> List[Any]:
    sums: Dict[Any, int] = {}
    for d, t, r in updates:
        sums[(d, t)] = sums.get((d, t), 0) + r
    return sorted((d, t, r) for (d, t), r in sums.items() if r)


def _same_answers(
    monkeypatch: pytest.MonkeyPatch, rounds: List[Round], workers: int = 1, backend: str = "inline"
) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    columns = _run(monkeypatch, rounds, "auto", workers, backend)
    objects = _run(monkeypatch, rounds, "off", workers, backend)
    for name in OPS:
        assert columns[name] == objects[name], name
    assert objects["column_batches"] == 0 and objects["total_column_batches"] == 0
    return columns, objects


def _small_batches(monkeypatch: pytest.MonkeyPatch, least: int) -> None:
    """Batches of ``least`` updates or more on the column path (sealed as columns by the
    arrangement, read as columns by the reduce), so small examples exercise it."""
    monkeypatch.setattr(ReduceOperator, "column_min", least)
    monkeypatch.setattr(arrange_columns, "COLUMNS_MIN_UPDATES", least, raising=False)
    monkeypatch.setattr(column_count, "COLUMNS_MIN_UPDATES", least)
    monkeypatch.setattr(column_count, "COLUMNS_PER_TIME", 1)


updates = st.tuples(
    st.tuples(st.integers(0, 6), st.integers(-4, 4)),
    st.integers(0, 2),
    st.sampled_from([-2, -1, 1, 1, 2]),
)
rounds_strategy = st.lists(st.lists(updates, max_size=30), min_size=1, max_size=6)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=rounds_strategy, workers=st.sampled_from([1, 2]))
def test_random_streams_give_the_same_answers_on_both_paths(
    monkeypatch: pytest.MonkeyPatch, rounds: List[Round], workers: int
) -> None:
    _small_batches(monkeypatch, 2)
    columns, _ = _same_answers(monkeypatch, rounds, workers)
    if workers == 1 and any(len(r) >= 2 for r in rounds):  # (2 workers: split by the exchange)
        assert columns["total_column_batches"] > 0


def _load_then_changes(keys: int, load: int, changes: int) -> List[Round]:
    rng = np.random.default_rng(7)
    first: Round = [
        ((int(k), int(v)), 0, 1)
        for k, v in zip(rng.integers(0, keys, load), rng.integers(-50, 50, load))
    ]
    later: List[Round] = []
    for i in range(changes):
        k = int(rng.integers(0, keys))
        later.append([((k, int(rng.integers(-50, 50))), int(i % 2), int(rng.choice([-1, 1])))])
    return [first] + later


def test_a_load_takes_the_column_path_and_small_changes_the_object_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    columns, objects = _same_answers(monkeypatch, _load_then_changes(300, 10000, 20))
    assert columns["column_batches"] == 1  # the load
    assert columns["object_batches"] > 0  # each change is below column_min
    assert columns["total_column_batches"] >= 3  # the load (its messages), into each of three
    assert objects["object_batches"] > 0


def test_bursts_after_a_load_keep_both_paths_on_one_state(monkeypatch: pytest.MonkeyPatch) -> None:
    # Column batches and object batches alternate on the same keys.
    _small_batches(monkeypatch, 30)
    rng = np.random.default_rng(11)
    rounds: List[Round] = []
    for i in range(8):
        size = 400 if i % 2 == 0 else 10
        rounds.append(
            [
                (
                    (int(rng.integers(0, 60)), int(rng.integers(-3, 3))),
                    int(rng.integers(0, 2)) if size < 100 else 0,
                    int(rng.choice([-1, 1, 2])),
                )
                for _ in range(size)
            ]
        )
    columns, _ = _same_answers(monkeypatch, rounds, workers=2)
    assert columns["column_batches"] >= 4 and columns["object_batches"] >= 4


def test_totals_past_int64_stay_exact_on_the_object_path(monkeypatch: pytest.MonkeyPatch) -> None:
    _small_batches(monkeypatch, 2)
    big = 1 << 40
    rounds: List[Round] = [
        [((1, big), 0, 1 << 30), ((1, big + 1), 0, 1 << 30), ((2, 3), 0, 1)],
        [((2, 4), 0, 1), ((3, 1), 0, 1)],
        [((1, 5), 0, 1), ((3, 2), 0, 1)],  # key 1's total is past int64: the object path
    ]
    columns, _ = _same_answers(monkeypatch, rounds)
    assert columns["column_batches"] == 1  # the second round; the others would overflow int64
    assert columns["sum"][0] == ((1, (2 * big + 1) << 30), 0, 1)


@pytest.mark.timeout(300)
def test_two_processes_give_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # The workers import timelypy afresh: the load is above the default column_min.
    columns, _ = _same_answers(monkeypatch, _load_then_changes(300, 16000, 6), 2, "processes")
    assert columns["column_batches"] >= 1


def _batch(updates: List[Tuple[Tuple[int, int], int, int]]) -> ColumnBatch:
    return ColumnBatch.from_updates(updates, [0], [10])


def test_a_prior_state_of_other_values_leaves_the_batch_to_the_object_path() -> None:
    batch = _batch([((1, 2), 3, 1), ((1, 4), 3, 1)])
    assert sum_columns_fit(batch, 1)
    in_hist: Dict[Any, Any] = {1: [(2.5, 0, 1)]}
    out_hist: Dict[Any, Any] = {1: [(2.5, 0, 1)]}
    assert sum_column_batch(batch, in_hist, out_hist, {}, {}) is None
    assert in_hist == {1: [(2.5, 0, 1)]} and out_hist == {1: [(2.5, 0, 1)]}


def test_a_column_batch_continues_a_key_s_state() -> None:
    # Key 1 held {2: 1, 9: 1} (total 11); the batch removes 2 and adds 4 at time 3, then
    # removes 9 and 4 at time 5: the output goes 11 -> 13 -> nothing.
    batch = _batch([((1, 2), 3, -1), ((1, 4), 3, 1), ((1, 4), 5, -1), ((1, 9), 5, -1)])
    in_hist: Dict[Any, Any] = {1: [(2, 0, 1), (9, 1, 1)]}
    out_hist: Dict[Any, Any] = {1: [(11, 1, 1)]}
    out = sum_column_batch(batch, in_hist, out_hist, {}, {})
    assert out is not None
    assert sorted(out, key=repr) == sorted(
        [((1, 11), 3, -1), ((1, 13), 3, 1), ((1, 13), 5, -1)], key=repr
    )
    assert 1 not in in_hist and 1 not in out_hist


def test_only_int_values_fit() -> None:
    floats = ColumnBatch.from_updates([((1, 2.5), 0, 1)], [0], [1])
    assert not sum_columns_fit(floats, 1)
    assert not sum_columns_fit(_batch([((1, 1 << 33), 0, 1)]), 1)
    assert not sum_columns_fit(_batch([((1, 2), 0, 1)]), 2)  # below min_count
    assert Layout.of(1) == floats.key_layout


def test_a_snapshot_takes_the_waiting_column_batches_into_the_histories() -> None:
    worker = Worker()
    graphs: List[Any] = []

    def program(scope: Any) -> Any:
        session, coll = scope.new_collection()
        graphs.append(scope.subgraph)
        return session, coll.sum().probe()

    worker.dataflow(program)
    (op,) = [c for c in graphs[0].children if isinstance(c, ReduceOperator)]
    batch = _batch([((k % 7, k), 0, 1) for k in range(50)])
    op._deferred.append((0, batch))
    op.snapshot_state()
    assert not op._deferred and op.object_batches == 1
    assert sorted(op.in_hist) == list(range(7)) and set(op.pending_times) == {0}
