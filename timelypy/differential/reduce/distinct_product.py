"""``distinct`` and ``threshold`` at ``Product(int, int)`` times, without an arrangement.

:class:`ProductDistinct` is ``distinct`` on flat per-key states: an iterative reachability
evaluates tens of thousands of keys of a large state per round, mostly waiting for memory, so
each key has ONE flat list of ints, ``[size, mark, kind, outer, inner, diff, ...]`` (a *quad
list*, as the kernels of :mod:`~timelypy.differential.kernel.histories` read them, with one more
header element), not five dictionaries and a tuple per update. An arriving update is appended
to its key's list at once (the key's one look-up in the large state is then the ingest's: the
evaluation finds the list in a small table of the keys touched since their last evaluation);
the quads from ``mark`` on are the updates not yet evaluated, and their times are registered
per time only (no per-key look-up). ``threshold`` with a function is a
:class:`~.product.ProductReduceUpdates` that evaluates the declared threshold on counts
(:func:`threshold_product` picks).
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Set, Tuple, Union

from ...dataflow.channels import Exchange
from ...dataflow.state import OperatorState, future_pieces
from ...dataflow.stream import Stream
from ...errors import RecoveryError
from ...order import Product
from ..kernel.histories import (
    compact_quads,
    joins,
    quad_closure,
    quad_counts_and_above,
    quad_counts_at,
)
from .common import Logic, Output, Time, beyond_test, check_product, place_new_times
from .logic import GroupLogic, distinct_logic, threshold_logic
from .product import ProductReduceUpdates

if TYPE_CHECKING:
    from ...dataflow.scope import Scope

__all__ = ["ProductDistinct", "threshold_product"]

_tuple_new = tuple.__new__


class ProductDistinct(ProductReduceUpdates):
    """``distinct`` of records at ``Product(int, int)`` times, on flat per-key states. Each key
    has one quad list in :attr:`state`: ``[size, mark, kind, outer, inner, diff, ...]``
    (``size``: its length after its last compaction; ``kind`` 0 input, 1 output); arriving
    updates are appended as input quads and wait, from index ``mark`` on, until their key is
    evaluated. Their times are registered in ``pending_times`` only; ``pending`` holds a key's
    other interesting times (joins) not yet evaluated: the ingest makes no look-up there. The
    steps are :func:`_evaluate_distinct`'s."""

    state_keyed = ProductReduceUpdates.state_keyed + ("state",)

    def __init__(self, scope: "Scope", logic: Union[Logic, GroupLogic], name: str) -> None:
        super().__init__(scope, logic, name, keyed=False)
        self.state: Dict[Any, List[int]] = {}
        self._fresh: Dict[Any, List[int]] = {}
        """The states of the keys that took updates since their last evaluation (``state``'s
        lists): a small table, so that the evaluation finds them without a look-up in the
        large one."""

    def snapshot_state(self) -> OperatorState:
        """The per-key states (format version 2: quad lists with a mark) and pending times."""
        state = super().snapshot_state()
        state.version = 2
        return state

    def restore_state(self, state: OperatorState) -> None:
        """Put the pieces back; version 1 (a quad list without a mark, and the updates not yet
        evaluated apart, in ``fresh``) is read as well."""
        if state.version == 1:
            state = OperatorState(
                keyed=[(h, _from_version_1(piece)) for h, piece in state.all_keyed()],
                shared=state.shared,
                version=2,
            )
        elif state.version != 2:
            raise RecoveryError(
                f"operator {self._state_owner()}: state version {state.version}; this "
                "timelypy reads versions 1 and 2"
            )
        self._fresh.clear()
        super().restore_state(state)

    def future_state(self) -> List[Tuple[Any, str, Any]]:
        """The pending times per key, ``(key, "pending", [((outer, inner), None), ...])``,
        from ``pending_times`` (the times of updates not yet evaluated are registered only
        there)."""
        at_or_beyond = self.input_frontiers[0].less_equal
        held = {(key, t) for t, keys in self.pending_times.items() for key in keys}
        return future_pieces(
            self._state_owner(),
            "pending",
            ((key, t, None) for key, t in held),
            lambda t: at_or_beyond(_tuple_new(Product, t)),
        )

    def _ingest(self, data: List[Any], keyed: bool) -> None:
        _ingest_distinct(self, data)

    def _evaluate_keys(
        self, ready: Dict[Any, List[Time]], frontier: List[Time], output: Output
    ) -> None:
        _evaluate_distinct(self, ready, frontier, output, beyond_test(frontier))

    def _drop_histories(self) -> None:
        self.state.clear()
        self._fresh.clear()


def threshold_product(
    updates: Stream, f: Optional[Callable[[Any, int], int]] = None, name: str = "Threshold"
) -> Stream:
    """``threshold`` (``f(record, count)``; ``None``: ``distinct``) of a stream of
    ``(record, time, diff)`` at ``Product(int, int)`` times without an arrangement; output
    ``(record, time, diff)``."""
    scope = updates.scope
    check_product(scope, name)
    if f is None:
        op: ProductReduceUpdates = ProductDistinct(scope, distinct_logic, name)
    else:
        op = ProductReduceUpdates(scope, threshold_logic(f), name, keyed=False)
    updates.connect_to(op, 0, Exchange(_record_of))
    return Stream(scope, op.output_ports[0])


def _record_of(u: Any) -> Any:
    return u[0]


def _from_version_1(piece: Any) -> Any:
    """A key's piece of a version 1 state in version 2: its quad list ``[size, quads...]``
    gets a mark after its quads, and its ``fresh`` updates ``[outer, inner, diff, ...]`` are
    appended after the mark as input quads."""
    key, parts = piece
    parts = dict(parts)
    old = parts.pop("state", None) or [0]
    h = [old[0] + 1, len(old) + 1] + list(old[1:])
    it = iter(parts.pop("fresh", None) or ())
    for a, b, r in zip(it, it, it):
        h += (0, a, b, r)
    if len(h) > 2:
        parts["state"] = h
    return key, parts


def _ingest_distinct(op: ProductDistinct, data: List[Any]) -> None:
    """Take ``(record, time, diff)`` updates: appended to their keys' states (from ``mark``
    on), and their times registered in ``pending_times`` only (a key may be registered twice
    at a time: the evaluation takes its ready times once)."""
    state = op.state
    fresh = op._fresh
    pending_times = op.pending_times
    last = None  # the time of the update before, and its keys' list in pending_times
    keys: List[Any] = []
    for key, pt, r in data:
        a, b = pt
        h = state.get(key)
        if h is None:
            fresh[key] = state[key] = [2, 2, 0, a, b, r]
        else:
            h += (0, a, b, r)
            fresh[key] = h
        if pt == last:  # (a message's updates mostly share one time)
            keys.append(key)
            continue
        last = pt
        t = (a, b)
        got = pending_times.get(t)
        if got is None:
            op.add_pending_time(t, key)
            keys = pending_times[t]
        else:
            keys = got
            keys.append(key)


def _evaluate_distinct(
    op: ProductDistinct,
    ready: Dict[Any, List[Time]],
    frontier: List[Time],
    output: Output,
    beyond: Callable[[int, int], bool],
) -> None:
    """Evaluate every key of ``ready`` at its times the (sorted) ``frontier`` has passed, and
    at the new interesting times it has passed (the others are registered); compact.
    ``beyond(outer, inner)`` tests a time against the frontier."""
    pending = op.pending
    state = op.state
    fresh = op._fresh
    m0, m1 = (frontier[0][0], frontier[-1][1]) if frontier else (0, 0)  # the meet
    f0s = [f[0] for f in frontier]
    f1s = [f[1] for f in frontier]
    for key, times in ready.items():
        if len(times) > 1:
            times = list(set(times))
        p = pending.pop(key, None)
        rest: Optional[Set[Time]] = None
        if p is not None:
            if p.__class__ is tuple:
                if p not in times:
                    pending[key] = rest = {p}
            else:
                p.difference_update(times)
                if p:
                    pending[key] = rest = p
        h = fresh.pop(key, None)  # (the state may change below: compacted, dropped)
        if h is None:
            h = state.get(key)
        stored = h is not None
        if h is None:
            h = [2, 2]
        n = len(h)
        mark = h[1]
        if n - mark == 4:
            # One new update, at s: only the joins of s with the times not below it (from its
            # history, its ready and its pending times) can be new interesting times.
            s0 = h[n - 3]
            s1 = h[n - 2]
            c, have, above = quad_counts_and_above(h, n - 4, s0, s1)
            t = times[0]
            one = times == [(s0, s1)]
            if above or rest or not one:
                _joins_with_new(op, key, times, rest, one, above, s0, s1, f0s, f1s)
            if one and len(times) == 1:
                # The one time, the new update's, with its counts from the pass above.
                want = (1 if c + h[n - 1] > 0 else 0) - have
                if want:
                    h += (1, s0, s1, want)
                    bucket = output.get(t)
                    if bucket is None:
                        output[t] = bucket = (_tuple_new(Product, t), [])
                    bucket[1].append((key, bucket[0], want))
                n = h[1] = len(h)
                # (_keep's common case, tested here: the state, stored since its ingest and
                # not empty, stays as it is)
                if n > 42 and n > 2 * h[0] and frontier:
                    _keep(state, key, h, stored, m0, m1)
                continue
        elif n > mark:
            _several_new(op, key, h, mark, times, rest, beyond)
        _at_times(key, h, times, output)
        h[1] = len(h)
        if frontier:  # (complete input: the operator drops every state)
            _keep(state, key, h, stored, m0, m1)


def _keep(
    state: Dict[Any, List[int]], key: Any, h: List[int], stored: bool, m0: int, m1: int
) -> None:
    """Store ``key``'s state ``h`` (dropped when empty), compacted once it doubled since its
    last compaction (every later evaluation is at or beyond the frontier, whose meet is
    ``(m0, m1)``)."""
    n = len(h)
    if n > 42 and n > 2 * h[0]:
        h = compact_quads(h, m0, m1)
        n = len(h)
        if stored:
            state[key] = h
    if n == 2:
        if stored:
            del state[key]
    elif not stored:
        state[key] = h


def _joins_with_new(
    op: ProductDistinct,
    key: Any,
    times: List[Time],
    rest: Optional[Set[Time]],
    one: bool,
    above: List[Time],
    s0: int,
    s1: int,
    f0s: List[int],
    f1s: List[int],
) -> None:
    """The joins of the new update's time ``s`` with the key's times not below it (``above``
    from its history; its ready ``times``, only ``s`` when ``one``; its other pending times
    ``rest``, ``key``'s set in ``pending``): those the frontier (``f0s``, ``f1s``: its outers,
    increasing, and inners) has passed are appended to ``times``, the others become pending.
    (A join at the time of an update not yet ready is registered twice, and taken once when
    ready.)"""
    if not one:
        above += [t for t in times if t[0] > s0 or t[1] > s1]
    if rest:
        above += [t for t in rest if t[0] > s0 or t[1] > s1]
    if not above:
        return
    later = []
    outers, inners = zip(*above)
    if max(outers) <= s0:
        # Joins (s0, b), b > s1: passed below the least inner of the frontier's elements
        # with outer <= s0 (one bisection, not one test per join).
        k = bisect_right(f0s, s0)
        lim = f1s[k - 1] if k else None
        bs = set(inners)
        if one and not rest and lim is not None and min(bs) >= lim:
            later = [(s0, b) for b in bs]  # (the common case: every join is pending)
        else:
            for b in bs:
                t = (s0, b)
                if (one or t not in times) and (not rest or t not in rest):
                    if lim is None or b < lim:
                        times.append(t)
                    else:
                        later.append(t)
    else:
        if max(inners) <= s1:
            candidates = {(a, s1) for a in set(outers)}
        else:
            candidates = joins({(s0, s1)}, set(above))
            candidates.discard((s0, s1))
        for t in candidates:
            if (one or t not in times) and (not rest or t not in rest):
                k = bisect_right(f0s, t[0])
                if k and f1s[k - 1] <= t[1]:
                    later.append(t)
                else:
                    times.append(t)
    if not later:
        return
    if rest is not None:
        rest.update(later)
    else:
        op.pending[key] = later[0] if len(later) == 1 else set(later)
    pending_times = op.pending_times
    for t in later:
        keys = pending_times.get(t)
        if keys is None:
            op.add_pending_time(t, key)
        else:
            keys.append(key)


def _several_new(
    op: ProductDistinct,
    key: Any,
    h: List[int],
    mark: int,
    times: List[Time],
    rest: Optional[Set[Time]],
    beyond: Callable[[int, int], bool],
) -> None:
    """Several new updates of ``key`` (the quads of ``h`` from ``mark`` on): the interesting
    times they make, the joins of their times with each other and with the key's other times
    (its history's, its ready and its pending ones), placed as ``ProductReduce._new_times``
    does."""
    known = set(times)
    if rest:
        known |= rest
    place_new_times(op, key, quad_closure(h, mark, known), known, times, rest, beyond)


def _at_times(key: Any, h: List[int], times: List[Time], output: Output) -> None:
    """Evaluate ``key`` at each of ``times``, in lexicographic order (which extends the
    product order: every time after the times below it): ``distinct`` of its input count minus
    its output count there, appended to ``h`` and to ``output``."""
    if len(times) > 1:
        times.sort()
    for t in times:
        c, have = quad_counts_at(h, t[0], t[1])
        want = (1 if c > 0 else 0) - have
        if want:
            h += (1, t[0], t[1], want)
            bucket = output.get(t)
            if bucket is None:
                output[t] = bucket = (_tuple_new(Product, t), [])
            bucket[1].append((key, bucket[0], want))
