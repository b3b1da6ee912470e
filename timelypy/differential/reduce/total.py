"""Reductions for totally ordered times: count, distinct and threshold in O(1) per update.

As differential-dataflow's ``count_total`` and ``threshold_total``, with the arrangement that
would feed them fused in: the operator takes ``(record, time, diff)`` updates (exchanged by
record) and sums them per time and record as they arrive (one dict update each, no per-update
tuples). When the input frontier passes a time, every record whose count changed at that time
costs one dict update of its current count and its output changes from ``f(old)`` to
``f(new)``. No history, no trace; one capability, at the least pending time.

Two more fusions keep a whole activation free of intermediate lists:

* **Upstream**, a chain of time-preserving linear operators (map, filter, flat_map, explode,
  negate) can run inside the operator (``stages``; on one worker, where the exchange by record
  moves nothing): each input update's records go straight into the sums
  (:func:`~timelypy.differential.fusion.fuse_accumulate`), with no update triple per record and
  no list.
* **Downstream**, an ``inspect`` (``fuse_inspect``, the protocol ``Collection.inspect`` fuses
  by) is called on each time's changes as they are made. When nothing but probes reads the
  output (probes discard data and only count it), the changes are not kept for the output
  message: it carries as many placeholders, so every count the progress protocol and the
  instruments see is unchanged, while each time's update tuples are freed as soon as the
  inspection saw them (the collector is not triggered by a large activation's output).

Large messages of fixed-width records (a bulk load, a round of bulk changes) take the column
path of :mod:`.column_count` instead of the dictionaries: held as numpy columns per time, summed
with a sort when the time closes, the output changes built by C-level loops
(:mod:`~timelypy.differential.kernel.reduce_counts`). ``column_batches`` and ``object_batches``
count the messages each path took (the statistics' ``path`` of the operator).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ...dataflow.channels import Exchange
from ...dataflow.operator import OperatorCore
from ...dataflow.probe import ProbesOnly
from ...dataflow.state import KeyedState, future_pieces
from ...dataflow.stream import Stream
from ...errors import (
    NamedStage,
    TimelyError,
    offending_record,
    unhashable_error,
    user_error,
)
from ...instrument import PathCounted
from ..column_message import ColumnMessage, record_of_update
from ..fusion import fuse_accumulate, fuse_updates
from ..kernel.reduce_counts import count_changes, threshold_changes
from ..trace.layout import columns_enabled
from . import column_count
from .column_count import RecordColumns

if TYPE_CHECKING:
    from ...dataflow.scope import Scope

__all__ = ["CountTotal", "ThresholdTotal", "count_total", "threshold_total"]


class _TotalReduce(KeyedState, OperatorCore):
    """Shared plumbing: sum arrived updates per time and record; when the input frontier
    passes a time, turn its sums into output changes (in time order).

    ``stages``: ``(kind, function)`` linear stages applied to every input update first (see
    the module notes); empty for updates that arrive as they are to be counted.

    Stateful: the keyed counts, and the pending sums at times the input frontier has not
    reached (a temporal filter's updates at a window's end), per record."""

    def __init__(self, scope: "Scope", name: str, stages: Sequence[Tuple[str, Any]] = ()):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        if not scope.order.is_total:
            raise TimelyError(
                f"{name}: needs totally ordered times (use count/distinct/"
                f"threshold inside iterative scopes)"
            )
        self.pending: Dict[Any, Dict[Any, int]] = {}
        """``time -> {record: summed diff}`` for times the input frontier has not passed."""
        self._cap: Optional[Any] = None
        """The time of the one capability held (the least pending time), or None."""
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._internal = self.shared.internals[0]
        self._out = self.output_ports[0]
        self._stages = list(stages)
        self._accept = fuse_accumulate(self._stages)
        self._inspect: Optional[Callable[[Any], Any]] = None
        self._consume: Callable[[Iterable[Any]], None] = deque(maxlen=0).extend
        self._sink_only = ProbesOnly(self._out)
        """Nothing but probes reads the output (they only count its records)."""
        self._columns = RecordColumns(columns_enabled() and not self._stages)
        self.input_ports[0].columns = self._columns.enabled  # column messages as they are
        self.column_batches = 0
        """Messages summed on the column path (see :mod:`.column_count`)."""
        self.object_batches = 0
        """Messages summed on the object path."""
        instruments = scope.worker.instruments
        if instruments.enabled:
            instruments.emit(
                PathCounted(scope.worker.index, self.subgraph.name, self.index, self.name, self)
            )

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """The pending sums per record, ``(record, "pending", [(time, diff), ...])``."""
        self._columns.unfold(self.pending)
        return future_pieces(
            self._state_owner(),
            "pending",
            ((d, t, r) for t, sums in self.pending.items() for d, r in sums.items() if r),
            self.input_frontiers[0].less_equal,
        )

    def restore_future(self, key: Any, name: str, entries: Any) -> bool:
        """Add a record's restored pending sums."""
        if name != "pending":
            return False
        pending = self.pending
        for t, r in entries:
            sums = pending.get(t)
            if sums is None:
                pending[t] = {key: r}
            else:
                sums[key] = sums.get(key, 0) + r
        return True

    def hold_future(self) -> None:
        """Hold the one capability at the least restored pending time."""
        if self.pending and self._cap is None:
            self._cap = least = min(self.pending)
            self._internal.update(least, 1)

    def fuse_inspect(self, f: Callable[[Any], Any]) -> bool:
        """Call ``f((record, time, diff))`` on every output update as it is made (at most one
        inspection is fused; False if one already is)."""
        if self._inspect is not None:
            return False
        self._inspect = f
        return True

    def schedule(self) -> bool:
        """Sum arrived updates; emit the changes at times the input frontier has passed."""
        changed = self._apply_frontiers()
        q = self._queue
        if q:
            consumed = self._consumed.counts  # count-table contract, short form (progress.kernel)
            accept, pending = self._accept, self.pending
            columns = self._columns
            least = column_count.COLUMNS_MIN_UPDATES
            while q:
                time, data = q.popleft()
                consumed[time] = consumed.get(time, 0) + len(data)
                cap = self._cap
                if cap is None or time < cap:  # hold the least message time
                    internal = self._internal
                    internal.update(time, 1)
                    if cap is not None:
                        internal.update(cap, -1)
                    self._cap = time
                if type(data) is ColumnMessage:  # (read as it is while columns are enabled)
                    if (
                        columns.enabled
                        and len(data) >= least
                        and columns.absorb_message(data, pending)
                    ):
                        self.column_batches += 1
                        continue
                    data = data.records()
                elif columns.enabled and len(data) >= least and columns.absorb(data, pending):
                    self.column_batches += 1
                    continue
                self.object_batches += 1
                try:
                    accept(data, pending)
                except TimelyError:
                    raise
                except Exception as exc:
                    raise self._accept_error(exc, data, time) from exc
        if changed and self.pending:
            self._release()
        return False

    def _accept_error(self, exc: Exception, data: List[Any], time: Any) -> Exception:
        """The error for a batch whose accumulation raised: the user's fused stage (named as
        the unfused ``Linear[...]`` operator, with the offending record), or a record that
        cannot be hashed."""
        records: Any = (u[0] for u in data)
        if self._stages:
            chain = fuse_updates(self._stages, self.order.join)
            try:
                records = [u[0] for u in chain(data)]
            except Exception as inner:  # the user's function: name it as its own operator
                names = ">".join(kind for kind, _ in self._stages)
                return user_error(
                    NamedStage(f"Linear[{names}]", self.worker_index),
                    inner,
                    **offending_record(chain, data, time),
                )
        if isinstance(exc, TypeError):
            return unhashable_error(self, records)
        return user_error(self, exc)

    def _release(self) -> None:
        """Emit the changes at the pending times the input frontier has passed (in time
        order, at the held capability); keep the capability at the least time left."""
        frontier = self.input_frontiers[0].frontier
        pending = self.pending
        if frontier:
            bound = frontier[0]
            ready = [t for t in pending if t < bound]
            if not ready:  # nothing to emit; the capability may still move up to the least
                self._hold_least()  # pending time (updates sent ahead of their message time)
                return
            if len(ready) > 1:
                ready.sort()
        else:
            ready = sorted(pending)
        inspect = self._inspect
        sink = self._sink_only()
        emit = self._emit
        held = self._columns.chunks
        out: List[Any] = []
        produced = 0
        try:
            for t in ready:
                if held and t in held:
                    changes = self._emit_columns(pending.pop(t), t)
                else:
                    changes = emit(pending.pop(t), t)
                if not changes:
                    continue
                if inspect is not None:
                    try:
                        self._consume(map(inspect, changes))
                    except TimelyError:
                        raise
                    except Exception as exc:
                        raise user_error(
                            NamedStage("Linear[inspect]", self.worker_index),
                            exc,
                            f"an update at time {t!r}",
                        ) from exc
                if sink:
                    produced += len(changes)
                elif out:
                    out += changes
                else:
                    out = changes
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc) from exc
        cap = self._cap
        if sink:
            if produced:
                self._out.push(cap, [None] * produced)
        elif out:
            self._out.push(cap, out)
        self._hold_least()

    def _hold_least(self) -> None:
        """Keep the one capability at the least pending time (none if nothing is pending)."""
        cap = self._cap
        if cap is None:
            return
        pending = self.pending
        internal = self._internal
        if not pending:
            internal.update(cap, -1)
            self._cap = None
        else:
            least = min(pending)
            if least != cap:
                internal.update(least, 1)
                internal.update(cap, -1)
                self._cap = least

    def _emit(self, sums: Dict[Any, int], t: Any) -> List[Any]:
        """The output changes at time ``t`` for the summed input changes ``sums`` (a fresh
        list, which the caller may keep)."""
        raise NotImplementedError

    def _emit_columns(self, sums: Dict[Any, int], t: Any) -> List[Any]:
        """The output changes at time ``t``, which holds columns: summed and compared with
        numpy where the records and counts fit, else by :meth:`_emit`."""
        taken = self._columns.take(t, sums)
        if taken is None:  # the object sums did not fit: the columns were added into them
            return self._emit(sums, t)
        records, summed = taken
        out = self._emit_vector(records, summed, t)
        if out is None:  # a count beyond int64: the object path, with nothing changed yet
            return self._emit(dict(zip(records, summed.tolist())), t)
        return out

    def _emit_vector(self, records: List[Any], sums: Any, t: Any) -> Optional[List[Any]]:
        """The output changes at ``t`` for distinct ``records`` and their non-zero summed
        changes (an ``int64`` array), or None (nothing changed) if they do not fit."""
        raise NotImplementedError


class CountTotal(_TotalReduce):
    """``(record, count)`` for every record with a non-zero count.

    ``pairs`` keeps each record's current ``(record, count)`` tuple: it is both the state and
    the record a later change retracts, so a change builds one pair, not two. A new pair
    reuses the record object of the pair it replaces, not the equal one that just arrived
    (e.g. a word ``split`` made afresh): one object per record lives on, the arrivals are freed
    at once, and consumers comparing the output pairs (dictionaries keyed by them) find the
    records identical without comparing their contents."""

    state_keyed = ("pairs",)

    def __init__(self, scope: "Scope", name: str, stages: Sequence[Tuple[str, Any]] = ()):
        super().__init__(scope, name, stages)
        self.pairs: Dict[Any, Any] = {}

    def _emit(self, sums: Dict[Any, int], t: Any) -> List[Any]:
        pairs = self.pairs
        get = pairs.get
        out: List[Any] = []
        append = out.append
        for d, r in sums.items():
            if r:
                old = get(d)
                if old is None:
                    new = (d, r)
                    pairs[d] = new
                    append((new, t, 1))
                    continue
                c = old[1] + r
                append((old, t, -1))
                if c:
                    new = (old[0], c)  # the record object the state holds: see the class
                    pairs[d] = new
                    append((new, t, 1))
                else:
                    del pairs[d]
        return out

    def _emit_vector(self, records: List[Any], sums: Any, t: Any) -> Optional[List[Any]]:
        return count_changes(records, sums, self.pairs, t)


class ThresholdTotal(_TotalReduce):
    """Every record with the count ``f(record, count)`` (``f`` is called for non-zero
    counts); ``f=None`` is distinct (1 for a positive count, else 0) without a call."""

    state_keyed = ("counts",)

    def __init__(self, scope: "Scope", f: Optional[Callable[[Any, int], int]], name: str):
        super().__init__(scope, name)
        self.f = f
        self.counts: Dict[Any, int] = {}

    def _emit(self, sums: Dict[Any, int], t: Any) -> List[Any]:
        counts, f = self.counts, self.f
        get = counts.get
        out: List[Any] = []
        append = out.append
        for d, r in sums.items():
            if not r:
                continue
            old = get(d, 0)
            new = old + r
            if new:
                counts[d] = new
            else:
                del counts[d]
            if f is None:
                if (old > 0) != (new > 0):
                    append((d, t, 1 if new > 0 else -1))
                continue
            fo = f(d, old) if old else 0
            fn = f(d, new) if new else 0
            if fo != fn:
                append((d, t, fn - fo))
        return out

    def _emit_vector(self, records: List[Any], sums: Any, t: Any) -> Optional[List[Any]]:
        return threshold_changes(records, sums, self.counts, self.f, t)


def count_total(
    updates: Stream, name: str = "CountTotal", stages: Sequence[Tuple[str, Any]] = ()
) -> Stream:
    """The counts of a stream of ``(record, time, diff)`` updates (exchanged by record) as
    ``((record, count), time, diff)``.

    ``stages``: time-preserving linear stages (kinds in :data:`~.fusion.ACCUMULABLE`) to apply
    to ``updates`` first, inside the operator; only on one worker (the exchange routes the
    updates as they arrive, so on several workers the stages must run before it)."""
    if stages and updates.scope.worker.peers != 1:
        raise TimelyError("count_total: linear stages fuse only on one worker")
    op = CountTotal(updates.scope, name, stages)
    updates.connect_to(op, 0, Exchange(record_of_update))
    return Stream(updates.scope, op.output_ports[0])


def threshold_total(
    updates: Stream, f: Optional[Callable[[Any, int], int]], name: str = "ThresholdTotal"
) -> Stream:
    """Each record of a stream of ``(record, time, diff)`` updates (exchanged by record) with
    the count ``f(record, count)`` (``f=None``: distinct)."""
    op = ThresholdTotal(updates.scope, f, name)
    updates.connect_to(op, 0, Exchange(record_of_update))
    return Stream(updates.scope, op.output_ports[0])
