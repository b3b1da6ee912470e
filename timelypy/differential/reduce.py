"""Reduce: per-key group logic, exact at every time, including partially ordered times.

For each key the operator keeps the input and output history. When the input frontier passes
a time ``t`` at which the key may have changed, it evaluates ``logic`` on the input accumulated
at ``t`` and emits the difference from the output accumulated at ``t``. The times to evaluate
are the new update times and, for partially ordered times, their *joins* with the history (seed
002's couch: output can change at a time no input touched). Histories are compacted to the
input frontier after each evaluation, so they stay proportional to the live values.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..dataflow.capability import CapabilitySet
from ..dataflow.operator import OperatorCore
from ..errors import user_error
from ..dataflow.stream import Stream
from ..errors import ReduceOutputError, TimelyError
from ..progress.frontier import Antichain
from .trace import advance_time

__all__ = ["ReduceOperator", "reduce_arranged"]


class ReduceOperator(OperatorCore):
    """Input: batches of an arrangement by key. Output: ``((key, out_val), time, diff)``."""

    def __init__(self, scope: Any, arranged: Any, logic: Callable, name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self.arranged = arranged
        self.logic = logic
        self.in_hist: Dict[Any, List[Tuple[Any, Any, int]]] = {}
        self.out_hist: Dict[Any, List[Tuple[Any, Any, int]]] = {}
        self.pending: Dict[Any, Set[Any]] = {}
        self.pending_times: Dict[Any, Set[Any]] = {}
        self._compacted_sizes: Dict[Tuple[int, Any], int] = {}
        self.caps = CapabilitySet(self.order.le)
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def _add_pending(self, key: Any, t: Any) -> None:
        p = self.pending.get(key)
        if p is None:
            self.pending[key] = {t}
        elif t in p:
            return
        else:
            p.add(t)
        keys = self.pending_times.get(t)
        if keys is None:
            self.pending_times[t] = {key}
        else:
            keys.add(key)

    def schedule(self) -> bool:
        changed = self._apply_frontiers()
        q = self._queue
        received = False
        if q:
            received = True
            consumed = self._consumed
            caps = self.caps
            internal = self.shared.internals[0]
            inputs = self.in_hist
            read = self.arranged.read_batch
            while q:
                time, batches = q.popleft()
                consumed.update(time, len(batches))
                caps.retain(time, internal, 0, self.name)
                for batch in batches:
                    for key, vals in read(batch):
                        hist = inputs.get(key)
                        if hist is None:
                            inputs[key] = list(vals)
                        else:
                            hist.extend(vals)
                        for _, t, _ in vals:
                            self._add_pending(key, t)
        if changed or received:
            self._process()
        return False

    def _process(self) -> None:
        frontier = list(self.input_frontiers[0].frontier)
        le = self.order.le

        beyond = self.input_frontiers[0].less_equal  # t is at or beyond the input frontier

        ready_keys: Set[Any] = set()
        for t, keys in self.pending_times.items():
            if not beyond(t):
                ready_keys.update(keys)
        if not ready_keys:
            return
        output: Dict[Any, List[Any]] = {}
        try:
            for key in ready_keys:
                self._evaluate(key, frontier, beyond, output)
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc) from exc
        caps = self.caps
        for cap_time, data in output.items():
            if data:
                self._out.push(cap_time, data)
        pending_frontier = Antichain(le=le)
        for t in self.pending_times:
            pending_frontier.insert(t)
        caps.downgrade(list(pending_frontier))

    def _evaluate(self, key: Any, frontier: List[Any], beyond: Callable, output: Dict) -> None:
        order = self.order
        le, tjoin = order.le, order.join
        seeds = self.pending.pop(key)
        for t in seeds:
            keys = self.pending_times[t]
            keys.discard(key)
            if not keys:
                del self.pending_times[t]
        hist_in = self.in_hist.get(key, [])
        hist_out = self.out_hist.get(key, [])
        if order.is_total:
            candidates = seeds
        else:
            history_times = {t for _, t, _ in hist_in}
            history_times.update(t for _, t, _ in hist_out)
            candidates = set(seeds)
            frontier_new = set(seeds)
            while frontier_new:
                fresh = set()
                for c in frontier_new:
                    # join(c, x) is c itself when x <= c: skip those (most of the history).
                    for x in history_times:
                        if not le(x, c):
                            j = tjoin(c, x)
                            if j not in candidates:
                                fresh.add(j)
                    for x in candidates:
                        if not le(x, c):
                            j = tjoin(c, x)
                            if j not in candidates:
                                fresh.add(j)
                candidates |= fresh
                frontier_new = fresh
        ready = sorted(t for t in candidates if not beyond(t))
        for t in candidates:
            if beyond(t):
                self._add_pending(key, t)
        if ready:
            out_hist = self.out_hist.setdefault(key, [])
            logic = self.logic
            for t in ready:
                acc: Dict[Any, int] = {}
                for v, t1, r in hist_in:
                    if le(t1, t):
                        acc[v] = acc.get(v, 0) + r
                current: Dict[Any, int] = {}
                for v, t1, r in out_hist:
                    if le(t1, t):
                        current[v] = current.get(v, 0) + r
                group = [(v, r) for v, r in acc.items() if r]
                if group:
                    try:
                        group.sort()
                    except TypeError:
                        group.sort(key=repr)
                    desired = logic(key, group)
                    desired = self._check_output(key, desired)
                else:
                    desired = {}
                for v, r in current.items():
                    if r:
                        d = desired.get(v, 0) - r
                        if d:
                            self._emit(key, v, t, d, out_hist, output)
                for v, r in desired.items():
                    if not current.get(v):
                        self._emit(key, v, t, r, out_hist, output)
        # Compact both histories to the frontier: every later evaluation is at or beyond it.
        self._compact(key, frontier)

    def _emit(self, key, v, t, d, out_hist, output) -> None:
        out_hist.append((v, t, d))
        cap = self.caps.find(t)
        if cap is None:  # pragma: no cover - a bug if it happens
            raise TimelyError(f"reduce {self.name!r}: no capability for time {t!r}")
        bucket = output.get(cap.time)
        if bucket is None:
            output[cap.time] = bucket = []
        bucket.append(((key, v), t, d))

    def _check_output(self, key: Any, desired: Any) -> Dict[Any, int]:
        out: Dict[Any, int] = {}
        try:
            for item in desired:
                v, r = item
                if type(r) is not int:
                    raise TypeError
                if r:
                    out[v] = out.get(v, 0) + r
        except (TypeError, ValueError):
            raise ReduceOutputError(
                f"reduce {self.name!r} on worker {self.worker_index}: logic for key {key!r} "
                f"must return a list of (value, count) pairs with int counts, got {desired!r}"
            ) from None
        return out

    def _compact(self, key: Any, frontier: List[Any]) -> None:
        """Advance a key's histories to the frontier and consolidate them, once they have
        doubled since the last time (amortised O(1) per update; keeps them proportional to the
        live values)."""
        order = self.order
        single = frontier[0] if len(frontier) == 1 and order.is_total else None
        sizes = self._compacted_sizes
        for which, store in enumerate((self.in_hist, self.out_hist)):
            hist = store.get(key)
            if hist is None:
                continue
            size_key = (which, key)
            if len(hist) <= max(4, 2 * sizes.get(size_key, 0)):
                continue
            acc: Dict[Tuple[Any, Any], int] = {}
            for v, t, r in hist:
                if single is not None:
                    if t < single:
                        t = single
                elif frontier:
                    t = advance_time(t, frontier, order.join, order.meet)
                k = (v, t)
                acc[k] = acc.get(k, 0) + r
            new = [(v, t, r) for (v, t), r in acc.items() if r]
            if new:
                store[key] = new
                sizes[size_key] = len(new)
            else:
                del store[key]
                sizes.pop(size_key, None)


def reduce_arranged(arranged: Any, logic: Callable, name: str = "Reduce") -> Any:
    from .collection import Collection

    scope = arranged.scope
    op = ReduceOperator(scope, arranged, logic, name)
    arranged.stream.connect_to(op, 0)
    return Collection(scope, Stream(scope, op.output_ports[0]))


class TotalReduceOperator(OperatorCore):
    """``count`` / ``threshold`` / ``distinct`` for totally ordered times (DD's ``*_total``).

    Input batches of an arrangement by self cover complete times and arrive in time order, so
    each key needs only its current count: for every update the output changes from
    ``f(old)`` to ``f(new)`` at that update's time. O(1) per update, no held capabilities.
    """

    frontier_interest = False

    def __init__(self, scope: Any, arranged: Any, mode: str, f: Optional[Callable], name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        if not scope.order.is_total:
            raise TimelyError(f"{name}: needs totally ordered times (use count/distinct/"
                              f"threshold inside iterative scopes)")
        self.arranged = arranged
        self.mode = mode
        self.f = f
        self.counts: Dict[Any, int] = {}
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        self.shared.frontiers[0].clear()
        q = self._queue
        if not q:
            return False
        counts = self.counts
        mode, f = self.mode, self.f
        read = self.arranged.read_batch
        while q:
            time, batches = q.popleft()
            self._consumed.update(time, len(batches))
            out: List[Any] = []
            append = out.append
            try:
                for batch in batches:
                    for key, vals in read(batch):
                        old = counts.get(key, 0)
                        if len(vals) == 1:
                            steps = [(vals[0][1], vals[0][2])]
                        else:
                            per_time: Dict[Any, int] = {}
                            for _, t, r in vals:
                                per_time[t] = per_time.get(t, 0) + r
                            steps = sorted(per_time.items())
                        for t, delta in steps:
                            if not delta:
                                continue
                            new = old + delta
                            if mode == "count":
                                if old:
                                    append(((key, old), t, -1))
                                if new:
                                    append(((key, new), t, 1))
                            else:
                                fo = f(key, old) if old else 0
                                fn = f(key, new) if new else 0
                                if fo != fn:
                                    append((key, t, fn - fo))
                            old = new
                        if old:
                            counts[key] = old
                        else:
                            counts.pop(key, None)
            except TimelyError:
                raise
            except Exception as exc:
                raise user_error(self, exc) from exc
            if out:
                self._out.push(time, out)
        return False


def total_reduce(arranged: Any, mode: str, f: Optional[Callable], name: str) -> Any:
    from .collection import Collection

    scope = arranged.scope
    op = TotalReduceOperator(scope, arranged, mode, f, name)
    arranged.stream.connect_to(op, 0)
    return Collection(scope, Stream(scope, op.output_ports[0]))
