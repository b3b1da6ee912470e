"""The spine: one arrangement's batches, merged geometrically and compacted for its readers.

A :class:`Spine` is the list of batches of one arrangement on one worker. Batches tile time
(each one's ``lower`` is the previous one's ``upper``). A batch is merged into its predecessor
while it is at least half its size, or at once into a predecessor the spine has already merged
into (a :class:`~.builder.BatchBuilder` it updates in place; sealed batches never change), once
every reader has seen both. Merging advances times to the readers' common *since*
frontier (logical compaction) and consolidates, so under steady churn the stored update count
stays proportional to the live data, not to the history.

Readers (see :mod:`timelypy.differential.agent`) hold the spine back in two ways, as the
trace handles of differential-dataflow (``TraceBox`` and ``TraceRc``): a logical hold (a
frontier in :meth:`Spine.hold_since`; the spine compacts only up to the meet of all holds) and a
physical hold (a registered reader's ``through_seq``: batches it has not seen are never merged
away from it).
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterable,
    List,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    Union,
)

from ...instrument import SpineMerged
from ...progress.frontier import MutableAntichain
from ..kernel.consolidation import accumulate
from ..kernel.merge import compact_keys, compact_total, merge_consolidating, merge_product
from .batch import Batch, BatchData, BatchReader, Vals
from .builder import BatchBuilder
from .column_batch import (
    ColumnBatch,
    as_column_run,
    column_bytes,
    compact_columns,
    distinct_keys,
    merge_columns,
)
from .cursor import Cursor
from .holds import LeastHold
from .lifecycle import MAINTAINED, SpineState, check_transition

if TYPE_CHECKING:
    from ...instrument import Instruments
    from ...order import TimeOrder

__all__ = ["Listener", "Reader", "Spine"]

_INF = float("inf")
_COMPACTION_THRESHOLD = 1024
"""Stored updates below which no full compaction pass runs."""
_COLUMNS_COMPACTION = 8
"""Column spines compact once an eighth of what they store arrived (objects: a half): a pass is
one linear sort, and a join reads less uncancelled history (W1 10^6: 15% fewer outputs)."""
_OWNED_RATIO = 16
"""A new run of batches merges into a predecessor the spine has merged into (a builder it
updates in place) when that predecessor holds at most this many times the run's updates (else
only at half its size)."""


class Reader(Protocol):
    """A physical hold on a spine (a trace agent): the batches after ``through_seq`` are the
    ones it has not seen yet, which are never merged away from it."""

    through_seq: float


class Listener(Protocol):
    """Told of every new batch and of every region sealed without updates (an import)."""

    def notify(self, batch: BatchReader) -> None:
        """A new batch."""

    def notify_upper(self, upper: List[Any]) -> None:
        """A new upper frontier over a region without updates."""


class Spine:
    """The batches of one arrangement on one worker, with geometric merging and compaction.

    ``instruments`` (a worker's :class:`~timelypy.instrument.Instruments`, or None) receives a
    :class:`~timelypy.instrument.SpineMerged` event per merge when a sink listens.

    Its life is one :class:`~.lifecycle.SpineState` (:attr:`state`), moved only along the
    legal transitions of :mod:`.lifecycle`.

    Costs: :meth:`insert` is amortised O(batch size) plus the merge work it triggers; merging a
    batch into a builder costs O(size of the newer batch) (in place), so each update is copied
    O(1) times after its first merge. A full compaction pass runs when the stored count doubles
    since the last one.
    """

    def __init__(
        self,
        order: "TimeOrder",
        name: str = "trace",
        instruments: "Optional[Instruments]" = None,
        worker: int = 0,
    ):
        self.order = order
        self.name = name
        self.instruments = instruments
        self.worker = worker
        self.batches: List[BatchReader] = []
        """Sealed :class:`~.batch.Batch` es and the spine's own builders, in time order."""
        self.seq = 0
        self.upper: List[Any] = [order.minimum]
        self._minimum = [order.minimum]
        self._since: Union[LeastHold, MutableAntichain] = (
            LeastHold() if order.is_total else MutableAntichain(order.le)
        )
        self._since.update_iter([(order.minimum, 1)])  # the writer's own hold, see `advance_writer`
        self._writer_since: List[Any] = [order.minimum]
        self.readers: List[Reader] = []
        self.listeners: List[Listener] = []
        self._inserted = 0
        self._force_compaction = False
        self._pins = 0
        self.state = SpineState.LIVE
        """Where the spine is in its life (see :mod:`.lifecycle`)."""
        self.dropped_sizes: Optional[Dict[str, Optional[int]]] = None
        """Updates, batches and keys when dropped (kept only when instruments listen)."""
        self.sealed_paths = [0, 0]
        """Batches made on the object path and as columns (the statistics name the path)."""
        self.private = False
        """Made by an operator for its own use (``Collection.join`` arranging its inputs): no
        :class:`~timelypy.differential.collection.Arranged` was handed out, so its readers are
        all the readers it will ever have (see :attr:`abandoned`). A declaration of its maker,
        not a state."""

    # ------------------------------------------------------------------ lifecycle
    @property
    def retired(self) -> bool:
        """The dataflow that writes the spine completed (see :meth:`retire`)."""
        return self.state is SpineState.RETIRED or self.state is SpineState.DROPPED

    @property
    def dropped(self) -> bool:
        """The batches were dropped (retired, or abandoned, and no reader was left)."""
        return self.state.dropped

    @property
    def abandoned(self) -> bool:
        """Private, and its last reader closed while its dataflow ran: nothing reads it again,
        so it is no longer maintained nor extended (new batches are only numbered and sent on).
        Differential-dataflow frees a trace with its last handle; here the batches go at the
        end of the worker's next quiet step (:meth:`drop_abandoned`) or when the dataflow
        retires, not inside the busy step that abandons it."""
        return self.state.abandoned

    def _move(self, new: SpineState) -> None:
        self.state = check_transition(self.name, self.state, new)

    # ------------------------------------------------------------------ writing
    def new_batch(
        self, data: BatchData, upper: List[Any], count: Optional[int] = None, store: bool = True
    ) -> Batch:
        """Make the next batch (up to ``upper``) and insert it; with ``store=False`` (a batcher
        nobody reads as a trace) only number it and advance the spine's upper."""
        self.seq += 1
        self.sealed_paths[0] += 1
        if not store or self.state not in MAINTAINED:
            batch = Batch(data, self.upper, list(upper), self.seq, count, since=self._minimum)
            self.upper = batch.upper
            return batch
        lower = self.batches[-1].upper if self.batches else self._minimum
        batch = Batch(data, lower, list(upper), self.seq, count, since=self._minimum)
        self.insert(batch)
        return batch

    def new_column_batch(
        self, columns: ColumnBatch, upper: List[Any], store: bool = True
    ) -> ColumnBatch:
        """As :meth:`new_batch`, for updates kept as columns: ``columns`` (a column batch
        whose bounds are set here) becomes the next batch."""
        self.seq += 1
        self.sealed_paths[1] += 1
        columns.seq = self.seq
        columns.upper = list(upper)
        columns.since = self._minimum
        if not store or self.state not in MAINTAINED:
            columns.lower = self.upper
            self.upper = columns.upper
            return columns
        columns.lower = self.batches[-1].upper if self.batches else self._minimum
        self.insert(columns)
        return columns

    def insert(self, batch: BatchReader) -> None:
        """Append ``batch`` (its ``lower`` must be the last batch's ``upper``), tell the
        listeners, and merge what the readers allow."""
        self.batches.append(batch)
        self._inserted += batch.count
        self.upper = batch.upper
        for listener in self.listeners:
            listener.notify(batch)
        readers = self.readers
        if readers and (
            readers[0].through_seq < batch.seq
            if len(readers) == 1
            else self.physical_seq() < batch.seq
        ):
            return  # a reader has yet to see it: the merges it allows wait for that reader
        self._maintain()

    def seal(self, upper: List[Any]) -> None:
        """Advance the upper frontier over a region without updates."""
        self.upper = list(upper)
        for listener in self.listeners:
            listener.notify_upper(self.upper)

    def advance_writer(self, frontier: List[Any]) -> None:
        """The arrange operator's own hold on compaction follows its input frontier."""
        if frontier == self._writer_since:
            return
        changes = [(t, 1) for t in frontier] + [(t, -1) for t in self._writer_since]
        self._writer_since = list(frontier)
        self._since.update_iter(changes)

    # ------------------------------------------------------------------ holds
    @property
    def since(self) -> List[Any]:
        """The logical compaction frontier: the meet of every reader's and the writer's hold."""
        return self._since.frontier

    def hold_since(
        self, changes: Iterable[Tuple[Any, int]], request_compaction: bool = False
    ) -> None:
        """Change the logical holds by ``(time, +1 / -1)`` pairs; if the since frontier moves
        and ``request_compaction``, the next maintenance compacts every batch it may."""
        since = self._since
        if type(since) is not LeastHold:
            if since.update_iter(changes) and request_compaction:
                self._force_compaction = True
        elif request_compaction:
            before = since.frontier
            since.update_iter(changes)
            if since.frontier != before:
                self._force_compaction = True
        else:
            since.update_iter(changes)

    def add_reader(self, reader: Reader) -> None:
        """Register a physical hold: batches after ``reader.through_seq`` are not merged."""
        self.readers.append(reader)

    def remove_reader(self, reader: Reader) -> None:
        """Release ``reader``'s physical hold (a no-op if it is not registered); the last
        reader of a retired spine takes its batches with it, the last reader of a private
        spine leaves it :attr:`abandoned`."""
        if reader in self.readers:
            self.readers.remove(reader)
            if not self.readers and self.private and self.state is SpineState.LIVE:
                self._move(SpineState.ABANDONED)
        if self.state is SpineState.RETIRED and not self.readers:
            self._drop(SpineState.DROPPED)

    def retire(self) -> None:
        """The dataflow writing this spine completed, so none of its operators reads it
        again: drop the batches now if no reader (an exported or imported handle) holds them,
        else when the last one closes, as a differential-dataflow trace goes with its last
        handle."""
        state = self.state
        if state is SpineState.ABANDONED:
            self._drop(SpineState.ABANDONED_DROPPED)
        elif state is SpineState.LIVE:
            if self.readers:
                self._move(SpineState.RETIRED)
            else:
                self._drop(SpineState.DROPPED)

    def drop_abandoned(self) -> None:
        """Drop the batches of an :attr:`abandoned` spine (a no-op otherwise)."""
        if self.state is SpineState.ABANDONED and not self.readers:
            self._drop(SpineState.ABANDONED_DROPPED)

    def _drop(self, state: SpineState) -> None:
        self._move(state)
        if self.instruments is not None and self.instruments.enabled:  # for the statistics
            self.dropped_sizes = {
                "updates": self.stored_updates(),
                "batches": len(self.batches),
                "keys": self.key_count(),
                "bytes": self.stored_bytes(),
            }
        self.batches = []
        self.listeners = []

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener.notify(batch)`` per new batch and ``listener.notify_upper(upper)``
        per sealed region."""
        self.listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        """Stop notifying ``listener`` (a no-op if it is not registered)."""
        if listener in self.listeners:
            self.listeners.remove(listener)

    def physical_seq(self) -> float:
        """Batches with seq at or below this have been seen by every reader."""
        if not self.readers:
            return _INF
        return min(h.through_seq for h in self.readers)

    # ------------------------------------------------------------------ reading
    def batches_through(self, seq: float) -> List[BatchReader]:
        """Batches with sequence number ``<= seq`` (a prefix of the spine)."""
        out = []
        for b in self.batches:
            if b.seq > seq:
                break
            out.append(b)
        return out

    def get(self, key: Any, seq: float = _INF) -> Vals:
        """Every ``(val, time, diff)`` of ``key`` in batches through ``seq``."""
        out: Vals = []
        for b in self.batches:
            if b.seq > seq:
                break
            vals = b.get(key)
            if vals:
                out.extend(vals)
        return out

    def accumulate(self, key: Any, time: Any) -> dict:
        """The values of ``key`` and their counts accumulated at ``time``."""
        le = self.order.le
        return accumulate((v, r) for v, t, r in self.get(key) if le(t, time))

    def cursor(self, seq: float = _INF) -> Cursor:
        """A :class:`~.cursor.Cursor` over the batches through ``seq`` (iterating it yields
        ``(key, [(val, [(time, diff), ...]), ...])`` in sorted order)."""
        return Cursor(self.batches_through(seq))

    def keys(self) -> set:
        """Every key with updates stored."""
        out: set = set()
        for b in self.batches:
            out.update(b.keys())
        return out

    def key_count(self) -> int:
        """The number of distinct keys stored (without decoding column batches)."""
        counted = distinct_keys(self.batches)
        return len(self.keys()) if counted is None else counted

    def stored_bytes(self) -> Optional[int]:
        """The bytes the column batches' arrays take (None if a batch is on the object path,
        whose size Python does not tell cheaply)."""
        return column_bytes(self.batches)

    def stored_updates(self) -> int:
        """Number of ``(key, val, time, diff)`` entries stored (for compaction tests)."""
        return sum(b.count for b in self.batches)

    # ------------------------------------------------------------------ maintenance
    def maintain(self) -> None:
        """Merge what readers allow (called by readers after they acknowledge batches)."""
        self._maintain()

    def compact(self) -> None:
        """Merge what readers allow and compact every batch they have all seen, now
        (normally automatic and amortised)."""
        if self._pins:
            return
        self._maintain()
        self._compact_prefix(self._mergeable())

    def _mergeable(self) -> int:
        """The length of the prefix of batches every reader has seen."""
        phys = self.physical_seq()
        batches = self.batches
        m = 0
        while m < len(batches) and batches[m].seq <= phys:
            m += 1
        return m

    def pin(self) -> None:
        """Keep every stored batch as it is (no merge, no compaction) until :meth:`unpin`: a
        reader is part-way through the batches it took from :meth:`batches_through`."""
        self._pins += 1

    def unpin(self) -> None:
        """Release one :meth:`pin`; the next insert or :meth:`maintain` merges again."""
        self._pins -= 1

    def _maintain(self) -> None:
        """Merge the run of batches every reader has seen that geometric sizes call for, then
        compact when enough arrived since the last pass (or a reader asked)."""
        if self._pins or self.state not in MAINTAINED or not self._since.frontier:
            # Pinned, or nothing may be read at any time any more (an empty since, or no
            # reader of a private spine left): merging is wasted work.
            return
        batches = self.batches
        readers = self.readers
        if not readers:
            phys = _INF
        elif len(readers) == 1:
            phys = readers[0].through_seq
        else:
            phys = min(h.through_seq for h in readers)
        m = len(batches)
        while m and batches[m - 1].seq > phys:  # seqs increase: the unseen batches are last
            m -= 1
        i = m - 1
        # Geometric merging (a batch joins its predecessor once it is at least half its size);
        # a predecessor the spine already merged into is a builder updated in place at
        # O(size of the newer batch), so merging into it directly copies each update once
        # instead of O(log n) times.
        # The run of batches that merge into one (with the merged sizes bounded by their sums)
        # is merged in time order into its first batch, so each update of the run is merged
        # once: a large batch behind small ones is not merged into each of them in turn.
        j = i
        size = batches[i].count if i >= 0 else 0
        while j >= 1 and (
            (type(batches[j - 1]) is BatchBuilder and batches[j - 1].count <= _OWNED_RATIO * size)
            or size * 2 >= batches[j - 1].count
        ):
            j -= 1
            size += batches[j].count
        if j < i:
            self._merge_run(j, i)
            m -= i - j
        # Amortised full compaction, once as many updates arrived as half of what is stored
        # (``inserted * 2 >= stored > threshold`` needs ``inserted * 2`` above the threshold
        # and at least the first batch's count: the stored count is only summed when a pass
        # may be due), or after a reader advanced its logical compaction explicitly.
        columns = m and type(batches[0]) is ColumnBatch
        inserted2 = self._inserted * (_COLUMNS_COMPACTION if columns else 2)
        if m and (
            self._force_compaction
            or (inserted2 > _COMPACTION_THRESHOLD and inserted2 >= batches[0].count)
        ):
            self._maybe_compact(m, inserted2)

    def _merge_run(self, j: int, i: int) -> None:
        """Merge batches ``j + 1 .. i`` into batch ``j``, in time order, reporting each merge
        when instruments listen."""
        batches = self.batches
        instruments = self.instruments
        first = batches[j]
        if self._columns_run(j, i):
            self._merge_columns(j, i)
            return
        target = first if isinstance(first, BatchBuilder) else BatchBuilder(first)
        listening = instruments is not None and instruments.enabled
        for k in range(j + 1, i + 1):
            sizes = (target.count, batches[k].count)
            self._merge(target, batches[k])
            if listening:
                assert instruments is not None
                stored = target.count + sum(b.count for b in batches[:j] + batches[k + 1 :])
                left = len(batches) - (k - j)
                instruments.emit(
                    SpineMerged(self.worker, self.name, sizes, target.count, left, stored)
                )
        batches[j : i + 1] = [target]

    def _columns_run(self, j: int, i: int) -> bool:
        """Whether batches ``j .. i`` merge as columns (see
        :func:`~.column_batch.as_column_run`; the object batches are encoded in place)."""
        run = as_column_run(self.batches[j : i + 1])
        if run is not None:
            self.batches[j : i + 1] = run
        return run is not None

    def _merge_columns(self, j: int, i: int) -> None:
        """Merge the column batches ``j .. i`` into one column batch (times advanced to since,
        consolidated): O(updates of the run), with numpy."""
        batches = self.batches
        run = [b for b in batches[j : i + 1] if type(b) is ColumnBatch]
        merged = merge_columns(run, list(self._since.frontier))
        instruments = self.instruments
        if instruments is not None and instruments.enabled:
            stored = merged.count + sum(b.count for b in batches[:j] + batches[i + 1 :])
            sizes = (run[0].count, sum(b.count for b in run[1:]))
            instruments.emit(
                SpineMerged(
                    self.worker, self.name, sizes, merged.count, len(batches) - (i - j), stored
                )
            )
        batches[j : i + 1] = [merged]

    def _maybe_compact(self, m: int, inserted2: int) -> None:
        """Compact the first ``m`` batches if they store more than the threshold and at most
        twice the updates inserted since the last pass (``inserted2``), or if a reader asked."""
        stored = 0
        for b in self.batches[:m]:
            stored += b.count
        if stored > _COMPACTION_THRESHOLD and (inserted2 >= stored or self._force_compaction):
            self._compact_prefix(m)

    def _compact_prefix(self, m: int) -> None:
        """Compact (advance to since, consolidate) every batch of the first ``m``."""
        since = self._since.frontier
        if since:
            m = self._merge_for_compaction(m)
        unmoved = since[0] if len(since) == 1 and self.order.is_total else None
        for idx in range(m):
            b = self.batches[idx]
            if unmoved is not None and b.lower and unmoved <= b.lower[0]:
                continue  # no time of b is before since, and batches are consolidated per key
            if type(b) is BatchBuilder and b.compacted is not None and b.compacted == since:
                continue  # compacted at this since already
            if type(b) is ColumnBatch:
                if b.since != since:
                    self.batches[idx] = compact_columns(b, since)
                continue
            builder = self._builder(b)
            self.batches[idx] = builder
            self._compact(builder)
        self._inserted = 0
        self._force_compaction = False

    def _merge_for_compaction(self, m: int) -> int:
        """Merge the first ``m`` batches into one (a compaction pass reads them all) when none
        is a column batch, or the first is and the others fit its layout; else each run of
        column batches of one layout. Updates that cancel across batches only go once merged
        (a record retracted since a large batch was made: a join reading both would make
        outputs that cancel). Returns the new ``m``."""
        batches = self.batches
        columns = [type(b) is ColumnBatch for b in batches[:m]]
        if m > 1 and (not any(columns) or (columns[0] and self._columns_run(0, m - 1))):
            self._merge_run(0, m - 1)
            return 1
        idx = m - 1
        while idx > 0:
            last = batches[idx]
            start = idx
            if type(last) is ColumnBatch:
                while start > 0 and last.same_layout(batches[start - 1]):
                    start -= 1
            if start < idx:
                self._merge_columns(start, idx)
                m -= idx - start
            idx = start - 1
        return m

    @staticmethod
    def _builder(batch: BatchReader) -> BatchBuilder:
        """``batch`` itself if the spine builds it, else a builder copied from it."""
        return batch if type(batch) is BatchBuilder else BatchBuilder(batch)

    def _merge(self, target: BatchBuilder, b: BatchReader) -> None:
        """Merge ``b`` into ``target`` in place: the keys present in both are advanced to since
        and consolidated. O(size of ``b``)."""
        since = list(self._since.frontier)
        order = self.order
        data = target.data
        outer = order.outer
        if (
            since
            and not order.is_total
            and order.depth == 1
            and outer is not None
            and outer.is_total
        ):
            target.count = merge_product(
                data, b.items(), target.count, since, order, target.several
            )
        else:
            target.count = merge_consolidating(data, b.items(), target.count, since, order)
            if not order.is_total:
                target.several = None
        target.upper = b.upper
        target.seq = b.seq
        target.since = since
        target.compacted = None

    def _compact(self, batch: BatchBuilder) -> None:
        """Advance every time of ``batch`` to since and consolidate (O(batch size))."""
        since = list(self._since.frontier)
        order = self.order
        if order.is_total and not since:
            return  # nothing will be read any more: leave the batch as it is
        data = batch.data
        if order.is_total:
            batch.count = compact_total(data, since, order)
        else:
            # Partially ordered times (an iterative scope): a key with one update has nothing
            # to consolidate with, and its time compares with every time at or beyond since
            # exactly as its advanced time does (that is what advancing preserves), so it is
            # left as it is: the pass costs O(keys) plus O(updates of the keys with several),
            # not an advanced time (a new tuple) per key. (A merge advances it once another
            # update of its key arrives.)
            # The keys with several updates are tracked (by merges into the batch) after the
            # first pass, which finds them: later passes visit only them.
            tracked = batch.several
            several = (
                [key for key, vals in data.items() if len(vals) != 1]
                if tracked is None
                else list(tracked)
            )
            single = len(data) - len(several)  # keys with one update, left as they are
            kept, still = compact_keys(data, several, since, order)
            batch.several = still
            batch.count = single + kept
        batch.since = since
        batch.compacted = since

    def column_batches(self) -> int:
        """How many of the stored batches keep their updates as columns."""
        return sum(1 for b in self.batches if type(b) is ColumnBatch)

    def _check(self) -> None:
        """Assert the invariants: batches tile time (the first starts at the minimum, each
        ``lower`` is the previous ``upper``), sequence numbers increase, counts are exact."""
        prev_seq = 0
        prev_upper: Sequence[Any] = self._minimum
        for b in self.batches:
            assert b.seq > prev_seq, (b.seq, prev_seq)
            prev_seq = b.seq
            assert list(b.lower) == list(prev_upper), (b, prev_upper)
            prev_upper = b.upper
            assert b.count == sum(len(vals) for _, vals in b.items()), b

    def __repr__(self) -> str:
        return (
            f"Spine({self.name!r}, batches={len(self.batches)}, "
            f"updates={self.stored_updates()}, since={self.since})"
        )
