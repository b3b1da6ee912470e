"""The arrange operator: a batcher holding updates until the frontier passes, and a trace writer.

``arrange_stream`` exchanges updates ``((key, val), time, diff)`` by key. The
:class:`Batcher` keeps them until the input frontier passes their times; then it hands them
over grouped by key and consolidated, the :class:`TraceWriter` seals them into the next batch
of the :class:`~.trace.Spine`, and the batch is sent downstream (as differential-dataflow's
``arrange_core`` with its batcher and ``TraceWriter``).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ..dataflow.capability import CapabilitySet
from ..dataflow.channels import Exchange
from ..dataflow.operator import OperatorCore
from ..dataflow.state import OperatorState, Sealed, future_pieces
from ..dataflow.stream import Stream
from ..errors import RecoveryError, unhashable_error
from ..hashing import stable_hash, stable_hashes
from ..instrument import ArrangementCreated
from ..progress.frontier import Antichain
from . import arrange_columns
from .arrange_columns import ColumnChoice
from .column_message import ColumnMessage, MessageEncoder, key_of_update
from .kernel.consolidation import advance_and_consolidate
from .kernel.grouping import consolidate_groups, group_before, group_not_beyond
from .trace import Batch, BatchData, BatchReader, Spine
from .trace.column_batch import ColumnBatch
from .trace.layout import columns_enabled

if TYPE_CHECKING:
    from ..dataflow.scope import Scope
    from ..order import TimeOrder

__all__ = ["ArrangeOperator", "Batcher", "TraceWriter", "arrange_stream"]

_PENDING = "pending"
"""The tag of a snapshot's piece of updates waiting in the batcher (a trace piece is a pair)."""

Update = Tuple[Tuple[Any, Any], Any, int]
"""``((key, val), time, diff)``."""


class Batcher:
    """Holds updates until a frontier passes their times, then yields them grouped by key.

    Cost: :meth:`seal_before` is O(pending updates) (one pass), plus consolidation of the keys
    that received several updates.
    """

    __slots__ = ("order", "pending")

    def __init__(self, order: Any):
        self.order = order
        self.pending: List[Update] = []

    def push(self, updates: List[Update]) -> None:
        """Hold ``updates`` until :meth:`seal_before` takes them."""
        self.pending.extend(updates)

    def seal_before(self, upper: List[Any]) -> Tuple[BatchData, int]:
        """Remove the pending updates at times not at or beyond ``upper``; return them as
        ``key -> [(val, time, diff)]`` (consolidated) and their number."""
        if self.order.is_total and len(upper) <= 1:
            data, keep = group_before(self.pending, upper[0] if upper else None)
        else:
            data, keep = group_not_beyond(self.pending, _beyond_test(upper, self.order))
        self.pending = keep
        return data, consolidate_groups(data)

    def frontier(self) -> List[Any]:
        """The minimal times of the pending updates."""
        pending = self.pending
        if not pending:
            return []
        if self.order.is_total:
            return [min(u[1] for u in pending)]
        times = Antichain(le=self.order.le)
        for t in dict.fromkeys([upd[1] for upd in pending]):
            times.insert(t)
        return list(times)


def _beyond_test(upper: List[Any], order: "TimeOrder") -> Callable[[Any], bool]:
    """``test(t)``: is ``t`` at or beyond the antichain ``upper``? For ``Product(int, int)``,
    one bisection: sorted by the outer coordinate, an antichain's inner coordinates decrease,
    so the last element at or below ``t``'s outer time has the least inner time of those."""
    if not upper:
        return lambda t: False
    outer = order.outer
    if order.depth == 1 and outer is not None and outer.is_total:
        ordered = sorted(upper)
        outers = [u[0] for u in ordered]
        inners = [u[1] for u in ordered]

        def beyond(t: Any) -> bool:
            k = bisect_right(outers, t[0])
            return k > 0 and inners[k - 1] <= t[1]

        return beyond
    le = order.le
    return lambda t: any(le(u, t) for u in upper)


class TraceWriter:
    """Seals batches into a spine and moves the writer's hold on its compaction.

    A private arrangement (``store=False``: a batcher feeding one reducer that keeps its own
    state) only numbers its batches; storing a trace nobody reads would be wasted work.
    """

    __slots__ = ("spine", "store")

    def __init__(self, spine: Spine, store: bool = True):
        self.spine = spine
        self.store = store

    def write(self, data: BatchData, upper: List[Any], count: int) -> Batch:
        """The next batch, up to ``upper``."""
        return self.spine.new_batch(data, upper, count, store=self.store)

    def write_columns(self, batch: ColumnBatch, upper: List[Any]) -> ColumnBatch:
        """The next batch, up to ``upper``, of updates kept as columns."""
        return self.spine.new_column_batch(batch, upper, store=self.store)

    def advance(self, frontier: List[Any], sealed: bool = False) -> None:
        """The input frontier is now ``frontier``; unless a batch was just ``sealed`` up to it,
        the region up to it holds no updates."""
        spine = self.spine
        if not sealed and frontier != spine.upper:
            spine.seal(frontier)
        spine.advance_writer(frontier)


class ArrangeOperator(OperatorCore):
    """Turns a stream of ``((key, val), time, diff)`` into batches in a trace.

    Holds one capability per minimal pending time; when the input frontier passes a
    capability, the updates it covers are consolidated into a batch, sealed into the spine,
    and sent at that capability.
    """

    def __init__(self, scope: "Scope", name: str, keep_trace: bool = True):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        worker = scope.worker
        self.spine = Spine(self.order, name, instruments=worker.instruments, worker=worker.index)
        self._checkpoint_log: Optional[_CheckpointLog] = None
        self._checkpoint_base = _Base()
        self.batcher = Batcher(self.order)
        self.writer = TraceWriter(self.spine, store=keep_trace)
        if keep_trace and worker.instruments.enabled:
            worker.instruments.emit(
                ArrangementCreated(worker.index, self.subgraph.name, self.index, name, self.spine)
            )
        self._caps = CapabilitySet(self.order.le)
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Hand arrived updates to the batcher; seal batches as the input frontier advances."""
        changed = self._apply_frontiers()
        q = self._queue
        if q:
            consumed = self._consumed.counts  # count-table contract, short form (progress.kernel)
            push = self.batcher.push
            caps = self._caps
            internal = self.shared.internals[0]
            while q:
                time, data = q.popleft()
                consumed[time] = consumed.get(time, 0) + len(data)
                caps.retain(time, internal, 0, self.name)
                push(data)
        if changed:
            try:
                self._seal()
            except TypeError as exc:
                raise unhashable_error(self, (u[0] for u in self.batcher.pending)) from exc
        return False

    def retire(self) -> None:
        """The dataflow completed: the spine drops its batches once no handle reads them."""
        self.spine.retire()

    def snapshot_state(self) -> OperatorState:
        """The trace at a closed time as a *base* and a *log*, each a
        :class:`~timelypy.dataflow.state.Sealed` part (one keyed piece ``(key, updates)`` per
        key, routed as the arrange exchange routes it); ``shared``: the spine's upper and
        since. Times are as the batches hold them; the restore compacts to ``since``.

        The first snapshot is the base: the spine's batches. From then on the operator logs
        the sealed batches that enter the spine, and a snapshot is the same base (a store
        that wrote it references it) and the batches logged since: a checkpoint encodes what
        arrived since the base, not the whole trace (the spine merges batches in place, so
        its own batches change with every merge). Once the log holds as many updates as the
        base, the next snapshot is a new base (amortised: each update is encoded a few times
        at most; a restore reads at most twice the trace).
        Updates waiting in the batcher at future times (a temporal filter's, sent ahead of
        their time) are plain keyed pieces ``("pending", key, [(val, time, diff), ...])``;
        :class:`~timelypy.errors.RecoveryError` if one waits at a time the input frontier has
        passed (the time is not closed). Version 3 (2: before pending updates were kept)."""
        self._as_tuples()
        pending = future_pieces(
            f"{self.subgraph.name}/{self.index} ({self.name!r})",
            "the batcher",
            ((u[0][0], u[1], (u[0][1], u[2])) for u in self.batcher.pending),
            self.input_frontiers[0].less_equal,
        )
        keyed = [
            (stable_hash(key), (_PENDING, key, [(v, t, d) for t, (v, d) in held]))
            for key, _, held in pending
        ]
        spine = self.spine
        log = self._checkpoint_log
        if log is None or log.overflow:
            if log is not None:
                spine.remove_listener(log)
            stored = sum(batch.count for batch in spine.batches)
            log = self._checkpoint_log = _CheckpointLog(max(stored, _MIN_LOG))
            spine.add_listener(log)
            self._checkpoint_base = base = _Base()
        else:
            base = self._checkpoint_base
            log.close_segment()
        logged = [batch for _, batches in log.segments for batch in batches]
        sealed = [Sealed(base, _base_pieces(spine, logged))]
        sealed += [Sealed(token, _segment_pieces(batches)) for token, batches in log.segments]
        return OperatorState(
            keyed=keyed,
            shared={"upper": list(spine.upper), "since": list(spine.since)},
            sealed=sealed,
            version=3,
        )

    def restore_state(self, state: OperatorState) -> None:
        """Rebuild the trace as one sealed batch (lower: the minimum, upper and since: the
        snapshot's) holding the pieces this worker owns; a key with pieces from several
        batches has its updates advanced to ``since`` and consolidated. Readers built with the
        dataflow see it as already delivered: the operators reading the stream of batches
        restore their own state, and a join acknowledges it (``after_restore``). Updates
        pending at future times go back into the batcher, with capabilities at their least
        times (at or after the closed time the dataflow restarts at)."""
        if state.version not in (2, 3):
            raise RecoveryError(
                f"operator {self.subgraph.name}/{self.index} ({self.name!r}): state version "
                f"{state.version}; this timelypy reads versions 2 and 3"
            )
        spine = self.spine
        if spine.batches or spine.seq:
            raise RecoveryError(
                f"operator {self.subgraph.name}/{self.index} ({self.name!r}): restore on an "
                "arrangement that already holds batches (restore before any update)"
            )
        shared = state.shared or {}
        upper = list(shared.get("upper", spine.upper))
        since = list(shared.get("since", upper))
        data: BatchData = {}
        merged: set = set()
        waiting: List[Update] = []
        for _, piece in state.keyed:
            if len(piece) == 3 and piece[0] == _PENDING:
                key = piece[1]
                waiting.extend(((key, v), t, d) for v, t, d in piece[2])
                continue
            key, vals = piece
            held = data.get(key)
            if held is None:
                data[key] = list(vals)  # a snapshot taken in this process may share its lists
            elif key in merged:
                held.extend(vals)
            else:
                merged.add(key)
                held.extend(vals)
        for key in merged:
            kept = advance_and_consolidate(data[key], since, self.order)
            if kept:
                data[key] = kept
            else:
                del data[key]
        spine.seq = 1
        if self.writer.store:
            lower = [self.order.minimum]
            spine.batches.append(Batch(data, lower, upper, 1, since=since))
        spine.upper = upper
        if waiting:
            self.batcher.push(waiting)
            self._hold_restored(self.batcher.frontier())

    def _as_tuples(self) -> None:
        """Have every waiting update in the batcher as a tuple (a snapshot reads them)."""

    def _hold_restored(self, times: List[Any]) -> None:
        """Hold capabilities at ``times`` (restored pending work; none held yet)."""
        internal = self.shared.internals[0]
        for t in times:
            self._caps.retain(t, internal, 0, self.name)

    def _seal(self) -> None:
        """Seal a batch per held capability the input frontier has passed."""
        frontier = list(self.input_frontiers[0].frontier)
        caps = self._caps.caps
        if self.order.is_total and len(caps) == 1:  # the common case, without a call
            cap = caps[0]
            ready = [cap] if not frontier or cap.time < frontier[0] else []
        else:
            ready = self._ready_capabilities(frontier)
        if not ready:
            self.writer.advance(frontier)
            return
        last = len(ready) - 1
        for i, cap in enumerate(ready):
            upper = frontier if i == last else self._upper(frontier, ready[i + 1 :])
            data, count = self.batcher.seal_before(upper)
            batch = self.writer.write(data, upper, count)
            if count:
                self._out.push(cap.time, [batch])
        self._hold(self.batcher.frontier())
        self.writer.advance(frontier, sealed=True)

    def _ready_capabilities(self, frontier: List[Any]) -> List[Any]:
        """The held capabilities the frontier has passed, in time order."""
        caps = self._caps.caps
        beyond = self.input_frontiers[0].less_equal  # t is at or beyond the input frontier
        return sorted((c for c in caps if not beyond(c.time)), key=lambda c: c.time)

    def _upper(self, frontier: List[Any], later: List[Any]) -> List[Any]:
        """The upper frontier of a batch sealed before the ``later`` capabilities."""
        upper = Antichain(frontier, le=self.order.le)
        for cap in later:
            upper.insert(cap.time)
        return list(upper)

    def _hold(self, times: List[Any]) -> None:
        """Hold capabilities at exactly ``times`` (the minimal pending times)."""
        caps = self._caps
        held = caps.caps
        if len(held) == 1 and len(times) == 1:
            if held[0].time != times[0]:
                held[0].downgrade(times[0])
            return
        caps.downgrade(times)


class _TotalArrange(ArrangeOperator):
    """:class:`ArrangeOperator` for totally ordered times: its one capability (at the least
    pending time) is held as a time, without capability objects."""

    def __init__(
        self, scope: "Scope", name: str, keep_trace: bool = True, columns: Optional[bool] = None
    ):
        super().__init__(scope, name, keep_trace)
        self._cap: Any = None
        self._internal = self.shared.internals[0]
        wanted = keep_trace if columns is None else columns
        self.columns = ColumnChoice(enabled=wanted and columns_enabled())
        """Which path the batches take: columns where the updates fit (see
        :class:`~.arrange_columns.ColumnChoice`)."""
        port = self.input_ports[0]
        port.columns = True  # column messages arrive as they are (schedule)
        if self.columns.enabled:  # other processes send lists of 256+ updates as columns
            port.encode = MessageEncoder(self.columns.keeps_columns)

    def schedule(self) -> bool:
        """Hand arrived updates to the batcher; seal a batch when the input frontier passes
        the held time."""
        changed = self._apply_frontiers()
        q = self._queue
        if q:
            consumed = self._consumed.counts  # count-table contract, short form (progress.kernel)
            push = self.batcher.push
            while q:
                time, data = q.popleft()
                consumed[time] = consumed.get(time, 0) + len(data)
                cap = self._cap
                if cap is None:  # the common case, inline: hold a capability at ``time``
                    internal = self._internal.counts
                    c = internal.get(time, 0) + 1
                    if c:
                        internal[time] = c
                    else:
                        del internal[time]
                    self._cap = time
                elif time < cap:
                    self._move_cap(time)
                if type(data) is ColumnMessage:
                    self.columns.take_message(self.batcher, data)
                else:
                    push(data)
            if self.columns.absorbing and len(self.batcher.pending) >= arrange_columns.ENCODE_CHUNK:
                self.columns.absorb(self.batcher)
        if changed:
            try:
                self._seal()
            except TypeError as exc:
                raise unhashable_error(self, (u[0] for u in self.batcher.pending)) from exc
        return False

    def _as_tuples(self) -> None:
        self.columns.release(self.batcher)

    def _hold_restored(self, times: List[Any]) -> None:
        if times and self._cap is None:
            self._move_cap(times[0])

    def _move_cap(self, time: Any) -> None:
        """Hold the capability at ``time`` (None: hold none) instead of the held one."""
        internal = self._internal
        if time is not None:
            internal.update(time, 1)
        if self._cap is not None:
            internal.update(self._cap, -1)
        self._cap = time

    def _seal(self) -> None:
        """Seal the updates before the input frontier into a batch sent at the held time."""
        frontier = list(self.input_frontiers[0].frontier)
        cap = self._cap
        if cap is None or (frontier and not cap < frontier[0]):
            self.writer.advance(frontier)
            return
        batcher = self.batcher
        sealed = self.columns.seal(batcher, frontier[0] if frontier else None)
        if sealed is not None:
            columns, waiting = sealed
            batch: BatchReader = self.writer.write_columns(columns, frontier)
            count = batch.count
        else:
            data, keep = group_before(batcher.pending, frontier[0] if frontier else None)
            batcher.pending = keep
            count = consolidate_groups(data)
            batch = self.writer.write(data, frontier, count)
            waiting = min(u[1] for u in keep) if keep else None
        if count:
            self._out.push(cap, [batch])
        if waiting is not None:
            self._move_cap(waiting)
        else:  # the common case: everything sealed, release the capability
            internal = self._internal.counts
            c = internal.get(cap, 0) - 1
            if c:
                internal[cap] = c
            else:
                del internal[cap]
            self._cap = None
        self.writer.spine.advance_writer(frontier)


def _as_keys(data: List[Tuple[Any, Any, int]]) -> List[Update]:
    return [((d, ()), t, r) for d, t, r in data]


def arrange_stream(
    updates: Stream,
    scope: "Scope",
    name: str,
    by_self: bool = False,
    keep_trace: bool = True,
    columns: Optional[bool] = None,
) -> Tuple[Stream, Spine]:
    """Arrange a stream of ``((key, val), time, diff)`` (of ``(data, time, diff)`` when
    ``by_self``: keys with the value ``()``): returns the stream of batches and the spine.

    ``keep_trace=False`` makes a batcher only, for an arrangement private to an operator that
    keeps its own state (reduce, count, distinct, threshold on a collection). ``columns``: may
    the batches be column batches where the updates fit (totally ordered times only; unless
    ``TIMELYPY_COLUMNS=off``)? By default when the trace is kept (its readers are the join and
    the trace's other readers, which read columns or decode them); an operator reading a
    private arrangement's batches passes True if it reads columns.
    """
    if by_self:
        updates = updates.map_batch(_as_keys, name="AsKeys")
    if scope.order.is_total:
        op: ArrangeOperator = _TotalArrange(scope, name, keep_trace, columns)
    else:
        op = ArrangeOperator(scope, name, keep_trace)
    updates.connect_to(op, 0, Exchange(key_of_update))
    return Stream(scope, op.output_ports[0]), op.spine


_MIN_LOG = 4096


class _Base:
    """The token of a snapshot's base: its identity names what a store wrote for it."""

    __slots__ = ("__weakref__",)


class _CheckpointLog:
    """A spine listener: the sealed batches inserted since the snapshot base, in segments (the
    batches between two snapshots, each a sealed part of its own: a store writes it once, in
    a few chunks), until they hold ``limit`` updates (then it forgets them, and the next
    snapshot is a new base)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.segments: List[Tuple[_Base, List[BatchReader]]] = []
        self.pending: List[BatchReader] = []
        self.count = 0
        self.overflow = False

    def notify(self, batch: BatchReader) -> None:
        if self.overflow or not batch.count:
            return
        self.pending.append(batch)
        self.count += batch.count
        if self.count > self.limit:
            self.segments, self.pending = [], []
            self.overflow = True

    def close_segment(self) -> None:
        """The batches since the last snapshot become a segment."""
        if self.pending:
            self.segments.append((_Base(), self.pending))
            self.pending = []

    def notify_upper(self, upper: List[Any]) -> None:
        pass


def _segment_pieces(batches: List[BatchReader]) -> Callable[[], List[Tuple[int, Any]]]:
    """The keyed pieces of a log segment (a key may have a piece per batch)."""

    def pieces() -> List[Tuple[int, Any]]:
        out: List[Tuple[int, Any]] = []
        for batch in batches:
            out += _batch_pieces(batch)()
        return out

    return pieces


def _base_pieces(spine: Spine, logged: List[BatchReader]) -> Callable[[], List[Tuple[int, Any]]]:
    """The pieces of the base: the spine's batches, less the batches logged since the base
    (their updates with negated diffs), so that base and log together are the trace. Asked
    for once per base by a store that keeps what it wrote, and again only by one that lost
    it (another process, a chunk deleted)."""

    def pieces() -> List[Tuple[int, Any]]:
        out: List[Tuple[int, Any]] = []
        for batch in spine.batches:
            out += _batch_pieces(batch)()
        for batch in logged:
            negated = [(key, [(v, t, -r) for v, t, r in vals]) for key, vals in batch.items()]
            out += zip(stable_hashes([key for key, _ in negated]), negated)
        return out

    return pieces


def _batch_pieces(batch: BatchReader) -> Callable[[], List[Tuple[int, Any]]]:
    """The keyed pieces of a sealed batch, made when asked (a store that wrote the batch
    before does not ask)."""

    def pieces() -> List[Tuple[int, Any]]:
        keys = list(batch.keys())
        return list(zip(stable_hashes(keys), batch.items()))

    return pieces
