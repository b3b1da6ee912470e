"""The inline transport: mailboxes between workers of one process, and the turn baton.

Messages move by reference (no serialisation). With the baton on, only one worker thread runs
at a time and passes the turn to the next one at every ``flush()``: the interleaving, and so
every output, is deterministic.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, List, Tuple

__all__ = ["InlineFabric", "InlineEndpoint", "Aborted"]


class Aborted(BaseException):
    """Unwinds a worker thread when another worker failed or the run timed out."""


class InlineFabric:
    """Mailboxes and the turn baton shared by the workers of one inline run."""

    def __init__(self, peers: int, baton: bool = True) -> None:
        self.peers = peers
        self.baton = baton
        self.mailboxes: List[deque] = [deque() for _ in range(peers)]
        self._cond = threading.Condition()
        self._turn = 0
        self._alive = [True] * peers
        self.aborted = False

    def endpoint(self, index: int) -> "InlineEndpoint":
        """Worker ``index``'s endpoint on this fabric."""
        return InlineEndpoint(self, index)

    def wait_turn(self, index: int) -> None:
        """Block until worker ``index`` holds the turn; :class:`Aborted` if the run aborts."""
        with self._cond:
            while self._turn != index and not self.aborted:
                self._cond.wait(timeout=1.0)
            if self.aborted:
                raise Aborted()

    def pass_turn(self, index: int) -> None:
        """Hand the turn to the next live worker and block until it comes back to ``index``;
        :class:`Aborted` if the run aborts."""
        with self._cond:
            self._advance(index)
            self._cond.notify_all()
            while self._turn != index and not self.aborted:
                self._cond.wait(timeout=1.0)
            if self.aborted:
                raise Aborted()

    def _advance(self, index: int) -> None:
        n = self.peers
        for k in range(1, n + 1):
            j = (index + k) % n
            if self._alive[j]:
                self._turn = j
                return

    def retire(self, index: int) -> None:
        """Worker ``index`` has finished: the turn skips it from now on (and moves on if it
        holds it)."""
        with self._cond:
            self._alive[index] = False
            if self._turn == index:
                self._advance(index)
            self._cond.notify_all()

    def abort(self) -> None:
        """Make every worker waiting for its turn, now or later, raise :class:`Aborted`."""
        with self._cond:
            self.aborted = True
            self._cond.notify_all()


class InlineEndpoint:
    """One worker's view of an :class:`InlineFabric`."""

    __slots__ = ("fabric", "index", "peers", "_mailbox")

    def __init__(self, fabric: InlineFabric, index: int) -> None:
        self.fabric = fabric
        self.index = index
        self.peers = fabric.peers
        self._mailbox = fabric.mailboxes[index]

    def send(self, dest: int, message: Any) -> None:
        """Append ``message`` (by reference) to worker ``dest``'s mailbox. O(1)."""
        self.fabric.mailboxes[dest].append((self.index, message))

    def broadcast(self, message: Any) -> None:
        """Append ``message`` to every mailbox, this worker's included. O(peers)."""
        for box in self.fabric.mailboxes:
            box.append((self.index, message))

    def send_to_peers(self, message: Any) -> None:
        """Append ``message`` to every other worker's mailbox. O(peers)."""
        index = self.index
        for j, box in enumerate(self.fabric.mailboxes):
            if j != index:
                box.append((index, message))

    def recv_nowait(self) -> List[Tuple[int, Any]]:
        """Take every ``(source, message)`` waiting in this worker's mailbox, in arrival order."""
        box = self._mailbox
        out = []
        while box:
            out.append(box.popleft())
        return out

    def flush(self) -> None:
        """End of a worker step: pass the turn to the next worker when the baton is on."""
        if self.fabric.baton:
            self.fabric.pass_turn(self.index)

    def wait(self, timeout: float) -> bool:
        """Pass the turn (baton on), then say whether messages are waiting. Never sleeps on
        ``timeout``: with the baton off it returns at once."""
        if self.fabric.baton:
            self.fabric.pass_turn(self.index)
        return bool(self._mailbox)
