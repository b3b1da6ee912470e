"""The plan layer's errors (re-exported from :mod:`timelypy.plan`)."""

from __future__ import annotations

__all__ = ["PlanError", "ExpressionError"]


class PlanError(ValueError):
    """A plan that cannot be built: an unknown input name, a :class:`~.nodes.Recur` outside
    the fixpoints that define it, a malformed node."""


class ExpressionError(PlanError):
    """An expression failed on a row (a division by zero, a column past the row's end, a
    comparison of a number with a string): names the node, the expression and the row."""
