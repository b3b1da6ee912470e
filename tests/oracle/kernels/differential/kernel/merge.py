"""The merge kernel, plainly: merged keys advanced and consolidated, counts recounted."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from .consolidation import advance_and_consolidate

__all__ = ["compact_keys", "compact_total", "merge_consolidating", "merge_product"]

Vals = List[Tuple[Any, Any, int]]
Data = Dict[Any, Vals]


def _count(data: Data) -> int:
    return sum(len(vals) for vals in data.values())


def merge_consolidating(
    data: Data, newer: Iterable[Tuple[Any, Vals]], count: int, since: Sequence[Any], order: Any
) -> int:
    """Merge ``newer`` into ``data``; keys in both advanced to ``since`` and consolidated."""
    for key, vals in newer:
        if key not in data:
            data[key] = list(vals)
            continue
        merged = advance_and_consolidate(data[key] + list(vals), since, order)
        if merged:
            data[key] = merged
        else:
            del data[key]
    return _count(data)


def merge_product(
    data: Data,
    newer: Iterable[Tuple[Any, Vals]],
    count: int,
    since: Sequence[Any],
    order: Any,
    several: Optional[Set[Any]] = None,
) -> int:
    """:func:`merge_consolidating`, keeping ``several`` the keys with other than one update."""
    newer = list(newer)
    count = merge_consolidating(data, newer, count, since, order)
    if several is not None:
        for key, _ in newer:
            if key in data and len(data[key]) != 1:
                several.add(key)
            else:
                several.discard(key)
    return count


def compact_total(data: Data, since: Sequence[Any], order: Any) -> int:
    """Advance every key to ``since`` and consolidate; the number of updates left."""
    kept, _ = compact_keys(data, list(data), since, order)
    return kept


def compact_keys(
    data: Data, keys: Iterable[Any], since: Sequence[Any], order: Any
) -> Tuple[int, Set[Any]]:
    """Advance ``keys`` to ``since`` and consolidate; their updates left, those with several."""
    kept = 0
    still: Set[Any] = set()
    for key in list(keys):
        new = advance_and_consolidate(data[key], since, order)
        if new:
            data[key] = new
            kept += len(new)
            if len(new) != 1:
                still.add(key)
        else:
            del data[key]
    return kept, still
