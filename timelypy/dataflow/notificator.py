"""Frontier notificator: deliver capabilities in time order once the input frontiers pass them."""

from __future__ import annotations

from typing import Any, List, Sequence

from .capability import Capability

__all__ = ["Notificator"]


class Notificator:
    """Holds capabilities until all input frontiers have passed their times.

    ``notify_at(cap)`` registers a capability; :meth:`available` returns, in time order, the
    capabilities whose time no input frontier can still reach (``not frontier.less_equal(t)``
    for every input), merging duplicates. The caller owns the returned capabilities (it may
    still send at their times) and must drop them.

    Example: ``examples/epoch_counts.py`` counts records per epoch and emits each count once its
    epoch is complete.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: List[Capability] = []

    def notify_at(self, cap: Capability) -> None:
        """Hold ``cap`` (taking ownership) until every input frontier has passed its time. O(1).

        Example: ``notificator.notify_at(cap.retain())`` for every message received."""
        self._pending.append(cap)

    def available(self, frontiers: Sequence[Any]) -> List[Capability]:
        """Release the held capabilities whose time no frontier of ``frontiers`` (antichains)
        can still reach, one per time, in time order. O(pending * total frontier size).

        Example: ``for cap in notificator.available([input.frontier]): ...`` emits what is
        complete."""
        ready: dict = {}
        keep: List[Capability] = []
        for cap in self._pending:
            t = cap.time
            if any(f.less_equal(t) for f in frontiers):
                keep.append(cap)
            elif t in ready:
                cap.drop()
            else:
                ready[t] = cap
        self._pending = keep
        return [ready[t] for t in sorted(ready)]

    def pending_times(self) -> List[Any]:
        """The distinct times still held, sorted.

        Example: ``[3, 4]`` while times 3 and 4 wait."""
        return sorted({c.time for c in self._pending})

    def __len__(self) -> int:
        return len(self._pending)
