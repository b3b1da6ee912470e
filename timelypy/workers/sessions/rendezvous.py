"""Where a session's remote workers meet their driver: one authenticated, bounded handshake each.

The driver listens on a fresh port (:class:`DriverListener`); every worker connects
(:func:`connect_to_driver`) and both sides prove that they know the session's secret with the
mesh's challenge-response (:mod:`timelypy.communication.handshake`; the worker also claims its
index). Each pending connection is handled by its own thread with a time limit, so a stray
connection - silence, garbage, a wrong secret, a second claim to one index - is refused and
logged on the ``timelypy.workers`` logger without holding up the real workers. An authenticated
socket becomes a :class:`multiprocessing.connection.Connection` (pickled messages, length
prefixed) on both sides.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional, Tuple

from ...communication.handshake import (
    HandshakeRefused,
    accept_claim,
    describe_address,
    greet_as_connector,
    read_claim,
)
from ...errors import TimelyError

__all__ = ["DRIVER", "HANDSHAKE_TIMEOUT", "DriverListener", "connect_to_driver"]

log = logging.getLogger(__name__)

DRIVER = (1 << 32) - 1
"""The index the driver answers with in the handshake (no worker has it)."""

HANDSHAKE_TIMEOUT = 5.0
"""Seconds a new connection to the driver has to pass the handshake."""

_ACCEPT_POLL = 0.2
"""Longest single wait of the accepting thread (so that it notices :meth:`close`)."""


def connect_to_driver(
    address: Tuple[str, int], secret: bytes, index: int, timeout: float
) -> Connection:
    """Connect worker ``index`` to the session driver at ``address``; both sides authenticated."""
    where = describe_address(address)
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((address[0], address[1]), timeout=timeout)
    except OSError as exc:
        raise TimelyError(
            f"worker {index}: cannot connect to the session driver at {where}: {exc}"
        ) from exc
    try:
        greet_as_connector(sock, secret, index, DRIVER, address, deadline, timeout)
    except Exception as exc:
        sock.close()
        raise TimelyError(
            f"worker {index}: the session driver at {where} failed the handshake: {exc}"
        ) from exc
    sock.settimeout(None)
    return Connection(sock.detach())


class DriverListener:
    """The driver's listener: authenticates each connection in a thread of its own and hands
    ``(worker index, connection)`` to ``connected``; refuses (and logs) everything else."""

    def __init__(
        self,
        host: str,
        secret: bytes,
        workers: int,
        connected: Callable[[int, Connection], bool],
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
    ) -> None:
        self.secret = secret
        self.workers = workers
        self.handshake_timeout = handshake_timeout
        self.refused = 0
        """Connections refused so far."""
        self._connected = connected
        self._lock = threading.Lock()
        self._closed = False
        self._sock = socket.create_server((host, 0))
        self._sock.settimeout(_ACCEPT_POLL)
        self.address: Tuple[str, int] = self._sock.getsockname()[:2]
        threading.Thread(
            target=self._accept_loop, name="timelypy-session-listener", daemon=True
        ).start()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, peer = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # closed
            threading.Thread(
                target=self._handshake,
                args=(sock, peer),
                daemon=True,
                name="timelypy-session-handshake",
            ).start()

    def _handshake(self, sock: socket.socket, peer: Any) -> None:
        try:
            claim = read_claim(sock, self.secret, self.handshake_timeout)
            if not 0 <= claim.index < self.workers:
                raise HandshakeRefused(
                    f"claims to be worker {claim.index} of a session with {self.workers} workers"
                )
            accept_claim(sock, self.secret, DRIVER, claim)
            sock.settimeout(None)
            conn = Connection(sock.detach())
        except (HandshakeRefused, OSError) as exc:
            self._refuse(sock, peer, str(exc))
            return
        if not self._connected(claim.index, conn):
            conn.close()
            self._refuse(None, peer, f"worker {claim.index} is already connected")

    def _refuse(self, sock: Optional[socket.socket], peer: Any, reason: str) -> None:
        with self._lock:
            self.refused += 1
        log.warning(
            "session driver: refused connection from %s: %s", describe_address(peer), reason
        )
        if sock is not None:
            try:
                sock.close()
            except OSError:  # pragma: no cover
                pass

    def close(self) -> None:
        """Stop accepting (idempotent); connections already handed over stay open."""
        self._closed = True
        try:
            self._sock.close()
        except OSError:  # pragma: no cover
            pass
