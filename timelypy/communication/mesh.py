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

import logging
import socket
import struct
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from ..errors import WaitTimeoutError, WorkerDiedError, WorkerError
from .handshake import (HandshakeRefused, accept_claim, describe_address, greet_as_connector,
                        read_claim)
from .wire import HEADER_SIZE, FrameReader, decode, encode

__all__ = ["SocketMesh", "MeshFabric", "Address"]

log = logging.getLogger("timelypy.workers")

Address = Tuple[str, int]
"""A worker's listening address: ``("127.0.0.1", port)``."""

_HOST = "127.0.0.1"

# --- frames after the handshake ---------------------------------------------------------
# A frame's payload starts with one kind byte.
_KIND_DATA = 0x44  # b"D": the rest is wire.encode(obj)
_KIND_BYE = 0x42  # b"B": orderly close, nothing more will follow
_FRAME_HEADER = struct.Struct("<Q")
_DATA_TAG = bytes([_KIND_DATA])
_BYE_FRAME = _FRAME_HEADER.pack(1) + bytes([_KIND_BYE])
assert _FRAME_HEADER.size == HEADER_SIZE

_RECV_CHUNK = 1 << 20
_SOCKET_BUFFER = 4 << 20


def _tune(sock: socket.socket) -> None:
    # Small frames (progress updates) must not wait for Nagle's algorithm.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, _SOCKET_BUFFER)
        except OSError:  # pragma: no cover - the kernel may cap it; the default works too
            pass


def _data_frame(payload: bytes) -> bytes:
    """A data frame: ``wire.frame`` of the kind byte followed by ``payload``."""
    return b"".join((_FRAME_HEADER.pack(len(payload) + 1), _DATA_TAG, payload))


class _Peer:
    """One remote worker: its socket, send lock, reader thread and state."""

    __slots__ = ("index", "sock", "send_lock", "reader", "said_bye", "ended", "bytes_sent",
                 "frames_sent", "bytes_received", "frames_received")

    def __init__(self, index: int, sock: socket.socket) -> None:
        self.index = index
        self.sock = sock
        self.send_lock = threading.Lock()
        self.reader: Optional[threading.Thread] = None
        self.said_bye = False  # the peer closed its mesh in an orderly way
        self.ended = False  # our reader has stopped
        self.bytes_sent = self.frames_sent = self.bytes_received = self.frames_received = 0


class SocketMesh:
    """Authenticated loopback TCP connections from this worker to every other worker of a job.

    Parameters:
        index: this worker's index, ``0 <= index < peers``.
        peers: the number of workers in the job.
        listener: the socket returned by :meth:`listen` for this worker.
        addresses: every worker's address (from :meth:`listen`), in index order.
        secret: the job's secret, shared by all workers and nobody else.
        connect_timeout: seconds to wait for the whole mesh to form.
        handshake_timeout: seconds an incoming connection has to pass the challenge.
        send_timeout: seconds one :meth:`send` may block on a peer that does not read.

    Raises :class:`~timelypy.errors.WaitTimeoutError` (naming the missing workers) if the mesh
    does not form in time, :class:`~timelypy.errors.AuthenticationError` if a listener we connect
    to fails *our* challenge, and :class:`~timelypy.errors.WorkerDiedError` if a peer vanishes
    while the mesh forms.
    """

    # ----------------------------------------------------------------------------------
    # construction

    @staticmethod
    def listen(secret: bytes, backlog: int = 128,
               host: str = _HOST) -> Tuple[socket.socket, Address]:
        """Bind a listening socket on ``host`` (default ``127.0.0.1``; a free port) for one worker.

        ``host`` is the IPv4 address to bind: keep the loopback default when all workers share a
        machine; on a cluster pass this node's address (the Ray backend uses the node IP).
        ``secret`` is only checked here (it must be non-empty bytes); it is used by the mesh.
        Returns ``(listener, (host, port))``. Connections that arrive before the mesh is built wait
        in the backlog.
        """
        _check_secret(secret)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind((host, 0))
            listener.listen(backlog)
        except BaseException:
            listener.close()
            raise
        host, port = listener.getsockname()[:2]
        return listener, (host, port)

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
    ) -> None:
        _check_secret(secret)
        if peers < 1 or not 0 <= index < peers:
            raise ValueError(f"worker index {index} is not in range for {peers} workers")
        if len(addresses) != peers:
            raise ValueError(f"expected {peers} addresses, got {len(addresses)}")
        self.index = index
        self.peers = peers
        self.addresses: Tuple[Address, ...] = tuple((str(h), int(p)) for h, p in addresses)
        self.address: Address = tuple(listener.getsockname()[:2])  # type: ignore[assignment]
        self.connect_timeout = connect_timeout
        self.handshake_timeout = handshake_timeout
        self.send_timeout = send_timeout
        self._secret = bytes(secret)
        self._listener = listener
        self._peers: Dict[int, _Peer] = {}
        self._cond = threading.Condition(threading.Lock())
        self._inbox: Deque[Tuple[int, Any]] = deque()
        self._failures: Dict[int, WorkerError] = {}
        self._pending_handshakes: set = set()
        self._claimed: set = set()  # peer indices whose handshake has passed
        self._closing = False
        self._closed = False
        self.refused = 0
        """Connections refused so far (failed or unexpected handshakes)."""
        self.messages_sent = 0
        self.bytes_sent = 0
        self.messages_received = 0
        self.dropped_after_bye = 0
        """Messages not sent because their destination had already closed its mesh."""

        listener.settimeout(0.25)  # the accept loop notices close() even if accept() stays asleep
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"timelypy-mesh-{index}-accept", daemon=True
        )
        self._acceptor.start()
        try:
            self._connect_all(time.monotonic() + connect_timeout)
        except BaseException:
            self.abort()
            raise

    def _connect_all(self, deadline: float) -> None:
        # Lower-indexed peers: we dial. Higher-indexed peers dial us (the accept thread).
        for j in range(self.index):
            sock = self._dial(j, deadline)
            self._register(j, sock)
        with self._cond:
            while True:
                self._raise_failure()
                missing = [j for j in range(self.index + 1, self.peers) if j not in self._peers]
                if not missing:
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeoutError(
                        f"worker {self.index}: workers {missing} did not connect within "
                        f"{self.connect_timeout} s"
                    )
                self._cond.wait(min(remaining, 1.0))
        log.debug("worker %d: mesh of %d workers formed", self.index, self.peers)

    def _dial(self, j: int, deadline: float) -> socket.socket:
        """Connect to worker ``j`` and pass both challenges; retry refused connects until deadline."""
        address = self.addresses[j]
        delay = 0.01
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeoutError(
                    f"worker {self.index}: could not connect to worker {j} at "
                    f"{describe_address(address)} within {self.connect_timeout} s"
                )
            try:
                sock = socket.create_connection(address, timeout=remaining)
            except (ConnectionRefusedError, socket.timeout):
                time.sleep(min(delay, max(remaining, 0)))
                delay = min(delay * 2, 0.5)
                continue
            try:
                greet_as_connector(sock, self._secret, self.index, j, self.addresses[j],
                                   deadline, self.connect_timeout)
            except BaseException:
                sock.close()
                raise
            return sock

    def _accept_loop(self) -> None:
        listener = self._listener
        while not self._closing:
            try:
                sock, peer = listener.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._closing:
                    return
                log.exception("worker %d: the mesh listener failed", self.index)
                return
            with self._cond:
                self._pending_handshakes.add(sock)
            threading.Thread(
                target=self._accept_one,
                args=(sock, peer),
                name=f"timelypy-mesh-{self.index}-handshake",
                daemon=True,
            ).start()

    def _refuse(self, sock: socket.socket, peer: Any, reason: str) -> None:
        with self._cond:
            self.refused += 1
        if not self._closing:
            log.warning(
                "worker %d: refused connection from %s: %s", self.index, describe_address(peer), reason
            )
        sock.close()

    def _accept_one(self, sock: socket.socket, peer: Any) -> None:
        """Challenge one incoming connection; register it if it is an expected peer."""
        try:
            self._accept_handshake(sock, peer)
        except BaseException:  # pragma: no cover - a bug, not a bad client
            log.exception("worker %d: handshake with %s crashed", self.index, describe_address(peer))
            sock.close()
        finally:
            with self._cond:
                self._pending_handshakes.discard(sock)

    def _accept_handshake(self, sock: socket.socket, peer: Any) -> None:
        try:
            claim = read_claim(sock, self._secret, self.handshake_timeout)
        except HandshakeRefused as refused:
            self._refuse(sock, peer, str(refused))
            return
        j = claim.index
        with self._cond:
            if self._closing:
                reason = "the mesh is closing"
            elif not self.index < j < self.peers:
                reason = f"authenticated but claims unexpected worker index {j}"
            elif j in self._peers or j in self._claimed:
                reason = f"authenticated but worker {j} is already connected"
            else:
                reason = ""
                self._claimed.add(j)
        if reason:
            self._refuse(sock, peer, reason)
            return
        try:
            accept_claim(sock, self._secret, self.index, claim)
        except OSError as exc:
            self._refuse(sock, peer, f"worker {j} went away during the handshake ({exc})")
            return
        self._register(j, sock)

    def _register(self, j: int, sock: socket.socket) -> None:
        try:
            _tune(sock)
            # The timeout bounds sendall on a peer that stopped reading; the reader loops over it.
            sock.settimeout(self.send_timeout)
        except OSError:  # closed under us by close()/abort()
            sock.close()
            return
        peer = _Peer(j, sock)
        reader = threading.Thread(
            target=self._read_loop, args=(peer,), name=f"timelypy-mesh-{self.index}-from-{j}",
            daemon=True,
        )
        peer.reader = reader
        with self._cond:
            if self._closing:
                sock.close()
                return
            self._peers[j] = peer
            # Started under the lock, so close() never sees a registered peer without a reader.
            reader.start()
            self._cond.notify_all()

    # ----------------------------------------------------------------------------------
    # receiving

    def _read_loop(self, peer: _Peer) -> None:
        sock = peer.sock
        frames = FrameReader()
        buffer = bytearray(_RECV_CHUNK)
        view = memoryview(buffer)
        inbox = self._inbox
        cond = self._cond
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
                messages, failure = self._decode(peer, frames.feed(view[:n]))
                if failure is not None:
                    return
                if messages:
                    peer.frames_received += len(messages)
                    with cond:
                        inbox.extend(messages)
                        self.messages_received += len(messages)
                        cond.notify_all()
        finally:
            view.release()
            with cond:
                peer.ended = True
                if failure is not None and not self._closing:
                    self._failures.setdefault(j, failure)
                cond.notify_all()

    def _decode(self, peer: _Peer, payloads: Iterable[bytes]
                ) -> Tuple[List[Tuple[int, Any]], Optional[WorkerError]]:
        """Decode the frames of one read: ``(messages, failure)``; a goodbye marks the peer."""
        j = peer.index
        messages = []
        for payload in payloads:
            kind = payload[0]
            if kind == _KIND_DATA:
                try:
                    messages.append((j, decode(memoryview(payload)[1:])))
                except Exception as exc:
                    return messages, WorkerError(
                        f"worker {self.index} could not decode a message from worker {j}: "
                        f"{type(exc).__name__}: {exc}", worker=j)
            elif kind == _KIND_BYE:
                peer.said_bye = True
            else:
                return messages, WorkerError(
                    f"worker {self.index}: unknown frame kind {kind} from worker {j}", worker=j)
        return messages, None

    def _raise_failure(self) -> None:
        # Called with the condition held. A fresh exception per call keeps tracebacks short.
        if self._failures:
            first = next(iter(self._failures.values()))
            raise type(first)(str(first), worker=first.worker)

    def recv_nowait(self) -> List[Tuple[int, Any]]:
        """Everything that has arrived, as ``(source_index, obj)`` pairs, FIFO per sender.

        Raises :class:`~timelypy.errors.WorkerDiedError` (naming the worker) once any peer has
        died; the error is sticky.
        """
        with self._cond:
            self._raise_failure()
            if not self._inbox:
                return []
            items = list(self._inbox)
            self._inbox.clear()
        return items

    def wait(self, timeout: float) -> bool:
        """Block until a message is available (True) or ``timeout`` seconds pass (False).

        Raises :class:`~timelypy.errors.WorkerDiedError` if a peer died (also while waiting).
        """
        with self._cond:
            self._raise_failure()
            if not self._inbox:
                self._cond.wait_for(lambda: self._inbox or self._failures, max(timeout, 0.0))
                self._raise_failure()
            return bool(self._inbox)

    def link_statistics(self) -> Dict[int, Tuple[int, int, int, int]]:
        """Per peer: ``(bytes_sent, bytes_received, frames_sent, frames_received)`` so far."""
        return {j: (p.bytes_sent, p.bytes_received, p.frames_sent, p.frames_received)
                for j, p in list(self._peers.items())}

    # ----------------------------------------------------------------------------------
    # sending

    def _deliver_local(self, objs: Iterable[Any]) -> None:
        with self._cond:
            before = len(self._inbox)
            self._inbox.extend((self.index, obj) for obj in objs)
            self.messages_received += len(self._inbox) - before
            self._cond.notify_all()

    def _peer(self, dest: int) -> _Peer:
        peer = self._peers.get(dest)
        if peer is None:
            if self._closed or self._closing:
                raise WorkerError(f"worker {self.index}: the mesh is closed", worker=self.index)
            raise ValueError(f"worker {self.index}: no worker {dest} among {self.peers} workers")
        return peer

    def _send_frames(self, peer: _Peer, data: bytes, count: int) -> None:
        if peer.said_bye:
            self.dropped_after_bye += count
            log.debug("worker %d: dropped %d message(s) for closed worker %d",
                      self.index, count, peer.index)
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
                self.dropped_after_bye += count
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

        To another worker: encoded and written before returning. To oneself: appended to the local
        inbox as is (no copy; do not mutate it afterwards). A destination that already closed
        its mesh in an orderly way silently drops the message (counted in ``dropped_after_bye``).
        """
        if dest == self.index:
            self._deliver_local((obj,))
            return
        self._send_frames(self._peer(dest), _data_frame(encode(obj)), 1)

    def broadcast(self, obj: Any) -> None:
        """Send ``obj`` to every worker, this one included (encoded once)."""
        if self.peers > 1:
            data = _data_frame(encode(obj))
            for j in range(self.peers):
                if j != self.index:
                    self._send_frames(self._peer(j), data, 1)
        self._deliver_local((obj,))

    # ----------------------------------------------------------------------------------
    # shutting down

    def close(self, timeout: float = 2.0) -> None:
        """Orderly close: tell every peer goodbye, wait (bounded) for theirs, release sockets.

        Waiting for the peers' goodbyes lets frames already in flight be read, so that a peer
        that closes slightly later does not mistake us for dead. Idempotent.
        """
        if self._closed:
            return
        with self._cond:
            self._closing = True
            peers = list(self._peers.values())
        for peer in peers:
            try:
                with peer.send_lock:
                    peer.sock.settimeout(min(timeout, 1.0))
                    peer.sock.sendall(_BYE_FRAME)
                    peer.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for peer in peers:
            if peer.reader is not None and peer.reader.is_alive():
                peer.reader.join(max(deadline - time.monotonic(), 0.0))
        self._release(peers)

    def abort(self) -> None:
        """Close every connection at once, without goodbyes: peers will see this worker as dead."""
        if self._closed:
            return
        with self._cond:
            self._closing = True
            peers = list(self._peers.values())
        self._release(peers)

    def _release(self, peers: List[_Peer]) -> None:
        for peer in peers:
            try:
                peer.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            peer.sock.close()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        with self._cond:
            pending = list(self._pending_handshakes)
            self._cond.notify_all()
        for sock in pending:
            sock.close()
        for peer in peers:
            if peer.reader is not None and peer.reader is not threading.current_thread():
                peer.reader.join(1.0)
        if self._acceptor is not threading.current_thread():
            self._acceptor.join(1.0)
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` has run."""
        return self._closed

    def __enter__(self) -> "SocketMesh":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return (
            f"SocketMesh(index={self.index}, peers={self.peers}, address={self.address}, "
            f"closed={self._closed})"
        )


def _check_secret(secret: Any) -> None:
    if not isinstance(secret, (bytes, bytearray)) or not secret:
        raise TypeError("the job secret must be non-empty bytes")


class MeshFabric:
    """Adapts a :class:`SocketMesh` to the worker's fabric interface."""

    __slots__ = ("mesh", "index", "peers", "send", "broadcast", "recv_nowait", "wait",
                 "link_statistics")

    def __init__(self, mesh: SocketMesh):
        self.mesh = mesh
        self.index = mesh.index
        self.peers = mesh.peers
        self.send = mesh.send
        self.broadcast = mesh.broadcast
        self.recv_nowait = mesh.recv_nowait
        self.wait = mesh.wait
        self.link_statistics = mesh.link_statistics

    def flush(self) -> None:
        """Frames are written as they are sent; nothing is buffered."""
