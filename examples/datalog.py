"""Incremental Datalog: nodes not reachable from a source, kept exact while edges change.

A Soufflé-style program (a recursive ``reach`` and a negation of it in a later stratum) runs as
a timelypy session; edges are inserted and removed one step at a time and, at every step, the
incrementally maintained ``unreachable`` relation is checked against a from-scratch search.

Run it::

    python examples/datalog.py                 # 40 nodes, 10 steps, one worker
    python examples/datalog.py 200 20 2        # 200 nodes, 20 steps, two workers
"""

from __future__ import annotations

import random
import sys
from typing import List, Set, Tuple

from timelypy import datalog

PROGRAM = """
.decl edge(x: number, y: number)
.input edge
.decl source(x: number)
source(0).
.decl node(x: number)
node(x) :- edge(x, _).
node(y) :- edge(_, y).
.decl reach(x: number)
reach(x) :- source(x).
reach(y) :- reach(x), edge(x, y).
.decl unreachable(x: number)
unreachable(x) :- node(x), !reach(x).
.output unreachable
"""


def from_scratch(edges: Set[Tuple[int, int]]) -> Set[Tuple[int]]:
    """The nodes of ``edges`` no path from node 0 reaches, by a plain search."""
    seen, todo = {0}, [0]
    while todo:
        here = todo.pop()
        for x, y in edges:
            if x == here and y not in seen:
                seen.add(y)
                todo.append(y)
    nodes = {n for edge in edges for n in edge}
    return {(n,) for n in nodes if n not in seen}


def main(nodes: int = 40, steps: int = 10, workers: int = 1) -> List[int]:
    """Run the program for ``steps`` changes; returns the number unreachable after each."""
    rng = random.Random(1)
    edges = {(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(nodes)}
    program = datalog.Program.from_text(PROGRAM)
    counts = []
    with program.session(workers=workers) as session:
        session.insert_many("edge", edges)
        for step in range(steps):
            session.advance()
            unreachable = session.contents("unreachable")
            assert unreachable == from_scratch(edges), step
            counts.append(len(unreachable))
            print(f"time {session.time}: {len(edges)} edges, {len(unreachable)} unreachable")
            gone = rng.choice(sorted(edges))
            new = (rng.randrange(nodes), rng.randrange(nodes))
            session.remove("edge", gone)
            session.insert("edge", new)
            edges = (edges - {gone}) | {new}
    return counts


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
