"""Variables: collections defined in terms of themselves, for iteration and mutual recursion."""

from __future__ import annotations

from typing import Any, Optional

from ..errors import TimelyError
from ..order import IntSummary, PathSummary, ProductSummary
from .collection import Collection

__all__ = ["Variable"]


class Variable(Collection):
    """A collection in an iterative scope whose next iterate is given later by :meth:`set`.

    ``Variable.new_from(source)`` starts at ``source`` (seed 002: the feedback carries
    ``result - source``, so at iteration ``i+1`` the variable equals ``result_i``).
    ``Variable.new(scope)`` starts empty (for mutual recursion).
    """

    __slots__ = ("_handle", "_source", "_summary", "_set")

    @classmethod
    def new(cls, scope: Any, max_iterations: Optional[int] = None,
            summary: Optional[PathSummary] = None) -> "Variable":
        return cls._make(scope, None, max_iterations, summary)

    @classmethod
    def new_from(cls, source: Collection, max_iterations: Optional[int] = None,
                 summary: Optional[PathSummary] = None) -> "Variable":
        return cls._make(source.scope, source, max_iterations, summary)

    @classmethod
    def _make(cls, scope, source, max_iterations, summary) -> "Variable":
        if scope.order.outer is None:
            raise TimelyError("Variable: needs an iterative scope (use scope.iterative)")
        if summary is None:
            summary = ProductSummary(scope.order.outer.identity, IntSummary(1))
        handle, stream = scope.feedback(summary, name="Variable", max_iterations=max_iterations)
        fed_back = Collection(scope, stream)
        collection = fed_back if source is None else fed_back.concat(source)
        var = cls(scope, collection.inner)
        var._handle = handle
        var._source = source
        var._summary = summary
        var._set = False
        return var

    def set(self, result: Collection) -> Collection:
        """Define the next iterate as ``result``; returns ``result``."""
        if self._set:
            raise TimelyError("Variable.set called twice")
        self._set = True
        fed = result if self._source is None else result.concat(self._source.negate())
        fed.results_in(self._summary).inner.connect_loop(self._handle)
        return result
