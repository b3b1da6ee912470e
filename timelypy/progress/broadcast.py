"""The progress broadcaster: moves one subgraph's progress batches between all workers.

As timely's ``progress/broadcast.rs``: every worker sends its batch of pointstamp changes to every
worker (itself included), so each worker's tracker sees the same changes in the same order per
sender and derives the same frontiers. The transport is not known here: the worker hands the
broadcaster a ``broadcast(batch)`` function and delivers what arrives into :meth:`Progcaster.deliver`.
"""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

__all__ = ["Progcaster", "ProgressBatch"]

ProgressBatch = List[Tuple[Tuple[Any, Any], int]]
"""``[((location, time), delta), ...]``: one worker's progress changes for one subgraph."""


class Progcaster:
    """Broadcasts one subgraph's progress batches to every worker, this one included.

    ``send(batch)`` hands ``batch`` to ``broadcast``; batches from every worker arrive through
    :meth:`deliver` and are taken by :meth:`recv`, FIFO per sender. Cost: O(1) per call.
    """

    __slots__ = ("channel", "_broadcast", "_inbox")

    def __init__(self, channel: int, broadcast: Callable[[ProgressBatch], None]) -> None:
        self.channel = channel
        self._broadcast = broadcast
        self._inbox: List[ProgressBatch] = []

    def send(self, batch: ProgressBatch) -> None:
        """Broadcast this worker's batch (it comes back to this worker too)."""
        self._broadcast(batch)

    def deliver(self, batch: ProgressBatch) -> None:
        """A batch arrived from some worker (called by the worker's receive loop)."""
        self._inbox.append(batch)

    def recv(self) -> List[ProgressBatch]:
        """The batches delivered since the last call, in arrival order."""
        inbox, self._inbox = self._inbox, []
        return inbox
