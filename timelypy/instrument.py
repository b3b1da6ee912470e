"""Instruments: typed events from the engine's hot paths, delivered to registered sinks.

In the spirit of timely's logging (typed events to a logger per worker) and trio's
``Instrument`` hooks. Every worker owns one :class:`Instruments` hub; the engine's hooks check
``hub.enabled`` (one attribute test) and build an event only when a sink listens, so a worker
without sinks pays one ``if`` per hook.

>>> from timelypy.instrument import EventLog, OperatorFinished
>>> log = EventLog(kinds=(OperatorFinished,))
>>> # inside build(worker): worker.instruments.add(log); ... later: log.events

A sink is any callable taking one event. Sinks run on the worker's thread (or, for
:class:`LinkBytes`, at the end of the worker's step), so a sink that is shared between inline
workers must be thread-safe; :class:`EventLog` is. Sinks must not raise: an exception from a
sink propagates into the worker like a user error.

This module imports nothing from the rest of the package: every layer may emit events.
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any, Callable, Deque, Iterable, List, NamedTuple, Optional, Tuple, Type

__all__ = [
    "Instruments",
    "Sink",
    "EventLog",
    "LoggingSink",
    "OperatorScheduled",
    "OperatorFinished",
    "BatchProduced",
    "ChannelSent",
    "ChannelReceived",
    "LinkBytes",
    "SpineMerged",
    "FrontierChanged",
    "ArrangementCreated",
    "EVENT_TYPES",
]


class OperatorScheduled(NamedTuple):
    """An operator is about to run. ``scope`` is its scope's name, ``operator`` its index."""

    worker: int
    scope: str
    operator: int
    name: str


class OperatorFinished(NamedTuple):
    """An operator ran for ``elapsed`` seconds (``time.perf_counter`` clock).

    ``records_in`` / ``records_out`` are the records it reported consumed (all inputs) and
    produced (all outputs) to progress tracking since it last ran (an input operator's produced
    records include those its handle flushed in between); ``batches_in`` is the number of
    messages it took from its input queues during this run."""

    worker: int
    scope: str
    operator: int
    name: str
    elapsed: float
    records_in: int = 0
    records_out: int = 0
    batches_in: int = 0


class BatchProduced(NamedTuple):
    """An operator output sent a batch of ``records`` records at ``time``."""

    worker: int
    operator: int
    port: int
    time: Any
    records: int


class ChannelSent(NamedTuple):
    """An exchange channel sent ``records`` records at ``time`` to worker ``target``."""

    worker: int
    channel: int
    target: int
    time: Any
    records: int


class ChannelReceived(NamedTuple):
    """An exchange channel received ``records`` records at ``time`` from worker ``source``."""

    worker: int
    channel: int
    source: int
    time: Any
    records: int


class LinkBytes(NamedTuple):
    """Bytes and frames moved on the fabric link to ``peer`` since the previous event."""

    worker: int
    peer: int
    bytes_sent: int
    bytes_received: int
    frames_sent: int
    frames_received: int


class SpineMerged(NamedTuple):
    """A trace merged two batches of ``sizes`` updates into one of ``result`` updates;
    afterwards it holds ``batches`` batches and ``updates`` updates in all."""

    worker: int
    trace: str
    sizes: Tuple[int, int]
    result: int
    batches: int
    updates: int


class FrontierChanged(NamedTuple):
    """The frontier at input ``port`` of operator ``operator`` changed by ``changes``
    (``[(time, delta), ...]`` of the frontier, not of pointstamp counts)."""

    worker: int
    scope: str
    operator: int
    port: int
    changes: Tuple[Tuple[Any, int], ...]


class ArrangementCreated(NamedTuple):
    """An arrange operator created the trace ``trace`` (emitted once, when it is built, if a
    sink listens). ``trace`` is the live trace object (``stored_updates()``, ``batches``,
    ``keys()``, ``since``): a sink that wants sizes reads them when it is asked, never on the
    hot path."""

    worker: int
    scope: str
    operator: int
    name: str
    trace: Any


class PathCounted(NamedTuple):
    """An operator that reads batches on the column path or the object path (the join, a
    reduce) was built (emitted once, if a sink listens). ``counters`` is the live operator,
    whose ``column_batches`` and ``object_batches`` a sink reads when it is asked."""

    worker: int
    scope: str
    operator: int
    name: str
    counters: Any


EVENT_TYPES: Tuple[type, ...] = (
    OperatorScheduled,
    OperatorFinished,
    BatchProduced,
    ChannelSent,
    ChannelReceived,
    LinkBytes,
    SpineMerged,
    FrontierChanged,
    ArrangementCreated,
    PathCounted,
)
"""Every event type the engine emits."""

Sink = Callable[[Any], None]
"""A sink: called with each event."""


class Instruments:
    """One worker's hub of sinks. ``enabled`` is True while at least one sink is registered.

    Cost: :meth:`emit` is O(number of sinks); hooks test ``enabled`` first, so a hub without
    sinks costs one attribute test per hook.
    """

    __slots__ = ("worker", "enabled", "_sinks")

    def __init__(self, worker: int = 0) -> None:
        self.worker = worker
        self.enabled = False
        self._sinks: List[Sink] = []

    def add(self, sink: Sink) -> Sink:
        """Register ``sink`` (a callable taking one event); returns it."""
        if not callable(sink):
            raise TypeError(
                f"worker {self.worker}: an instrument sink must be callable, got {sink!r}"
            )
        self._sinks.append(sink)
        self.enabled = True
        return sink

    def remove(self, sink: Sink) -> None:
        """Unregister ``sink`` (a no-op if it is not registered)."""
        if sink in self._sinks:
            self._sinks.remove(sink)
        self.enabled = bool(self._sinks)

    @property
    def sinks(self) -> Tuple[Sink, ...]:
        """The registered sinks, in registration order."""
        return tuple(self._sinks)

    def emit(self, event: Any) -> None:
        """Deliver ``event`` to every sink, in registration order."""
        for sink in self._sinks:
            sink(event)


class EventLog:
    """A thread-safe sink that keeps the most recent ``limit`` events of the given ``kinds``
    (all kinds when None). ``events`` is a list copy; :meth:`of` filters by type."""

    def __init__(self, kinds: Optional[Iterable[Type[Any]]] = None, limit: int = 100_000) -> None:
        if limit < 1:
            raise ValueError(f"EventLog: limit must be >= 1, got {limit}")
        self.kinds = tuple(kinds) if kinds is not None else None
        self._events: Deque[Any] = collections.deque(maxlen=limit)
        self._lock = threading.Lock()
        self.dropped = 0
        """Events pushed out of the bounded buffer."""

    def __call__(self, event: Any) -> None:
        if self.kinds is not None and not isinstance(event, self.kinds):
            return
        with self._lock:
            if len(self._events) == self._events.maxlen:
                self.dropped += 1
            self._events.append(event)

    @property
    def events(self) -> List[Any]:
        """A copy of the kept events, oldest first."""
        with self._lock:
            return list(self._events)

    def of(self, kind: Type[Any]) -> List[Any]:
        """The kept events of type ``kind``."""
        return [e for e in self.events if isinstance(e, kind)]

    def clear(self) -> None:
        """Forget the kept events (``dropped`` keeps its count)."""
        with self._lock:
            self._events.clear()


class LoggingSink:
    """A sink that writes each event to a :mod:`logging` logger (``timelypy.events`` at DEBUG
    by default)."""

    def __init__(self, logger: Optional[logging.Logger] = None, level: int = logging.DEBUG) -> None:
        self.logger = logger or logging.getLogger("timelypy.events")
        self.level = level

    def __call__(self, event: Any) -> None:
        if self.logger.isEnabledFor(self.level):
            self.logger.log(self.level, "%r", event)
