"""Recovery costs: compute a state, checkpoint it, restore it, against computing it again.

usage: python benchmarks/recovery.py [--workload reach|skip] [--size N] [--location DIR]

One inline worker. ``reach``: nodes reachable from node 0 over a random graph of N nodes and 2N
edges (an iterate with join and distinct); ``skip``: the skip-level join of N people with a
manager each (an arrangement joined with itself). Phases, each timed: compute (load the input,
run until its time closes), snapshot (every operator's state), write (the checkpoint store's
part and manifest in ``--location``, a fresh temporary directory by default), read (the latest
checkpoint back), restore (onto a freshly built dataflow, until the time closes again). Prints
one JSON object: seconds per phase, restore / compute, the checkpoint's bytes and files, and
bytes per stored update.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from typing import Any, Callable, Tuple

from common import emit, environment, now

from timelypy.recovery import CheckpointStore
from timelypy.recovery.snapshot import (
    closed_at,
    program_fingerprint,
    restore_worker,
    snapshot_worker,
)
from timelypy.workers.worker import Worker


def reach(n: int) -> Tuple[Callable[[Any], Any], list]:
    rng = random.Random(7)
    edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(2 * n)]

    def build(scope: Any) -> Any:
        session, graph = scope.new_collection(name="edges")
        roots = graph.filter(lambda e: e[0] == 0).map(lambda e: 0).distinct()

        def body(inner: Any) -> Any:
            return (
                inner.map(lambda node: (node, ()))
                .join(graph.enter(inner.scope))
                .map(lambda kv: kv[1][1])
                .concat(roots.enter(inner.scope))
                .distinct()
            )

        roots.iterate(body).probe()
        return session

    return build, edges


def skip(n: int) -> Tuple[Callable[[Any], Any], list]:
    people = [(p, p // 2) for p in range(1, n)]  # (person, manager)

    def build(scope: Any) -> Any:
        session, manages = scope.new_collection(name="manages")
        by_manager = manages.map(lambda pm: (pm[1], pm[0]))
        by_manager.join(manages).probe()
        return session

    return build, people


def settle(worker: Worker, time: int) -> None:
    while not closed_at(worker, time):
        worker.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("reach", "skip"), default="reach")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--location", default=None, help="checkpoint directory (default: temporary)")
    a = ap.parse_args()
    build, records = (reach if a.workload == "reach" else skip)(a.size)

    worker = Worker()
    session = worker.dataflow(build)
    t0 = now()
    for record in records:
        session.insert(record)
    session.advance_to(1)
    session.flush()
    settle(worker, 1)
    compute = now() - t0

    t0 = now()
    states = snapshot_worker(worker)
    snapshot = now() - t0
    updates = sum(len(s.keyed) for s in states.values())

    location = a.location or tempfile.mkdtemp(prefix="tpy-recovery-")
    store = CheckpointStore(location)
    t0 = now()
    checkpoint = store.new_checkpoint_id()
    part = store.write_part(checkpoint, 0, states)
    store.publish(checkpoint, 1, 1, [part], program_fingerprint(worker))
    write = now() - t0
    size = files = 0
    for root, _, names in os.walk(location):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(root, name))

    t0 = now()
    manifest = store.latest()
    assert manifest is not None
    read_back = store.read_states(manifest)
    read = now() - t0

    fresh = Worker()
    fresh.dataflow(build)
    t0 = now()
    restore_worker(fresh, read_back, manifest.time)
    settle(fresh, 1)
    restore = now() - t0

    emit(
        {
            "benchmark": "recovery",
            "workload": a.workload,
            "size": a.size,
            "input_records": len(records),
            "compute_s": round(compute, 4),
            "snapshot_s": round(snapshot, 4),
            "write_s": round(write, 4),
            "read_s": round(read, 4),
            "restore_s": round(restore, 4),
            "restore_over_compute": round(restore / compute, 4),
            "read_and_restore_over_compute": round((read + restore) / compute, 4),
            "checkpoint_bytes": size,
            "checkpoint_files": files,
            "keyed_pieces": updates,
            "bytes_per_piece": round(size / max(updates, 1), 1),
            "environment": environment(),
        }
    )


if __name__ == "__main__":
    main()
