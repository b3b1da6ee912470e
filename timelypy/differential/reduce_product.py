"""Reduce at ``Product(int, int)`` times: the hot operator of iterative programs.

:class:`ProductReduce` (fed by an arrangement's batches) and :class:`ProductReduceUpdates` (fed
by a collection's updates, without an arrangement) are the reduce operator at the times of an
iterative scope in a root scope, the hot case of iterative programs (``reduce_stream``,
``reduce_product`` and ``threshold_product`` in :mod:`.reduce` build them). Per key, as :class:`~.reduce.ReduceOperator`: input and output histories, evaluated at the
times the input frontier has passed where the output may change, the new update times and
their joins with the histories (differential dataflow's *interesting times*). What differs:

* Histories are lists of flat ``(val, outer, inner, diff)`` tuples: one tuple per update, which
  the garbage collector stops tracking (it holds ints and, for keys arranged by self, ``()``).
  Pending times are plain ``(outer, inner)`` pairs; output and capabilities get Products.
* A key's input history grows by appending, so the updates that arrived since its last
  evaluation are the tail past ``_seen[key]``: only the joins that involve their times can be
  new interesting times (the pending times are closed under joins with the rest), and one new
  update whose time is above every other time of the key (the common case) makes none.
* A key's pending times stay registered until the frontier passes them (no re-registering
  per evaluation), and the ready ones are found per time, not per key.
* ``distinct`` and ``threshold`` (records arranged by self: the single value ``()``) evaluate
  on a count instead of a group.
* Output goes out as one message per held capability per activation.
"""

from __future__ import annotations

from bisect import bisect_left as _bisect_left
from bisect import bisect_right as _bisect
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from ..dataflow.capability import CapabilitySet
from ..dataflow.operator import OperatorCore
from ..errors import ReduceOutputError, TimelyError, unhashable_error, user_error
from ..order import Product

__all__ = ["ProductReduce", "ProductReduceUpdates", "check_output", "is_product_order"]


Time = Tuple[int, int]
History = List[Tuple[Any, int, int, int]]
"""``[(val, outer, inner, diff), ...]``."""
Output = Dict[Time, Tuple[Product, List[Any]]]
"""Per time: its Product and the output updates at it."""

_tuple_new = tuple.__new__


def is_product_order(order: Any) -> bool:
    """True for the order of ``Product(int, int)`` times (an iterative scope in a root scope)."""
    return order.depth == 1 and order.outer.is_total


def check_output(op: Any, key: Any, desired: Any) -> Dict[Any, int]:
    """``logic``'s result for ``key`` as ``{value: count}`` (counts summed, zeros dropped);
    :class:`~timelypy.errors.ReduceOutputError` unless it is ``(value, int)`` pairs."""
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
            f"reduce {op.name!r} on worker {op.worker_index}: logic for key {key!r} "
            f"must return a list of (value, count) pairs with int counts, got {desired!r}"
        ) from None
    return out


class ProductReduce(OperatorCore):
    """Input: batches of an arrangement by key (read through ``view``). Output:
    ``((key, out_val), time, diff)``."""

    def __init__(self, scope: Any, view: Any, logic: Callable, name: str):
        super().__init__(scope, name, 1, 1, initial_capabilities=False)
        self.view = view
        self.logic = logic
        self.in_hist: Dict[Any, History] = {}
        self.out_hist: Dict[Any, History] = {}
        self.pending: Dict[Any, Set[Time]] = {}
        """Per key, the times not yet evaluated where its output may change."""
        self.pending_times: Dict[Time, Set[Any]] = {}
        """The inverse of ``pending``."""
        self._outers: Dict[int, Set[int]] = {}
        """``pending_times`` by inner coordinate: ``inner -> {outer, ...}``."""
        self._low: Dict[int, int] = {}
        """Per inner coordinate of ``_outers``, its least outer."""
        self._in_sizes: Dict[Any, int] = {}
        self._out_sizes: Dict[Any, int] = {}
        self._seen: Dict[Any, int] = {}
        """Per key, the length of its input history after its last evaluation."""
        self._threshold: Optional[Callable[[Any, int], int]] = getattr(logic, "_threshold", None)
        self._distinct = bool(getattr(logic, "_distinct", False))
        self._record_out = False  # output ``(key, time, diff)`` for ``((key, ()), ...)``
        self.caps = CapabilitySet(self.order.le)
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Take arrived batches into the histories; evaluate the keys the frontier passed."""
        changed = self._apply_frontiers()
        q = self._queue
        received = False
        if q:
            received = True
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
                self._new_time(t, key)
            else:
                keys.add(key)

    def _new_time(self, t: Time, key: Any) -> None:
        """Register ``t`` as pending for ``key``. (The ingesting loops test for a time pending
        for other keys already inline, and call this only for a new time.)"""
        keys = self.pending_times.get(t)
        if keys is not None:
            keys.add(key)
            return
        self.pending_times[t] = {key}
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
        wanted = _minimal(self._low)
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
                k = _bisect_left(neg, -b)  # the first element with inner <= b
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
        beyond = _beyond_test(frontier)
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
                        c = 0
                        for _, a, b, r in hin:
                            if a <= o and b <= i:
                                c += r
                        have = 0
                        for _, a, b, r in hout:
                            if a <= o and b <= i:
                                have += r
                        at_count(key, t, c, have, hout, output)
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
            above: Optional[Set[Time]] = None
            c = 0
            for _, a, b, r in hin:
                if a <= s0 and b <= s1:
                    c += r
                elif above is None:
                    above = {(a, b)}
                else:
                    above.add((a, b))
            have = 0
            for _, a, b, r in hout or ():
                if a <= s0 and b <= s1:
                    have += r
                elif above is None:
                    above = {(a, b)}
                else:
                    above.add((a, b))
            for t in [*times, *rest] if rest else times:
                if t[0] > s0 or t[1] > s1:
                    if above is None:
                        above = {t}
                    else:
                        above.add(t)
            counts: Optional[Tuple[Time, int, int]] = (s, c, have)
            if above is None:
                return counts  # every time is below s: no new join
            candidates = _joins_with_one(s, above)
        else:
            counts = None
            candidates = _closure(
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
            want = (1 if c > 0 else 0) if self._distinct else self._threshold(key, c)
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
        acc: Dict[Any, int] = {}
        for v, a, b, r in hin:
            if a <= o and b <= i:
                acc[v] = acc.get(v, 0) + r
        group = [(v, r) for v, r in acc.items() if r]
        if group:
            if len(group) > 1:
                try:
                    group.sort()
                except TypeError:
                    group.sort(key=repr)
            desired = self.logic(key, group)
            if (
                type(desired) is list
                and len(desired) == 1
                and type(desired[0]) is tuple
                and len(desired[0]) == 2
                and type(desired[0][1]) is int
            ):
                v, r = desired[0]  # the common shape, without a check loop
                desired = {v: r} if r else {}
            else:
                desired = check_output(self, key, desired)
        else:
            desired = {}
        current: Dict[Any, int] = {}
        for v, a, b, r in hout:
            if a <= o and b <= i:
                current[v] = current.get(v, 0) + r
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
            hin = _compact_flat(hin, m0, m1)
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
            hout = _compact_flat(hout, m0, m1)
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

    def __init__(self, scope: Any, logic: Callable, name: str, keyed: bool):
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


def place_new_times(
    op: Any,
    key: Any,
    candidates: Set[Time],
    known: Set[Time],
    times: List[Time],
    rest: Optional[Set[Time]],
    beyond: Callable[[int, int], bool],
) -> None:
    """Each of ``candidates`` not in ``known``: appended to ``times`` (``key``'s times to
    evaluate now) if not ``beyond`` the frontier, else kept pending for ``key`` in ``op``
    (``op.pending[key]``, whose set is ``rest``, and ``op.pending_times``)."""
    for t in candidates:
        if t in known:
            continue
        if not beyond(t[0], t[1]):
            times.append(t)
            continue
        if rest is None:
            op.pending[key] = rest = {t}
        else:
            rest.add(t)
        op._new_time(t, key)


def _beyond_test(frontier: List[Time]) -> Callable[[int, int], bool]:
    """``beyond(outer, inner)``: is the time at or beyond the (sorted) antichain?"""
    if not frontier:
        return lambda a, b: False
    if len(frontier) == 1:
        f0, f1 = frontier[0]
        return lambda a, b: f0 <= a and f1 <= b
    f0s = [f[0] for f in frontier]
    f1s = [f[1] for f in frontier]

    def beyond(a: int, b: int) -> bool:
        k = _bisect(f0s, a)
        return k > 0 and f1s[k - 1] <= b

    return beyond


def _minimal(low: Dict[int, int]) -> List[Time]:
    """The minimal elements, under the product order, of times given as ``inner -> least
    outer``: by increasing inner, each whose outer is below every earlier one's."""
    out = []
    best = None
    for b in sorted(low):
        a = low[b]
        if best is None or a < best:
            out.append((a, b))
            best = a
    return out


def _compact_flat(hist: History, m0: int, m1: int) -> History:
    """``hist`` advanced to the frontier whose meet is ``(m0, m1)`` and consolidated.
    Advancing to an antichain of ``Product(int, int)`` is the join with its meet (the product of
    two total orders is a distributive lattice)."""
    acc: Dict[Tuple[Any, int, int], int] = {}
    for v, a, b, r in hist:
        k = (v, a if a >= m0 else m0, b if b >= m1 else m1)
        acc[k] = acc.get(k, 0) + r
    return [(v, a, b, r) for (v, a, b), r in acc.items() if r]


def _closure(
    fresh: Set[Time], hist_in: History, hist_out: Optional[History], known: Set[Time]
) -> Set[Time]:
    """The joins of every set of times that holds a time of ``fresh`` (the new input's) and
    otherwise times of the histories and of ``known`` (the pending ones), in O(outer values x
    times) instead of pairwise joins.

    A time below every fresh one joins nothing new, so the times are filtered first (with one
    fresh time usually little is left). A join is ``(max outer, max inner)``, so ``(o, i)`` is
    one exactly when some time has outer ``o`` and inner ``<= i``, some time has inner ``i`` and
    outer ``<= o``, and some fresh time is ``<= (o, i)``."""
    if len(fresh) == 1:
        for s in fresh:
            m0, m1 = s
    else:
        m0 = min([a for a, _ in fresh])
        m1 = min([b for _, b in fresh])
    above = {(a, b) for _, a, b, _ in hist_in if a > m0 or b > m1}
    if hist_out:
        above.update([(a, b) for _, a, b, _ in hist_out if a > m0 or b > m1])
    above.update([t for t in known if t[0] > m0 or t[1] > m1])
    if not above:
        return fresh
    if len(fresh) == 1:
        return _joins_with_one(s, above)
    return _joins(fresh, above)


def _joins_with_one(s: Time, above: Set[Time]) -> Set[Time]:
    """The joins of ``s`` with every set of times of ``above`` (none of them below ``s``).
    When those all share ``s``'s outer (or inner) side, they are ``s`` joined with each one."""
    s0, s1 = s
    if all([a <= s0 for a, _ in above]):
        candidates = {(s0, b) for _, b in above}
    elif all([b <= s1 for _, b in above]):
        candidates = {(a, s1) for a, _ in above}
    else:
        return _joins({s}, above)
    candidates.add(s)
    return candidates


def _joins(fresh: Set[Time], times: Set[Time]) -> Set[Time]:
    """The joins of every set of times of ``fresh | times`` that holds a time of ``fresh``
    (``times`` is updated in place)."""
    m0 = min([a for a, _ in fresh])
    times.update(fresh)
    candidates = set(fresh)
    for o in {a for a, _ in times if a >= m0}:
        lo = min([b for a, b in fresh if a <= o])
        at_o = min([b for a, b in times if a == o])
        if at_o > lo:
            lo = at_o
        candidates.update([(o, b) for a, b in times if a <= o and b >= lo])
    return candidates
