"""Types of values, terms and variables: number, unsigned, float, symbol.

A variable takes the type of the columns it occurs in (every occurrence must agree), of the
expression it is bound to (``x = y + 1``), or of its aggregate (``count``: number; ``sum``,
``min``, ``max``: their value's). An integer literal fits number, unsigned (when not negative)
and float columns; a float literal only float; a string only symbol. Arithmetic takes numbers
of one type; a comparison compares values of one type.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, NoReturn, Optional, Tuple

from . import syntax as s
from .normal import AggregateBinding, NormalLiteral, NormalRule, Relation

__all__ = ["check_value", "expression_type", "unify", "infer_types", "NUMERIC"]

NUMERIC = ("number", "unsigned", "float")
"""The numeric types."""
INT_LITERAL = "int"
"""The type of an integer literal before it meets a column: any numeric type."""


def check_value(value: Any, type_: str, literal_type: Optional[str] = None) -> Optional[str]:
    """None if ``value`` fits a column of ``type_``, else what is wrong (for a message).
    ``literal_type`` is the syntax's type of a constant in a program, None for a run-time
    value."""
    if type_ == "symbol":
        ok = isinstance(value, str)
    elif isinstance(value, bool) or literal_type == "symbol":
        ok = False
    elif type_ == "float":
        ok = isinstance(value, (int, float))
    elif type_ == "unsigned":
        ok = isinstance(value, int) and value >= 0
    else:
        ok = isinstance(value, int)
    if ok:
        return None
    return f"expects {_a(type_)} {type_}, got {_describe(value)}"


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the bool {value!r}"
    if isinstance(value, str):
        return f"the symbol {value!r}"
    if isinstance(value, float):
        return f"the float {value!r}"
    if isinstance(value, int):
        return f"the number {value!r}"
    return f"{type(value).__name__} {value!r}"


def unify(a: Optional[str], b: Optional[str]) -> Tuple[bool, Optional[str]]:
    """Whether types ``a`` and ``b`` agree, and the type they make (None: unknown)."""
    if a is None or b is None:
        return True, a if b is None else b
    if a == b:
        return True, a
    if a == INT_LITERAL and b in NUMERIC:
        return True, b
    if b == INT_LITERAL and a in NUMERIC:
        return True, a
    return False, None


Fail = Callable[..., NoReturn]
"""``fail(message, node[, relation])`` raises the error at ``node``."""


def expression_type(term: s.Term, env: Dict[str, str], fail: Fail) -> Optional[str]:
    """The type of ``term`` (None: a variable of unknown type); ``fail(message, node)`` raises
    on arithmetic of a symbol or of two types."""
    if isinstance(term, s.Var):
        return env.get(term.name)
    if isinstance(term, s.Const):
        return INT_LITERAL if term.type == "number" else term.type
    if isinstance(term, s.Wildcard):
        fail("_ in an expression (it stands for an atom's argument only)", term)
        return None
    if isinstance(term, s.Negative):
        inner = expression_type(term.term, env, fail)
        if inner in ("symbol", "unsigned"):
            fail(f"unary minus of {_a(inner)} {inner}", term)
        return inner
    if isinstance(term, s.BinOp):
        left = expression_type(term.left, env, fail)
        right = expression_type(term.right, env, fail)
        for side in (left, right):
            if side == "symbol":
                fail(f"arithmetic {term.op!r} on a symbol ({s.format_term(term)})", term)
        ok, out = unify(left, right)
        if not ok:
            fail(f"arithmetic {term.op!r} of {left} and {right} ({s.format_term(term)})", term)
        return out
    fail("an aggregate here is not supported", term)
    return None


def _atoms(body: Tuple[NormalLiteral, ...]) -> Iterator[s.Atom]:
    for lit in body:
        if isinstance(lit, s.Atom):
            yield lit
        elif isinstance(lit, s.Negation):
            yield lit.atom
        elif isinstance(lit, AggregateBinding):
            yield from _atoms(lit.body)


def _others(body: Tuple[NormalLiteral, ...]) -> Iterator[NormalLiteral]:
    for lit in body:
        if isinstance(lit, (s.Comparison, AggregateBinding)):
            yield lit
        if isinstance(lit, AggregateBinding):
            yield from _others(lit.body)


def infer_types(ctx: Any, normal: NormalRule, relations: Dict[str, Relation]) -> Dict[str, str]:
    """The type of every variable of ``normal`` (raising through ``ctx`` on a conflict)."""
    text, rel_name = normal.rule.text, normal.relation

    def fail(message: str, node: Any, relation: str = rel_name) -> NoReturn:
        raise ctx.failure(message, node, rule=text, relation=relation)

    env: Dict[str, str] = {}
    for atom in _atoms(normal.body):
        _atom_types(atom, relations[atom.relation], env, fail)
    others = list(_others(normal.body))
    changed = True
    while changed:
        changed = False
        for lit in others:
            for var, type_ in _derived(lit, env, fail):
                if var not in env and type_ is not None:
                    env[var] = "number" if type_ == INT_LITERAL else type_
                    changed = True
    for lit in others:
        _check_literal(lit, env, fail)
    rel = relations[normal.relation]
    for arg, (attr, col) in zip(normal.head.args, rel.columns):
        found = expression_type(arg, env, fail)
        if isinstance(arg, s.Const):
            problem = check_value(arg.value, col, literal_type=arg.type)
            if problem:
                fail(f"{rel.name}: {attr} ({col}) {problem}", arg)
        elif not unify(found, col)[0]:
            fail(f"{rel.name}: {attr} is {_a(col)} {col}, the head gives {_a(str(found))} "
                 f"{found} ({s.format_term(arg)})", arg)  # fmt: skip
    return env


def _atom_types(atom: s.Atom, rel: Relation, env: Dict[str, str], fail: Fail) -> None:
    for i, (arg, (attr, col)) in enumerate(zip(atom.args, rel.columns)):
        if isinstance(arg, s.Var):
            seen = env.setdefault(arg.name, col)
            if seen != col:
                fail(f"variable {arg.name} is used as {_a(seen)} {seen} and as {_a(col)} {col} "
                     f"({rel.name}.{attr})", arg)  # fmt: skip
        elif isinstance(arg, s.Const):
            problem = check_value(arg.value, col, literal_type=arg.type)
            if problem:
                fail(f"{rel.name}: argument {i + 1} ({attr}: {col}) {problem}", arg, rel.name)


def _derived(lit: NormalLiteral, env: Dict[str, str], fail: Fail) -> List[Tuple[str, Any]]:
    if isinstance(lit, AggregateBinding):
        if lit.kind == "count":
            return [(lit.var, "number")]
        assert lit.value is not None
        return [(lit.var, expression_type(lit.value, env, fail))]
    assert isinstance(lit, s.Comparison)
    if lit.op != "=":
        return []
    out = []
    if isinstance(lit.left, s.Var):
        out.append((lit.left.name, expression_type(lit.right, env, fail)))
    if isinstance(lit.right, s.Var):
        out.append((lit.right.name, expression_type(lit.left, env, fail)))
    return out


def _check_literal(lit: NormalLiteral, env: Dict[str, str], fail: Fail) -> None:
    if isinstance(lit, AggregateBinding):
        if lit.value is not None:
            t = expression_type(lit.value, env, fail)
            if t == "symbol":
                fail(f"{lit.kind} of a symbol ({s.format_term(lit.value)})", lit)
        return
    assert isinstance(lit, s.Comparison)
    left = expression_type(lit.left, env, fail)
    right = expression_type(lit.right, env, fail)
    ok, _ = unify(left, right)
    if not ok:
        fail(f"comparison {lit.op!r} of {_a(str(left))} {left} and {_a(str(right))} {right} "
             f"({s.format_literal(lit)})", lit)  # fmt: skip
