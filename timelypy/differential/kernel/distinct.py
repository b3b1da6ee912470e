"""Kernel: ``distinct`` at ``Product(int, int)`` times on quad lists, ingest and evaluation.

**Contract.** Each key's state is one *quad list* (see :mod:`.histories`): ``[size, mark,
kind, outer, inner, diff, ...]``, ``kind`` 0 an input update, 1 an output update; the quads
from index ``mark`` on are input updates not evaluated yet. The operator
(:class:`~timelypy.differential.reduce.distinct_product.ProductDistinct`) owns the containers
and passes them in: ``state`` (every key's list), ``fresh`` (the lists of the keys that took
updates since their last evaluation, a small table read before ``state``), ``pending`` (per key,
its interesting times not evaluated yet: one time or a set), ``pending_times`` (per time, the
keys registered there; ``register(t, key)`` registers a time not in it yet).

* :func:`ingest_distinct` appends arriving ``(record, (outer, inner), diff)`` updates to their
  keys' lists and registers their times;
* :func:`evaluate_distinct` evaluates each key of ``ready`` at its times the frontier has
  passed, in an order that extends the product order: the output at a time is 1 where the
  input count of the updates below it is positive, else 0, and the difference from the output
  count below it is appended to the list (kind 1) and to ``output`` (``time -> (stamp(time),
  [(key, stamp, diff), ...])``); the joins of a new update's time with the key's other times
  are its new interesting times (evaluated now when the frontier has passed them, else
  registered); a list that doubled since its last compaction is compacted to the frontier's
  meet; an empty one is dropped from ``state``.

Each call is one pass over its keys, a key's work ``O(len(list))`` plus its joins. These
kernels mutate the containers passed in (they are the operator's state), unlike the other
kernel modules' pure functions.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

from .histories import compact_quads, joins, quad_closure, quad_counts_and_above, quad_counts_at

__all__ = ["evaluate_distinct", "ingest_distinct"]

Time = Tuple[int, int]

COMPILED = False
"""True in the copy :func:`timelypy.kernels.compile_kernels` compiles (see its ``if COMPILED:``)."""


class DistinctState(NamedTuple):
    """The operator's containers and callbacks that :func:`evaluate_distinct` works on."""

    state: Dict[Any, List[int]]
    """Every key's quad list."""
    fresh: Dict[Any, List[int]]
    """The lists of the keys that took updates since their last evaluation."""
    pending: Dict[Any, Any]
    """Per key, its interesting times not evaluated yet (one time, or a set)."""
    pending_times: Dict[Time, List[Any]]
    """Per time, the keys registered there."""
    register: Callable[[Time, Any], None]
    """``register(t, key)``: register a time not in ``pending_times`` yet."""
    place: Callable[..., None]
    """``place(key, candidates, known, times, rest, beyond)``: the interesting times of several
    new updates, evaluated now (appended to ``times``) or registered."""
    stamp: type
    """The output's time type, made from ``(outer, inner)`` by ``tuple.__new__``."""


_tuple_new = tuple.__new__


def ingest_distinct(
    data: List[Any],
    state: Dict[Any, List[int]],
    fresh: Dict[Any, List[int]],
    pending_times: Dict[Time, List[Any]],
    register: Callable[[Time, Any], None],
) -> None:
    """Take ``(record, time, diff)`` updates: appended to their keys' states (from ``mark``
    on) and their lists put in ``fresh``, and their times registered in ``pending_times``
    only (a key may be registered twice at a time: the evaluation takes its ready times
    once). ``register(t, key)`` registers a time not yet in ``pending_times``."""
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
            register(t, key)
            keys = pending_times[t]
        else:
            keys = got
            keys.append(key)


def evaluate_distinct(
    ready: Dict[Any, List[Time]],
    frontier: List[Time],
    output: Dict[Time, Tuple[Any, List[Any]]],
    beyond: Callable[[int, int], bool],
    where: DistinctState,
) -> None:
    """Evaluate every key of ``ready`` at its times the (sorted) ``frontier`` has passed, and
    at the new interesting times it has passed (the others are registered); compact.
    ``beyond(outer, inner)`` tests a time against the frontier."""
    state, fresh, pending, pending_times, register, place, stamp = where
    m0, m1, f0s, f1s = _frontier_parts(frontier)
    for key, times in ready.items():
        if len(times) > 1:
            times = list(set(times))
        if COMPILED:  # (both taken now, as the state may change below)
            p, h = _take(pending, fresh, key)
        else:
            p = pending.pop(key, None)
            h = fresh.pop(key, None)
        rest: Optional[Set[Time]] = None
        if p is not None:
            if p.__class__ is tuple:
                if p not in times:
                    pending[key] = rest = {p}
            else:
                p.difference_update(times)
                if p:
                    pending[key] = rest = p
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
                _joins_with_new(
                    key, times, rest, one, above, s0, s1, f0s, f1s, pending, pending_times, register
                )
            if one and len(times) == 1:
                # The one time, the new update's, with its counts from the pass above.
                want = (1 if c + h[n - 1] > 0 else 0) - have
                if want:
                    h += (1, s0, s1, want)
                    bucket = output.get(t)
                    if bucket is None:
                        output[t] = bucket = (_tuple_new(stamp, t), [])
                    bucket[1].append((key, bucket[0], want))
                n = h[1] = len(h)
                # (_keep's common case, tested here: a stored state, not empty, stays)
                if n > 42 and n > 2 * h[0] and frontier:
                    _keep(state, key, h, stored, m0, m1)
                continue
        elif n > mark:
            _several_new(key, h, mark, times, rest, beyond, place)
        _at_times(key, h, times, output, stamp)
        h[1] = len(h)
        if frontier:  # (complete input: the operator drops every state)
            _keep(state, key, h, stored, m0, m1)


def _frontier_parts(frontier: List[Time]) -> Tuple[int, int, List[int], List[int]]:
    """The meet of the (sorted) ``frontier``, its outers and its inners."""
    m0, m1 = (frontier[0][0], frontier[-1][1]) if frontier else (0, 0)
    return m0, m1, [f[0] for f in frontier], [f[1] for f in frontier]


def _several_new(
    key: Any,
    h: List[int],
    mark: int,
    times: List[Time],
    rest: Optional[Set[Time]],
    beyond: Callable[[int, int], bool],
    place: Callable[..., None],
) -> None:
    """Several new updates of ``key`` (the quads of ``h`` from ``mark`` on): the joins of their
    times with each other and with the key's other times (its history's, its ready and its
    pending ones), placed by ``place``."""
    known = set(times)
    if rest:
        known |= rest
    place(key, quad_closure(h, mark, known), known, times, rest, beyond)


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


if COMPILED:

    def _bisect_right(a: List[int], x: int) -> int:
        """``bisect.bisect_right`` on a list of ints, as a native loop."""
        lo = 0
        hi = len(a)
        while lo < hi:
            mid = (lo + hi) // 2
            if x < a[mid]:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _take(
        pending: Dict[Any, Any], fresh: Dict[Any, List[int]], key: Any
    ) -> Tuple[Any, Optional[List[int]]]:
        """``pending.pop(key, None), fresh.pop(key, None)`` with ``get`` and ``del``, which
        are native in mypyc (``pop`` is a method call)."""
        p = pending.get(key)
        if p is not None:
            del pending[key]
        h = fresh.get(key)
        if h is not None:
            del fresh[key]
        return p, h

    def _extents(times: List[Time]) -> Tuple[int, int, int]:
        """The greatest outer, the greatest inner and the least inner of ``times`` (not
        empty)."""
        top_outer, top_inner = times[0]
        least_inner = top_inner
        for a, b in times:
            if a > top_outer:
                top_outer = a
            if b > top_inner:
                top_inner = b
            elif b < least_inner:
                least_inner = b
        return top_outer, top_inner, least_inner

    def _joins_with_new(
        key: Any,
        times: List[Time],
        rest: Optional[Set[Time]],
        one: bool,
        above: List[Time],
        s0: int,
        s1: int,
        f0s: List[int],
        f1s: List[int],
        pending: Dict[Any, Any],
        pending_times: Dict[Time, List[Any]],
        register: Callable[[Time, Any], None],
    ) -> None:
        """The joins of the new update's time ``s`` with the key's times not below it (``above``
        from its history; its ready ``times``, only ``s`` when ``one``; its other pending times
        ``rest``, ``key``'s set in ``pending``): those the frontier (``f0s``, ``f1s``: its outers,
        increasing, and inners) has passed are appended to ``times``, the others become pending.
        (A join at the time of an update not yet ready is registered twice, and taken once when
        ready.) The compiled build's version: one loop for the extents, not ``zip`` and ``max``."""
        if not one:
            above += [t for t in times if t[0] > s0 or t[1] > s1]
        if rest:
            above += [t for t in rest if t[0] > s0 or t[1] > s1]
        if not above:
            return
        later: List[Time] = []
        top_outer, top_inner, least_inner = _extents(above)
        if top_outer <= s0:
            k = _bisect_right(f0s, s0)
            bs = {b for _, b in above}
            if k and one and not rest and least_inner >= f1s[k - 1]:
                later = [(s0, b) for b in bs]
            else:
                for b in bs:
                    t = (s0, b)
                    if (one or t not in times) and (not rest or t not in rest):
                        if not k or b < f1s[k - 1]:
                            times.append(t)
                        else:
                            later.append(t)
        else:
            if top_inner <= s1:
                candidates = {(a, s1) for a, _ in above}
            else:
                candidates = joins({(s0, s1)}, set(above))
                candidates.discard((s0, s1))
            for t in candidates:
                if (one or t not in times) and (not rest or t not in rest):
                    k = _bisect_right(f0s, t[0])
                    if k and f1s[k - 1] <= t[1]:
                        later.append(t)
                    else:
                        times.append(t)
        # (as the interpreter's version below: a shared helper cost the interpreter +0.3%)
        if not later:
            return
        if rest is not None:
            rest.update(later)
        else:
            pending[key] = later[0] if len(later) == 1 else set(later)
        for t in later:
            keys = pending_times.get(t)
            if keys is None:
                register(t, key)
            else:
                keys.append(key)

else:

    def _joins_with_new(
        key: Any,
        times: List[Time],
        rest: Optional[Set[Time]],
        one: bool,
        above: List[Time],
        s0: int,
        s1: int,
        f0s: List[int],
        f1s: List[int],
        pending: Dict[Any, Any],
        pending_times: Dict[Time, List[Any]],
        register: Callable[[Time, Any], None],
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
            pending[key] = later[0] if len(later) == 1 else set(later)
        for t in later:
            keys = pending_times.get(t)
            if keys is None:
                register(t, key)
            else:
                keys.append(key)


def _at_times(
    key: Any,
    h: List[int],
    times: List[Time],
    output: Dict[Time, Tuple[Any, List[Any]]],
    stamp: type,
) -> None:
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
                output[t] = bucket = (_tuple_new(stamp, t), [])
            bucket[1].append((key, bucket[0], want))


from timelypy.kernels import adopt  # noqa: E402 - after the kernels it may replace

adopt(__name__, globals())
