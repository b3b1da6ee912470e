"""The reduce operator: per-key group logic, exact at every time, including partially ordered times.

For each key the operator keeps the input and output history. When the input frontier passes
a time ``t`` at which the key may have changed, it evaluates ``logic`` on the input accumulated
at ``t`` and emits the difference from the output accumulated at ``t``. The times to evaluate
are the new update times and, for partially ordered times, their *joins* with the history
(output can change at a time no input touched, as in "Differential Dataflow", McSherry et al.,
CIDR 2013). Histories are compacted to the input frontier after each evaluation, so they stay
proportional to the live values.

At totally ordered times, reduce with :func:`~.logic.sum_logic` reads large column batches
(:class:`~timelypy.differential.trace.column_batch.ColumnBatch` of ``int`` values) with numpy
(:mod:`.column_sum`): such a batch waits, in arrival order, until the input frontier has passed
its times, and is then evaluated for all its keys at once. Smaller batches, and every other
logic, take the object path (per key, as above); both give the same output and leave the same
state. ``column_batches`` and ``object_batches`` count the batches each path took.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Deque, Dict, List, Optional, Set, Tuple, Union

from ...dataflow.capability import CapabilitySet
from ...dataflow.operator import OperatorCore
from ...dataflow.state import KeyedState, future_pieces
from ...dataflow.stream import Stream
from ...errors import TimelyError, user_error
from ...instrument import PathCounted
from ...progress.frontier import Antichain
from ..consolidation import advance_and_consolidate
from ..kernel.histories import accumulate, close_under_joins
from .column_sum import sum_column_batch, sum_columns_fit
from .common import Logic, check_output, is_product_order, sorted_group
from .logic import GroupLogic, as_group_logic, sum_logic
from .product import ProductReduce

if TYPE_CHECKING:
    from ...dataflow.scope import Scope
    from ..trace import TraceView

__all__ = ["ReduceOperator", "reduce_stream"]

History = List[Tuple[Any, Any, int]]
"""A key's history at any order: ``[(val, time, diff), ...]``."""
TimedOutput = Dict[Any, List[Any]]
"""Per capability time, the output updates ``((key, val), time, diff)`` to send at it."""


class ReduceOperator(KeyedState, OperatorCore):
    """Input: batches of an arrangement by key. Output: ``((key, out_val), time, diff)``.

    Stateful: its input and output histories per key, and the pending times of each key
    (at a closed time only times at or beyond the input frontier are pending). Column batches
    waiting for the frontier (see the module) join the histories before a snapshot.

    Example: ``prices.sum()`` runs one (at ``int`` times, large batches of ``int`` prices on
    the column path: ``column_batches`` counts them)."""

    state_keyed = ("in_hist", "out_hist", "_in_sizes", "_out_sizes")

    column_min = 4096
    """The least updates of a column batch the column path takes: below it the object path
    costs as little or less (batches of changes to keys that hold state break even at a few
    thousand updates; loads of new keys gain from far fewer; ``benchmarks/reduce_columns.py``
    measures both paths)."""

    def __init__(
        self, scope: "Scope", view: "TraceView", logic: Union[Logic, GroupLogic], name: str
    ):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self.view = view
        self.logic: Logic = as_group_logic(logic).fn
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
        self.column_batches = 0
        """Batches evaluated on the column path."""
        self.object_batches = 0
        """Batches taken into the histories on the object path."""
        instruments = scope.worker.instruments
        if instruments.enabled:
            instruments.emit(
                PathCounted(scope.worker.index, self.subgraph.name, self.index, self.name, self)
            )
        self._columns = (
            self.order.is_total
            and self.logic is sum_logic
            and view.pred is None
            and view.time_map is None
        )
        """Does this operator read column batches (total order, ``sum_logic``, plain view)?"""
        self._deferred: Deque[Tuple[Any, Any]] = deque()
        """``(message time, batch)`` not yet taken, in arrival order (column batches waiting
        for the frontier, and every batch after the first of them)."""

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

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """The pending times per key, ``(key, "pending", [(time, None), ...])``."""
        return future_pieces(
            self._state_owner(),
            "pending",
            ((key, t, None) for key, times in self.pending.items() for t in times),
            self.input_frontiers[0].less_equal,
        )

    def restore_future(self, key: Any, name: str, entries: Any) -> bool:
        """Take back a key's pending times (the key is evaluated afresh at them)."""
        if name != "pending":
            return False
        for t, _ in entries:
            self._add_pending(key, t)
        self._fresh.add(key)
        return True

    def hold_future(self) -> None:
        """Hold capabilities at the least restored pending times."""
        times = Antichain(le=self.order.le)
        for t in self.pending_times:
            times.insert(t)
        internal = self.shared.internals[0]
        for t in times:
            self.caps.retain(t, internal, 0, self.name)

    def snapshot_state(self) -> Any:
        """The keyed state, with the waiting column batches taken into the histories first."""
        while self._deferred:
            self._take(self._deferred.popleft()[1])
        return super().snapshot_state()

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
            deferred = self._deferred
            columns, least = self._columns, self.column_min
            while q:
                time, batches = q.popleft()
                consumed.update(time, len(batches))
                caps.retain(time, internal, 0, self.name)
                for batch in batches:
                    if deferred or (columns and sum_columns_fit(batch, least)):
                        deferred.append((time, batch))
                    else:
                        self._take(batch)
        if changed or received:
            self._process()
            if self._deferred:
                self._drain()
        return False

    def _take(self, batch: Any) -> None:
        """The object path: a batch's updates into the histories, their times pending."""
        self.object_batches += 1
        inputs = self.in_hist
        fresh = self._fresh if not self.order.is_total else set()  # total: no closures
        for key, vals in self.view.read_batch(batch):
            hist = inputs.get(key)
            if hist is None:
                inputs[key] = list(vals)
            else:
                hist.extend(vals)
            for _, t, _ in vals:
                self._add_pending(key, t)
            fresh.add(key)

    def _drain(self) -> None:
        """Take the waiting batches in order: a column batch once the input frontier has
        passed its times and every earlier time is evaluated (else on the object path, if
        an earlier time is still pending), an object batch as it comes."""
        frontier = self.input_frontiers[0].frontier
        bound = frontier[0] if frontier else None
        deferred = self._deferred
        taken = False
        while deferred:
            time, batch = deferred[0]
            if not sum_columns_fit(batch, self.column_min):
                deferred.popleft()
                self._take(batch)
                taken = True
                continue
            if bound is not None and int(batch.times.max()) >= bound:
                break
            if taken:
                self._process()
                taken = False
            deferred.popleft()
            if not self.pending_times and self._sum_columns(time, batch):
                continue
            self._take(batch)
            taken = True
        if taken:
            self._process()
        self._hold()

    def _sum_columns(self, time: Any, batch: Any) -> bool:
        """Evaluate a column batch at once (False: a key's state does not fit; untouched)."""
        try:
            out = sum_column_batch(
                batch, self.in_hist, self.out_hist, self._in_sizes, self._out_sizes
            )
        except TimelyError:
            raise
        except Exception as exc:
            raise user_error(self, exc, f"a column batch at time {time!r}") from exc
        if out is None:
            return False
        self.column_batches += 1
        if out:
            cap = self.caps.find(time)
            if cap is None:  # pragma: no cover - a bug if it happens
                raise TimelyError(f"reduce {self.name!r}: no capability for time {time!r}")
            self._out.push(cap.time, out)
        return True

    def _process(self) -> None:
        frontier = list(self.input_frontiers[0].frontier)
        beyond = self.input_frontiers[0].less_equal  # t is at or beyond the input frontier
        ready_keys: Set[Any] = set()
        for t, keys in self.pending_times.items():
            if not beyond(t):
                ready_keys.update(keys)
        if not ready_keys:
            return
        output: TimedOutput = {}
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
        self._hold()

    def _hold(self) -> None:
        """Hold capabilities at the least pending times and waiting batches' times only."""
        pending_frontier = Antichain(le=self.order.le)
        for t in self.pending_times:
            pending_frontier.insert(t)
        for t, _ in self._deferred:
            pending_frontier.insert(t)
        self.caps.downgrade(list(pending_frontier))

    def _evaluate(
        self, key: Any, frontier: List[Any], beyond: Callable[[Any], bool], output: TimedOutput
    ) -> None:
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
        """The seeds closed under joins with each other and with the history's times."""
        history = [t for _, t, _ in hist_in]
        if hist_out:
            history += [t for _, t, _ in hist_out]
        return close_under_joins(seeds, history, self.order.le, self.order.join)

    def _evaluate_at(
        self, key: Any, t: Any, hist_in: History, out_hist: History, output: TimedOutput
    ) -> None:
        """Emit the difference between ``logic`` on the input at ``t`` and the output at ``t``."""
        le = self.order.le
        acc = accumulate(hist_in, t, le)
        current = accumulate(out_hist, t, le)
        group = sorted_group(acc)
        if group:
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
        self,
        key: Any,
        t: Any,
        changes: List[Tuple[Any, int]],
        out_hist: History,
        output: TimedOutput,
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


def reduce_stream(
    batches: Stream, view: "TraceView", logic: Union[Logic, GroupLogic], name: str = "Reduce"
) -> Stream:
    """Reduce an arrangement by key (its stream of ``batches`` read through ``view``): per
    key, ``logic(key, [(val, count)])`` returns ``[(out_val, count)]``; the output stream
    holds ``((key, out_val), time, diff)``. At ``Product(int, int)`` times the operator is a
    :class:`~.product.ProductReduce`."""
    scope = batches.scope
    if is_product_order(scope.order):
        op: OperatorCore = ProductReduce(scope, view, logic, name)
    else:
        op = ReduceOperator(scope, view, logic, name)
    batches.connect_to(op, 0)
    return Stream(scope, op.output_ports[0])
