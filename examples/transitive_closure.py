"""Transitive management: every (manager, person) pair connected by any number of hops.

The Differential Dataflow book's ``iterate`` example: starting from ``manages``, repeatedly
extend the pairs found so far by one hop and keep the shorter ones; ``distinct`` makes the
loop converge::

    manages.iterate(lambda transitive:
        transitive.map(lambda mp: (mp[1], mp[0]))        # (m1, mk)
                  .join(transitive)                      # (m1, (mk, p))
                  .map(lambda kv: (kv[1][0], kv[1][1]))  # (mk, p)
                  .concat(transitive)
                  .distinct())

and its variant that extends by one step of ``manages`` (brought into the loop with ``enter``)
rather than of ``transitive``. The org chart starts as a binary tree; every round one
management edge is removed and another added (which can even create cycles), and the closure
maintained incrementally is checked against one computed from scratch at every round.

Run it::

    python examples/transitive_closure.py            # 30 people, 10 rounds
    python examples/transitive_closure.py 200 50
"""

from __future__ import annotations

import random
import sys
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

import timelypy as tp

Edge = Tuple[int, int]


def closure_by_transitive(manages: Any) -> Any:
    """The book's first version: extend ``transitive`` by a step of ``transitive``."""
    return manages.iterate(
        lambda transitive: (
            transitive.map(lambda mp: (mp[1], mp[0]))
            .join(transitive)
            .map(lambda kv: (kv[1][0], kv[1][1]))
            .concat(transitive)
            .distinct()
        )
    )


def closure_by_manages(manages: Any) -> Any:
    """The book's second version: extend ``transitive`` by one step of ``manages``."""

    def body(transitive):
        inner = manages.enter(transitive.scope)
        return (
            transitive.map(lambda mp: (mp[1], mp[0]))
            .join(inner)
            .map(lambda kv: (kv[1][0], kv[1][1]))
            .concat(inner)
            .distinct()
        )

    return manages.iterate(body)


def from_scratch(edges: Set[Edge]) -> FrozenSet[Edge]:
    """The transitive closure of ``edges`` by breadth-first search from every source."""
    succ: Dict[int, List[int]] = {}
    for a, b in edges:
        succ.setdefault(a, []).append(b)
    out: Set[Edge] = set()
    for src in succ:
        seen: Set[int] = set()
        todo = list(succ[src])
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo.extend(succ.get(n, ()))
        out.update((src, n) for n in seen)
    return frozenset(out)


def schedule(size: int, rounds: int, seed: int = 0) -> List[Tuple[int, Edge, int]]:
    """The input changes ``(time, edge, diff)``: a binary tree at time 0, then per round one
    edge removed and one (new) edge added."""
    rng = random.Random(seed)
    edges = {(p // 2, p) for p in range(1, size)}
    changes = [(0, e, +1) for e in sorted(edges)]
    for r in range(1, rounds + 1):
        gone = rng.choice(sorted(edges))
        edges.discard(gone)
        changes.append((r, gone, -1))
        while True:
            new = (rng.randrange(size), rng.randrange(size))
            if new not in edges:
                break
        edges.add(new)
        changes.append((r, new, +1))
    return changes


def edges_at(changes: List[Tuple[int, Edge, int]], time: int) -> Set[Edge]:
    acc: Dict[Edge, int] = {}
    for t, e, d in changes:
        if t <= time:
            acc[e] = acc.get(e, 0) + d
    return {e for e, c in acc.items() if c > 0}


def merged(parts: Iterable[Dict[Any, int]]) -> Dict[Any, int]:
    """The sum of the workers' contents at one time (each worker holds its share)."""
    out: Dict[Any, int] = {}
    for part in parts:
        for record, count in part.items():
            out[record] = out.get(record, 0) + count
    return {record: count for record, count in out.items() if count}


def main(
    size: int = 30,
    rounds: int = 10,
    seed: int = 0,
    workers: Optional[int] = None,
    backend: Optional[str] = None,
) -> Dict[int, Dict[str, FrozenSet[Edge]]]:
    """Maintain both closures while the org chart changes, one round per time; return
    ``{time: {"transitive": pairs, "manages": pairs}}`` read from the outputs at each time.
    Raises ``AssertionError`` if either differs from the from-scratch closure. Worker 0 makes
    the changes; each worker reads its share of the outputs (``timelypy run --workers`` sets
    the workers when None)."""
    changes = schedule(size, rounds, seed)

    def build(worker: tp.Worker):
        def dataflow(scope):
            session, manages = scope.new_collection(name="manages")
            a = closure_by_transitive(manages)
            b = closure_by_manages(manages)
            probe = a.probe()
            b.probe_with(probe)
            return session, a.capture(), b.capture(), probe

        session, cap_a, cap_b, probe = worker.dataflow(dataflow)
        shares = []
        for r in range(rounds + 1):
            session.advance_to(r)
            for t, edge, diff in changes:
                if t == r and worker.index == 0:
                    session.update(edge, diff)
            session.advance_to(r + 1)
            session.flush()
            worker.step_until(probe, session.time, timeout=60)
            shares.append((cap_a.at(r), cap_b.at(r)))
        session.close()
        return shares

    parts = tp.execute(build, workers=workers, backend=backend)
    results: Dict[int, Dict[str, FrozenSet[Edge]]] = {}
    for r in range(rounds + 1):
        expected = from_scratch(edges_at(changes, r))
        at_a = merged(part[r][0] for part in parts)
        got_a, got_b = frozenset(at_a), frozenset(merged(part[r][1] for part in parts))
        assert got_a == expected, f"round {r}: transitive version differs"
        assert got_b == expected, f"round {r}: manages version differs"
        assert all(c == 1 for c in at_a.values()), f"round {r}: counts not 1"
        results[r] = {"transitive": got_a, "manages": got_b}
    return results


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    for t, res in main(size, rounds).items():
        print(f"time {t}: {len(res['transitive'])} transitive management pairs (matches scratch)")
