"""Plain histories kernels: the contract of ``timelypy.differential.kernel.histories``, spelled
out the obvious way (slow is fine).

A flat history is ``[(val, outer, inner, diff)]``; a quad list ``[size, mark, kind, outer,
inner, diff, ...]`` (kind 0 input, 1 output); times are ``(outer, inner)`` pairs under the product
order, whose join is the pair of maxima.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

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


def _le(s: Time, t: Time) -> bool:
    return s[0] <= t[0] and s[1] <= t[1]


def _join(s: Time, t: Time) -> Time:
    return (max(s[0], t[0]), max(s[1], t[1]))


def _quads(h: List[int]) -> List[Tuple[int, int, int, int]]:
    body = h[2:]
    return [(body[k], body[k + 1], body[k + 2], body[k + 3]) for k in range(0, len(body), 4)]


def accumulate(hist: Iterable[Tuple[Any, Any, int]], t: Any, le: Callable) -> Dict[Any, int]:
    out: Dict[Any, int] = {}
    for v, u, r in hist:
        if le(u, t):
            out[v] = out.get(v, 0) + r
    return out


def accumulate_at(hist: List[Any], o: int, i: int) -> Dict[Any, int]:
    return accumulate([(v, (a, b), r) for v, a, b, r in hist], (o, i), _le)


def count_at(hist: List[Any], o: int, i: int) -> int:
    return sum(accumulate_at(hist, o, i).values())


def count_and_above(hist: List[Any], o: int, i: int) -> Tuple[int, List[Time]]:
    return count_at(hist, o, i), [(a, b) for _, a, b, _ in hist if not _le((a, b), (o, i))]


def quad_counts_at(h: List[int], o: int, i: int) -> Tuple[int, int]:
    hin, hout = split_quads(h)
    return count_at(hin, o, i), count_at(hout, o, i)


def quad_counts_and_above(h: List[int], end: int, o: int, i: int) -> Tuple[int, int, List[Time]]:
    h = h[:end]
    c, have = quad_counts_at(h, o, i)
    return c, have, [(a, b) for _, a, b, _ in _quads(h) if not _le((a, b), (o, i))]


def _consolidate(items: List[Tuple[Any, int]]) -> Dict[Any, int]:
    out: Dict[Any, int] = {}
    for k, r in items:
        out[k] = out.get(k, 0) + r
    return {k: r for k, r in out.items() if r}


def compact_flat(hist: List[Any], m0: int, m1: int) -> List[Any]:
    acc = _consolidate([((v, max(a, m0), max(b, m1)), r) for v, a, b, r in hist])
    return [(v, a, b, r) for (v, a, b), r in acc.items()]


def compact_quads(h: List[int], m0: int, m1: int) -> List[int]:
    acc = _consolidate([((k, max(a, m0), max(b, m1)), r) for k, a, b, r in _quads(h)])
    out = [0, 0]
    for (k, a, b), r in acc.items():
        out.extend([k, a, b, r])
    out[0] = out[1] = len(out)
    return out


def split_quads(h: List[int]) -> Tuple[List[Any], List[Any]]:
    quads = _quads(h)
    return (
        [((), a, b, r) for k, a, b, r in quads if k == 0],
        [((), a, b, r) for k, a, b, r in quads if k != 0],
    )


def minimal(low: Dict[int, int]) -> List[Time]:
    times = [(a, b) for b, a in low.items()]
    return [t for t in times if not any(u != t and _le(u, t) for u in times)]


def _all_joins(fresh: Set[Time], times: Set[Time]) -> Set[Time]:
    """Every join of a nonempty subset of ``fresh | times`` holding a fresh time: by brute
    force over subsets when small, else by closing under pairwise joins."""
    pool = sorted(times | fresh)
    if len(pool) <= 10:
        out = set()
        for n in range(1, len(pool) + 1):
            for subset in combinations(pool, n):
                if any(t in fresh for t in subset):
                    j = subset[0]
                    for t in subset[1:]:
                        j = _join(j, t)
                    out.add(j)
        return out
    out = set(fresh)
    changed = True
    while changed:
        changed = False
        for c in list(out):
            for t in pool + list(out):
                j = _join(c, t)
                if j not in out:
                    out.add(j)
                    changed = True
    return out


def joins(fresh: Set[Time], times: Set[Time]) -> Set[Time]:
    return _all_joins(set(fresh), set(times))


def joins_with_one(s: Time, above: Set[Time]) -> Set[Time]:
    return _all_joins({s}, set(above))


def closure(
    fresh: Set[Time], hist_in: List[Any], hist_out: Optional[List[Any]], known: Set[Time]
) -> Set[Time]:
    times = {(a, b) for _, a, b, _ in hist_in} | {(a, b) for _, a, b, _ in hist_out or ()}
    return _all_joins(set(fresh), times | set(known))


def quad_closure(h: List[int], start: int, known: Set[Time]) -> Set[Time]:
    body = h[start:]
    fresh = {(body[k + 1], body[k + 2]) for k in range(0, len(body), 4)}
    return _all_joins(fresh, {(a, b) for _, a, b, _ in _quads(h)} | set(known))


def close_under_joins(
    seeds: Set[Any], history: Iterable[Any], le: Callable, join: Callable
) -> Set[Any]:
    out = set(seeds)
    pool = list(set(history))
    changed = True
    while changed:
        changed = False
        for c in list(out):
            for t in pool + list(out):
                j = join(c, t)
                if j not in out:
                    out.add(j)
                    changed = True
    return out
