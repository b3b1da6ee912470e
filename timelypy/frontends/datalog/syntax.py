"""The syntax tree of a Datalog program, as the parser builds it (frozen dataclasses).

Terms are :class:`Var`, :class:`Const`, :class:`Wildcard` (``_``), :class:`BinOp` (``+ - * /
%``), :class:`Negative` (unary ``-``) and :class:`AggregateTerm` (``count : { body }``,
``sum e : { body }``, ``min``, ``max``); literals of a rule's body are :class:`Atom`,
:class:`Negation` (``!atom``) and :class:`Comparison` (``= != < <= > >=``). Every node keeps the
``line`` and ``column`` where it starts (1-based), so the checks can point at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Optional, Tuple, Union

__all__ = [
    "Var",
    "Const",
    "Wildcard",
    "BinOp",
    "Negative",
    "AggregateTerm",
    "Term",
    "Atom",
    "Negation",
    "Comparison",
    "Literal",
    "Rule",
    "Fact",
    "Declaration",
    "Directive",
    "Program",
    "TYPES",
    "term_vars",
    "literal_vars",
    "format_term",
]

TYPES = ("number", "symbol", "float", "unsigned")
"""The attribute types of a declaration."""


@dataclass(frozen=True)
class Var:
    """A named variable."""

    name: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Const:
    """A constant: ``type`` is ``number`` (an int literal), ``float`` or ``symbol`` (a string)."""

    value: Any
    type: str
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Wildcard:
    """``_``: any value, not named."""

    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class BinOp:
    """``left op right`` for ``op`` in ``+ - * / %``."""

    op: str
    left: "Term"
    right: "Term"
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Negative:
    """``-term``."""

    term: "Term"
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class AggregateTerm:
    """``kind value : { body }`` (``value`` is None for ``count``)."""

    kind: str
    value: Optional["Term"]
    body: Tuple["Literal", ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


Term = Union[Var, Const, Wildcard, BinOp, Negative, AggregateTerm]


@dataclass(frozen=True)
class Atom:
    """``relation(args...)``."""

    relation: str
    args: Tuple[Term, ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Negation:
    """``!atom``."""

    atom: Atom
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Comparison:
    """``left op right`` for ``op`` in ``= != < <= > >=``."""

    op: str
    left: Term
    right: Term
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


Literal = Union[Atom, Negation, Comparison]


@dataclass(frozen=True)
class Rule:
    """``head :- body.`` (a clause with several heads gives one rule per head)."""

    head: Atom
    body: Tuple[Literal, ...]
    text: str = field(default="", compare=False)
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Fact:
    """``relation(constants...).``"""

    atom: Atom
    text: str = field(default="", compare=False)
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Declaration:
    """``.decl name(attr: type, ...)``."""

    name: str
    attributes: Tuple[Tuple[str, str], ...]
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Directive:
    """``.input name`` or ``.output name``, with Soufflé's ``(key=value, ...)`` parameters."""

    kind: str
    relation: str
    params: Tuple[Tuple[str, Any], ...] = ()
    line: int = field(default=0, compare=False)
    column: int = field(default=0, compare=False)

    @property
    def parameters(self) -> Dict[str, Any]:
        """The parameters as a dict."""
        return dict(self.params)


@dataclass(frozen=True)
class Program:
    """A parsed program: its statements by kind, each in source order."""

    declarations: Tuple[Declaration, ...]
    directives: Tuple[Directive, ...]
    facts: Tuple[Fact, ...]
    rules: Tuple[Rule, ...]
    source: str = field(default="<program>", compare=False)
    text: str = field(default="", compare=False)


def term_vars(term: Term) -> Iterator[str]:
    """The names of the variables of ``term``, outside any aggregate it contains (an
    aggregate's variables are its own; see :func:`literal_vars` with ``aggregates=True``)."""
    if isinstance(term, Var):
        yield term.name
    elif isinstance(term, BinOp):
        yield from term_vars(term.left)
        yield from term_vars(term.right)
    elif isinstance(term, Negative):
        yield from term_vars(term.term)


def _all_term_vars(term: Term) -> Iterator[str]:
    yield from term_vars(term)
    for agg in term_aggregates(term):
        if agg.value is not None:
            yield from _all_term_vars(agg.value)
        for lit in agg.body:
            yield from literal_vars(lit, aggregates=True)


def term_aggregates(term: Term) -> Iterator[AggregateTerm]:
    """The aggregates in ``term`` (not those nested inside them)."""
    if isinstance(term, AggregateTerm):
        yield term
    elif isinstance(term, BinOp):
        yield from term_aggregates(term.left)
        yield from term_aggregates(term.right)
    elif isinstance(term, Negative):
        yield from term_aggregates(term.term)


def literal_vars(literal: Literal, aggregates: bool = False) -> Iterator[str]:
    """The variable names of ``literal``; with ``aggregates``, also those inside its aggregates."""
    each = _all_term_vars if aggregates else term_vars
    if isinstance(literal, Negation):
        literal = literal.atom
    if isinstance(literal, Atom):
        for a in literal.args:
            yield from each(a)
    else:
        yield from each(literal.left)
        yield from each(literal.right)


def format_term(term: Term) -> str:
    """The term as source text."""
    if isinstance(term, Var):
        return term.name
    if isinstance(term, Wildcard):
        return "_"
    if isinstance(term, Const):
        return f'"{term.value}"' if term.type == "symbol" else repr(term.value)
    if isinstance(term, BinOp):
        return f"({format_term(term.left)} {term.op} {format_term(term.right)})"
    if isinstance(term, Negative):
        return f"-{format_term(term.term)}"
    value = "" if term.value is None else " " + format_term(term.value)
    body = ", ".join(format_literal(lit) for lit in term.body)
    return f"{term.kind}{value} : {{ {body} }}"


def format_literal(literal: Literal) -> str:
    """The literal as source text."""
    if isinstance(literal, Atom):
        return f"{literal.relation}({', '.join(format_term(a) for a in literal.args)})"
    if isinstance(literal, Negation):
        return "!" + format_literal(literal.atom)
    return f"{format_term(literal.left)} {literal.op} {format_term(literal.right)}"


__all__ += ["term_aggregates", "format_literal"]
