"""A remote worker serving its driver: the command loop of ``processes`` and ``ray`` workers.

On a backend whose workers run in other processes, every worker runs :func:`serve` as its
``build``: it connects back to the driver (an authenticated handshake, :mod:`.rendezvous`),
builds the session's dataflow in a :class:`~.service.HandleService`, reports its handles, and
serves commands until ``CLOSE``. A reader thread takes each command from the connection: it
answers ``STAGE``, ``DISCARD``, ``COMMIT`` and ``ADVANCE`` itself, as soon as the worker holds
the data, and puts everything else (and what is to be applied) into the worker's own inbox as
a control message (:func:`~timelypy.communication.fabric.control_message`), which also wakes a
worker idling in ``fabric.wait()``. The worker's loop runs those between two steps, and answers
``WAIT`` and ``CLOSED_AT`` once their condition holds.
"""

from __future__ import annotations

import os
import threading
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional, Tuple

from ...communication.fabric import control_message
from ...errors import WorkerDiedError
from ..worker import Worker
from .commands import (
    ADVANCE,
    CLOSE,
    CLOSED_AT,
    COMMIT,
    DISCARD,
    ERROR,
    FAILED,
    HELLO,
    OK,
    STAGE,
    WAIT,
    Command,
)
from .handles import Dataflow, Input, describe_handles, find_handle
from .rendezvous import connect_to_driver
from .service import HandleService

__all__ = ["serve", "MAX_BACKLOG", "error_value", "error_parts"]


MAX_BACKLOG = 1_000_000
"""Updates a worker may hold acknowledged but not yet applied (its dataflow busy in a step);
beyond, the acknowledgement of the next ``COMMIT`` waits until the worker caught up: the flow
control of a driver that loads faster than its workers compute."""

APPLY = "apply"
"""``(APPLY, staged)``: internal to a worker; apply a committed batch between steps."""


class _Link:
    """The worker's connection to the driver, shared by its two threads (one send at a time)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def send(self, message: Any) -> None:
        """Send ``message``; raises if it cannot be pickled or the driver is gone."""
        with self._lock:
            self.conn.send(message)

    def reply(self, message: Any) -> None:
        """Send ``message``; a driver that went away is not this worker's error."""
        try:
            self.send(message)
        except (OSError, EOFError):
            pass


class _Backlog:
    """Updates acknowledged to the driver and not yet applied by the worker (see
    :data:`MAX_BACKLOG`)."""

    def __init__(self) -> None:
        self.size = 0
        self.closed = False
        self._cond = threading.Condition()

    def add(self, n: int) -> None:
        """``n`` more updates wait for the worker."""
        with self._cond:
            self.size += n

    def applied(self, n: int) -> None:
        """The worker applied ``n`` of them."""
        with self._cond:
            self.size -= n
            self._cond.notify_all()

    def wait_below(self, limit: int) -> None:
        """Block until at most ``limit`` updates wait (or the worker stops serving)."""
        with self._cond:
            while self.size > limit and not self.closed:
                self._cond.wait(0.1)

    def close(self) -> None:
        """The worker stopped serving: nobody waits any more."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()


def serve(
    address: Tuple[str, int],
    authkey: bytes,
    dataflow: Dataflow,
    connect_timeout: float = 30.0,
) -> Callable[[Worker], Any]:
    """The ``build`` each remote worker runs: serve the driver at ``address`` until CLOSE."""

    def build(worker: Worker) -> Any:
        conn = connect_to_driver(address, authkey, worker.index, connect_timeout)
        try:
            service = HandleService(worker, dataflow)
            hello = {"pid": os.getpid(), "handles": describe_handles(service.handles)}
        except BaseException:
            conn.send((ERROR, worker.index, None, traceback.format_exc()))
            raise
        link = _Link(conn)
        backlog = _Backlog()
        link.send((HELLO, worker.index, None, hello))
        threading.Thread(
            target=_forward_commands,
            args=(link, service, backlog),
            name="timelypy-session-commands",
            daemon=True,
        ).start()
        try:
            _command_loop(link, service, backlog)
        finally:
            backlog.close()
        return None

    return build


def _forward_commands(link: _Link, service: HandleService, backlog: _Backlog) -> None:
    """Take every ``(id, command)`` from the driver: answer the loading commands at once, so
    that the driver's ``flush`` and ``advance_to`` return once this worker holds the data
    (bounded by :data:`MAX_BACKLOG`), not once a step under way ends; put the rest (and what is
    to be applied) into the worker's inbox. A lost connection counts as ``CLOSE``."""
    worker = service.worker
    fabric = worker.fabric
    index = worker.index
    while True:
        try:
            item = link.conn.recv()
        except (EOFError, OSError):
            item = (None, (CLOSE,))
        msg_id, command = item
        kind = command[0]
        if kind in (STAGE, DISCARD, COMMIT, ADVANCE):
            try:
                if kind == STAGE:  # checks against the inputs' times (read; never ahead)
                    result: Any = service.stage(command[1])
                elif kind == DISCARD:
                    service.discard()
                    result = None
                elif kind == COMMIT:
                    staged, service._staged = service._staged, []
                    size = sum(len(records) for _, records, _, _, _ in staged)
                    backlog.wait_below(MAX_BACKLOG)
                    backlog.add(size)
                    item = (None, (APPLY, staged, size))
                    result = None
                else:  # applied in order between steps; the driver checked the time
                    if command[1] is not None:
                        find_handle(service.handles, command[1], Input)  # a bad name fails now
                    item = (None, command)
                    result = None
            except Exception:  # the command failed; the dataflow is intact
                link.reply((FAILED, index, msg_id, traceback.format_exc()))
                continue
            if kind in (COMMIT, ADVANCE):
                _deliver(worker, fabric, item)
            link.reply((OK, index, msg_id, result))
            continue
        _deliver(worker, fabric, item)
        if kind == CLOSE:
            return


def _deliver(worker: Worker, fabric: Any, item: Any) -> None:
    """Put ``item`` into the worker's inbox (which wakes a worker idling in ``fabric.wait``)."""
    if fabric is None:  # a worker without peers: nothing to wake, append directly
        worker.control.append(item)
    else:
        fabric.send(worker.index, control_message(item))


def _command_loop(link: _Link, service: HandleService, backlog: _Backlog) -> None:
    """Step the worker, running commands between steps, until the driver says CLOSE.
    Commands the driver was answered already (``APPLY``, ``ADVANCE`` without an id) must not
    fail: if one does, the worker fails (the driver learns of it at its next call)."""
    worker = service.worker
    index = worker.index
    waiting: Optional[Tuple[Any, Command]] = None  # (id, command) of a pending WAIT/CLOSED_AT
    while True:
        while worker.control:
            msg_id, command = worker.control.pop(0)
            if command[0] == CLOSE:
                worker.close_inputs()
                if msg_id is not None:
                    link.reply((OK, index, msg_id, None))
                return
            if msg_id is None and command[0] in (APPLY, ADVANCE):
                try:
                    if command[0] == APPLY:
                        service.apply(command[1])
                    else:
                        service.advance(command[1], command[2])
                except Exception as exc:
                    link.reply(
                        (ERROR, index, None, error_value(index, exc, traceback.format_exc()))
                    )
                    raise
                finally:
                    if command[0] == APPLY:
                        backlog.applied(command[2])
                continue
            try:
                if command[0] == WAIT:
                    service.check_wait(command[1], command[2])  # a bad name fails here too
                    waiting = (msg_id, command)
                elif command[0] == CLOSED_AT:
                    waiting = (msg_id, command)
                else:
                    result = service.handle(command)
            except Exception:  # the command failed; the dataflow is intact
                # (before OSError: timeouts and stalls are TimeoutErrors, so OSErrors too)
                link.reply((FAILED, index, msg_id, traceback.format_exc()))
                continue
            try:
                if command[0] not in (WAIT, CLOSED_AT):
                    link.send((OK, index, msg_id, result))
            except (OSError, EOFError):
                return  # the driver is gone: the reader thread queues a CLOSE as well
            except Exception:  # the command failed; the dataflow is intact
                link.reply((FAILED, index, msg_id, traceback.format_exc()))
        if waiting is not None and service.settled(waiting[1]):
            link.reply((OK, index, waiting[0], None))
            waiting = None
            continue
        try:
            worker.step()
        except Exception as exc:
            link.reply(
                (
                    ERROR,
                    index,
                    waiting[0] if waiting else None,
                    error_value(index, exc, traceback.format_exc()),
                )
            )
            raise


def error_value(index: int, exc: BaseException, text: str) -> Any:
    """The value of worker ``index``'s ``ERROR`` reply for ``exc``: its traceback ``text``, or
    ``(text, peer)`` when ``exc`` only says that *another* worker, ``peer``, died (a secondary
    report: the driver then waits a moment for the root cause; see :func:`error_parts`)."""
    if isinstance(exc, WorkerDiedError) and exc.worker is not None and exc.worker != index:
        return (text, exc.worker)
    return text


def error_parts(value: Any) -> Tuple[str, Optional[int]]:
    """``(traceback text, dead peer or None)`` of an ``ERROR`` reply's value."""
    if isinstance(value, tuple) and len(value) == 2:
        return str(value[0]), value[1]
    return str(value), None
