"""The join operator: each new batch of one arrangement joined with the other's accepted trace.

Every pair of updates with equal keys is joined exactly once (when the later one is accepted):
output ``(f(key, v1, v2), join(t1, t2), d1 * d2)`` (differential-dataflow's ``join_core``).
Readers acknowledge batch sequence numbers, and traces only merge batches every reader has
acknowledged. What a matching pair produces is a *product*: :func:`pairs`,
:func:`semijoin_pairs`, :func:`mapped` or :func:`core`.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..dataflow.operator import OperatorCore
from ..dataflow.stream import Stream
from ..errors import TimelyError, user_error
from .agent import TraceAgent
from .trace import Batch, TraceView, wrap_items

__all__ = ["JoinOperator", "JoinProduct", "core", "join_streams", "mapped", "pairs",
           "semijoin_pairs"]

Vals = List[Tuple[Any, Any, int]]
Kernel = Callable[[Any, Vals, Vals, List[Any]], None]
"""``kernel(key, mine, theirs, out)``: append the outputs of every pair of ``mine`` (the new
batch's updates of ``key``) and ``theirs`` (the other trace's) to ``out``."""
JoinProduct = Callable[[Any, bool, Optional[Callable]], Kernel]
"""``product(order, first, logic)``: the kernel for a batch of the first (or second) input."""


# One comprehension per key and product (the hot loop of every join).
def pairs(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``(key, (v1, v2))`` for every matching pair."""
    tjoin = order.join
    if order.is_total:
        if first:
            def kernel(key, vals, merged, out):
                out.extend([((key, (v, v2)), t if t >= t2 else t2, r * r2)
                            for v, t, r in vals for v2, t2, r2 in merged])
        else:
            def kernel(key, vals, merged, out):
                out.extend([((key, (v2, v)), t if t >= t2 else t2, r * r2)
                            for v, t, r in vals for v2, t2, r2 in merged])
    elif first:
        def kernel(key, vals, merged, out):
            out.extend([((key, (v, v2)), tjoin(t, t2), r * r2)
                        for v, t, r in vals for v2, t2, r2 in merged])
    else:
        def kernel(key, vals, merged, out):
            out.extend([((key, (v2, v)), tjoin(t, t2), r * r2)
                        for v, t, r in vals for v2, t2, r2 in merged])
    return kernel


def semijoin_pairs(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``(key, v1)`` for every pair of ``(key, v1)`` (first input) and a key (second input)."""
    tjoin = order.join
    if first:
        def kernel(key, vals, merged, out):
            out.extend([((key, v), tjoin(t, t2), r * r2)
                        for v, t, r in vals for _, t2, r2 in merged])
    else:
        def kernel(key, vals, merged, out):
            out.extend([((key, v2), tjoin(t, t2), r * r2)
                        for _, t, r in vals for v2, t2, r2 in merged])
    return kernel


def mapped(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """``logic(key, v1, v2)`` for every matching pair."""
    tjoin = order.join
    if first:
        def kernel(key, vals, merged, out):
            out.extend([(logic(key, v, v2), tjoin(t, t2), r * r2)
                        for v, t, r in vals for v2, t2, r2 in merged])
    else:
        def kernel(key, vals, merged, out):
            out.extend([(logic(key, v2, v), tjoin(t, t2), r * r2)
                        for v, t, r in vals for v2, t2, r2 in merged])
    return kernel


def core(order: Any, first: bool, logic: Optional[Callable] = None) -> Kernel:
    """Every record of the iterable ``logic(key, v1, v2)`` for every matching pair."""
    tjoin = order.join

    def kernel(key, vals, merged, out):
        append = out.append
        for v, t, r in vals:
            for v2, t2, r2 in merged:
                tt, rr = tjoin(t, t2), r * r2
                for x in (logic(key, v, v2) if first else logic(key, v2, v)):
                    append((x, tt, rr))
    return kernel


class JoinOperator(OperatorCore):
    """Joins two arrangements: each new batch of one input against the other's trace as
    accepted so far, so that every pair of updates is joined exactly once."""

    def __init__(self, scope: Any, a: TraceView, b: TraceView, product: JoinProduct,
                 logic: Optional[Callable], name: str):
        super().__init__(scope, name, 2, 1, initial_capabilities=False)
        self.a, self.b = a, b
        self.kernels = (product(self.order, True, logic), product(self.order, False, logic))
        self.ha = TraceAgent(a.spine)
        self.hb = TraceAgent(b.spine)
        self.ack_a = 0
        self.ack_b = 0
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Join every arrived batch with the other trace; acknowledge it; release holds."""
        changed = self._apply_frontiers()
        out = self._out
        for side in (0, 1):
            q = self.input_ports[side].queue
            if not q:
                continue
            consumed = self.shared.consumeds[side]
            while q:
                time, batches = q.popleft()
                consumed.update(time, len(batches))
                for batch in batches:
                    try:
                        result = self._join_batch(side, batch)
                    except TimelyError:
                        raise
                    except Exception as exc:
                        raise user_error(self, exc, f"a batch at time {time!r}") from exc
                    if side == 0:
                        self.ack_a = batch.seq
                    else:
                        self.ack_b = batch.seq
                    if result:
                        out.push(time, result)
        acked = self.ack_a != self.ha.through_seq or self.ack_b != self.hb.through_seq
        self.ha.acknowledge(self.ack_a)
        self.hb.acknowledge(self.ack_b)
        if changed or acked:
            self._release()
        return False

    def _release(self) -> None:
        """Trace a is only ever joined with future b updates, and vice versa: let each trace
        compact up to the other input's frontier."""
        fa, fb = self.input_frontiers[0].frontier, self.input_frontiers[1].frontier
        if not fa and not fb:
            self.ha.close()
            self.hb.close()
            return
        self.ha.set_logical_compaction(self.a.unmap_frontier(fb) if fb else [])
        self.hb.set_logical_compaction(self.b.unmap_frontier(fa) if fa else [])
        self.a.spine.maintain()
        if self.b.spine is not self.a.spine:
            self.b.spine.maintain()

    def _join_batch(self, side: int, batch: Batch) -> List[Any]:
        if side == 0:
            mine, other, ack = self.a, self.b, self.ack_b
        else:
            mine, other, ack = self.b, self.a, self.ack_a
        others = other.spine.batches_through(ack)
        if not others:
            return []
        opred, otm = other.pred, other.time_map
        out: List[Any] = []
        kernel = self.kernels[side]
        for key, vals in mine.read_batch(batch):
            lists = []
            for ob in others:
                ov = ob.data.get(key)
                if ov:
                    lists.append(ov)
            if not lists:
                continue
            if opred is not None or otm is not None:
                lists = [ov for _, ov in wrap_items([(key, l) for l in lists], opred, otm)]
                if not lists:
                    continue
            if len(lists) > 1:
                merged = []
                for ov in lists:
                    merged.extend(ov)
            else:
                merged = lists[0]
            kernel(key, vals, merged, out)
        return out


def join_streams(a: Tuple[Stream, TraceView], b: Tuple[Stream, TraceView], product: JoinProduct,
                 logic: Optional[Callable], name: str) -> Stream:
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

