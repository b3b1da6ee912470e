"""The loop's ``distinct`` under many outer times at once: reachability's update phase, open loop.

A seeded random directed graph with ``--nodes`` N nodes and ``--edges-per-node`` E x N distinct
edges ``(src, dst)``; ``--roots`` nodes (0, 1, ...) are the roots. The dataflow is

    reach = roots.iterate(lambda inner:
        edges.enter(inner.scope).semijoin(inner).map(lambda sd: sd[1])
             .concat(roots.enter(inner.scope)).distinct())

(``distinct`` at ``Product(int, int)`` times: the operator this benchmark is about). After the
load, ``--changes`` C changes, each removing a random edge and adding a new one at its own
outer time ``1..C``, are all sent before the first step (every outer time in the loop at once:
each round of the loop evaluates ``distinct`` at one iteration of every outer time, so its keys
hold updates of several outer times and the interesting times are joins across them). Then the
worker steps to the end: ``update_s`` (wall) and ``update_cpu_s`` (``time.process_time``), per
change in µs. ``--reps`` runs, each a fresh dataflow in this process (the JSON has every run
and the medians). ``--per-operator`` adds a sink of ``OperatorFinished`` events for the update
phase and reports each operator's wall seconds and their share of ``update_s`` (by name;
``Iterate``, the loop's subgraph, includes the operators inside it; the sink's own cost is in
the figures of those runs). ``--check`` compares the reachable set after the changes with a BFS.
Each phase waits at most ``--timeout`` seconds.

    python benchmarks/loop_distinct.py --nodes 100000 --changes 1000 --reps 3
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter, defaultdict
from typing import Any, Dict, List, Set, Tuple

from common import emit, environment, median, note, now

import timelypy as tp
from timelypy.instrument import EventLog, OperatorFinished

Edge = Tuple[int, int]


def graph(nodes: int, per_node: int, changes: int, seed: int) -> Tuple[List[Edge], List[Any]]:
    """``per_node * nodes`` distinct random edges, sorted, and ``changes`` changes ``(time,
    removed, added)`` at times ``1..changes`` (an added edge is never present)."""
    rnd = random.Random(seed)
    edges: Set[Edge] = set()
    while len(edges) < per_node * nodes:
        edges.add((rnd.randrange(nodes), rnd.randrange(nodes)))
    current = sorted(edges)
    present = set(current)
    out = []
    for t in range(1, changes + 1):
        i = rnd.randrange(len(current))
        old = current[i]
        while True:
            new = (rnd.randrange(nodes), rnd.randrange(nodes))
            if new not in present:
                break
        current[i] = new
        present.discard(old)
        present.add(new)
        out.append((t, old, new))
    return sorted(edges), out


def reachable(edges: List[Edge], changes: List[Any], roots: List[int]) -> Set[int]:
    """The nodes reachable from ``roots`` after every change (BFS)."""
    live = set(edges)
    for _, old, new in changes:
        live.discard(old)
        live.add(new)
    out = defaultdict(list)
    for s, d in live:
        out[s].append(d)
    seen = set(roots)
    stack = list(roots)
    while stack:
        for d in out[stack.pop()]:
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return seen


def run(
    edges: List[Edge], changes: List[Any], roots: List[int], per_operator: bool, timeout: float
) -> Any:
    """One fresh dataflow: load, then the open-loop update phase; its figures. Each phase
    waits at most ``timeout`` seconds."""

    def build(worker: Any) -> Dict[str, Any]:
        reach: Counter = Counter()
        log = EventLog(kinds=(OperatorFinished,), limit=10_000_000) if per_operator else None

        def define(scope: Any) -> Any:
            es, e = scope.new_collection()
            rs, r = scope.new_collection()
            out = r.iterate(
                lambda inner: (
                    e.enter(inner.scope)
                    .semijoin(inner)
                    .map(lambda sd: sd[1])
                    .concat(r.enter(inner.scope))
                    .distinct()
                )
            )
            return es, rs, out.inspect(lambda u: reach.update({u[0]: u[2]})).probe()

        es, rs, probe = worker.dataflow(define)
        t0 = now()
        for x in roots:
            rs.insert(x)
        rs.close()
        for edge in edges:
            es.insert(edge)
        es.advance_to(1)
        es.flush()
        worker.step_until(probe, 1, timeout=timeout)
        load_s = now() - t0
        if log is not None:
            worker.instruments.add(log)
        t1, c1 = now(), time.process_time()
        for t, old, new in changes:
            es.remove(old)
            es.insert(new)
            es.advance_to(t + 1)
        es.close()
        deadline = now() + timeout
        while worker.step():
            if now() > deadline:
                raise TimeoutError(f"loop_distinct: the update phase took over {timeout} s")
        update_s, update_cpu_s = now() - t1, time.process_time() - c1
        result: Dict[str, Any] = {
            "load_s": round(load_s, 4),
            "update_s": round(update_s, 4),
            "update_cpu_s": round(update_cpu_s, 4),
            "us_per_change": round(update_s / max(1, len(changes)) * 1e6, 1),
            "cpu_us_per_change": round(update_cpu_s / max(1, len(changes)) * 1e6, 1),
            "reachable": sorted(k for k, v in reach.items() if v > 0),
        }
        if log is not None:
            by_name: Dict[str, float] = defaultdict(float)
            for event in log.of(OperatorFinished):
                by_name[event.name] += event.elapsed
            result["operators"] = {
                name: {"s": round(s, 4), "share": round(s / update_s, 3)}
                for name, s in sorted(by_name.items(), key=lambda kv: -kv[1])
            }
        return result

    return tp.execute(build, workers=1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--edges-per-node", type=int, default=2)
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--roots", type=int, default=5)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-operator", action="store_true")
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--timeout", type=float, default=3600.0, help="bound on each phase (s)")
    args = parser.parse_args()
    roots = list(range(args.roots))
    edges, changes = graph(args.nodes, args.edges_per_node, args.changes, args.seed)
    runs = []
    for rep in range(args.reps):
        note(f"loop_distinct: run {rep + 1} of {args.reps}")
        r = run(edges, changes, roots, args.per_operator, args.timeout)
        found = r.pop("reachable")
        if args.check:
            r["check"] = set(found) == reachable(edges, changes, roots)
        r["reachable"] = len(found)
        runs.append(r)
    keys = ("load_s", "update_s", "update_cpu_s", "us_per_change", "cpu_us_per_change")
    emit(
        {
            "benchmark": "loop_distinct",
            **environment(),
            "params": vars(args),
            "runs": runs,
            "median": {k: median([r[k] for r in runs]) for k in keys},
        }
    )


if __name__ == "__main__":
    main()
