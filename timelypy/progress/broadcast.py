"""The progress broadcaster: moves one subgraph's progress batches between all workers.

As timely's ``progress/broadcast.rs``: every worker sends its batch of pointstamp changes to every
worker (itself included), so each worker's tracker sees the same changes in the same order per
sender and derives the same frontiers. The transport is not known here: the worker hands the
broadcaster a ``broadcast(batch)`` function and delivers what arrives into
:meth:`Progcaster.deliver`.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

__all__ = ["Progcaster", "ProgressBatch"]

ProgressBatch = List[Tuple[Tuple[Any, Any], int]]
"""``[((location, time), delta), ...]``: one worker's progress changes for one subgraph."""


class Progcaster:
    """Broadcasts one subgraph's progress batches to every worker, this one included.

    ``send(batch)`` hands ``batch`` to ``broadcast``; batches from every worker arrive through
    :meth:`deliver` and are taken by :meth:`recv`, FIFO per sender. With ``loopback``,
    ``broadcast`` reaches the other workers only and this worker's own batch is available to
    :meth:`recv` at once, as in timely (whose channel to itself is a shared queue): a worker
    applies its own progress in its next round instead of after a trip through its transport.
    Cost: O(1) per call.
    """

    __slots__ = ("channel", "_broadcast", "_inbox", "_loopback")

    def __init__(
        self, channel: int, broadcast: Callable[[ProgressBatch], None], loopback: bool = False
    ) -> None:
        self.channel = channel
        self._broadcast = broadcast
        self._inbox: List[ProgressBatch] = []
        self._loopback = loopback

    def send(self, batch: ProgressBatch) -> None:
        """Broadcast this worker's batch (it comes back to this worker too: at once with
        ``loopback``, else through the transport)."""
        self._broadcast(batch)
        if self._loopback:
            self._inbox.append(batch)

    def deliver(self, batch: ProgressBatch) -> None:
        """A batch arrived from some worker (called by the worker's receive loop)."""
        self._inbox.append(batch)

    def pending(self) -> bool:
        """Batches wait to be taken by :meth:`recv`."""
        return bool(self._inbox)

    def recv(self) -> List[ProgressBatch]:
        """The batches delivered since the last call, in arrival order."""
        inbox, self._inbox = self._inbox, []
        return inbox
