"""The plain twin of ``timelypy.progress.kernel``: the same names and contract, written to be
obviously right (rebuild from scratch, brute-force minima) rather than fast."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple

__all__ = [
    "frontier_changes",
    "least_positive",
    "minimal_positive",
    "move",
    "update",
    "update_many",
    "update_partial",
    "update_total",
]


def _set(table: Dict[Any, int], item: Any, count: int) -> None:
    if count == 0:
        table.pop(item, None)
    else:
        table[item] = count


def update(table: Dict[Any, int], item: Any, delta: int) -> None:
    """Add ``delta`` to the count of ``item``; a zero count leaves the table."""
    _set(table, item, table.get(item, 0) + delta)


def update_many(table: Dict[Any, int], pairs: Iterable[Tuple[Any, int]]) -> int:
    """Add every pair; the sum of the deltas."""
    pairs = list(pairs)
    for item, delta in pairs:
        update(table, item, delta)
    return sum(delta for _, delta in pairs)


def least_positive(table: Dict[Any, int]) -> Any:
    """The least item with a positive count, or None."""
    positive = [t for t, c in table.items() if c > 0]
    return min(positive) if positive else None


def minimal_positive(table: Dict[Any, int], le: Callable[[Any, Any], bool]) -> List[Any]:
    """The positive items no other positive item is ``le``, sorted."""
    positive = [t for t, c in table.items() if c > 0]
    return sorted(t for t in positive if not any(u != t and le(u, t) for u in positive))


def update_total(
    table: Dict[Any, int], pairs: Iterable[Tuple[Any, int]], old: Any
) -> Tuple[int, bool]:
    """Apply the pairs; the sum of the deltas and whether the least positive item changed
    (reported as "may have moved": True whenever it did)."""
    moved = update_many(table, pairs)
    return moved, least_positive(table) != old


def update_partial(
    table: Dict[Any, int],
    frontier: Sequence[Any],
    pairs: Iterable[Tuple[Any, int]],
    le: Callable[[Any, Any], bool],
) -> bool:
    """Apply the pairs; whether the minimal positive items changed."""
    update_many(table, pairs)
    return set(minimal_positive(table, le)) != set(frontier)


def frontier_changes(old: Sequence[Any], new: Sequence[Any]) -> List[Tuple[Any, int]]:
    """``(t, -1)`` for each element of ``old`` not in ``new``, then ``(t, +1)`` for each of
    ``new`` not in ``old``."""
    return [(t, -1) for t in old if t not in new] + [(t, 1) for t in new if t not in old]


def move(table: Dict[Any, int], old: Any, new: Any) -> None:
    """One count from ``old`` to ``new`` (None: nothing)."""
    if old is not None:
        update(table, old, -1)
    if new is not None:
        update(table, new, 1)
