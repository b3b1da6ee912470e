"""The Datalog language: what the parser reads, what the checks accept, how strata fall."""

from __future__ import annotations

import pytest
from oracle.datalog import evaluate
from support.datalog_programs import CLASSIC

from timelypy.frontends.datalog import compile_program, parse
from timelypy.frontends.datalog import syntax as s


def test_declarations_directives_facts_and_rules_with_positions():
    prog = parse(
        """.decl edge(x: number, y: number)   // a comment
/* a block
   comment */ .decl name(n: symbol, w: float, u: unsigned)
.input edge(IO=file, filename="e.facts", delimiter="\\t")
.output name
edge(1, 2).
name("a b", 1.5, 3).
"""
    )
    assert [d.name for d in prog.declarations] == ["edge", "name"]
    assert prog.declarations[1].attributes == (("n", "symbol"), ("w", "float"), ("u", "unsigned"))
    assert (prog.declarations[1].line, prog.declarations[1].column) == (3, 15)
    edge_in = prog.directives[0]
    assert (edge_in.kind, edge_in.relation) == ("input", "edge")
    assert edge_in.parameters == {"IO": "file", "filename": "e.facts", "delimiter": "\t"}
    assert prog.directives[1].kind == "output"
    assert [f.atom.args for f in prog.facts] == [
        (s.Const(1, "number"), s.Const(2, "number")),
        (s.Const("a b", "symbol"), s.Const(1.5, "float"), s.Const(3, "number")),
    ]
    assert prog.facts[1].line == 7 and prog.facts[1].text == 'name("a b", 1.5, 3).'


def test_rule_bodies_every_literal_kind():
    (rule,) = parse(
        "p(x, y + 1) :- e(x, _), !f(x, 2), x != 3, y = x * 2 - -1, "
        "c = count : { e(x, _) }, m = max z : e(z, x), t = sum z % 2 : { e(_, z), z > 0 }."
    ).rules
    head, body = rule.head, rule.body
    assert head.args[1] == s.BinOp("+", s.Var("y"), s.Const(1, "number"))
    assert body[0] == s.Atom("e", (s.Var("x"), s.Wildcard()))
    assert body[1] == s.Negation(s.Atom("f", (s.Var("x"), s.Const(2, "number"))))
    assert body[2] == s.Comparison("!=", s.Var("x"), s.Const(3, "number"))
    two_x = s.BinOp("*", s.Var("x"), s.Const(2, "number"))
    assert body[3].right == s.BinOp("-", two_x, s.Const(-1, "number"))  # precedence, unary -
    count = body[4].right
    assert count == s.AggregateTerm("count", None, (s.Atom("e", (s.Var("x"), s.Wildcard())),))
    assert body[5].right.kind == "max" and body[5].right.body == (
        s.Atom("e", (s.Var("z"), s.Var("x"))),
    )  # the one-atom form without braces
    total = body[6].right
    assert total.value == s.BinOp("%", s.Var("z"), s.Const(2, "number"))
    assert len(total.body) == 2
    assert rule.text.startswith("p(x, y + 1) :- e(x, _)")


def test_several_heads_make_one_rule_each():
    rules = parse("a(x), b(x) :- c(x).").rules
    assert [r.head.relation for r in rules] == ["a", "b"]
    assert rules[0].body == rules[1].body


def test_the_transitive_closure_program_of_the_issue():
    compiled = compile_program(CLASSIC["transitive_closure"].text)
    assert list(compiled.relations) == ["edge", "path"]
    assert compiled.inputs == ["edge"] and compiled.outputs == ["path"]
    assert compiled.strata == [["path"]]
    path = compiled.relations["path"]
    assert (path.arity, path.columns, path.is_output, path.is_input) == (
        2,
        [("x", "number"), ("y", "number")],
        True,
        False,
    )


def test_inputs_are_input_relations_relations_with_facts_and_relations_without_rules():
    compiled = compile_program(
        """
        .decl a(x: number)
        .input a
        .decl b(x: number)
        b(1). b(2).
        .decl c(x: number)
        .decl d(x: number)
        d(x) :- a(x), !c(x).
        d(3).
        """
    )
    assert compiled.inputs == ["a", "b", "c", "d"]
    assert compiled.facts == {"b": [(1,), (2,)], "d": [(3,)]}
    assert list(compiled.plans) == ["d"]


def test_strata_come_in_dependency_order_and_mutual_recursion_is_one_stratum():
    compiled = compile_program(CLASSIC["even_odd"].text)
    assert compiled.strata == [["even", "odd"], ["cyclic"]]
    compiled = compile_program(CLASSIC["unreachable"].text)
    assert compiled.strata == [["node"], ["reach"], ["unreachable"]]
    compiled = compile_program(CLASSIC["aggregates"].text)
    assert compiled.strata[0] == ["path"]
    assert set(map(tuple, compiled.strata[1:])) >= {("reach_count",), ("total",)}


def test_facts_convert_to_the_column_type():
    compiled = compile_program(".decl f(x: float, y: unsigned)\nf(1, 2).\nf(-2.5, 0).")
    assert compiled.facts["f"] == [(1.0, 2), (-2.5, 0)]
    assert isinstance(compiled.facts["f"][0][0], float)


def test_check_fact_converts_and_accepts_a_bare_value_for_arity_one():
    compiled = compile_program(".decl n(x: number)\n.decl f(x: float, s: symbol)")
    assert compiled.check_fact("n", 3) == (3,)
    assert compiled.check_fact("n", [4]) == (4,)
    assert compiled.check_fact("f", (2, "a")) == (2.0, "a")


def test_the_oracle_follows_souffle_on_aggregates_of_nothing():
    text = """
    .decl node(x: number)
    .decl edge(x: number, y: number)
    .decl out(x: number, c: number, s: number)
    out(x, c, s) :- node(x), c = count : { edge(x, _) }, s = sum y : { edge(x, y) }.
    .decl low(x: number, m: number)
    low(x, m) :- node(x), m = min y : { edge(x, y) }.
    """
    got = evaluate(text, {"node": [(1,), (2,)], "edge": [(1, 5), (1, 7)]})
    assert got["out"] == {(1, 2, 12), (2, 0, 0)}
    assert got["low"] == {(1, 5)}


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_programs_compile(name):
    compiled = compile_program(CLASSIC[name].text)
    assert set(compiled.outputs) <= set(compiled.plans)
