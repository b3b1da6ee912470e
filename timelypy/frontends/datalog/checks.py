"""The static checks of a parsed program: declarations, arities, types, bound variables.

``check(program)`` returns a :class:`Checked` program: its :class:`Relation` declarations, its
facts as typed tuples and its rules in a normal form (:class:`NormalRule`) that the compiler
(:mod:`.compile`) and the stratifier (:mod:`.stratify`) read. Every refusal is a
:class:`~timelypy.errors.DatalogError` with the line and column, the rule's text and the
relation.

The normal form: every aggregate in a rule becomes a fresh variable ``$aggN`` bound by an
:class:`AggregateBinding` literal; an expression argument of a body atom becomes a fresh
variable ``$argN`` with the comparison ``$argN = expr``. Then :func:`schedule` orders a body
the way the compiler builds it (positive atoms in body order, every other literal as soon as
its variables are bound), and what it cannot place is an unbound variable.
"""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, NoReturn, Optional, Sequence, Set, Tuple

from ...errors import DatalogError, did_you_mean
from . import syntax as s
from .normal import (
    AggregateBinding,
    Checked,
    NormalLiteral,
    NormalRule,
    Relation,
    binds,
    literal_variables,
    schedule,
)
from .normalize import normalize_rule
from .typing_rules import check_value, infer_types

__all__ = ["check", "Checked", "Relation", "NormalRule"]


def check(program: s.Program) -> Checked:
    """Check ``program``; raises :class:`~timelypy.errors.DatalogError` at the first error."""
    ctx = _Context(program)
    relations = ctx.declarations()
    facts: Dict[str, List[Tuple[Any, ...]]] = {name: [] for name in relations}
    for fact in program.facts:
        row = ctx.fact(fact, relations)
        facts[fact.atom.relation].append(row)
    rules = [ctx.rule(rule, relations) for rule in program.rules]
    return Checked(program, relations, {k: v for k, v in facts.items() if v}, rules)


class _Context:
    """Error reporting and the per-rule work of :func:`check`."""

    def __init__(self, program: s.Program) -> None:
        self.program = program
        self.fresh = 0

    def error(self, message: str, node: Any = None, rule: str = "", relation: str = "") -> NoReturn:
        """Raise :meth:`failure`."""
        raise self.failure(message, node, rule, relation)

    def failure(
        self, message: str, node: Any = None, rule: str = "", relation: str = ""
    ) -> DatalogError:
        """The error at ``node`` (its line and column)."""
        return DatalogError(
            message,
            source=self.program.source,
            line=getattr(node, "line", 0),
            column=getattr(node, "column", 0),
            rule=rule,
            relation=relation,
        )

    def declarations(self) -> Dict[str, Relation]:
        relations: Dict[str, Relation] = {}
        for d in self.program.declarations:
            if d.name in relations:
                first = relations[d.name].line
                self.error(f"relation {d.name} is declared twice (first on line {first})", d,
                           relation=d.name)  # fmt: skip
            names = [a for a, _ in d.attributes]
            dup = {a for a in names if names.count(a) > 1}
            if dup:
                self.error(f"relation {d.name} has two attributes named {sorted(dup)[0]}", d,
                           relation=d.name)  # fmt: skip
            relations[d.name] = Relation(d.name, list(d.attributes), line=d.line)
        for directive in self.program.directives:
            rel = self._relation(relations, directive.relation, directive, "")
            if directive.kind == "input":
                rel.is_input = True
                rel.input_params = directive.parameters
            else:
                rel.is_output = True
                rel.output_params = directive.parameters
        return relations

    def _relation(
        self, relations: Dict[str, Relation], name: str, node: Any, text: str
    ) -> Relation:
        if name not in relations:
            self.error(f"undeclared relation {name}{did_you_mean(name, relations)}", node,
                       rule=text, relation=name)  # fmt: skip
        return relations[name]

    def atom_shape(self, atom: s.Atom, relations: Dict[str, Relation], text: str) -> Relation:
        rel = self._relation(relations, atom.relation, atom, text)
        if len(atom.args) != rel.arity:
            self.error(
                f"relation {rel.name} has arity {rel.arity} ({_signature(rel)}), "
                f"used here with {len(atom.args)} argument{'s' if len(atom.args) != 1 else ''}",
                atom,
                rule=text,
                relation=rel.name,
            )
        return rel

    def fact(self, fact: s.Fact, relations: Dict[str, Relation]) -> Tuple[Any, ...]:
        rel = self.atom_shape(fact.atom, relations, fact.text)
        values = []
        for i, (arg, (attr, type_)) in enumerate(zip(fact.atom.args, rel.columns)):
            if not isinstance(arg, s.Const):
                what = "variable " + arg.name if isinstance(arg, s.Var) else "non-constant"
                self.error(f"a fact with a {what} (argument {i + 1} of {rel.name}); facts hold "
                           "constants only", arg, rule=fact.text, relation=rel.name)  # fmt: skip
            problem = check_value(arg.value, type_, literal_type=arg.type)
            if problem:
                self.error(f"{rel.name}: argument {i + 1} ({attr}: {type_}) {problem}", arg,
                           rule=fact.text, relation=rel.name)  # fmt: skip
            values.append(float(arg.value) if type_ == "float" else arg.value)
        return tuple(values)

    def rule(self, rule: s.Rule, relations: Dict[str, Relation]) -> NormalRule:
        self.atom_shape(rule.head, relations, rule.text)
        for lit in _all_atoms(rule.body):
            self.atom_shape(lit, relations, rule.text)
        for arg in rule.head.args:
            if isinstance(arg, s.Wildcard):
                self.error(f"_ in the head of a rule of {rule.head.relation}", arg,
                           rule=rule.text, relation=rule.head.relation)  # fmt: skip
        normal = normalize_rule(self, rule)
        types = infer_types(self, normal, relations)
        normal.types = types
        self.bound(normal)
        return normal

    def bound(self, normal: NormalRule) -> None:
        """Every variable the head, a comparison, a negation or an aggregate reads is bound."""
        head_vars = set(s.literal_vars(normal.head))
        self._bound_body(normal.body, frozenset(), normal, head_vars, normal.head)

    def _bound_body(
        self, body: Sequence[NormalLiteral], bound: FrozenSet[str], normal: NormalRule,
        needed: Set[str], reader: Any,
    ) -> None:  # fmt: skip
        text, rel = normal.rule.text, normal.relation
        steps, bound_now, pending = schedule(
            body, bound, started=isinstance(reader, AggregateBinding)
        )
        negated = _negated_only(body)
        if pending and not steps:
            self.error(f"the body of a rule of {rel} needs a positive atom (or an aggregate that "
                       "binds its variables itself)", pending[0], rule=text,
                       relation=rel)  # fmt: skip
        for lit in pending:
            missing = sorted(literal_variables(lit) - bound_now - {v for v in binds(lit)})
            if isinstance(lit, s.Comparison) and lit.op == "=":
                missing = missing or sorted(set(s.literal_vars(lit)) - bound_now)
            name = next((v for v in missing if v in negated), missing[0] if missing else "?")
            shown = _shown(name)
            if name in negated:
                self.error(f"variable {shown} occurs only in a negated atom", lit, rule=text,
                           relation=rel)  # fmt: skip
            what = {s.Negation: "negation", AggregateBinding: "aggregate"}.get(
                type(lit), "comparison"
            )
            self.error(f"{what} on unbound variable {shown}", lit, rule=text, relation=rel)
        for name in sorted(needed - bound_now):
            if isinstance(reader, s.Atom):
                where, node = f"the head of a rule of {rel}", _var_node(reader, name) or reader
            else:
                where, node = f"the value of {reader.kind}", reader
            self.error(f"unbound variable {_shown(name)} in {where}", node, rule=text,
                       relation=rel)  # fmt: skip
        for _, lit in steps:
            if isinstance(lit, AggregateBinding):
                value = set() if lit.value is None else set(s.term_vars(lit.value))
                self._bound_body(lit.body, frozenset(lit.outer), normal, value, lit)

    def fresh_var(self, prefix: str) -> str:
        self.fresh += 1
        return f"${prefix}{self.fresh}"


def _shown(name: str) -> str:
    return "(an expression)" if name.startswith("$") else name


def _var_node(atom: s.Atom, name: str) -> Optional[s.Var]:
    for arg in atom.args:
        for node in _walk_term(arg):
            if isinstance(node, s.Var) and node.name == name:
                return node
    return None


def _walk_term(term: s.Term) -> List[s.Term]:
    out: List[s.Term] = [term]
    if isinstance(term, s.BinOp):
        out += _walk_term(term.left) + _walk_term(term.right)
    elif isinstance(term, s.Negative):
        out += _walk_term(term.term)
    return out


def _negated_only(body: Sequence[NormalLiteral]) -> Set[str]:
    positive: Set[str] = set()
    negated: Set[str] = set()
    for lit in body:
        if isinstance(lit, s.Negation):
            negated |= set(s.literal_vars(lit))
        elif isinstance(lit, s.Atom):
            positive |= set(s.literal_vars(lit))
        elif isinstance(lit, AggregateBinding):
            positive.add(lit.var)
        elif lit.op == "=":
            positive |= set(s.literal_vars(lit))
    return negated - positive


def _all_atoms(body: Sequence[s.Literal]) -> List[s.Atom]:
    out: List[s.Atom] = []
    for lit in body:
        if isinstance(lit, s.Negation):
            out.append(lit.atom)
        if isinstance(lit, s.Atom):
            out.append(lit)
        terms = lit.atom.args if isinstance(lit, s.Negation) else (
            lit.args if isinstance(lit, s.Atom) else (lit.left, lit.right))  # fmt: skip
        for t in terms:
            for agg in s.term_aggregates(t):
                out += _all_atoms(agg.body)
    return out


def _signature(rel: Relation) -> str:
    return f"{rel.name}({', '.join(f'{a}: {t}' for a, t in rel.columns)})"
