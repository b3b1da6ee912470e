"""The compiler's plans: their shapes (joins, selects, antijoins, aggregates, fixpoints)."""

from __future__ import annotations

from support.datalog_programs import CLASSIC

from timelypy import plan as p
from timelypy.frontends.datalog import compile_program


def test_transitive_closure_is_one_semi_naive_fixpoint():
    plans = compile_program(CLASSIC["transitive_closure"].text).plans
    edge = p.Scan("edge")
    step = p.Join(
        p.Recur("path"), edge, (1,), (0,), (p.Column(0), p.Column(3))
    )  # path(x, y), edge(y, z) -> (x, z)
    initial = p.Distinct(edge)
    assert plans["path"] == p.Fixpoint(
        ("path",), (initial,), (p.Distinct(p.Union((initial, step))),), "path"
    )


def test_a_recursive_stratum_is_one_fixpoint_differing_only_in_output():
    plans = compile_program(CLASSIC["even_odd"].text).plans
    even, odd = plans["even"], plans["odd"]
    assert isinstance(even, p.Fixpoint) and isinstance(odd, p.Fixpoint)
    assert even.names == odd.names == ("even", "odd")
    assert (even.initial, even.bodies) == (odd.initial, odd.bodies)
    assert (even.output, odd.output) == ("even", "odd")
    # even has no rule outside the loop: it starts empty, as a Select(false) of odd's start
    assert even.initial == (p.Select(odd.initial[1], p.Const(False)), p.Distinct(p.Scan("edge")))


def test_constants_and_repeated_variables_select_and_negation_antijoins():
    text = """
    .decl e(x: number, y: number)
    .decl r(x: number)
    r(x) :- e(x, x), !e(x, 3).
    """
    plan = compile_program(text).plans["r"]
    loops = p.Select(p.Scan("e"), p.Compare("=", p.Column(0), p.Column(1)))
    threes = p.Select(p.Scan("e"), p.Compare("=", p.Column(1), p.Const(3)))
    left = p.Project(loops, (p.Column(0),))
    assert plan == p.Distinct(p.Antijoin(left, threes, (0,), (0,)))


def test_comparisons_are_placed_as_soon_as_their_variables_are_bound():
    text = """
    .decl e(x: number, y: number)
    .decl r(x: number, z: number)
    r(x, z) :- e(x, y), e(y, z), x < 3, y != 1.
    """
    plan = compile_program(text).plans["r"]
    e = p.Scan("e")
    first = p.Select(  # x < 3 and y != 1 filter e(x, y) before the join, as one Select
        e,
        p.And((p.Compare("<", p.Column(0), p.Const(3)), p.Compare("!=", p.Column(1), p.Const(1)))),
    )
    assert plan == p.Distinct(p.Join(first, e, (1,), (0,), (p.Column(0), p.Column(3))))


def test_an_aggregate_joins_back_and_counts_zero_for_groups_with_nothing():
    text = """
    .decl n(x: number)
    .decl e(x: number, y: number)
    .decl c(x: number, k: number)
    c(x, k) :- n(x), k = count : { e(x, _) }.
    """
    plan = compile_program(text).plans["c"]
    agg = p.Aggregate(p.Project(p.Distinct(p.Scan("e")), (p.Column(0),)), (0,), "count")
    joined = p.Join(p.Scan("n"), agg, (0,), (0,), (p.Column(0), p.Column(2)))
    zeros = p.Project(p.Antijoin(p.Scan("n"), agg, (0,), (0,)), (p.Column(0), p.Const(0)))
    assert plan == p.Distinct(p.Union((joined, zeros)))
