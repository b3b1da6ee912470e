"""Compile a checked, stratified Datalog program to plans (:mod:`timelypy.plan`).

Each derived relation gets a plan over ``Scan(input)`` nodes:

* a rule's body is a left-deep chain of :class:`~timelypy.plan.Join` on the shared variables,
  in body order; a constant or a repeated variable in an atom is a
  :class:`~timelypy.plan.Select` on it, a comparison a ``Select`` placed as soon as its
  variables are bound, ``x = expr`` a :class:`~timelypy.plan.Project` adding the column, a
  negated atom an :class:`~timelypy.plan.Antijoin`, an aggregate an
  :class:`~timelypy.plan.Aggregate` joined back on its outer (grouping) variables; the head is
  a ``Project``. A chain keeps only the variables still needed.
* a relation of a non-recursive stratum is ``Distinct(Union(rules))``; the relations of a
  recursive stratum are one :class:`~timelypy.plan.Fixpoint` whose bodies are
  ``Distinct(Union(initial, rules over Recur))`` (semi-naive by construction: the loop's
  operators see only each round's changes), one node per relation differing only in ``output``.

Set semantics: derived relations are distinct; ``count`` and ``sum`` count every binding of
their body's variables (``_`` included), as Soufflé does, and give 0 for a group of the outer
variables with none (``min`` and ``max`` then give nothing); an ungrouped one in a rule with
no positive atom gives its 0 on the one row of the hidden input :data:`UNIT`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Set, Tuple, Union

from ... import plan as p
from ...errors import DatalogError, did_you_mean
from . import syntax as s
from .checks import check
from .normal import AggregateBinding, Checked, NormalLiteral, NormalRule, Relation, Step, schedule
from .parser import parse
from .stratify import Stratum, dependencies, stratify
from .typing_rules import check_value, expression_type

__all__ = ["Compiled", "compile_program", "compile_checked", "EMPTY", "UNIT"]

UNIT = "$unit"
"""A hidden input relation holding one empty tuple, which the program's ``facts`` include: the
row an ungrouped ``count``/``sum`` of nothing gives its 0 on (``n = count : { r(_) }``, in a
rule with no positive atom). Present in ``relations``, ``inputs`` and ``facts`` only when a
rule needs it; no Soufflé name can clash with it."""

EMPTY = p.Union(())
"""The empty relation (a union of nothing); see :func:`_empty_like` for the plan a recursive
stratum starts an empty relation with."""


@dataclass
class Compiled:
    """A compiled program: its relations, inputs, outputs, facts, plans and strata."""

    relations: Dict[str, Relation]
    inputs: List[str]
    outputs: List[str]
    facts: Dict[str, List[Tuple[Any, ...]]]
    plans: Dict[str, p.Plan]
    strata: List[List[str]]
    source: str = "<program>"
    checked: Optional[Checked] = field(default=None, repr=False)

    def check_fact(self, relation: str, fact: Any) -> Tuple[Any, ...]:
        """``fact`` as a tuple of ``relation`` (a bare value is accepted for arity 1; an int
        for a float column becomes a float); a :class:`~timelypy.errors.DatalogError` naming
        the relation, the position, the expected type and the value otherwise."""
        if relation not in self.relations:
            raise DatalogError(
                f"unknown relation {relation!r}{did_you_mean(relation, self.relations)}",
                source=self.source,
                relation=relation,
            )
        rel = self.relations[relation]
        if not isinstance(fact, (tuple, list)):
            fact = (fact,) if rel.arity == 1 else fact
        if not isinstance(fact, (tuple, list)) or len(fact) != rel.arity:
            raise DatalogError(
                f"a fact of {relation} has {rel.arity} field{'s' if rel.arity != 1 else ''} "
                f"({', '.join(f'{a}: {t}' for a, t in rel.columns)}), got {fact!r}",
                source=self.source,
                relation=relation,
            )
        out = []
        for i, (value, (attr, type_)) in enumerate(zip(fact, rel.columns)):
            problem = check_value(value, type_)
            if problem:
                raise DatalogError(
                    f"a fact of {relation}: field {i + 1} ({attr}) {problem} (in {tuple(fact)!r})",
                    source=self.source,
                    relation=relation,
                )
            out.append(float(value) if type_ == "float" else value)
        return tuple(out)


def compile_program(text_or_program: Union[str, s.Program], source: str = "<program>") -> Compiled:
    """Parse (if text), check, stratify and compile a program."""
    program = (
        parse(text_or_program, source) if isinstance(text_or_program, str) else text_or_program
    )
    return compile_checked(check(program))


def compile_checked(checked: Checked) -> Compiled:
    """Compile a checked program (see the module's docstring)."""
    relations = checked.relations
    source = checked.program.source
    strata = stratify(checked.rules, list(relations), source)
    derived = {name for st in strata for name in st.relations}
    inputs = [
        name
        for name, rel in relations.items()
        if rel.is_input or name in checked.facts or name not in derived
    ]
    plans: Dict[str, p.Plan] = {}
    for stratum in strata:
        plans.update(_stratum_plans(stratum, checked, plans, set(inputs)))
    facts = dict(checked.facts)
    if _scans(list(plans.values()), UNIT):
        relations = {**relations, UNIT: Relation(UNIT, [])}
        inputs.append(UNIT)
        facts[UNIT] = [()]
    return Compiled(
        relations=relations,
        inputs=inputs,
        outputs=[name for name, rel in relations.items() if rel.is_output],
        facts=facts,
        plans=plans,
        strata=[list(st.relations) for st in strata],
        source=source,
        checked=checked,
    )


def _stratum_plans(
    stratum: Stratum, checked: Checked, plans: Dict[str, p.Plan], inputs: Set[str]
) -> Dict[str, p.Plan]:
    members = set(stratum.relations)

    def outer(name: str, in_aggregate: bool) -> p.Plan:
        if name in plans:
            return plans[name]
        return p.Distinct(p.Scan(name)) if in_aggregate else p.Scan(name)

    def inner(name: str, in_aggregate: bool) -> p.Plan:
        return p.Recur(name) if name in members else outer(name, in_aggregate)

    def parts(name: str, recursive: Optional[bool], ref: _Ref) -> List[p.Plan]:
        out: List[p.Plan] = [p.Scan(name)] if name in inputs and recursive is not True else []
        for rule in checked.rules:
            if rule.relation != name:
                continue
            is_recursive = any(d in members for d, _ in _deps(rule))
            if recursive is None or recursive == is_recursive:
                out.append(_RuleCompiler(rule, checked.relations, ref).compile())
        return out

    if not stratum.recursive:
        (name,) = stratum.relations
        return {name: _distinct_union(parts(name, None, outer))}
    names = stratum.relations
    starts = [_distinct_union(parts(n, False, outer)) for n in names]
    bodies = tuple(
        _distinct_union(([start] if start != EMPTY else []) + parts(n, True, inner))
        for n, start in zip(names, starts)
    )
    empty = _empty_like(starts, [r for r in checked.rules if r.relation in members], outer)
    initial = tuple(empty if start == EMPTY else start for start in starts)
    return {n: p.Fixpoint(names, initial, bodies, n) for n in names}


def _empty_like(starts: List[p.Plan], rules: List[NormalRule], outer: _Ref) -> p.Plan:
    """A plan with no rows, for the start of a relation with no rule outside the recursion:
    ``Select(x, false)`` of a plan ``x`` the stratum builds anyway (an initial, or a relation
    its rules read from earlier strata), so every lowering can build it; :data:`EMPTY` if the
    stratum reads nothing from outside (then all its relations are empty)."""
    base = next((start for start in starts if start != EMPTY), None)
    if base is None:
        names = {r.relation for r in rules}
        outside = [d for r in rules for d, _ in _deps(r) if d not in names]
        base = outer(outside[0], False) if outside else None
    return EMPTY if base is None else p.Select(base, p.Const(False))


def _deps(rule: NormalRule) -> List[Tuple[str, bool]]:
    return dependencies(rule)


def _distinct_union(parts: List[p.Plan]) -> p.Plan:
    if not parts:
        return EMPTY
    if len(parts) == 1:  # a Scan is not known to be a set (a session may hold a fact twice)
        return parts[0] if isinstance(parts[0], p.Distinct) else p.Distinct(parts[0])
    return p.Distinct(p.Union(tuple(parts)))


_Ref = Callable[[str, bool], p.Plan]


@dataclass
class _Chain:
    """A plan whose rows bind ``layout``'s variables, in column order."""

    plan: p.Plan
    layout: List[str]


class _RuleCompiler:
    """One rule's plan."""

    def __init__(self, rule: NormalRule, relations: Dict[str, Relation], ref: _Ref) -> None:
        self.rule = rule
        self.relations = relations
        self.ref = ref
        self.types = rule.types

    def compile(self) -> p.Plan:
        head_vars = set(s.literal_vars(self.rule.head))
        chain = self.body(self.rule.body, None, head_vars, in_aggregate=False)
        columns = tuple(self.expr(a, chain.layout, self.rule.head) for a in self.rule.head.args)
        return _project(chain.plan, columns, len(chain.layout))

    def body(
        self,
        literals: Sequence[NormalLiteral],
        seed: Optional[_Chain],
        needed: Set[str],
        in_aggregate: bool,
    ) -> _Chain:
        bound = frozenset(seed.layout) if seed is not None else frozenset()
        steps, _, pending = schedule(literals, bound, started=seed is not None)
        if pending:  # the checks refuse such a rule first
            raise DatalogError(f"cannot place {pending[0]!r}", rule=self.rule.rule.text)
        after = _needed_after(steps, needed)
        chain = seed
        for (kind, lit), keep in zip(steps, after):
            chain = self.step(kind, lit, chain, keep, in_aggregate)
        assert chain is not None
        return chain

    def step(
        self, kind: str, lit: Any, chain: Optional[_Chain], keep: Set[str], in_aggregate: bool
    ) -> _Chain:
        if kind == "join":
            return self.join(lit, chain, keep, in_aggregate)
        if kind == "aggregate":
            return self.aggregate(lit, chain, keep)
        assert chain is not None
        if kind == "filter":
            return _Chain(_select(chain.plan, self.expr(lit, chain.layout, lit)), chain.layout)
        if kind == "antijoin":
            right, variables = self.atom(lit.atom, False)
            lk = tuple(chain.layout.index(v) for v in variables)
            rk = tuple(_first(lit.atom, v) for v in variables)
            return _Chain(p.Antijoin(chain.plan, right, lk, rk), chain.layout)
        # "bind": the left side is the new variable
        kept = [v for v in chain.layout if v in keep]
        cols = tuple(p.Column(chain.layout.index(v)) for v in kept)
        value = self.expr(lit.right, chain.layout, lit.left)
        plan = _project(chain.plan, cols + (value,), len(chain.layout))
        return _Chain(plan, kept + [lit.left.name])

    def atom(self, atom: s.Atom, in_aggregate: bool) -> Tuple[p.Plan, List[str]]:
        """The atom's relation with its constants and repeated variables selected, and its
        distinct variables (first occurrence order)."""
        plan = self.ref(atom.relation, in_aggregate)
        conditions: List[p.Expression] = []
        variables: List[str] = []
        for i, arg in enumerate(atom.args):
            if isinstance(arg, s.Const):
                col_type = self.relations[atom.relation].types[i]
                value = float(arg.value) if col_type == "float" else arg.value
                conditions.append(p.Compare("=", p.Column(i), p.Const(value)))
            elif isinstance(arg, s.Var):
                if arg.name in variables:
                    first = _first(atom, arg.name)
                    conditions.append(p.Compare("=", p.Column(first), p.Column(i)))
                else:
                    variables.append(arg.name)
        if conditions:
            pred = conditions[0] if len(conditions) == 1 else p.And(tuple(conditions))
            plan = p.Select(plan, pred)
        return plan, variables

    def join(
        self, atom: s.Atom, chain: Optional[_Chain], keep: Set[str], in_aggregate: bool
    ) -> _Chain:
        right, variables = self.atom(atom, in_aggregate)
        if chain is None:
            layout = [v for v in variables if v in keep]
            cols = tuple(p.Column(_first(atom, v)) for v in layout)
            return _Chain(_project(right, cols, len(atom.args)), layout)
        shared = [v for v in variables if v in chain.layout]
        lk = tuple(chain.layout.index(v) for v in shared)
        rk = tuple(_first(atom, v) for v in shared)
        width = len(chain.layout)
        layout, output = [], []
        for v in chain.layout:
            if v in keep:
                layout.append(v)
                output.append(p.Column(chain.layout.index(v)))
        for v in variables:
            if v in keep and v not in chain.layout:
                layout.append(v)
                output.append(p.Column(width + _first(atom, v)))
        return _Chain(p.Join(chain.plan, right, lk, rk, tuple(output)), layout)

    def aggregate(self, agg: AggregateBinding, chain: Optional[_Chain], keep: Set[str]) -> _Chain:
        group = list(agg.outer)
        value_vars = set() if agg.value is None else set(s.term_vars(agg.value))
        need = set(group) | value_vars
        steps, bound, pending = schedule(agg.body)
        standalone = not pending and need <= bound and bool(steps)
        if standalone or chain is None:
            inner = self.body(agg.body, None, need, in_aggregate=True)
        else:
            keys = tuple(p.Column(chain.layout.index(v)) for v in group)
            seed = _Chain(p.Distinct(p.Project(chain.plan, keys)), list(group))
            inner = self.body(agg.body, seed, need, in_aggregate=True)
        cols: Tuple[p.Expression, ...] = tuple(p.Column(inner.layout.index(v)) for v in group)
        if agg.value is not None:
            cols += (self.expr(agg.value, inner.layout, agg),)
        value = None if agg.value is None else p.Column(len(group))
        agg_input = _project(inner.plan, cols, len(inner.layout))
        result = p.Aggregate(agg_input, tuple(range(len(group))), agg.kind, value)
        if chain is None and agg.kind in ("min", "max"):
            return _Chain(result, [agg.var])
        if chain is None:  # count or sum of nothing is 0: one row to hang it on
            chain = _Chain(p.Scan(UNIT), [])
        kept = [v for v in chain.layout if v in keep]
        lk = tuple(chain.layout.index(v) for v in group)
        rk = tuple(range(len(group)))
        out = tuple(p.Column(chain.layout.index(v)) for v in kept)
        agg_col = p.Column(len(chain.layout) + len(group))
        plan: p.Plan = p.Join(chain.plan, result, lk, rk, out + (agg_col,))
        if agg.kind in ("count", "sum"):
            zero = 0.0 if self.types.get(agg.var) == "float" else 0
            missing = p.Project(p.Antijoin(chain.plan, result, lk, rk), out + (p.Const(zero),))
            plan = p.Union((plan, missing))
        return _Chain(plan, kept + [agg.var])

    def expr(self, term: Any, layout: List[str], context: Any) -> p.Expression:
        """``term`` (or a comparison) as a plan expression over ``layout``."""
        if isinstance(term, s.Comparison):
            is_float = self._is_float(term.left) or self._is_float(term.right)
            left = _expression(term.left, layout, is_float)
            return p.Compare(term.op, left, _expression(term.right, layout, is_float))
        is_float = self._is_float(term) or self._context_float(context, term)
        return _expression(term, layout, is_float)

    def _is_float(self, term: s.Term) -> bool:
        def fail(message: str, node: Any) -> NoReturn:
            raise DatalogError(message, rule=self.rule.rule.text)

        return expression_type(term, self.types, fail) == "float"

    def _context_float(self, context: Any, term: Any) -> bool:
        if isinstance(context, s.Atom):
            rel = self.relations[context.relation]
            for arg, type_ in zip(context.args, rel.types):
                if arg is term:
                    return type_ == "float"
        if isinstance(context, s.Var):
            return self.types.get(context.name) == "float"
        if isinstance(context, AggregateBinding):
            return self.types.get(context.var) == "float"
        return False


def _expression(term: s.Term, layout: List[str], is_float: bool) -> p.Expression:
    if isinstance(term, s.Var):
        return p.Column(layout.index(term.name))
    if isinstance(term, s.Const):
        value = term.value
        if is_float and term.type == "number":
            value = float(value)
        return p.Const(value)
    if isinstance(term, s.BinOp):
        left = _expression(term.left, layout, is_float)
        return p.Arith(term.op, left, _expression(term.right, layout, is_float))
    if isinstance(term, s.Negative):
        zero = p.Const(0.0 if is_float else 0)
        return p.Arith("-", zero, _expression(term.term, layout, is_float))
    raise DatalogError(f"cannot compile the term {term!r}")


def _scans(plans: List[p.Plan], name: str) -> bool:
    """Whether a ``Scan(name)`` is in ``plans`` (each shared sub-plan visited once)."""
    seen: Set[int] = set()
    todo = list(plans)
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node == p.Scan(name):
            return True
        todo.extend(node.children())
    return False


def _select(plan: p.Plan, predicate: p.Expression) -> p.Plan:
    """``Select(plan, predicate)``, one Select with both predicates if ``plan`` is a Select."""
    if isinstance(plan, p.Select):
        old = plan.predicate.terms if isinstance(plan.predicate, p.And) else (plan.predicate,)
        return p.Select(plan.input, p.And(old + (predicate,)))
    return p.Select(plan, predicate)


def _project(plan: p.Plan, columns: Tuple[p.Expression, ...], width: int) -> p.Plan:
    """``Project(plan, columns)``, or ``plan`` itself when that is the identity."""
    if columns == tuple(p.Column(i) for i in range(width)):
        return plan
    return p.Project(plan, columns)


def _first(atom: s.Atom, name: str) -> int:
    return next(i for i, a in enumerate(atom.args) if isinstance(a, s.Var) and a.name == name)


def _needed_after(steps: List[Step], needed: Set[str]) -> List[Set[str]]:
    """For each step, the variables needed after it (by later steps or by ``needed``)."""
    out: List[Set[str]] = []
    acc = set(needed)
    for kind, lit in reversed(steps):
        out.append(set(acc))
        if isinstance(lit, AggregateBinding):
            acc |= set(lit.outer)
        elif kind == "bind":
            assert isinstance(lit, s.Comparison)
            acc |= set(s.term_vars(lit.right))
        else:
            acc |= set(s.literal_vars(lit))
    out.reverse()
    return out
