"""The reduce operator: per-key group logic, exact at every time, including partially ordered times.

For each key the operator keeps the input and output history. When the input frontier passes
a time ``t`` at which the key may have changed, it evaluates ``logic`` on the input accumulated
at ``t`` and emits the difference from the output accumulated at ``t``. The times to evaluate
are the new update times and, for partially ordered times, their *joins* with the history
(output can change at a time no input touched, as in "Differential Dataflow", McSherry et al.,
CIDR 2013). Histories are compacted to the input frontier after each evaluation, so they stay
proportional to the live values.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..dataflow.capability import CapabilitySet
from ..dataflow.channels import Exchange
from ..dataflow.operator import OperatorCore
from ..dataflow.stream import Stream
from ..errors import TimelyError, user_error
from ..order import Product
from ..progress.frontier import Antichain
from .consolidation import advance_and_consolidate
from .reduce_product import (
    ProductReduce,
    ProductReduceUpdates,
    _beyond_test,
    _joins,
    check_output,
    is_product_order,
    place_new_times,
)
from .trace import TraceView

__all__ = [
    "ReduceOperator",
    "count_logic",
    "distinct_logic",
    "is_product_order",
    "reduce_product",
    "reduce_stream",
    "sum_logic",
    "threshold_logic",
    "threshold_product",
]

Group = List[Tuple[Any, int]]
"""``[(value, count), ...]``: a key's values with non-zero counts, sorted by value."""
Logic = Callable[[Any, Group], Group]
"""``logic(key, group)``: the output values of ``key`` with their counts."""
History = List[Tuple[Any, Any, int]]


class ReduceOperator(OperatorCore):
    """Input: batches of an arrangement by key. Output: ``((key, out_val), time, diff)``."""

    def __init__(self, scope: Any, view: TraceView, logic: Logic, name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self.view = view
        self.logic = logic
        self.in_hist: Dict[Any, History] = {}
        self.out_hist: Dict[Any, History] = {}
        self.pending: Dict[Any, Set[Any]] = {}
        self.pending_times: Dict[Any, Set[Any]] = {}
        self._in_sizes: Dict[Any, int] = {}
        self._fresh: Set[Any] = set()  # keys with input since their last evaluation
        self._out_sizes: Dict[Any, int] = {}
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
        """Take arrived batches into the histories; evaluate the keys the frontier passed."""
        changed = self._apply_frontiers()
        q = self._queue
        received = False
        if q:
            received = True
            consumed = self._consumed
            caps = self.caps
            internal = self.shared.internals[0]
            inputs = self.in_hist
            read = self.view.read_batch
            fresh = self._fresh if not self.order.is_total else set()  # total: no closures
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
                        fresh.add(key)
        if changed or received:
            self._process()
        return False

    def _process(self) -> None:
        frontier = list(self.input_frontiers[0].frontier)
        beyond = self.input_frontiers[0].less_equal  # t is at or beyond the input frontier
        ready_keys: Set[Any] = set()
        for t, keys in self.pending_times.items():
            if not beyond(t):
                ready_keys.update(keys)
        if not ready_keys:
            return
        output: Dict[Any, List[Any]] = {}
        key: Any = None
        try:
            for key in ready_keys:
                self._evaluate(key, frontier, beyond, output)
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc, f"key {key!r}") from exc
        for cap_time, data in output.items():
            if data:
                self._out.push(cap_time, data)
        pending_frontier = Antichain(le=self.order.le)
        for t in self.pending_times:
            pending_frontier.insert(t)
        self.caps.downgrade(list(pending_frontier))

    def _evaluate(self, key: Any, frontier: List[Any], beyond: Callable, output: Dict) -> None:
        """Re-evaluate ``key`` at every time the frontier has passed where it may change."""
        seeds = self._take_pending(key)
        hist_in = self.in_hist.get(key, [])
        if self.order.is_total or key not in self._fresh:
            # Without new input the pending times are already closed under joins with the
            # history (they are what is left of the last closure; the outputs since were at
            # times of that closure, and advancing to the frontier commutes with joins).
            candidates = seeds
        else:
            self._fresh.discard(key)
            candidates = self._interesting_times(seeds, hist_in, self.out_hist.get(key))
        ready = []
        for t in candidates:
            if beyond(t):
                self._add_pending(key, t)
            else:
                ready.append(t)
        if ready:
            # Python's order on Products is lexicographic: a linear extension of the product
            # order, so every time is evaluated after the times below it.
            ready.sort()
            out_hist = self.out_hist.get(key)
            if out_hist is None:
                self.out_hist[key] = out_hist = []
            for t in ready:
                self._evaluate_at(key, t, hist_in, out_hist, output)
        # Compact both histories to the frontier: every later evaluation is at or beyond it.
        self._compact(key, frontier)

    def _take_pending(self, key: Any) -> Set[Any]:
        """Remove and return the pending times of ``key``."""
        seeds = self.pending.pop(key)
        pending_times = self.pending_times
        for t in seeds:
            keys = pending_times[t]
            keys.discard(key)
            if not keys:
                del pending_times[t]
        return seeds

    def _interesting_times(
        self, seeds: Set[Any], hist_in: History, hist_out: Optional[History]
    ) -> Set[Any]:
        """The seeds closed under joins with each other and with the history's times.

        ``join(c, x)`` is ``c`` itself when ``x <= c``: a history time below every seed (most
        of the history, once compacted to the frontier) never makes a new candidate, so with
        one seed the history is filtered first and usually nothing is left."""
        le, tjoin = self.order.le, self.order.join
        history = {t for _, t, _ in hist_in}
        if hist_out:
            history.update([t for _, t, _ in hist_out])
        if len(seeds) == 1:
            for s in seeds:
                history = [x for x in history if not le(x, s)]
            if not history:
                return seeds
        else:
            history.difference_update(seeds)
            history = list(history)
        candidates = set(seeds)
        new = list(seeds)
        while new:
            fresh = []
            others = history + list(candidates)
            for c in new:
                for x in others:
                    if not le(x, c):
                        j = tjoin(c, x)
                        if j not in candidates:
                            candidates.add(j)
                            fresh.append(j)
            new = fresh
        return candidates

    def _evaluate_at(
        self, key: Any, t: Any, hist_in: History, out_hist: History, output: Dict
    ) -> None:
        """Emit the difference between ``logic`` on the input at ``t`` and the output at ``t``."""
        le = self.order.le
        acc = _accumulate(hist_in, t, le)
        current = _accumulate(out_hist, t, le)
        group = [(v, r) for v, r in acc.items() if r]
        if group:
            if len(group) > 1:
                try:
                    group.sort()
                except TypeError:
                    group.sort(key=repr)
            desired = self._check_output(key, self.logic(key, group))
        else:
            desired = {}
        changes = []
        for v, r in current.items():
            d = desired.get(v, 0) - r
            if d and r:
                changes.append((v, d))
        for v, r in desired.items():
            if not current.get(v):
                changes.append((v, r))
        if changes:
            self._emit(key, t, changes, out_hist, output)

    def _emit(
        self, key: Any, t: Any, changes: List[Tuple[Any, int]], out_hist: History, output: Dict
    ) -> None:
        cap = self.caps.find(t)
        if cap is None:  # pragma: no cover - a bug if it happens
            raise TimelyError(f"reduce {self.name!r}: no capability for time {t!r}")
        bucket = output.get(cap.time)
        if bucket is None:
            output[cap.time] = bucket = []
        for v, d in changes:
            out_hist.append((v, t, d))
            bucket.append(((key, v), t, d))

    def _check_output(self, key: Any, desired: Any) -> Dict[Any, int]:
        return check_output(self, key, desired)

    def _compact(self, key: Any, frontier: List[Any]) -> None:
        """Advance a key's histories to the frontier and consolidate them, once they have
        doubled since the last time (amortised O(1) per update; keeps them proportional to the
        live values)."""
        for store, sizes in ((self.in_hist, self._in_sizes), (self.out_hist, self._out_sizes)):
            hist = store.get(key)
            if hist is None:
                continue
            n = len(hist)
            if n <= 4:
                if not n:
                    del store[key]
                    sizes.pop(key, None)
                continue
            if n <= 2 * sizes.get(key, 0):
                continue
            new = advance_and_consolidate(hist, frontier, self.order)
            if new:
                store[key] = new
                sizes[key] = len(new)
            else:
                del store[key]
                sizes.pop(key, None)


def _accumulate(hist: History, t: Any, le: Callable) -> Dict[Any, int]:
    """``{value: total}`` over the updates of ``hist`` at times ``<= t`` (zeros kept)."""
    acc: Dict[Any, int] = {}
    for v, u, r in hist:
        if le(u, t):
            acc[v] = acc.get(v, 0) + r
    return acc


def reduce_stream(batches: Stream, view: TraceView, logic: Logic, name: str = "Reduce") -> Stream:
    """Reduce an arrangement by key (its stream of ``batches`` read through ``view``): per
    key, ``logic(key, [(val, count)])`` returns ``[(out_val, count)]``; the output stream
    holds ``((key, out_val), time, diff)``. At ``Product(int, int)`` times the operator is a
    :class:`~.iterate.ProductReduce`."""
    scope = batches.scope
    if is_product_order(scope.order):
        op: OperatorCore = ProductReduce(scope, view, logic, name)
    else:
        op = ReduceOperator(scope, view, logic, name)
    batches.connect_to(op, 0)
    return Stream(scope, op.output_ports[0])


def reduce_product(updates: Stream, logic: Logic, name: str = "Reduce") -> Stream:
    """``reduce`` of a stream of ``((key, val), time, diff)`` at ``Product(int, int)`` times
    (an iterative scope in a root scope) without an arrangement: the updates, exchanged by
    key, go straight into the operator's per-key histories
    (:class:`~.iterate.ProductReduceUpdates`). Output ``((key, out_val), time, diff)``,
    as :func:`reduce_stream` on the collection's arrangement."""
    scope = updates.scope
    _check_product(scope, name)
    op = ProductReduceUpdates(scope, logic, name, keyed=True)
    updates.connect_to(op, 0, Exchange(_key_of_pair))
    return Stream(scope, op.output_ports[0])


def threshold_product(
    updates: Stream, f: Optional[Callable[[Any, int], int]] = None, name: str = "Threshold"
) -> Stream:
    """``threshold`` (``f(record, count)``; ``None``: ``distinct``) of a stream of
    ``(record, time, diff)`` at ``Product(int, int)`` times without an arrangement; output
    ``(record, time, diff)``."""
    scope = updates.scope
    _check_product(scope, name)
    if f is None:
        op: ProductReduceUpdates = ProductDistinct(scope, distinct_logic, name)
    else:
        op = ProductReduceUpdates(scope, threshold_logic(f), name, keyed=False)
    updates.connect_to(op, 0, Exchange(_record_of))
    return Stream(scope, op.output_ports[0])


def _check_product(scope: Any, name: str) -> None:
    if not is_product_order(scope.order):
        raise TimelyError(
            f"{name}: needs Product(int, int) times (an iterative scope in a root scope)"
        )


def _key_of_pair(u: Any) -> Any:
    return u[0][0]


def _record_of(u: Any) -> Any:
    return u[0]


# Group logics of the built-in reductions (keys arranged by self have the single value ``()``).
def count_logic(key: Any, vals: Group) -> Group:
    """``[(count, 1)]``: the count of a record arranged by self."""
    return [(vals[0][1], 1)]


def sum_logic(key: Any, vals: Group) -> Group:
    """``[(total, 1)]``: the sum of ``value * count``."""
    total = 0
    for v, c in vals:
        total += v * c
    return [(total, 1)]


def distinct_logic(key: Any, vals: Group) -> Group:
    """``[((), 1)]`` when a record arranged by self has a positive count."""
    return [((), 1)] if vals[0][1] > 0 else []


def _positive(key: Any, count: int) -> int:
    return 1 if count > 0 else 0


# A logic with ``_threshold = f`` gives a record arranged by self (the single value ``()``) the
# count ``f(record, count)`` (for a non-zero count): reduce at Product(int, int) times evaluates
# it on the count alone (``_distinct``: ``f`` is ``_positive``, inlined).
distinct_logic._threshold = _positive  # type: ignore[attr-defined]
distinct_logic._distinct = True  # type: ignore[attr-defined]


def threshold_logic(f: Callable[[Any, int], int]) -> Logic:
    """The logic giving a record arranged by self the count ``f(record, count)``."""

    def logic(key: Any, vals: Group) -> Group:
        c = f(key, vals[0][1])
        return [((), c)] if c else []

    logic._threshold = f  # type: ignore[attr-defined]
    return logic


# ------------------------------------------------------------------ distinct at Product times
class ProductDistinct(ProductReduceUpdates):
    """``distinct`` of records at ``Product(int, int)`` times, on flat per-key states: an
    iterative reachability evaluates tens of thousands of keys of a large state per round,
    mostly waiting for memory. Each key has ONE flat list of ints in :attr:`state`, ``[size,
    kind, outer, inner, diff, ...]`` (kind 0: input, 1: output; size: its length after its
    last compaction), not five dictionaries and a tuple per update; arriving updates wait in
    :attr:`fresh` until their key is evaluated. The steps are :meth:`_evaluate_keys`'s."""

    def __init__(self, scope: Any, logic: Callable, name: str):
        super().__init__(scope, logic, name, keyed=False)
        self.state: Dict[Any, List[int]] = {}
        self.fresh: Dict[Any, List[int]] = {}

    def _ingest(self, data: List[Any], keyed: bool) -> None:
        _ingest_distinct(self, data)

    def _evaluate_keys(
        self,
        ready: Dict[Any, List[Tuple[int, int]]],
        frontier: List[Tuple[int, int]],
        output: Dict[Any, Any],
    ) -> None:
        _evaluate_distinct(self, ready, frontier, output, _beyond_test(frontier), _joins)

    def _drop_histories(self) -> None:
        self.state.clear()
        self.fresh.clear()


Time = Tuple[int, int]
_tuple_new = tuple.__new__


def _ingest_distinct(op: Any, data: List[Any]) -> None:
    """Take ``(record, time, diff)`` updates: into ``op.fresh`` and the pending times."""
    fresh = op.fresh
    pending = op.pending
    pending_times = op.pending_times
    for key, (a, b), r in data:
        f = fresh.get(key)
        if f is None:
            fresh[key] = [a, b, r]
        else:
            f += (a, b, r)
        t = (a, b)
        p = pending.get(key)
        if p is None:
            pending[key] = {t}
        elif t in p:
            continue
        else:
            p.add(t)
        keys = pending_times.get(t)
        if keys is None:
            op._new_time(t, key)
        else:
            keys.add(key)


def _evaluate_distinct(
    op: Any,
    ready: Dict[Any, List[Time]],
    frontier: List[Time],
    output: Dict[Time, Any],
    beyond: Callable[[int, int], bool],
    joins: Callable[[Set[Time], Set[Time]], Set[Time]],
) -> None:
    """Evaluate every key of ``ready`` at its times the (sorted) ``frontier`` has passed, and
    at the new interesting times it has passed (the others are registered); compact.
    ``beyond(outer, inner)`` tests a time against the frontier; ``joins(fresh, times)`` are
    the joins of every set of times that holds one of ``fresh``."""
    pending = op.pending
    state = op.state
    fresh = op.fresh
    m0, m1 = (frontier[0][0], frontier[-1][1]) if frontier else (0, 0)  # the meet
    for key, times in ready.items():
        p = pending[key]
        if len(p) == len(times):
            del pending[key]
            rest: Optional[Set[Time]] = None
        else:
            rest = p
            p.difference_update(times)
        h = state.get(key)
        stored = h is not None
        if not stored:
            h = [0]
        new = fresh.pop(key, None)
        one = False
        if new is not None and len(new) == 3:
            # One new update, at s: the counts at s, and the times not below s (only their
            # joins with s can be new interesting times).
            s0, s1, c = new
            above: Optional[List[Time]] = None
            have = 0
            it = iter(h)
            next(it)
            for k, a, b, r in zip(it, it, it, it):
                if a <= s0 and b <= s1:
                    if k:
                        have += r
                    else:
                        c += r
                elif above is None:
                    above = [(a, b)]
                else:
                    above.append((a, b))
            h += (0, s0, s1, new[2])
            if (
                above is not None
                or rest
                or len(times) > 1
                or times[0][0] != s0
                or times[0][1] != s1
            ):
                _joins_with_new(op, key, times, rest, above, s0, s1, beyond, joins)
            one = len(times) == 1
        elif new is not None:
            _several_new(op, key, h, new, times, rest, beyond)
        if one and times[0][0] == s0 and times[0][1] == s1:
            # The one time, the new update's, with its counts from the pass above.
            want = (1 if c > 0 else 0) - have
            if want:
                h += (1, s0, s1, want)
                t = times[0]
                bucket = output.get(t)
                if bucket is None:
                    output[t] = bucket = (_tuple_new(Product, t), [])
                bucket[1].append((key, bucket[0], want))
        else:
            _at_times(key, h, times, output)
        if frontier:  # (complete input: the operator drops every state)
            _keep(state, key, h, stored, m0, m1)


def _keep(
    state: Dict[Any, List[int]], key: Any, h: List[int], stored: bool, m0: int, m1: int
) -> None:
    """Store ``key``'s state ``h`` (dropped when empty), compacted once it doubled since its
    last compaction (every later evaluation is at or beyond the frontier, whose meet is
    ``(m0, m1)``)."""
    n = len(h)
    if n > 25 and n > 2 * h[0]:
        h = _compact_quads(h, m0, m1)
        n = len(h)
        if stored:
            state[key] = h
    if n == 1:
        if stored:
            del state[key]
    elif not stored:
        state[key] = h


def _joins_with_new(
    op: Any,
    key: Any,
    times: List[Time],
    rest: Optional[Set[Time]],
    above: Optional[List[Time]],
    s0: int,
    s1: int,
    beyond: Callable[[int, int], bool],
    joins: Callable[[Set[Time], Set[Time]], Set[Time]],
) -> None:
    """The joins of the new update's time ``s`` with the key's times not below it (``above``
    from its history, and its ready and pending times): the passed ones are added to
    ``times``, the others registered as pending."""
    for t in times:
        if t[0] > s0 or t[1] > s1:
            if above is None:
                above = [t]
            else:
                above.append(t)
    if rest:
        for t in rest:
            if t[0] > s0 or t[1] > s1:
                if above is None:
                    above = [t]
                else:
                    above.append(t)
    if above is None:
        return
    if all([a <= s0 for a, _ in above]):
        candidates = {(s0, b) for _, b in above}
    elif all([b <= s1 for _, b in above]):
        candidates = {(a, s1) for a, _ in above}
    else:
        candidates = joins({(s0, s1)}, set(above))
    candidates.add((s0, s1))
    known = set(times)
    if rest:
        known |= rest
    place_new_times(op, key, candidates, known, times, rest, beyond)


def _several_new(
    op: Any,
    key: Any,
    h: List[int],
    new: List[int],
    times: List[Time],
    rest: Optional[Set[Time]],
    beyond: Callable[[int, int], bool],
) -> None:
    """Several new updates of ``key``: append them to ``h`` and find the interesting times
    they make with the general closure (``ProductReduce._new_times``)."""
    hin, hout = _split_quads(h)
    done = len(hin)
    it = iter(new)
    for a, b, r in zip(it, it, it):
        hin.append(((), a, b, r))
        h += (0, a, b, r)
    op._new_times(key, times, rest, hin, hout or None, done, beyond)


def _at_times(key: Any, h: List[int], times: List[Time], output: Dict[Time, Any]) -> None:
    """Evaluate ``key`` at each of ``times``, in lexicographic order (which extends the
    product order: every time after the times below it), appending its output updates."""
    if len(times) > 1:
        times.sort()
    for t in times:
        o, i = t
        c = have = 0
        it = iter(h)
        next(it)
        for k, a, b, r in zip(it, it, it, it):
            if a <= o and b <= i:
                if k:
                    have += r
                else:
                    c += r
        want = (1 if c > 0 else 0) - have
        if want:
            h += (1, o, i, want)
            bucket = output.get(t)
            if bucket is None:
                output[t] = bucket = (_tuple_new(Product, t), [])
            bucket[1].append((key, bucket[0], want))


def _compact_quads(h: List[int], m0: int, m1: int) -> List[int]:
    """A key's flat state advanced to the frontier whose meet is ``(m0, m1)`` (advancing to an
    antichain of ``Product(int, int)`` is the join with its meet) and consolidated; its size
    is its new length."""
    acc: Dict[Tuple[int, int, int], int] = {}
    it = iter(h)
    next(it)
    for k, a, b, r in zip(it, it, it, it):
        key = (k, a if a >= m0 else m0, b if b >= m1 else m1)
        acc[key] = acc.get(key, 0) + r
    out: List[int] = [0]
    for (k, a, b), r in acc.items():
        if r:
            out += (k, a, b, r)
    out[0] = len(out)
    return out


def _split_quads(h: List[int]) -> Tuple[List[Any], List[Any]]:
    """A key's flat state as its input and output histories ``[((), outer, inner, diff)]``."""
    hin: List[Any] = []
    hout: List[Any] = []
    it = iter(h)
    next(it)
    for k, a, b, r in zip(it, it, it, it):
        (hout if k else hin).append(((), a, b, r))
    return hin, hout
