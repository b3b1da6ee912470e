"""Capture: record a stream's messages and frontier for tests and programs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Tuple

from ..progress.change_batch import ChangeBatch
from ..progress.frontier import MutableAntichain
from .operator import OperatorCore
from .state import OperatorState

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["Captured", "CaptureOperator"]


class Captured:
    """What a captured stream delivered: ``messages`` as ``(time, list of records)`` in arrival
    order, and the frontier of the stream (``frontier``, ``done()``); ``frontier_history`` lists
    every frontier the stream has had, in order.

    Example: ``out = stream.capture()``; after running, ``out.records()``, ``out.by_time()``."""

    HISTORY = 10_000
    """``frontier_history`` keeps at least the most recent ``HISTORY`` frontiers (at most twice
    as many): a long-lived capture stays bounded."""

    def __init__(self, le: Optional[Callable[[Any, Any], bool]] = None) -> None:
        self.messages: List[Tuple[Any, List[Any]]] = []
        self.released = 0
        """Messages a polling reader has read and released (:meth:`changes_from`)."""
        self._frontier = MutableAntichain(le)
        self.frontier_history: List[List[Any]] = []

    def records(self) -> List[Tuple[Any, Any]]:
        """Every ``(time, record)`` in arrival order.

        Example: ``[(0, "a"), (1, "b")]`` for ``"a"`` sent at time 0 and ``"b"`` at time 1."""
        return [(t, r) for t, data in self.messages for r in data]

    def by_time(self) -> Dict[Any, List[Any]]:
        """Records grouped by time (times in order, records in arrival order).

        Example: ``{0: ["a"], 1: ["b"]}`` for the same records."""
        out: Dict[Any, List[Any]] = {}
        for t, data in self.messages:
            out.setdefault(t, []).extend(data)
        return dict(sorted(out.items()))

    def changes_from(self, start: int) -> Tuple[List[Tuple[Any, Any]], int]:
        """The ``(time, record)`` pairs of messages ``start`` onwards, and the next position
        (for readers that poll, such as a driver session). See :meth:`read_from`.

        Example: ``pairs, position = out.changes_from(position)`` in a polling loop."""
        batch, position = self.read_from(start)
        return [(t, r) for t, data in batch for r in data], position

    def read_from(self, start: int) -> Tuple[List[Tuple[Any, List[Any]]], int]:
        """Messages ``start`` onwards (positions count every message ever captured) and the
        next position. A poller declares the messages before ``start`` read: they are released,
        so a capture that is drained this way keeps flat memory (``messages`` then holds only
        the unread ones). O(messages returned).

        Example: ``messages, position = out.read_from(position)``."""
        drop = start - self.released
        if drop > 0:
            del self.messages[:drop]
            self.released = start
        messages = self.messages
        offset = max(0, start - self.released)
        return messages[offset:], self.released + len(messages)

    @property
    def frontier(self) -> List[Any]:
        """The stream's current frontier, sorted (empty once the stream is complete).

        Example: ``[2]`` while times 2 and later may still arrive; ``[]`` once done."""
        return sorted(self._frontier.frontier)

    def done(self) -> bool:
        """The frontier is empty: nothing more can arrive.

        Example: ``worker.step_while(lambda: not out.done())``."""
        return self._frontier.is_empty()

    def less_than(self, t: Any) -> bool:
        """Some time strictly before ``t`` may still arrive. O(len(frontier)).

        Example: ``worker.step_while(lambda: out.less_than(3))``."""
        return self._frontier.less_than(t)


class _CaptureFrontier(ChangeBatch):
    __slots__ = ("_cap",)

    def __init__(self, captured: Captured) -> None:
        super().__init__()
        self._cap = captured

    def extend(self, pairs: Iterable[Tuple[Any, int]]) -> None:
        """Apply frontier changes to the captured frontier, recording each new frontier."""
        cap = self._cap
        if cap._frontier.update_iter(pairs):
            history = cap.frontier_history
            history.append(sorted(cap._frontier.frontier))
            if len(history) > 2 * cap.HISTORY:
                del history[: -cap.HISTORY]  # amortised O(1): a long-lived capture stays bounded


class CaptureOperator(OperatorCore):
    """Consumes its input into a :class:`Captured`; the scope's frontier changes at the input go
    straight into the captured frontier, without running the operator."""

    wake_on_frontier = False

    def __init__(self, scope: "Scope", captured: Captured, name: str = "Capture") -> None:
        super().__init__(scope, name, 1, 0, initial_capabilities=False)
        self.shared.frontiers[0] = _CaptureFrontier(captured)
        self._captured = captured
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]

    def snapshot_state(self) -> OperatorState:
        """The captured messages not yet released to a poller, one keyed piece each
        (``(time, records)``; the routing is only a spread: a capture's contents are the
        union over the workers, so a restore onto another number of workers may place them
        anywhere)."""
        released = self._captured.released
        return OperatorState(
            keyed=[(released + i, (t, list(d))) for i, (t, d) in enumerate(self._captured.messages)]
        )

    def restore_state(self, state: OperatorState) -> None:
        """Put this worker's share of the captured messages back (in their order)."""
        for _, (t, d) in sorted(state.keyed, key=lambda p: p[0]):
            self._captured.messages.append((t, list(d)))

    def schedule(self) -> bool:
        """Append queued messages to the captured ones and report them consumed; returns False."""
        q = self._queue
        while q:
            time, data = q.popleft()
            self._consumed.update(time, len(data))
            self._captured.messages.append((time, data))
        return False
