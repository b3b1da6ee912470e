"""Reductions for totally ordered times: count, distinct and threshold in O(1) per update.

As differential-dataflow's ``count_total`` and ``threshold_total``, with the arrangement that
would feed them fused in: the operator takes ``(record, time, diff)`` updates (exchanged by
record) and sums them per time and record as they arrive (one dict update each, no per-update
tuples). When the input frontier passes a time, every record whose count changed at that time
costs one dict update of its current count and its output changes from ``f(old)`` to
``f(new)``. No history, no trace; one capability, at the least pending time.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional

from ..dataflow.channels import Exchange
from ..dataflow.operator import OperatorCore
from ..dataflow.stream import Stream
from ..errors import TimelyError, unhashable_error, user_error

__all__ = ["CountTotal", "ThresholdTotal", "count_total", "threshold_total"]


_NO_TIME = object()


def _data_of(u: Any) -> Any:
    return u[0]


class _TotalReduce(OperatorCore):
    """Shared plumbing: sum arrived updates per time and record; when the input frontier
    passes a time, turn its sums into output changes (in time order)."""

    def __init__(self, scope: Any, name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        if not scope.order.is_total:
            raise TimelyError(f"{name}: needs totally ordered times (use count/distinct/"
                              f"threshold inside iterative scopes)")
        self.pending: Dict[Any, Dict[Any, int]] = {}
        """``time -> {record: summed diff}`` for times the input frontier has not passed."""
        self._cap: Optional[Any] = None
        """The time of the one capability held (the least pending time), or None."""
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._internal = self.shared.internals[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Sum arrived updates; emit the changes at times the input frontier has passed."""
        changed = self._apply_frontiers()
        q = self._queue
        if q:
            consumed = self._consumed.counts  # ChangeBatch.update inlined (len(data) > 0)
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
                try:
                    self._accept(data)
                except TypeError as exc:
                    raise unhashable_error(self, (u[0] for u in data)) from exc
        if changed and self.pending:
            self._release()
        return False

    def _accept(self, data: List[Any]) -> None:
        """Add every ``(record, time, diff)`` of ``data`` to the sums of its time."""
        pending = self.pending
        last: Any = _NO_TIME
        acc: Dict[Any, int] = {}
        for d, t, r in data:
            if t != last:
                acc = pending.get(t)
                if acc is None:
                    acc = pending[t] = defaultdict(int)
                last = t
            acc[d] += r

    def _release(self) -> None:
        """Emit the changes at the pending times the input frontier has passed (in time
        order, at the held capability); keep the capability at the least time left."""
        frontier = self.input_frontiers[0].frontier
        pending = self.pending
        if frontier:
            bound = frontier[0]
            ready = [t for t in pending if t < bound]
            if not ready:
                return
            if len(ready) > 1:
                ready.sort()
        else:
            ready = sorted(pending)
        out: List[Any] = []
        try:
            for t in ready:
                self._emit(pending.pop(t), t, out)
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc) from exc
        cap = self._cap
        if out:
            self._out.push(cap, out)
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

    def _emit(self, sums: Dict[Any, int], t: Any, out: List[Any]) -> None:
        raise NotImplementedError


class CountTotal(_TotalReduce):
    """``(record, count)`` for every record with a non-zero count.

    ``pairs`` keeps each record's current ``(record, count)`` tuple: it is both the state and
    the record a later change retracts, so a change builds one pair, not two."""

    def __init__(self, scope: Any, name: str):
        super().__init__(scope, name)
        self.pairs: Dict[Any, Any] = {}

    def _emit(self, sums: Dict[Any, int], t: Any, out: List[Any]) -> None:
        pairs = self.pairs
        get = pairs.get
        append, extend = out.append, out.extend
        for d, r in sums.items():
            if r:
                old = get(d)
                if old is None:
                    new = (d, r)
                    pairs[d] = new
                    append((new, t, 1))
                    continue
                c = old[1] + r
                if c:
                    new = (d, c)
                    pairs[d] = new
                    extend(((old, t, -1), (new, t, 1)))
                else:
                    del pairs[d]
                    append((old, t, -1))


class ThresholdTotal(_TotalReduce):
    """Every record with the count ``f(record, count)`` (``f`` is called for non-zero
    counts); ``f=None`` is distinct (1 for a positive count, else 0) without a call."""

    def __init__(self, scope: Any, f: Optional[Callable[[Any, int], int]], name: str):
        super().__init__(scope, name)
        self.f = f
        self.counts: Dict[Any, int] = {}

    def _emit(self, sums: Dict[Any, int], t: Any, out: List[Any]) -> None:
        counts, f = self.counts, self.f
        get = counts.get
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


def count_total(updates: Stream, name: str = "CountTotal") -> Stream:
    """The counts of a stream of ``(record, time, diff)`` updates (exchanged by record) as
    ``((record, count), time, diff)``."""
    op = CountTotal(updates.scope, name)
    updates.connect_to(op, 0, Exchange(_data_of))
    return Stream(updates.scope, op.output_ports[0])


def threshold_total(updates: Stream, f: Optional[Callable[[Any, int], int]],
                    name: str = "ThresholdTotal") -> Stream:
    """Each record of a stream of ``(record, time, diff)`` updates (exchanged by record) with
    the count ``f(record, count)`` (``f=None``: distinct)."""
    op = ThresholdTotal(updates.scope, f, name)
    updates.connect_to(op, 0, Exchange(_data_of))
    return Stream(updates.scope, op.output_ports[0])
