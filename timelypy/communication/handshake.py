"""The mesh handshake: both ends of a new connection prove they know the job's secret.

Protocol (HMAC-SHA256 over fresh random nonces)::

    acceptor  -> connector : MAGIC (8) + nonce_a (32)
    connector -> acceptor  : nonce_c (32) + index_c (4)
                             + HMAC(secret, "connect"|nonce_a|nonce_c|index_c)
    acceptor  -> connector : index_a (4) + HMAC(secret, "accept"|nonce_a|nonce_c|index_c|index_a)

Each side proves knowledge of the secret over a nonce the *other* side chose; the two MACs carry
different labels, so one side's answer can never be replayed as the other's.
"""

from __future__ import annotations

import hmac
import os
import socket
import struct
import time
from typing import Any, List, NamedTuple, Tuple

from ..errors import AuthenticationError, WaitTimeoutError, WorkerDiedError

__all__ = [
    "greet_as_connector",
    "read_claim",
    "accept_claim",
    "Claim",
    "HandshakeRefused",
    "describe_address",
]

MAGIC = b"TPYMESH1"
_NONCE = 32
_DIGEST = 32
_INDEX = struct.Struct("<I")
_HELLO_SIZE = len(MAGIC) + _NONCE
_CLAIM_SIZE = _NONCE + _INDEX.size + _DIGEST
_REPLY_SIZE = _INDEX.size + _DIGEST


class HandshakeRefused(Exception):
    """An incoming connection failed the challenge; the message says why (for the log)."""


class Claim(NamedTuple):
    """An authenticated connector's claim to be worker ``index``, with the nonces exchanged."""

    # The field shadows tuple.index (mypy: assignment); the name is the protocol's, read by the
    # mesh and the session rendezvous, and a claim is never searched like a sequence.
    index: int  # type: ignore[assignment]
    nonce_a: bytes
    nonce_c: bytes
    raw_index: bytes


def _mac(secret: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, b"".join(parts), "sha256").digest()


def describe_address(peer: Any) -> str:
    """``host:port`` of a socket address (or its repr for unusual families)."""
    try:
        return f"{peer[0]}:{peer[1]}"
    except Exception:  # pragma: no cover - unix sockets, odd families
        return repr(peer)


def recv_exact(sock: socket.socket, size: int, deadline: float) -> bytes:
    """Read exactly ``size`` bytes before ``deadline`` (``time.monotonic``)."""
    chunks: List[bytes] = []
    missing = size
    while missing:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout(f"timed out after {size - missing} of {size} bytes")
        sock.settimeout(remaining)
        chunk = sock.recv(missing)
        if not chunk:
            raise ConnectionError(f"connection closed after {size - missing} of {size} bytes")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def greet_as_connector(
    sock: socket.socket,
    secret: bytes,
    me: int,
    j: int,
    address: Tuple[str, int],
    deadline: float,
    connect_timeout: float,
) -> None:
    """Run the connector's side against worker ``j``; raises if either side fails."""
    try:
        hello = recv_exact(sock, _HELLO_SIZE, deadline)
    except socket.timeout:
        raise WaitTimeoutError(
            f"worker {me}: worker {j} did not greet us within {connect_timeout} s"
        ) from None
    except OSError as exc:
        raise WorkerDiedError(
            f"worker {me}: connection to worker {j} failed during the handshake: {exc}", worker=j
        ) from exc
    if hello[: len(MAGIC)] != MAGIC:
        raise AuthenticationError(
            f"worker {me}: the listener of worker {j} at "
            f"{describe_address(address)} is not a timelypy mesh"
        )
    nonce_a = hello[len(MAGIC) :]
    nonce_c = os.urandom(_NONCE)
    mine = _INDEX.pack(me)
    try:
        sock.sendall(nonce_c + mine + _mac(secret, b"connect", nonce_a, nonce_c, mine))
        reply = recv_exact(sock, _REPLY_SIZE, deadline)
    except (OSError, socket.timeout) as exc:
        raise AuthenticationError(
            f"worker {me}: worker {j} rejected our handshake or went away ({exc})"
        ) from exc
    them = reply[: _INDEX.size]
    expected = _mac(secret, b"accept", nonce_a, nonce_c, mine, them)
    if not hmac.compare_digest(reply[_INDEX.size :], expected):
        raise AuthenticationError(
            f"worker {me}: the listener at {describe_address(address)} "
            f"failed the challenge for worker {j} (wrong job secret?)"
        )
    (claimed,) = _INDEX.unpack(them)
    if claimed != j:
        raise AuthenticationError(
            f"worker {me}: expected worker {j} at "
            f"{describe_address(address)}, found worker {claimed}"
        )


def read_claim(sock: socket.socket, secret: bytes, timeout: float) -> Claim:
    """Challenge an incoming connection and check its answer; raises :class:`HandshakeRefused`."""
    deadline = time.monotonic() + timeout
    nonce_a = os.urandom(_NONCE)
    try:
        sock.settimeout(timeout)
        sock.sendall(MAGIC + nonce_a)
        claim = recv_exact(sock, _CLAIM_SIZE, deadline)
    except socket.timeout:
        raise HandshakeRefused(f"no handshake within {timeout} s") from None
    except OSError as exc:
        raise HandshakeRefused(f"connection ended during the handshake ({exc})") from None
    nonce_c = claim[:_NONCE]
    them = claim[_NONCE : _NONCE + _INDEX.size]
    if not hmac.compare_digest(
        claim[_NONCE + _INDEX.size :], _mac(secret, b"connect", nonce_a, nonce_c, them)
    ):
        raise HandshakeRefused("failed authentication (wrong or missing job secret)")
    (j,) = _INDEX.unpack(them)
    return Claim(j, nonce_a, nonce_c, them)


def accept_claim(sock: socket.socket, secret: bytes, me: int, claim: Claim) -> None:
    """Answer an accepted claim, proving this side knows the secret too (may raise OSError)."""
    mine = _INDEX.pack(me)
    sock.sendall(
        mine + _mac(secret, b"accept", claim.nonce_a, claim.nonce_c, claim.raw_index, mine)
    )
