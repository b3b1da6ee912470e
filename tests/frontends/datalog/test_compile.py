"""The compiler: plan shapes, and compiled plans equal to the from-scratch Datalog evaluator.

The plans are evaluated by the plan layer's own oracle (``tests/oracle/plan.py``, plain dicts
and loops) and compared with ``tests/oracle/datalog.py`` (which never sees a plan): on the
classic programs and on random stratified programs after every step of random fact changes.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Set, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle.datalog import evaluate
from support.datalog_programs import CLASSIC, fact_changes, random_programs

from timelypy.frontends.datalog import compile_program

plan_oracle = pytest.importorskip("oracle.plan")


def _as_inputs(compiled: Any, facts: Mapping[str, Iterable[Tuple[Any, ...]]]) -> Dict[str, Any]:
    rows: Dict[str, Set[Tuple[Any, ...]]] = {name: set() for name in compiled.inputs}
    for name, values in list(compiled.facts.items()) + list(facts.items()):
        rows[name] |= {compiled.check_fact(name, v) for v in values}
    return {name: {r: 1 for r in values} for name, values in rows.items()}


def assert_plans_match(text: str, facts: Mapping[str, Iterable[Tuple[Any, ...]]]) -> None:
    """Every derived relation's plan, evaluated by the plan oracle, is a set equal to the
    Datalog evaluator's answer."""
    compiled = compile_program(text)
    want = evaluate(text, facts)
    got = plan_oracle.evaluate_plans(compiled.plans, _as_inputs(compiled, facts))
    for name in compiled.plans:
        assert all(w == 1 for w in got[name].values()), (name, got[name])
        assert set(got[name]) == want[name], (name, sorted(got[name]), sorted(want[name]))


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_programs_on_their_small_case(name):
    assert_plans_match(CLASSIC[name].text, CLASSIC[name].small)


@pytest.mark.parametrize("name", sorted(CLASSIC))
@pytest.mark.parametrize("seed", [1, 2])
def test_classic_programs_on_generated_graphs(name, seed):
    assert_plans_match(CLASSIC[name].text, CLASSIC[name].generate(25, seed))


def test_transitive_closure_against_networkx():
    nx = pytest.importorskip("networkx")
    facts = CLASSIC["transitive_closure"].generate(40, 7)
    graph = nx.DiGraph(facts["edge"])
    closure = {
        (a, b)
        for a in graph
        for b in nx.descendants(graph, a) | ({a} if _on_cycle(graph, a) else set())
    }
    compiled = compile_program(CLASSIC["transitive_closure"].text)
    got = plan_oracle.evaluate_plans(compiled.plans, _as_inputs(compiled, facts))
    assert set(got["path"]) == closure


def _on_cycle(graph: Any, node: Any) -> bool:
    import networkx as nx

    return graph.has_edge(node, node) or any(
        node in comp and len(comp) > 1 for comp in nx.strongly_connected_components(graph)
    )


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_programs_at_every_step_of_random_changes(data):
    program = data.draw(random_programs())
    steps = data.draw(fact_changes(program))
    current: Dict[str, Set[Tuple[int, ...]]] = {name: set() for name in program.inputs}
    for step in steps:
        for relation, fact, diff in step:
            (current[relation].add if diff > 0 else current[relation].discard)(fact)
        assert_plans_match(program.text, {k: sorted(v) for k, v in current.items()})


def test_float_symbol_and_arithmetic_programs():
    text = """
    .decl price(item: symbol, p: float)
    .decl qty(item: symbol, n: number)
    .input price, qty
    .decl cost(item: symbol, c: float)
    cost(i, c) :- price(i, p), qty(i, n), c = p * 2 + 1, n > 1.
    .decl total(t: float)
    total(t) :- t = sum c : { cost(_, c) }.
    .decl cheap(item: symbol)
    cheap(i) :- price(i, p), p < 2.5, !qty(i, 0).
    .decl half(x: number, h: number)
    half(n, n / 2) :- qty(_, n).
    half(n, (-n) % 3) :- qty(_, n), n < 3.
    """
    facts = {
        "price": [("a", 1.5), ("b", 3.0), ("c", 2.0)],
        "qty": [("a", 2), ("b", 5), ("c", 0), ("c", 7)],
    }
    assert_plans_match(text, facts)


def test_expressions_in_atoms_bindings_and_repeated_variables():
    text = """
    .decl e(x: number, y: number)
    .input e
    .decl next(x: number)
    next(x) :- e(x, _), e(x + 1, _).
    .decl loop(x: number)
    loop(x) :- e(x, x).
    .decl two(x: number, z: number)
    two(x, z) :- e(x, y), z = y * 10, !e(z, _), z != x.
    .decl notnext(x: number)
    notnext(x) :- e(x, _), !e(x + 1, _).
    .decl c3(x: number)
    c3(x) :- e(x, 3), e(3, x).
    """
    facts = {"e": [(1, 2), (2, 3), (3, 3), (4, 1), (3, 20), (20, 3), (30, 1)]}
    assert_plans_match(text, facts)


def test_aggregates_in_heads_and_ungrouped_and_nested_bodies():
    text = """
    .decl e(x: number, y: number)
    .input e
    .decl node(x: number)
    node(x) :- e(x, _).
    node(y) :- e(_, y).
    .decl outdeg(x: number, c: number)
    outdeg(x, count : { e(x, _) }) :- node(x).
    .decl big(x: number)
    big(x) :- node(x), count : { e(x, _) } >= 2.
    .decl most(m: number)
    most(m) :- m = max c : { outdeg(_, c) }.
    .decl local(x: number, s: number)
    local(x, s) :- node(x), s = sum y : { e(x, y), y > x }.
    """
    assert_plans_match(text, {"e": [(1, 2), (1, 3), (2, 3), (3, 1), (3, 4), (1, 1)]})


def test_aggregates_grouped_by_a_comparison_nested_and_combined():
    text = """
    .decl e(x: number, y: number)
    .input e
    .decl n(x: number)
    n(x) :- e(x, _).
    .decl above(x: number, c: number)
    above(x, c) :- n(x), c = count : { e(y, _), y > x }.
    .decl nested(x: number, c: number)
    nested(x, c) :- n(x), c = sum k : { e(x, y), k = count : { e(y, _) } }.
    .decl spread(x: number, d: number)
    spread(x, d) :- n(x), d = max a : { e(x, a) } - min b : { e(x, b) }.
    .decl two(x: number)
    two(x) :- n(x), count : { e(x, _) } = 2.
    .decl no_next(x: number)
    no_next(x) :- n(x), !e(x, x + 1).
    """
    assert_plans_match(text, {"e": [(1, 2), (1, 3), (2, 3), (3, 1), (3, 4), (5, 5), (5, 6)]})


def test_an_ungrouped_count_of_nothing_is_zero():
    text = """
    .decl e(x: number)
    .input e
    .decl total(c: number, s: number)
    total(c, s) :- c = count : { e(_) }, s = sum x : { e(x) }.
    .decl least(m: number)
    least(m) :- m = min x : { e(x) }.
    """
    assert_plans_match(text, {"e": []})
    assert_plans_match(text, {"e": [(3,), (4,)]})
    compiled = compile_program(text)
    assert compiled.facts["$unit"] == [()] and "$unit" in compiled.inputs
