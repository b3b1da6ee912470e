"""The exchange's routing: every record goes to worker ``stable_hash(key_fn(record)) % peers``.

Large messages are routed column-wise (keys hashed with numpy when they are ints or tuples of
ints, the parts split in C); these tests check that the parts are exactly those of the
per-record rule, in the order of the message, for every kind of key and number of workers,
and that a key that cannot be routed is reported with the operator, the worker and the record.
"""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from timelypy.dataflow.channels import COLUMNWISE_MIN, ExchangePusher
from timelypy.errors import OperatorError, UnhashableDataError
from timelypy.hashing import stable_hash


class _Local:
    """The local target: keeps what it is pushed."""

    def __init__(self) -> None:
        self.pushed: List[Tuple[Any, List[Any]]] = []

    def push(self, time: Any, data: List[Any]) -> None:
        self.pushed.append((time, data))


class _Fabric:
    """A fabric that keeps what is sent."""

    def __init__(self) -> None:
        self.sent: List[Tuple[int, Any]] = []

    def send(self, dest: int, message: Any) -> None:
        self.sent.append((dest, message))


def _route(records: List[Any], peers: int, key_fn: Any = None, index: int = 0) -> List[List[Any]]:
    """The parts an ExchangePusher makes of ``records``: what it pushes and sends, by worker."""
    local, fabric = _Local(), _Fabric()
    pusher = ExchangePusher(
        local, key_fn or (lambda u: u[0][0]), peers, index, fabric, 7, name="Join"
    )
    pusher.push(3, records)
    parts: List[List[Any]] = [[] for _ in range(peers)]
    for time, data in local.pushed:
        assert time == 3
        parts[index] += data
    for dest, (kind, channel, time, data) in fabric.sent:
        assert (kind, channel, time) == ("d", 7, 3) and dest != index
        parts[dest] += data
    return parts


def _expected(records: List[Any], peers: int, key_fn: Any = None) -> List[List[Any]]:
    key_fn = key_fn or (lambda u: u[0][0])
    parts: List[List[Any]] = [[] for _ in range(peers)]
    for record in records:
        parts[stable_hash(key_fn(record)) % peers].append(record)
    return parts


KEYS = {
    "ints": lambda i: (i * 7919) % 100_003 - 50_000,
    "wide ints": lambda i: (i * 0x9E3779B97F4A7C15) % (1 << 63) * (-1) ** i,
    "beyond int64": lambda i: (1 << 64) + i if i % 5 == 0 else i,
    "bools and ints": lambda i: bool(i % 2) if i % 3 == 0 else i,
    "int pairs": lambda i: (i % 13, -i),
    "nested tuples": lambda i: ((i % 5, i), i % 3),
    "strings": lambda i: f"k{i % 97}",
    "floats": lambda i: i / 4,
    "mixed": lambda i: (i, "a") if i % 2 else i,
    "ragged tuples": lambda i: (i,) * (1 + i % 3),
    "empty tuples": lambda i: (),
}


@pytest.mark.parametrize("peers", [2, 3, 5, 8])
@pytest.mark.parametrize("keys", sorted(KEYS))
@pytest.mark.parametrize("size", [COLUMNWISE_MIN - 1, COLUMNWISE_MIN, 3000])
def test_parts_are_those_of_the_per_record_hash(peers: int, keys: str, size: int) -> None:
    make = KEYS[keys]
    records = [((make(i), i), i % 4, 1 - 2 * (i % 2)) for i in range(size)]
    for index in (0, peers - 1):
        assert _route(records, peers, index=index) == _expected(records, peers)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(),
            st.tuples(st.integers(-(2**70), 2**70), st.integers()),
            st.booleans(),
            st.text(max_size=3),
        ),
        min_size=COLUMNWISE_MIN,
        max_size=COLUMNWISE_MIN * 3,
    ),
    st.integers(2, 9),
)
def test_generated_keys_route_as_the_per_record_hash(keys: List[Any], peers: int) -> None:
    records = [(k, i) for i, k in enumerate(keys)]
    key = lambda r: r[0]  # noqa: E731
    assert _route(records, peers, key) == _expected(records, peers, key)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=COLUMNWISE_MIN, max_size=2000),
    st.integers(2, 9),
)
def test_generated_int_keys_route_as_the_per_record_hash(keys: List[int], peers: int) -> None:
    records = [((k, 0), 1, 1) for k in keys]
    assert _route(records, peers) == _expected(records, peers)


@pytest.mark.parametrize("size", [10, COLUMNWISE_MIN * 2])
def test_an_unroutable_key_names_the_operator_worker_and_record(size: int) -> None:
    records: List[Any] = [((i, 0), 1, 1) for i in range(size)]
    records[size // 2] = (([1, 2], 0), 1, 1)  # a list: mutable, no stable hash
    with pytest.raises(UnhashableDataError) as caught:
        _route(records, 2, index=1)
    message = str(caught.value)
    assert "'Join'" in message and "worker 1" in message and "[1, 2]" in message


@pytest.mark.parametrize("size", [10, COLUMNWISE_MIN * 2])
def test_a_raising_key_function_names_the_operator_worker_and_record(size: int) -> None:
    records: List[Any] = [((i, 0), 1, 1) for i in range(size)]
    records[3] = 5  # not subscriptable
    with pytest.raises(OperatorError) as caught:
        _route(records, 3, index=2)
    message = str(caught.value)
    assert "'Join'" in message and "worker 2" in message and "record 5" in message
