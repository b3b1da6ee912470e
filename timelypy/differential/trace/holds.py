"""The compaction holds of a spine of totally ordered times (see :mod:`.spine`).

Example:

>>> holds = LeastHold()
>>> holds.update_iter([(3, 1), (5, 1)])
>>> holds.frontier
[3]
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ["LeastHold"]


class LeastHold:
    """The compaction holds of a spine of totally ordered times: a count per held time, and
    the frontier (the least time with a positive count) computed when it is read after a
    change rather than at every change (holds move twice per batch, merges read it once)."""

    __slots__ = ("_counts", "_frontier")

    def __init__(self) -> None:
        self._counts: Dict[Any, int] = {}
        self._frontier: Optional[List[Any]] = []

    def update_iter(self, changes: Iterable[Tuple[Any, int]]) -> None:
        """Add the ``(time, delta)`` changes to the held counts. O(len(changes))."""
        counts = self._counts
        for t, d in changes:
            c = counts.get(t, 0) + d
            if c:
                counts[t] = c
            else:
                del counts[t]
        self._frontier = None

    @property
    def frontier(self) -> List[Any]:
        """``[least held time]``, or ``[]`` when nothing is held (do not mutate)."""
        frontier = self._frontier
        if frontier is None:
            counts = self._counts
            least = min(counts) if counts else None
            if least is not None and counts[least] <= 0:  # transiently negative: scan
                least = min((t for t, c in counts.items() if c > 0), default=None)
            frontier = self._frontier = [] if least is None else [least]
        return frontier
