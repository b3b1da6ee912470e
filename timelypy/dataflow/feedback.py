"""Feedback: the one operator that may be created before its input, closing a loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import NotConvergedError
from ..order import PathSummary
from .operator import OperatorCore

if TYPE_CHECKING:
    from .scope import Scope

__all__ = ["FeedbackOperator", "LoopHandle"]


class FeedbackOperator(OperatorCore):
    """Forwards each message at ``summary.results_in(time)``; drops it when that is None.

    Its connectivity is ``{0: [summary]}``, so a loop through it advances time strictly (the
    reachability builder rejects loops that do not). ``max_iterations`` bounds the inner
    coordinate of Product times: passing it raises :class:`NotConvergedError`.
    """

    frontier_interest = False

    def __init__(
        self,
        scope: "Scope",
        summary: PathSummary,
        name: str = "Feedback",
        max_iterations: Optional[int] = None,
    ) -> None:
        super().__init__(scope, name, 1, 1, initial_capabilities=False, summary=[[[summary]]])
        self.summary = summary
        self.max_iterations = max_iterations
        self.connected = False
        self._queue = self.input_ports[0].queue
        self._consumed = self.shared.consumeds[0]
        self._out = self.output_ports[0]

    def schedule(self) -> bool:
        """Forward queued messages at their advanced times and report them consumed; returns
        False. NotConvergedError past ``max_iterations``."""
        self.shared.frontiers[0].clear()
        q = self._queue
        results_in = self.summary.results_in
        limit = self.max_iterations
        while q:
            time, data = q.popleft()
            self._consumed.update(time, len(data))
            t2 = results_in(time)
            if t2 is None:
                continue
            if limit is not None and t2[1] > limit:
                raise NotConvergedError(
                    f"loop {self.name!r} on worker {self.worker_index} did not converge within "
                    f"{limit} iterations (still changing at time {time!r}, e.g. "
                    f"{data[:3]!r})"
                )
            self._out.push(t2, data)
        return False


class LoopHandle:
    """The input end of a feedback operator; connect a stream with ``stream.connect_loop``.

    Example: ``handle, stream = child.feedback()``; ``stream.map(step).connect_loop(handle)``
    closes the loop."""

    __slots__ = ("op",)

    def __init__(self, op: FeedbackOperator) -> None:
        self.op = op

    def __repr__(self) -> str:
        return f"LoopHandle({self.op.name!r})"
