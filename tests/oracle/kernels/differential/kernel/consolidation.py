"""The consolidation kernel, plainly: sum per ``(data, time)``, drop zeros, advance times."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

__all__ = [
    "accumulate",
    "accumulate_at",
    "accumulate_into",
    "advance_and_consolidate",
    "advance_time",
    "consolidate",
]

Update = Tuple[Any, Any, int]


def advance_time(t: Any, frontier: Sequence[Any], join: Callable, meet: Callable) -> Any:
    """The meet over ``f`` in ``frontier`` of ``join(t, f)`` (``t`` if the frontier is empty)."""
    if not frontier:
        return t
    joined = [join(t, f) for f in frontier]
    result = joined[0]
    for other in joined[1:]:
        result = meet(result, other)
    return result


def _sum(pairs: Iterable[Tuple[Any, int]]) -> Dict[Any, int]:
    acc: Dict[Any, int] = {}
    for k, r in pairs:
        acc[k] = acc.get(k, 0) + r
    return acc


def accumulate(pairs: Iterable[Tuple[Any, int]]) -> Dict[Any, int]:
    """``{item: total}`` without the items whose diffs cancel."""
    return {k: r for k, r in _sum(pairs).items() if r != 0}


def accumulate_at(updates: Iterable[Update], time: Any, le: Callable) -> Dict[Any, int]:
    """``{data: total}`` over the updates at times ``<= time``."""
    return accumulate((d, r) for d, t, r in updates if le(t, time))


def accumulate_into(acc: Dict[Tuple[Any, Any], int], updates: Iterable[Update]) -> None:
    """Add every ``(data, time, diff)`` into ``acc[(data, time)]`` (zeros kept)."""
    for d, t, r in updates:
        acc[(d, t)] = acc.get((d, t), 0) + r


def consolidate(updates: Iterable[Update]) -> List[Update]:
    """One update per ``(data, time)`` with the summed diff; none that cancel."""
    return [(d, t, r) for (d, t), r in _sum(((d, t), r) for d, t, r in updates).items() if r != 0]


def advance_and_consolidate(
    updates: Iterable[Update], since: Sequence[Any], order: Any
) -> List[Update]:
    """Advance every time to ``since`` with the order's lattice, then consolidate."""
    return consolidate(
        (d, advance_time(t, since, order.join, order.meet), r) for d, t, r in updates
    )
