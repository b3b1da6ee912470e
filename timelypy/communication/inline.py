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

    def __init__(self, peers: int, baton: bool = True):
        self.peers = peers
        self.baton = baton
        self.mailboxes: List[deque] = [deque() for _ in range(peers)]
        self._cond = threading.Condition()
        self._turn = 0
        self._alive = [True] * peers
        self.aborted = False

    def endpoint(self, index: int) -> "InlineEndpoint":
        return InlineEndpoint(self, index)

    def wait_turn(self, index: int) -> None:
        with self._cond:
            while self._turn != index and not self.aborted:
                self._cond.wait(timeout=1.0)
            if self.aborted:
                raise Aborted()

    def pass_turn(self, index: int) -> None:
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
        with self._cond:
            self._alive[index] = False
            if self._turn == index:
                self._advance(index)
            self._cond.notify_all()

    def abort(self) -> None:
        with self._cond:
            self.aborted = True
            self._cond.notify_all()


class InlineEndpoint:
    """One worker's view of an :class:`InlineFabric`."""

    __slots__ = ("fabric", "index", "peers", "_mailbox")

    def __init__(self, fabric: InlineFabric, index: int):
        self.fabric = fabric
        self.index = index
        self.peers = fabric.peers
        self._mailbox = fabric.mailboxes[index]

    def send(self, dest: int, message: Any) -> None:
        self.fabric.mailboxes[dest].append((self.index, message))

    def broadcast(self, message: Any) -> None:
        for box in self.fabric.mailboxes:
            box.append((self.index, message))

    def recv_nowait(self) -> List[Tuple[int, Any]]:
        box = self._mailbox
        out = []
        while box:
            out.append(box.popleft())
        return out

    def flush(self) -> None:
        if self.fabric.baton:
            self.fabric.pass_turn(self.index)

    def wait(self, timeout: float) -> bool:
        if self.fabric.baton:
            self.fabric.pass_turn(self.index)
        return bool(self._mailbox)
