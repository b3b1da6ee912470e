"""Every kind of Datalog error: the message has the line, the column, the rule and the names."""

from __future__ import annotations

import pickle

import pytest

from timelypy.errors import DatalogError
from timelypy.frontends.datalog import compile_program

DECLS = """.decl e(x: number, y: number)
.decl n(x: number)
.decl sym(s: symbol)
.decl p(x: number, y: number)
"""


def fails(text: str, source: str = "<program>") -> DatalogError:
    with pytest.raises(DatalogError) as info:
        compile_program(text, source)
    return info.value


def test_syntax_error_says_where_and_what_was_expected():
    err = fails("p(x) :- e(x, y)\n.decl q(x: number)", source="prog.dl")
    assert (err.line, err.column) == (2, 1)
    assert str(err).startswith("prog.dl:2:1: syntax error: unexpected '.decl'")
    assert '"."' in str(err) and '","' in str(err)  # what may come there


def test_syntax_error_at_the_end_and_on_a_bad_character():
    err = fails(DECLS + "p(x, y) :- e(x, y)")
    assert err.line == 5 and "end of the program" in str(err)
    err = fails(DECLS + "p(x, y) :- e(x, y) & n(x).")
    assert (err.line, err.column) == (5, 20) and "'&'" in str(err)


def test_unsupported_directive_and_unknown_type():
    err = fails(".type T <: number")
    assert ".type is not supported" in str(err) and err.line == 1
    err = fails(".decl q(x: int)")
    assert (err.line, err.column) == (1, 12) and "unknown type 'int'" in str(err)


def test_undeclared_relation_in_a_body_with_a_suggestion():
    err = fails(DECLS + "p(x, y) :- edge(x, y).")
    assert (err.line, err.column) == (5, 12)
    assert err.relation == "edge" and err.rule == "p(x, y) :- edge(x, y)."
    assert "undeclared relation edge" in str(err)
    assert "in: p(x, y) :- edge(x, y)." in str(err)


def test_undeclared_relation_in_a_head_a_directive_and_a_fact():
    assert fails(DECLS + "q(x) :- n(x).").relation == "q"
    err = fails(DECLS + ".output q")
    assert err.relation == "q" and (err.line, err.column) == (5, 9)
    assert fails(DECLS + "q(1).").relation == "q"


def test_arity_mismatch_names_the_declaration():
    err = fails(DECLS + "\n\np(x, y) :- e(x, y), n(x, y).")
    assert (err.line, err.column) == (7, 21) and err.relation == "n"
    assert "relation n has arity 1 (n(x: number)), used here with 2 arguments" in str(err)


def test_type_mismatch_of_a_constant():
    err = fails(DECLS + 'p(x, y) :- e(x, "a"), e(y, x).')
    assert (err.line, err.column) == (5, 17) and err.relation == "e"
    assert "expects a number, got the symbol 'a'" in str(err)
    err = fails(DECLS + "sym(1).")
    assert "expects a symbol, got the number 1" in str(err)


def test_a_variable_used_at_two_types():
    err = fails(DECLS + "p(x, y) :- e(x, y), sym(x).")
    assert (err.line, err.column) == (5, 25) and err.relation == "p"
    assert "variable x is used as a number and as a symbol (sym.s)" in str(err)


def test_types_of_arithmetic_comparisons_and_heads():
    assert "arithmetic '+' on a symbol" in str(fails(DECLS + "n(x) :- sym(s), x = s + 1."))
    err = fails(DECLS + "n(x) :- n(x), sym(s), s < x.")
    assert "comparison '<' of a symbol and a number" in str(err)
    err = fails(DECLS + "sym(x) :- n(x).")
    assert "sym: s is a symbol, the head gives a number" in str(err)


def test_unbound_variable_in_a_head():
    err = fails(DECLS + "p(x, z) :- e(x, y).")
    assert (err.line, err.column) == (5, 6) and err.relation == "p"
    assert "unbound variable z in the head of a rule of p" in str(err)


def test_wildcard_in_a_head():
    err = fails(DECLS + "p(x, _) :- e(x, y).")
    assert (err.line, err.column) == (5, 6) and "_ in the head" in str(err)


def test_negation_and_comparison_on_unbound_variables():
    err = fails(DECLS + "n(x) :- n(x), !e(x, y), !e(y, x), y < 3.")
    assert "variable y occurs only in a negated atom" in str(err) and err.line == 5
    err = fails(DECLS + "n(x) :- n(x), x < z.")
    assert (err.line, err.column) == (5, 15)
    assert "comparison on unbound variable z" in str(err)
    err = fails(DECLS + "n(x) :- n(x), !e(x, z), z = 1 + w.")
    assert "unbound variable" in str(err)


def test_a_variable_only_in_a_negated_atom():
    err = fails(DECLS + "n(x) :- n(x), !e(x, y).")
    assert (err.line, err.column) == (5, 15) and err.relation == "n"
    assert "variable y occurs only in a negated atom" in str(err)


def test_a_fact_with_a_variable():
    err = fails(DECLS + "p(1, y).")
    assert (err.line, err.column) == (5, 6) and err.relation == "p"
    assert "a fact with a variable y" in str(err)


def test_a_rule_needs_a_positive_atom():
    err = fails(DECLS + "n(x) :- x = 3.")
    assert "needs a positive atom" in str(err) and err.line == 5


def test_recursion_through_negation_names_the_rules_of_the_cycle():
    text = (
        DECLS
        + """.decl a(x: number)
.decl b(x: number)
a(x) :- n(x), !b(x).
b(x) :- a(x).
"""
    )
    err = fails(text)
    assert (err.line, err.column) == (7, 1) and err.relation == "a"
    assert "recursion through negation" in str(err)
    assert "line 7: a(x) :- n(x), !b(x)." in str(err)
    assert "line 8: b(x) :- a(x)." in str(err)


def test_recursion_through_aggregation_names_the_rules_of_the_cycle():
    text = DECLS + "p(x, c) :- n(x), c = count : { p(x, _) }.\n"
    err = fails(text)
    assert "recursion through aggregation" in str(err) and err.relation == "p"
    assert "line 5: p(x, c) :- n(x), c = count : { p(x, _) }." in str(err)


def test_aggregate_errors():
    err = fails(DECLS + "n(c) :- n(x), c = count y : { e(x, y) }.")
    assert "count takes no value" in str(err)
    err = fails(DECLS + "n(c) :- n(x), c = sum : { e(x, _) }.")
    assert "sum needs a value" in str(err)
    err = fails(DECLS + "n(c) :- n(x), c = sum w : { e(x, _) }.")
    assert "unbound variable w in the value of sum" in str(err)
    err = fails(DECLS + "n(c) :- sym(s), c = min s : { sym(s) }.")
    assert "min of a symbol" in str(err)


def test_duplicate_declaration():
    err = fails(DECLS + ".decl n(y: number)")
    assert "declared twice (first on line 2)" in str(err) and err.line == 5


def test_check_fact_errors_name_relation_position_type_and_value():
    compiled = compile_program(DECLS)
    with pytest.raises(DatalogError) as info:
        compiled.check_fact("e", (1, "x"))
    assert info.value.relation == "e"
    assert "field 2 (y) expects a number, got the symbol 'x'" in str(info.value)
    with pytest.raises(DatalogError, match=r"e has 2 fields \(x: number, y: number\), got 3"):
        compiled.check_fact("e", 3)
    with pytest.raises(DatalogError, match="unknown relation 'ee'.*e"):
        compiled.check_fact("ee", (1, 2))
    with pytest.raises(DatalogError, match="got the bool True"):
        compiled.check_fact("n", True)
    with pytest.raises(DatalogError, match="expects a symbol, got the number 3"):
        compiled.check_fact("sym", 3)


def test_the_error_pickles_with_its_fields():
    err = fails(DECLS + "p(x, z) :- e(x, y).")
    back = pickle.loads(pickle.dumps(err))
    assert (back.line, back.column, back.rule, back.relation, str(back)) == (
        err.line,
        err.column,
        err.rule,
        err.relation,
        str(err),
    )
