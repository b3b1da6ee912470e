"""A rule in normal form: aggregates and expression arguments become fresh variables.

Every aggregate term (in the head, a comparison or an atom's argument) becomes a variable
``$aggN`` bound by an :class:`~.checks.AggregateBinding`; every argument of a body atom that is
neither a variable, a constant nor ``_`` becomes a variable ``$argN`` with the comparison
``$argN = expr`` (as Soufflé reads ``r(x + 1)``). An aggregate's *outer* variables are those of
its value and body that also occur outside it (Soufflé: they are grounded outside and group
the aggregate); the others are local to it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Sequence, Set, Tuple

from . import syntax as s
from .normal import AggregateBinding, NormalLiteral, NormalRule

__all__ = ["normalize_rule", "inner_variables"]


def normalize_rule(ctx: Any, rule: s.Rule) -> NormalRule:
    """``rule`` in normal form (``ctx`` makes fresh variable names); types are filled later."""
    extra: List[NormalLiteral] = []
    head_args = tuple(_lift(ctx, a, extra) for a in rule.head.args)
    head = dataclasses.replace(rule.head, args=head_args)
    body = _normalize_body(ctx, rule.body) + extra
    body = _set_outer(body, set(s.literal_vars(head)))
    return NormalRule(rule, head, tuple(body), {})


def _normalize_body(ctx: Any, body: Sequence[s.Literal]) -> List[NormalLiteral]:
    out: List[NormalLiteral] = []
    for lit in body:
        if isinstance(lit, s.Atom):
            out.append(_atom(ctx, lit, out))
        elif isinstance(lit, s.Negation):
            out.append(dataclasses.replace(lit, atom=_atom(ctx, lit.atom, out)))
        else:
            left = _lift(ctx, lit.left, out)
            right = _lift(ctx, lit.right, out)
            out.append(dataclasses.replace(lit, left=left, right=right))
    return out


def _atom(ctx: Any, atom: s.Atom, out: List[NormalLiteral]) -> s.Atom:
    args = []
    for arg in atom.args:
        if isinstance(arg, (s.Var, s.Const, s.Wildcard)):
            args.append(arg)
            continue
        var = s.Var(ctx.fresh_var("arg"), getattr(arg, "line", 0), getattr(arg, "column", 0))
        out.append(s.Comparison("=", var, _lift(ctx, arg, out), var.line, var.column))
        args.append(var)
    return dataclasses.replace(atom, args=tuple(args))


def _lift(ctx: Any, term: s.Term, out: List[NormalLiteral]) -> s.Term:
    """``term`` with each aggregate replaced by a fresh variable (its binding goes to ``out``)."""
    if isinstance(term, s.AggregateTerm):
        var = s.Var(ctx.fresh_var("agg"), term.line, term.column)
        inner: List[NormalLiteral] = []
        value = None if term.value is None else _lift(ctx, term.value, inner)
        body = _normalize_body(ctx, term.body) + inner
        out.append(AggregateBinding(var.name, term.kind, value, tuple(body), (), *_at(term)))
        return var
    if isinstance(term, s.BinOp):
        left, right = _lift(ctx, term.left, out), _lift(ctx, term.right, out)
        return dataclasses.replace(term, left=left, right=right)
    if isinstance(term, s.Negative):
        return dataclasses.replace(term, term=_lift(ctx, term.term, out))
    return term


def _at(node: Any) -> Tuple[int, int]:
    return (getattr(node, "line", 0), getattr(node, "column", 0))


def inner_variables(lit: NormalLiteral) -> Set[str]:
    """Every variable of ``lit``, inside its aggregates too (an aggregate: its value's and its
    body's, not its own result variable)."""
    if not isinstance(lit, AggregateBinding):
        return set(s.literal_vars(lit))
    out = set() if lit.value is None else set(s.term_vars(lit.value))
    for inner in lit.body:
        out |= inner_variables(inner)
        if isinstance(inner, AggregateBinding):
            out.add(inner.var)
    return out


def _set_outer(body: List[NormalLiteral], context: Set[str]) -> List[NormalLiteral]:
    """Fill every aggregate's ``outer``: its variables that occur in ``context`` or in a
    literal beside it (recursively inside its body)."""
    visible = set(context)
    for lit in body:
        if isinstance(lit, AggregateBinding):
            visible.add(lit.var)
        else:
            visible |= set(s.literal_vars(lit))
    out: List[NormalLiteral] = []
    for lit in body:
        if isinstance(lit, AggregateBinding):
            mine = inner_variables(lit)
            outer = tuple(sorted(v for v in mine if v in visible))
            inside_context = set(outer) | (
                set() if lit.value is None else set(s.term_vars(lit.value))
            )
            inner = tuple(_set_outer(list(lit.body), inside_context))
            lit = dataclasses.replace(lit, outer=outer, body=inner)
        out.append(lit)
    return out
