"""Recovery costs: compute a state, checkpoint it, restore it, against computing it again.

usage: python benchmarks/recovery.py [--workload reach|skip|w1-checkpointing] [--size N]
       [--location DIR] [--change-records K] [--every SECONDS] [--batch B]

One inline worker; every phase is timed in wall and CPU seconds (CPU is steadier on a shared
machine).

``reach``: nodes reachable from node 0 over a random graph of N nodes and 2N edges (an iterate
with join and distinct); ``skip``: the skip-level join of N people with a manager each (an
arrangement joined with itself). Phases: compute (load the input, run until its time closes),
checkpoint (snapshot, write the part, publish, in ``--location``, a fresh temporary directory
by default), read (the latest checkpoint back), restore (onto a freshly built dataflow, until
the time closes again); then K records change and a second checkpoint is taken: what it
writes shows that a checkpoint re-encodes only what changed.

``w1-checkpointing``: W1's update phase (load N people, then N - 1 modifications, flushing
every B) without checkpoints, then with a checkpoint every ``--every`` seconds (10), in one
run: the throughput cost in %, each checkpoint's time and bytes, bytes per stored update.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from time import process_time
from typing import Any, Callable, Dict, List, Optional, Tuple

from common import emit, environment, now

from timelypy.dataflow.state import OperatorState
from timelypy.recovery import CheckpointStore
from timelypy.recovery.snapshot import (
    closed_at,
    program_fingerprint,
    restore_worker,
    snapshot_worker,
    state_holders,
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


def stored_updates(worker: Worker, states: Dict[str, OperatorState]) -> int:
    """The updates the state holds: the arrangements' traces, and the other keyed pieces."""
    total = 0
    for op_id, holder in state_holders(worker):
        spine = getattr(holder, "spine", None)
        if spine is not None:
            total += spine.stored_updates()
        else:
            total += len(states[op_id].keyed)
    return total


class Clock:
    """Wall and CPU seconds of a phase."""

    def __init__(self) -> None:
        self.wall, self.cpu = now(), process_time()

    def stop(self) -> Tuple[float, float]:
        return now() - self.wall, process_time() - self.cpu


def checkpoint(store: CheckpointStore, worker: Worker, time: Any) -> Dict[str, Any]:
    """Snapshot the worker (closed at ``time``) and write and publish a checkpoint."""
    clock = Clock()
    states = snapshot_worker(worker)
    checkpoint_id = store.new_checkpoint_id()
    part = store.write_part(checkpoint_id, 0, states)
    store.publish(checkpoint_id, time, 1, [part], program_fingerprint(worker))
    wall, cpu = clock.stop()
    return {
        "wall_s": round(wall, 4),
        "cpu_s": round(cpu, 4),
        "bytes": part["bytes"],
        "bytes_written": part["bytes_written"],
        "files_written": part["files_written"],
        "chunks": part["chunks"],
        "sealed_reused": part.get("sealed_reused", 0),
        "stored_updates": stored_updates(worker, states),
    }


def directory_size(location: str) -> Tuple[int, int]:
    size = files = 0
    for root, _, names in os.walk(location):
        for name in names:
            files += 1
            size += os.path.getsize(os.path.join(root, name))
    return size, files


def restore_costs(a: argparse.Namespace) -> Dict[str, Any]:
    """``reach`` or ``skip``: compute, checkpoint, read, restore; then a small change and a
    second checkpoint (what an incremental checkpoint costs)."""
    build, records = (reach if a.workload == "reach" else skip)(a.size)
    worker = Worker()
    session = worker.dataflow(build)
    clock = Clock()
    for record in records:
        session.insert(record)
    session.advance_to(1)
    session.flush()
    settle(worker, 1)
    compute, compute_cpu = clock.stop()

    location = a.location or tempfile.mkdtemp(prefix="tpy-recovery-")
    store = CheckpointStore(location)
    first = checkpoint(store, worker, 1)
    size, files = directory_size(location)

    clock = Clock()
    manifest = store.latest()
    assert manifest is not None
    read_back = store.read_states(manifest, peers=1, index=0)
    read, read_cpu = clock.stop()

    fresh = Worker()
    fresh.dataflow(build)
    clock = Clock()
    restore_worker(fresh, read_back, manifest.time)
    settle(fresh, 1)
    restore, restore_cpu = clock.stop()
    del fresh, read_back

    # a small change: a.change_records records removed and as many inserted
    rng = random.Random(11)
    for record in rng.sample(records, min(a.change_records, len(records))):
        session.remove(record)
        session.insert(record[::-1])
    session.advance_to(2)
    session.flush()
    settle(worker, 2)
    second = checkpoint(store, worker, 2)

    return {
        "workload": a.workload,
        "size": a.size,
        "input_records": len(records),
        "compute_s": round(compute, 4),
        "compute_cpu_s": round(compute_cpu, 4),
        "checkpoint": first,
        "read_s": round(read, 4),
        "read_cpu_s": round(read_cpu, 4),
        "restore_s": round(restore, 4),
        "restore_cpu_s": round(restore_cpu, 4),
        "read_and_restore_over_compute": round((read + restore) / compute, 4),
        "read_and_restore_over_compute_cpu": round((read_cpu + restore_cpu) / compute_cpu, 4),
        "checkpoint_bytes": size,
        "checkpoint_files": files,
        "bytes_per_stored_update": round(size / max(first["stored_updates"], 1), 1),
        "change_records": a.change_records,
        "second_checkpoint": second,
    }


def w1_run(size: int, batch: int, every: Optional[float], location: str) -> Dict[str, Any]:
    """W1 on one inline worker: load ``size`` people, then ``size - 1`` modifications (an
    advance, a remove and an insert each), flushing every ``batch``; with ``every``, a
    checkpoint at the first flush ``every`` seconds after the last one or the start (the worker
    first runs until the current time is closed, as a session does)."""
    worker = Worker()
    session = worker.dataflow(lambda scope: skip_level(scope))
    last = now()  # as a session counts: from its start, the load included
    for p in range(size):
        session.insert((p // 2, p))
    session.advance_to(1)
    session.flush()
    settle(worker, 1)
    store = CheckpointStore(location) if every is not None else None
    checkpoints: List[Dict[str, Any]] = []
    clock = Clock()
    advance, remove, insert = session.advance_to, session.remove, session.insert
    for p in range(1, size):
        advance(p)
        remove((p // 2, p))
        insert((p // 3, p))
        if p % batch == 0:
            session.flush()
            worker.step()
            if store is not None and now() - last >= every:  # type: ignore[operator]
                advance(p + 1)  # the time of the updates so far passes: it can close
                session.flush()
                settle(worker, p + 1)
                checkpoints.append(checkpoint(store, worker, p + 1))
                last = now()
    session.advance_to(size)
    session.flush()
    settle(worker, size)
    wall, cpu = clock.stop()
    return {"update_s": round(wall, 4), "update_cpu_s": round(cpu, 4), "checkpoints": checkpoints}


def skip_level(scope: Any) -> Any:
    session, manages = scope.new_collection(name="manages")
    manages.map(lambda mp: (mp[1], mp[0])).join(manages).probe()
    return session


def w1_checkpointing(a: argparse.Namespace) -> Dict[str, Any]:
    """W1's update phase without checkpoints, then with one every ``--every`` seconds."""
    location = a.location or tempfile.mkdtemp(prefix="tpy-recovery-")
    without = w1_run(a.size, a.batch, None, location)
    with_ = w1_run(a.size, a.batch, a.every, location)
    taken = with_["checkpoints"]
    size, files = directory_size(location)
    return {
        "workload": "w1-checkpointing",
        "size": a.size,
        "modifications": a.size - 1,
        "every_seconds": a.every,
        "flush_batch": a.batch,
        "without": {k: v for k, v in without.items() if k != "checkpoints"},
        "with": {k: v for k, v in with_.items() if k != "checkpoints"},
        "throughput_cost_pct": round(100 * (with_["update_s"] / without["update_s"] - 1), 2),
        "throughput_cost_cpu_pct": round(
            100 * (with_["update_cpu_s"] / without["update_cpu_s"] - 1), 2
        ),
        "checkpoints": taken,
        "checkpoint_s_total": round(sum(c["wall_s"] for c in taken), 4),
        "store_bytes_at_end": size,
        "store_files_at_end": files,
        "bytes_per_stored_update": [
            round(c["bytes"] / max(c["stored_updates"], 1), 1) for c in taken
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("reach", "skip", "w1-checkpointing"), default="reach")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--location", default=None, help="checkpoint directory (default: temporary)")
    ap.add_argument(
        "--change-records", type=int, default=100, help="records changed before the 2nd checkpoint"
    )
    ap.add_argument("--every", type=float, default=10.0, help="w1: seconds between checkpoints")
    ap.add_argument("--batch", type=int, default=1000, help="w1: modifications per flush")
    a = ap.parse_args()
    result = w1_checkpointing(a) if a.workload == "w1-checkpointing" else restore_costs(a)
    emit({"benchmark": "recovery", **result, "environment": environment()})


if __name__ == "__main__":
    main()
