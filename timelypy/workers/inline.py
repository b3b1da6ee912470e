"""The inline backend: several workers in one process, stepped in a fixed round-robin order.

Each worker runs the user's ``build`` in its own thread, but only one thread runs at a time: a
worker passes the turn to the next one at the end of every ``step()``. The interleaving, and so
every output, is deterministic. Messages move between workers by reference (no serialisation).
"""

from __future__ import annotations

import threading
import time as _time
from collections import deque
from typing import Any, Callable, List, Optional, Tuple

from ..errors import (WaitTimeoutError, WorkerError, describe_exception,
                      format_exception_safely)
from .execute import run_worker
from .worker import Worker

__all__ = ["InlineFabric", "run_inline"]


class _Aborted(BaseException):
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
                raise _Aborted()

    def pass_turn(self, index: int) -> None:
        with self._cond:
            self._advance(index)
            self._cond.notify_all()
            while self._turn != index and not self.aborted:
                self._cond.wait(timeout=1.0)
            if self.aborted:
                raise _Aborted()

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


def run_inline(build: Callable[[Worker], Any], peers: int, timeout: Optional[float] = None) -> List[Any]:
    """Run ``build`` on ``peers`` inline workers; return their results in index order.

    The first worker error is re-raised as :class:`~timelypy.errors.WorkerError` naming the
    worker, with the original exception as its cause and its traceback in the message.
    """
    fabric = InlineFabric(peers)
    results: List[Any] = [None] * peers
    errors: List[Optional[Tuple[BaseException, str]]] = [None] * peers

    def body(i: int) -> None:
        try:
            fabric.wait_turn(i)
            results[i] = run_worker(Worker(i, peers, fabric.endpoint(i)), build)
        except _Aborted:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported to the caller
            errors[i] = (exc, format_exception_safely(exc))
            fabric.abort()
        finally:
            fabric.retire(i)

    threads = [threading.Thread(target=body, args=(i,), name=f"timelypy-worker-{i}", daemon=True)
               for i in range(peers)]
    for t in threads:
        t.start()
    deadline = None if timeout is None else _time.monotonic() + timeout
    for t in threads:
        remaining = None if deadline is None else max(0.0, deadline - _time.monotonic())
        t.join(remaining)
        if t.is_alive():
            fabric.abort()
            for u in threads:
                u.join(5.0)
            raise WaitTimeoutError(f"inline run with {peers} workers did not finish within "
                                   f"{timeout} s")
    for i, err in enumerate(errors):
        if err is not None:
            exc, tb = err
            raise WorkerError(f"worker {i} failed: {type(exc).__name__}: "
                              f"{describe_exception(exc)}\n{tb}",
                              worker=i, traceback_text=tb) from exc
    return results
