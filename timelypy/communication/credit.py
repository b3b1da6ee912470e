"""Credit-based flow control for the socket mesh: bounded bytes in flight on every link.

A sender may have at most ``window`` bytes on a link that the receiving *worker* has not yet
taken out of its inbox (bytes read by the receiver's socket thread but not consumed still count).
The receiver returns credit as its worker consumes: whenever the consumed-but-uncredited bytes
reach a quarter of the window, or at once when the sender said it is blocked. A single message
larger than the window is allowed when nothing else is in flight on its link.

Why this cannot deadlock (the rule that keeps iterate loops and all-to-all exchanges live): a
worker that is blocked sending still drains its own inbox (into a holding list its next receive
returns first) and returns credit for what it drained. Two workers blocked on each other
therefore free each other, and a cycle of blocked workers cannot form. What a blocked worker
drains is bounded by what its peers may send before they block in turn. A worker that sends
while a peer waits for its credit drains and credits the same way, so that a peer is not held
until this worker blocks too (workers feeding their inputs in an open loop, between steps,
send to each other without consuming).

The ledger holds only numbers; :class:`~timelypy.communication.mesh.SocketMesh` calls it with
its lock held and sends the credit and "blocked" frames itself.
"""

from __future__ import annotations

from typing import Dict, List, Set, Tuple

__all__ = ["CreditLedger", "DEFAULT_WINDOW"]

DEFAULT_WINDOW = 8 << 20
"""Default bytes in flight per link (8 MiB): many batches of 10^4 records on the wire."""


class CreditLedger:
    """Per-link flow-control accounting of one mesh endpoint (not thread-safe: the caller
    holds the mesh's lock). ``window`` of 0 switches flow control off. All methods are O(1)
    except :meth:`take_credits`, O(links with news)."""

    __slots__ = ("window", "threshold", "_in_flight", "_arrived", "_unacked", "_requested")

    def __init__(self, window: int = DEFAULT_WINDOW):
        if window < 0:
            raise ValueError(f"flow-control window must be >= 0 bytes, got {window}")
        self.window = window
        self.threshold = max(1, window // 4)
        self._in_flight: Dict[int, int] = {}
        self._arrived: Dict[int, int] = {}
        self._unacked: Dict[int, int] = {}
        self._requested: Set[int] = set()

    # -- sender side ----------------------------------------------------------------------
    def try_reserve(self, peer: int, size: int) -> bool:
        """Reserve ``size`` bytes on the link to ``peer`` if the window allows it."""
        if not self.window:
            return True
        used = self._in_flight.get(peer, 0)
        if used and used + size > self.window:
            return False
        self._in_flight[peer] = used + size
        return True

    def credited(self, peer: int, size: int) -> None:
        """``peer`` consumed ``size`` more bytes of ours."""
        self._in_flight[peer] = max(0, self._in_flight.get(peer, 0) - size)

    def in_flight(self, peer: int) -> int:
        """Bytes sent to ``peer`` and not yet credited."""
        return self._in_flight.get(peer, 0)

    # -- receiver side ----------------------------------------------------------------------
    def arrived(self, peer: int, size: int) -> None:
        """``size`` bytes of whole messages from ``peer`` entered the inbox."""
        self._arrived[peer] = self._arrived.get(peer, 0) + size

    def buffered(self) -> int:
        """Bytes of whole messages in the inbox, not yet consumed."""
        return sum(self._arrived.values())

    def request(self, peer: int) -> None:
        """``peer`` is blocked waiting for credit: return what is consumed at once."""
        self._requested.add(peer)

    def has_requests(self) -> bool:
        """Some peer is blocked waiting for our credit."""
        return bool(self._requested)

    def take_credits(self) -> List[Tuple[int, int]]:
        """Everything in the inbox was just consumed: the ``(peer, bytes)`` credits to send now."""
        out: List[Tuple[int, int]] = []
        if not self.window:
            self._arrived.clear()
            return out
        for peer, size in self._arrived.items():
            self._unacked[peer] = self._unacked.get(peer, 0) + size
        self._arrived.clear()
        for peer, size in list(self._unacked.items()):
            if size and (size >= self.threshold or peer in self._requested):
                out.append((peer, size))
                self._unacked[peer] = 0
        self._requested.clear()
        return out
