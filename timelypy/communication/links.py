"""The links of a socket mesh: listening, dialling, authenticating, registering and closing.

:class:`MeshLinks` forms the full mesh of one worker (it dials every lower-indexed worker and
accepts every higher-indexed one, each connection passing the handshake of :mod:`.handshake`),
keeps one :class:`Peer` per remote worker, and closes the links in an orderly way or at once.
Reading and writing messages, and flow control, are :class:`~.mesh.SocketMesh`'s.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import WaitTimeoutError, WorkerError
from .handshake import (
    HandshakeRefused,
    accept_claim,
    describe_address,
    greet_as_connector,
    read_claim,
)
from .wire import HEADER_SIZE

__all__ = ["MeshLinks", "Peer", "Address"]

log = logging.getLogger(__name__)

Address = Tuple[str, int]
"""A worker's listening address: ``("127.0.0.1", port)``."""

_HOST = "127.0.0.1"

# --- frames after the handshake ---------------------------------------------------------
# A frame's payload starts with one kind byte.
KIND_DATA = 0x44  # b"D": the rest is wire.encode(obj)
KIND_PICKLED = 0x50  # b"P": the rest is wire.pickle_records(obj) (a root-scope data message)
KIND_BYE = 0x42  # b"B": orderly close, nothing more will follow
KIND_CREDIT = 0x43  # b"C": the rest is 8 bytes: how many of our bytes the peer consumed
KIND_WAITING = 0x57  # b"W": the peer is blocked until we return credit
FRAME_HEADER = struct.Struct("<Q")
CREDIT = struct.Struct("<Q")
DATA_TAG = bytes([KIND_DATA])
PICKLED_TAG = bytes([KIND_PICKLED])
BYE_FRAME = FRAME_HEADER.pack(1) + bytes([KIND_BYE])
WAITING_FRAME = FRAME_HEADER.pack(1) + bytes([KIND_WAITING])
assert FRAME_HEADER.size == HEADER_SIZE

RECV_CHUNK = 1 << 20
SOCKET_BUFFER = 4 << 20


def _tune(sock: socket.socket) -> None:
    # Small frames (progress updates) must not wait for Nagle's algorithm.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER)
        except OSError:  # pragma: no cover - the kernel may cap it; the default works too
            pass


def data_frame(payload: bytes, tag: bytes = DATA_TAG) -> bytes:
    """A data frame: ``wire.frame`` of the kind byte (``tag``) followed by ``payload``."""
    return b"".join((FRAME_HEADER.pack(len(payload) + 1), tag, payload))


class Peer:
    """One remote worker: its socket, send lock, reader thread and state."""

    __slots__ = (
        "index",
        "sock",
        "send_lock",
        "reader",
        "said_bye",
        "ended",
        "bytes_sent",
        "frames_sent",
        "bytes_received",
        "frames_received",
    )

    def __init__(self, index: int, sock: socket.socket) -> None:
        self.index = index
        self.sock = sock
        self.send_lock = threading.Lock()
        self.reader: Optional[threading.Thread] = None
        self.said_bye = False  # the peer closed its mesh in an orderly way
        self.ended = False  # our reader has stopped
        self.bytes_sent = self.frames_sent = self.bytes_received = self.frames_received = 0


class MeshLinks:
    """The authenticated connections of one worker to every other worker of a job (see
    :class:`~.mesh.SocketMesh` for the parameters). Subclasses read each link in
    :meth:`_read_loop`, started once the link is registered."""

    _cond: threading.Condition
    """Guards the links and the subclass's receiving state; the subclass creates it before
    calling ``MeshLinks.__init__`` (reader threads start while the links form)."""

    @staticmethod
    def listen(
        secret: bytes, backlog: int = 128, host: str = _HOST
    ) -> Tuple[socket.socket, Address]:
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
        connect_timeout: float,
        handshake_timeout: float,
        send_timeout: float,
    ) -> None:
        _check_secret(secret)
        if peers < 1 or not 0 <= index < peers:
            raise ValueError(f"worker index {index} is not in range for {peers} workers")
        if len(addresses) != peers:
            raise ValueError(f"expected {peers} addresses, got {len(addresses)}")
        self.index = index
        self.peers = peers
        self.addresses: Tuple[Address, ...] = tuple((str(h), int(p)) for h, p in addresses)
        bound_host, bound_port = listener.getsockname()[:2]
        self.address: Address = (str(bound_host), int(bound_port))
        self.connect_timeout = connect_timeout
        self.handshake_timeout = handshake_timeout
        self.send_timeout = send_timeout
        self._secret = bytes(secret)
        self._listener = listener
        self._peers: Dict[int, Peer] = {}
        self._failures: Dict[int, WorkerError] = {}
        self._pending_handshakes: set = set()
        self._claimed: set = set()  # peer indices whose handshake has passed
        self._closing = False
        self._closed = False
        self.refused = 0
        """Connections refused so far (failed or unexpected handshakes)."""
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

    def _read_loop(self, peer: "Peer") -> None:
        raise NotImplementedError

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
        """Connect to worker ``j`` and pass both challenges; retry refused connects until the
        deadline."""
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
                greet_as_connector(
                    sock,
                    self._secret,
                    self.index,
                    j,
                    self.addresses[j],
                    deadline,
                    self.connect_timeout,
                )
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
                "worker %d: refused connection from %s: %s",
                self.index,
                describe_address(peer),
                reason,
            )
        sock.close()

    def _accept_one(self, sock: socket.socket, peer: Any) -> None:
        """Challenge one incoming connection; register it if it is an expected peer."""
        try:
            self._accept_handshake(sock, peer)
        except BaseException:  # pragma: no cover - a bug, not a bad client
            log.exception(
                "worker %d: handshake with %s crashed", self.index, describe_address(peer)
            )
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
        peer = Peer(j, sock)
        reader = threading.Thread(
            target=self._read_loop,
            args=(peer,),
            name=f"timelypy-mesh-{self.index}-from-{j}",
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

    def _raise_failure(self) -> None:
        # Called with the condition held. A fresh exception per call keeps tracebacks short.
        if self._failures:
            first = next(iter(self._failures.values()))
            raise type(first)(str(first), worker=first.worker)

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
                    peer.sock.sendall(BYE_FRAME)
                    peer.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        for peer in peers:
            if peer.reader is not None and peer.reader.is_alive():
                peer.reader.join(max(deadline - time.monotonic(), 0.0))
        self._release(peers)
        log.debug("worker %d: mesh links closed", self.index)

    def abort(self) -> None:
        """Close every connection at once, without goodbyes: peers will see this worker as dead."""
        if self._closed:
            return
        with self._cond:
            self._closing = True
            peers = list(self._peers.values())
        self._release(peers)
        log.debug("worker %d: mesh links aborted", self.index)

    def _release(self, peers: List[Peer]) -> None:
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

    def __enter__(self) -> "MeshLinks":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(index={self.index}, peers={self.peers}, "
            f"address={self.address}, closed={self._closed})"
        )


def _check_secret(secret: Any) -> None:
    if not isinstance(secret, (bytes, bytearray)) or not secret:
        raise TypeError("the job secret must be non-empty bytes")
