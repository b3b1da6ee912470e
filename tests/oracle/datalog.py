"""A from-scratch bottom-up Datalog evaluator: the oracle of the Datalog front-end.

It reads the parsed program (:func:`timelypy.frontends.datalog.parse`, the syntax tree) and
evaluates it on sets of facts with plain Python loops: its own stratification (levels: a
relation's level is at least its positive dependencies' and above its negative ones'), then per
level naive evaluation (every rule over the whole database until nothing changes), each rule's
body solved by backtracking over its literals. It shares nothing with the compiler (no normal
form, no scheduling, no plans) and nothing with the engine.

Semantics (Soufflé's): relations are sets; ``count : { body }`` is the number of solutions of the
body (one per choice of a tuple for each positive atom), ``sum`` the sum of the value over
them, both 0 when there are none; ``min`` / ``max`` have no value then and the literal (or head)
that uses them fails. An aggregate's outer variables are its variables that occur outside it
(they are bound there and group it). ``/`` on two ints is floor division, ``%`` Python's.
"""

from __future__ import annotations

import itertools
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple, Union

from timelypy.frontends.datalog import parse
from timelypy.frontends.datalog import syntax as s

__all__ = ["evaluate", "NotStratifiable"]

Binding = Dict[str, Any]
DB = Dict[str, Set[Tuple[Any, ...]]]


class NotStratifiable(ValueError):
    """The program recurses through negation or aggregation."""


def evaluate(
    program: Union[str, s.Program], facts: Optional[Mapping[str, Iterable[Any]]] = None
) -> Dict[str, Set[Tuple[Any, ...]]]:
    """Every declared relation's contents, given the ``facts`` of input relations (and the
    facts written in the program)."""
    prog = parse(program) if isinstance(program, str) else program
    types = {d.name: [t for _, t in d.attributes] for d in prog.declarations}
    db: DB = {name: set() for name in types}
    for fact in prog.facts:
        row = tuple(_convert(a.value, t) for a, t in zip(fact.atom.args, types[fact.atom.relation]))
        db[fact.atom.relation].add(row)
    for name, rows in (facts or {}).items():
        for row in rows:
            row = row if isinstance(row, tuple) else (row,)
            db[name].add(tuple(_convert(v, t) for v, t in zip(row, types[name])))
    levels = _levels(prog, list(types))
    for level in sorted(set(levels[r.head.relation] for r in prog.rules)):
        rules = [r for r in prog.rules if levels[r.head.relation] == level]
        _naive(rules, db, types)
    return db


def _convert(value: Any, type_: str) -> Any:
    return float(value) if type_ == "float" else value


def _naive(rules: List[s.Rule], db: DB, types: Dict[str, List[str]]) -> None:
    changed = True
    while changed:
        changed = False
        new: List[Tuple[str, Tuple[Any, ...]]] = []
        for rule in rules:
            ev = _RuleEval(rule, db)
            for binding in ev.solve(list(rule.body), {}):
                row = ev.head_row(binding, types[rule.head.relation])
                if row is not None:
                    new.append((rule.head.relation, row))
        for name, row in new:
            if row not in db[name]:
                db[name].add(row)
                changed = True


def _deps(body: Iterable[s.Literal], negative: bool) -> Iterator[Tuple[str, bool]]:
    for lit in body:
        if isinstance(lit, s.Atom):
            yield (lit.relation, negative)
            terms: Tuple[s.Term, ...] = lit.args
        elif isinstance(lit, s.Negation):
            yield (lit.atom.relation, True)
            terms = lit.atom.args
        else:
            terms = (lit.left, lit.right)
        for t in terms:
            for agg in _aggregates(t):
                yield from _deps(agg.body, True)


def _aggregates(term: s.Term) -> Iterator[s.AggregateTerm]:
    if isinstance(term, s.AggregateTerm):
        yield term
    elif isinstance(term, s.BinOp):
        yield from _aggregates(term.left)
        yield from _aggregates(term.right)
    elif isinstance(term, s.Negative):
        yield from _aggregates(term.term)


def _levels(prog: s.Program, names: List[str]) -> Dict[str, int]:
    level = {n: 0 for n in names}
    for _ in range(len(names) + 2):
        changed = False
        for rule in prog.rules:
            h = rule.head.relation
            heads = [rule.head.args]
            for d, negative in itertools.chain(_deps(rule.body, False), _deps_terms(heads)):
                need = level[d] + (1 if negative else 0)
                if level[h] < need:
                    level[h] = need
                    changed = True
        if not changed:
            return level
    raise NotStratifiable("the program recurses through negation or aggregation")


def _deps_terms(heads: List[Tuple[s.Term, ...]]) -> Iterator[Tuple[str, bool]]:
    for args in heads:
        for t in args:
            for agg in _aggregates(t):
                yield from _deps(agg.body, True)


def _term_vars(term: s.Term) -> Set[str]:
    """Variables of a term outside its aggregates."""
    return set(s.term_vars(term))


def _inner_vars(agg: s.AggregateTerm) -> Set[str]:
    out: Set[str] = set()
    if agg.value is not None:
        out |= _term_vars(agg.value) | {v for a in _aggregates(agg.value) for v in _inner_vars(a)}
    for lit in agg.body:
        atom_or_cmp: Any = lit.atom if isinstance(lit, s.Negation) else lit
        terms = atom_or_cmp.args if isinstance(atom_or_cmp, s.Atom) else (lit.left, lit.right)
        for t in terms:
            out |= _term_vars(t)
            for inner in _aggregates(t):
                out |= _inner_vars(inner)
    return out


def _literal_terms(lit: s.Literal) -> Tuple[s.Term, ...]:
    if isinstance(lit, s.Negation):
        return lit.atom.args
    if isinstance(lit, s.Atom):
        return lit.args
    return (lit.left, lit.right)


class _RuleEval:
    """Solve one rule's body over ``db``."""

    def __init__(self, rule: s.Rule, db: DB) -> None:
        self.db = db
        self.rule_head_args = rule.head.args
        self.outer: Dict[int, Set[str]] = {}
        self._outer_of(list(rule.body), set(v for a in rule.head.args for v in _term_vars(a)))
        for a in rule.head.args:
            for agg in _aggregates(a):
                self._outer_agg(agg, self._visible(list(rule.body), set()))

    def _visible(self, body: List[s.Literal], context: Set[str]) -> Set[str]:
        out = set(context)
        for lit in body:
            for t in _literal_terms(lit):
                out |= _term_vars(t)
        return out

    def _outer_of(self, body: List[s.Literal], context: Set[str]) -> None:
        visible = self._visible(body, context)
        for lit in body:
            for t in _literal_terms(lit):
                for agg in _aggregates(t):
                    self._outer_agg(agg, visible)

    def _outer_agg(self, agg: s.AggregateTerm, visible: Set[str]) -> None:
        outer = _inner_vars(agg) & visible
        self.outer[id(agg)] = outer
        own = outer | (set() if agg.value is None else _term_vars(agg.value))
        self._outer_of(list(agg.body), own)

    # -- readiness and evaluation of terms
    def needs(self, term: s.Term) -> Set[str]:
        out = _term_vars(term)
        for agg in _aggregates(term):
            out |= self.outer[id(agg)]
        return out

    def value(self, term: s.Term, b: Binding) -> Any:
        """The term's value (``_NONE`` when an aggregate has no value)."""
        if isinstance(term, s.Var):
            return b[term.name]
        if isinstance(term, s.Const):
            return term.value
        if isinstance(term, s.Negative):
            v = self.value(term.term, b)
            return _NONE if v is _NONE else -v
        if isinstance(term, s.BinOp):
            left, right = self.value(term.left, b), self.value(term.right, b)
            if left is _NONE or right is _NONE:
                return _NONE
            return _arith(term.op, left, right)
        assert isinstance(term, s.AggregateTerm)
        return self.aggregate(term, b)

    def aggregate(self, agg: s.AggregateTerm, b: Binding) -> Any:
        inner = {k: v for k, v in b.items() if k in self.outer[id(agg)]}
        sols = list(self.solve(list(agg.body), inner))
        if agg.kind == "count":
            return len(sols)
        assert agg.value is not None
        values = [self.value(agg.value, sol) for sol in sols]
        values = [v for v in values if v is not _NONE]
        if agg.kind == "sum":
            return sum(values)
        if not values:
            return _NONE
        return min(values) if agg.kind == "min" else max(values)

    # -- solving a body
    def solve(self, body: List[s.Literal], b: Binding) -> Iterator[Binding]:
        if not body:
            yield b
            return
        i = self._pick(body, b)
        lit, rest = body[i], body[:i] + body[i + 1 :]
        if isinstance(lit, s.Atom):
            for row in self.db[lit.relation]:
                nb = self._match(lit, row, b)
                if nb is not None:
                    yield from self.solve(rest, nb)
        elif isinstance(lit, s.Negation):
            if not any(
                self._match(lit.atom, row, b) is not None for row in self.db[lit.atom.relation]
            ):
                yield from self.solve(rest, b)
        else:
            yield from self._compare(lit, b, rest)

    def _compare(self, lit: s.Comparison, b: Binding, rest: List[s.Literal]) -> Iterator[Binding]:
        if lit.op == "=" and isinstance(lit.left, s.Var) and lit.left.name not in b:
            v = self.value(lit.right, b)
            if v is not _NONE:
                yield from self.solve(rest, {**b, lit.left.name: v})
            return
        if lit.op == "=" and isinstance(lit.right, s.Var) and lit.right.name not in b:
            v = self.value(lit.left, b)
            if v is not _NONE:
                yield from self.solve(rest, {**b, lit.right.name: v})
            return
        left, right = self.value(lit.left, b), self.value(lit.right, b)
        if left is not _NONE and right is not _NONE and _COMPARE[lit.op](left, right):
            yield from self.solve(rest, b)

    def _pick(self, body: List[s.Literal], b: Binding) -> int:
        bound = set(b)
        for i, lit in enumerate(body):
            if isinstance(lit, s.Negation):
                if set().union(*[self.needs(t) for t in lit.atom.args]) <= bound:
                    return i
            elif isinstance(lit, s.Comparison):
                left, right = self.needs(lit.left), self.needs(lit.right)
                if left <= bound and right <= bound:
                    return i
                if lit.op == "=" and isinstance(lit.left, s.Var) and right <= bound:
                    return i
                if lit.op == "=" and isinstance(lit.right, s.Var) and left <= bound:
                    return i
        for i, lit in enumerate(body):
            if isinstance(lit, s.Atom):
                exprs = [a for a in lit.args if not isinstance(a, (s.Var, s.Const, s.Wildcard))]
                if all(self.needs(a) <= bound for a in exprs):
                    return i
        raise ValueError(f"oracle: cannot order the body {body!r} with {sorted(bound)} bound")

    def _match(self, atom: s.Atom, row: Tuple[Any, ...], b: Binding) -> Optional[Binding]:
        nb = dict(b)
        for arg, v in zip(atom.args, row):
            if isinstance(arg, s.Wildcard):
                continue
            if isinstance(arg, s.Var):
                if arg.name in nb:
                    if nb[arg.name] != v:
                        return None
                else:
                    nb[arg.name] = v
            elif self.value(arg, nb) != v:
                return None
        return nb

    def head_row(self, b: Binding, types: List[str]) -> Optional[Tuple[Any, ...]]:
        values = [self.value(a, b) for a in self.rule_head_args]
        if any(v is _NONE for v in values):
            return None
        return tuple(_convert(v, t) for v, t in zip(values, types))


class _NoneType:
    def __repr__(self) -> str:
        return "<no value>"


_NONE: Any = _NoneType()
_COMPARE = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _arith(op: str, a: Any, b: Any) -> Any:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a // b if isinstance(a, int) and isinstance(b, int) else a / b
    return a % b
