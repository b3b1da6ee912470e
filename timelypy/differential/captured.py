"""Captured collections: the updates a collection produced, for tests, programs and sessions."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from ..dataflow.capture import Captured
from .consolidation import accumulate_at, consolidate

__all__ = ["CapturedCollection"]

Update = Tuple[Any, Any, int]


class CapturedCollection:
    """The updates a collection produced, for tests and programs.

    ``updates()``: every ``(data, time, diff)``; ``consolidated()``: summed per
    ``(data, time)``; ``at(t)``: the collection's content at time ``t`` as ``{data: count}``;
    ``by_time()``: consolidated updates grouped by time.
    """

    def __init__(self, captured: Captured, le: Callable):
        self.captured = captured
        self._le = le

    def updates(self) -> List[Update]:
        """Every ``(data, time, diff)`` in arrival order."""
        return [u for _, data in self.captured.messages for u in data]

    def changes_from(self, start: int) -> Tuple[List[Update], int]:
        """The updates of messages ``start`` onwards, and the next position (for polling
        readers such as a driver session): the messages before ``start`` are released, so a
        drained capture keeps flat memory."""
        batch, position = self.captured.read_from(start)
        return [u for _, data in batch for u in data], position

    def consolidated(self) -> List[Update]:
        """The updates summed per ``(data, time)`` (none that cancel), sorted by time, then
        data (by ``repr`` when records do not compare)."""
        out = consolidate(self.updates())
        try:
            out.sort(key=lambda u: (u[1], u[0]))
        except TypeError:
            out.sort(key=repr)
        return out

    def at(self, t: Any) -> Dict[Any, int]:
        """The collection's content at time ``t``: ``{data: count}`` (non-zero counts)."""
        return accumulate_at(self.updates(), t, self._le)

    def by_time(self) -> Dict[Any, List[Tuple[Any, int]]]:
        """The consolidated updates grouped by time: ``{time: [(data, diff), ...]}``."""
        out: Dict[Any, List[Tuple[Any, int]]] = {}
        for d, t, r in self.consolidated():
            out.setdefault(t, []).append((d, r))
        return out

    @property
    def frontier(self) -> List[Any]:
        """The captured stream's frontier (times that may still change)."""
        return self.captured.frontier

    def done(self) -> bool:
        """The collection will not change again."""
        return self.captured.done()

    def less_than(self, t: Any) -> bool:
        """Some time before ``t`` may still change."""
        return self.captured.less_than(t)
