"""Reductions for totally ordered times: count and threshold (distinct) in O(1) per update.

As differential-dataflow's ``count_total`` and ``threshold_total``: input batches of an
arrangement by self cover complete times and arrive in time order, so each key needs only its
current count, and for every update the output changes from ``f(old)`` to ``f(new)`` at that
update's time. No history, no held capabilities.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from ..dataflow.operator import OperatorCore
from ..dataflow.stream import Stream
from ..errors import TimelyError, user_error
from .consolidation import accumulate
from .trace import Batch, TraceView

__all__ = ["CountTotal", "ThresholdTotal", "count_total", "threshold_total"]

Steps = List[Tuple[Any, int]]


def _steps(vals: List[Tuple[Any, Any, int]]) -> Steps:
    """A key's ``(time, change of count)`` in time order (several times in one batch)."""
    return sorted(accumulate((t, r) for _, t, r in vals).items())


class _TotalReduce(OperatorCore):
    """Shared plumbing: read every batch as it arrives, push the changes at its time."""

    frontier_interest = False

    def __init__(self, scope: Any, view: TraceView, name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        if not scope.order.is_total:
            raise TimelyError(f"{name}: needs totally ordered times (use count/distinct/"
                              f"threshold inside iterative scopes)")
        self.view = view
        self.counts: Dict[Any, int] = {}
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Apply every arrived batch to the counts; push the output changes at its time."""
        self.shared.frontiers[0].clear()
        q = self._queue
        while q:
            time, batches = q.popleft()
            self._consumed.update(time, len(batches))
            out: List[Any] = []
            try:
                for batch in batches:
                    self._apply(batch, out)
            except TimelyError:
                raise
            except Exception as exc:
                raise user_error(self, exc) from exc
            if out:
                self._out.push(time, out)
        return False

    def _apply(self, batch: Batch, out: List[Any]) -> None:
        raise NotImplementedError


class CountTotal(_TotalReduce):
    """``(record, count)`` for every record with a non-zero count."""

    def _apply(self, batch: Batch, out: List[Any]) -> None:
        counts = self.counts
        append = out.append
        for key, vals in self.view.read_batch(batch):
            old = counts.get(key, 0)
            for t, delta in ((vals[0][1], vals[0][2]),) if len(vals) == 1 else _steps(vals):
                if not delta:
                    continue
                new = old + delta
                if old:
                    append(((key, old), t, -1))
                if new:
                    append(((key, new), t, 1))
                old = new
            if old:
                counts[key] = old
            else:
                counts.pop(key, None)


class ThresholdTotal(_TotalReduce):
    """Every record with the count ``f(record, count)`` (``f`` is called for non-zero
    counts)."""

    def __init__(self, scope: Any, view: TraceView, f: Callable[[Any, int], int], name: str):
        super().__init__(scope, view, name)
        self.f = f

    def _apply(self, batch: Batch, out: List[Any]) -> None:
        counts, f = self.counts, self.f
        append = out.append
        for key, vals in self.view.read_batch(batch):
            old = counts.get(key, 0)
            for t, delta in ((vals[0][1], vals[0][2]),) if len(vals) == 1 else _steps(vals):
                if not delta:
                    continue
                new = old + delta
                fo = f(key, old) if old else 0
                fn = f(key, new) if new else 0
                if fo != fn:
                    append((key, t, fn - fo))
                old = new
            if old:
                counts[key] = old
            else:
                counts.pop(key, None)


def count_total(batches: Stream, view: TraceView, name: str = "CountTotal") -> Stream:
    """The counts of an arrangement by self (its stream of ``batches`` read through ``view``)
    as ``((record, count), time, diff)``."""
    op = CountTotal(batches.scope, view, name)
    batches.connect_to(op, 0)
    return Stream(batches.scope, op.output_ports[0])


def threshold_total(batches: Stream, view: TraceView, f: Callable[[Any, int], int],
                    name: str = "ThresholdTotal") -> Stream:
    """Each record of an arrangement by self with the count ``f(record, count)``."""
    op = ThresholdTotal(batches.scope, view, f, name)
    batches.connect_to(op, 0)
    return Stream(batches.scope, op.output_ports[0])
