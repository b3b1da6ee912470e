"""The normal form of a rule, and the order in which a body is built (its schedule).

:func:`~.checks.check` turns each rule into a :class:`NormalRule`: every aggregate becomes a
fresh variable ``$aggN`` bound by an :class:`AggregateBinding` literal, every expression
argument of a body atom a fresh variable ``$argN`` with the comparison ``$argN = expr``.
:func:`schedule` orders a normal body the way the compiler builds it (positive atoms in body
order, every other literal as soon as its variables are bound); what it cannot place reads an
unbound variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple, Union

from . import syntax as s

__all__ = [
    "Relation",
    "AggregateBinding",
    "NormalLiteral",
    "NormalRule",
    "Checked",
    "Step",
    "schedule",
    "literal_variables",
    "binds",
]


@dataclass
class Relation:
    """A declared relation: ``columns`` are ``(attribute, type)`` pairs."""

    name: str
    columns: List[Tuple[str, str]]
    is_input: bool = False
    is_output: bool = False
    line: int = 0
    input_params: Dict[str, Any] = field(default_factory=dict)
    output_params: Dict[str, Any] = field(default_factory=dict)

    @property
    def arity(self) -> int:
        """The number of columns."""
        return len(self.columns)

    @property
    def types(self) -> Tuple[str, ...]:
        """The column types."""
        return tuple(t for _, t in self.columns)


@dataclass(frozen=True)
class AggregateBinding:
    """``var = kind value : { body }`` in normal form: ``outer`` are the aggregate's variables
    that also occur outside it (its grouping variables, bound by the rest of the rule)."""

    var: str
    kind: str
    value: Optional[s.Term]
    body: Tuple["NormalLiteral", ...]
    outer: Tuple[str, ...]
    line: int = 0
    column: int = 0


NormalLiteral = Union[s.Atom, s.Negation, s.Comparison, AggregateBinding]


@dataclass
class NormalRule:
    """A rule in normal form: ``head`` terms have no aggregate, body atoms have only variables,
    constants and ``_`` as arguments; ``types`` gives every variable's type."""

    rule: s.Rule
    head: s.Atom
    body: Tuple[NormalLiteral, ...]
    types: Dict[str, str]

    @property
    def relation(self) -> str:
        """The head's relation."""
        return self.head.relation


@dataclass
class Checked:
    """A checked program."""

    program: s.Program
    relations: Dict[str, Relation]
    facts: Dict[str, List[Tuple[Any, ...]]]
    rules: List[NormalRule]


Step = Tuple[str, NormalLiteral]
"""A scheduled literal: ``("join", atom)``, ``("filter", comparison)``, ``("bind",
comparison)`` (its left side is the variable it binds), ``("antijoin", negation)`` or
``("aggregate", binding)``."""


def literal_variables(lit: NormalLiteral) -> Set[str]:
    """The variables a normal literal reads (an aggregate: its outer variables)."""
    if isinstance(lit, AggregateBinding):
        return set(lit.outer)
    return set(s.literal_vars(lit))


def schedule(
    body: Sequence[NormalLiteral], bound: FrozenSet[str] = frozenset(), started: bool = False
) -> Tuple[List[Step], Set[str], List[NormalLiteral]]:
    """The order in which the compiler builds ``body`` given the ``bound`` variables (and,
    with ``started``, rows that bind them): the steps, the variables bound at the end, and the
    literals that could not be placed (their variables are never bound).

    Positive atoms join in body order; every other literal goes as soon as its variables are
    bound. A body without positive atoms starts from an aggregate with no outer variable."""
    bound_now = set(bound)
    steps: List[Step] = []
    pending = list(body)
    started = started or bool(bound)
    has_atoms = any(isinstance(lit, s.Atom) for lit in body)
    while pending:
        placed = True
        while placed:
            placed = False
            for lit in list(pending):
                step = _ready(lit, bound_now, started, has_atoms)
                if step is not None:
                    steps.append(step)
                    pending.remove(lit)
                    bound_now |= literal_variables(step[1]) | binds(lit)
                    started = placed = True
                    break
        atom = next((lit for lit in pending if isinstance(lit, s.Atom)), None)
        if atom is None:
            break
        steps.append(("join", atom))
        pending.remove(atom)
        bound_now |= set(s.literal_vars(atom))
        started = True
    return steps, bound_now, pending


def binds(lit: NormalLiteral) -> Set[str]:
    """The variable an aggregate binding binds (none for other literals)."""
    if isinstance(lit, AggregateBinding):
        return {lit.var}
    return set()


def _ready(lit: NormalLiteral, bound: Set[str], started: bool, has_atoms: bool) -> Optional[Step]:
    if isinstance(lit, s.Atom):
        return None
    if not started:  # no rows yet: only an aggregate of no outer variable makes some
        ok = isinstance(lit, AggregateBinding) and not has_atoms and set(lit.outer) <= bound
        return ("aggregate", lit) if ok else None
    if isinstance(lit, s.Negation):
        return ("antijoin", lit) if set(s.literal_vars(lit)) <= bound else None
    if isinstance(lit, AggregateBinding):
        return ("aggregate", lit) if set(lit.outer) <= bound else None
    left, right = set(s.term_vars(lit.left)), set(s.term_vars(lit.right))
    if left <= bound and right <= bound:
        return ("filter", lit)
    if lit.op == "=" and isinstance(lit.left, s.Var) and not left <= bound and right <= bound:
        return ("bind", lit)
    if lit.op == "=" and isinstance(lit.right, s.Var) and not right <= bound and left <= bound:
        flipped = s.Comparison("=", lit.right, lit.left, lit.line, lit.column)
        return ("bind", flipped)
    return None
