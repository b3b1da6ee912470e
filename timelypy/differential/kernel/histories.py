"""Kernel: the per-key histories of reduce, read at a time, compacted, and closed under joins.

**Contract.** A *history* is one key's list of updates. At ``Product(int, int)`` times (the
times of an iterative scope in a root scope, the hot case) it is *flat*: a list of ``(val,
outer, inner, diff)`` tuples, or, for ``distinct`` (records arranged by self, one value), a
*quad list* of ints ``[size, mark, kind, outer, inner, diff, ...]`` (``kind`` 0: input, 1: output;
``size`` is the list's length after its last compaction). At other times it is a list of
``(val, time, diff)`` read with the order's ``le``. A time ``(o, i)`` is below ``(p, j)`` when
``o <= p and i <= j``; a join is ``(max outer, max inner)``.

* reading at a time ``(o, i)``: :func:`accumulate_at` (``{val: total}`` of the updates at times
  below it, zeros kept), :func:`count_at` (the total of their diffs), :func:`count_and_above`
  (that total and the times not below it), :func:`quad_counts_at` and
  :func:`quad_counts_and_above` (the same on quad lists, input and output apart);
  :func:`accumulate` at any order;
* compaction to a frontier whose meet is ``(m0, m1)`` (advancing to an antichain of
  ``Product(int, int)`` is the join with its meet): :func:`compact_flat`,
  :func:`compact_quads` (advanced and consolidated: every accumulation at a time at or beyond
  the meet is unchanged); :func:`split_quads` reads a quad list as two flat histories;
* times: :func:`minimal` (the minimal elements of times given by inner coordinate),
  :func:`joins`, :func:`joins_with_one`, :func:`closure` (the joins of every set of times holding
  a fresh one), :func:`quad_closure` (the same for the quads of a quad list from an index on)
  and :func:`close_under_joins` at any order.

Kernels never modify their arguments and return fresh containers (a caller may keep or change
them); the order of elements in a returned list or dict is unspecified. Each is one pass over
its history (``O(len)``), the joins ``O(distinct outers x times)``. The operators of
:mod:`timelypy.differential.reduce` call them by these names (see :mod:`timelypy.kernels` for how
another implementation drops in).
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

COMPILED = False
"""True in the copy :func:`timelypy.kernels.compile_kernels` compiles (mypyc takes the
``if COMPILED:`` definitions, written for it; the interpreter the others)."""

__all__ = [
    "accumulate",
    "accumulate_at",
    "close_under_joins",
    "closure",
    "compact_flat",
    "compact_quads",
    "count_and_above",
    "count_at",
    "joins",
    "joins_with_one",
    "minimal",
    "quad_closure",
    "quad_counts_and_above",
    "quad_counts_at",
    "split_quads",
]

Time = Tuple[int, int]
FlatHistory = List[Tuple[Any, int, int, int]]
"""``[(val, outer, inner, diff), ...]``."""


def accumulate(hist: Iterable[Tuple[Any, Any, int]], t: Any, le: Callable) -> Dict[Any, int]:
    """``{val: total}`` over the ``(val, time, diff)`` updates of ``hist`` at times ``le`` ``t``
    (zeros kept)."""
    acc: Dict[Any, int] = {}
    for v, u, r in hist:
        if le(u, t):
            acc[v] = acc.get(v, 0) + r
    return acc


def accumulate_at(hist: FlatHistory, o: int, i: int) -> Dict[Any, int]:
    """``{val: total}`` over the updates of the flat ``hist`` at times below ``(o, i)`` (zeros
    kept)."""
    acc: Dict[Any, int] = {}
    for v, a, b, r in hist:
        if a <= o and b <= i:
            acc[v] = acc.get(v, 0) + r
    return acc


def count_at(hist: FlatHistory, o: int, i: int) -> int:
    """The total diff of the updates of the flat ``hist`` at times below ``(o, i)``."""
    c = 0
    for _, a, b, r in hist:
        if a <= o and b <= i:
            c += r
    return c


def count_and_above(hist: FlatHistory, o: int, i: int) -> Tuple[int, List[Time]]:
    """:func:`count_at` of ``(o, i)``, and the times of the other updates (not below it)."""
    c = 0
    above: List[Time] = []
    for _, a, b, r in hist:
        if a <= o and b <= i:
            c += r
        else:
            above.append((a, b))
    return c, above


if COMPILED:
    # The compiled build's readers index the list: mypyc compares unboxed ints there, where
    # the interpreter's fastest loop is ``zip`` over ``islice`` (C-level iteration).

    def quad_counts_at(h: List[int], o: int, i: int) -> Tuple[int, int]:
        """The total input and output diffs of the quad list ``h`` at times below ``(o, i)``."""
        c = have = 0
        for j in range(2, len(h), 4):
            if h[j + 1] <= o and h[j + 2] <= i:
                if h[j]:
                    have += h[j + 3]
                else:
                    c += h[j + 3]
        return c, have

    def quad_counts_and_above(
        h: List[int], end: int, o: int, i: int
    ) -> Tuple[int, int, List[Time]]:
        """:func:`quad_counts_at` of ``(o, i)`` over the quads before index ``end`` of ``h``, and
        the times of the other quads among them (not below it)."""
        c = have = 0
        above: List[Time] = []
        for j in range(2, end, 4):
            a = h[j + 1]
            b = h[j + 2]
            if a <= o and b <= i:
                if h[j]:
                    have += h[j + 3]
                else:
                    c += h[j + 3]
            else:
                above.append((a, b))
        return c, have, above

    def _quad_times(h: List[int], start: int, end: int, m0: int, m1: int) -> Set[Time]:
        """The times of the quads of ``h`` from index ``start`` to ``end`` not below
        ``(m0, m1)``."""
        out: Set[Time] = set()
        for j in range(start, end, 4):
            a = h[j + 1]
            b = h[j + 2]
            if a > m0 or b > m1:
                out.add((a, b))
        return out

    def _all_quad_times(h: List[int], start: int, end: int) -> Set[Time]:
        """The times of the quads of ``h`` from index ``start`` to ``end``."""
        return {(h[j + 1], h[j + 2]) for j in range(start, end, 4)}

else:

    def quad_counts_at(h: List[int], o: int, i: int) -> Tuple[int, int]:
        """The total input and output diffs of the quad list ``h`` at times below ``(o, i)``."""
        c = have = 0
        it = islice(h, 2, None)
        for k, a, b, r in zip(it, it, it, it):
            if a <= o and b <= i:
                if k:
                    have += r
                else:
                    c += r
        return c, have

    def quad_counts_and_above(
        h: List[int], end: int, o: int, i: int
    ) -> Tuple[int, int, List[Time]]:
        """:func:`quad_counts_at` of ``(o, i)`` over the quads before index ``end`` of ``h``, and
        the times of the other quads among them (not below it)."""
        c = have = 0
        above: List[Time] = []
        it = islice(h, 2, end)
        for k, a, b, r in zip(it, it, it, it):
            if a <= o and b <= i:
                if k:
                    have += r
                else:
                    c += r
            else:
                above.append((a, b))
        return c, have, above


def compact_flat(hist: FlatHistory, m0: int, m1: int) -> FlatHistory:
    """The flat ``hist`` advanced to the frontier whose meet is ``(m0, m1)`` and consolidated
    (no two updates at one value and time, no zero diff)."""
    acc: Dict[Tuple[Any, int, int], int] = {}
    for v, a, b, r in hist:
        k = (v, a if a >= m0 else m0, b if b >= m1 else m1)
        acc[k] = acc.get(k, 0) + r
    return [(v, a, b, r) for (v, a, b), r in acc.items() if r]


def compact_quads(h: List[int], m0: int, m1: int) -> List[int]:
    """The quad list ``h`` advanced to the frontier whose meet is ``(m0, m1)`` and consolidated;
    its size and mark (first two elements) are its new length."""
    acc: Dict[Tuple[int, int, int], int] = {}
    it = islice(h, 2, None)
    for k, a, b, r in zip(it, it, it, it):
        key = (k, a if a >= m0 else m0, b if b >= m1 else m1)
        acc[key] = acc.get(key, 0) + r
    out: List[int] = [0, 0]
    for (k, a, b), r in acc.items():
        if r:
            out += (k, a, b, r)
    out[0] = out[1] = len(out)
    return out


def split_quads(h: List[int]) -> Tuple[FlatHistory, FlatHistory]:
    """The quad list ``h`` as its input and output flat histories ``[((), outer, inner,
    diff)]``."""
    hin: FlatHistory = []
    hout: FlatHistory = []
    it = islice(h, 2, None)
    for k, a, b, r in zip(it, it, it, it):
        (hout if k else hin).append(((), a, b, r))
    return hin, hout


def minimal(low: Dict[int, int]) -> List[Time]:
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


def joins(fresh: Set[Time], times: Set[Time]) -> Set[Time]:
    """The joins of every nonempty set of times of ``fresh | times`` that holds a time of
    ``fresh`` (``fresh`` not empty). ``(o, i)`` is one exactly when some time has outer ``o``
    and inner ``<= i``, some time has inner ``i`` and outer ``<= o``, and some fresh time is
    below ``(o, i)``: one pass per distinct outer, not pairwise joins."""
    m0 = min([a for a, _ in fresh])
    every = times | fresh
    candidates = set(fresh)
    for o in {a for a, _ in every if a >= m0}:
        lo = min([b for a, b in fresh if a <= o])
        at_o = min([b for a, b in every if a == o])
        if at_o > lo:
            lo = at_o
        candidates.update([(o, b) for a, b in every if a <= o and b >= lo])
    return candidates


def joins_with_one(s: Time, above: Set[Time]) -> Set[Time]:
    """:func:`joins` of ``{s}`` and ``above`` (none of whose times is below ``s``). When those
    all share ``s``'s outer (or inner) side, they are ``s`` joined with each one."""
    s0, s1 = s
    if all([a <= s0 for a, _ in above]):
        candidates = {(s0, b) for _, b in above}
    elif all([b <= s1 for _, b in above]):
        candidates = {(a, s1) for a, _ in above}
    else:
        return joins({s}, above)
    candidates.add(s)
    return candidates


def closure(
    fresh: Set[Time], hist_in: FlatHistory, hist_out: Optional[FlatHistory], known: Set[Time]
) -> Set[Time]:
    """The joins of every set of times that holds a time of ``fresh`` (times of updates of
    ``hist_in``: the new input's) and otherwise times of the flat histories and of ``known``
    (the pending ones): :func:`joins` of ``fresh`` and all those times. A time below every
    fresh one joins nothing new, so the times are filtered first (with one fresh time usually
    little is left)."""
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
        return set(fresh)
    if len(fresh) == 1:
        return joins_with_one(s, above)
    return joins(fresh, above)


def quad_closure(h: List[int], start: int, known: Set[Time]) -> Set[Time]:
    """:func:`closure` on a quad list: the joins of every set of times that holds the time of
    a quad of ``h`` from index ``start`` on (the fresh ones; at least one) and otherwise times
    of ``h``'s quads (input or output) and of ``known``. The times below every fresh one are
    left out first, as :func:`closure` does."""
    if COMPILED:
        fresh = _all_quad_times(h, start, len(h))
        m0 = min([a for a, _ in fresh])
        m1 = min([b for _, b in fresh])
        above = _quad_times(h, 2, start, m0, m1)
    else:
        it = islice(h, start, None)
        fresh = {(a, b) for _, a, b, _ in zip(it, it, it, it)}
        m0 = min([a for a, _ in fresh])
        m1 = min([b for _, b in fresh])
        it = islice(h, 2, start)
        above = {(a, b) for _, a, b, _ in zip(it, it, it, it) if a > m0 or b > m1}
    above.update([t for t in known if t[0] > m0 or t[1] > m1])
    if len(fresh) > 1:
        above.update([t for t in fresh if t[0] > m0 or t[1] > m1])
    if not above:
        return fresh
    if len(fresh) == 1:
        for t in fresh:
            return joins_with_one(t, above)
    return joins(fresh, above)


def close_under_joins(
    seeds: Set[Any], history: Iterable[Any], le: Callable, join: Callable
) -> Set[Any]:
    """``seeds`` closed under joins with each other and with the times of ``history``, at any
    order (``le``, ``join``): every join of a set of times holding a seed.

    ``join(c, x)`` is ``c`` itself when ``x <= c``: a history time below every seed (most of a
    history compacted to the frontier) never makes a new candidate, so with one seed the
    history is filtered first and usually nothing is left."""
    times: Any = set(history)
    if len(seeds) == 1:
        for s in seeds:
            times = [x for x in times if not le(x, s)]
        if not times:
            return set(seeds)
    else:
        times.difference_update(seeds)
        times = list(times)
    candidates = set(seeds)
    new = list(seeds)
    while new:
        fresh = []
        others = times + list(candidates)
        for c in new:
            for x in others:
                if not le(x, c):
                    j = join(c, x)
                    if j not in candidates:
                        candidates.add(j)
                        fresh.append(j)
        new = fresh
    return candidates


from timelypy.kernels import adopt  # noqa: E402 - after the kernels it may replace

adopt(__name__, globals())
