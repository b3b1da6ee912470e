"""Expressions over tuple records: what a plan computes per record, as data.

A plan's records are tuples (a relation's row); an expression reads columns of one row by
position and computes a value. Expressions are frozen dataclasses, so a plan that uses them
prints, compares and hashes structurally (the lowering shares work between equal sub-plans)
and a planner can look inside them (which columns a join or a filter needs).

* :class:`Column` -- the row's ``index``-th field.
* :class:`Const` -- a constant value.
* :class:`Arith` -- ``+ - * / %`` (``/`` on ints is floor division, as in Soufflé) and ``min``
  / ``max`` of two sub-expressions.
* :class:`Compare` -- ``= != < <= > >=`` of two sub-expressions (a predicate).
* :class:`And` -- all of several predicates.
* :class:`Row` -- a tuple of sub-expressions (a nested record, e.g. ``(key, (v1, v2))``).

``evaluate_expression(expr, row)`` computes one (the lowering compiles a whole tuple of them to
one Python function once, so a hot loop does not walk the tree per record).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, Tuple, Union

__all__ = [
    "Expression",
    "Column",
    "Const",
    "Arith",
    "Compare",
    "And",
    "Row",
    "ARITH_OPS",
    "COMPARE_OPS",
    "evaluate_expression",
    "divide",
]

ARITH_OPS = ("+", "-", "*", "/", "%", "min", "max")
"""The operators of :class:`Arith`."""
COMPARE_OPS = ("=", "!=", "<", "<=", ">", ">=")
"""The operators of :class:`Compare`."""


@dataclass(frozen=True)
class Column:
    """The ``index``-th field of the row."""

    index: int


@dataclass(frozen=True)
class Const:
    """A constant (an int, float, str or bool)."""

    value: Any


@dataclass(frozen=True)
class Arith:
    """``left op right`` for ``op`` in :data:`ARITH_OPS`."""

    op: str
    left: "Expression"
    right: "Expression"

    def __post_init__(self) -> None:
        if self.op not in ARITH_OPS:
            raise ValueError(f"Arith: unknown operator {self.op!r} (one of {ARITH_OPS})")


@dataclass(frozen=True)
class Compare:
    """``left op right`` for ``op`` in :data:`COMPARE_OPS`: a predicate."""

    op: str
    left: "Expression"
    right: "Expression"

    def __post_init__(self) -> None:
        if self.op not in COMPARE_OPS:
            raise ValueError(f"Compare: unknown operator {self.op!r} (one of {COMPARE_OPS})")


@dataclass(frozen=True)
class And:
    """All of ``terms`` hold (the empty conjunction holds)."""

    terms: Tuple["Expression", ...]


@dataclass(frozen=True)
class Row:
    """The tuple of ``items``' values."""

    items: Tuple["Expression", ...]


Expression = Union[Column, Const, Arith, Compare, And, Row]
"""Any expression node."""


def evaluate_expression(expr: Expression, row: Tuple[Any, ...]) -> Any:
    """The value of ``expr`` on ``row`` by walking the tree (for one-off values, e.g. constant
    folding in a front-end; the lowering compiles expressions instead).

    Example: ``evaluate_expression(Arith("+", Column(0), Const(1)), (41,))`` is 42."""
    if isinstance(expr, Column):
        return row[expr.index]
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Arith):
        a, b = evaluate_expression(expr.left, row), evaluate_expression(expr.right, row)
        return _ARITH[expr.op](a, b)
    if isinstance(expr, Compare):
        a, b = evaluate_expression(expr.left, row), evaluate_expression(expr.right, row)
        return _COMPARE[expr.op](a, b)
    if isinstance(expr, And):
        return all(evaluate_expression(t, row) for t in expr.terms)
    if isinstance(expr, Row):
        return tuple(evaluate_expression(i, row) for i in expr.items)
    raise TypeError(f"not an expression: {expr!r}")


def divide(a: Any, b: Any) -> Any:
    """``a / b`` as :class:`Arith` means it: floor division when both are ints, and
    true division otherwise."""
    if isinstance(a, int) and isinstance(b, int):
        return a // b
    return a / b


_ARITH: Dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": divide,
    "%": operator.mod,
    "min": min,
    "max": max,
}
_COMPARE: Dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
