"""Updates given as columns (``update_columns``) against the same updates given as tuples.

The column road (one :class:`ColumnMessage` from the input session, routed on its key
columns, pickled as numpy buffers between processes, kept as columns by the arrangement) must
give exactly the answers of the tuple road, on one and two workers, inline and in processes;
operators that read lists get the tuples; bad columns raise errors naming the input and the
value; a checkpoint of an arrangement holding column messages takes them as tuples.
"""

from __future__ import annotations

import pickle
from typing import Any, Dict, List, Tuple

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.columns import pairs_session

import timelypy as tp
from timelypy.communication.wire import pickle_records, unpickle_records
from timelypy.differential.arrange import _TotalArrange
from timelypy.differential.column_message import ColumnMessage, MessageEncoder, key_of_update
from timelypy.errors import DiffTypeError, InputClosedError, SchemaError, SessionInputError
from timelypy.hashing import stable_hash

Round = Tuple[List[int], List[float], List[int]]  # keys, values, diffs of one time


def _build(worker: Any, rounds: List[Round], mode: str) -> Dict[str, Any]:
    """Feed ``rounds`` (one time each) into ``(key, value)`` pairs; the join of the pairs
    with themselves (arranged), their count per key (reads tuples) and the pairs."""

    def flow(scope: Any) -> Any:
        pairs_in, pairs = scope.new_collection("pairs")
        joined = pairs.join(pairs.map(lambda kv: (kv[0], kv[1] * 2)))
        counts = pairs.map(lambda kv: kv[0]).count()
        return pairs_in, joined.capture(), counts.capture(), pairs.capture(), pairs.probe()

    pairs_in, joined, counts, pairs, probe = worker.dataflow(flow)
    for t, (keys, vals, diffs) in enumerate(rounds):
        if worker.index == 0 and keys:
            if mode == "columns":
                pairs_in.update_columns(np.array(keys), np.array(vals), np.array(diffs))
            else:
                for k, v, d in zip(keys, vals, diffs):
                    pairs_in.update((k, v), d)
        pairs_in.advance_to(t + 1)
        pairs_in.flush()
        worker.step_while(lambda t=t: probe.less_than(t + 1), timeout=60)
    pairs_in.close()
    worker.step_until_done(timeout=60)
    return {
        "joined": sorted(joined.consolidated()),
        "counts": sorted(counts.consolidated()),
        "pairs": sorted(pairs.consolidated()),
    }


def _run(rounds: List[Round], mode: str, backend: str, workers: int) -> Dict[str, Any]:
    results = tp.execute(lambda w: _build(w, rounds, mode), workers=workers, backend=backend)
    return {name: sorted(x for r in results for x in r[name]) for name in results[0]}


def _rounds(seed: int, n: int = 600) -> List[Round]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(3):
        keys = rng.integers(-20, 20, n).tolist()
        vals = rng.choice([-1.5, 0.0, 0.25, 2.5], n).tolist()
        diffs = rng.choice([-1, 1, 2], n).tolist()
        out.append((keys, vals, diffs))
    return out


_ROUND = st.integers(0, 300).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-5, 5), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.5, 1.0, 3.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([-1, 1, 3]), min_size=n, max_size=n),
    )
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ROUND, min_size=1, max_size=3), st.sampled_from([1, 2]))
def test_columns_and_tuples_agree_inline(rounds: List[Round], workers: int) -> None:
    """Random updates as columns and as tuples: the same join, counts and collection."""
    assert _run(rounds, "columns", "inline", workers) == _run(rounds, "tuples", "inline", workers)


@pytest.mark.processes
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**16))
def test_columns_and_tuples_agree_in_processes(seed: int) -> None:
    """Two worker processes: the column messages cross as numpy buffers (and the tuples of
    600 per message as column messages too)."""
    rounds = _rounds(seed)
    columns = _run(rounds, "columns", "processes", 2)
    assert columns == _run(rounds, "tuples", "processes", 2)
    assert columns == _run(rounds, "tuples", "inline", 1)


def test_message_routes_as_records_do_and_pickles_as_columns() -> None:
    keys = [np.arange(-300, 300), np.arange(600) % 7]
    message = ColumnMessage(
        *_layouts(),
        keys,
        [np.linspace(-3.0, 3.0, 600)],
        np.zeros(600, np.int64),
        np.ones(600, np.int64),
    )
    parts = message.route(key_of_update, 3)
    assert parts is not None
    for worker, part in enumerate(parts):
        assert all(stable_hash(key_of_update(u)) % 3 == worker for u in part.records())
    assert sorted(u for p in parts for u in p.records()) == sorted(message.records())
    assert message.route(lambda u: u[0], 3) is None  # any other key function: record by record
    sent = unpickle_records(pickle_records(("d", 1, 0, message)))
    assert type(sent[3]) is ColumnMessage and sent[3]._records is None
    assert sent[3].records() == message.records()
    assert len(pickle.dumps(message)) < 600 * 8 * 5 + 1000  # buffers, not a tuple per update


@pytest.mark.parametrize(
    "updates",
    [
        [((k % 7 - 3, k * 70_000), 5, 1) for k in range(300)],  # int8 keys, int32 values
        [((True, -1.5), 2**40, -1), ((False, 2.5), 2**40, 3)],  # bools, floats, wide time
        [(((1, (2, 3)), ()), 0, 2**30)] * 3,  # nested keys, the empty value
    ],
)
def test_encoded_updates_cross_narrowed_and_come_back_equal(updates: List[Any]) -> None:
    """What an exchange sends for another process's arrangement: equal updates of the same
    types after the trip, in fewer bytes than int64 columns where ints are small."""
    message = MessageEncoder()(updates)
    assert message is not None
    back = pickle.loads(pickle.dumps(message, protocol=5))
    assert back.records() == updates
    assert [type(x) for u in back.records() for x in (u[0][0], u[0][1], u[1], u[2])] == [
        type(x) for u in updates for x in (u[0][0], u[0][1], u[1], u[2])
    ]
    assert [c.dtype for c in back.key_cols + back.val_cols] == [
        c.dtype for c in message.key_cols + message.val_cols
    ]
    assert MessageEncoder()([((None, 1), 0, 1)]) is None  # not fixed-width: stays a list


def _layouts() -> Any:
    from timelypy.differential.trace.layout import Layout

    return Layout(("i", "i")), Layout("f")


def test_arrangement_keeps_a_column_message_as_columns() -> None:
    """The arrangement's batch is sealed from the message's columns: no tuple is decoded."""
    sent: List[ColumnMessage] = []

    def build(worker: Any) -> Any:
        def flow(scope: Any) -> Any:
            pairs_in, pairs = scope.new_collection("pairs")
            arranged = pairs.arrange_by_key()
            return pairs_in, arranged, pairs.probe()

        pairs_in, arranged, probe = worker.dataflow(flow)
        pairs_in.update_columns(np.arange(1000) % 10, np.arange(1000))
        arrange = next(op for op in worker.dataflows()[0].children if isinstance(op, _TotalArrange))
        sent.extend(m for _, m in arrange.input_ports[0].queue if type(m) is ColumnMessage)
        pairs_in.advance_to(1)
        pairs_in.flush()
        worker.step_while(lambda: probe.less_than(1), timeout=60)
        return arrange.columns.sealed_columns, sum(len(arranged.trace.get(k)) for k in range(10))

    (result,) = tp.execute(build, workers=1, backend="inline")
    assert result == (1, 1000)
    assert sent and all(m._records is None for m in sent)


def test_checkpoint_with_column_messages_waiting() -> None:
    """A snapshot of an arrangement holding column messages at an open time takes them as
    tuples (pending pieces); the dataflow then goes on to the same answer."""

    def build(worker: Any) -> Any:
        def flow(scope: Any) -> Any:
            pairs_in, pairs = scope.new_collection("pairs")
            return pairs_in, pairs.arrange_by_key(), pairs.join(pairs).capture(), pairs.probe()

        pairs_in, _, joined, probe = worker.dataflow(flow)
        pairs_in.update_columns(np.arange(300) % 5, np.arange(300))
        pairs_in.update_columns(np.arange(300) % 5, np.arange(300), diffs=2)
        pairs_in.flush()
        for _ in range(3):
            worker.step()
        arrange = next(op for op in worker.dataflows()[0].children if isinstance(op, _TotalArrange))
        held = arrange.columns.held
        state = arrange.snapshot_state()
        waiting = sum(len(piece[2]) for _, piece in state.keyed if piece[0] == "pending")
        pairs_in.advance_to(1)
        pairs_in.close()
        worker.step_until_done(timeout=60)
        return held, waiting, arrange.columns.held, sorted(joined.consolidated())

    (result,) = tp.execute(build, workers=1, backend="inline")
    held, waiting, after, joined = result
    assert held == waiting == 600 and after == 0  # every update as a tuple piece
    expected = sorted(
        ((k, (v, w)), 0, 9) for k in range(5) for v in range(k, 300, 5) for w in range(k, 300, 5)
    )
    assert joined == expected


def test_bad_columns_name_the_input_and_the_value() -> None:
    _, pairs_in, _, _ = pairs_session()
    with pytest.raises(ValueError, match="'pairs'.*3 values"):
        pairs_in.update_columns(np.arange(4), np.arange(3))
    with pytest.raises(SchemaError, match="'pairs'.*not fixed-width"):
        pairs_in.update_columns(np.array(["2026-01-01"], dtype="datetime64[D]"), np.arange(1))
    with pytest.raises(SchemaError, match="'pairs'.*null \\(row 1\\)"):
        pairs_in.update_columns(pa.array([1, None]), np.arange(2))
    with pytest.raises(SchemaError, match="beyond int64"):
        pairs_in.update_columns(np.array([2**63], dtype=np.uint64), np.arange(1))
    with pytest.raises(DiffTypeError, match="'pairs'.*float64"):
        pairs_in.update_columns(np.arange(2), np.arange(2), np.array([0.5, 1.0]))
    pairs_in.close()
    with pytest.raises(InputClosedError, match="'pairs'"):
        pairs_in.update_columns(np.arange(2), np.arange(2))


def test_schema_is_checked_and_odd_floats_take_the_object_path() -> None:
    _, pairs_in, _, _ = pairs_session(schema=(int, float))
    with pytest.raises(SchemaError, match="'pairs'.*\\(int, int\\).*\\(int, float\\)"):
        pairs_in.update_columns(np.arange(2), np.arange(2))
    with pytest.raises(SchemaError, match="record \\(1, nan\\) \\(row 1\\)"):
        pairs_in.update_columns(np.arange(2), np.array([0.5, np.nan]))
    worker, pairs_in, captured, probe = pairs_session()
    assert pairs_in.update_columns(np.arange(2), np.array([-0.0, 1.5])) == 2
    pairs_in.advance_to(1)
    pairs_in.flush()
    worker.step_while(lambda: probe.less_than(1), timeout=10)
    assert sorted(captured.consolidated()) == [((0, -0.0), 0, 1), ((1, 1.5), 0, 1)]


def test_arrow_table_and_driver_session() -> None:
    """``update_arrow`` on a worker's session, ``update_columns`` on a driver session with two
    workers (routed by key to the worker that owns it): the same collection."""
    table = pa.table({"k": [1, 2, 3], "a": [1.5, 2.5, 3.5], "b": [True, False, True]})
    worker, pairs_in, captured, probe = pairs_session()
    assert pairs_in.update_arrow(table, ["k"], ["a", "b"]) == 3
    assert pairs_in.insert_columns(np.array([4]), [np.array([4.5]), np.array([False])]) == 1
    pairs_in.advance_to(1)
    pairs_in.flush()
    worker.step_while(lambda: probe.less_than(1), timeout=10)
    expected = [((1, (1.5, True)), 0, 1), ((2, (2.5, False)), 0, 1), ((3, (3.5, True)), 0, 1)]
    assert sorted(captured.consolidated()) == expected + [((4, (4.5, False)), 0, 1)]

    def dataflow(scope: Any) -> Any:
        pairs_in, pairs = scope.new_collection("pairs")
        counts = pairs.map(lambda kv: kv[0]).count()
        return {"pairs": pairs_in, "probe": counts.probe(), "out": pairs.capture()}

    with tp.open_session(dataflow, workers=2) as session:
        session.update_columns("pairs", table["k"], [table["a"], table["b"]])
        session.advance_to(1)
        session.wait("probe")
        assert sorted(session.changes("out")) == expected
        with pytest.raises(SessionInputError, match="'pairs'.*3 values"):
            session.update_columns("pairs", np.arange(4), np.arange(3))
