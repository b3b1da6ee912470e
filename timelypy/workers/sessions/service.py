"""The worker side of a driver session: the session's commands, run against named handles.

A :class:`HandleService` builds the session's dataflow on one worker and executes the commands
below against the handles it returned (their kinds are the protocols of :mod:`.handles`). On a
backend whose workers live in the driver's process the driver calls it directly; elsewhere every
worker runs :func:`serve` as its ``build``: it connects back to the driver (an authenticated
handshake, :mod:`.rendezvous`), reports its handles, and a reader thread puts each command into the
worker's own inbox as a control message
(:func:`~timelypy.communication.fabric.control_message`), which also wakes a worker idling in
``fabric.wait()``. The worker's loop takes commands from ``worker.control`` between steps.

Updates arrive in two phases, so that a batch spread over several workers is atomic: ``STAGE``
checks every update and keeps them (answering with the rejected ones), then ``COMMIT`` applies
what was staged and flushes the inputs, or ``DISCARD`` drops it. On a remote worker the reader
thread answers ``STAGE``, ``DISCARD``, ``COMMIT`` and ``ADVANCE`` itself, as soon as the worker
holds the data, and queues the commit and the advance for the worker to apply, in order,
between two steps: a driver's ``flush`` and ``advance_to`` do not wait for a step under way
(at most :data:`MAX_BACKLOG` updates are acknowledged ahead of the worker). A failure to apply
what was acknowledged fails the worker.

Commands are tuples whose first item is one of the constants below; replies to the driver are
``(reply, worker index, command id, value)`` with ``reply`` one of ``HELLO``, ``OK``, ``FAILED``
(the command failed; the worker and its dataflow are intact) and ``ERROR`` (the worker failed).
"""

from __future__ import annotations

import numbers
import os
import threading
import traceback
from collections import deque
from multiprocessing.connection import Connection
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ...communication.fabric import control_message
from ...errors import StallError, TimelyError, WorkerDiedError
from ...order import less_equal
from ...stats import StatsSink, export_ray_metrics, in_ray_actor
from ..worker import Worker
from .handles import (
    Changes,
    Dataflow,
    Input,
    Lookup,
    Probe,
    Retracting,
    describe_handles,
    find_handle,
)
from .recovering import RecoveryCommands
from .rendezvous import connect_to_driver

__all__ = [
    "HandleService",
    "serve",
    "UPDATE",
    "STAGE",
    "COMMIT",
    "DISCARD",
    "ADVANCE",
    "FLUSH",
    "CHANGES",
    "LOOKUP",
    "FRONTIER",
    "STATS",
    "WAIT",
    "CLOSE",
    "CLOSED_AT",
    "CHECKPOINT",
    "FINGERPRINT",
    "RESTORE",
    "RESTORED",
    "MARK_RESTORED",
    "HELLO",
    "OK",
    "FAILED",
    "ERROR",
    "MAX_BACKLOG",
    "Command",
    "Staged",
    "Rejection",
    "clean_updates",
    "clean_columns",
    "error_value",
    "error_parts",
]

Command = Tuple[Any, ...]
"""``(kind, *arguments)``; ``kind`` is one of the command constants."""

UPDATE = "update"
"""``(UPDATE, input, [(data, time, diff), ...])``: check, then send updates into one input."""
STAGE = "stage"
"""``(STAGE, [(input, [(data, time, diff), ...]), ...])``: check and keep updates; the reply is
the list of rejected ones, ``[(input, position, reason), ...]`` (empty: all staged)."""
COMMIT = "commit"
"""``(COMMIT,)``: apply what was staged, then flush every open input."""
DISCARD = "discard"
"""``(DISCARD,)``: drop what was staged."""
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
STATS = "stats"
"""``(STATS,)``: this worker's operator statistics (:meth:`timelypy.stats.StatsSink.snapshot`);
fails unless the session collects statistics."""
WAIT = "wait"
"""``(WAIT, probe, time)``: answered once the probe has passed every time before ``time``."""
CLOSE = "close"
"""``(CLOSE,)``: close the inputs; the worker then runs its dataflows to completion."""
CLOSED_AT = "closed_at"
"""``(CLOSED_AT, time)``: answered once no operator can still receive or hold work before
``time`` (:func:`~timelypy.recovery.snapshot.closed_at`): a checkpoint at ``time`` is exact."""
CHECKPOINT = "checkpoint"
"""``(CHECKPOINT, checkpoints, checkpoint_id, time)``: write this worker's part of a checkpoint
to the store (from this process); the reply is the part's description."""
FINGERPRINT = "fingerprint"
"""``(FINGERPRINT,)``: the program's shape, ``{operator id: description}``."""
RESTORE = "restore"
"""``(RESTORE, checkpoints, manifest)``: read the checkpoint from the store and restore this
worker's operators (before any update); the inputs end at the checkpoint's time."""
MARK_RESTORED = "mark_restored"
"""``(MARK_RESTORED,)``: after a restore, once closed at its time: keep what every capture holds
(the restored state) apart from the changes that follow."""
RESTORED = "restored"
"""``(RESTORED, capture)``: what the capture held when the session was restored (its state at
the checkpoint's time), which ``CHANGES`` does not return."""

HELLO = "hello"
"""Reply kind: the worker built the dataflow and serves commands."""
OK = "ok"
"""Reply kind: the command's result."""
FAILED = "failed"
"""Reply kind: the command failed, the worker serves on; the value is the traceback text."""
ERROR = "error"
"""Reply kind: the worker failed (its dataflow is broken); the value is the traceback text."""

Staged = List[Tuple[str, List[Any], List[Any], List[int]]]
"""``[(input, records, times, diffs), ...]`` (columns): a worker's part of a session batch."""
Rejection = Tuple[str, int, str]
"""``(input, position in that input's updates, reason)``."""


class HandleService(RecoveryCommands):
    """Builds a session's dataflow on one worker and runs commands against its handles."""

    def __init__(self, worker: Worker, dataflow: Dataflow) -> None:
        self.worker = worker
        worker.pace_inputs = False  # the service steps it between commands
        handles = worker.dataflow(dataflow)
        if not isinstance(handles, dict):
            raise TimelyError(
                "open_session: the dataflow function must return a dict of named "
                "handles (inputs, probes, captures, arrangements)"
            )
        self.handles: Dict[str, Any] = handles
        self._read: Dict[str, int] = {}
        self._restored: Dict[str, List[Any]] = {}
        self._staged: List[Tuple[Any, Any, Any, Any, bool]] = []
        self._commands: Dict[str, Callable[..., Any]] = {
            UPDATE: self.update,
            STAGE: self.stage,
            COMMIT: self.commit,
            DISCARD: self.discard,
            ADVANCE: self.advance,
            FLUSH: self.flush,
            CHANGES: self.changes,
            LOOKUP: self.lookup,
            FRONTIER: self.frontier,
            STATS: self.stats,
            CHECKPOINT: self.checkpoint,
            FINGERPRINT: self.fingerprint,
            RESTORE: self.restore,
            RESTORED: self.restored,
            MARK_RESTORED: self.mark_restored,
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
        """Send ``(data, time, diff)`` updates into the input ``name``: all of them, or (if one
        is rejected) none, with :class:`~timelypy.errors.TimelyError` naming it."""
        handle = find_handle(self.handles, name, Input)
        for position, update in enumerate(() if clean_updates(handle, updates) else updates):
            reason = rejection(handle, update)
            if reason is not None:
                raise TimelyError(
                    f"session: worker {self.worker.index} rejected update "
                    f"{position} of input {name!r}: {reason}"
                )
        handle.send_updates(updates)

    def stage(self, parts: Staged) -> List[Rejection]:
        """Check every update of ``parts`` and keep them for :meth:`commit`; returns the rejected
        ones (none staged then)."""
        rejected: List[Rejection] = []
        staged: List[Tuple[Any, Any, Any, Any, bool]] = []
        for name, records, times, diffs in parts:
            try:
                handle = find_handle(self.handles, name, Input)
            except TimelyError as exc:
                rejected.append((name, -1, str(exc)))
                continue
            clean = clean_columns(handle, records, times, diffs)
            if not clean:
                for position, update in enumerate(zip(records, times, diffs)):
                    reason = rejection(handle, update)
                    if reason is not None:
                        rejected.append((name, position, reason))
            staged.append((handle, records, times, diffs, clean))
        self._staged = [] if rejected else staged
        return rejected

    def commit(self) -> None:
        """Apply the staged updates, then flush every open input."""
        staged, self._staged = self._staged, []
        self.apply(staged)

    def apply(self, staged: List[Tuple[Any, Any, Any, Any, bool]]) -> None:
        """Apply updates :meth:`stage` kept, then flush every open input."""
        for handle, records, times, diffs, clean in staged:
            if clean and hasattr(handle, "send_columns"):
                handle.send_columns(records, times, diffs)
            else:
                handle.send_updates(zip(records, times, diffs))
        self.flush()

    def discard(self) -> None:
        """Drop the staged updates."""
        self._staged = []

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
            self._read.get(name, 0)
        )
        return items

    def lookup(self, name: str, key: Any) -> Dict[Any, int]:
        """``{value: count}`` of ``key`` in the arrangement ``name``."""
        return find_handle(self.handles, name, Lookup).lookup(key)

    def frontier(self, name: str) -> List[Any]:
        """The frontier of the probe ``name``."""
        return find_handle(self.handles, name, Probe).frontier

    def stats(self) -> Dict[str, Any]:
        """This worker's operator statistics (plain data); exported as Ray metrics too when
        the worker is a Ray actor. :class:`~timelypy.errors.TimelyError` if the session does not
        collect statistics."""
        for sink in self.worker.instruments.sinks:
            if isinstance(sink, StatsSink):
                snapshot = sink.snapshot()
                if in_ray_actor():
                    export_ray_metrics(snapshot)
                return snapshot
        raise TimelyError(
            "session: statistics are off; open the session with open_session(..., statistics=True)"
        )

    def settled(self, command: Command) -> bool:
        """The condition a ``WAIT`` or ``CLOSED_AT`` waits for holds."""
        if command[0] == WAIT:
            return self.probe_passed(command[1], command[2])
        return self.closed_at(command[1])

    def probe_passed(self, name: str, time: Any) -> bool:
        """The probe ``name`` has passed every time before ``time``."""
        return not find_handle(self.handles, name, Probe).less_than(time)

    def check_wait(self, name: str, time: Any) -> None:
        """Raise :class:`~timelypy.errors.StallError` if inputs of this worker hold the probe
        ``name`` before ``time``: in a session only the driver advances inputs, and it is
        waiting, so the wait could never finish."""
        probe = find_handle(self.handles, name, Probe)
        if not probe.less_than(time):
            return
        holders = self.worker.inputs_holding(probe, time)
        if holders:
            raise StallError(
                f"worker {self.worker.index}: probe {name!r} cannot pass {time!r}: inputs hold "
                f"it back: {', '.join(holders)}. Call advance_to({time!r}) (it flushes) before "
                f"waiting for {time!r}."
            )


def clean_updates(handle: Any, updates: Sequence[Any]) -> bool:
    """True if every update is a ``(data, time, diff)`` of hashable data with int time and diff
    that :func:`rejection` would accept (the common case, checked without building messages)."""
    now = getattr(handle, "time", None)
    if type(now) is not int:
        return False
    retracts = isinstance(handle, Retracting)
    try:
        for data, time, diff in updates:
            if (
                type(time) is not int
                or time < now
                or type(diff) is not int
                or (diff < 0 and not retracts)
            ):
                return False
            hash(data)
    except Exception:  # noqa: BLE001 - rejection() says what is wrong
        return False
    return True


def clean_columns(
    handle: Any, records: Sequence[Any], times: Sequence[Any], diffs: Sequence[int]
) -> bool:
    """:func:`clean_updates` of updates given as columns, checked a column at a time: int
    times at or after the input's, non-zero int diffs (positive unless the input retracts),
    hashable records."""
    now = getattr(handle, "time", None)
    if type(now) is not int or not records:
        return type(now) is int
    if set(map(type, times)) != {int} or min(times) < now:
        return False
    if set(map(type, diffs)) != {int} or 0 in diffs:
        return False
    if min(diffs) < 0 and not isinstance(handle, Retracting):
        return False
    try:
        deque(map(hash, records), maxlen=0)
    except Exception:  # noqa: BLE001 - rejection() says what is wrong
        return False
    return True


def rejection(handle: Any, update: Any) -> Optional[str]:
    """Why ``handle`` cannot take ``update`` (a ``(data, time, diff)`` triple); None if it can."""
    try:
        data, time, diff = update
    except (TypeError, ValueError):
        return f"{update!r} is not a (data, time, diff) triple"
    try:
        hash(data)
    except Exception as exc:  # noqa: BLE001 - any failure of __hash__
        return f"record of type {type(data).__name__} is not hashable ({exc})"
    if not isinstance(diff, numbers.Integral) or isinstance(diff, bool):
        return f"diff {diff!r} of type {type(diff).__name__} is not an integer"
    if diff < 0 and not isinstance(handle, Retracting):
        return (
            f"diff {diff} retracts a record, but the input is a {type(handle).__name__}, "
            f"which takes positive counts only"
        )
    now = getattr(handle, "time", None)
    try:
        behind = now is not None and not less_equal(now, time)
    except Exception:  # noqa: BLE001 - incomparable types
        return f"time {time!r} of type {type(time).__name__} cannot be compared with {now!r}"
    if behind:
        return f"time {time!r} is before the input's time {now!r}"
    return None


# ------------------------------------------------------------------------------------------
# a worker serving a remote driver


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
