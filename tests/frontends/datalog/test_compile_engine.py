"""Compiled Datalog on the engine: plans lowered (``timelypy.plan.lower``) into a dataflow run by
``open_session`` on inline, fed fact changes, equal to the from-scratch evaluator at every time.

(The session API of Datalog programs, its backends and its property test are the run side's;
these few programs check the compiler's plans end to end.)
"""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle.datalog import evaluate
from support.datalog_programs import CLASSIC, fact_changes, random_programs

import timelypy as tp
from timelypy.frontends.datalog import compile_program
from timelypy.frontends.datalog.compile import UNIT

lower_module = pytest.importorskip("timelypy.plan.lower")

Change = Tuple[str, Tuple[Any, ...], int]


def run(text: str, steps: List[List[Change]], workers: int = 1) -> None:
    """Apply ``steps`` of fact changes one time each; after every step every derived relation
    equals the evaluator's answer on the facts so far."""
    compiled = compile_program(text)
    derived = list(compiled.plans)

    def dataflow(scope: Any) -> Dict[str, Any]:
        handles: Dict[str, Any] = {}
        inputs = {}
        for name in compiled.inputs:
            handles["in:" + name], inputs[name] = scope.new_collection(name)
        built = lower_module.lower(compiled.plans, inputs)
        for name in derived:
            handles[name] = built[name].capture()
            handles[name + ".probe"] = built[name].probe()
        return handles

    facts: Dict[str, Set[Tuple[Any, ...]]] = {
        n: set(compiled.facts.get(n, ())) for n in compiled.inputs
    }
    contents: Dict[str, Dict[Tuple[Any, ...], int]] = {n: {} for n in derived}
    with tp.open_session(dataflow, workers=workers, backend="inline", timeout=120) as s:
        for name, rows in compiled.facts.items():
            s.update_many("in:" + name, list(rows))
        for time, step in enumerate(steps, start=1):
            for relation, fact, diff in step:
                fact = compiled.check_fact(relation, fact)
                (s.insert if diff > 0 else s.remove)("in:" + relation, fact)
                (facts[relation].add if diff > 0 else facts[relation].discard)(fact)
            s.advance_to(time)
            want = evaluate(text, {k: v for k, v in facts.items() if k != UNIT})
            for name in derived:
                s.wait(name + ".probe")
                for data, _t, diff in s.changes(name):
                    acc = contents[name]
                    acc[data] = acc.get(data, 0) + diff
                    if not acc[data]:
                        del acc[data]
                assert all(w == 1 for w in contents[name].values()), (time, name)
                assert set(contents[name]) == want[name], (time, name)


def _steps(facts: Dict[str, List[Tuple[Any, ...]]]) -> List[List[Change]]:
    """Insert everything, then remove and re-add every other fact of the first relation."""
    everything = [(name, f, 1) for name, rows in facts.items() for f in rows]
    first = next(iter(facts))
    some = facts[first][::2]
    return [
        everything,
        [(first, f, -1) for f in some],
        [(first, f, 1) for f in some[: len(some) // 2 + 1]],
    ]


@pytest.mark.parametrize("name", ["transitive_closure", "unreachable", "aggregates", "points_to"])
def test_classic_program_on_inline(name):
    run(CLASSIC[name].text, _steps(CLASSIC[name].small))


def test_same_generation_on_two_workers():
    facts = CLASSIC["same_generation"].generate(20, 3)
    run(CLASSIC["same_generation"].text, _steps(facts), workers=2)


def test_facts_in_the_program_text_and_a_relation_with_facts_and_rules():
    text = """
    .decl e(x: number, y: number)
    e(1, 2). e(2, 3).
    .input e
    .decl p(x: number, y: number)
    p(5, 5).
    p(x, y) :- e(x, y).
    p(x, z) :- p(x, y), e(y, z).
    """
    run(text, [[("e", (3, 4), 1)], [("e", (3, 4), -1), ("p", (4, 1), 1)], [("e", (3, 1), 1)]])


def test_ungrouped_aggregates_of_nothing_and_of_something():
    text = """
    .decl e(x: number)
    .input e
    .decl total(c: number, s: number)
    total(c, s) :- c = count : { e(_) }, s = sum x : { e(x) }.
    .decl least(m: number)
    least(m) :- m = min x : { e(x) }.
    """
    run(text, [[], [("e", (3,), 1), ("e", (5,), 1)], [("e", (3,), -1)], [("e", (5,), -1)]])


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_random_programs_on_inline(data):
    program = data.draw(random_programs())
    run(program.text, data.draw(fact_changes(program)))
