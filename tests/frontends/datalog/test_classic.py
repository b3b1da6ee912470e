"""The classic Datalog programs run through their sessions under insert/remove sequences, checked
after every step against the from-scratch evaluator (and against networkx for transitive
closure and reachability): transitive closure, same generation, nodes not reachable (negation),
Andersen-style points-to, mutually recursive relations, aggregates over a recursive relation."""

from __future__ import annotations

import random
from typing import Any, Dict, List, Tuple

import networkx as nx
import pytest
from support.datalog_programs import CLASSIC
from support.datalog_runs import Change, check_run

from timelypy.datalog import Program

pytestmark = pytest.mark.timeout(600)


def churn(facts: Dict[str, List[Tuple[Any, ...]]], seed: int, rounds: int = 4) -> List[List[Change]]:
    """Insert every fact, then ``rounds`` steps that each remove a random third of the present
    facts and put back a random half of the absent ones; a last step removes everything."""
    rng = random.Random(seed)
    present = {(n, tuple(f)) for n, rows in facts.items() for f in rows}
    absent: set = set()
    steps: List[List[Change]] = [[(n, f, 1) for n, f in sorted(present, key=repr)]]
    for _ in range(rounds):
        out = [x for x in sorted(present, key=repr) if rng.random() < 1 / 3]
        back = [x for x in sorted(absent, key=repr) if rng.random() < 1 / 2]
        present.difference_update(out)
        present.update(back)
        absent.difference_update(back)
        absent.update(out)
        steps.append([(n, f, -1) for n, f in out] + [(n, f, 1) for n, f in back])
    steps.append([(n, f, -1) for n, f in sorted(present, key=repr)])
    return steps


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_small_case(name):
    check_run(CLASSIC[name].text, churn(CLASSIC[name].small, seed=1))


@pytest.mark.parametrize("name", sorted(CLASSIC))
def test_classic_generated_graph_two_workers(name):
    check_run(CLASSIC[name].text, churn(CLASSIC[name].generate(24, 7), seed=2, rounds=3), workers=2)


def test_transitive_closure_against_networkx():
    text = CLASSIC["transitive_closure"].text
    edges = CLASSIC["transitive_closure"].generate(40, 3)["edge"]
    rng = random.Random(5)
    with Program.from_text(text).session() as s:
        live = set()
        for step in range(5):
            batch = edges[step * 16 : (step + 1) * 16]
            gone = [e for e in sorted(live) if rng.random() < 0.25]
            s.insert_many("edge", batch)
            s.remove_many("edge", gone)
            live = (live | set(batch)) - set(gone)
            s.advance()
            graph = nx.DiGraph(list(live))
            want = {(u, v) for u in graph for v in nx.descendants(graph, u)}
            want |= {(u, u) for u in graph if nx.has_path(graph, u, u) and _on_cycle(graph, u)}
            assert s.contents("path") == want, step


def _on_cycle(graph: "nx.DiGraph", node: int) -> bool:
    return any(node in nx.descendants(graph, succ) or succ == node for succ in graph[node])


def test_unreachable_against_networkx():
    text = CLASSIC["unreachable"].text
    edges = CLASSIC["unreachable"].generate(50, 11)["edge"]
    with Program.from_text(text).session(workers=2) as s:
        s.insert_many("edge", edges)
        s.insert("source", 0)
        for step, source in enumerate([0, 7, 13]):
            if step:
                s.remove("source", [0, 7, 13][step - 1])
                s.insert("source", source)
            s.advance()
            graph = nx.DiGraph(edges)
            reach = nx.descendants(graph, source) | {source} if source in graph else {source}
            want = {(n,) for n in graph if n not in reach}
            assert s.contents("unreachable") == want, source


def test_facts_in_the_program_text_are_there_at_time_zero_and_removable():
    text = """
    .decl edge(x: number, y: number)
    .input edge
    edge(1, 2). edge(2, 3).
    .decl path(x: number, y: number)
    .output path
    path(x, y) :- edge(x, y).
    path(x, z) :- path(x, y), edge(y, z).
    """
    # inserting a fact the text has changes nothing; the evaluator keeps the text's facts
    check_run(text, [[], [("edge", (3, 1), 1)], [("edge", (3, 1), -1), ("edge", (1, 2), 1)]])
    with Program.from_text(text).session() as s:  # they are input facts: removable
        s.advance()
        assert s.contents("path") == {(1, 2), (1, 3), (2, 3)}
        s.remove("edge", (2, 3))
        s.advance()
        assert s.contents("path") == {(1, 2)}
        assert s.facts("edge") == {(1, 2)}
