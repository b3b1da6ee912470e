"""Connected components by label propagation under micro-batches of edge changes.

The view of ``examples/spark_pipeline.py`` without Spark: a seeded random undirected graph of
``--nodes`` nodes and ``--edges`` distinct edges ``(a, b)`` (``a < b``) is loaded into a session
of the pipeline's dataflow (edges made symmetric, then ``connected_labels`` of
``examples/connectivity.py``: iterate with join, map, concat and ``reduce(min)``); then
``--batches`` micro-batches of ``--changes`` edge changes each (half deletions of present
edges, half insertions of new ones, drawn as the example draws them), each followed by
advance and a wait on the probe: seconds per micro-batch.

The baseline recomputes the components from scratch with union-find after each micro-batch
(what a batch engine such as Spark does, without its overheads). ``--check`` compares the
labels with union-find after the load and after every micro-batch.

    python benchmarks/components.py --nodes 100000 --edges 100000 --changes 1000 --batches 3
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from typing import Any, Dict, List, Set, Tuple

from common import (  # noqa: E402
    add_gc_argument,
    add_profile_argument,
    emit,
    environment,
    error_info,
    gc_mode,
    median,
    note,
    now,
    profiled,
)

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
)

from connectivity import connected_labels, union_find_labels  # noqa: E402

import timelypy as tp  # noqa: E402

Edge = Tuple[int, int]


def make_graph(nodes: int, edges: int, rng: random.Random) -> Set[Edge]:
    """As ``examples/spark_pipeline.py``: ``edges`` distinct edges ``(a, b)``, ``a < b``."""
    graph: Set[Edge] = set()
    while len(graph) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            graph.add((min(a, b), max(a, b)))
    return graph


def make_changes(
    graph: Set[Edge], nodes: int, batches: int, per_batch: int, rng: random.Random
) -> List[List[Tuple[int, int, int]]]:
    """As ``examples/spark_pipeline.py``: micro-batches of ``(a, b, diff)``, half deletions."""
    current = set(graph)
    out = []
    for _ in range(batches):
        batch = []
        for victim in rng.sample(sorted(current), min(per_batch // 2, len(current))):
            current.discard(victim)
            batch.append((victim[0], victim[1], -1))
        while len(batch) < per_batch:
            a, b = rng.randrange(nodes), rng.randrange(nodes)
            edge = (min(a, b), max(a, b))
            if a != b and edge not in current:
                current.add(edge)
                batch.append((edge[0], edge[1], 1))
        out.append(batch)
    return out


def dataflow(scope: Any) -> Dict[str, Any]:
    """The pipeline's view: edges (as given) made symmetric, their connected-component labels."""
    edges_in, edges = scope.new_collection("edges")
    symmetric = edges.flat_map(lambda e: [e, (e[1], e[0])])
    labels = connected_labels(symmetric)
    return {"edges": edges_in, "labels": labels.capture(), "probe": labels.probe()}


def expected_labels(graph: Set[Edge]) -> Dict[Tuple[int, int], int]:
    directed = graph | {(b, a) for a, b in graph}
    return {(n, lbl): 1 for n, lbl in union_find_labels(directed).items()}


def run(
    graph: Set[Edge],
    changes: List[List[Tuple[int, int, int]]],
    check: bool,
    gc: str,
    freeze: bool = False,
) -> Dict[str, Any]:
    out: Dict[str, Any] = {"batch_s": [], "label_changes": []}
    current = set(graph)
    checks = []
    labels: Dict[Any, int] = {}

    def take(s: Any) -> int:
        changes = s.changes("labels")
        for data, _t, diff in changes:
            c = labels.get(data, 0) + diff
            if c:
                labels[data] = c
            else:
                del labels[data]
        return len(changes)

    with gc_mode(gc), tp.open_session(dataflow, workers=1, backend="inline", timeout=3600) as s:
        t = now()
        s.update_many("edges", sorted(graph))
        s.advance_to(1)
        s.wait("probe")
        out["load_s"] = round(now() - t, 4)
        if freeze:  # the loaded state out of the collector's way (what a long-lived job would do)
            import gc as _gc

            _gc.collect()
            _gc.freeze()
        take(s)
        if check:
            checks.append(labels == expected_labels(current))
        for i, batch in enumerate(changes):
            t = now()
            for a, b, d in batch:
                (s.insert if d > 0 else s.remove)("edges", (a, b))
            s.advance_to(i + 2)
            s.wait("probe")
            out["batch_s"].append(round(now() - t, 4))
            out["label_changes"].append(take(s))
            for a, b, d in batch:
                (current.add if d > 0 else current.discard)((a, b))
            if check:
                checks.append(labels == expected_labels(current))
    if check:
        out["check_matches_union_find"] = all(checks)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--edges", type=int, default=None, help="default: nodes")
    ap.add_argument("--changes", type=int, default=200, help="edge changes per micro-batch")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--check",
        action="store_true",
        help="compare the labels with union-find after the load and every batch",
    )
    ap.add_argument(
        "--freeze-after-load",
        action="store_true",
        help="gc.freeze() after the load: the cyclic collector no longer scans the "
        "loaded state on every full collection",
    )
    add_gc_argument(ap)
    add_profile_argument(ap)
    args = ap.parse_args()
    n_edges = args.edges if args.edges is not None else args.nodes
    rng = random.Random(args.seed)
    graph = make_graph(args.nodes, n_edges, rng)
    changes = make_changes(graph, args.nodes, args.batches, args.changes, rng)
    result: Dict[str, Any] = {
        "benchmark": "components",
        "parameters": {
            "gc": args.gc,
            "freeze_after_load": args.freeze_after_load,
            "nodes": args.nodes,
            "edges": n_edges,
            "changes": args.changes,
            "batches": args.batches,
            "seed": args.seed,
        },
        **environment(),
    }
    note("union-find from scratch per batch ...")
    current = set(graph)
    naive = []
    for batch in changes:
        for a, b, d in batch:
            (current.add if d > 0 else current.discard)((a, b))
        t = now()
        expected_labels(current)
        naive.append(now() - t)
    result["naive_union_find_batch_s"] = round(median(naive), 4)
    note("dataflow ...")
    try:
        r = run(graph, changes, args.check, args.gc, args.freeze_after_load)
        r["median_batch_s"] = round(median(r["batch_s"]), 4)
        result["dataflow"] = r
    except Exception as exc:
        result["dataflow"] = error_info(exc)
    emit(result)


if __name__ == "__main__":
    with profiled():
        main()
