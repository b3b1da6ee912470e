"""Strings end to end: declared in a schema, given as columns, routed and pickled as codes.

Every string form ``update_columns`` takes (numpy ``U``/``S`` and object arrays, Arrow plain,
large, binary and dictionary columns, chunked) must give exactly the answers of the same
records inserted as tuples, at every time, on one and two workers inline and on two processes;
a column message of strings routes each update to the worker record by record routing gives,
and crosses processes as codes and the strings it uses.
"""

from __future__ import annotations

import pickle
import re
from typing import Any, Callable, Dict, List, Tuple

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
from timelypy.differential.input_columns import column_updates
from timelypy.differential.trace.layout import Layout
from timelypy.errors import SchemaError
from timelypy.hashing import stable_hash

Round = Tuple[List[str], List[int], List[int]]  # keys, values, diffs of one time

WORDS = ["", "a", "b", "é", "zz", "a\x00b", "Z"]


class Sub(str):
    """A subclass of ``str``: never a column value."""


def _as_str(keys: List[str]) -> Any:
    return np.array(keys, dtype=object)


FORMS: Dict[str, Callable[[List[str]], Any]] = {
    "object": _as_str,
    "numpy_U": lambda keys: np.array(keys, dtype=str),
    "arrow": lambda keys: pa.array(keys, pa.string()),
    "arrow_large": lambda keys: pa.array(keys, pa.large_string()),
    "arrow_dictionary": lambda keys: pa.array(keys, pa.string()).dictionary_encode(),
    "arrow_chunked_dictionary": lambda keys: pa.chunked_array(
        [
            pa.array(keys[: len(keys) // 2], pa.string()).dictionary_encode(),
            pa.array(keys[len(keys) // 2 :], pa.string()).dictionary_encode(),
        ],
        pa.dictionary(pa.int32(), pa.string()),
    ),
    "arrow_chunked": lambda keys: pa.chunked_array(
        [pa.array(keys[:1], pa.string()), pa.array(keys[1:], pa.string())]
    ),
}
"""Each form of a ``str`` key column (numpy ``U`` drops trailing NULs: its words have none)."""


def _build(worker: Any, rounds: List[Round], form: str) -> Dict[str, Any]:
    """Feed ``rounds`` into ``(word, value)`` pairs: their join with themselves (arranged),
    their count (reads tuples), the count of the words, and the pairs."""

    def flow(scope: Any) -> Any:
        pairs_in, pairs = scope.new_collection("pairs")
        joined = pairs.join(pairs.map(lambda kv: (kv[0], kv[1] * 2)))
        outs = {
            "joined": joined,
            "counts": pairs.count(),
            "words": pairs.map(lambda kv: kv[0]).distinct(),
            "pairs": pairs,
        }
        return pairs_in, {k: v.capture() for k, v in outs.items()}, pairs.probe()

    pairs_in, caps, probe = worker.dataflow(flow)
    for t, (keys, vals, diffs) in enumerate(rounds):
        if worker.index == 0 and keys:
            if form == "tuples":
                for k, v, d in zip(keys, vals, diffs):
                    pairs_in.update((k, v), d)
            else:
                pairs_in.update_columns(FORMS[form](keys), np.array(vals), np.array(diffs))
        pairs_in.advance_to(t + 1)
        pairs_in.flush()
        worker.step_while(lambda t=t: probe.less_than(t + 1), timeout=60)
    pairs_in.close()
    worker.step_until_done(timeout=60)
    return {name: cap.consolidated() for name, cap in caps.items()}


def _run(rounds: List[Round], form: str, backend: str, workers: int) -> Dict[str, Any]:
    results = tp.execute(lambda w: _build(w, rounds, form), workers=workers, backend=backend)
    out: Dict[str, Any] = {}
    for name in results[0]:
        summed: Dict[Any, int] = {}
        for r in results:
            for d, t, diff in r[name]:
                summed[(d, t)] = summed.get((d, t), 0) + diff
        out[name] = sorted((d, t, r) for (d, t), r in summed.items() if r)
    return out


def _rounds(seed: int, n: int = 400) -> List[Round]:
    rng = np.random.default_rng(seed)
    return [
        (
            [WORDS[i] for i in rng.integers(0, len(WORDS), n)],
            rng.integers(0, 4, n).tolist(),
            rng.choice([-1, 1, 2], n).tolist(),
        )
        for _ in range(3)
    ]


_ROUND = st.integers(1, 80).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from(WORDS), min_size=n, max_size=n),
        st.lists(st.integers(0, 3), min_size=n, max_size=n),
        st.lists(st.sampled_from([-1, 1, 2]), min_size=n, max_size=n),
    )
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rounds=st.lists(_ROUND, min_size=1, max_size=3), workers=st.sampled_from([1, 2]))
def test_string_columns_and_tuples_agree_inline(rounds: List[Round], workers: int) -> None:
    rounds = [(keys, vals, diffs) for keys, vals, diffs in rounds if "a\x00b" not in keys]
    expected = _run(rounds, "tuples", "inline", workers)
    assert _run(rounds, "object", "inline", workers) == expected


@pytest.mark.parametrize("form", sorted(FORMS))
def test_every_string_form_agrees_with_tuples(form: str) -> None:
    words = [w for w in WORDS if "\x00" not in w] if form == "numpy_U" else WORDS
    rng = np.random.default_rng(7)
    rounds = [
        (
            [words[i] for i in rng.integers(0, len(words), 600)],
            rng.integers(0, 4, 600).tolist(),
            rng.choice([-1, 1, 2], 600).tolist(),
        )
        for _ in range(2)
    ]
    expected = _run(rounds, "tuples", "inline", 1)
    assert _run(rounds, form, "inline", 1) == expected
    assert _run(rounds, form, "inline", 2) == expected


def test_string_columns_agree_in_processes() -> None:
    """Two processes: the string messages cross as codes and their dictionaries (and the
    tuples of an exchange into an arrangement as coded messages too)."""
    rounds = _rounds(11)
    expected = _run(rounds, "tuples", "inline", 1)
    for form in ("arrow_dictionary", "object", "arrow_chunked"):
        assert _run(rounds, form, "processes", 2) == expected, form
    assert _run(rounds, "tuples", "processes", 2) == expected


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.text(max_size=4), st.binary(max_size=3), st.integers(-(2**63), 2**63 - 1)),
        min_size=1,
        max_size=30,
    )
)
def test_string_columns_hash_as_the_records_do(rows: List[Tuple[str, bytes, int]]) -> None:
    """Codes into a dictionary, or the strings themselves: each record's ``stable_hash``."""
    from timelypy.differential.kernel.columns import dictionary_encode
    from timelypy.hashing import shape_hashes

    words = np.array([r[0] for r in rows], dtype=object)
    blobs = np.array([r[1] for r in rows], dtype=object)
    ints = np.array([r[2] for r in rows], dtype=np.int64)
    codes, dictionary = dictionary_encode(words)
    shape = ("s", ("y", "i"))
    coded = shape_hashes(shape, [codes, blobs, ints], len(rows), [dictionary, None, None])
    plain = shape_hashes(shape, [words, blobs, ints], len(rows))
    expected = [stable_hash((w, (b, i))) for w, b, i in rows]
    assert coded.tolist() == plain.tolist() == expected


def test_bytes_columns_agree_with_tuples() -> None:
    rng = np.random.default_rng(3)
    blobs = [b"", b"a", b"\xff\x00", b"zz"]
    keys = [blobs[i] for i in rng.integers(0, 4, 500)]
    rounds = [(keys, rng.integers(0, 3, 500).tolist(), [1] * 500)]

    def each(form: Callable[[List[bytes]], Any]) -> Dict[str, Any]:
        FORMS["bytes"] = form
        try:
            return _run(rounds, "bytes", "inline", 2)
        finally:
            del FORMS["bytes"]

    expected = _run(rounds, "tuples", "inline", 1)
    assert each(lambda k: np.array(k, dtype=object)) == expected
    assert each(lambda k: pa.array(k, pa.binary())) == expected
    assert each(lambda k: pa.array(k, pa.large_binary()).dictionary_encode()) == expected
    trimmed = [(k.rstrip(b"\x00"), v, d) for k, v, d in zip(*rounds[0])]
    assert each(lambda k: np.array([b.rstrip(b"\x00") for b in k], dtype="S")) == _run(
        [tuple(map(list, zip(*trimmed)))],
        "tuples",
        "inline",
        1,  # type: ignore[list-item]
    )


def test_a_string_message_routes_as_records_do_and_pickles_as_codes() -> None:
    words = [f"word{i % 97}" for i in range(2000)]
    message = column_updates(
        "pairs", pa.array(words), [np.arange(2000) % 5, pa.array(words[::-1])], None, 0, None
    )
    assert message.key_cols[0].dtype == np.int32
    parts = message.route(key_of_update, 3)
    assert parts is not None
    for worker, part in enumerate(parts):
        assert all(stable_hash(key_of_update(u)) % 3 == worker for u in part.records())
    assert sorted(u for p in parts for u in p.records()) == sorted(message.records())
    sent = unpickle_records(pickle_records(("d", 1, 0, parts[1])))
    assert type(sent[3]) is ColumnMessage and sent[3]._records is None
    assert sent[3].records() == parts[1].records()
    used = {u[0][0] for u in parts[1].records()}
    assert set(sent[3].key_layout.dicts[0].tolist()) == used  # only the strings it uses
    assert len(pickle.dumps(message)) < 2000 * 2 * 3 + 97 * 2 * 20 + 2000  # no str per update


@pytest.mark.parametrize(
    "updates",
    [
        [((WORDS[k % 7], k), 3, 1) for k in range(300)],
        [(((b"x", "y"), ("z", 1.5)), 0, -2)] * 3,
        [(("", ()), 2**40, 1)],
    ],
)
def test_encoded_string_updates_cross_and_come_back_equal(updates: List[Any]) -> None:
    message = MessageEncoder()(updates)
    assert message is not None
    assert all(message.key_cols[i].dtype == np.int32 for i in message.key_layout.strings)
    back = pickle.loads(pickle.dumps(message, protocol=5))
    assert back.records() == updates
    assert [type(x) for u in back.records() for x in u[0]] == [
        type(x) for u in updates for x in u[0]
    ]
    encoder = MessageEncoder()
    assert encoder([(("a", 1), 0, 1)]) is not None
    assert encoder([((Sub("a"), 1), 0, 1)]) is None  # a subclass of str: stays a list


def test_the_arrangement_keeps_string_messages_as_columns() -> None:
    def build(worker: Any) -> Any:
        def flow(scope: Any) -> Any:
            pairs_in, pairs = scope.new_collection("pairs", schema=(str, int))
            return pairs_in, pairs.arrange_by_key(), pairs.probe()

        pairs_in, arranged, probe = worker.dataflow(flow)
        words = np.array([f"w{i % 10}" for i in range(1000)])
        pairs_in.update_columns(words, np.arange(1000))
        arrange = next(op for op in worker.dataflows()[0].children if isinstance(op, _TotalArrange))
        pairs_in.advance_to(1)
        pairs_in.flush()
        worker.step_while(lambda: probe.less_than(1), timeout=60)
        got = sum(len(arranged.trace.get(f"w{k}")) for k in range(10))
        return arrange.columns.sealed_columns, got

    (result,) = tp.execute(build, workers=1, backend="inline")
    assert result == (1, 1000)


def test_schemas_with_strings_are_taken_and_checked() -> None:
    assert Layout.from_types((str, (bytes, int))).shape == ("s", ("y", "i"))
    with pytest.raises(ValueError, match="str, bytes or a tuple"):
        Layout.from_types((str, list))
    worker, pairs_in, captured, probe = pairs_session(schema=(str, int))
    pairs_in.insert(("a", 1))
    pairs_in.update_columns(np.array(["b"]), np.array([2]))
    pairs_in.advance_to(1)
    pairs_in.flush()
    worker.step_while(lambda: probe.less_than(1), timeout=10)
    assert sorted(captured.consolidated()) == [(("a", 1), 0, 1), (("b", 2), 0, 1)]
    for bad in [(Sub("a"), 1), (1, 1), (b"a", 1), (None, 1)]:
        _, pairs_in, _, _ = pairs_session(schema=(str, int))
        pairs_in.insert(bad)
        with pytest.raises(SchemaError, match=re.escape(f"'pairs': record {bad!r}")) as caught:
            pairs_in.flush()
        assert "schema (str, int)" in str(caught.value)


def test_bad_string_columns_name_the_input_the_column_and_the_value() -> None:
    _, pairs_in, _, _ = pairs_session()
    with pytest.raises(SchemaError, match="'pairs'.*key column.*Sub|'pairs'.*key column.*'b'"):
        pairs_in.update_columns(np.array(["a", Sub("b")], dtype=object), np.arange(2))
    with pytest.raises(SchemaError, match="'pairs'.*value\\[1\\] column.*None.*row 1"):
        pairs_in.update_columns(np.arange(2), [np.arange(2), np.array(["a", None], dtype=object)])
    with pytest.raises(SchemaError, match="'pairs'.*key column.*b'x'.*row 1"):
        pairs_in.update_columns(np.array(["a", b"x"], dtype=object), np.arange(2))
    with pytest.raises(SchemaError, match="'pairs'.*key column holds a null \\(row 2\\)"):
        pairs_in.update_columns(pa.array(["a", "b", None]).dictionary_encode(), np.arange(3))
    _, pairs_in, _, _ = pairs_session(schema=(str, int))
    with pytest.raises(SchemaError, match="'pairs'.*\\(bytes, int\\).*\\(str, int\\)"):
        pairs_in.update_columns(pa.array([b"a"]), np.arange(1))


@pytest.mark.parametrize("workers", [1, 2])
def test_count_reads_a_string_message_as_columns(workers: int) -> None:
    """count, distinct and threshold of the pairs take each message's columns and codes (the
    exchange routes it by record, column-wise); the counts are those of the tuples."""
    from timelypy.differential.reduce import CountTotal, ThresholdTotal

    def build(worker: Any) -> Any:
        def flow(scope: Any) -> Any:
            pairs_in, pairs = scope.new_collection("pairs")
            outs = [pairs.count(), pairs.distinct(), pairs.threshold(lambda r, c: c % 2)]
            return pairs_in, [o.capture() for o in outs], outs[0].probe()

        pairs_in, caps, probe = worker.dataflow(flow)
        words = pa.array([WORDS[i % 7] for i in range(3000)]).dictionary_encode()
        for t in range(2):
            if worker.index == 0:
                pairs_in.update_columns(words, np.arange(3000) % (3 + t), diffs=1 - 2 * (t % 2))
            pairs_in.advance_to(t + 1)
            pairs_in.flush()
            worker.step_while(lambda t=t: probe.less_than(t + 1), timeout=60)
        ops = [
            op
            for op in worker.dataflows()[0].children
            if isinstance(op, (CountTotal, ThresholdTotal))
        ]
        return sum(op.column_batches for op in ops), [c.consolidated() for c in caps]

    results = tp.execute(build, workers=workers, backend="inline")
    assert sum(r[0] for r in results) >= 3 * 2
    got = [sorted(u for r in results for u in r[1][i]) for i in range(3)]
    counts: Dict[Any, Dict[int, int]] = {}
    for t in range(2):
        for i in range(3000):
            record = (WORDS[i % 7], i % (3 + t))
            counts.setdefault(record, {})
            counts[record][t] = counts[record].get(t, 0) + 1 - 2 * (t % 2)
    final0 = {r: c.get(0, 0) for r, c in counts.items() if c.get(0, 0)}
    final1 = {r: c.get(0, 0) + c.get(1, 0) for r, c in counts.items() if c.get(0, 0) + c.get(1, 0)}
    expected: List[Any] = [((r, c), 0, 1) for r, c in final0.items()]
    for r in set(final0) | set(final1):
        if final0.get(r) != final1.get(r):
            if r in final0:
                expected.append(((r, final0[r]), 1, -1))
            if r in final1:
                expected.append(((r, final1[r]), 1, 1))
    assert got[0] == sorted(expected)
    assert sorted(r for r, t, d in got[1] if t == 0) == sorted(final0)


def test_messages_of_several_dictionaries_and_tuples_seal_into_one_batch() -> None:
    """Messages of different dictionaries, tuples and a later time, held by the arrangement
    until the frontier passes: sealed from their codes (mapped into the union of the
    dictionaries), the later time kept for the next batch; the answers of the tuples."""

    def build(worker: Any, form: str) -> Any:
        def flow(scope: Any) -> Any:
            pairs_in, pairs = scope.new_collection("pairs")
            joined = pairs.join(pairs.map(lambda kv: (kv[0], -kv[1])))
            return pairs_in, joined.capture(), joined.probe()

        pairs_in, joined, probe = worker.dataflow(flow)
        rounds = [
            (0, [WORDS[i % 3] for i in range(300)]),
            (0, [WORDS[3 + i % 4] for i in range(300)]),
            (1, [WORDS[i % 7] for i in range(300)]),
        ]
        for t, keys in rounds:
            if pairs_in.time < t:
                pairs_in.advance_to(t)
                pairs_in.insert(("extra", t))
            if form == "tuples":
                for i, k in enumerate(keys):
                    pairs_in.insert((k, i % 5))
            else:
                pairs_in.update_columns(pa.array(keys), np.arange(300) % 5)
        pairs_in.flush()
        worker.step_while(lambda: probe.less_than(1), timeout=60)  # time 1 held on
        pairs_in.advance_to(2)
        pairs_in.flush()
        worker.step_while(lambda: probe.less_than(2), timeout=60)
        ops = worker.dataflows()[0].children
        sealed = [op.columns.sealed_columns for op in ops if isinstance(op, _TotalArrange)]
        return min(sealed), joined.consolidated()

    def run(form: str) -> Any:
        (result,) = tp.execute(lambda w: build(w, form), workers=1, backend="inline")
        return result

    sealed, columns = run("columns")
    assert sealed >= 2
    assert sorted(columns) == sorted(run("tuples")[1])


def test_a_checkpoint_takes_held_string_messages_back_as_sums() -> None:
    """count holding two string messages (two dictionaries) at an open time: the snapshot's
    pending sums are the records' own, strings decoded through each message's dictionary."""
    from timelypy.differential.reduce import CountTotal

    worker = tp.Worker()
    graphs: List[Any] = []

    def program(scope: Any) -> Any:
        session, coll = scope.new_collection("pairs")
        graphs.append(scope.subgraph)
        return session, coll.count().probe()

    session, probe = worker.dataflow(program)
    first = np.array(["b", "a"] * 600, dtype=object)
    session.update_columns(first, np.zeros(1200, np.int64))
    session.update_columns(pa.array(["c", "b"] * 600).dictionary_encode(), np.zeros(1200, np.int64))
    session.flush()
    for _ in range(3):
        worker.step()
    (op,) = [c for c in graphs[0].children if isinstance(c, CountTotal)]
    assert op.column_batches == 2 and len(op._columns.chunks[0]) == 2
    pieces = sorted(op.future_state(), key=repr)
    assert pieces == [
        (("a", 0), "pending", [(0, 600)]),
        (("b", 0), "pending", [(0, 1200)]),
        (("c", 0), "pending", [(0, 600)]),
    ]
    session.advance_to(1)
    session.close()
    worker.step_until_done(timeout=60)


def test_a_checkpoint_takes_held_string_messages_of_an_arrangement_as_tuples() -> None:
    def build(worker: Any) -> Any:
        def flow(scope: Any) -> Any:
            pairs_in, pairs = scope.new_collection("pairs")
            return pairs_in, pairs.arrange_by_key(), pairs.join(pairs).capture(), pairs.probe()

        pairs_in, _, joined, probe = worker.dataflow(flow)
        pairs_in.update_columns(pa.array(["x", "y", "z"] * 100), np.arange(300) % 2)
        pairs_in.update_columns(np.array(["z", "w"] * 150, dtype=object), np.arange(300) % 2)
        pairs_in.flush()
        for _ in range(3):
            worker.step()
        arrange = next(op for op in worker.dataflows()[0].children if isinstance(op, _TotalArrange))
        held = arrange.columns.held
        state = arrange.snapshot_state()
        pending = sorted(
            (key, entry)
            for key, piece in state.keyed
            if piece[0] == "pending"
            for entry in piece[2]
        )
        pairs_in.advance_to(1)
        pairs_in.close()
        worker.step_until_done(timeout=60)
        return held, pending, sorted(joined.consolidated())

    (result,) = tp.execute(build, workers=1, backend="inline")
    held, pending, joined = result
    assert held == len(pending) == 600  # every update as a tuple piece
    counts: Dict[Tuple[str, int], int] = {}
    for i in range(300):
        for word in (["x", "y", "z"][i % 3], ["z", "w"][i % 2]):
            counts[(word, i % 2)] = counts.get((word, i % 2), 0) + 1
    expected = sorted(
        ((k, (v, w)), 0, c * d)
        for (k, v), c in counts.items()
        for (k2, w), d in counts.items()
        if k == k2
    )
    assert joined == expected
