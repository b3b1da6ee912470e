"""The loop edge of an iterative scope: the feedback a differential variable circulates on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from ..dataflow.feedback import LoopHandle
from ..dataflow.stream import Stream
from ..errors import TimelyError
from ..order import IntSummary, PathSummary, ProductSummary

if TYPE_CHECKING:
    from ..dataflow.scope import Scope

__all__ = ["loop_variable"]


def loop_variable(
    scope: "Scope", max_iterations: Optional[int] = None, summary: Optional[PathSummary] = None
) -> Tuple[LoopHandle, Stream, PathSummary]:
    """A feedback edge in the iterative ``scope``: returns ``(handle, stream, summary)``.

    ``summary`` (default: one more iteration) is what each trip around the loop adds to a
    time; ``max_iterations`` bounds the trips (exceeding it raises
    :class:`~timelypy.errors.NotConvergedError`). Connect the next iterate's updates, advanced
    by ``summary``, to ``handle``.
    """
    if scope.order.outer is None:
        raise TimelyError("Variable: needs an iterative scope (use scope.iterative)")
    if summary is None:
        summary = ProductSummary(scope.order.outer.identity, IntSummary(1))
    handle, stream = scope.feedback(summary, name="Variable", max_iterations=max_iterations)
    return handle, stream, summary
