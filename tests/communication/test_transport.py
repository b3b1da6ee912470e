"""Tests of the processes-backend transport: wire codec, framing, SocketMesh, run_in_processes."""

from __future__ import annotations

import collections
import enum
import hmac
import logging
import os
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any, List

import cloudpickle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from timelypy.communication.mesh import SocketMesh
from timelypy.communication.wire import FrameReader, decode, encode, frame
from timelypy.errors import (
    AuthenticationError,
    WaitTimeoutError,
    WorkerDiedError,
    WorkerError,
)
from timelypy.order import Product
from timelypy.workers.launch.launcher import run_in_processes

# Worker functions defined here travel by value: children need not import this test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

SECRET = b"0123456789abcdef0123456789abcdef"


# ------------------------------------------------------------------------------------------
# helpers


def normalized(obj: Any) -> Any:
    """What ``decode(encode(obj))`` should be: every list/tuple becomes a tuple."""
    cls = type(obj)
    if cls is Product:
        return Product(normalized(obj[0]), normalized(obj[1]))
    if cls in (list, tuple):
        return tuple(normalized(x) for x in obj)
    if cls is dict:
        return {normalized(k): normalized(v) for k, v in obj.items()}
    if cls in (set, frozenset):
        return cls(normalized(x) for x in obj)
    return obj


def same(a: Any, b: Any) -> bool:
    """Equality that also requires identical types all the way down (Product != tuple)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return a == b and {type(x) for x in a} == {type(x) for x in b}
    return a == b


def roundtrip(obj: Any) -> Any:
    return decode(encode(obj))


# ------------------------------------------------------------------------------------------
# codec


class Color(enum.IntEnum):
    RED = 1


Point = collections.namedtuple("Point", "x y")


class TestCodec:
    def test_tuples_stay_tuples_lists_become_tuples(self):
        batch = [(1, "a"), (2, "b")]
        out = roundtrip(batch)
        assert same(out, ((1, "a"), (2, "b")))
        assert same(roundtrip(((1, (2, (3,))), [])), ((1, (2, (3,))), ()))

    def test_product_stays_product(self):
        assert same(roundtrip(Product(1, 2)), Product(1, 2))
        nested = Product(Product(1, 2), 3)
        assert same(roundtrip(nested), nested)
        deep = Product(Product(Product(0, 1), 2), Product(3, 4))
        assert same(roundtrip(deep), deep)
        batch = [((k, k * 2), Product(k % 3, 1), 1) for k in range(100)]
        assert same(roundtrip(batch), normalized(batch))

    def test_product_leaf_types_are_exact(self):
        # Product(1, 2) == Product(1.0, 2): the encode/decode caches must not conflate them.
        assert same(roundtrip(Product(1, 2)), Product(1, 2))
        assert same(roundtrip(Product(1.0, 2)), Product(1.0, 2))
        assert same(roundtrip(Product(True, 2)), Product(True, 2))
        assert same(roundtrip(Product(Product(1.0, 1), 2)), Product(Product(1.0, 1), 2))
        assert same(roundtrip(Product(("a", 1), "b")), Product(("a", 1), "b"))

    def test_decoded_products_with_mutable_parts_are_not_shared(self):
        out = roundtrip([Product({1}, 2), Product({1}, 2)])
        assert out[0] is not out[1]
        out[0][0].add(5)
        assert out[1][0] == {1}

    @pytest.mark.parametrize(
        "value",
        [2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**40, -(10**40), 7**300],
    )
    def test_big_ints(self, value):
        assert same(roundtrip(value), value)
        assert same(roundtrip(Product(value, -value)), Product(value, -value))

    def test_sets_and_frozensets(self):
        s = {1, "a", (2, 3), Product(4, 5), frozenset({6})}
        assert same(roundtrip(s), s)
        assert same(roundtrip(frozenset(s)), frozenset(s))
        assert same(roundtrip(set()), set())

    def test_bytes_vs_str_and_scalars(self):
        value = (b"bytes", "str", b"", "", None, True, False, 0, -1, 1.5, float("inf"))
        assert same(roundtrip(value), value)
        assert same(roundtrip(bytearray(b"ab")), b"ab")  # documented: bytes-like -> bytes

    def test_dicts_with_tuple_and_int_keys(self):
        value = {(1, 2): [3], 4: "x", "k": {5: Product(6, 7)}}
        assert same(roundtrip(value), normalized(value))

    def test_lambda_and_user_types_via_cloudpickle(self):
        offset = 10
        f = roundtrip(lambda x: x + offset)
        assert f(1) == 11
        assert same(roundtrip(Point(1, 2)), Point(1, 2))  # a tuple subclass: not a plain tuple
        assert roundtrip(Color.RED) is Color.RED
        assert same(roundtrip([(1, Color.RED)]), ((1, Color.RED),))

    def test_encode_is_reentrant_with_nested_containers(self):
        # Sets inside Products inside sets: each nesting level packs with its own packer.
        value = {Product(frozenset({Product(1, 2)}), 3), (Product(4, frozenset({5})),)}
        assert same(roundtrip(value), value)

    def test_encode_recovers_after_a_failure(self):
        with pytest.raises(TypeError):
            encode([(1, 2), Product(threading.Lock(), 1)])  # unpicklable, deep inside
        assert same(roundtrip([(1, 2), Product(3, 4)]), ((1, 2), Product(3, 4)))

    def test_encode_from_threads(self):
        batch = [((k, str(k)), Product(k, k), 1) for k in range(500)]
        errors: List[BaseException] = []

        def work():
            try:
                for _ in range(20):
                    assert same(roundtrip(batch), normalized(batch))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors


def _times():
    return st.recursive(
        st.integers(min_value=0, max_value=2**70),
        lambda inner: st.builds(Product, inner, inner),
        max_leaves=6,
    )


_scalars = (
    st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False)
    | _times()
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.tuples(inner, inner)
        | st.lists(inner, max_size=4)
        | st.builds(Product, inner, inner)
        | st.frozensets(st.integers() | st.text(max_size=4) | _times(), max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_values)
def test_roundtrip_property(value):
    assert same(roundtrip(value), normalized(value))


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(st.binary(max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=5000), max_size=20),
)
def test_frame_reader_any_chunking(payloads, cuts):
    stream = b"".join(frame(p) for p in payloads)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0] + points, points + [len(stream)])]
    reader = FrameReader()
    out: List[bytes] = []
    for chunk in chunks:
        out.extend(reader.feed(chunk))
    assert out == payloads
    assert reader.pending == 0


def test_frame_reader_byte_by_byte_and_limit():
    reader = FrameReader()
    data = frame(b"") + frame(b"xyz") + frame(encode([(1, 2)]))
    out = [p for i in range(len(data)) for p in reader.feed(data[i : i + 1])]
    assert out == [b"", b"xyz", encode([(1, 2)])]
    with pytest.raises(ValueError, match="exceeds"):
        FrameReader(max_frame=10).feed(frame(b"x" * 11))


# ------------------------------------------------------------------------------------------
# SocketMesh, in one process (each mesh built in its own thread)


def build_meshes(n: int, secret: bytes = SECRET, listeners=None, **kwargs) -> List[SocketMesh]:
    listeners = listeners or [SocketMesh.listen(secret) for _ in range(n)]
    addresses = [address for _, address in listeners]
    meshes: List[Any] = [None] * n
    errors: List[BaseException] = []

    def build(i: int) -> None:
        try:
            meshes[i] = SocketMesh(i, n, listeners[i][0], addresses, secret, **kwargs)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    if errors:
        for m in meshes:
            if m is not None:
                m.abort()
        raise errors[0]
    return meshes


def close_all(meshes: List[SocketMesh], timeout: float = 2.0) -> None:
    """Close meshes concurrently, as separate processes would."""
    threads = [
        threading.Thread(target=m.close, kwargs={"timeout": timeout})
        for m in meshes
        if m is not None
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)


def drain(mesh: SocketMesh, count: int, timeout: float = 10.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"received only {len(got)} of {count} messages"
        mesh.wait(min(remaining, 1.0))
        got.extend(mesh.recv_nowait())
    return got


@pytest.fixture
def warnings_log(caplog):
    caplog.set_level(logging.WARNING, logger="timelypy")
    return caplog


def refusals(caplog) -> List[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("timelypy.") and "refused connection" in r.getMessage()
    ]


class TestMeshInProcess:
    def test_exchange_fifo_self_and_broadcast(self):
        meshes = build_meshes(3)
        try:
            for m in meshes:
                for j in range(3):
                    for seq in range(20):
                        m.send(j, [(m.index, seq, k) for k in range(5)])
                m.broadcast(("bcast", m.index))
            for m in meshes:
                got = drain(m, 3 * 21)
                for src in range(3):
                    mine = [obj for s, obj in got if s == src]
                    seqs = [batch[0][1] for batch in mine[:-1]]
                    assert seqs == list(range(20))  # FIFO per sender
                    assert tuple(mine[-1]) == ("bcast", src)
                    assert all(tuple(r) == (src, r[1], r[2]) for b in mine[:-1] for r in b)
                assert m.wait(0.01) is False
        finally:
            close_all(meshes)

    def test_large_batch_and_link_statistics(self):
        m0, m1 = build_meshes(2)
        try:
            big = [(k, str(k)) for k in range(200_000)]
            for obj in ([(1,)], big, [(2,)]):
                m0.send(1, obj)
            got = drain(m1, 3)
            assert [obj for _, obj in got] == [((1,),), tuple(big), ((2,),)]
            sent, received, frames_sent, frames_received = m0.link_statistics()[1]
            assert frames_sent == 3 and sent > 200_000 * 3 and frames_received == 0
            assert received < 100  # at most a flow-control credit came back
            assert m1.link_statistics()[0] == (0, sent, 0, 3)
        finally:
            close_all([m0, m1])

    def test_orderly_close_is_not_death(self):
        m0, m1 = build_meshes(2)
        m0.send(1, "last words")
        closer = threading.Thread(target=m0.close, kwargs={"timeout": 5.0})
        closer.start()
        assert [obj for _, obj in drain(m1, 1)] == ["last words"]
        m1.close(timeout=5.0)
        closer.join(10)
        assert m1.wait(0.05) is False and m1.recv_nowait() == []
        m1.send(0, "dropped")  # to a closed mesh: dropped quietly, no error

    def test_abort_surfaces_worker_died(self):
        m0, m1, m2 = build_meshes(3)
        try:
            m2.abort()
            with pytest.raises(WorkerDiedError, match="worker 2") as info:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    m0.wait(1.0)
            assert info.value.worker == 2
            with pytest.raises(WorkerDiedError, match="worker 2"):
                m0.recv_nowait()  # sticky
        finally:
            close_all([m0, m1])

    def test_stray_connections_before_the_mesh_forms(self, warnings_log):
        listeners = [SocketMesh.listen(SECRET) for _ in range(2)]
        port = listeners[0][1]
        # Queued in the listener's backlog before the mesh even exists.
        silent = socket.create_connection(port)
        garbage = socket.create_connection(port)
        garbage.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 100)
        start = time.monotonic()
        m0, m1 = build_meshes(2, listeners=listeners, handshake_timeout=0.5)
        try:
            assert time.monotonic() - start < 5
            m1.send(0, (1, 2))
            assert drain(m0, 1) == [(1, (1, 2))]
            deadline = time.monotonic() + 5
            while m0.refused < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            messages = refusals(warnings_log)
            assert m0.refused == 2, messages
            assert any("no handshake within" in msg for msg in messages)
            assert any("failed authentication" in msg for msg in messages)
        finally:
            silent.close()
            garbage.close()
            close_all([m0, m1])

    def test_wrong_secret_is_refused_both_ways(self, warnings_log):
        (l0, a0), (l1, a1) = SocketMesh.listen(SECRET), SocketMesh.listen(b"another secret")
        result: dict = {}

        def acceptor():
            try:
                SocketMesh(0, 2, l0, [a0, a1], SECRET, connect_timeout=1.5)
            except BaseException as exc:
                result["acceptor"] = exc

        t = threading.Thread(target=acceptor)
        t.start()
        with pytest.raises(AuthenticationError, match="worker 1"):
            SocketMesh(1, 2, l1, [a0, a1], b"another secret", connect_timeout=5)
        t.join(10)
        assert isinstance(result["acceptor"], WaitTimeoutError)
        assert "workers [1]" in str(result["acceptor"])
        assert any("failed authentication" in m for m in refusals(warnings_log))


# ------------------------------------------------------------------------------------------
# run_in_processes


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's reused pid
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_all_gone(pid_dir, expected: int = 1) -> None:
    """No process whose pid a worker recorded is still alive (at least ``expected`` recorded)."""
    pids = [int(p.read_text()) for p in pid_dir.iterdir() if p.suffix == ".pid"]
    assert len(pids) >= expected, f"only {len(pids)} workers recorded their pid"
    deadline = time.monotonic() + 5
    while any(pid_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if pid_alive(pid)], "worker processes left behind"


def exchange_worker(index: int, peers: int, mesh: SocketMesh, got: Any = ()) -> list:
    """Send 5 numbered batches to every other worker; return what arrived, in arrival order.

    ``got``: batches that already arrived (received while waiting for something else).
    """
    for seq in range(5):
        for j in range(peers):
            if j != index:
                mesh.send(j, [(index, seq, k) for k in range(100)])
    got = list(got)
    deadline = time.monotonic() + 20
    while len(got) < 5 * (peers - 1):
        assert time.monotonic() < deadline, "timed out waiting for batches"
        mesh.wait(1.0)
        got.extend(mesh.recv_nowait())
    return got


def write_pid(pid_dir, index: int) -> None:
    # Atomic: a worker terminated mid-write leaves no file rather than an empty one.
    tmp = pid_dir / f"{index}.tmp"
    tmp.write_text(str(os.getpid()))
    os.replace(tmp, pid_dir / f"{index}.pid")


def wait_until_peer_dies(mesh: SocketMesh, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        mesh.wait(1.0)
        mesh.recv_nowait()


@pytest.mark.processes
class TestProcesses:
    @pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
    def test_three_workers_exchange_fifo(self, tmp_path, start_method):
        def main(index, peers, mesh):
            write_pid(tmp_path, index)
            return exchange_worker(index, peers, mesh)

        results = run_in_processes(main, 3, timeout=60, start_method=start_method)
        assert len(results) == 3
        for index, got in enumerate(results):
            for src in range(3):
                batches = [batch for s, batch in got if s == src]
                if src == index:
                    assert batches == []
                    continue
                assert [b[0][1] for b in batches] == list(range(5))  # FIFO per sender
                assert batches == [tuple((src, seq, k) for k in range(100)) for seq in range(5)]
        assert_all_gone(tmp_path, expected=3)

    def test_worker_exception_names_worker_with_traceback(self, tmp_path):
        def explode_in_worker_two():
            raise ValueError("boom from worker two")

        def main(index, peers, mesh):
            write_pid(tmp_path, index)
            if index == 2:
                explode_in_worker_two()
            wait_until_peer_dies(mesh)  # raises WorkerDiedError once worker 2 is gone
            return "unreachable"

        start = time.monotonic()
        with pytest.raises(WorkerError) as info:
            run_in_processes(main, 3, timeout=60)
        error = info.value
        assert not isinstance(error, WorkerDiedError)
        assert error.worker == 2
        assert "worker 2" in str(error) and "boom from worker two" in str(error)
        assert "explode_in_worker_two" in error.traceback_text
        assert "ValueError" in error.traceback_text
        assert time.monotonic() - start < 15
        assert_all_gone(tmp_path)

    def test_killed_worker_is_reported_and_nothing_is_left(self, tmp_path):
        def main(index, peers, mesh):
            write_pid(tmp_path, index)
            mesh.broadcast(index)
            drain(mesh, peers)
            if index == 1:
                os.kill(os.getpid(), signal.SIGKILL)
            wait_until_peer_dies(mesh)
            return "unreachable"

        start = time.monotonic()
        with pytest.raises(WorkerDiedError) as info:
            run_in_processes(main, 3, timeout=60)
        assert time.monotonic() - start < 10
        assert info.value.worker == 1
        assert "worker 1" in str(info.value) and "SIGKILL" in str(info.value)
        assert_all_gone(tmp_path, expected=3)

    def test_timeout_kills_stuck_workers(self, tmp_path):
        def main(index, peers, mesh):
            write_pid(tmp_path, index)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # must still be killed
            time.sleep(120)

        start = time.monotonic()
        with pytest.raises(WaitTimeoutError, match=r"workers \[0, 1\]"):
            run_in_processes(main, 2, timeout=2, grace=0.5)
        assert time.monotonic() - start < 10
        assert_all_gone(tmp_path)

    def test_stray_sockets_are_refused_and_the_job_goes_on(self):
        def main(index, peers, mesh):
            captured: list = []
            handler = logging.Handler()
            handler.emit = lambda record: captured.append(record.getMessage())
            logging.getLogger("timelypy").addHandler(handler)
            # Barrier: nobody sends strays before every worker's handler is in place.
            mesh.broadcast("ready")
            got, ready = [], 0
            while ready < peers:
                for message in drain(mesh, 1):
                    if message[1] == "ready":
                        ready += 1
                    else:
                        got.append(message)  # a fast peer's batch, already past the barrier
            if index == 0:
                host_port = mesh.addresses[1]
                # 1. connects and leaves without a word
                socket.create_connection(host_port).close()
                # 2. sends garbage
                with socket.create_connection(host_port) as s:
                    s.sendall(b"\x00" * 200)
                    s.settimeout(5)
                    s.recv(100)
                # 3. speaks the protocol with the wrong secret, claiming to be worker 2
                with socket.create_connection(host_port) as s:
                    s.settimeout(5)
                    hello = b""
                    while len(hello) < 40:
                        hello += s.recv(40 - len(hello))
                    nonce_c, me = os.urandom(32), struct.pack("<I", 2)
                    mac = hmac.new(
                        b"wrong", b"connect" + hello[8:] + nonce_c + me, "sha256"
                    ).digest()
                    s.sendall(nonce_c + me + mac)
                    assert s.recv(100) == b""  # refused: closed without a reply
            if index == 1:
                deadline = time.monotonic() + 10
                while mesh.refused < 3 and time.monotonic() < deadline:
                    time.sleep(0.05)
            got = exchange_worker(index, peers, mesh, got)
            total = sum(record[2] for _, batch in got for record in batch)
            return total, mesh.refused, [m for m in captured if "refused" in m]

        results = run_in_processes(main, 3, timeout=60)
        assert [r[0] for r in results] == [2 * 5 * sum(range(100))] * 3
        assert results[1][1] == 3
        warnings = results[1][2]
        assert len(warnings) == 3
        assert all(w.startswith("worker 1: refused connection from 127.0.0.1:") for w in warnings)
        assert sum("failed authentication" in w for w in warnings) == 2  # garbage, wrong MAC


class TestFlowControl:
    """Credit-based flow control: bounded bytes in flight per link, and no deadlock."""

    def test_fast_producer_slow_consumer_holds_bounded_bytes(self):
        window = 1 << 20
        m0, m1 = build_meshes(2, window=window)
        message = list(range(20_000))  # about 60 KB encoded
        size = len(encode(message))
        count = 300  # about 18 MB in all: 18 windows
        try:
            producer = threading.Thread(target=lambda: [m0.send(1, message) for _ in range(count)])
            producer.start()
            got, most = 0, 0
            deadline = time.monotonic() + 60
            while got < count and time.monotonic() < deadline:
                most = max(most, m1.buffered_bytes())
                m1.wait(0.5)
                got += len(m1.recv_nowait())
                time.sleep(0.002)  # a slow consumer
            producer.join(10)
            assert got == count and not producer.is_alive()
            assert most <= window + size + 64, (most, window)
        finally:
            close_all([m0, m1])

    def test_workers_blocked_sending_to_each_other_do_not_deadlock(self):
        m0, m1 = build_meshes(2, window=256 << 10)
        batch = [(k, "x" * 20) for k in range(5000)]
        count = 60  # each side sends about 10 MB before it reads anything
        results: dict = {}

        def run(mesh: SocketMesh, other: int) -> None:
            for i in range(count):
                mesh.send(other, [i] + batch)
            results[mesh.index] = [obj[0] for _, obj in drain(mesh, count, timeout=30)]

        try:
            threads = [
                threading.Thread(target=run, args=(m0, 1)),
                threading.Thread(target=run, args=(m1, 0)),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            assert not any(t.is_alive() for t in threads)
            assert results == {0: list(range(count)), 1: list(range(count))}  # FIFO kept
        finally:
            close_all([m0, m1])

    def test_a_receiver_that_never_consumes_times_the_sender_out_naming_it(self):
        m0, m1 = build_meshes(2, window=64 << 10, send_timeout=1.0)
        try:
            with pytest.raises(WaitTimeoutError, match="worker 1 consumed none"):
                for _ in range(100):
                    m0.send(1, list(range(10_000)))
        finally:
            close_all([m0, m1])

    def test_a_message_larger_than_the_window_passes_alone(self):
        m0, m1 = build_meshes(2, window=1024)
        try:
            big = list(range(50_000))
            sender = threading.Thread(target=lambda: (m0.send(1, big), m0.send(1, [1])))
            sender.start()
            got = drain(m1, 2)
            sender.join(10)
            assert [obj for _, obj in got] == [tuple(big), (1,)]
        finally:
            close_all([m0, m1])


def test_a_worker_that_sends_frees_a_peer_blocked_on_its_window():
    """Worker 1 blocks on a full window to worker 0, which never receives but keeps sending:
    worker 0's next send returns the credit (an open loop of inputs on both workers), and
    everything arrives in order once worker 0 receives."""
    m0, m1 = build_meshes(2, window=4096)
    try:
        big = list(range(2000))  # more than half the window: the second send blocks
        sender = threading.Thread(target=lambda: (m1.send(0, big), m1.send(0, big)))
        sender.start()
        deadline = time.monotonic() + 10
        while not m0._credit.has_requests() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sender.is_alive()  # blocked, waiting for worker 0's credit
        m0.send(1, ["tick"])  # worker 0 sends; it does not receive
        sender.join(10)
        assert not sender.is_alive()
        assert [obj for _, obj in drain(m0, 2)] == [tuple(big), tuple(big)]
        assert [obj for _, obj in drain(m1, 1)] == [("tick",)]
    finally:
        close_all([m0, m1])
