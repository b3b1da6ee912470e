"""The worker side of a driver session: the session's commands, run against named handles.

A :class:`HandleService` builds the session's dataflow on one worker and executes the commands
below against the handles it returned (their kinds are the protocols of :mod:`.handles`). On a
backend whose workers live in the driver's process the driver calls it directly; elsewhere every
worker runs :func:`serve` as its ``build``: it connects back to the driver, and a reader thread
puts each command into the worker's own inbox as a control message
(:func:`~timelypy.communication.fabric.control_message`), which also wakes a worker idling in
``fabric.wait()``. The worker's loop takes commands from ``worker.control`` between steps.

Commands are tuples whose first item is one of the constants below; replies to the driver are
``(reply, worker index, command id, value)`` with ``reply`` one of ``HELLO``, ``OK``, ``ERROR``.
"""

from __future__ import annotations

import threading
import traceback
from multiprocessing.connection import Client, Connection
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..communication.fabric import control_message
from ..errors import TimelyError
from .handles import Changes, Input, Lookup, Probe, find_handle
from .worker import Worker

__all__ = ["HandleService", "serve", "UPDATE", "ADVANCE", "FLUSH", "CHANGES", "LOOKUP",
           "FRONTIER", "WAIT", "CLOSE", "HELLO", "OK", "ERROR", "Command"]

Command = Tuple[Any, ...]
"""``(kind, *arguments)``; ``kind`` is one of the command constants."""

UPDATE = "update"
"""``(UPDATE, input, [(data, time, diff), ...])``: send updates into one input."""
ADVANCE = "advance"
"""``(ADVANCE, input or None, time)``: advance one input (None: every open input) and flush."""
FLUSH = "flush"
"""``(FLUSH,)``: flush every open input."""
CHANGES = "changes"
"""``(CHANGES, capture)``: what the capture recorded since the last ``CHANGES``."""
LOOKUP = "lookup"
"""``(LOOKUP, arrangement, key)``: ``{value: count}`` of ``key``."""
FRONTIER = "frontier"
"""``(FRONTIER, probe)``: the probe's frontier."""
WAIT = "wait"
"""``(WAIT, probe, time)``: answered once the probe has passed every time before ``time``."""
CLOSE = "close"
"""``(CLOSE,)``: close the inputs; the worker then runs its dataflows to completion."""

HELLO = "hello"
"""Reply kind: the worker built the dataflow and serves commands."""
OK = "ok"
"""Reply kind: the command's result."""
ERROR = "error"
"""Reply kind: the command (or the worker) failed; the value is the traceback text."""


class HandleService:
    """Builds a session's dataflow on one worker and runs commands against its handles."""

    def __init__(self, worker: Worker, dataflow: Callable[[Any], Dict[str, Any]]) -> None:
        self.worker = worker
        handles = worker.dataflow(dataflow)
        if not isinstance(handles, dict):
            raise TimelyError("open_session: the dataflow function must return a dict of named "
                              "handles (inputs, probes, captures, arrangements)")
        self.handles: Dict[str, Any] = handles
        self._read: Dict[str, int] = {}
        self._commands: Dict[str, Callable[..., Any]] = {
            UPDATE: self.update, ADVANCE: self.advance, FLUSH: self.flush,
            CHANGES: self.changes, LOOKUP: self.lookup, FRONTIER: self.frontier,
        }

    def handle(self, command: Command) -> Any:
        """Run one command (any but ``WAIT`` and ``CLOSE``, which the caller's loop owns)."""
        method = self._commands.get(command[0])
        if method is None:
            raise TimelyError(f"session: unknown command {command[0]!r}")
        return method(*command[1:])

    def inputs(self) -> List[Any]:
        """Every input handle of the dataflow."""
        return [h for h in self.handles.values() if isinstance(h, Input)]

    def update(self, name: str, updates: List[Tuple[Any, Any, int]]) -> None:
        """Send ``(data, time, diff)`` updates into the input ``name``."""
        find_handle(self.handles, name, Input).send_updates(updates)

    def advance(self, name: Optional[str], time: Any) -> None:
        """Advance the input ``name`` (None: every open input) to ``time`` and flush it."""
        targets = self.inputs() if name is None else [find_handle(self.handles, name, Input)]
        for h in targets:
            if not h.closed:
                h.advance_to(time)
                h.flush()

    def flush(self) -> None:
        """Flush every open input."""
        for h in self.inputs():
            if not h.closed:
                h.flush()

    def changes(self, name: str) -> List[Any]:
        """What the capture ``name`` recorded since the last call."""
        items, self._read[name] = find_handle(self.handles, name, Changes).changes_from(
            self._read.get(name, 0))
        return items

    def lookup(self, name: str, key: Any) -> Dict[Any, int]:
        """``{value: count}`` of ``key`` in the arrangement ``name``."""
        return find_handle(self.handles, name, Lookup).lookup(key)

    def frontier(self, name: str) -> List[Any]:
        """The frontier of the probe ``name``."""
        return find_handle(self.handles, name, Probe).frontier

    def probe_passed(self, name: str, time: Any) -> bool:
        """The probe ``name`` has passed every time before ``time``."""
        return not find_handle(self.handles, name, Probe).less_than(time)


# ------------------------------------------------------------------------------------------
# a worker serving a remote driver


def serve(address: Tuple[str, int], authkey: bytes,
          dataflow: Callable[[Any], Dict[str, Any]]) -> Callable[[Worker], Any]:
    """The ``build`` each remote worker runs: serve the driver at ``address`` until CLOSE."""

    def build(worker: Worker) -> Any:
        conn = Client(address, authkey=authkey)
        try:
            service = HandleService(worker, dataflow)
        except BaseException:
            conn.send((ERROR, worker.index, None, traceback.format_exc()))
            raise
        conn.send((HELLO, worker.index, None, None))
        threading.Thread(target=_forward_commands, args=(conn, worker),
                         name="timelypy-session-commands", daemon=True).start()
        _command_loop(conn, service)
        return None

    return build


def _forward_commands(conn: Connection, worker: Worker) -> None:
    """Put every ``(id, command)`` from the driver into the worker's inbox; a lost connection
    counts as ``CLOSE``."""
    fabric = worker.fabric
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            item = (None, (CLOSE,))
        if fabric is None:  # a worker without peers: nothing to wake, append directly
            worker.control.append(item)
        else:
            fabric.send(worker.index, control_message(item))
        if item[1][0] == CLOSE:
            return


def _command_loop(conn: Connection, service: HandleService) -> None:
    """Step the worker, running commands between steps, until the driver says CLOSE."""
    worker = service.worker
    index = worker.index
    waiting: Optional[Tuple[Any, str, Any]] = None  # (id, probe, time) of a pending WAIT
    while True:
        while worker.control:
            msg_id, command = worker.control.pop(0)
            if command[0] == CLOSE:
                worker.close_inputs()
                if msg_id is not None:
                    conn.send((OK, index, msg_id, None))
                return
            try:
                if command[0] == WAIT:
                    service.probe_passed(command[1], command[2])  # a bad name fails here
                    waiting = (msg_id, command[1], command[2])
                else:
                    conn.send((OK, index, msg_id, service.handle(command)))
            except Exception:
                conn.send((ERROR, index, msg_id, traceback.format_exc()))
        if waiting is not None and service.probe_passed(waiting[1], waiting[2]):
            conn.send((OK, index, waiting[0], None))
            waiting = None
            continue
        try:
            worker.step()
        except Exception:
            conn.send((ERROR, index, waiting[0] if waiting else None, traceback.format_exc()))
            raise
