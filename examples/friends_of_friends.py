"""Friends of friends: the arrangement examples of the Differential Dataflow book.

``knows`` holds pairs ``(x, y)``, "x knows y"; ``query`` holds ``(x, q)``: query ``q`` asks
about person ``x``. Four computations share arrangements of ``knows`` instead of each building
its own index:

``friends``
    ``query.join_core(knows_by_key, ...).join_core(knows_by_key, ...)`` gives
    ``(q, (x, y, z))`` for ``x knows y`` and ``y knows z``: two joins, one arrangement.
``triangles``
    those ``(q, (x, y, z))`` for which the four other "knows" relations also hold, checked by
    four more ``join_core`` s against ``knows`` arranged by self: six uses, two arrangements.
``loops``
    the filter wrapper: the second hop reads ``knows_by_key.filter(k == v)`` (people who know
    themselves) without building another arrangement.
``as_collection``
    ``knows_by_key.as_collection()`` back to a collection and the naive ``join_map`` version,
    which must agree with ``friends``.

The second part is "sharing across dataflows": one dataflow arranges ``knows`` and returns
``arranged.trace``; each round a new dataflow imports that trace and semijoins it with its own
query keys ``round .. round + 3``, while ``knows`` keeps changing. The exported handle's
logical compaction is advanced as time passes ("great responsibility"), so the shared trace
can still compact. The shared-arrangement results are checked against a from-scratch
computation after every round; each importing dataflow's results are checked, at every time
from its round on, once all inputs are closed.

Run it::

    python examples/friends_of_friends.py            # 12 people, 40 pairs, 6 rounds
    python examples/friends_of_friends.py 50 400 20
"""

from __future__ import annotations

import random
import sys
from typing import Any, Dict, List, Optional, Set, Tuple

import timelypy as tp

Pair = Tuple[int, int]


# --------------------------------------------------------------------------- the dataflows
def friends(query: Any, knows_by_key: Any) -> Any:
    """``(q, (x, y, z))`` for ``(x, q)`` in query, ``x knows y``, ``y knows z``."""
    return query.join_core(knows_by_key, lambda x, q, y: [(y, (x, q))]).join_core(
        knows_by_key, lambda y, xq, z: [(xq[1], (xq[0], y, z))]
    )


def triangles(query: Any, knows_by_key: Any, knows_by_self: Any) -> Any:
    """The book's arrangement-by-self example: all six "knows" among ``x, y, z`` hold."""
    candidates = friends(query, knows_by_key)
    return (
        candidates.map(lambda r: ((r[1][0], r[1][2]), (r[0], r[1][1])))  # ((x,z),(q,y))
        .join_core(knows_by_self, lambda xz, qy, _: [((qy[1], xz[1]), (qy[0], xz[0]))])
        .join_core(knows_by_self, lambda yz, qx, _: [((yz[1], qx[1]), (qx[0], yz[0]))])
        .join_core(knows_by_self, lambda zx, qy, _: [((qy[1], zx[1]), (qy[0], zx[0]))])
        .join_core(knows_by_self, lambda yx, qz, _: [(qz[0], (yx[1], yx[0], qz[1]))])
    )


def loops(query: Any, knows_by_key: Any) -> Any:
    """The filter wrapper: second hop only along ``z knows z`` pairs (same arrangement)."""
    knows_loops = knows_by_key.filter(lambda k, v: k == v)
    return query.join_core(knows_by_key, lambda x, q, y: [(y, (x, q))]).join_core(
        knows_loops, lambda y, xq, z: [(xq[1], (xq[0], y, z))]
    )


def naive(query: Any, knows_by_key: Any) -> Any:
    """Back to a collection with ``as_collection``, then the plain ``join_map`` version."""
    knows = knows_by_key.as_collection(lambda k, v: (k, v))
    return query.join_map(knows, lambda x, q, y: (y, (x, q))).join_map(
        knows, lambda y, xq, z: (xq[1], (xq[0], y, z))
    )


# --------------------------------------------------------------------------- from scratch
def scratch_friends(knows: Set[Pair], query: Set[Pair], loops_only: bool = False) -> Set[Any]:
    out = set()
    for x, q in query:
        for x2, y in knows:
            if x2 != x:
                continue
            for y2, z in knows:
                if y2 == y and (not loops_only or y == z):
                    out.add((q, (x, y, z)))
    return out


def scratch_triangles(knows: Set[Pair], query: Set[Pair]) -> Set[Any]:
    return {
        (q, (x, y, z))
        for q, (x, y, z) in scratch_friends(knows, query)
        if {(x, z), (z, x), (y, x)} <= knows
    }


def _as_set(acc: Dict[Any, int], what: str) -> Set[Any]:
    assert all(c == 1 for c in acc.values()), f"{what}: counts other than 1: {acc}"
    return set(acc)


# --------------------------------------------------------------------------- the driver
def main(
    people: int = 12, pairs: int = 40, rounds: int = 6, seed: int = 2, backend: Optional[str] = None
) -> Dict[str, Any]:
    """Run both parts for ``rounds`` rounds of changes to ``knows`` (and to ``query``); return
    ``{"shared": [per-round result sizes], "imports": {round: results at the end}}``.
    Raises ``AssertionError`` on any difference from the from-scratch answers. One worker:
    each round checks the worker's own outputs; ``backend`` None comes from ``timelypy run
    --backend`` (else inline)."""
    rng = random.Random(seed)

    def build(worker: tp.Worker):
        # Part 1: one dataflow, arrangements shared by many operators.
        def shared_dataflow(scope):
            knows_session, knows = scope.new_collection(name="knows")
            query_session, query = scope.new_collection(name="query")
            by_key = knows.arrange_by_key(name="KnowsByKey")
            by_self = knows.arrange_by_self(name="KnowsBySelf")
            outs = {
                "friends": friends(query, by_key),
                "triangles": triangles(query, by_key, by_self),
                "loops": loops(query, by_key),
                "naive": naive(query, by_key),
            }
            probe = tp.ProbeHandle()
            for c in outs.values():
                c.probe_with(probe)
            return (
                knows_session,
                query_session,
                {k: c.capture() for k, c in outs.items()},
                probe,
                scope.describe(),
            )

        # Part 2: one dataflow exports the arranged trace ...
        def export_dataflow(scope):
            session, knows = scope.new_collection(name="knows2")
            return session, knows.arrange_by_key(name="Exported").trace

        knows_session, query_session, caps, probe, _ = worker.dataflow(shared_dataflow)
        knows2, trace = worker.dataflow(export_dataflow)
        trace.set_physical_compaction([])

        knows_now: Set[Pair] = set()
        query_now: Set[Pair] = set()
        imports: Dict[int, Tuple[Any, Any]] = {}  # round -> (captured, probe)
        shared_sizes: List[Dict[str, int]] = []
        knows_history: List[Set[Pair]] = []

        def knows_update(p: Pair, diff: int) -> None:
            knows_session.update(p, diff)
            knows2.update(p, diff)

        for r in range(rounds + 1):
            for s in (knows_session, query_session, knows2):
                s.advance_to(r)
            if r == 0:
                while len(knows_now) < pairs:
                    p = (rng.randrange(people), rng.randrange(people))
                    if p not in knows_now:
                        knows_now.add(p)
                        knows_update(p, +1)
                for p in range(people):  # everyone knows themselves, to start with
                    if (p, p) not in knows_now:
                        knows_now.add((p, p))
                        knows_update((p, p), +1)
            else:
                # The book removes (round, round); we also add a random new pair.
                if (r, r) in knows_now:
                    knows_now.discard((r, r))
                    knows_update((r, r), -1)
                p = (rng.randrange(people), rng.randrange(people))
                if p not in knows_now:
                    knows_now.add(p)
                    knows_update(p, +1)
            for _ in range(2):
                q = (rng.randrange(people), rng.randrange(1000))
                if q not in query_now:
                    query_now.add(q)
                    query_session.insert(q)
            if r % 3 == 2 and query_now:
                q = rng.choice(sorted(query_now))
                query_now.discard(q)
                query_session.remove(q)

            # ... and this round's dataflow imports it, with its own query keys.
            def import_dataflow(scope, r=r):
                qs, keys = scope.new_collection(name=f"keys{r}")
                for x in range(r, r + 3):
                    qs.update_at(x, r, 1)
                result = trace.import_(scope).semijoin(keys).consolidate()
                qs.close()  # the keys never change (close only once they have a consumer)
                return result.capture(), result.probe()

            imports[r] = worker.dataflow(import_dataflow)

            for s in (knows_session, query_session, knows2):
                s.advance_to(r + 1)
                s.flush()
            worker.step_until(probe, r + 1, timeout=60)
            # No new dataflow will import the trace to read times before r + 1: let it compact.
            trace.set_logical_compaction([r + 1])
            knows_history.append(set(knows_now))

            # Check everything at time r.
            expect_friends = scratch_friends(knows_now, query_now)
            got = {k: _as_set(c.at(r), k) for k, c in caps.items()}
            assert got["friends"] == expect_friends, f"round {r}: friends differ"
            assert got["naive"] == expect_friends, f"round {r}: as_collection version differs"
            assert got["triangles"] == scratch_triangles(knows_now, query_now), (
                f"round {r}: triangles differ"
            )
            assert got["loops"] == scratch_friends(knows_now, query_now, loops_only=True), (
                f"round {r}: filtered arrangement differs"
            )
            shared_sizes.append({k: len(v) for k, v in got.items()})

        for s in (knows_session, query_session, knows2):
            s.close()
        trace.close()
        worker.step_until_done(timeout=60)
        # Each importing dataflow saw the shared trace from its round on.
        for r0, (cap, p) in imports.items():
            assert p.done()
            for t in range(r0, rounds + 1):
                expected = {(x, y) for x, y in knows_history[t] if r0 <= x < r0 + 3}
                assert _as_set(cap.at(t), f"import {r0}") == expected, (
                    f"time {t}: the dataflow importing the trace at round {r0} differs"
                )
        final = {r0: sorted(cap.at(rounds)) for r0, (cap, _) in imports.items()}
        return {"shared": shared_sizes, "imports": final}

    (result,) = tp.execute(build, workers=1, backend=backend)
    return result


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:4]]
    result = main(*args)
    for r, sizes in enumerate(result["shared"]):
        print(f"time {r}: " + ", ".join(f"{k} {n}" for k, n in sizes.items()))
    for r0, records in result["imports"].items():
        print(f"dataflow importing the trace at round {r0}: {records}")
