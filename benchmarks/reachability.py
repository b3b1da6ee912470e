"""Graph reachability under single-edge changes (closed loop), against BFS from scratch.

A seeded random directed graph with ``--nodes`` N nodes and ``--edges`` (default 2N) edges
``(src, dst)``; ``--roots`` nodes are the roots. The dataflow is differential's classic

    reach = roots.iterate(lambda r:
        r.map(lambda n: (n, ())).join(edges_in_loop).map(lambda kv: kv[1][1])
         .concat(roots.enter(r.scope)).distinct())

where ``edges_in_loop`` is ``edges.enter(r.scope)`` (``--edges-mode collection``: the edges
are re-arranged inside the loop, as the issue wrote it) or ``edges.arrange_by_key().enter(...)``
(``--edges-mode arrangement``: the outer arrangement is shared into the loop, the usual
differential idiom). Then ``--changes`` rounds, each: remove a random edge, add a random edge,
advance, flush, step until the probe passes -- microseconds per change. ``--open-loop`` instead
buffers every change (remove, add, advance; no step) and then runs to completion, so that all
the changes' times are in the loop at once (the comparison harness's W2): microseconds per
change of the whole update.

The naive baseline recomputes reachability from scratch after each change: build the adjacency
lists from the edge list and BFS from the roots (``rebuild_bfs``); the JSON also gives BFS alone
over an adjacency kept up to date (``bfs_only``), a stronger baseline. Only ``--naive-samples``
rounds are timed (the JSON says so).

    python benchmarks/reachability.py --nodes 100000 --changes 1000
"""

from __future__ import annotations

import argparse
import gc
import random
from collections import deque
from typing import Any, Dict, List, Set, Tuple

from common import (  # noqa: E402
    add_gc_argument,
    add_profile_argument,
    emit,
    environment,
    error_info,
    gc_mode,
    latency_stats_us,
    note,
    now,
    profiled,
    sample_indices,
    slowest,
    speedup,
)

import timelypy


def make_graph(nodes: int, edges: int, roots: int, changes: int, seed: int):
    rng = random.Random(seed)
    edge_list = [(rng.randrange(nodes), rng.randrange(nodes)) for _ in range(edges)]
    root_list = rng.sample(range(nodes), min(roots, nodes))
    # Each change: (index of the edge to replace, the new edge).
    plan = [
        (rng.randrange(edges), (rng.randrange(nodes), rng.randrange(nodes))) for _ in range(changes)
    ]
    return edge_list, root_list, plan


# ----------------------------------------------------------------------------- dataflow


def _reach_dataflow(worker: Any, edges_mode: str, check: bool):
    def dataflow(scope):
        edge_in, edges = scope.new_collection("Edges")
        root_in, roots = scope.new_collection("Roots")
        edges_arr = edges.arrange_by_key() if edges_mode == "arrangement" else None

        def body(r):
            if edges_arr is not None:
                e = edges_arr.enter(r.scope)
            else:
                e = edges.enter(r.scope)
            return (
                r.map(lambda n: (n, ()))
                .join(e)
                .map(lambda kv: kv[1][1])
                .concat(roots.enter(r.scope))
                .distinct()
            )

        reach = roots.iterate(body)
        probe = reach.probe()
        cap = reach.capture() if check else None
        return edge_in, root_in, probe, cap

    return worker.dataflow(dataflow)


def dataflow_run(edge_list, root_list, plan, edges_mode: str, check: bool, open_loop: bool = False):
    def build(worker):
        gc.collect()
        index, peers = worker.index, worker.peers
        edge_in, root_in, probe, cap = _reach_dataflow(worker, edges_mode, check)
        edges = list(edge_list)
        t0 = now()
        for i in range(index, len(edges), peers):
            edge_in.insert(edges[i])
        for i in range(index, len(root_list), peers):
            root_in.insert(root_list[i])
        edge_in.advance_to(1)
        root_in.advance_to(1)
        edge_in.flush()
        root_in.flush()
        worker.step_until(probe, 1)
        load_s = now() - t0
        lat: List[float] = []
        t = 1
        t1 = now()
        for j, (i, new) in enumerate(plan):
            start = now()
            if j % peers == index:
                edge_in.remove(edges[i])
                edge_in.insert(new)
            edges[i] = new
            t += 1
            edge_in.advance_to(t)
            root_in.advance_to(t)
            if open_loop:
                continue
            edge_in.flush()
            root_in.flush()
            worker.step_until(probe, t)
            lat.append(now() - start)
        edge_in.flush()
        root_in.flush()
        worker.step_until(probe, t)
        out: Dict[str, Any] = {"load_s": load_s, "latencies": lat, "update_s": now() - t1}
        if check:
            out["initial"] = cap.at(0)
            out["final"] = cap.at(t)
        return out

    return build


# ----------------------------------------------------------------------------- naive


def bfs(adj: Dict[int, List[int]], roots: List[int]) -> Set[int]:
    seen = set(roots)
    queue = deque(roots)
    pop, push = queue.popleft, queue.append
    while queue:
        n = pop()
        for m in adj.get(n, ()):
            if m not in seen:
                seen.add(m)
                push(m)
    return seen


def adjacency(edges: List[Tuple[int, int]]) -> Dict[int, List[int]]:
    adj: Dict[int, List[int]] = {}
    for s, d in edges:
        a = adj.get(s)
        if a is None:
            adj[s] = [d]
        else:
            a.append(d)
    return adj


def naive_run(edge_list, root_list, plan, samples: int) -> Dict[str, Any]:
    edges = list(edge_list)
    t0 = now()
    initial = bfs(adjacency(edges), root_list)
    load_s = now() - t0
    adj = adjacency(edges)  # maintained incrementally for the bfs-only baseline
    chosen = set(sample_indices(len(plan), samples))
    rebuild: List[float] = []
    only: List[float] = []
    for j, (i, new) in enumerate(plan):
        old = edges[i]
        edges[i] = new
        adj[old[0]].remove(old[1])
        adj.setdefault(new[0], []).append(new[1])
        if j in chosen:
            t0 = now()
            bfs(adjacency(edges), root_list)
            rebuild.append(now() - t0)
            t0 = now()
            bfs(adj, root_list)
            only.append(now() - t0)
    final = bfs(adjacency(edges), root_list)
    return {
        "load_s": round(load_s, 4),
        "reachable_initial": len(initial),
        "reachable_final": len(final),
        "rounds_timed": len(rebuild),
        "sampled": len(rebuild) < len(plan),
        "rebuild_bfs_latency_us": latency_stats_us(rebuild),
        "bfs_only_latency_us": latency_stats_us(only),
        "_initial": initial,
        "_final": final,
    }


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--edges", type=int, default=None, help="default: 2 * nodes")
    ap.add_argument("--roots", type=int, default=5)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--edges-mode",
        choices=["collection", "arrangement", "both"],
        default="both",
        help="collection: edges.enter(loop) (arranged inside the loop); arrangement: "
        "the outer arrangement entered into the loop",
    )
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--backend", default="inline")
    ap.add_argument("--naive-samples", type=int, default=50)
    ap.add_argument(
        "--open-loop",
        action="store_true",
        help="buffer every change, then run to completion (all times in the loop "
        "at once): microseconds per change of the whole update",
    )
    ap.add_argument(
        "--check",
        action="store_true",
        help="capture the reachable set and compare with BFS (initial and final)",
    )
    add_gc_argument(ap)
    add_profile_argument(ap)
    args = ap.parse_args()
    n_edges = args.edges if args.edges is not None else 2 * args.nodes

    edge_list, root_list, plan = make_graph(
        args.nodes, n_edges, args.roots, args.changes, args.seed
    )
    result: Dict[str, Any] = {
        "benchmark": "reachability",
        "parameters": {
            "gc": args.gc,
            "nodes": args.nodes,
            "edges": n_edges,
            "roots": len(root_list),
            "changes": args.changes,
            "seed": args.seed,
            "edges_mode": args.edges_mode,
            "open_loop": args.open_loop,
            "workers": args.workers,
            "backend": args.backend,
            "naive_samples": args.naive_samples,
        },
        **environment(),
        "targets": {"per_change_us_at_1e5_nodes": 400.0},
    }
    note("naive ...")
    naive = naive_run(edge_list, root_list, plan, args.naive_samples)
    initial, final = naive.pop("_initial"), naive.pop("_final")
    result["naive"] = naive

    modes = ["collection", "arrangement"] if args.edges_mode == "both" else [args.edges_mode]
    for mode in modes:
        note(f"dataflow ({mode}) ...")
        try:
            with gc_mode(args.gc):
                outs = timelypy.execute(
                    dataflow_run(edge_list, root_list, plan, mode, args.check, args.open_loop),
                    workers=args.workers,
                    backend=args.backend,
                )
            r: Dict[str, Any] = {"load_s": round(max(o["load_s"] for o in outs), 4)}
            if args.open_loop:
                update_s = max(o["update_s"] for o in outs)
                r["update_s"] = round(update_s, 4)
                r["open_loop_per_change_us"] = round(update_s / max(1, len(plan)) * 1e6, 2)
            else:
                lat = [max(v) for v in zip(*(o["latencies"] for o in outs))]
                stats = latency_stats_us(lat)
                r.update(
                    {
                        "per_change_latency_us": stats,
                        "slowest_changes_index_us": slowest(lat),
                        "speedup_vs_rebuild_bfs_median": speedup(
                            naive["rebuild_bfs_latency_us"].get("median_us"), stats.get("median_us")
                        ),
                        "speedup_vs_bfs_only_median": speedup(
                            naive["bfs_only_latency_us"].get("median_us"), stats.get("median_us")
                        ),
                    }
                )
            if args.check:

                def merged(key, outs=outs):
                    acc: Dict[Any, int] = {}
                    for o in outs:
                        for d, c in o[key].items():
                            acc[d] = acc.get(d, 0) + c
                    return {d: c for d, c in acc.items() if c}

                r["check_initial_matches_bfs"] = merged("initial") == {n: 1 for n in initial}
                r["check_final_matches_bfs"] = merged("final") == {n: 1 for n in final}
            result[f"dataflow_edges_{mode}"] = r
        except Exception as exc:
            result[f"dataflow_edges_{mode}"] = error_info(exc)
    emit(result)


if __name__ == "__main__":
    with profiled():
        main()
