"""Scaling with workers, the wire: root-scope data messages travel pickled (exact types, about
a third of the codec's time), everything else as before; flow-control blocking is measured."""

from __future__ import annotations

import collections
import sys
import threading
import time
from typing import Any, List

import cloudpickle
import pytest

import timelypy as tp
from timelypy.communication.links import KIND_DATA, KIND_PICKLED
from timelypy.communication.mesh import SocketMesh
from timelypy.communication.wire import decode, encode, pickle_records, unpickle_records
from timelypy.errors import DataEncodingError, WorkerError
from timelypy.order import Product

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.timeout(120)

SECRET = b"0123456789abcdef0123456789abcdef"

Point = collections.namedtuple("Point", "x y")


def roundtrip(message: Any) -> Any:
    payload = pickle_records(message)
    assert payload is not None
    return unpickle_records(payload)


# ------------------------------------------------------------------------------------------
# the codec


def test_data_messages_at_int_times_keep_exact_types():
    records = [
        ((1, 2), 3, -1),
        [4, 5],
        Product(1, 2),
        {"k": (1,)},
        {6},
        frozenset({7}),
        b"\x00",
        "s",
        2**80,
        1.5,
        None,
        True,
        collections.OrderedDict(a=1),
    ]
    got = roundtrip(("d", 9, 3, records))
    assert got == ("d", 9, 3, records)
    assert [type(r) for r in got[3]] == [type(r) for r in records]
    assert type(got[3]) is list and type(got[3][0][0]) is tuple


def test_functions_sent_by_value_travel_through_msgpack():
    assert pickle_records(("d", 1, 0, [lambda x: x + 1])) is None
    (got,) = decode(encode(("d", 1, 0, [lambda x: x + 1])))[3]
    assert got(1) == 2


def test_other_messages_are_left_to_msgpack():
    assert pickle_records(("d", 1, Product(0, 1), [(1, 2)])) is None  # a nested scope's time
    assert pickle_records(("p", 1, [])) is None  # progress
    assert pickle_records(("c", "payload")) is None  # control
    assert pickle_records([("d", 1, 0, [])]) is None
    assert pickle_records(("d", 1, True, [])) is None  # a bool is not an int time


def test_cycles_are_left_to_msgpack_and_the_pickler_recovers():
    cyclic: List[Any] = [1]
    cyclic.append(cyclic)
    assert pickle_records(("d", 1, 0, [cyclic])) is None
    assert roundtrip(("d", 1, 0, [(1, 2)])) == ("d", 1, 0, [(1, 2)])  # fast mode again


def test_classes_sent_by_value_travel_through_msgpack():
    assert pickle_records(("d", 1, 0, [Point(1, 2)])) is None  # this module goes by value
    (got,) = decode(encode(("d", 1, 0, [Point(1, 2)])))[3]
    assert type(got).__name__ == "Point" and got == (1, 2)


def test_unpicklable_records_fall_back_and_the_pickler_recovers():
    assert pickle_records(("d", 1, 0, [threading.Lock()])) is None
    assert roundtrip(("d", 1, 0, [(1, 2)])) == ("d", 1, 0, [(1, 2)])


def test_shared_references_arrive_as_equal_values():
    shared = (1, (2, 3))
    got = roundtrip(("d", 1, 0, [shared, shared]))
    assert got[3] == [shared, shared]


def test_pickling_from_threads():
    errors: List[BaseException] = []

    def run(i: int) -> None:
        try:
            for k in range(200):
                message = ("d", i, k, [((i, k), k, 1)] * 5)
                assert roundtrip(message) == message
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ------------------------------------------------------------------------------------------
# the mesh


def build_meshes(n: int, **kwargs: Any) -> List[SocketMesh]:
    listeners = [SocketMesh.listen(SECRET) for _ in range(n)]
    addresses = [address for _, address in listeners]
    meshes: List[Any] = [None] * n

    def build(i: int) -> None:
        meshes[i] = SocketMesh(i, n, listeners[i][0], addresses, SECRET, **kwargs)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return meshes


def close_all(meshes: List[SocketMesh]) -> None:
    threads = [threading.Thread(target=m.close, kwargs={"timeout": 2.0}) for m in meshes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)


def drain(mesh: SocketMesh, count: int, timeout: float = 10.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"received {len(got)} of {count}"
        mesh.wait(0.5)
        got.extend(mesh.recv_nowait())
    return got


def test_mesh_pickles_root_data_messages_and_keeps_fifo_with_the_rest():
    m0, m1 = build_meshes(2)
    frames: List[int] = []
    original = m0._send_frames

    def spy(peer, data, count):
        frames.append(data[8])  # the kind byte after the length prefix
        return original(peer, data, count)

    m0._send_frames = spy
    try:
        messages = [
            ("d", 1, 0, [[1, 2], (3, 4)]),
            ("d", 1, Product(0, 1), [((1, 2), 3, 1)]),
            ("p", 2, [((1, 0), 1)]),
            ("d", 1, 5, [Product(1, 2)]),
        ]
        for message in messages:
            m0.send(1, message)
        got = [obj for _, obj in drain(m1, 4)]
        assert frames == [KIND_PICKLED, KIND_DATA, KIND_DATA, KIND_PICKLED]
        assert got[0] == ("d", 1, 0, [[1, 2], (3, 4)]) and type(got[0][3][0]) is list
        assert got[1] == decode(encode(messages[1]))  # msgpack: sequences as tuples
        assert type(got[3][3][0]) is Product
    finally:
        close_all([m0, m1])


def test_send_to_peers_skips_this_worker():
    meshes = build_meshes(3)
    try:
        meshes[0].send_to_peers(("p", 1, []))
        assert [obj for _, obj in drain(meshes[1], 1)] == [("p", 1, ())]
        assert [obj for _, obj in drain(meshes[2], 1)] == [("p", 1, ())]
        assert meshes[0].recv_nowait() == []
    finally:
        close_all(meshes)


def test_blocked_seconds_count_sends_waiting_for_credit():
    m0, m1 = build_meshes(2, window=1 << 12)
    try:
        assert m0.blocked_seconds == 0.0
        batch = ("d", 1, 0, list(range(2000)))
        stop = threading.Event()

        def consume() -> None:
            time.sleep(0.2)
            while not stop.is_set():
                m1.wait(0.05)
                m1.recv_nowait()

        reader = threading.Thread(target=consume)
        reader.start()
        for _ in range(5):
            m0.send(1, batch)
        stop.set()
        reader.join(10)
        assert m0.blocked_seconds > 0.05
    finally:
        close_all([m0, m1])


# ------------------------------------------------------------------------------------------
# through the workers


def _skip_level(worker):
    out: collections.Counter = collections.Counter()

    def dataflow(scope):
        session, manages = scope.new_collection()
        probe = (
            manages.map(lambda mp: (mp[1], mp[0]))
            .join(manages)
            .inspect(lambda u: out.__setitem__(u[0], out[u[0]] + u[2]))
            .probe()
        )
        return session, probe

    session, probe = worker.dataflow(dataflow)
    for p in range(worker.index, 300, worker.peers):
        session.insert((p // 2, p))
    for p in range(1, 300):
        session.advance_to(p)
        if p % worker.peers == worker.index:
            session.remove((p // 2, p))
            session.insert((p // 3, p))
        if p % 50 == 0:
            session.flush()
            worker.step()
    session.close()
    while worker.step():
        pass
    mesh = worker.fabric.mesh if worker.peers > 1 else None
    return dict(out), (mesh.bytes_sent if mesh else 0)


def test_processes_answer_as_one_worker_does():
    ((one, _),) = tp.execute(_skip_level, workers=1)
    results = tp.execute(_skip_level, workers=2, backend="processes")
    total: collections.Counter = collections.Counter()
    for out, sent in results:
        total.update(out)
        assert sent > 0
    assert +total == collections.Counter(one)


def _unpicklable(worker):
    def dataflow(scope):
        handle, stream = scope.new_input()
        stream.exchange(lambda r: r[0]).probe()
        return handle

    handle = worker.dataflow(dataflow)
    if worker.index == 0:
        handle.send_batch([(k, threading.Lock()) for k in range(8)])
    handle.close()


def test_unpicklable_records_still_name_the_operator():
    with pytest.raises((DataEncodingError, WorkerError)) as info:
        tp.execute(_unpicklable, workers=2, backend="processes")
    assert "Exchange" in str(info.value) or "serialisable" in str(info.value)
