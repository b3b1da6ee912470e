"""The join operator: each new batch of one arrangement joined with the other's accepted trace.

Every pair of updates with equal keys is joined exactly once (when the later one is accepted):
output ``(f(key, v1, v2), join(t1, t2), d1 * d2)`` (differential-dataflow's ``join_core``).
Readers acknowledge batch sequence numbers, and traces only merge batches every reader has
acknowledged. What a matching pair produces is a *product*: :func:`pairs`,
:func:`semijoin_pairs`, :func:`mapped` or :func:`core` (the join kernel,
:mod:`.kernel.join`, which also walks a batch's keys against the other trace).
"""

from __future__ import annotations

from collections import deque
from itertools import chain, count
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple, cast

import numpy as np

from ..dataflow.operator import OperatorCore
from ..dataflow.probe import ProbesOnly
from ..dataflow.stream import Stream
from ..errors import NamedStage, TimelyError, user_error
from ..instrument import PathCounted
from .agent import TraceAgent
from .kernel.columns import diffs_fit
from .kernel.join import Kernel, core, join_keys, mapped, pairs, semijoin_pairs
from .kernel.join_columns import (
    Builder,
    chunk_end,
    column_core,
    column_mapped,
    column_pairs,
    column_semijoin_pairs,
    consolidate_pairs,
    expand_pairs,
    key_ranges,
    pair_offsets,
    pair_updates,
    range_updates,
    repeats_records,
)
from .trace import Batch, BatchReader, TraceView
from .trace.column_batch import ColumnBatch

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = [
    "JoinOperator",
    "JoinProduct",
    "core",
    "join_streams",
    "mapped",
    "pairs",
    "semijoin_pairs",
]

JoinProduct = Callable[[Any, bool, Optional[Callable]], Kernel]
"""``product(order, first, logic)``: the kernel for a batch of the first (or second) input
(see :mod:`.kernel.join`)."""


_consume: Callable[[Any], None] = deque(maxlen=0).extend
"""Runs an iterator to its end (in C), keeping nothing: a fused inspection's calls."""

_COLUMN_PRODUCTS: Dict[Any, Callable[[bool, Optional[Callable]], Builder]] = {
    pairs: column_pairs,
    semijoin_pairs: column_semijoin_pairs,
    mapped: column_mapped,
    core: column_core,
}
"""Each product's column twin (:mod:`.kernel.join_columns`); other products read objects."""


class _ColumnJoin:
    """A column batch being joined with column batches of the other trace, resumable between
    activations: the batch's distinct keys (their first and end rows), each other batch's
    rows of equal keys, the running count of pairs before each key, and the next key."""

    __slots__ = ("others", "starts", "ends", "ranges", "offsets", "history", "next")

    def __init__(
        self,
        others: List[ColumnBatch],
        starts: np.ndarray,
        ends: np.ndarray,
        ranges: List[Tuple[np.ndarray, np.ndarray]],
        offsets: np.ndarray,
        history: bool,
    ):
        self.others = others
        self.starts = starts
        self.ends = ends
        self.ranges = ranges
        self.offsets = offsets
        # matched pairs may cancel: a record at several times on one side (its history, not
        # compacted yet), or the other trace's updates in several batches
        self.history = history
        self.next = 0


class _JoinWork:
    """One accepted batch being joined with the other trace, resumable between activations:
    the keys still to visit (an iterator over the batch, which no merge touches while the
    join has not acknowledged it; or, on the column path, ``columns``) and the other trace's
    batches as they were at the start."""

    __slots__ = ("side", "time", "batch", "keys", "others", "columns", "lookups")

    def __init__(
        self,
        side: int,
        time: Any,
        batch: Batch,
        keys: Any,
        others: List[BatchReader],
        columns: Optional[_ColumnJoin] = None,
        lookups: Optional[List[Any]] = None,
    ):
        self.side = side
        self.time = time
        self.batch = batch
        self.keys = keys
        self.others = others
        self.columns = columns
        self.lookups = lookups
        """The other batches' look-ups, when made at the start (a small column batch)."""


class JoinOperator(OperatorCore):
    """Joins two arrangements: each new batch of one input against the other's trace as
    accepted so far, so that every pair of updates is joined exactly once.

    Work is fuelled, as differential-dataflow's ``join_core``: an activation produces about
    :attr:`fuel` output updates, sends them, and resumes where it stopped at the next
    activation (holding a capability at the batch's time, and keeping the other trace from
    merging meanwhile), so the operators downstream consume the output in bounded pieces
    instead of one list as large as the whole join of a big batch.

    A column batch joined with a trace of column batches of the same key layout (no filter or
    time map on either view, totally ordered times) is matched on its columns (sort-merge on
    the keys, :mod:`.kernel.join_columns`) without decoding the trace; any other batch takes
    the object path. :attr:`column_batches` and :attr:`object_batches` count the batches each
    path joined.

    Example: ``a.arrange_by_key().join(b.arrange_by_key())`` makes one.
    """

    fuel = 100_000
    """Output updates per activation before the join yields."""

    small_batch = 16
    """A column batch of at most this many keys reads the other trace's column batches only
    at its keys (their updates decoded into the object kernels' lists): numpy's cost per call
    outweighs vectorising so few."""

    small_other = 1024
    """A small batch reads another batch of at most this many updates through its dictionary
    (decoded once, as the object path does): one look-up per key instead of numpy calls."""

    wake_on_frontier = False
    """A frontier move alone does not schedule the join: the compaction it allows the traces
    is applied when the next batch arrives (one round late, which costs no exactness and
    saves a scheduling round per closed-loop update)."""

    def __init__(
        self,
        scope: "Scope",
        a: TraceView,
        b: TraceView,
        product: JoinProduct,
        logic: Optional[Callable],
        name: str,
    ):
        super().__init__(scope, name, 2, 1, initial_capabilities=False)
        self.a, self.b = a, b
        self.kernels = (product(self.order, True, logic), product(self.order, False, logic))
        self.ha = TraceAgent(a.spine)
        self.hb = TraceAgent(b.spine)
        self.ack_a = 0
        self.ack_b = 0
        self._out = self.output_ports[0]
        self._work: Optional[_JoinWork] = None
        self._held: List[Tuple[int, Any, List[Batch]]] = []
        self._queues = (self.input_ports[0].queue, self.input_ports[1].queue)
        self._consumed = (self.shared.consumeds[0].counts, self.shared.consumeds[1].counts)
        self._internal = self.shared.internals[0].counts
        self._sending: List[Any] = []
        """Outputs made in this activation at :attr:`_sending_time`, sent as one message (both
        inputs' batches of one time under a closed loop)."""
        self._sending_time: Any = None
        self._inspect: Optional[Callable[[Any], Any]] = None
        self._probes_only = ProbesOnly(self._out)  # (then see _Inspected)
        maker = _COLUMN_PRODUCTS.get(product) if self.order.is_total else None
        self._builders = None if maker is None else (maker(True, logic), maker(False, logic))
        # id -> (batch, its diffs fit int64 products, it holds a record at several times)
        self._fits: Dict[int, Tuple[ColumnBatch, bool, bool]] = {}
        """Whether a column batch's diffs multiply within ``int64``, by batch identity (the
        batches the traces hold: pruned when they maintain)."""
        self.column_batches = 0
        """Batches joined on the column path."""
        self.object_batches = 0
        """Batches joined on the object path."""
        instruments = scope.worker.instruments
        if instruments.enabled:
            instruments.emit(
                PathCounted(scope.worker.index, self.subgraph.name, self.index, name, self)
            )

    def fuse_inspect(self, f: Callable[[Any], Any]) -> bool:
        """Call ``f((record, time, diff))`` on every output update as it is sent (what an
        ``inspect`` straight after the join would see, without an operator of its own; at most
        one inspection is fused: False if one already is)."""
        if self._inspect is not None:
            return False
        self._inspect = f
        return True

    def _push(self, time: Any, data: List[Any]) -> None:
        """Send one output message (after the fused inspection, if any)."""
        inspect = self._inspect
        if inspect is not None:
            try:
                _consume(map(inspect, data))
            except TimelyError:
                raise
            except Exception as exc:
                raise self._inspect_error(exc, time) from exc
        self._out.push(time, data)

    def _inspected(self, inspect: Callable[[Any], Any], time: Any, data: Iterable[Any]) -> int:
        """Call ``inspect`` on every update of ``data`` (at ``time``); returns how many."""
        made = count()
        try:
            _consume(zip(map(inspect, data), made))  # (zip stops before taking a count)
        except TimelyError:
            raise
        except Exception as exc:
            raise self._inspect_error(exc, time) from exc
        return next(made)

    def _inspect_error(self, exc: Exception, time: Any) -> Exception:
        """What the fused inspection's failure ``exc`` at ``time`` raises."""
        stage = NamedStage("Linear[inspect]", self.worker_index)
        return user_error(stage, exc, f"an update at time {time!r}")

    def schedule(self) -> bool:
        """Join arrived batches with the other trace (about :attr:`fuel` outputs), acknowledge
        the finished ones, release holds; activate again while work remains."""
        changed = self._apply_frontiers()
        fuel = self.fuel
        acked = False
        try:
            while fuel > 0:
                work = self._work or self._start_next()
                if work is None:
                    break
                fuel = self._run_work(work, fuel)
                if self._work is None:
                    acked = True
        finally:  # (also when the logic fails: what was made is sent in this activation)
            if self._sending:
                self._push(self._sending_time, self._sending)
                self._sending = []
        q0, q1 = self._queues
        if self._work is not None or self._held or q0 or q1:
            self.activate()
        self.ha.acknowledge(self.ack_a)
        self.hb.acknowledge(self.ack_b)
        if (changed or acked) and self._work is None:
            self._release()
        return False

    def _start_next(self) -> Optional[_JoinWork]:
        """Begin the next arrived batch (input 0's before input 1's) and return its work; None
        if none waits."""
        held = self._held
        while not held:
            q0, q1 = self._queues
            if q0:
                side, q = 0, q0
            elif q1:
                side, q = 1, q1
            else:
                return None
            time, batches = q.popleft()
            if batches:
                # The count-table contract (progress.kernel): consumed, and a capability until all
                # are joined.
                consumed = self._consumed[side]
                consumed[time] = consumed.get(time, 0) + len(batches)
                internal = self._internal
                c = internal.get(time, 0) + 1
                if c:
                    internal[time] = c
                else:
                    del internal[time]
                if len(batches) == 1:  # the common case: nothing to hold for later
                    return self._begin(side, time, batches[0])
                held.append((side, time, list(batches)))
        side, time, batches = held[0]
        batch = batches.pop(0)
        if not batches:
            held.pop(0)
        return self._begin(side, time, batch)

    def _begin(self, side: int, time: Any, batch: Batch) -> _JoinWork:
        """Make ``batch`` (of input ``side``, at ``time``) the current work."""
        mine, other, ack = (
            (self.a, self.b, self.ack_b) if side == 0 else (self.b, self.a, self.ack_a)
        )
        spine = other.spine
        others = spine.batches_through(ack)
        spine.pin()
        work = self._column_work(side, time, batch, others)
        if work is not None:
            self.column_batches += 1
        else:
            self.object_batches += 1
            work = _JoinWork(side, time, batch, iter(mine.read_batch(batch)), others)
        self._work = work
        return work

    def _column_work(
        self, side: int, time: Any, batch: Batch, others: List[BatchReader]
    ) -> Optional[_JoinWork]:
        """The work of ``batch`` against ``others`` reading their columns, or None when one of
        them (or a view's wrapper) keeps the join on the object path. A small batch (or an
        unknown product) runs the object kernels on the others' updates at its keys only."""
        if type(batch) is not ColumnBatch:
            return None
        a, b = self.a, self.b
        if a.pred is not None or a.time_map is not None:
            return None
        layout = batch.key_layout
        if b.pred is not None or b.time_map is not None or not layout.width:
            return None
        for o in others:
            if type(o) is not ColumnBatch or o.key_layout != layout:
                return None
        columns = cast(List[ColumnBatch], others)  # (checked above)
        keys = batch.search_keys()[batch.starts()]
        if batch.key_count() <= self.small_batch or self._builders is None:
            decoded, small = batch.sorted_keys(), self.small_other
            lookups = [
                o.get
                if o.count <= small
                else range_updates(
                    decoded,
                    key_ranges(batch.keys_against(o, keys), o.search_keys()),
                    _vals_of(o),
                    o.times,
                    o.diffs,
                ).get
                for o in columns
            ]
            return _JoinWork(side, time, batch, iter(batch.items()), others, None, lookups)
        plan = self._column_plan(batch, columns, keys)
        return None if plan is None else _JoinWork(side, time, batch, None, others, plan)

    def _column_plan(
        self, batch: ColumnBatch, others: List[ColumnBatch], keys: np.ndarray
    ) -> Optional[_ColumnJoin]:
        """The column path's plan for ``batch`` (its distinct ``keys``) against ``others`` (of
        its key layout), or None when their diffs may overflow ``int64`` products."""
        fits = self._fits
        history = len(others) > 1
        for o in [batch, *others]:
            known = fits.get(id(o))
            if known is None or known[0] is not o:
                known = fits[id(o)] = (o, diffs_fit(o.diffs), repeats_records(o.columns()[0]))
            if not known[1]:
                return None
            history = history or known[2]
        columns = others
        starts = batch.starts()
        ends = np.empty_like(starts)
        ends[:-1] = starts[1:]
        ends[-1:] = batch.count
        ranges = [key_ranges(batch.keys_against(o, keys), o.search_keys()) for o in columns]
        offsets, hit = pair_offsets(starts, ends, ranges)
        if not all(hit):  # (a small batch against a spine: most batches lack its keys)
            columns = [o for o, h in zip(columns, hit) if h]
            ranges = [r for r, h in zip(ranges, hit) if h]
        return _ColumnJoin(columns, starts, ends, ranges, offsets, history)

    def _join_columns(self, work: _JoinWork, fuel: int) -> List[Any]:
        """Outputs of the next keys of ``work`` on the column path, chunk by chunk of keys
        (each about ``fuel`` pairs less what is made) until ``fuel`` outputs are made."""
        plan = work.columns
        assert plan is not None and self._builders is not None
        batch = cast(ColumnBatch, work.batch)  # (the plan's condition)
        build = self._builders[work.side]
        sink = self._inspect if self._inspect is not None and self._probes_only() else None
        out: List[Any] = []
        made = 0
        offsets, keys = plan.offsets, len(plan.starts)
        while plan.next < keys and made < fuel:
            k = plan.next
            e = plan.next = chunk_end(offsets, k, fuel - made)
            if offsets[e] == offsets[k]:
                continue
            starts, ends = plan.starts[k:e], plan.ends[k:e]
            parts = []
            for other, (lo, hi) in zip(plan.others, plan.ranges):
                i, j = expand_pairs(starts, ends, lo[k:e], hi[k:e])
                if len(i):
                    parts.append((other, i, j))
            if parts:
                chunk = _chunk_outputs(batch, parts, build, plan.history)
                if sink is None:
                    out += chunk
                    made = len(out)
                else:
                    made += self._inspected(sink, work.time, chunk)
        return out if sink is None else _Inspected([None] * made)

    def _run_work(self, work: _JoinWork, fuel: int) -> int:
        """Join keys of the current batch (``work``) until about ``fuel`` outputs are made;
        send them. Returns the fuel left (0 or less when the batch is not finished)."""
        try:
            out = self._join_keys(work, fuel)
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc, f"a batch at time {work.time!r}") from exc
        if type(out) is _Inspected:
            self._out.push(work.time, out)
        elif out:
            if not self._sending:
                self._sending, self._sending_time = out, work.time
            elif self._sending_time == work.time:
                self._sending.extend(out)
            else:
                self._push(self._sending_time, self._sending)
                self._sending, self._sending_time = out, work.time
        fuel -= len(out)
        if fuel <= 0:
            return fuel
        # The batch is done: acknowledge it, release the other trace and the capability.
        self._work = None
        if work.side == 0:
            self.ack_a = work.batch.seq
            self.b.spine.unpin()
        else:
            self.ack_b = work.batch.seq
            self.a.spine.unpin()
        if not self._held:  # the last batch of its message
            internal = self._internal
            c = internal.get(work.time, 0) - 1
            if c:
                internal[work.time] = c
            else:
                del internal[work.time]
        return fuel

    def after_restore(self) -> None:
        """The traces were restored (each as one batch nobody sent): count them as joined, as
        in the checkpointed run (a join keeps no state at a closed time: not Stateful)."""
        self.ack_a = self.a.spine.seq
        self.ack_b = self.b.spine.seq
        self.ha.acknowledge(self.ack_a)
        self.hb.acknowledge(self.ack_b)

    def retire(self) -> None:
        """The dataflow completed: release both traces (frontier moves alone do not wake it)."""
        self.ha.close()
        self.hb.close()
        self._fits = {}

    def _release(self) -> None:
        """Trace a is only ever joined with future b updates, and vice versa: let each trace
        compact up to the other input's frontier."""
        fa, fb = self.input_frontiers[0].frontier, self.input_frontiers[1].frontier
        # Only an input's batches read the other trace: once an input is complete and its last
        # batch joined, the other trace's handle goes (as differential-dataflow's join drops
        # it); an operator's private trace then stops being maintained (Spine.abandoned).
        if not fa and not self.hb.closed and self._finished(0):
            self._let_go(self.hb)
        if not fb and not self.ha.closed and self._finished(1):
            self._let_go(self.ha)
        if not fa and not fb:
            self._fits = {}
            return
        self.ha.set_logical_compaction(self.a.unmap_frontier(fb) if fb else [])
        self.hb.set_logical_compaction(self.b.unmap_frontier(fa) if fa else [])
        self.a.spine.maintain()
        if self.b.spine is not self.a.spine:
            self.b.spine.maintain()
        if self._fits:  # forget merged-away batches (each entry keeps its batch alive)
            live = {id(b) for b in self.a.spine.batches}
            live.update(id(b) for b in self.b.spine.batches)
            self._fits = {k: v for k, v in self._fits.items() if k in live}

    def _let_go(self, handle: TraceAgent) -> None:
        handle.close()
        if handle.spine.abandoned:
            self.scope.worker.defer_until_quiet(handle.spine.drop_abandoned)

    def _finished(self, side: int) -> bool:
        """No batch of input ``side`` waits (queued or held) or is being joined."""
        work = self._work
        return (
            not self._queues[side]
            and not any([h[0] == side for h in self._held])
            and (work is None or work.side != side)
        )

    def _join_keys(self, work: _JoinWork, fuel: int) -> List[Any]:
        """Outputs of the next keys of ``work`` (stops once ``fuel`` outputs are made; or
        :class:`_Inspected` placeholders for them)."""
        if work.columns is not None:
            return self._join_columns(work, fuel)
        if work.lookups is not None:
            return join_keys(work.keys, work.lookups, self.kernels[work.side], fuel)
        other = self.b if work.side == 0 else self.a
        if other.pred is None and other.time_map is None:  # the common case: no wrapper
            lookups = [
                (o.ready_get or o.getter()) if type(o) is ColumnBatch else o.get
                for o in work.others
            ]
        else:
            lookup = other.lookup
            lookups = [lookup(batch) for batch in work.others]
        return join_keys(work.keys, lookups, self.kernels[work.side], fuel)


class _Inspected(List[Any]):
    """Placeholders (``None``) for column-path outputs the fused inspection saw as they were
    made, when only probes read the output (they count records): never kept as records, sent
    as a message of their own, not inspected again."""


def _vals_of(batch: ColumnBatch) -> Callable[[int, int], List[Any]]:
    """``vals_of(lo, hi)``: the values of the rows ``[lo, hi)`` of ``batch``."""
    layout, cols = batch.val_layout, batch.val_cols

    def vals_of(lo: int, hi: int) -> List[Any]:
        return layout.decode([c[lo:hi] for c in cols], hi - lo)

    return vals_of


def join_streams(
    a: Tuple[Stream, TraceView],
    b: Tuple[Stream, TraceView],
    product: JoinProduct,
    logic: Optional[Callable],
    name: str,
) -> Stream:
    """Join two arrangements, each given as ``(stream of batches, view of its trace)``, of one
    scope; ``product(order, first, logic)`` makes what every matching pair produces."""
    (a_stream, a_view), (b_stream, b_view) = a, b
    scope = a_stream.scope
    if scope.subgraph is not b_stream.scope.subgraph:
        raise TimelyError(f"{name}: arrangements are in different scopes; use enter")
    op = JoinOperator(scope, a_view, b_view, product, logic, name)
    a_stream.connect_to(op, 0)
    b_stream.connect_to(op, 1)
    return Stream(scope, op.output_ports[0])


CONSOLIDATE_PAIRS_MIN = 64
"""A chunk of at least this many matched pairs is consolidated before its outputs are built."""


def _chunk_outputs(
    batch: ColumnBatch,
    parts: List[Tuple[ColumnBatch, np.ndarray, np.ndarray]],
    build: Builder,
    history: bool,
) -> Iterable[Any]:
    """The outputs of one chunk's matched pairs (``(other, i, j)``: rows ``i`` of ``batch``
    against rows ``j`` of ``other``), an iterable read once. A large chunk whose pairs may
    cancel (``history``; the other batches of one value layout) is consolidated first, with
    numpy: equal ``(key, v1, v2, time)`` made once, with the sum of their diffs (fewer records
    built, and fewer for every operator downstream)."""
    first = parts[0][0]
    if (
        (history or len(parts) > 1)
        and sum(len(i) for _, i, _ in parts) >= CONSOLIDATE_PAIRS_MIN
        and _same_codes(first, parts)
    ):
        i = np.concatenate([i for _, i, _ in parts])
        j_times = np.concatenate([o.times[j] for o, _, j in parts])
        j_diffs = np.concatenate([o.diffs[j] for o, _, j in parts])
        j_vals = [
            np.concatenate([o.val_cols[c][j] for o, _, j in parts])
            for c in range(len(first.val_cols))
        ]
        consolidated = consolidate_pairs(
            ([col[i] for col in batch.key_cols], [col[i] for col in batch.val_cols], j_vals),
            np.maximum(batch.times[i], j_times),
            batch.diffs[i] * j_diffs,
        )
        if consolidated is not None:
            (keys, mine, other_vals), times, diffs = consolidated
            n = len(times)
            return build(
                batch.key_layout.decode(keys, n),
                batch.val_layout.decode(mine, n),
                first.val_layout.decode(other_vals, n),
                times.tolist(),
                diffs.tolist(),
            )
    made = []
    for other, i, j in parts:
        times_list, diffs_list = pair_updates(
            batch.times[i], batch.diffs[i], other.times[j], other.diffs[j]
        )
        mine_vals, their_vals = batch.decode_vals(i), other.decode_vals(j)
        made.append(build(batch.decode_keys(i), mine_vals, their_vals, times_list, diffs_list))
    return made[0] if len(made) == 1 else chain.from_iterable(made)


def _same_codes(
    first: ColumnBatch, parts: List[Tuple[ColumnBatch, np.ndarray, np.ndarray]]
) -> bool:
    """The other batches' value columns compare as they are: one layout, and its string
    columns coded by one dictionary (each batch codes its own strings)."""
    layout = first.val_layout
    for other, _, _ in parts:
        if other.val_layout != layout:
            return False
        if layout.strings and other is not first:
            mine, theirs = layout.dicts, other.val_layout.dicts
            assert mine is not None and theirs is not None
            if any(mine[c] is not theirs[c] for c in layout.strings):
                return False
    return True
