"""The lowering's contract: sharing (one build per sub-plan, one arrangement per relation and
key, one loop per fixpoint), entering loop-independent work once, nested fixpoints, compiled
expressions, and the errors that name what is wrong."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Dict, List

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import plan as oracle

import timelypy as tp
from timelypy.dataflow.graph import graph_of
from timelypy.plan import (
    Aggregate,
    And,
    Antijoin,
    Arith,
    Column,
    Compare,
    Const,
    Distinct,
    Fixpoint,
    Join,
    PlanError,
    Project,
    Recur,
    Row,
    Scan,
    Select,
    Semijoin,
    Union,
    compile_expression,
    compile_join_output,
    compile_predicate,
    compile_row,
    evaluate_expression,
    free_recurs,
    lower,
    lower_one,
)
from timelypy.testing import contents_at, run_changes

from . import plans as S

E = Scan("edge")


def transitive_closure(edges: Any = E, output: str = "path") -> Fixpoint:
    """``path(x, y) :- edge(x, y). path(x, z) :- path(x, y), edge(y, z).`` with a second
    relation ``reach(y) :- path(_, y)`` defined in the same loop."""
    step = Join(Recur("path"), edges, (1,), (0,), (Column(0), Column(3)))
    return Fixpoint(
        ("path", "reach"),
        (edges, Project(edges, (Column(1),))),
        (
            Distinct(Union((Recur("path"), step))),
            Distinct(Union((Recur("reach"), Project(Recur("path"), (Column(1),))))),
        ),
        output,
    )


def built(plans: Dict[str, Any]) -> List[Any]:
    """The graph nodes of a dataflow lowering ``plans`` over the input ``edge``."""

    def build(worker: Any) -> Any:
        def dataflow(scope: Any) -> Any:
            _session, edges = scope.new_collection(name="edge")
            for c in lower(plans, {"edge": edges}).values():
                c.probe()
            return scope

        return worker.dataflow(dataflow)

    (scope,) = tp.execute(build)
    return list(graph_of(scope).nodes.values())


def names(nodes: List[Any]) -> Counter:
    return Counter(n.name.split("#")[0] for n in nodes if n.kind == "operator")


def depth(node: Any) -> int:
    """How deep in nested scopes a graph node is (0: the dataflow's root scope)."""
    return node.id.count("_") - 1


def run(plans: Any, edges: List[Any]) -> Any:
    """Changes by time of the lowered plan(s) over ``edges`` (one batch per time)."""
    if isinstance(plans, dict):
        return run_changes(lambda edge: lower(plans, {"edge": edge}), {"edge": edges})
    return run_changes(lambda edge: lower_one(plans, {"edge": edge}), {"edge": edges})


# ---------------------------------------------------------------------------------------------
# sharing


def test_one_arrangement_per_relation_and_key() -> None:
    by_src = Join(E, E, (1,), (0,), (Column(0), Column(3)))  # E by column 1 and by column 0
    plans = {
        "two_hops": by_src,
        "again": Join(E, E, (1,), (0,), (Column(0), Column(3))),  # the same plan: built once
        "with_successor": Semijoin(E, E, (0,), (1,)),  # E by 0 again, E's keys by column 1
        "out_degree": Aggregate(E, (0,), "count"),  # E by 0 again
        "sinks": Antijoin(Project(E, (Column(1), Column(0))), E, (0,), (0,)),
    }
    ops = names(built(plans))
    arrangements = {name: k for name, k in ops.items() if name.startswith("Arrange")}
    # E by [1] and by [0]; the keys of E by [1] (with weights), the distinct keys of E by [0];
    # the swapped edges by [0] (another relation)
    assert arrangements == {
        "Arrange[1]": 1,
        "Arrange[0]": 2,
        "ArrangeKeys[1]": 1,
        "ArrangeKeys[0]": 1,
    }
    assert ops["Join"] == 1
    assert ops["Aggregate[count]"] == 1


def test_equal_plans_are_one_collection() -> None:
    def build(worker: Any) -> Any:
        def dataflow(scope: Any) -> Any:
            _s, edges = scope.new_collection(name="edge")
            out = lower({"a": Distinct(E), "b": Distinct(E)}, {"edge": edges})
            return out["a"] is out["b"]

        return worker.dataflow(dataflow)

    assert tp.execute(build) == [True]


def test_fixpoints_differing_in_output_are_one_loop() -> None:
    nodes = built({"path": transitive_closure(), "reach": transitive_closure(output="reach")})
    loops = [n for n in nodes if n.kind == "scope-output"]
    assert len({n.scope for n in loops}) == 1
    assert sum(1 for n in nodes if n.kind == "feedback") == 2  # one Variable per name


def test_loop_independent_work_is_built_outside_and_entered_once() -> None:
    nodes = built({"path": transitive_closure()})
    arranges = [n for n in nodes if n.name.startswith("Arrange")]
    # edge by column 0 is arranged outside the loop and entered; path by column 1 inside
    assert sorted((n.name, depth(n)) for n in arranges) == [("Arrange[0]", 0), ("Arrange[1]", 1)]


def test_free_recurs() -> None:
    assert free_recurs(transitive_closure()) == frozenset()
    body = transitive_closure().bodies[0]
    assert free_recurs(body) == {"path"}
    nested = Fixpoint(("q",), (Recur("p"),), (Union((Recur("q"), Recur("p"))),), "q")
    assert free_recurs(nested) == {"p"}


# ---------------------------------------------------------------------------------------------
# behaviour


def check_every_time(plans: Dict[str, Any], batches: List[Any]) -> Dict[str, Any]:
    """Run ``plans`` over ``batches`` of edges and check every output at every time against
    the plan evaluator; returns the changes by output."""
    got = run(plans, batches)
    content: Dict[Any, int] = {}
    for t, batch in enumerate(batches):
        for row, diff in batch.items() if isinstance(batch, dict) else [(r, 1) for r in batch]:
            content[row] = content.get(row, 0) + diff
        expected = oracle.evaluate_plans(plans, {"edge": content})
        for name in plans:
            assert contents_at(got[name], t) == expected[name], (name, t)
    return got  # type: ignore[no-any-return]


EDGES = [[(1, 2), (2, 3), (3, 4)], {(2, 3): -1}, [(4, 1), (2, 3)], {(1, 2): -1, (3, 4): -1}]


def test_transitive_closure_under_inserts_and_removes() -> None:
    got = check_every_time({"path": transitive_closure()}, EDGES)["path"]
    assert set(contents_at(got, 0)) == {(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)}
    assert set(contents_at(got, 1)) == {(1, 2), (3, 4)}
    every = {(a, b) for a in (1, 2, 3, 4) for b in (1, 2, 3, 4)}
    assert set(contents_at(got, 2)) == every
    assert set(contents_at(got, 3)) == {(4, 1), (2, 3)}


def test_nested_fixpoint_reads_the_outer_relation() -> None:
    # outer: x = distinct(edge + closure of x's reverse); the inner loop reads Recur("x")
    reverse = Project(Recur("x"), (Column(1), Column(0)))
    inner = Fixpoint(
        ("y",),
        (reverse,),
        (
            Distinct(
                Union((Recur("y"), Join(Recur("y"), reverse, (1,), (0,), (Column(0), Column(3)))))
            ),
        ),
        "y",
    )
    outer = Fixpoint(("x",), (E,), (Distinct(Union((Recur("x"), inner))),), "x")
    check_every_time({"outer": outer, "inner_of_edges": Project(outer, (Column(1),))}, EDGES)


def test_the_empty_union_is_the_empty_relation() -> None:
    # a recursive relation with no rule outside the loop starts empty
    step = Join(Recur("p"), E, (1,), (0,), (Column(0), Column(3)))
    seeded = Union((Recur("p"), step, Select(E, Compare("=", Column(0), Const(1)))))
    plans = {
        "empty": Union(()),
        "from_one": Fixpoint(("p",), (Union(()),), (Distinct(seeded),), "p"),
    }
    got = check_every_time(plans, EDGES)
    assert got["empty"] == {}
    assert set(contents_at(got["from_one"], 0)) == {(1, 2), (1, 3), (1, 4)}


def test_aggregate_inside_a_loop_connected_components() -> None:
    # label(x, min l) over label(x, l) and label(y, l) for edge(y, x): the least node id that
    # reaches x (a reduce at Product times inside the loop, on its own arrangement)
    nodes = Union((Project(E, (Column(0), Column(0))), Project(E, (Column(1), Column(1)))))
    spread = Join(Recur("label"), E, (0,), (0,), (Column(3), Column(1)))
    body = Aggregate(Union((Recur("label"), spread)), (0,), "min", Column(1))
    labels = Fixpoint(("label",), (Aggregate(nodes, (0,), "min", Column(1)),), (body,), "label")
    got = check_every_time({"labels": labels}, EDGES)["labels"]
    assert set(contents_at(got, 0)) == {(1, 1), (2, 1), (3, 1), (4, 1)}
    assert set(contents_at(got, 1)) == {(1, 1), (2, 1), (3, 3), (4, 3)}


def test_aggregates_of_every_kind() -> None:
    value = Arith("*", Column(1), Const(10))
    plans = {
        "count": Aggregate(E, (0,), "count"),
        "sum": Aggregate(E, (0,), "sum", value),
        "min": Aggregate(E, (0,), "min", value),
        "max": Aggregate(E, (), "max", Column(1)),
        "pairs": Aggregate(Project(E, (Column(0), Column(1), Const(1))), (2, 0), "count"),
    }
    got = check_every_time(plans, [[(1, 2), (1, 5), (2, 3)], {(1, 2): -1}, {(2, 3): -1}])
    assert set(contents_at(got["count"], 0)) == {(1, 2), (2, 1)}
    assert set(contents_at(got["sum"], 0)) == {(1, 70), (2, 30)}
    assert set(contents_at(got["min"], 1)) == {(1, 50), (2, 30)}
    assert set(contents_at(got["max"], 2)) == {(5,)}
    assert set(contents_at(got["pairs"], 0)) == {(1, 1, 2), (1, 2, 1)}


def test_select_project_and_division_semantics() -> None:
    plans = {
        "kept": Select(
            E, And((Compare("<", Column(0), Column(1)), Compare("!=", Column(1), Const(3))))
        ),
        "arith": Project(
            E,
            (
                Arith("/", Column(0), Const(2)),
                Arith("/", Const(-7), Const(2)),
                Arith("min", Column(0), Column(1)),
                Row((Column(1),)),
            ),
        ),
        "floats": Project(E, (Arith("/", Column(1), Const(2.0)),)),
    }
    got = check_every_time(plans, [[(1, 2), (5, 3), (2, 3)]])
    assert set(contents_at(got["kept"], 0)) == {(1, 2)}
    assert set(contents_at(got["arith"], 0)) == {
        (0, -4, 1, (2,)),
        (2, -4, 3, (3,)),
        (1, -4, 2, (3,)),
    }
    assert set(contents_at(got["floats"], 0)) == {(1.0,), (1.5,)}


# ---------------------------------------------------------------------------------------------
# compiled expressions


@st.composite
def rows_and_expressions(draw: Any) -> Any:
    arity = draw(st.integers(1, 4))
    row = tuple(draw(st.lists(st.integers(-5, 5), min_size=arity, max_size=arity)))
    exprs = [
        S.expression(draw, arity, draw(st.booleans()), 3) for _ in range(draw(st.integers(0, 3)))
    ]
    return row, exprs, S.predicate(draw, arity)


@settings(max_examples=300, deadline=None)
@given(rows_and_expressions())
def test_compiled_expressions_agree_with_both_tree_walks(case: Any) -> None:
    row, exprs, pred = case
    expected = tuple(oracle.evaluate_expression(e, row) for e in exprs)
    assert compile_row(exprs)(row) == expected
    assert tuple(evaluate_expression(e, row) for e in exprs) == expected
    for e in exprs:
        assert compile_expression(e)(row) == oracle.evaluate_expression(e, row)
    assert compile_predicate(pred)(row) == bool(oracle.evaluate_expression(pred, row))
    assert compile_join_output(exprs)("key", row[:1], row[1:]) == [expected]


def test_odd_constants_stay_exact() -> None:
    nan, obj = float("nan"), frozenset({1})
    f = compile_row((Const(nan), Const(obj), Const("it's"), Const(None), Const(2.5)))
    out = f(())
    assert out[0] != out[0] and out[1] is obj and out[2:] == ("it's", None, 2.5)


# ---------------------------------------------------------------------------------------------
# errors


def lowering_error(
    plan: Any, inputs: Callable[[Any], Dict[str, Any]] = lambda e: {"edge": e}
) -> str:
    def build(worker: Any) -> Any:
        def dataflow(scope: Any) -> Any:
            _s, edges = scope.new_collection(name="edge")
            with pytest.raises(PlanError) as info:
                lower_one(plan, inputs(edges))
            return str(info.value)

        return worker.dataflow(dataflow)

    (message,) = tp.execute(build)
    return message  # type: ignore[no-any-return]


def test_errors_name_what_is_wrong() -> None:
    assert lowering_error(Distinct(Scan("edges"))) == (
        "Scan('edges'): no input collection named 'edges' (inputs: ['edge'])"
    )
    assert "Recur('p') outside every Fixpoint that defines 'p'" in lowering_error(Recur("p"))
    message = lowering_error(Join(E, E, (0, 1), (0,), (Column(0),)))
    assert message == "Join: left key (0, 1) and right key (0,) have different lengths"
    assert "defined twice" in lowering_error(Fixpoint(("p", "p"), (E, E), (E, E), "p"))
    assert "no input collections" in lowering_error(E, lambda e: {})
    assert "not a Collection" in lowering_error(E, lambda e: {"edge": [(1, 2)]})


def test_plans_sharing_sub_plans_as_a_dag_lower_and_evaluate() -> None:
    # stratum i reads stratum i-1 twice (its initial and its rule): as a tree the last plan has
    # 2**30 nodes, as objects a few hundred; lowering and evaluating visit each object once
    previous: Any = E
    plans = {}
    for i in range(30):
        name = f"s{i}"
        step = Join(Recur(name), previous, (1,), (0,), (Column(0), Column(3)))
        stratum = Fixpoint((name,), (previous,), (Distinct(Union((Recur(name), step))),), name)
        plans[name] = stratum
        previous = Select(stratum, Compare("<", Column(0), Const(3)))
    got = check_every_time(plans, [[(1, 2), (2, 3), (3, 1)], {(3, 1): -1}])
    assert set(contents_at(got["s29"], 1)) == {(1, 2), (1, 3), (2, 3)}


@pytest.mark.parametrize(
    "plan, message",
    [
        (
            Project(E, (Arith("/", Column(0), Column(1)),)),
            "ExpressionError: Project: (_divide(r[0], r[1]), ) on the row (1, 0): "
            "ZeroDivisionError",
        ),
        (
            Join(E, E, (0,), (0,), (Column(5),)),
            "ExpressionError: Join: (r[5], ) over r = a + b on the row ((1, 0), (1, 0)): "
            "IndexError",
        ),
        (
            Select(E, Compare("<", Column(0), Const("a"))),
            "ExpressionError: Select: (r[0] < 'a') on the row (1, 0): TypeError",
        ),
        (
            Aggregate(E, (0,), "sum", Column(2)),
            "ExpressionError: Aggregate[sum]: r[2] on the row (1, 0): IndexError",
        ),
    ],
)
def test_expression_errors_name_the_node_the_expression_and_the_row(
    plan: Any, message: str
) -> None:
    with pytest.raises(tp.TimelyError) as info:
        run(plan, [[(1, 0)]])
    assert message in str(info.value)


def test_nodes_visits_each_object_once_in_pre_order() -> None:
    shared = Distinct(E)
    plan = Union((shared, Project(shared, (Column(0),)), E))
    assert list(plan.nodes()) == [plan, shared, E, Project(shared, (Column(0),))]
    assert len(list(plan.walk())) == 7
