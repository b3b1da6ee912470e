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

    Example: ``"a"`` at time 0, replaced by ``"b"`` at time 1 (the method examples use ``out``):

    >>> import timelypy as tp
    >>> def build(worker):
    ...     def dataflow(scope):
    ...         words_in, words = scope.new_collection()
    ...         return words_in, words.capture()
    ...     words_in, out = worker.dataflow(dataflow)
    ...     words_in.insert("a")
    ...     words_in.advance_to(1)
    ...     words_in.remove("a")
    ...     words_in.insert("b")
    ...     words_in.close()
    ...     worker.step_until_done()
    ...     return out
    >>> out = tp.execute(build)[0]
    >>> out.at(1)
    {'b': 1}
    """

    def __init__(self, captured: Captured, le: Callable):
        self.captured = captured
        self._le = le

    def updates(self) -> List[Update]:
        """Every ``(data, time, diff)`` in arrival order.

        >>> out.updates()
        [('a', 0, 1), ('a', 1, -1), ('b', 1, 1)]
        """
        return [u for _, data in self.captured.messages for u in data]

    def changes_from(self, start: int) -> Tuple[List[Update], int]:
        """The updates of messages ``start`` onwards, and the next position (for polling
        readers such as a driver session): the messages before ``start`` are released, so a
        drained capture keeps flat memory.

        >>> updates, position = out.changes_from(0)    # a later read starts at `position`
        >>> updates
        [('a', 0, 1), ('a', 1, -1), ('b', 1, 1)]
        """
        batch, position = self.captured.read_from(start)
        return [u for _, data in batch for u in data], position

    def consolidated(self) -> List[Update]:
        """The updates summed per ``(data, time)`` (none that cancel), sorted by time, then
        data (by ``repr`` when records do not compare).

        >>> out.consolidated()
        [('a', 0, 1), ('a', 1, -1), ('b', 1, 1)]
        """
        out = consolidate(self.updates())
        try:
            out.sort(key=lambda u: (u[1], u[0]))
        except TypeError:
            out.sort(key=repr)
        return out

    def at(self, t: Any) -> Dict[Any, int]:
        """The collection's content at time ``t``: ``{data: count}`` (non-zero counts).

        >>> out.at(0), out.at(1)
        ({'a': 1}, {'b': 1})
        """
        return accumulate_at(self.updates(), t, self._le)

    def by_time(self) -> Dict[Any, List[Tuple[Any, int]]]:
        """The consolidated updates grouped by time: ``{time: [(data, diff), ...]}``.

        >>> out.by_time()
        {0: [('a', 1)], 1: [('a', -1), ('b', 1)]}
        """
        out: Dict[Any, List[Tuple[Any, int]]] = {}
        for d, t, r in self.consolidated():
            out.setdefault(t, []).append((d, r))
        return out

    @property
    def frontier(self) -> List[Any]:
        """The captured stream's frontier (times that may still change): empty once done.

        >>> out.frontier
        []
        """
        return self.captured.frontier

    def done(self) -> bool:
        """The collection will not change again.

        >>> out.done()
        True
        """
        return self.captured.done()

    def less_than(self, t: Any) -> bool:
        """Some time before ``t`` may still change.

        >>> out.less_than(5)
        False
        """
        return self.captured.less_than(t)
