"""Graph connectivity with interactive queries, on Ray workers (a Ray job).

The dataflow of ``examples/connectivity.py`` (label propagation: every node ends up labelled with
the smallest node of its component) with a standing query ``labels.semijoin(queries)``, on a
generated random graph. Every worker loads its share of the edges; then, round after round, a
few edges come and go and queries are installed and removed, and every worker waits for the
round's answers with a probe (interactive). The driver checks each round's answers against a
from-scratch union-find and prints one JSON summary.

Locally (starts a local Ray, or uses ``RAY_ADDRESS`` if set)::

    python examples/ray_job.py --nodes 2000 --workers 2

Against a running cluster, from the repository root (``--working-dir .`` ships ``timelypy``
to every node; ``--address auto`` makes the job's driver join the cluster)::

    ray job submit --address http://HEAD:8265 --working-dir . -- \\
        python examples/ray_job.py --address auto --nodes 20000 --workers 4

A local Ray started here has Ray's token authentication on (Ray's default); on a cluster with
token authentication the submitting shell (or a driver given ``--address HOST:PORT``) needs
``RAY_AUTH_MODE=token`` and the cluster's token (``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``;
see ``docs/ray.md``, "Running on a cluster with authentication").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any, Dict, List, Set, Tuple

import cloudpickle

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import connectivity  # noqa: E402

import timelypy as tp  # noqa: E402

# The workers need connectivity.py's functions: ship them by value, so that no node needs
# examples/ on its import path.
cloudpickle.register_pickle_by_value(connectivity)

Edge = Tuple[int, int]


def make_script(
    nodes: int, edges: int, rounds: int, changes: int, queries: int, seed: int
) -> List[Dict[str, List[Any]]]:
    """The rounds of changes, identical on every worker and the driver (same seed).

    Round 0 adds ``edges`` random undirected edges (stored as ``(min, max)``); every later
    round removes ``changes`` existing edges and adds ``changes`` new ones. Every round installs
    ``queries`` new query nodes and, on odd rounds, removes one.
    """
    rng = random.Random(seed)
    graph: Set[Edge] = set()
    asked: Set[int] = set()
    script = []
    for r in range(rounds + 1):
        add: List[Edge] = []
        remove: List[Edge] = []
        if r == 0:
            while len(add) < edges:
                a, b = rng.randrange(nodes), rng.randrange(nodes)
                e = (min(a, b), max(a, b))
                if e not in graph:
                    graph.add(e)
                    add.append(e)
        else:
            for e in rng.sample(sorted(graph), min(changes, len(graph))):
                graph.discard(e)
                remove.append(e)
            while len(add) < changes:
                a, b = rng.randrange(nodes), rng.randrange(nodes)
                e = (min(a, b), max(a, b))
                if e not in graph:
                    graph.add(e)
                    add.append(e)
        ask: List[int] = []
        unask: List[int] = []
        for _ in range(queries):
            q = rng.randrange(nodes)
            if q not in asked:
                asked.add(q)
                ask.append(q)
        if asked and r % 2 == 1:
            q = rng.choice(sorted(asked))
            asked.discard(q)
            unask.append(q)
        script.append({"add": add, "remove": remove, "ask": ask, "unask": unask})
    return script


def make_build(script: List[Dict[str, List[Any]]]):
    def build(worker: tp.Worker):
        def dataflow(scope):
            edge_session, edge_coll = scope.new_collection(name="edges")
            query_session, queries = scope.new_collection(name="queries")
            labels = connectivity.connected_labels(edge_coll)
            answers = labels.semijoin(queries)
            probe = answers.probe()
            labels.probe_with(probe)
            return edge_session, query_session, answers.capture(), probe

        edge_session, query_session, captured, probe = worker.dataflow(dataflow)
        index, peers = worker.index, worker.peers
        seconds: List[float] = []
        for r, changes in enumerate(script):
            start = time.perf_counter()
            edge_session.advance_to(r)
            query_session.advance_to(r)
            # Each worker makes its share of the changes (the k-th change goes to k % peers).
            for k, (a, b) in enumerate(changes["remove"]):
                if k % peers == index:
                    edge_session.remove((a, b))
                    if a != b:
                        edge_session.remove((b, a))
            for k, (a, b) in enumerate(changes["add"]):
                if k % peers == index:
                    edge_session.insert((a, b))
                    if a != b:
                        edge_session.insert((b, a))
            for k, q in enumerate(changes["ask"]):
                if k % peers == index:
                    query_session.insert(q)
            for k, q in enumerate(changes["unask"]):
                if k % peers == index:
                    query_session.remove(q)
            for s in (edge_session, query_session):
                s.advance_to(r + 1)
                s.flush()
            worker.step_until(probe, r + 1, timeout=600)
            seconds.append(time.perf_counter() - start)
        edge_session.close()
        query_session.close()
        return {"answers": captured.updates(), "seconds": seconds}

    return build


def check(script: List[Dict[str, List[Any]]], answers: List[Tuple[Any, int, int]]) -> List[int]:
    """Rounds whose accumulated answers differ from union-find on that round's graph."""
    graph: Set[Edge] = set()
    asked: Set[int] = set()
    bad = []
    for r, changes in enumerate(script):
        graph.difference_update(map(tuple, changes["remove"]))
        graph.update(map(tuple, changes["add"]))
        asked.update(changes["ask"])
        asked.difference_update(changes["unask"])  # may drop a query asked this very round
        directed = graph | {(b, a) for a, b in graph}
        labels = connectivity.union_find_labels(directed)
        expected = {(q, labels[q]) for q in asked if q in labels}
        acc: Dict[Any, int] = {}
        for data, t, diff in answers:
            if t <= r:
                acc[data] = acc.get(data, 0) + diff
        got = {d for d, n in acc.items() if n}
        if got != expected or any(n not in (0, 1) for n in acc.values()):
            bad.append(r)
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--edges", type=int, default=None, help="initial edges (default: nodes)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--changes", type=int, default=5, help="edges removed and added per round")
    ap.add_argument("--queries", type=int, default=3, help="queries installed per round")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="ray", choices=["ray", "processes", "inline"])
    ap.add_argument(
        "--address",
        default=None,
        help="Ray cluster address ('auto' inside `ray job submit`); default: "
        "RAY_ADDRESS, or a new local Ray",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-check", action="store_true", help="skip the union-find check")
    args = ap.parse_args()

    edges = args.nodes if args.edges is None else args.edges
    script = make_script(args.nodes, edges, args.rounds, args.changes, args.queries, args.seed)
    options: Dict[str, Any] = {}
    if args.backend == "ray" and args.address:
        options["address"] = args.address
    start = time.perf_counter()
    results = tp.execute(make_build(script), workers=args.workers, backend=args.backend, **options)
    wall = time.perf_counter() - start

    answers = [u for res in results for u in res["answers"]]
    rounds = [max(vals) for vals in zip(*(res["seconds"] for res in results))]
    final: Dict[Any, int] = {}
    for data, _t, diff in answers:
        final[data] = final.get(data, 0) + diff
    summary: Dict[str, Any] = {
        "example": "ray_job (connectivity with interactive queries)",
        "backend": args.backend,
        "workers": args.workers,
        "nodes": args.nodes,
        "initial_edges": edges,
        "rounds": args.rounds,
        "load_s": round(rounds[0], 4),
        "round_ms_median": round(sorted(rounds[1:])[len(rounds[1:]) // 2] * 1e3, 2)
        if len(rounds) > 1
        else None,
        "round_ms_max": round(max(rounds[1:]) * 1e3, 2) if len(rounds) > 1 else None,
        "final_answers": dict(sorted(d for d, n in final.items() if n)),
        "execute_wall_s": round(wall, 3),
    }
    if args.backend == "ray":
        import ray

        summary["ray_nodes"] = sum(1 for n in ray.nodes() if n.get("Alive"))
    if not args.no_check:
        bad = check(script, answers)
        summary["check"] = "ok" if not bad else f"answers differ from union-find in rounds {bad}"
    print(json.dumps(summary))
    if not args.no_check and bad:
        sys.exit(1)


if __name__ == "__main__":
    main()
