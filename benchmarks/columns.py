"""Columns against objects: each workload on both paths, side by side, in fresh processes.

Every run is a process of its own (this script runs itself with ``--child``), once with
``TIMELYPY_COLUMNS=off`` (every batch on the object path) and once with ``auto`` (columns where
the records allow), the two alternated (``off, auto`` then ``auto, off``, ...) for ``--reps``
repetitions, so that a machine getting busier or quieter does not favour one path. The JSON
gives each figure per path (every repetition and the median) and the ratio of the medians,
``columns / objects`` (below 1: columns take less time or memory). Workloads (``--workloads``):

* ``w1``: the skip-level program, ``manages.map(swap).join(manages)``, with a running digest
  of the output in ``inspect`` (as the comparison harness keeps it): load N people
  ``(p // 2, p)``, then N - 1 changes ``advance_to(p); remove((p // 2, p));
  insert((p // 3, p))`` in an open loop (flush and one step every ``--open-loop-batch``
  changes; 0: only at the end, which the input pacing then chunks): ``load_s``, ``update_s``,
  ``peak_mb`` (the process's peak RSS);
* ``closed``: W1's closed loop in a fresh dataflow: load, then the first ``--closed-rounds``
  changes, each flushed and waited for: median (and p99) µs per change;
* ``join``: a join load only: two collections of N ``(int, int)`` records ``(p // 2, p)`` and
  ``(p // 2, -p)``, joined, the outputs counted: ``load_s`` (2N outputs);
* ``count``: ``count()`` over N int records ``p // 2``, then N - 1 changes ``remove(p // 2);
  insert(p // 3)`` in an open loop: ``load_s``, ``update_s``;
* ``counts``: ``count()`` and ``distinct()`` (each in a dataflow of its own) over N int records
  ``p // 2``, then ``--bulk-changes`` changes (default N / 10) ``remove(a_j); insert(b_j)`` of
  records spread over the keys, in ``--bulk-rounds`` rounds (default 10), each round at a time
  of its own and waited for: ``count_load_s``, ``count_update_s``, ``distinct_load_s``,
  ``distinct_update_s``, and each in CPU seconds (``..._cpu_s``, ``time.process_time``, which
  other tenants of a busy machine inflate less): large messages, where the column path of
  count and distinct works.

Every workload sums a digest over its output updates, weighted by their diffs (so it depends on
the accumulated output, not on how it was batched); the digests of both paths and all
repetitions must be equal (``digests_equal``) and equal to the digest of the answer computed
from scratch in plain Python (``digest_matches_expected``). ``--stats`` collects the operator
statistics and reports every arrangement's trace (and the path it took, where the statistics
name it); it costs time, so figures from a ``--stats`` run are not comparable.

    python benchmarks/columns.py --size 1000000 --reps 2
    python benchmarks/columns.py --size 100000 --reps 3 --workloads w1 closed
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from common import emit, environment, latency_stats_us, median, note, now

import timelypy

PATHS = ("off", "auto")
"""``TIMELYPY_COLUMNS`` per path: ``off`` is the object path, ``auto`` the column path."""

PATH_NAMES = {"off": "objects", "auto": "columns"}

WORKLOADS = ("w1", "closed", "join", "count", "counts")

_MASK = (1 << 61) - 1


class Digest:
    """An order-free digest of output updates: the sum of ``diff * hash(record)`` modulo a
    prime-sized mask, with the number of updates and their net count (``hash`` of ints and
    tuples of ints is the same in every process)."""

    def __init__(self) -> None:
        self.value = 0
        self.updates = 0
        self.net = 0

    def __call__(self, update: Tuple[Any, Any, int]) -> None:
        record, _, diff = update
        self.value = (self.value + diff * hash(record)) & _MASK
        self.updates += 1
        self.net += diff

    def result(self) -> Dict[str, Any]:
        return {"digest": self.value, "output_updates": self.updates, "output_net": self.net}


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


WAIT_S = 3600.0
"""The bound on one wait for the probe (the child's ``--timeout``)."""


def _wait(worker: Any, probe: Any, time: Any) -> None:
    worker.step_until(probe, time, timeout=WAIT_S)


# ----------------------------------------------------------------------------- workloads


def _skip_level(scope: Any, digest: Digest) -> Tuple[Any, Any]:
    session, manages = scope.new_collection()
    probe = manages.map(lambda mp: (mp[1], mp[0])).join(manages).inspect(digest).probe()
    return session, probe


def _load_pairs(worker: Any, session: Any, probe: Any, size: int) -> float:
    start = now()
    insert = session.insert
    for p in range(size):
        insert((p // 2, p))
    session.advance_to(1)
    session.flush()
    _wait(worker, probe, 1)
    return now() - start


def _open_loop(
    worker: Any, session: Any, probe: Any, size: int, batch: int, old: Callable, new: Callable
) -> float:
    """N - 1 changes ``remove(old(p)); insert(new(p))`` at times 1 .. N - 1, flushing and
    stepping once every ``batch`` changes, waiting for the probe only at the end."""
    start = now()
    advance, remove, insert = session.advance_to, session.remove, session.insert
    for p in range(1, size):
        advance(p)
        remove(old(p))
        insert(new(p))
        if batch and p % batch == 0:
            session.flush()
            worker.step()
    session.advance_to(size)
    session.flush()
    _wait(worker, probe, size)
    return now() - start


def w1(args: argparse.Namespace) -> Callable[[Any], Dict[str, Any]]:
    """Load + open loop of the skip-level program."""
    size, batch = args.size, args.open_loop_batch

    def build(worker: Any) -> Dict[str, Any]:
        digest = Digest()
        session, probe = worker.dataflow(lambda scope: _skip_level(scope, digest))
        load_s = _load_pairs(worker, session, probe, size)
        update_s = _open_loop(
            worker,
            session,
            probe,
            size,
            batch,
            lambda p: (p // 2, p),
            lambda p: (p // 3, p),
        )
        session.close()
        return {"load_s": load_s, "update_s": update_s, **digest.result()}

    return build


def closed(args: argparse.Namespace) -> Callable[[Any], Dict[str, Any]]:
    """Load, then the first ``--closed-rounds`` changes of W1, each waited for."""
    size, rounds = args.size, args.closed_rounds

    def build(worker: Any) -> Dict[str, Any]:
        digest = Digest()
        session, probe = worker.dataflow(lambda scope: _skip_level(scope, digest))
        load_s = _load_pairs(worker, session, probe, size)
        latencies: List[float] = []
        for p in range(1, min(size, rounds + 1)):
            t0 = now()
            session.remove((p // 2, p))
            session.insert((p // 3, p))
            session.advance_to(p + 1)
            session.flush()
            _wait(worker, probe, p + 1)
            latencies.append(now() - t0)
        session.close()
        return {"load_s": load_s, "latency_us": latency_stats_us(latencies), **digest.result()}

    return build


def join(args: argparse.Namespace) -> Callable[[Any], Dict[str, Any]]:
    """Two collections of N pairs, joined; the load only."""
    size = args.size

    def build(worker: Any) -> Dict[str, Any]:
        digest = Digest()

        def dataflow(scope: Any) -> Tuple[Any, Any, Any]:
            left_in, left = scope.new_collection()
            right_in, right = scope.new_collection()
            return left_in, right_in, left.join(right).inspect(digest).probe()

        left, right, probe = worker.dataflow(dataflow)
        start = now()
        for p in range(size):
            left.insert((p // 2, p))
            right.insert((p // 2, -p))
        for session in (left, right):
            session.advance_to(1)
            session.flush()
        _wait(worker, probe, 1)
        load_s = now() - start
        left.close()
        right.close()
        return {"load_s": load_s, **digest.result()}

    return build


def count(args: argparse.Namespace) -> Callable[[Any], Dict[str, Any]]:
    """``count()`` over N int records, load + open loop."""
    size, batch = args.size, args.open_loop_batch

    def build(worker: Any) -> Dict[str, Any]:
        digest = Digest()

        def dataflow(scope: Any) -> Tuple[Any, Any]:
            session, keys = scope.new_collection()
            return session, keys.count().inspect(digest).probe()

        session, probe = worker.dataflow(dataflow)
        start = now()
        for p in range(size):
            session.insert(p // 2)
        session.advance_to(1)
        session.flush()
        _wait(worker, probe, 1)
        load_s = now() - start
        update_s = _open_loop(
            worker, session, probe, size, batch, lambda p: p // 2, lambda p: p // 3
        )
        session.close()
        return {"load_s": load_s, "update_s": update_s, **digest.result()}

    return build


def _bulk_change(size: int, j: int) -> Tuple[int, int]:
    """The ``j``-th change of ``counts``: the record removed and the record inserted."""
    half = max(size // 2, 1)
    return (j * 7919) % half, (j * 104729 + 1) % half


def counts(args: argparse.Namespace) -> Callable[[Any], Dict[str, Any]]:
    """``count()`` and ``distinct()`` over N int records, load + rounds of bulk changes."""
    size, changes, rounds = args.size, _bulk_changes(args), max(args.bulk_rounds, 1)

    def one(worker: Any, digest: Digest, op: str) -> Dict[str, float]:
        def dataflow(scope: Any) -> Tuple[Any, Any]:
            session, keys = scope.new_collection()
            out = keys.count() if op == "count" else keys.distinct()
            return session, out.inspect(digest).probe()

        session, probe = worker.dataflow(dataflow)
        start, cpu = now(), time.process_time()
        insert, remove = session.insert, session.remove
        for p in range(size):
            insert(p // 2)
        session.advance_to(1)
        session.flush()
        _wait(worker, probe, 1)
        load_s, load_cpu_s = now() - start, time.process_time() - cpu
        start, cpu = now(), time.process_time()
        per_round = -(-changes // rounds)
        for r in range(rounds):
            for j in range(r * per_round, min(changes, (r + 1) * per_round)):
                old, new = _bulk_change(size, j)
                remove(old)
                insert(new)
            session.advance_to(r + 2)
            session.flush()
            _wait(worker, probe, r + 2)
        update_s, update_cpu_s = now() - start, time.process_time() - cpu
        session.close()
        return {
            f"{op}_load_s": load_s,
            f"{op}_update_s": update_s,
            f"{op}_load_cpu_s": load_cpu_s,
            f"{op}_update_cpu_s": update_cpu_s,
        }

    def build(worker: Any) -> Dict[str, Any]:
        digest = Digest()
        out: Dict[str, Any] = {}
        for op in ("count", "distinct"):
            out.update(one(worker, digest, op))
        return {**out, **digest.result()}

    return build


def _bulk_changes(args: argparse.Namespace) -> int:
    return args.bulk_changes if args.bulk_changes is not None else args.size // 10


BUILDS: Dict[str, Callable[[argparse.Namespace], Callable[[Any], Dict[str, Any]]]] = {
    "w1": w1,
    "closed": closed,
    "join": join,
    "count": count,
    "counts": counts,
}


def _final_managers(size: int, changed: int) -> List[int]:
    """``manager[p]`` after the first ``changed`` changes of W1."""
    return [p // 3 if 1 <= p <= changed else p // 2 for p in range(size)]


def expected_records(workload: str, args: argparse.Namespace) -> Dict[Any, int]:
    """The workload's output collection at the end, computed from scratch in plain Python."""
    size = args.size
    out: Dict[Any, int] = {}
    if workload in ("w1", "closed"):
        changed = size - 1 if workload == "w1" else min(size - 1, args.closed_rounds)
        manager = _final_managers(size, changed)
        for report, boss in enumerate(manager):
            # (boss, (boss's manager, report)): the swapped pair (boss, manager) joined on boss.
            record = (boss, (manager[boss], report))
            out[record] = out.get(record, 0) + 1
    elif workload == "join":
        for key in range((size + 1) // 2):
            people = [p for p in (2 * key, 2 * key + 1) if p < size]
            for p in people:
                for q in people:
                    out[(key, (p, -q))] = 1
    elif workload == "counts":
        tally: Dict[int, int] = {}
        for p in range(size):
            tally[p // 2] = tally.get(p // 2, 0) + 1
        for j in range(_bulk_changes(args)):
            old, new = _bulk_change(size, j)
            tally[old] = tally.get(old, 0) - 1
            tally[new] = tally.get(new, 0) + 1
        for key, n in tally.items():
            if n:
                out[(key, n)] = 1
            if n > 0:
                out[key] = out.get(key, 0) + 1
    else:
        tally = {}
        for key in _final_managers(size, size - 1):
            tally[key] = tally.get(key, 0) + 1
        out = {item: 1 for item in tally.items()}
    return out


def expected_digest(workload: str, args: argparse.Namespace) -> int:
    """The digest :class:`Digest` ends with when the output is right."""
    value = 0
    for record, count in expected_records(workload, args).items():
        value = (value + count * hash(record)) & _MASK
    return value


def _arrangements(stats: Any) -> List[Dict[str, Any]]:
    """Every arrange operator's trace sizes (with the path it took, where the statistics name
    it), summed over workers."""
    out = []
    for op in stats.operators():
        trace = op.get("arrangement")
        if trace:
            row = {"name": op["name"], **trace}
            if "path" in op:
                row["path"] = op["path"]
            out.append(row)
    return out


def run_child(args: argparse.Namespace) -> Dict[str, Any]:
    """One workload on this process's path (``TIMELYPY_COLUMNS`` as the parent set it)."""
    stats = None
    if args.stats:
        from timelypy.stats import Statistics

        stats = Statistics()
    start, cpu = now(), time.process_time()
    [out] = timelypy.execute(BUILDS[args.child](args), statistics=stats)
    out["wall_s"] = now() - start
    out["cpu_s"] = time.process_time() - cpu  # the whole run (inputs, dataflow, digest)
    out["peak_mb"] = _peak_mb()
    if stats is not None:
        out["arrangements"] = _arrangements(stats)
    return out


# ----------------------------------------------------------------------------- the parent


def _child_command(args: argparse.Namespace, workload: str) -> List[str]:
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        workload,
        "--size",
        str(args.size),
        "--closed-rounds",
        str(args.closed_rounds),
        "--open-loop-batch",
        str(args.open_loop_batch),
        "--timeout",
        str(args.timeout),
        "--bulk-rounds",
        str(args.bulk_rounds),
    ] + ([] if args.bulk_changes is None else ["--bulk-changes", str(args.bulk_changes)])
    return command + (["--stats"] if args.stats else [])


def run_once(args: argparse.Namespace, workload: str, path: str) -> Dict[str, Any]:
    """One child process: ``workload`` with ``TIMELYPY_COLUMNS=path``; its JSON, or the
    error (the child's exit status and the end of its stderr)."""
    env = dict(os.environ, TIMELYPY_COLUMNS=path)
    try:
        done = subprocess.run(
            _child_command(args, workload),
            env=env,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"{workload} with TIMELYPY_COLUMNS={path}: over {args.timeout} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-5:]
        return {
            "error": f"{workload} with TIMELYPY_COLUMNS={path}: exit {done.returncode}",
            "stderr": tail,
        }
    return json.loads(done.stdout)


FIGURES: Dict[str, Tuple[Tuple[str, ...], ...]] = {
    "w1": (("load_s",), ("update_s",), ("peak_mb",)),
    "closed": (("latency_us", "median_us"), ("latency_us", "p99_us"), ("load_s",)),
    "join": (("load_s",), ("peak_mb",)),
    "count": (("load_s",), ("update_s",), ("peak_mb",)),
    "counts": tuple(
        (f"{op}_{phase}",)
        for op in ("count", "distinct")
        for phase in ("load_s", "update_s", "load_cpu_s", "update_cpu_s")
    )
    + (("cpu_s",),),
}
"""The figures compared per workload (a path into the child's JSON)."""


def _figure(run: Dict[str, Any], keys: Tuple[str, ...]) -> Optional[float]:
    value: Any = run
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value)


def compare(workload: str, runs: Dict[str, List[Dict[str, Any]]], expected: int) -> Dict[str, Any]:
    """Per figure: each path's values and median, and ``columns / objects`` of the medians;
    whether every run's digest is the same, and the ``expected`` one."""
    out: Dict[str, Any] = {}
    for keys in FIGURES[workload]:
        name = "_".join(keys)
        row: Dict[str, Any] = {}
        for path in PATHS:
            values = [v for v in (_figure(r, keys) for r in runs[path]) if v is not None]
            row[PATH_NAMES[path]] = {
                "runs": [round(v, 4) for v in values],
                "median": round(median(values), 4) if values else None,
            }
        objects, columns = row["objects"]["median"], row["columns"]["median"]
        row["columns_over_objects"] = round(columns / objects, 3) if objects and columns else None
        out[name] = row
    digests = {r.get("digest") for path in PATHS for r in runs[path]}
    out["digests_equal"] = len(digests) == 1 and None not in digests
    out["digest_matches_expected"] = digests == {expected}
    out["output_updates"] = {
        PATH_NAMES[p]: sorted({r.get("output_updates") for r in runs[p]}, key=str) for p in PATHS
    }
    errors = [r for p in PATHS for r in runs[p] if "error" in r]
    if errors:
        out["errors"] = errors
    if any("arrangements" in r for p in PATHS for r in runs[p]):
        out["arrangements"] = {PATH_NAMES[p]: runs[p][0].get("arrangements") for p in PATHS}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000, help="N (people, records, keys)")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of each path")
    ap.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    ap.add_argument("--closed-rounds", type=int, default=1000)
    ap.add_argument(
        "--open-loop-batch",
        type=int,
        default=10_000,
        help="flush and step once every this many changes (0: only at the end)",
    )
    ap.add_argument(
        "--bulk-changes", type=int, default=None, help="changes of 'counts' (default N / 10)"
    )
    ap.add_argument("--bulk-rounds", type=int, default=10, help="rounds of 'counts' changes")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds a run may take")
    ap.add_argument("--stats", action="store_true", help="report each arrangement's trace")
    ap.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        global WAIT_S
        WAIT_S = args.timeout
        print(json.dumps(run_child(args)))
        return
    result: Dict[str, Any] = {
        "benchmark": "columns",
        "parameters": {
            "size": args.size,
            "reps": args.reps,
            "workloads": args.workloads,
            "closed_rounds": args.closed_rounds,
            "open_loop_batch": args.open_loop_batch,
            "bulk_changes": _bulk_changes(args),
            "bulk_rounds": args.bulk_rounds,
            "stats": args.stats,
        },
        **environment(),
        "ratio": "columns / objects, of the medians (below 1: the column path is better)",
    }
    for workload in args.workloads:
        runs: Dict[str, List[Dict[str, Any]]] = {path: [] for path in PATHS}
        for rep in range(args.reps):
            for path in PATHS if rep % 2 == 0 else PATHS[::-1]:
                note(f"columns: {workload} with TIMELYPY_COLUMNS={path} (repetition {rep + 1})")
                runs[path].append(run_once(args, workload, path))
        result[workload] = compare(workload, runs, expected_digest(workload, args))
    emit(result)


if __name__ == "__main__":
    main()
