"""Graph connectivity by label propagation, with interactive queries (Differential Dataflow).

Every node starts with its own name as label; in each iteration nodes propose their label to
their neighbours and keep the smallest label they have seen. At the fixed point every node's
label is the smallest node of its connected component (the book's code)::

    labels = edges.map(lambda e: (e[0], e[0])).distinct()
    labels.iterate(lambda inner:
        inner.join(edges.enter(inner.scope))                 # (src, (lbl, dst))
             .map(lambda kv: (kv[1][1], kv[1][0]))           # (dst, lbl)
             .concat(labels.enter(inner.scope))
             .reduce(lambda dst, lbls: [(min(l for l, _ in lbls), 1)]))

A second input ``queries`` holds node ids; ``labels.semijoin(queries)`` is a standing query:
it reports the label of each queried node, and every later change of it, until the query is
removed. The graph (kept symmetric) and the queries change over several rounds; after each
round the labels and the query answers are checked against a from-scratch union-find.

Run it::

    python examples/connectivity.py              # 60 nodes, 40 edges, 8 rounds
    python examples/connectivity.py 500 300 20
"""

from __future__ import annotations

import math
import random
import sys
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

import timelypy as tp

Edge = Tuple[int, int]


def connected_labels(edges: Any) -> Any:
    """``(node, label)``: the smallest node reachable from ``node`` (``edges`` symmetric).

    Prioritised label propagation (differential dataflow's ``propagate_at``): the loop starts
    empty and a node's own label enters it at an iteration that grows with the label
    (:func:`_priority`), so small labels spread first and overtake most large ones before
    those are even proposed. The fixed point is the book's; far fewer labels change on the
    way, at the load and after every change of the graph."""
    labels = edges.map(lambda e: (e[0], e[0])).distinct()
    by_src = edges.arrange_by_key()  # arranged once, outside the loop, and entered into it

    def body(inner):
        edges_in = by_src.enter(inner.scope)
        start = inner.scope.order.minimum[0]
        labels_in = labels.enter(inner.scope).join_function(
            lambda nl: [(nl, tp.Product(start, _priority(nl[1])), 1)]
        )
        return (
            inner.join(edges_in)
            .map(lambda kv: (kv[1][1], kv[1][0]))
            .concat(labels_in)
            .reduce(lambda dst, lbls: [(lbls[0][0], 1)], name="MinLabel")
        )

    return labels.filter(lambda nl: False).iterate(body)


PRIORITY_STEPS = 16
"""Iterations between a label's entry and the entry of a label twice as large."""


def _priority(label: Any) -> int:
    """The iteration at which a label enters the loop: ``PRIORITY_STEPS * log2(label + 1)``
    for an int label, else at once.

    The steps are fine enough that a component's smallest label has spread through it before
    the labels that could race it enter: with steps of one doubling (the bit length), every
    label below 2^30 entered while the giant component's smallest label was still spreading
    (30 iterations across, for 10^5 nodes), and nodes changed label several times on the way.
    After a micro-batch of 10^3 edge changes on 10^5 nodes (``benchmarks/components.py``) the
    loop's ``reduce`` makes about 18 k output changes with these steps, 82 k with bit
    lengths; the cost is more (cheap) iterations: about 300 instead of 50."""
    if type(label) is int and label > 0:
        return int(PRIORITY_STEPS * math.log2(label + 1))
    return 0


def union_find_labels(edges: Set[Edge]) -> Dict[int, int]:
    """From scratch: ``{node: smallest node of its component}`` for every node with an edge."""
    parent: Dict[int, int] = {}

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for a, b in edges:
        parent.setdefault(a, a)
        parent.setdefault(b, b)
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            # The smaller root wins, so every root is its component's minimum.
            if ra < rb:
                parent[rb] = ra
            else:
                parent[ra] = rb
    return {x: find(x) for x in parent}


def merged(parts: Iterable[Dict[Any, int]]) -> Dict[Any, int]:
    """The sum of the workers' contents at one time (each worker holds its share)."""
    out: Dict[Any, int] = {}
    for part in parts:
        for record, count in part.items():
            out[record] = out.get(record, 0) + count
    return {record: count for record, count in out.items() if count}


def main(
    nodes: int = 60,
    edges: int = 40,
    rounds: int = 8,
    seed: int = 1,
    workers: Optional[int] = None,
    backend: Optional[str] = None,
) -> List[Dict[str, Any]]:
    """Run ``rounds`` rounds of graph and query changes; return per round the query answers
    and the inputs: ``{"time", "queries": {node: label}, "components", "graph": undirected
    edges (a, b) with a <= b, "asked": query nodes}``. Raises ``AssertionError`` if the
    labels or answers ever differ from union-find. Every worker draws the same changes and
    worker 0 makes them; each worker reads its share of the outputs (``timelypy run
    --workers`` sets the workers when None)."""

    def build(worker: tp.Worker):
        rng = random.Random(seed)
        mine = worker.index == 0

        def random_edge() -> Edge:
            a, b = rng.randrange(nodes), rng.randrange(nodes)
            return (a, b)

        def dataflow(scope):
            edge_session, edge_coll = scope.new_collection(name="edges")
            query_session, queries = scope.new_collection(name="queries")
            labels = connected_labels(edge_coll)
            answers = labels.semijoin(queries)
            probe = answers.probe()
            labels.probe_with(probe)
            return edge_session, query_session, labels.capture(), answers.capture(), probe

        edge_session, query_session, cap_labels, cap_answers, probe = worker.dataflow(dataflow)
        graph: Set[Edge] = set()  # undirected edges, stored as (min, max)
        asked: Set[int] = set()
        shares: List[Tuple[Dict[Any, int], Dict[Any, int], Set[Edge], Set[int]]] = []

        def add(e: Edge) -> None:
            a, b = min(e), max(e)
            if (a, b) in graph:
                return
            graph.add((a, b))
            if mine:
                edge_session.insert((a, b))
                if a != b:
                    edge_session.insert((b, a))

        def remove(e: Edge) -> None:
            graph.discard(e)
            a, b = e
            if mine:
                edge_session.remove((a, b))
                if a != b:
                    edge_session.remove((b, a))

        for r in range(rounds + 1):
            edge_session.advance_to(r)
            query_session.advance_to(r)
            if r == 0:
                for _ in range(edges):
                    add(random_edge())
            else:
                # A few edges come and go ...
                for _ in range(3):
                    if graph:
                        remove(rng.choice(sorted(graph)))
                for _ in range(3):
                    add(random_edge())
            # ... and queries are installed and uninstalled.
            for _ in range(2):
                q = rng.randrange(nodes)
                if q not in asked:
                    asked.add(q)
                    if mine:
                        query_session.insert(q)
            if asked and r % 2 == 1:
                q = rng.choice(sorted(asked))
                asked.discard(q)
                if mine:
                    query_session.remove(q)
            for s in (edge_session, query_session):
                s.advance_to(r + 1)
                s.flush()
            worker.step_until(probe, r + 1, timeout=60)
            shares.append((cap_labels.at(r), cap_answers.at(r), set(graph), set(asked)))
        edge_session.close()
        query_session.close()
        return shares

    parts = tp.execute(build, workers=workers, backend=backend)
    results: List[Dict[str, Any]] = []
    for r, (_, _, graph, asked) in enumerate(parts[0]):
        directed = set(graph) | {(b, a) for a, b in graph}
        expected = union_find_labels(directed)
        got = merged(part[r][0] for part in parts)
        assert got == {(n, label): 1 for n, label in expected.items()}, f"round {r}: labels differ"
        answers = merged(part[r][1] for part in parts)
        expected_answers = {(q, expected[q]): 1 for q in asked if q in expected}
        assert answers == expected_answers, f"round {r}: query answers differ"
        results.append(
            {
                "time": r,
                "queries": dict(sorted(q for q in answers)),
                "components": len(set(expected.values())),
                "graph": frozenset(graph),
                "asked": frozenset(asked),
            }
        )
    return results


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:4]]
    for res in main(*args):
        print(
            f"time {res['time']}: {res['components']} components; standing queries {res['queries']}"
        )
