"""Join: two arrangements, each new batch of one joined with the other's trace as accepted so far.

Every pair of updates with equal keys is joined exactly once (when the later one is accepted):
output ``(f(key, v1, v2), join(t1, t2), d1 * d2)``. Readers acknowledge batch sequence numbers,
and traces only merge batches every reader has acknowledged.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from ..dataflow.operator import OperatorCore
from ..errors import user_error
from ..dataflow.stream import Stream
from ..errors import TimelyError
from .arrange import Arranged, wrap_items
from .trace import Batch

__all__ = ["JoinOperator", "join_arranged"]


class JoinOperator(OperatorCore):
    """Joins two arrangements: each new batch of one input against the other's trace as
    accepted so far, so that every pair of updates is joined exactly once."""

    def __init__(self, scope: Any, a: Arranged, b: Arranged, mode: str, logic: Optional[Callable],
                 name: str):
        super().__init__(scope, name, 2, 1, initial_capabilities=False)
        self.a, self.b = a, b
        self.mode = mode
        self.logic = logic
        self.ha = a.spine.handle()
        self.hb = b.spine.handle()
        self.ack_a = 0
        self.ack_b = 0
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
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
            # Trace a is only ever joined with future b updates, and vice versa.
            fa, fb = self.input_frontiers[0].frontier, self.input_frontiers[1].frontier
            if not fa and not fb:
                self.ha.close()
                self.hb.close()
                return False
            self.ha.set_logical_compaction(self._unmap(self.a, fb) if fb else [])
            self.hb.set_logical_compaction(self._unmap(self.b, fa) if fa else [])
            self.a.spine.maintain()
            if self.b.spine is not self.a.spine:
                self.b.spine.maintain()
        return False

    @staticmethod
    def _unmap(arr: Arranged, frontier: List[Any]) -> List[Any]:
        if arr.frontier_unmap is None:
            return list(frontier)
        return [arr.frontier_unmap(t) for t in frontier]

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
        append = out.append
        total = self.order.is_total
        tjoin = self.order.join
        mode = self.mode
        logic = self.logic
        first = side == 0
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
            if len(lists) > 1:
                merged = []
                for ov in lists:
                    merged.extend(ov)
            else:
                merged = lists[0]
            # One comprehension per key and mode (the hot loop of every join).
            if mode == "join":
                if total:
                    if first:
                        out.extend([((key, (v, v2)), t if t >= t2 else t2, r * r2)
                                    for v, t, r in vals for v2, t2, r2 in merged])
                    else:
                        out.extend([((key, (v2, v)), t if t >= t2 else t2, r * r2)
                                    for v, t, r in vals for v2, t2, r2 in merged])
                elif first:
                    out.extend([((key, (v, v2)), tjoin(t, t2), r * r2)
                                for v, t, r in vals for v2, t2, r2 in merged])
                else:
                    out.extend([((key, (v2, v)), tjoin(t, t2), r * r2)
                                for v, t, r in vals for v2, t2, r2 in merged])
            elif mode == "semijoin":
                if first:
                    out.extend([((key, v), tjoin(t, t2), r * r2)
                                for v, t, r in vals for _, t2, r2 in merged])
                else:
                    out.extend([((key, v2), tjoin(t, t2), r * r2)
                                for _, t, r in vals for v2, t2, r2 in merged])
            elif mode == "map":
                if first:
                    out.extend([(logic(key, v, v2), tjoin(t, t2), r * r2)
                                for v, t, r in vals for v2, t2, r2 in merged])
                else:
                    out.extend([(logic(key, v2, v), tjoin(t, t2), r * r2)
                                for v, t, r in vals for v2, t2, r2 in merged])
            else:
                for v, t, r in vals:
                    for v2, t2, r2 in merged:
                        tt, rr = tjoin(t, t2), r * r2
                        for x in (logic(key, v, v2) if first else logic(key, v2, v)):
                            append((x, tt, rr))
        return out


def join_arranged(a: Arranged, b: Any, mode: str, logic: Optional[Callable], name: str) -> Any:
    """Join two arrangements (a collection ``b`` is arranged first) with the given mode."""
    from .collection import Collection

    if not isinstance(b, Arranged):
        b = b.arrange_by_self() if mode == "semijoin" else b.arrange_by_key()
    if a.scope.subgraph is not b.scope.subgraph:
        raise TimelyError(f"{name}: arrangements are in different scopes; use enter")
    scope = a.scope
    op = JoinOperator(scope, a, b, mode, logic, name)
    a.stream.connect_to(op, 0)
    b.stream.connect_to(op, 1)
    return Collection(scope, Stream(scope, op.output_ports[0]))
