"""Tests of the from-scratch reference evaluator (``oracle.reference``) and the shared strategies.

The differential property tests trust ``reference.evaluate`` as ground truth, so it is checked
here on hand-worked examples (the book's skip-level management join, transitive closure, ...),
on algebraic identities, and against an independent static "mock engine" driven by ``build``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import reference as ref
from support import strategies as S

from timelypy.order import Product, less_equal

from_ = ref.Input
Var = ref.Variable

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def ones(records: Iterable[Any]) -> Dict[Any, int]:
    """A set as a multiset: every record with weight 1."""
    return {r: 1 for r in records}


# ---------------------------------------------------------------------------------------------
# Hand-worked examples


MANAGES = ones((p // 2, p) for p in range(10))


def test_skip_level_join_from_the_book() -> None:
    # manages.map(|(m2, m1)| (m1, m2)).join(&manages)  ->  (m1, (m2, p))
    prog = ref.Join(ref.Map(from_(0), "swap"), from_(0))
    expected = ones(
        [
            (0, (0, 0)),
            (0, (0, 1)),
            (1, (0, 2)),
            (1, (0, 3)),
            (2, (1, 4)),
            (2, (1, 5)),
            (3, (1, 6)),
            (3, (1, 7)),
            (4, (2, 8)),
            (4, (2, 9)),
        ]
    )
    assert ref.evaluate(prog, {0: MANAGES}) == expected
    assert ref.infer_type(prog) == ref.JOINED


def test_skip_level_join_with_retraction() -> None:
    # Retracting "2 manages 4" removes (2, (1, 4)), where 4 is the employee, and also
    # (4, (2, 8)) and (4, (2, 9)), where 2 is 4's manager.
    prog = ref.Join(ref.Map(from_(0), "swap"), from_(0))
    inputs = dict(MANAGES)
    inputs[(2, 4)] -= 1
    out = ref.evaluate(prog, {0: inputs})
    assert out == ones(
        [(0, (0, 0)), (0, (0, 1)), (1, (0, 2)), (1, (0, 3)), (2, (1, 5)), (3, (1, 6)), (3, (1, 7))]
    )


def test_concat_of_manages_with_itself_counts_zero_twice() -> None:
    prog = ref.Concat(from_(0), ref.Map(from_(0), "swap"))
    out = ref.evaluate(prog, {0: MANAGES})
    assert out[(0, 0)] == 2 and out[(0, 1)] == 1 and out[(1, 0)] == 1


def transitive_closure(edges: ref.Node) -> ref.Node:
    """paths(x, z) = edges(x, z) or (paths(x, y) and edges(y, z))."""
    step = ref.Map(ref.Join(ref.Map(Var(), "swap"), ref.Enter(edges)), "vals")
    return ref.Iterate(edges, ref.Distinct(ref.Concat(step, ref.Enter(edges))))


def test_transitive_closure_of_a_chain() -> None:
    chain = ones([(0, 1), (1, 2), (2, 3)])
    out = ref.evaluate(transitive_closure(from_(0)), {0: chain})
    assert out == ones([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


def test_transitive_closure_of_a_cycle_converges() -> None:
    cycle = ones([(0, 1), (1, 2), (2, 0)])
    out = ref.evaluate(transitive_closure(from_(0)), {0: cycle})
    assert out == ones((a, b) for a in range(3) for b in range(3))


def test_reachability_template() -> None:
    roots, edges = ref.Distinct(from_(0)), ref.Distinct(from_(1))
    step = ref.Map(ref.Join(Var(), ref.Enter(edges)), "hop")
    prog = ref.Iterate(roots, ref.Distinct(ref.Concat(step, ref.Enter(roots))))
    # labels: node 0 carries label 7, node 4 carries label 9; edges 0->1->2, 4->2; 3 unreachable
    out = ref.evaluate(prog, {0: ones([(0, 7), (4, 9)]), 1: ones([(0, 1), (1, 2), (4, 2), (3, 0)])})
    assert out == ones([(0, 7), (1, 7), (2, 7), (4, 9), (2, 9)])


def test_join_weights_multiply() -> None:
    prog = ref.Join(from_(0), from_(1))
    out = ref.evaluate(prog, {0: {(1, 2): 3, (2, 0): 1}, 1: {(1, 5): -2, (1, 6): 1, (3, 3): 4}})
    assert out == {(1, (2, 5)): -6, (1, (2, 6)): 3}


def test_distinct_with_negative_weights() -> None:
    data = {(0, 0): 2, (0, 1): -1, (1, 1): 1, (2, 2): -3}
    assert ref.evaluate(ref.Distinct(from_(0)), {0: data}) == ones([(0, 0), (1, 1)])
    assert ref.evaluate(ref.Threshold(from_(0), "positive"), {0: data}) == ones([(0, 0), (1, 1)])
    assert ref.evaluate(ref.Threshold(from_(0), "abs"), {0: data}) == {
        (0, 0): 2,
        (0, 1): 1,
        (1, 1): 1,
        (2, 2): 3,
    }
    assert ref.evaluate(ref.Threshold(from_(0), "at_least_2"), {0: data}) == ones([(0, 0)])
    assert ref.evaluate(ref.Threshold(from_(0), "parity"), {0: data}) == ones(
        [(0, 1), (1, 1), (2, 2)]
    )


def test_threshold_is_only_called_for_nonzero_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: List[Tuple[Any, int]] = []

    def spy(r: Any, c: int) -> int:
        seen.append((r, c))
        return 1

    monkeypatch.setitem(ref.THRESHOLDS, "spy", ref.Fn("spy", spy))
    prog = ref.Threshold(ref.Concat(from_(0), ref.Negate(from_(1))), "spy")
    out = ref.evaluate(prog, {0: ones([(0, 0), (1, 1)]), 1: ones([(0, 0)])})
    assert seen == [((1, 1), 1)] and out == ones([(1, 1)])


def test_count_reports_negative_totals() -> None:
    data = {(0, 0): 2, (0, 1): -1}
    assert ref.evaluate(ref.Count(from_(0)), {0: data}) == ones([((0, 0), 2), ((0, 1), -1)])
    keys = ref.Count(ref.Map(from_(0), "key"))
    assert ref.evaluate(keys, {0: data}) == ones([(0, 1)])


def test_reduce_is_not_run_for_keys_whose_list_is_empty() -> None:
    # key 1's values cancel out completely, so reduce must not run for key 1 at all
    # (reduce 'count' would otherwise report (1, 0)).
    diff = ref.Concat(from_(0), ref.Negate(from_(1)))
    a = {(1, 4): 1, (1, 5): 2, (2, 1): 1, (2, 2): 1}
    b = {(1, 4): 1, (1, 5): 2, (2, 2): 2}
    inputs = {0: a, 1: b}
    assert ref.evaluate(diff, inputs) == {(2, 1): 1, (2, 2): -1}
    assert ref.evaluate(ref.Reduce(diff, "count"), inputs) == ones([(2, 0)])  # runs: list non-empty
    assert ref.evaluate(ref.Reduce(diff, "min"), inputs) == ones([(2, 1)])
    assert ref.evaluate(ref.Reduce(diff, "max"), inputs) == ones([(2, 2)])
    assert ref.evaluate(ref.Reduce(diff, "sum"), inputs) == ones([(2, 1 * 1 + 2 * -1)])
    assert ref.evaluate(ref.Reduce(diff, "keep"), inputs) == {(2, 1): 1, (2, 2): -1}


def test_reduce_sees_sorted_consolidated_values(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: Dict[Any, List[Tuple[Any, int]]] = {}

    def spy(k: Any, vs: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        seen[k] = list(vs)
        return []

    monkeypatch.setitem(ref.REDUCERS, "spy", ref.Fn("spy", spy, ref.PAIR, ref.PAIR))
    prog = ref.Reduce(ref.Concat(from_(0), from_(1)), "spy")
    assert (
        ref.evaluate(prog, {0: {(0, 5): 1, (0, 3): 2}, 1: {(0, 5): 1, (0, 3): -2, (0, 1): -1}})
        == {}
    )
    assert seen == {0: [(1, -1), (5, 2)]}


def test_reduce_min_sum_count_top2() -> None:
    data = {(0, 3): 2, (0, 1): 1, (0, 4): 1, (1, 2): -1}
    assert ref.evaluate(ref.Reduce(from_(0), "min"), [data]) == ones([(0, 1), (1, 2)])
    assert ref.evaluate(ref.Reduce(from_(0), "sum"), [data]) == ones([(0, 11), (1, -2)])
    assert ref.evaluate(ref.Reduce(from_(0), "count"), [data]) == ones([(0, 4), (1, -1)])
    assert ref.evaluate(ref.Reduce(from_(0), "top2"), [data]) == ones([(0, 3), (0, 4), (1, 2)])


def test_semijoin_and_antijoin_weights() -> None:
    a = {(0, 0): 2, (0, 1): 1, (1, 1): 1, (2, 0): 1}
    keys = {0: 2, 1: -1}
    inputs = {0: a}
    # keys arrive as a collection of ints; weights multiply
    prog_keys = ref.Map(from_(1), "key")
    inputs[1] = {(0, 0): 1, (0, 5): 1, (1, 3): -1}
    assert ref.evaluate(prog_keys, inputs) == keys
    semi = ref.Semijoin(from_(0), prog_keys)
    anti = ref.Antijoin(from_(0), prog_keys)
    assert ref.evaluate(semi, inputs) == {(0, 0): 4, (0, 1): 2, (1, 1): -1}
    assert ref.evaluate(anti, inputs) == {(0, 0): -2, (0, 1): -1, (1, 1): 2, (2, 0): 1}
    # with set-valued keys antijoin is the familiar "records whose key is absent"
    anti_set = ref.Antijoin(from_(0), ref.Distinct(prog_keys))
    assert ref.evaluate(anti_set, inputs) == {(1, 1): 1, (2, 0): 1}


def test_flat_map_duplicates_and_empty_outputs() -> None:
    data = {(0, 2): 1, (1, 0): 5, (2, 4): -1}
    assert ref.evaluate(ref.FlatMap(from_(0), "upto_val"), [data]) == {
        (0, 0): 1,
        (0, 1): 1,
        (2, 0): -1,
    }
    assert ref.evaluate(ref.FlatMap(from_(0), "twice"), [data]) == {
        (0, 2): 2,
        (1, 0): 10,
        (2, 4): -2,
    }


def test_map_merges_weights_and_drops_zeros() -> None:
    data = {(0, 1): 1, (0, 2): -1, (1, 1): 3}
    assert ref.evaluate(ref.Map(from_(0), "key"), [data]) == {1: 3}
    assert ref.evaluate(ref.Consolidate(ref.Concat(from_(0), ref.Negate(from_(0)))), [data]) == {}


def test_missing_inputs_are_empty_and_zero_weights_ignored() -> None:
    prog = ref.Concat(from_(0), from_(2))
    assert ref.evaluate(prog, {0: {(0, 0): 0, (1, 1): 1}}) == ones([(1, 1)])


# ---------------------------------------------------------------------------------------------
# Iterate


def test_iterate_converges_to_closure_of_inc() -> None:
    # x_{i+1} = distinct(inc_val(x_i) + x_i): fills in every value for key 0
    prog = ref.Iterate(from_(0), ref.Distinct(ref.Concat(ref.Map(Var(), "inc_val"), Var())))
    assert ref.evaluate(prog, [ones([(0, 3)])]) == ones((0, v) for v in range(6))


def test_iterate_source_multiplicities_are_the_starting_point() -> None:
    # The body is the identity map, so x1 = x0: the source (with its weights) is the fixed point.
    prog = ref.Iterate(from_(0), ref.Map(Var(), "identity"))
    data = {(0, 0): 3, (1, 1): -2}
    assert ref.evaluate(prog, [data]) == data


def test_iterate_with_nested_iterate() -> None:
    # outer: x -> distinct(x + tc(x)); inner closes the relation transitively.
    inner = transitive_closure(Var())
    tc_of_enter = ref.Iterate(
        ref.Enter(from_(0)),
        ref.Distinct(
            ref.Concat(ref.Map(ref.Join(ref.Map(Var(), "swap"), ref.Enter(Var())), "vals"), Var())
        ),
    )
    prog = ref.Iterate(from_(0), ref.Distinct(ref.Concat(tc_of_enter, Var())))
    chain = ones([(0, 1), (1, 2), (2, 3)])
    assert ref.evaluate(prog, [chain]) == ref.evaluate(transitive_closure(from_(0)), [chain])
    ref.typecheck(prog)
    # a body that is itself an iterate over the loop variable: x -> tc(x)
    assert ref.evaluate(ref.Iterate(from_(0), inner), [chain]) == ref.evaluate(
        transitive_closure(from_(0)), [chain]
    )
    with pytest.raises(ref.ProgramError, match="Enter"):  # Input(0) directly inside a body
        ref.evaluate(ref.Iterate(from_(0), transitive_closure(from_(0))), [chain])


def test_iterate_non_convergence_raises() -> None:
    cycling = ref.Iterate(from_(0), ref.Map(Var(), "inc_val"))  # (0,v) -> (0,v+1) -> ... forever
    with pytest.raises(ref.NonConvergenceError, match="did not converge"):
        ref.evaluate(cycling, [ones([(0, 0)])])
    growing = ref.Iterate(from_(0), ref.Concat(Var(), Var()))  # weights double forever
    with pytest.raises(ref.NonConvergenceError):
        ref.evaluate(growing, [ones([(0, 0)])])
    # ... but an empty source is already a fixed point of both
    assert ref.evaluate(growing, [{}]) == {}
    # the cap is configurable: 6 steps suffice for the 6-cycle to be detected as non-converging
    with pytest.raises(ref.NonConvergenceError):
        ref.evaluate(cycling, [ones([(0, 0)])], max_iterations=6)


def test_placement_errors() -> None:
    with pytest.raises(ref.ProgramError, match="Enter"):
        ref.evaluate(ref.Iterate(from_(0), ref.Concat(Var(), from_(0))), [ones([(0, 0)])])
    with pytest.raises(ref.ProgramError, match="outside"):
        ref.evaluate(ref.Map(Var(), "swap"), [{}])
    with pytest.raises(ref.ProgramError, match="outside"):
        ref.evaluate(ref.Enter(from_(0)), [{}])
    with pytest.raises(ref.ProgramError, match="unknown map"):
        ref.evaluate(ref.Map(from_(0), "no_such_fn"), [ones([(0, 0)])])


def test_typecheck() -> None:
    ref.typecheck(ref.Program(ref.Map(ref.Join(from_(0), from_(1)), "join_sum"), 2))
    assert ref.infer_type(ref.Count(ref.Map(from_(0), "key"))) == ref.PAIR
    assert ref.infer_type(ref.Count(from_(0))) == ref.PCOUNT
    for bad in [
        ref.Join(ref.Map(from_(0), "key"), from_(0)),  # join needs pairs
        ref.Semijoin(from_(0), from_(0)),  # keys must be ints
        ref.Concat(from_(0), ref.Map(from_(0), "key")),  # concat of different types
        ref.Map(ref.Join(from_(0), from_(0)), "swap"),  # swap takes pairs
        ref.Count(ref.Join(from_(0), from_(0))),  # count of joined records
        ref.Iterate(from_(0), ref.Map(Var(), "key")),  # body must keep the type
    ]:
        with pytest.raises(ref.ProgramError):
            ref.typecheck(bad)
    with pytest.raises(ref.ProgramError, match="n_inputs"):
        ref.typecheck(ref.Program(from_(1), 1))


def test_reprs_are_readable() -> None:
    prog = ref.Join(ref.Map(from_(0), "swap"), from_(1))
    assert repr(prog) == "Join(Map(Input(0), 'swap'), Input(1))"
    assert (
        repr(ref.Program(prog, 2)) == "Program(Join(Map(Input(0), 'swap'), Input(1)), n_inputs=2)"
    )
    assert (
        repr(ref.Iterate(from_(0), ref.Distinct(ref.Concat(Var(), ref.Enter(from_(1))))))
        == "Iterate(Input(0), Distinct(Concat(Variable(), Enter(Input(1)))))"
    )
    assert prog.size() == 4 and eval(repr(prog), vars(ref)) == prog


# ---------------------------------------------------------------------------------------------
# Times and scripts


def test_accumulate_uses_the_partial_order() -> None:
    ups = [
        ("a", Product(1, 2), 1),
        ("b", Product(2, 1), 1),
        ("c", Product(0, 5), 1),
        ("a", Product(2, 2), -1),
    ]
    assert ref.accumulate(ups, Product(2, 2)) == {"b": 1}
    assert ref.accumulate(ups, Product(1, 3)) == {"a": 1}
    # lexicographically (0, 5) <= (1, 3), but not in the product order
    assert "c" not in ref.accumulate(ups, Product(1, 3))
    assert ref.accumulate(ups, Product(1, 9)) == {"a": 1, "c": 1}
    assert ref.accumulate([(1, 0, 2), (1, 3, -2), (2, 5, 1)], 4) == {}
    assert ref.accumulate([(1, 0, 2), (1, 3, -2), (2, 5, 1)], 2, le=lambda a, b: a <= b) == {1: 2}


def test_script_updates_and_evaluate_at() -> None:
    script = [
        ("update", 0, (0, 1), 1),
        ("update_at", 0, (0, 2), 2, 1),
        ("advance", 0, 1),
        ("step", 1),
        ("update", 0, (0, 1), -1),
        ("update", 1, (0, 7), 1),
        ("advance", 1, 5),
    ]
    ups = ref.script_updates(script, 2)
    assert ups == {0: [((0, 1), 0, 1), ((0, 2), 2, 1), ((0, 1), 1, -1)], 1: [((0, 7), 0, 1)]}
    assert ref.final_times(script, 2) == [1, 5]
    prog = ref.Reduce(ref.Concat(from_(0), from_(1)), "min")
    assert ref.evaluate_at(prog, ups, 0) == ones([(0, 1)])
    assert ref.evaluate_at(prog, ups, 1) == ones([(0, 7)])
    assert ref.evaluate_at(prog, ups, 2) == ones([(0, 2)])
    with pytest.raises(ValueError):
        ref.script_updates([("advance", 0, 3), ("advance", 0, 2)], 1)


# ---------------------------------------------------------------------------------------------
# build(), against a static mock of the Collection API


class MockScope:
    """A scope; ``parent`` is the enclosing scope (None at the root)."""

    def __init__(self, parent: Optional["MockScope"] = None) -> None:
        self.parent = parent


class MockCollection:
    """A static (time-free) implementation of the engine's Collection API, written independently
    of the evaluator, that checks every binary operator combines collections of ONE scope."""

    def __init__(self, data: Dict[Any, int], scope: MockScope) -> None:
        self.data = {r: w for r, w in data.items() if w}
        self.scope = scope

    def _new(self, pairs: Iterable[Tuple[Any, int]]) -> "MockCollection":
        acc: Dict[Any, int] = {}
        for r, w in pairs:
            acc[r] = acc.get(r, 0) + w
        return MockCollection(acc, self.scope)

    def _same_scope(self, other: "MockCollection") -> None:
        assert other.scope is self.scope, "combining collections from different scopes"

    def map(self, f: Callable[[Any], Any]) -> "MockCollection":
        return self._new((f(r), w) for r, w in self.data.items())

    def filter(self, p: Callable[[Any], bool]) -> "MockCollection":
        return self._new((r, w) for r, w in self.data.items() if p(r))

    def flat_map(self, f: Callable[[Any], Iterable[Any]]) -> "MockCollection":
        return self._new((o, w) for r, w in self.data.items() for o in f(r))

    def negate(self) -> "MockCollection":
        return self._new((r, -w) for r, w in self.data.items())

    def concat(self, other: "MockCollection") -> "MockCollection":
        self._same_scope(other)
        return self._new(list(self.data.items()) + list(other.data.items()))

    def consolidate(self) -> "MockCollection":
        return self._new(self.data.items())

    def join(self, other: "MockCollection") -> "MockCollection":
        self._same_scope(other)
        return self._new(
            ((k1, (v1, v2)), w1 * w2)
            for (k1, v1), w1 in self.data.items()
            for (k2, v2), w2 in other.data.items()
            if k1 == k2
        )

    def semijoin(self, keys: "MockCollection") -> "MockCollection":
        self._same_scope(keys)
        return self._new((r, w * keys.data.get(r[0], 0)) for r, w in self.data.items())

    def antijoin(self, keys: "MockCollection") -> "MockCollection":
        return self.concat(self.semijoin(keys).negate())

    def reduce(
        self, logic: Callable[[Any, List[Tuple[Any, int]]], List[Tuple[Any, int]]]
    ) -> "MockCollection":
        out: List[Tuple[Any, int]] = []
        for k in {k for k, _ in self.data}:
            vs = sorted((v, w) for (k2, v), w in self.data.items() if k2 == k)
            if vs:
                out += [((k, o), w) for o, w in logic(k, vs)]
        return self._new(out)

    def count(self) -> "MockCollection":
        return self._new(((r, w), 1) for r, w in self.data.items())

    def distinct(self) -> "MockCollection":
        return self.threshold(lambda r, c: 1 if c > 0 else 0)

    def threshold(self, f: Callable[[Any, int], int]) -> "MockCollection":
        return self._new((r, f(r, w)) for r, w in self.data.items())

    def enter(self, scope: MockScope) -> "MockCollection":
        assert scope.parent is self.scope, "enter() into a scope that is not a child of ours"
        return MockCollection(self.data, scope)

    def iterate(self, body: Callable[["MockCollection"], "MockCollection"]) -> "MockCollection":
        x = self.data
        for _ in range(100):
            inner = MockCollection(x, MockScope(self.scope))
            result = body(inner)
            assert result.scope is inner.scope, (
                "iterate body returned a collection of another scope"
            )
            if result.data == x:
                return MockCollection(x, self.scope)
            x = result.data
        raise ref.NonConvergenceError("mock iterate did not converge")


def build_and_run(program: ref.Program, inputs: List[Dict[Any, int]]) -> Dict[Any, int]:
    scope = MockScope()
    out = ref.build_direct(program, scope, [MockCollection(z, scope) for z in inputs])
    assert out.scope is scope
    return out.data


def test_build_hand_written_programs() -> None:
    chain = ones([(0, 1), (1, 2), (2, 3)])
    tc = ref.Program(transitive_closure(from_(0)), 1)
    assert build_and_run(tc, [chain]) == ref.evaluate(tc, [chain])
    skip = ref.Program(ref.Join(ref.Map(from_(0), "swap"), from_(0)), 1)
    assert build_and_run(skip, [MANAGES]) == ref.evaluate(skip, [MANAGES])


def test_build_calls_exactly_the_collection_api() -> None:
    calls: List[str] = []

    class Recorder:
        scope = "root"

        def __getattr__(self, name: str) -> Callable[..., "Recorder"]:
            def method(*args: Any) -> "Recorder":
                calls.append(name)
                if name == "iterate":
                    args[0](Recorder())
                return Recorder()

            return method

    prog = ref.Antijoin(
        ref.Iterate(
            ref.Distinct(from_(0)),
            ref.Distinct(ref.Concat(ref.Map(ref.Join(Var(), ref.Enter(from_(1))), "hop"), Var())),
        ),
        ref.Map(
            ref.Reduce(ref.Threshold(ref.Count(ref.FlatMap(from_(0), "both")), "abs"), "min"), "key"
        ),
    )
    ref.build_direct(prog, "root", [Recorder(), Recorder()])
    assert calls == [
        "distinct",
        "iterate",
        "enter",
        "join",
        "map",
        "concat",
        "distinct",
        "flat_map",
        "count",
        "threshold",
        "reduce",
        "map",
        "antijoin",
    ]


@FAST
@given(S.programs(max_depth=3), st.lists(S.zsets(), min_size=3, max_size=3))
def test_build_agrees_with_evaluate(program: ref.Program, inputs: List[Dict[Any, int]]) -> None:
    assert build_and_run(program, inputs) == ref.evaluate(program, inputs)


# ---------------------------------------------------------------------------------------------
# Strategy smoke tests


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S.programs(), st.lists(S.zsets(), min_size=3, max_size=3))
def test_generated_programs_typecheck_and_evaluate(
    program: ref.Program, inputs: List[Dict[Any, int]]
) -> None:
    ref.typecheck(program)
    out = ref.evaluate(program, inputs[: program.n_inputs])
    assert all(type(w) is int and w != 0 for w in out.values())


@FAST
@given(S.iterative_programs(), st.lists(S.zsets(max_size=20), min_size=3, max_size=3))
def test_generated_iterates_converge(program: ref.Program, inputs: List[Dict[Any, int]]) -> None:
    ref.typecheck(program)
    assert any(isinstance(n, ref.Iterate) for n in program.output.walk())
    # half the cap: generated iterates converge with room to spare
    ref.evaluate(program, inputs, max_iterations=50)


@FAST
@given(S.linear_programs(), S.zsets(), S.zsets())
def test_linear_programs_are_linear(
    program: ref.Program, a: Dict[Any, int], b: Dict[Any, int]
) -> None:
    kinds = {type(n).__name__ for n in program.output.walk()}
    assert kinds <= {"Input", "Map", "Filter", "FlatMap", "Negate", "Concat", "Consolidate"}
    both = ref.consolidate(list(a.items()) + list(b.items()))
    fa, fb = ref.evaluate(program, [a] * 3), ref.evaluate(program, [b] * 3)
    assert ref.evaluate(program, [both] * 3) == ref.consolidate(list(fa.items()) + list(fb.items()))


@FAST
@given(S.zsets(), S.zsets(S.int_records()))
def test_identities(a: Dict[Any, int], keys: Dict[int, int]) -> None:
    inputs = {0: a, 1: {(k, 0): w for k, w in keys.items()}}
    ks = ref.Map(from_(1), "key")
    assert ref.evaluate(ref.Antijoin(from_(0), ks), inputs) == ref.evaluate(
        ref.Concat(from_(0), ref.Negate(ref.Semijoin(from_(0), ks))), inputs
    )
    assert ref.evaluate(ref.Distinct(from_(0)), inputs) == ref.evaluate(
        ref.Threshold(from_(0), "positive"), inputs
    )
    assert ref.evaluate(ref.Distinct(ref.Distinct(from_(0))), inputs) == ref.evaluate(
        ref.Distinct(from_(0)), inputs
    )
    # reduce 'count' runs for every key with values, even if their weights sum to zero
    totals: Dict[int, int] = {}
    for (k, _v), w in a.items():
        totals[k] = totals.get(k, 0) + w
    assert ref.evaluate(ref.Reduce(from_(0), "count"), inputs) == ones(totals.items())
    # ... while count() of the keys drops the keys whose total is zero
    assert ref.evaluate(ref.Count(ref.Map(from_(0), "key")), inputs) == ones(
        (k, t) for k, t in totals.items() if t
    )


@FAST
@given(st.integers(1, 3).flatmap(lambda n: st.tuples(st.just(n), S.update_streams(n))))
def test_update_streams_are_valid_scripts(n_and_script: Tuple[int, List[tuple]]) -> None:
    n, script = n_and_script
    now = [0] * n
    inserted: List[Dict[Any, int]] = [{} for _ in range(n)]
    for action in script:
        if action[0] == "advance":
            assert action[2] > now[action[1]]
            now[action[1]] = action[2]
        elif action[0] == "step":
            assert action[1] >= 1
        elif action[0] == "close":
            assert all(
                later[0] == "step" or later[1] != action[1]
                for later in script[script.index(action) + 1 :]
            )
        else:
            i, rec, diff = action[1], action[2], action[-1]
            assert 0 <= i < n and diff != 0 and 0 <= rec[0] <= 5 and 0 <= rec[1] <= 5
            if action[0] == "update_at":
                assert action[3] >= 0
            inserted[i][rec] = inserted[i].get(rec, 0) + diff
    ups = ref.script_updates(script, n)
    assert ref.final_times(script, n) == now
    assert sum(len(u) for u in ups.values()) == sum(a[0] in ("update", "update_at") for a in script)


def test_update_streams_retract_earlier_insertions_often() -> None:
    retractions = {"of_inserted": 0, "other": 0}

    @settings(max_examples=200, deadline=None)
    @given(S.update_streams(2))
    def collect(script: List[tuple]) -> None:
        seen: List[set] = [set(), set()]
        for a in script:
            if a[0] in ("update", "update_at"):
                i, rec, diff = a[1], a[2], a[-1]
                if diff < 0:
                    retractions["of_inserted" if rec in seen[i] else "other"] += 1
                else:
                    seen[i].add(rec)

    collect()
    assert retractions["of_inserted"] > retractions["other"] > 0


@FAST
@given(S.antichains())
def test_antichains_are_antichains(chain: List[Any]) -> None:
    assert len(set(chain)) == len(chain)
    assert len({type(t) for t in chain}) <= 1
    for a in chain:
        for b in chain:
            assert a == b or not less_equal(a, b)


@FAST
@given(S.product_times(2), S.batches())
def test_times_and_batches(t: Product, batch: List[Tuple[Any, Any, int]]) -> None:
    assert isinstance(t, Product) and isinstance(t.outer, Product) and isinstance(t.inner, int)
    assert all(d != 0 for _, _, d in batch)
    assert (
        len({(type(tm), type(tm[0]) if isinstance(tm, Product) else None) for _, tm, _ in batch})
        <= 1
    )


def test_programs_cover_every_node_kind() -> None:
    kinds: set = set()

    @settings(max_examples=300, deadline=None)
    @given(S.programs())
    def collect(program: ref.Program) -> None:
        kinds.update(type(n).__name__ for n in program.output.walk())

    collect()
    assert kinds == set(ref._EVAL)


# ---------------------------------------------------------------------------------------------
# Through the plan: to_plan against the direct tree walk


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(S.programs(), S.iterative_programs()),
    st.lists(S.zsets(max_size=20), min_size=3, max_size=3),
)
def test_the_plan_evaluates_as_the_direct_tree_walk(
    program: ref.Program, inputs: List[Dict[Any, int]]
) -> None:
    try:
        direct = ref.evaluate_direct(program, inputs)
    except ref.NonConvergenceError:
        with pytest.raises(ref.NonConvergenceError):
            ref.evaluate(program, inputs)
        return
    assert ref.evaluate(program, inputs) == direct


def test_to_plan_translates_iterates_to_fixpoints_by_depth() -> None:
    import timelypy.plan as P

    prog = ref.Iterate(
        from_(0), ref.Distinct(ref.Concat(Var(), ref.Map(ref.Enter(from_(1)), "swap")))
    )
    plan = ref.to_plan(prog)
    assert isinstance(plan, P.Fixpoint) and plan.names == ("x1",) and plan.output == "x1"
    assert plan.initial == (P.Scan("0"),)
    assert P.Recur("x1") in list(plan.walk()) and P.Scan("1") in list(plan.walk())
    joined = ref.to_plan(ref.Join(from_(0), from_(1)))
    assert isinstance(joined, P.Join) and (joined.left_key, joined.right_key) == ((0,), (0,))
    anti = ref.to_plan(ref.Antijoin(from_(0), ref.Map(from_(1), "key")))
    assert isinstance(anti, P.Union) and isinstance(anti.inputs[1], P.Negate)
