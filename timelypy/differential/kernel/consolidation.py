"""The consolidation kernel: sum diffs per record and time, and advance times to a frontier.

As differential-dataflow's ``consolidation`` module, this is the one place that adds up the
diffs of equal ``(data, time)`` pairs and drops those that cancel, and where times are
*advanced* to a compaction frontier (``advance_by`` in the Differential Dataflow book: a time
``t`` becomes the meet over ``f`` in the frontier of ``join(t, f)``, which every time at or
beyond the frontier compares with exactly as ``t`` did). Everything keeps first-seen order, so
results are deterministic.

Updates are triples ``(data, time, diff)``; a trace stores a key's values as the same triples
``(val, time, diff)``, so every function here serves both.

Contract: inputs are iterables of updates (never changed); outputs are new lists or dicts.
Invariants: a result holds no zero diff and at most one entry per ``(data, time)``; its order is
the first-seen order of the input. Cost: O(len(updates)) dictionary operations (plus
``order.join`` / ``order.meet`` per update and frontier element for general partial orders).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Hashable, Iterable, List, Sequence, Tuple, TypeVar

__all__ = [
    "accumulate",
    "accumulate_at",
    "accumulate_into",
    "advance_and_consolidate",
    "advance_time",
    "consolidate",
]

K = TypeVar("K", bound=Hashable)
Update = Tuple[Any, Any, int]
"""``(data, time, diff)``, or ``(val, time, diff)`` inside a trace."""


def advance_time(t: Any, frontier: Sequence[Any], join: Callable, meet: Callable) -> Any:
    """``advance_by``: the meet over ``f`` in ``frontier`` of ``join(t, f)`` (``t`` if empty)."""
    if not frontier:
        return t
    if len(frontier) == 1:
        return join(t, frontier[0])
    it = iter(frontier)
    result = join(t, next(it))
    for f in it:
        result = meet(result, join(t, f))
    return result


def accumulate(pairs: Iterable[Tuple[K, int]]) -> Dict[K, int]:
    """``{item: total}`` over ``(item, diff)`` pairs, without the items whose diffs cancel."""
    acc: Dict[K, int] = {}
    for k, r in pairs:
        acc[k] = acc.get(k, 0) + r
    return {k: r for k, r in acc.items() if r}


def accumulate_at(updates: Iterable[Update], time: Any, le: Callable) -> Dict[Any, int]:
    """The content at ``time``: ``{data: total}`` over the updates at times ``<= time``."""
    acc: Dict[Any, int] = {}
    for d, t, r in updates:
        if le(t, time):
            acc[d] = acc.get(d, 0) + r
    return {d: r for d, r in acc.items() if r}


def accumulate_into(acc: Dict[Tuple[Any, Any], int], updates: Iterable[Update]) -> None:
    """Add every ``(data, time, diff)`` into ``acc[(data, time)]`` (zeros are kept; see
    :func:`consolidate` for a clean result)."""
    for d, t, r in updates:
        k = (d, t)
        acc[k] = acc.get(k, 0) + r


def consolidate(updates: Iterable[Update]) -> List[Update]:
    """At most one update per ``(data, time)``, with the summed diff; none that cancel."""
    acc: Dict[Tuple[Any, Any], int] = {}
    for d, t, r in updates:
        k = (d, t)
        acc[k] = acc.get(k, 0) + r
    return [(d, t, r) for (d, t), r in acc.items() if r]


def advance_and_consolidate(
    updates: Iterable[Update], since: Sequence[Any], order: Any
) -> List[Update]:
    """Advance every time to ``since`` (see :func:`advance_time`), then :func:`consolidate`.

    ``order`` is a :class:`~timelypy.order.TimeOrder`. With totally ordered times and one
    frontier element, advancing is ``max(t, since)``. Cost: O(len(updates)).
    """
    acc: Dict[Tuple[Any, Any], int] = {}
    if order.is_total and len(since) == 1:
        s0 = since[0]
        for v, t, r in updates:
            k = (v, t if t >= s0 else s0)
            acc[k] = acc.get(k, 0) + r
    elif since and order.depth == 1 and order.outer.is_total:
        # Product(int, int): advancing to an antichain is the join with its meet (a product of
        # total orders is a distributive lattice), written out on the two coordinates.
        m0, m1 = since[0]
        for f0, f1 in since:
            m0 = f0 if f0 < m0 else m0
            m1 = f1 if f1 < m1 else m1
        new = tuple.__new__
        for v, t, r in updates:
            a, b = t
            if a < m0 or b < m1:  # the advanced time is of the kind of t (Product or tuple)
                t = new(type(t), (a if a >= m0 else m0, b if b >= m1 else m1))
            k = (v, t)
            acc[k] = acc.get(k, 0) + r
    elif since:
        join, meet = order.join, order.meet
        for v, t, r in updates:
            k = (v, advance_time(t, since, join, meet))
            acc[k] = acc.get(k, 0) + r
    else:
        for v, t, r in updates:
            k = (v, t)
            acc[k] = acc.get(k, 0) + r
    return [(v, t, r) for (v, t), r in acc.items() if r]


from timelypy.kernels import adopt  # noqa: E402  (last: a drop-in replaces the names above)

adopt(__name__, globals())
