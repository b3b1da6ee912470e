"""Reduce at ``Product(int, int)`` times: the hot operator of iterative programs.

:class:`ProductReduce` (fed by an arrangement's batches) and :class:`ProductReduceUpdates` (fed
by a collection's updates, without an arrangement) are the reduce operator at the times of an
iterative scope in a root scope, the hot case of iterative programs (built by
``reduce_stream``, :func:`reduce_product` and ``threshold_product``). Per key, as
:class:`~.general.ReduceOperator`: input and output histories, evaluated at the times the input
frontier has passed where the output may change, the new update times and their joins with the
histories (differential dataflow's *interesting times*). What differs:

* Histories are lists of flat ``(val, outer, inner, diff)`` tuples: one tuple per update, which
  the garbage collector stops tracking (it holds ints and, for keys arranged by self, ``()``).
  Pending times are plain ``(outer, inner)`` pairs; output and capabilities get Products.
* A key's input history grows by appending, so the updates that arrived since its last
  evaluation are the tail past ``_seen[key]``: only the joins that involve their times can be
  new interesting times (the pending times are closed under joins with the rest), and one new
  update whose time is above every other time of the key (the common case) makes none.
* A key's pending times stay registered until the frontier passes them (no re-registering
  per evaluation), and the ready ones are found per time, not per key.
* ``distinct`` and ``threshold`` (records arranged by self: the single value ``()``, declared by
  a :class:`~.logic.GroupLogic`) evaluate on a count instead of a group.
* The loops over a key's history are the kernels of :mod:`~timelypy.differential.kernel.histories`.
* Output goes out as one message per held capability per activation.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

from ...dataflow.capability import CapabilitySet
from ...dataflow.channels import Exchange
from ...dataflow.operator import OperatorCore
from ...dataflow.state import KeyedState, future_pieces
from ...dataflow.stream import Stream
from ...errors import TimelyError, unhashable_error, user_error
from ...order import Product
from ..kernel.histories import (
    accumulate_at,
    closure,
    compact_flat,
    count_and_above,
    count_at,
    joins_with_one,
    minimal,
)
from .common import (
    History,
    Logic,
    Output,
    Time,
    beyond_test,
    check_output,
    check_product,
    place_new_times,
    sorted_group,
)
from .logic import GroupLogic, as_group_logic

if TYPE_CHECKING:
    from ...dataflow.scope import Scope
    from ..trace import TraceView

__all__ = ["ProductReduce", "ProductReduceUpdates", "pending_set", "reduce_product"]

_tuple_new = tuple.__new__


class ProductReduce(KeyedState, OperatorCore):
    """Input: batches of an arrangement by key (read through ``view``). Output:
    ``((key, out_val), time, diff)``.

    Stateful: its histories per key, and its pending times per key (at a closed time only
    times whose outer coordinate is at or after it: a temporal filter's, in a loop's body)."""

    state_keyed: Tuple[str, ...] = ("in_hist", "out_hist", "_in_sizes", "_out_sizes", "_seen")

    def __init__(
        self,
        scope: "Scope",
        view: Optional["TraceView"],
        logic: Union[Logic, GroupLogic],
        name: str,
    ):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self.view = view
        declared = as_group_logic(logic)
        self.logic: Logic = declared.fn
        self.in_hist: Dict[Any, History] = {}
        self.out_hist: Dict[Any, History] = {}
        self.pending: Dict[Any, Any] = {}
        """Per key, the times not yet evaluated where its output may change: a set of times
        (:class:`ProductDistinct <.distinct_product.ProductDistinct>`: only the joins, not the
        times of its updates, and the time itself while it is the only one, see
        :func:`pending_set`)."""
        self.pending_times: Dict[Time, List[Any]] = {}
        """The inverse of ``pending``: per time, its keys (each once: a time is registered for a
        key only when it is not pending for it yet; :class:`ProductDistinct
        <.distinct_product.ProductDistinct>` registers the times of its updates here only, a key
        possibly twice at a time)."""
        self._outers: Dict[int, Set[int]] = {}
        """``pending_times`` by inner coordinate: ``inner -> {outer, ...}``."""
        self._low: Dict[int, int] = {}
        """Per inner coordinate of ``_outers``, its least outer."""
        self._in_sizes: Dict[Any, int] = {}
        self._out_sizes: Dict[Any, int] = {}
        self._seen: Dict[Any, int] = {}
        """Per key, the length of its input history after its last evaluation."""
        self._threshold = declared.threshold
        """On records arranged by self: evaluate on the count (see :class:`GroupLogic`)."""
        self._distinct = declared.distinct
        self._record_out = False  # output ``(key, time, diff)`` for ``((key, ()), ...)``
        self.caps = CapabilitySet(self.order.le)
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """The pending times per key, ``(key, "pending", [((outer, inner), None), ...])``."""
        at_or_beyond = self.input_frontiers[0].less_equal
        return future_pieces(
            self._state_owner(),
            "pending",
            ((key, t, None) for key, times in self.pending.items() for t in pending_set(times)),
            lambda t: at_or_beyond(_tuple_new(Product, t)),
        )

    def restore_future(self, key: Any, name: str, entries: Any) -> bool:
        """Take back a key's pending times."""
        if name != "pending":
            return False
        held = pending_set(self.pending.get(key, ()))
        self.pending[key] = held
        for (a, b), _ in entries:
            held.add((a, b))
            self.add_pending_time((a, b), key)
        return True

    def hold_future(self) -> None:
        """Hold capabilities at the least restored pending times."""
        internal = self.shared.internals[0]
        for t in minimal(self._low):
            self.caps.retain(_tuple_new(Product, t), internal, 0, self.name)

    def schedule(self) -> bool:
        """Take arrived batches into the histories; evaluate the keys the frontier passed."""
        changed = self._apply_frontiers()
        q = self._queue
        received = False
        if q:
            received = True
            assert self.view is not None  # (ProductReduceUpdates, without a view, has its own)
            read = self.view.read_batch
            internal = self.shared.internals[0]
            while q:
                time, batches = q.popleft()
                self._consumed.update(time, len(batches))
                self.caps.retain(time, internal, 0, self.name)
                for batch in batches:
                    self._ingest(
                        [(key, v, t, r) for key, vals in read(batch) for v, t, r in vals], True
                    )
        if changed or received:
            self._process()
        return False

    def _ingest(self, data: List[Any], keyed: bool) -> None:
        """Append updates to the histories and register their times: ``(key, val, time,
        diff)`` when ``keyed``, else ``(record, time, diff)``, read as ``(record, (), time,
        diff)``."""
        inputs = self.in_hist
        pending = self.pending
        pending_times = self.pending_times
        by_self = keyed and self._threshold is not None
        v = ()
        for u in data:
            if keyed:
                key, v, (a, b), r = u
                if by_self and v != ():
                    by_self = self._not_by_self()
            else:
                key, (a, b), r = u
            hist = inputs.get(key)
            if hist is None:
                inputs[key] = [(v, a, b, r)]
            else:
                hist.append((v, a, b, r))
            # Registering the pending time is written out here and in distinct_product's ingest
            # (not a call): one call fewer per update, measurable in the iterative loops.
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
                self.add_pending_time(t, key)
            else:
                keys.append(key)

    def add_pending_time(self, t: Time, key: Any) -> None:
        """Register ``t`` as pending for ``key``. (The ingesting loops test for a time pending
        for other keys already inline, and call this only for a new time.)"""
        keys = self.pending_times.get(t)
        if keys is not None:
            keys.append(key)
            return
        self.pending_times[t] = [key]
        a, b = t
        outs = self._outers.get(b)
        if outs is None:
            self._outers[b] = {a}
            self._low[b] = a
        else:
            outs.add(a)
            if a < self._low[b]:
                self._low[b] = a

    def _not_by_self(self) -> bool:
        """A value other than ``()`` arrived: the input is not arranged by self, so evaluate
        ``distinct`` / ``threshold`` on groups, as any logic."""
        self._threshold = None
        return False

    def _process(self) -> None:
        """Evaluate the keys with pending times the input frontier has passed; send the output,
        one message per capability; hold capabilities at the pending times left."""
        frontier = sorted([(f[0], f[1]) for f in self.input_frontiers[0].frontier])
        ready = self._ready(frontier)
        if ready:
            output: Output = {}
            try:
                self._evaluate_keys(ready, frontier, output)
            except TimelyError:
                raise
            except Exception as exc:
                raise user_error(self, exc) from exc
            if output:
                self._send(output)
            if not frontier:  # the input is complete: nothing is evaluated any more
                self._drop_histories()
        # Also without ready keys: messages may have come at times below their updates'.
        caps = self.caps
        held = caps.caps
        wanted = minimal(self._low)
        if len(held) != len(wanted) or any([c.time not in wanted for c in held]):
            caps.downgrade([_tuple_new(Product, t) for t in wanted])

    def _drop_histories(self) -> None:
        """Forget every key's state (the input is complete)."""
        for d in (self.in_hist, self.out_hist, self._in_sizes, self._out_sizes, self._seen):
            d.clear()

    def _ready(self, frontier: List[Time]) -> Dict[Any, List[Time]]:
        """Remove the pending times the (sorted) ``frontier`` has passed; return them per key.
        At inner ``b`` those are the outers below the least outer of the frontier's elements
        with inner ``<= b``: one test per inner, then only the times passed are visited."""
        pending_times = self.pending_times
        outers, low = self._outers, self._low
        ready_times: List[Time] = []
        if not frontier:
            ready_times = list(pending_times)
            outers.clear()
            low.clear()
        else:
            f0s = [f[0] for f in frontier]
            neg = [-f[1] for f in frontier]  # increasing
            n = len(frontier)
            for b, least in list(low.items()):
                k = bisect_left(neg, -b)  # the first element with inner <= b
                if k < n and least >= f0s[k]:
                    continue  # every outer at b is at or beyond that element
                outs = outers[b]
                if k == n:
                    passed = list(outs)
                else:
                    bound = f0s[k]
                    passed = [a for a in outs if a < bound]
                if len(passed) == len(outs):
                    del outers[b], low[b]
                else:
                    outs.difference_update(passed)
                    low[b] = min(outs)
                ready_times.extend([(a, b) for a in passed])
        ready: Dict[Any, List[Time]] = {}
        get = ready.get
        for t in ready_times:
            for key in pending_times.pop(t):
                times = get(key)
                if times is None:
                    ready[key] = [t]
                else:
                    times.append(t)
        return ready

    def _send(self, output: Output) -> None:
        """Push the output, one message per held capability."""
        caps = self.caps
        by_cap: Dict[Any, List[Any]] = {}
        for pt, data in output.values():
            cap = caps.find(pt)
            if cap is None:  # pragma: no cover - a bug if it happens
                raise TimelyError(f"reduce {self.name!r}: no capability for time {pt!r}")
            sent = by_cap.get(cap.time)
            if sent is None:
                by_cap[cap.time] = data
            else:
                sent.extend(data)
        push = self._out.push
        for cap_time, data in by_cap.items():
            push(cap_time, data)

    def _evaluate_keys(
        self, ready: Dict[Any, List[Time]], frontier: List[Time], output: Output
    ) -> None:
        """Evaluate every key of ``ready`` at its times the (sorted) ``frontier`` has passed,
        and at the new interesting times it has passed (the others are registered); compact
        its histories."""
        pending = self.pending
        inputs, outputs = self.in_hist, self.out_hist
        seen = self._seen
        threshold = self._threshold
        at_count = self._at_count
        at_group = self._at_group
        beyond = beyond_test(frontier)
        m0, m1 = (frontier[0][0], frontier[-1][1]) if frontier else (0, 0)  # the meet
        empty: History = []
        for key, times in ready.items():
            p = pending[key]
            if len(p) == len(times):
                del pending[key]
                rest = None
            else:
                rest = p
                for t in times:
                    rest.remove(t)
            hin = inputs.get(key, empty)
            hout = outputs.get(key)
            n = len(hin)
            done = seen.get(key, 0)
            counts = None
            if n > done:
                counts = self._new_times(key, times, rest, hin, hout, done, beyond)
            if hout is None:
                outputs[key] = hout = []
            if (
                counts is not None
                and threshold is not None
                and len(times) == 1
                and times[0] == counts[0]
            ):
                # The one time, the new update's, with its counts from the pass above.
                at_count(key, times[0], counts[1], counts[2], hout, output)
            else:
                if len(times) > 1:
                    # Lexicographic order extends the product order: every time is
                    # evaluated after the times below it.
                    times.sort()
                for t in times:
                    if threshold is not None:
                        o, i = t
                        at_count(key, t, count_at(hin, o, i), count_at(hout, o, i), hout, output)
                    else:
                        at_group(key, t, hin, hout, output)
            if frontier:  # (complete input: _process drops every history)
                self._compact_key(key, hin, hout, n, done, m0, m1)

    def _new_times(
        self,
        key: Any,
        times: List[Time],
        rest: Optional[Set[Time]],
        hin: History,
        hout: Optional[History],
        done: int,
        beyond: Callable[[int, int], bool],
    ) -> Optional[Tuple[Time, int, int]]:
        """The input of ``key`` past ``done`` is new: add the new interesting times it makes
        to ``times`` (passed) or register them (pending). With one new update, at ``s``,
        returns ``(s, input count, output count)`` at ``s`` (from the pass that looks for the
        times not below ``s``, the only ones that join with it into new times), else None."""
        if len(hin) == done + 1:
            s = s0, s1 = hin[-1][1:3]
            c, above = count_and_above(hin, s0, s1)
            have = 0
            if hout:
                have, out_above = count_and_above(hout, s0, s1)
                above += out_above
            for t in [*times, *rest] if rest else times:
                if t[0] > s0 or t[1] > s1:
                    above.append(t)
            counts: Optional[Tuple[Time, int, int]] = (s, c, have)
            if not above:
                return counts  # every time is below s: no new join
            candidates = joins_with_one(s, set(above))
        else:
            counts = None
            candidates = closure(
                {(e[1], e[2]) for e in hin[done:]},
                hin,
                hout,
                set(times) | rest if rest else set(times),
            )
        place_new_times(
            self, key, candidates, set(times) | rest if rest else set(times), times, rest, beyond
        )
        return counts

    def _at_count(
        self, key: Any, t: Time, c: int, have: int, hout: History, output: Output
    ) -> None:
        """``distinct`` / ``threshold`` of ``key`` at ``t``: input count ``c``, output count
        ``have``."""
        if c:
            if self._distinct:
                want = 1 if c > 0 else 0
            else:
                assert self._threshold is not None  # the caller evaluates on counts
                want = self._threshold(key, c)
            if type(want) is not int:
                check_output(self, key, [((), want)])
            want -= have
        else:
            want = -have
        if want:
            hout.append(((), t[0], t[1], want))
            bucket = output.get(t)
            if bucket is None:
                output[t] = bucket = (_tuple_new(Product, t), [])
            bucket[1].append((key if self._record_out else (key, ()), bucket[0], want))

    def _at_group(self, key: Any, t: Time, hin: History, hout: History, output: Output) -> None:
        """``logic`` on the group of ``key`` at ``t``; emit the difference from its output."""
        o, i = t
        acc = accumulate_at(hin, o, i)
        group = sorted_group(acc)
        if group:
            result = self.logic(key, group)
            desired: Dict[Any, int]
            if (
                type(result) is list
                and len(result) == 1
                and type(result[0]) is tuple
                and len(result[0]) == 2
                and type(result[0][1]) is int
            ):
                v, r = result[0]  # the common shape, without a check loop
                desired = {v: r} if r else {}
            else:
                desired = check_output(self, key, result)
        else:
            desired = {}
        current = accumulate_at(hout, o, i)
        changes = []
        for v, r in current.items():
            if r:
                d = desired.get(v, 0) - r
                if d:
                    changes.append((v, d))
        for v, r in desired.items():
            if not current.get(v):
                changes.append((v, r))
        if changes:
            bucket = output.get(t)
            if bucket is None:
                output[t] = bucket = (_tuple_new(Product, t), [])
            pt, data = bucket
            record_out = self._record_out
            for v, d in changes:
                hout.append((v, o, i, d))
                data.append((key if record_out else (key, v), pt, d))

    def _compact_key(
        self, key: Any, hin: History, hout: History, n: int, done: int, m0: int, m1: int
    ) -> None:
        """Compact both histories of ``key`` to the frontier whose meet is ``(m0, m1)`` once
        they have doubled since the last time (every later evaluation is at or beyond it);
        note the input history's length."""
        if n > 4 and n > 2 * self._in_sizes.get(key, 0):
            hin = compact_flat(hin, m0, m1)
            n = len(hin)
            if n:
                self.in_hist[key] = hin
                self._in_sizes[key] = n
            else:
                del self.in_hist[key]
                self._in_sizes.pop(key, None)
        if n:
            self._seen[key] = n
        elif done:
            del self._seen[key]
        n = len(hout)
        if n > 4 and n > 2 * self._out_sizes.get(key, 0):
            hout = compact_flat(hout, m0, m1)
            if hout:
                self.out_hist[key] = hout
                self._out_sizes[key] = len(hout)
            else:
                del self.out_hist[key]
                self._out_sizes.pop(key, None)
        elif not n:
            del self.out_hist[key]


class ProductReduceUpdates(ProductReduce):
    """:class:`ProductReduce` fed by a collection's updates, without an arrangement: the
    updates (exchanged by key) go straight into the key's history as they arrive (no batcher
    holding them, no batch to group and consolidate; a history is consolidated when it is
    compacted). ``keyed``: updates are ``((key, val), time, diff)`` and the output
    ``((key, out_val), time, diff)``; otherwise (``distinct`` / ``threshold``) updates are
    ``(record, time, diff)`` read as ``(record, ())`` and the output is ``(record, time,
    diff)``."""

    def __init__(self, scope: "Scope", logic: Union[Logic, GroupLogic], name: str, keyed: bool):
        super().__init__(scope, None, logic, name)
        self._keyed = keyed
        self._record_out = not keyed

    def schedule(self) -> bool:
        """Take arrived updates into the histories; evaluate the keys the frontier passed."""
        changed = self._apply_frontiers()
        q = self._queue
        received = False
        if q:
            received = True
            internal = self.shared.internals[0]
            keyed = self._keyed
            while q:
                time, data = q.popleft()
                self._consumed.update(time, len(data))
                self.caps.retain(time, internal, 0, self.name)
                try:
                    if keyed:
                        self._ingest([(key, v, t, r) for (key, v), t, r in data], True)
                    else:
                        self._ingest(data, False)
                except TypeError as exc:
                    keys = ((u[0][0] if keyed else u[0]) for u in data)
                    raise unhashable_error(self, keys, "key") from exc
        if changed or received:
            self._process()
        return False


def pending_set(held: Any) -> Set[Time]:
    """A key's pending times as a set (``held``: a set, or the only pending time itself, as
    :class:`~.distinct_product.ProductDistinct` keeps it, or an empty tuple for none).

    Example:

    >>> sorted(pending_set((3, 1))), pending_set(()), pending_set({(1, 2)})
    ([(3, 1)], set(), {(1, 2)})
    """
    if type(held) is set:
        return held
    return {held} if held else set()


def reduce_product(
    updates: Stream, logic: Union[Logic, GroupLogic], name: str = "Reduce"
) -> Stream:
    """``reduce`` of a stream of ``((key, val), time, diff)`` at ``Product(int, int)`` times
    (an iterative scope in a root scope) without an arrangement: the updates, exchanged by
    key, go straight into the operator's per-key histories (:class:`ProductReduceUpdates`).
    Output ``((key, out_val), time, diff)``, as ``reduce_stream`` on the collection's
    arrangement."""
    scope = updates.scope
    check_product(scope, name)
    op = ProductReduceUpdates(scope, logic, name, keyed=True)
    updates.connect_to(op, 0, Exchange(_key_of_pair))
    return Stream(scope, op.output_ports[0])


def _key_of_pair(u: Any) -> Any:
    return u[0][0]
