"""A full mesh of authenticated loopback TCP connections between the processes of one job.

Each worker process owns one :class:`SocketMesh`. It moves Python objects (batches, progress
updates) to the other workers, FIFO per sender, and tells the worker when a peer died.

Life of a mesh:

1. Before the mesh exists, every worker calls :meth:`SocketMesh.listen` and a launcher gathers the
   ``(host, port)`` addresses of all workers.
2. ``SocketMesh(index, peers, listener, addresses, secret)`` connects to every lower-indexed worker
   and accepts a connection from every higher-indexed one. Every connection, in both directions,
   passes a challenge-response on the job's secret (HMAC-SHA256 over fresh random nonces; the
   connecting side also proves which worker it is). Anything else that reaches the port - a stray
   client, a wrong secret, garbage, silence - is logged on the ``timelypy.workers`` logger and
   closed, and the mesh keeps waiting for the real peer. The listener stays open for the mesh's
   life, refusing (and logging) every later connection.
3. :meth:`~SocketMesh.send` / :meth:`~SocketMesh.broadcast` encode with :mod:`.wire` and
   write whole frames from the calling thread. One reader thread per peer decodes frames into a
   shared inbox; :meth:`~SocketMesh.recv_nowait` drains it and :meth:`~SocketMesh.wait` blocks
   (bounded) until something arrives.
4. :meth:`~SocketMesh.close` says goodbye to every peer (an orderly close). A peer whose connection
   ends *without* a goodbye has died: from then on :meth:`~SocketMesh.recv_nowait` and
   :meth:`~SocketMesh.wait` raise :class:`~timelypy.errors.WorkerDiedError` naming it.

Messages to oneself never leave the process and are not copied: after ``send(self.index, batch)``
the receiver gets the very same object, so a sender must not mutate a batch once sent.

Example, two workers (normally one per process; the constructors run in two threads)::

    (l0, a0), (l1, a1) = SocketMesh.listen(secret), SocketMesh.listen(secret)
    m0, m1 = SocketMesh(0, 2, l0, [a0, a1], secret), SocketMesh(1, 2, l1, [a0, a1], secret)
    m0.send(1, [(1, 2)]); m1.wait(5.0); m1.recv_nowait()   # -> [(0, ((1, 2),))]
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import WaitTimeoutError, WorkerDiedError, WorkerError
from .credit import DEFAULT_WINDOW, CreditLedger
from .links import (
    CREDIT,
    FRAME_HEADER,
    KIND_BYE,
    KIND_CREDIT,
    KIND_DATA,
    KIND_PICKLED,
    KIND_WAITING,
    PICKLED_TAG,
    RECV_CHUNK,
    WAITING_FRAME,
    Address,
    MeshLinks,
    Peer,
    data_frame,
    log,
)
from .wire import (
    HEADER_SIZE,
    FrameReader,
    decode,
    encode,
    fixed_records,
    pickle_records,
    unpickle_records,
)
from .wire_columns import wire_columns_mode

__all__ = ["SocketMesh", "MeshFabric", "MeshSettings", "Address"]


class MeshSettings(NamedTuple):
    """How a worker's mesh forms and moves data: seconds for the mesh to form, the flow-control
    ``window`` in bytes per link (0: off), and seconds one send may block."""

    connect_timeout: float = 30.0
    window: int = DEFAULT_WINDOW
    send_timeout: float = 120.0


class SocketMesh(MeshLinks):
    """Authenticated loopback TCP connections from this worker to every other worker of a job.

    Parameters:
        index: this worker's index, ``0 <= index < peers``.
        peers: the number of workers in the job.
        listener: the socket returned by :meth:`listen` for this worker.
        addresses: every worker's address (from :meth:`listen`), in index order.
        secret: the job's secret, shared by all workers and nobody else.
        connect_timeout: seconds to wait for the whole mesh to form.
        handshake_timeout: seconds an incoming connection has to pass the challenge.
        send_timeout: seconds one :meth:`send` may block on a peer that does not read or
            does not consume (flow control).
        window: bytes in flight per link before a send blocks until the receiving worker
            consumes (see :mod:`.credit`); 0 switches flow control off.

    Raises :class:`~timelypy.errors.WaitTimeoutError` (naming the missing workers) if the mesh
    does not form in time, :class:`~timelypy.errors.AuthenticationError` if a listener we connect
    to fails *our* challenge, and :class:`~timelypy.errors.WorkerDiedError` if a peer vanishes
    while the mesh forms.
    """

    def __init__(
        self,
        index: int,
        peers: int,
        listener: socket.socket,
        addresses: Sequence[Address],
        secret: bytes,
        connect_timeout: float = 30.0,
        *,
        handshake_timeout: float = 5.0,
        send_timeout: float = 120.0,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        # Reader threads start while the links form: the receiving state comes first.
        self._cond = threading.Condition(threading.Lock())
        self._inbox: Deque[Tuple[int, Any]] = deque()
        self._held: List[Tuple[int, Any]] = []  # drained while blocked in a send
        self._credit = CreditLedger(window)
        self.messages_sent = 0
        self.bytes_sent = 0
        self.messages_received = 0
        self.wait_seconds = 0.0
        """Seconds the worker spent blocked in :meth:`wait` (idle, waiting for its peers)."""
        self.encode_seconds = 0.0
        """Seconds spent encoding messages for other workers (the sending side of the codec)."""
        self.blocked_seconds = 0.0
        """Seconds sends spent blocked on flow control (a peer's window full, see
        :mod:`.credit`)."""
        self.wire_columns = wire_columns_mode()
        """When fixed-width records travel as numpy columns (see
        :data:`~.wire_columns.WIRE_COLUMNS_VARIABLE`)."""
        self.fixed_sent = 0
        """Data messages sent with their records as numpy columns."""
        super().__init__(
            index,
            peers,
            listener,
            addresses,
            secret,
            connect_timeout,
            handshake_timeout,
            send_timeout,
        )

    def _read_loop(self, peer: Peer) -> None:
        sock = peer.sock
        frames = FrameReader()
        buffer = bytearray(RECV_CHUNK)
        view = memoryview(buffer)
        inbox = self._inbox
        cond = self._cond
        ledger = self._credit
        j = peer.index
        failure: Optional[WorkerError] = None
        try:
            while True:
                try:
                    n = sock.recv_into(buffer)
                except socket.timeout:
                    if self._closing:
                        return
                    continue
                except OSError as exc:
                    if self._closing or peer.said_bye:
                        return
                    failure = WorkerDiedError(
                        f"worker {j} died: its connection to worker {self.index} failed ({exc})",
                        worker=j,
                    )
                    return
                if n == 0:
                    if not (self._closing or peer.said_bye):
                        failure = WorkerDiedError(
                            f"worker {j} died: its connection to worker {self.index} closed "
                            f"without an orderly goodbye",
                            worker=j,
                        )
                    return
                peer.bytes_received += n
                messages, failure, arrived, credit, waiting = self._decode(
                    peer, frames.feed(view[:n])
                )
                if failure is not None:
                    return
                if messages or credit or waiting:
                    peer.frames_received += len(messages)
                    with cond:
                        # Arrivals before the request: a request must cover them.
                        inbox.extend(messages)
                        self.messages_received += len(messages)
                        ledger.arrived(j, arrived)
                        if credit:
                            ledger.credited(j, credit)
                        if waiting:
                            ledger.request(j)
                        cond.notify_all()
        finally:
            view.release()
            with cond:
                peer.ended = True
                if failure is not None and not self._closing:
                    self._failures.setdefault(j, failure)
                cond.notify_all()

    def _decode(
        self, peer: Peer, payloads: Iterable[bytes]
    ) -> Tuple[List[Tuple[int, Any]], Optional[WorkerError], int, int, bool]:
        """Decode the frames of one read: ``(messages, failure, bytes of those messages,
        credit returned, whether the peer waits for credit)``; a goodbye marks the peer."""
        j = peer.index
        messages = []
        arrived = credit = 0
        waiting = False
        for payload in payloads:
            kind = payload[0]
            if kind == KIND_DATA or kind == KIND_PICKLED:
                try:
                    body = memoryview(payload)[1:]
                    messages.append(
                        (j, decode(body) if kind == KIND_DATA else unpickle_records(body))
                    )
                except Exception as exc:
                    return (
                        messages,
                        WorkerError(
                            f"worker {self.index} could not decode a message from worker {j}: "
                            f"{type(exc).__name__}: {exc}",
                            worker=j,
                        ),
                        arrived,
                        credit,
                        waiting,
                    )
                arrived += len(payload) + HEADER_SIZE
            elif kind == KIND_CREDIT:
                credit += CREDIT.unpack_from(payload, 1)[0]
            elif kind == KIND_WAITING:
                waiting = True
            elif kind == KIND_BYE:
                peer.said_bye = True
            else:
                return (
                    messages,
                    WorkerError(
                        f"worker {self.index}: unknown frame kind {kind} from worker {j}", worker=j
                    ),
                    arrived,
                    credit,
                    waiting,
                )
        return messages, None, arrived, credit, waiting

    def recv_nowait(self) -> List[Tuple[int, Any]]:
        """Everything that has arrived, as ``(source_index, obj)`` pairs, FIFO per sender.

        Returns credit to the senders for what it hands out (flow control). Raises
        :class:`~timelypy.errors.WorkerDiedError` (naming the worker) once any peer has died;
        the error is sticky.
        """
        with self._cond:
            self._raise_failure()
            if not (self._inbox or self._held or self._credit.has_requests()):
                return []
            items = self._held
            items.extend(self._inbox)
            self._held = []
            self._inbox.clear()
            credits = self._credit.take_credits()
        if credits:
            self._send_credits(credits)
        return items

    def wait(self, timeout: float) -> bool:
        """Block until a message is available or a peer waits for credit (True), or
        ``timeout`` seconds pass (False).

        Raises :class:`~timelypy.errors.WorkerDiedError` if a peer died (also while waiting).
        """
        ledger = self._credit
        with self._cond:
            self._raise_failure()
            if not (self._inbox or self._held or ledger.has_requests()):
                start = time.perf_counter()
                self._cond.wait_for(
                    lambda: self._inbox or self._failures or ledger.has_requests(),
                    max(timeout, 0.0),
                )
                self.wait_seconds += time.perf_counter() - start
                self._raise_failure()
            return bool(self._inbox or self._held or ledger.has_requests())

    def buffered_bytes(self) -> int:
        """Bytes received from peers and not yet taken by :meth:`recv_nowait` (bounded by the
        flow-control window per peer, plus one message)."""
        with self._cond:
            return self._credit.buffered()

    def link_statistics(self) -> Dict[int, Tuple[int, int, int, int]]:
        """Per peer: ``(bytes_sent, bytes_received, frames_sent, frames_received)`` so far."""
        return {
            j: (p.bytes_sent, p.bytes_received, p.frames_sent, p.frames_received)
            for j, p in list(self._peers.items())
        }

    # ----------------------------------------------------------------------------------
    # sending

    def _deliver_local(self, objs: Iterable[Any]) -> None:
        with self._cond:
            before = len(self._inbox)
            self._inbox.extend((self.index, obj) for obj in objs)
            self.messages_received += len(self._inbox) - before
            self._cond.notify_all()

    def _peer(self, dest: int) -> Peer:
        peer = self._peers.get(dest)
        if peer is None:
            if self._closed or self._closing:
                raise WorkerError(f"worker {self.index}: the mesh is closed", worker=self.index)
            raise ValueError(f"worker {self.index}: no worker {dest} among {self.peers} workers")
        return peer

    def _send_control(self, peer: Peer, frame: bytes) -> None:
        """Write a flow-control frame; a peer that is gone is reported by its reader."""
        try:
            with peer.send_lock:
                peer.sock.sendall(frame)
        except OSError:
            pass

    def _send_credits(self, credits: List[Tuple[int, int]]) -> None:
        for j, size in credits:
            peer = self._peers.get(j)
            if peer is not None:
                self._send_control(
                    peer,
                    FRAME_HEADER.pack(1 + CREDIT.size) + bytes([KIND_CREDIT]) + CREDIT.pack(size),
                )

    def _reserve(self, peer: Peer, size: int) -> None:
        """Wait (bounded) until the window to ``peer`` has room for ``size`` bytes, draining
        this worker's own inbox meanwhile so that blocked workers cannot wait on each other."""
        cond, ledger = self._cond, self._credit
        with cond:
            if ledger.try_reserve(peer.index, size):
                return
        started = time.perf_counter()
        deadline = time.monotonic() + self.send_timeout
        self._send_control(peer, WAITING_FRAME)
        while True:
            with cond:
                if ledger.try_reserve(peer.index, size) or peer.said_bye or peer.ended:
                    self.blocked_seconds += time.perf_counter() - started
                    return
                self._raise_failure()
                if self._inbox:
                    self._held.extend(self._inbox)
                    self._inbox.clear()
                credits = ledger.take_credits()
                if not credits:
                    cond.wait(0.05)
            if credits:
                self._send_credits(credits)
            if time.monotonic() > deadline:
                raise WaitTimeoutError(
                    f"worker {self.index}: worker {peer.index} consumed none of the "
                    f"{ledger.in_flight(peer.index)} bytes in flight to it for "
                    f"{self.send_timeout} s (flow-control window {ledger.window} bytes)"
                )

    def _send_frames(self, peer: Peer, data: bytes, count: int) -> None:
        if not peer.said_bye:
            self._reserve(peer, len(data))
        if peer.said_bye:
            log.debug(
                "worker %d: dropped %d message(s) for closed worker %d",
                self.index,
                count,
                peer.index,
            )
            return
        try:
            with peer.send_lock:
                peer.sock.sendall(data)
        except socket.timeout:
            raise WaitTimeoutError(
                f"worker {self.index}: worker {peer.index} did not read for "
                f"{self.send_timeout} s; the send was abandoned"
            ) from None
        except OSError as exc:
            # Either the peer said goodbye (its reader may not have seen it yet) or it died.
            reader = peer.reader
            if reader is not None:
                reader.join(1.0)
            if peer.said_bye:
                return
            raise WorkerDiedError(
                f"worker {peer.index} died: worker {self.index} could not send to it ({exc})",
                worker=peer.index,
            ) from exc
        self.messages_sent += count
        self.bytes_sent += len(data)
        peer.frames_sent += count
        peer.bytes_sent += len(data)

    def send(self, dest: int, obj: Any) -> None:
        """Send ``obj`` to worker ``dest`` (FIFO with everything else this worker sends it).

        To another worker: encoded (a root-scope data message pickled, see
        :func:`~.wire.pickle_records`) and written before returning. To oneself: appended to the
        local inbox as is (no copy; do not mutate it afterwards). A destination that already closed
        its mesh in an orderly way silently drops the message (logged at debug level).
        """
        if dest == self.index:
            self._deliver_local((obj,))
            return
        start = time.perf_counter()
        data = self._encode_message(obj)
        self.encode_seconds += time.perf_counter() - start
        self._send_frames(self._peer(dest), data, 1)
        # A peer waits for our credit (see _serve_requests). Read without the lock: a stale
        # answer only leaves the request to the next send or receive.
        if self._credit.has_requests():
            self._serve_requests()

    def _serve_requests(self) -> None:
        """Free peers blocked on their window to this worker: drain the inbox (into the
        list the next receive returns first) and return credit for it, as a blocked send
        does. A worker that sends without stepping (an open loop feeding an input between
        steps) would otherwise hold a peer blocked until it blocks in turn."""
        with self._cond:
            if self._inbox:
                self._held.extend(self._inbox)
                self._inbox.clear()
            credits = self._credit.take_credits()
        if credits:
            self._send_credits(credits)

    def _encode_message(self, obj: Any) -> bytes:
        """The frame of ``obj``: fixed-width records as columns or pickled as the mode says
        (see :data:`~.wire_columns.WIRE_COLUMNS_VARIABLE`), else msgpack."""
        mode = self.wire_columns
        fixed = fixed_records(obj) if mode == "always" else None
        if fixed is None:
            pickled = pickle_records(obj)
            if pickled is not None:
                return data_frame(pickled, PICKLED_TAG)
            if mode == "auto":
                fixed = fixed_records(obj)
        if fixed is None:
            return data_frame(encode(obj))
        self.fixed_sent += 1
        return data_frame(fixed)

    def broadcast(self, obj: Any) -> None:
        """Send ``obj`` to every worker, this one included (encoded once)."""
        self.send_to_peers(obj)
        self._deliver_local((obj,))

    def send_to_peers(self, obj: Any) -> None:
        """Send ``obj`` to every other worker (encoded once)."""
        if self.peers > 1:
            start = time.perf_counter()
            data = data_frame(encode(obj))
            self.encode_seconds += time.perf_counter() - start
            for j in range(self.peers):
                if j != self.index:
                    self._send_frames(self._peer(j), data, 1)


class MeshFabric:
    """Adapts a :class:`SocketMesh` to the worker's fabric interface."""

    __slots__ = (
        "mesh",
        "index",
        "peers",
        "send",
        "broadcast",
        "send_to_peers",
        "recv_nowait",
        "wait",
        "link_statistics",
    )

    def __init__(self, mesh: SocketMesh):
        self.mesh = mesh
        self.index = mesh.index
        self.peers = mesh.peers
        self.send = mesh.send
        self.broadcast = mesh.broadcast
        self.send_to_peers = mesh.send_to_peers
        self.recv_nowait = mesh.recv_nowait
        self.wait = mesh.wait
        self.link_statistics = mesh.link_statistics

    def flush(self) -> None:
        """Frames are written as they are sent; nothing is buffered."""
