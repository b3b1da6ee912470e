"""Ports, pushers and pacts: how messages move along dataflow edges.

A message is ``(time, data)`` where ``data`` is a list of records. Lists are shared between the
consumers of one output and must not be mutated by operators.

* :class:`Pipeline` keeps records on the worker that produced them.
* :class:`Exchange` routes each record to worker ``stable_hash(key_fn(record)) % peers``. On one
  worker it is the identity, but it is still a distinct channel so that data and progress are
  counted per channel and the multi-worker fabric only adds transport.
"""

from __future__ import annotations

from collections import deque
from itertools import compress
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Sequence

from ..communication.fabric import DATA, Fabric
from ..communication.wire import encode
from ..errors import DataEncodingError, OperatorError, UnhashableDataError
from ..hashing import owners, stable_hash
from ..instrument import BatchProduced, ChannelSent, Instruments
from ..progress.change_batch import ChangeBatch

if TYPE_CHECKING:
    from ..progress.subgraph import Subgraph

__all__ = [
    "ColumnarData",
    "Pipeline",
    "Exchange",
    "InputPort",
    "OutputPort",
    "IngressPort",
    "EgressPort",
]


class ColumnarData:
    """A message's records held as columns rather than a list (the differential layer's
    column messages): it travels along edges as one object, and every consumer that does not
    read columns (:attr:`InputPort.columns`) receives its records as a list, decoded once
    where it is pushed. ``len`` is the number of records (what progress counts).

    Example: a subclass holding one column ``[1, 2]`` decodes to ``[1, 2]``; an
    :class:`InputPort` whose operator reads lists queues ``[1, 2]``."""

    __slots__ = ()

    def __len__(self) -> int:
        raise NotImplementedError

    def records(self) -> List[Any]:
        """The records, as the list a consumer reading lists receives."""
        raise NotImplementedError

    def route(self, key_fn: Callable[[Any], Any], peers: int) -> Optional[List[Any]]:
        """The parts owned by each of ``peers`` workers (``stable_hash(key_fn(record)) %
        peers``; a part is None or empty when nothing is owned), or None when this message
        cannot compute ``key_fn`` column-wise (its records are then routed one by one)."""
        return None


class Pipeline:
    """Pact: records stay on this worker.

    Example: ``stream.unary(factory, tp.Pipeline())``: no exchange between workers."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "Pipeline()"


class Exchange:
    """Pact: route each record to worker ``stable_hash(key_fn(record)) % peers``.

    ``key_fn`` must return a value :func:`~timelypy.hashing.stable_hash` accepts (ints,
    strings, bytes, floats, None, bools, tuples and Products of those, and the record types of
    the guide: frozen dataclasses, named tuples, Enums, dates and times, Decimals, UUIDs). The
    hash is the same in every process.

    Example: ``stream.unary(factory, tp.Exchange(lambda kv: kv[0]))`` gathers each key on one
    worker.
    """

    __slots__ = ("key_fn",)

    def __init__(self, key_fn: Callable[[Any], Any]):
        self.key_fn = key_fn

    def __repr__(self) -> str:
        return f"Exchange({getattr(self.key_fn, '__name__', self.key_fn)!r})"


class InputPort:
    """An operator input: a FIFO of messages; pushing activates the operator.

    ``columns``: the operator reads :class:`ColumnarData` messages as they are; otherwise
    (the default) such a message is queued as the list of its records. ``encode`` (None: do
    not): how an exchange may encode a list of :data:`COLUMNWISE_MIN` or more records it
    routes here as columns (returns None when they do not fit)."""

    __slots__ = ("queue", "subgraph", "node", "columns", "encode", "_activations", "_nested")

    def __init__(self, subgraph: "Subgraph", node: int):
        self.queue: deque = deque()
        self.subgraph = subgraph
        self.node = node
        self.columns = False
        self.encode: Optional[Callable[[List[Any]], Optional[ColumnarData]]] = None
        self._activations = subgraph.activations
        self._nested = subgraph.parent is not None

    def push(self, time: Any, data: List[Any]) -> None:
        """Queue one message and activate the operator. O(1)."""
        self.queue.append((time, data))
        self._activations[self.node] = True
        if self._nested:
            self.subgraph.wake()

    def push_columns(self, time: Any, data: ColumnarData) -> None:
        """Queue a column message: as it is if the operator reads columns, else its records."""
        queued: Any = data if self.columns else data.records()
        self.push(time, queued)


class OutputPort:
    """An operator output: counts produced records and hands messages to every pusher."""

    __slots__ = ("pushers", "produced", "node", "port", "counted", "instruments")

    def __init__(
        self,
        node: int,
        port: int,
        produced: Optional[ChangeBatch],
        counted: bool = True,
        instruments: Optional[Instruments] = None,
    ):
        self.pushers: List[Any] = []
        self.produced: ChangeBatch = produced if produced is not None else ChangeBatch()
        """Where the records this port pushes are counted (when ``counted``; a port that
        does not count them, on a scope's boundary, has a batch nobody reads)."""
        self.node = node
        self.port = port
        self.counted = counted
        self.instruments = instruments if instruments is not None else Instruments()

    def push(self, time: Any, data: List[Any]) -> None:
        """Count ``data`` as produced at ``time`` and hand it to every pusher (not copied)."""
        if not data:
            return
        if self.counted:
            counts = self.produced.counts  # count-table contract, full form (progress.kernel)
            c = counts.get(time, 0) + len(data)
            if c:
                counts[time] = c
            else:
                del counts[time]
        if self.instruments.enabled:
            self.instruments.emit(
                BatchProduced(self.instruments.worker, self.node, self.port, time, len(data))
            )
        for p in self.pushers:
            p.push(time, data)

    def carry_columns(self) -> None:
        """Let this port push :class:`ColumnarData` messages too: each pusher that takes
        them (``push_columns``: an input port, an exchange) gets the message, every other
        its records. Lists cost what they cost before (only the ports of inputs that send
        column messages check what they push)."""
        if type(self) is OutputPort:
            self.__class__ = _ColumnsOutputPort


class _ColumnsOutputPort(OutputPort):
    """An :class:`OutputPort` that may push :class:`ColumnarData` messages."""

    __slots__ = ()

    def push(self, time: Any, data: Any) -> None:
        if type(data) is list or not isinstance(data, ColumnarData):
            OutputPort.push(self, time, data)
            return
        n = len(data)
        if not n:
            return
        if self.counted:
            counts = self.produced.counts  # count-table contract, full form (progress.kernel)
            c = counts.get(time, 0) + n
            if c:
                counts[time] = c
            else:
                del counts[time]
        if self.instruments.enabled:
            self.instruments.emit(
                BatchProduced(self.instruments.worker, self.node, self.port, time, n)
            )
        for p in self.pushers:
            push_columns = getattr(p, "push_columns", None)
            if push_columns is not None:
                push_columns(time, data)
            else:
                p.push(time, data.records())


class IngressPort:
    """Target of a parent edge into a nested scope: re-times messages to the inner time,
    counts them for the scope's harvest, and forwards them to the inner consumers."""

    __slots__ = ("subgraph", "input", "inner_port")

    def __init__(self, subgraph: "Subgraph", input_index: int, inner_port: OutputPort):
        self.subgraph = subgraph
        self.input = input_index
        self.inner_port = inner_port

    def push(self, time: Any, data: List[Any]) -> None:
        """Forward a message entering the scope, at the inner time."""
        sg = self.subgraph
        t = sg.to_inner(time)
        sg.ingress_counts[self.input].update(t, len(data))
        for p in self.inner_port.pushers:
            p.push(t, data)
        sg.wake()


class EgressPort:
    """Target of an inner edge out of a nested scope: re-times messages to the outer time and
    forwards them to the consumers of the scope's output (counted by the scope's report)."""

    __slots__ = ("subgraph", "outer_port")

    def __init__(self, subgraph: "Subgraph", outer_port: OutputPort):
        self.subgraph = subgraph
        self.outer_port = outer_port

    def push(self, time: Any, data: List[Any]) -> None:
        """Forward a message leaving the scope, at the outer time."""
        t = self.subgraph.to_outer(time)
        for p in self.outer_port.pushers:
            p.push(t, data)


class ExchangePusher:
    """Partitions each message by key hash; the local part is pushed directly, the rest goes
    through the fabric as one message per destination worker."""

    __slots__ = ("target", "key_fn", "peers", "index", "fabric", "channel", "instruments", "name")

    def __init__(
        self,
        target: Any,
        key_fn: Callable,
        peers: int,
        index: int,
        fabric: Fabric,
        channel: int,
        instruments: Optional[Instruments] = None,
        name: str = "operator",
    ):
        self.name = name
        """The consuming operator's name, for error messages."""
        self.target = target
        self.key_fn = key_fn
        self.peers = peers
        self.index = index
        self.fabric = fabric
        self.channel = channel
        self.instruments = instruments if instruments is not None else Instruments(index)

    def push(self, time: Any, data: List[Any]) -> None:
        """Split ``data`` by owner; push this worker's part, send the others'. O(len(data)).
        A message of :data:`COLUMNWISE_MIN` records or more for a consumer that reads columns
        (its port's ``encode``) is encoded once and routed on its columns."""
        if len(data) >= COLUMNWISE_MIN:
            encode = getattr(self.target, "encode", None)
            if encode is not None:
                message = encode(data)
                if message is not None and self._send_routed(time, message):
                    return
        try:
            parts = self._split(data)
        except Exception as exc:
            raise self._routing_error(exc, data) from exc
        index = self.index
        if self.instruments.enabled:
            self._emit_sent(time, parts)
        for dest, part in enumerate(parts):
            if part:
                if dest == index:
                    self.target.push(time, part)
                else:
                    try:
                        self.fabric.send(dest, (DATA, self.channel, time, part))
                    except (TypeError, ValueError, OverflowError) as exc:
                        raise self._encoding_error(exc, dest, part) from exc

    def push_columns(self, time: Any, data: ColumnarData) -> None:
        """Route a column message on its columns when it can compute the key function
        (each part stays columns if the consumer reads them, else its records), or else
        as the list of its records."""
        if not self._send_routed(time, data):
            self.push(time, data.records())

    def _send_routed(self, time: Any, data: ColumnarData) -> bool:
        """Push and send the parts of ``data`` routed on its columns; False (nothing done)
        when it cannot compute the key function."""
        try:
            routed = data.route(self.key_fn, self.peers)
        except Exception as exc:
            raise self._routing_error(exc, data.records()) from exc
        if routed is None:
            return False
        parts = [part if part is not None and len(part) else [] for part in routed]
        if self.instruments.enabled:
            self._emit_sent(time, parts)
        reads = getattr(self.target, "columns", False)
        for dest, part in enumerate(parts):
            if not len(part):
                continue
            if not reads:
                part = part.records()
            if dest == self.index:
                self.target.push(time, part)
            else:
                self.fabric.send(dest, (DATA, self.channel, time, part))
        return True

    def _split(self, data: List[Any]) -> List[List[Any]]:
        """``data``'s records by owner, each part in the order of ``data``. A message of
        :data:`COLUMNWISE_MIN` records or more takes its keys first and routes them with
        :func:`~timelypy.hashing.owners`, column-wise with numpy when the keys are ints or
        tuples of ints (the same owners as record by record, split in C)."""
        peers = self.peers
        key_fn = self.key_fn
        if len(data) < COLUMNWISE_MIN or peers == 1:
            parts: List[List[Any]] = [[] for _ in range(peers)]
            for record in data:
                parts[stable_hash(key_fn(record)) % peers].append(record)
            return parts
        dest = owners(list(map(key_fn, data)), peers)
        if type(dest) is list:  # hashed one key at a time
            parts = [[] for _ in range(peers)]
            appends = [part.append for part in parts]
            for d, record in zip(dest, data):
                appends[d](record)
            return parts
        return _split_by(data, dest, peers)

    def _routing_error(self, exc: Exception, data: List[Any]) -> Exception:
        """Name the operator, the worker and the first record whose key cannot be routed."""
        where = f"exchange into operator {self.name!r} on worker {self.index}"
        for record in data:
            try:
                key = self.key_fn(record)
            except Exception as inner:
                return OperatorError(
                    f"{where}: the key function raised "
                    f"{type(inner).__name__}: {inner} on record {record!r}",
                    operator=self.name,
                    worker=self.index,
                )
            try:
                stable_hash(key)
            except UnhashableDataError as inner:
                return UnhashableDataError(f"{where}: {inner} (record {record!r})")
        return OperatorError(
            f"{where}: {type(exc).__name__}: {exc}", operator=self.name, worker=self.index
        )

    def _encoding_error(self, exc: Exception, dest: int, part: List[Any]) -> Exception:
        """Name the operator, the workers and the first record that cannot be serialised."""
        culprit: Any = None
        for record in part:
            try:
                encode(record)
            except Exception:
                culprit = record
                break
        what = (
            f"a record of type {type(culprit).__name__}"
            if culprit is not None
            else f"a batch of {len(part)} records"
        )
        return DataEncodingError(
            f"exchange into operator {self.name!r}: worker {self.index} cannot send {what} to "
            f"worker {dest} ({type(exc).__name__}: {exc}); records that cross workers must be "
            f"serialisable (no locks, sockets, open files or self-referencing structures)"
        )

    def _emit_sent(self, time: Any, parts: List[List[Any]]) -> None:
        instruments = self.instruments
        for dest, part in enumerate(parts):
            if part:
                instruments.emit(ChannelSent(self.index, self.channel, dest, time, len(part)))


COLUMNWISE_MIN = 256
"""Messages of at least this many records are routed column-wise (see
:meth:`ExchangePusher.push`); below it the per-record loop costs less than numpy's calls."""


def _split_by(data: Sequence[Any], dest: Any, peers: int) -> List[List[Any]]:
    """``data`` split by ``dest`` (a numpy array of owners, one per record), each part in
    order: a C pass per part for few workers, else one stable sort of the owners."""
    if peers <= 4:
        return [list(compress(data, (dest == d).tolist())) for d in range(peers)]
    order = dest.argsort(kind="stable")
    bounds = dest[order].searchsorted(list(range(peers + 1))).tolist()
    ranked = itemgetter(*order.tolist())(data)  # len(data) >= 2: a tuple
    return [list(ranked[bounds[d] : bounds[d + 1]]) for d in range(peers)]
