"""The worker side of a driver session: the session's commands, run against named handles.

A :class:`HandleService` builds the session's dataflow on one worker and executes the commands
of :mod:`.commands` against the handles it returned (their kinds are the protocols of
:mod:`.handles`). On a backend whose workers live in the driver's process the driver calls it
directly; elsewhere every worker runs :func:`~.serving.serve` as its ``build``, which serves
the driver's commands between steps (see :mod:`.serving`).

Updates arrive in two phases, so that a batch spread over several workers is atomic: ``STAGE``
checks every update and keeps them (answering with the rejected ones), then ``COMMIT`` applies
what was staged and flushes the inputs, or ``DISCARD`` drops it. On a remote worker the reader
thread answers ``STAGE``, ``DISCARD``, ``COMMIT`` and ``ADVANCE`` itself, as soon as the worker
holds the data, and queues the commit and the advance for the worker to apply, in order,
between two steps: a driver's ``flush`` and ``advance_to`` do not wait for a step under way
(at most :data:`~.serving.MAX_BACKLOG` updates are acknowledged ahead of the worker). A failure
to apply what was acknowledged fails the worker.

The command and reply constants are defined in :mod:`.commands` (and found here too).
"""

from __future__ import annotations

import numbers
from collections import deque
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ...differential.column_message import ColumnMessage
from ...errors import StallError, TimelyError
from ...order import less_equal
from ...stats import StatsSink, export_ray_metrics, in_ray_actor
from ..worker import Worker
from .commands import (
    ADVANCE,
    CHANGES,
    CHECKPOINT,
    CLOSE,
    CLOSED_AT,
    COMMIT,
    DISCARD,
    ERROR,
    FAILED,
    FINGERPRINT,
    FLUSH,
    FRONTIER,
    HELLO,
    LOOKUP,
    MARK_RESTORED,
    OK,
    RESTORE,
    RESTORED,
    STAGE,
    STATS,
    UPDATE,
    WAIT,
    Command,
    Rejection,
    Staged,
)
from .handles import (
    Changes,
    Dataflow,
    Input,
    Lookup,
    Probe,
    Retracting,
    find_handle,
    is_kind,
)
from .recovering import RecoveryCommands

__all__ = [
    "HandleService",
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
    "Command",
    "Staged",
    "Rejection",
    "clean_updates",
    "clean_columns",
]


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
        return [h for h in self.handles.values() if is_kind(h, Input)]

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
            if isinstance(records, ColumnMessage):
                reason = message_rejection(handle, records)
                if reason is not None:
                    rejected.append((name, -1, reason))
                staged.append((handle, records, None, None, True))
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
            if isinstance(records, ColumnMessage):
                handle.send_column_message(records)
            elif clean and hasattr(handle, "send_columns"):
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
    retracts = is_kind(handle, Retracting)
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
    if min(diffs) < 0 and not is_kind(handle, Retracting):
        return False
    try:
        deque(map(hash, records), maxlen=0)
    except Exception:  # noqa: BLE001 - rejection() says what is wrong
        return False
    return True


def message_rejection(handle: Any, message: ColumnMessage) -> Optional[str]:
    """Why ``handle`` cannot take the column message (None if it can): an input that takes
    no column messages, a time behind the input's, a declared schema it does not match."""
    if not hasattr(handle, "send_column_message"):
        return f"the input ({type(handle).__name__}) takes no column messages"
    now = getattr(handle, "time", None)
    if len(message) and (type(now) is not int or message.first_time() < now):
        return f"time {message.first_time()} is before the input's time {now!r}"
    check = getattr(handle, "check_message", None)
    return None if check is None else check(message)


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
    if diff < 0 and not is_kind(handle, Retracting):
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
