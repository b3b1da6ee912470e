"""The logical plan: a small tree of relational operators that lowers onto collections.

A plan is a tree of frozen dataclasses. Equal sub-plans are the same computation: the lowering
(:func:`timelypy.plan.lower`) builds each distinct sub-plan once, and arranges each relation
once per key. Records are tuples for the relational nodes (:class:`Project`, :class:`Select`,
:class:`Join`, :class:`Semijoin`, :class:`Antijoin`, :class:`Aggregate`), whose columns the
expressions of :mod:`.expressions` name by position; the function nodes (:class:`Map`,
:class:`Filter`, :class:`FlatMap`, :class:`Threshold`, :class:`Reduce`) take any record and an
opaque :class:`Fn`, for programs written with Python functions.

Weights follow the collection operators of the same names (Z-set semantics: a record's weight
may be any nonzero int; the Differential Dataflow book, "Collections"):

=====================  ============================================================================
``Scan(name)``         the input collection ``name``
``Project(i, cols)``   each row ``r`` becomes ``tuple(e(r) for e in cols)``; weights of equal
                       results add
``Select(i, pred)``    the rows for which ``pred`` holds
``Map/Filter/FlatMap`` ``fn`` per record (``Collection.map/filter/flat_map``)
``Union(inputs)``      weights add (``concat``); ``Union(())`` is the empty relation
``Negate(i)``          weights times -1
``Consolidate(i)``     the same collection (``consolidate``)
``Distinct(i)``        weight > 0 becomes 1, the rest disappears
``Threshold(i, fn)``   a record of weight ``w`` gets weight ``fn(record, w)``
``Count(i)``           ``(record, w)`` with weight 1 for every record of nonzero weight ``w``
``Reduce(i, fn)``      on ``(key, val)`` records: per key, ``fn(key, vals)`` (``vals`` the
                       ``(val, weight)`` pairs of nonzero weight, sorted) gives
                       ``[(out, weight)]``, i.e. records ``(key, out)``
``Join(l, r, lk, rk,`` rows ``a`` of ``l`` and ``b`` of ``r`` with ``a[lk] == b[rk]`` (column
``output)``            tuples) give ``tuple(e(a + b) for e in output)`` with weight
                       ``w(a) * w(b)``; columns of ``output`` count over ``a + b``
``Semijoin(l, r, lk,`` rows ``a`` of ``l`` with weight ``w(a) * W(a[lk])``, ``W(k)`` the total
``rk)``                weight of ``r``'s rows with ``b[rk] == k``
``Antijoin(l, r, lk,`` ``l`` minus ``Semijoin(l, Distinct(Project(r, rk)), lk, all columns)``:
``rk)``                the rows of ``l`` whose key has no row of positive weight in ``r``
``Aggregate(i, group,`` per value of the ``group`` columns (rows of positive weight, each
``kind, value)``       counted ``weight`` times): one row ``group + (agg,)`` of weight 1 with
                       ``agg`` the ``count`` of rows, or the ``sum``/``min``/``max`` of
                       ``value``; groups with no such row give nothing
``Fixpoint(names,``    relations ``names`` defined together: ``x0 = initial``, ``x(i+1)_j =
``initial, bodies,``   bodies_j(x(i))`` until nothing changes; in ``bodies``, ``Recur(name)`` is
``output)``            the current ``x(i)`` of ``name`` and every sub-plan without a ``Recur``
                       of this fixpoint is evaluated outside (entered once, not per round).
                       The node yields the limit of ``output``; fixpoints that differ only in
                       ``output`` are one loop
``Recur(name)``        inside a :class:`Fixpoint`'s bodies: the relation ``name`` of the
                       innermost enclosing fixpoint that defines it
``TemporalFilter(i,``  at time ``T``: the records ``x`` of ``i`` with ``lower(x) <= T <
``lower, upper)``      upper(x)``, weights kept (``Collection.temporal_filter``)
``FreezeAt(i,``        at time ``T``: each record ``x`` with its weight in ``i`` at time
``cutoff)``            ``min(T, cutoff(x) - 1)`` (none if ``cutoff(x)`` is at or before the
                       first time; ``Collection.freeze_at``)
=====================  ============================================================================

The two temporal nodes read the time: ``T`` is the outer coordinate of the scope's time (the
time of the root scope; inside a fixpoint the bounds move the outer time and keep the rounds).
Their bounds are expressions over the row or :class:`Fn` s of the record; a bound that is
``None`` (or gives ``None``) is no bound. They are linear: the lowering fuses them with the
maps and filters around them.

In a fixpoint's body, a ``FreezeAt`` at round ``i`` reads round ``i`` of the same loop at the
earlier time (the engine's ``Product(t, i)``), so the body depends on the round: a round that
repeats the one before is the limit only once the loops at the earlier times have reached
theirs.

A Datalog stratum is one :class:`Fixpoint` whose bodies are ``Distinct(Union(initial, rules))``
(semi-naive by construction: the loop's operators see only each round's changes).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Tuple

from .expressions import Expression

__all__ = [
    "Fn",
    "Plan",
    "Scan",
    "Project",
    "Select",
    "Map",
    "Filter",
    "FlatMap",
    "Union",
    "Negate",
    "Consolidate",
    "Distinct",
    "Threshold",
    "Count",
    "Reduce",
    "Join",
    "Semijoin",
    "Antijoin",
    "Aggregate",
    "Fixpoint",
    "Recur",
    "TemporalFilter",
    "FreezeAt",
    "Bound",
    "AGGREGATES",
]

AGGREGATES = ("count", "sum", "min", "max")
"""The kinds of :class:`Aggregate`."""


@dataclass(frozen=True)
class Fn:
    """A Python function with a name for printing; equal when the name and the function
    object are (so two plans using the same function share work)."""

    name: str
    fn: Callable[..., Any] = dataclasses.field(compare=True)

    def __repr__(self) -> str:
        return self.name


class Plan:
    """Base of plan nodes: children and a pre-order walk."""

    __slots__ = ()

    def children(self) -> Tuple["Plan", ...]:
        """The direct sub-plans, in field order (tuples of plans flattened)."""
        out = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if isinstance(value, Plan):
                out.append(value)
            elif isinstance(value, tuple):
                out.extend(v for v in value if isinstance(v, Plan))
        return tuple(out)

    def walk(self) -> Iterator["Plan"]:
        """This node and every node below it, pre-order."""
        yield self
        for c in self.children():
            yield from c.walk()

    def nodes(self) -> Iterator["Plan"]:
        """This node and every node object below it, each once, pre-order. Plans share
        sub-plans (every later stratum reads an earlier stratum's fixpoint): as a tree,
        :meth:`walk` can visit exponentially many nodes where this visits each object once."""
        seen = set()
        stack: List["Plan"] = [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            yield node
            stack.extend(reversed(node.children()))


@dataclass(frozen=True)
class Scan(Plan):
    name: str


@dataclass(frozen=True)
class Project(Plan):
    input: Plan
    columns: Tuple[Expression, ...]


@dataclass(frozen=True)
class Select(Plan):
    input: Plan
    predicate: Expression


@dataclass(frozen=True)
class Map(Plan):
    input: Plan
    fn: Fn


@dataclass(frozen=True)
class Filter(Plan):
    input: Plan
    fn: Fn


@dataclass(frozen=True)
class FlatMap(Plan):
    input: Plan
    fn: Fn


@dataclass(frozen=True)
class Union(Plan):
    inputs: Tuple[Plan, ...]


@dataclass(frozen=True)
class Negate(Plan):
    input: Plan


@dataclass(frozen=True)
class Consolidate(Plan):
    input: Plan


@dataclass(frozen=True)
class Distinct(Plan):
    input: Plan


@dataclass(frozen=True)
class Threshold(Plan):
    input: Plan
    fn: Fn


@dataclass(frozen=True)
class Count(Plan):
    input: Plan


@dataclass(frozen=True)
class Reduce(Plan):
    input: Plan
    fn: Fn


@dataclass(frozen=True)
class Join(Plan):
    left: Plan
    right: Plan
    left_key: Tuple[int, ...]
    right_key: Tuple[int, ...]
    output: Tuple[Expression, ...]


@dataclass(frozen=True)
class Semijoin(Plan):
    left: Plan
    right: Plan
    left_key: Tuple[int, ...]
    right_key: Tuple[int, ...]


@dataclass(frozen=True)
class Antijoin(Plan):
    left: Plan
    right: Plan
    left_key: Tuple[int, ...]
    right_key: Tuple[int, ...]


@dataclass(frozen=True)
class Aggregate(Plan):
    input: Plan
    group: Tuple[int, ...]
    kind: str
    value: Optional[Expression] = None

    def __post_init__(self) -> None:
        if self.kind not in AGGREGATES:
            raise ValueError(f"Aggregate: unknown kind {self.kind!r} (one of {AGGREGATES})")
        if self.kind != "count" and self.value is None:
            raise ValueError(f"Aggregate: {self.kind} needs a value expression")


@dataclass(frozen=True)
class Fixpoint(Plan):
    names: Tuple[str, ...]
    initial: Tuple[Plan, ...]
    bodies: Tuple[Plan, ...]
    output: str

    def __post_init__(self) -> None:
        if not (len(self.names) == len(self.initial) == len(self.bodies)):
            raise ValueError("Fixpoint: names, initial and bodies must have the same length")
        if self.output not in self.names:
            raise ValueError(f"Fixpoint: output {self.output!r} is not one of {self.names}")


@dataclass(frozen=True)
class Recur(Plan):
    name: str


Bound = typing.Union[Expression, Fn]  # typing's: this module defines a node named Union
"""A time bound of a record: an expression over the row, or a :class:`Fn` of any record."""


@dataclass(frozen=True)
class TemporalFilter(Plan):
    """Each record present while ``lower(record) <= time < upper(record)`` (``None``: no bound).

    Example: ``TemporalFilter(Scan("bids"), Column(1), Arith("+", Column(1), Const(60)))``
    holds each bid for 60 time units from its time column."""

    input: Plan
    lower: Optional[Bound] = None
    upper: Optional[Bound] = None


@dataclass(frozen=True)
class FreezeAt(Plan):
    """Each record's weight as it was just before ``cutoff(record)``: updates at or after the
    cutoff are dropped.

    Example: ``FreezeAt(counts, Arith("+", Column(0), Const(1)))`` keeps each window's count
    as it was when the window (ending at column 0) closed."""

    input: Plan
    cutoff: Bound
