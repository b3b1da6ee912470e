"""The grouping kernel, plainly: one pass that sorts updates into groups or keeps them."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from .consolidation import consolidate

__all__ = ["consolidate_groups", "group_before", "group_not_beyond"]

Update = Tuple[Tuple[Any, Any], Any, int]
Groups = Dict[Any, List[Tuple[Any, Any, int]]]


def _group(pending: List[Update], take: Callable[[Any], bool]) -> Tuple[Groups, List[Update]]:
    data: Groups = {}
    keep: List[Update] = []
    for (key, val), t, r in pending:
        if take(t):
            data.setdefault(key, []).append((val, t, r))
        else:
            keep.append(((key, val), t, r))
    return data, keep


def group_before(pending: List[Update], bound: Optional[Any]) -> Tuple[Groups, List[Update]]:
    """The updates at times ``< bound`` (all when None) grouped by key, and the others."""
    return _group(pending, lambda t: bound is None or t < bound)


def group_not_beyond(
    pending: List[Update], beyond: Callable[[Any], bool]
) -> Tuple[Groups, List[Update]]:
    """The updates at times not ``beyond`` grouped by key, and the others."""
    return _group(pending, lambda t: not beyond(t))


def consolidate_groups(data: Groups) -> int:
    """Consolidate every key in place, drop the empty ones; the number of updates left."""
    for key in list(data):
        data[key] = consolidate(data[key])
        if not data[key]:
            del data[key]
    return sum(len(vals) for vals in data.values())
