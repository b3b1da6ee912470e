"""Strings in columns against objects: bulk loads with string keys, on both paths, alternated.

Records ``(word, p)`` for ``p < N``, the word drawn (seeded) from a vocabulary of ``V`` words
of 3 to 12 letters, ``--vocab`` giving several V. Every run is a process of its own (this
script runs itself with ``--child``), with ``TIMELYPY_COLUMNS=off`` (the object path) and
``auto`` (string keys dictionary-encoded in column batches), alternated (``off, auto`` then
``auto, off``, ...) for ``--reps`` repetitions. Workloads (``--workloads``):

* ``arrange``: the N records arranged by key at one time: ``load_s``, and the arrangement's
  traced bytes per stored update (``tracemalloc``, what the dataflow still holds);
* ``join``: the N records joined with one record ``(word, len(word))`` per word: ``load_s``
  (N outputs, counted in a digest);
* ``sum``: ``map(lambda r: (r[0], r[1] % 100)).sum()``: ``load_s`` (V outputs).
* ``count_arrow``: the records ``(word, p % 16)`` counted (``count()``), loaded either one by
  one (``insert``, mode ``tuples``) or as an Arrow table (``update_arrow`` of a ``string`` key
  column, :data:`ARROW_SLICE` rows a call, mode ``arrow``), both on the column path, on one
  worker and on two worker processes (each loads half the rows): ``load_s``, ``cpu_s`` (the
  workers', summed) and ``rows_per_s``, the modes alternated.

Each figure is reported per path (every repetition, the median), with ``columns / objects``
of the medians, wall time and the child's CPU time (``time.process_time``). The digests of
both paths and every repetition must be equal (``digests_equal``); children run with
``PYTHONHASHSEED=0`` so that string hashes agree across processes.

    python benchmarks/strings.py --size 1000000 --vocab 1000 100000 --reps 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import subprocess
import sys
import time
import tracemalloc
from typing import Any, Dict, List, Sequence, Tuple

from common import emit, environment, median, note, now, vocabulary

import timelypy as tp

PATHS = {"off": "objects", "auto": "columns"}
"""``TIMELYPY_COLUMNS`` of each path, and its name in the JSON."""
WORKLOADS = ("arrange", "join", "sum", "count_arrow")
MODES = ("tuples", "arrow")
"""How ``count_arrow`` loads its records."""
ARROW_SLICE = 1 << 16
"""Rows per ``update_arrow`` call of ``count_arrow``."""
_MASK = (1 << 61) - 1
WAIT_S = 3600.0
"""The bound on one wait for the probe."""


def records(size: int, vocab: int) -> List[Tuple[str, int]]:
    """``(word, p)`` for ``p < size``, words drawn (seeded) from the vocabulary."""
    words = vocabulary(vocab)
    rnd = random.Random(11)
    return [(words[rnd.randrange(vocab)], p) for p in range(size)]


class Digest:
    """An order-free digest of output updates (``diff * hash(record)`` summed)."""

    def __init__(self) -> None:
        self.value = 0
        self.updates = 0

    def __call__(self, update: Tuple[Any, Any, int]) -> None:
        self.value = (self.value + update[2] * hash(update[0])) & _MASK
        self.updates += 1


def _load(worker: Any, sessions: List[Any], probe: Any, data: List[List[Any]]) -> float:
    start = now()
    for session, part in zip(sessions, data):
        insert = session.insert
        for record in part:
            insert(record)
        session.advance_to(1)
        session.flush()
    worker.step_until(probe, 1, timeout=WAIT_S)
    return now() - start


def run(workload: str, size: int, vocab: int) -> Dict[str, Any]:
    """One workload on the path the environment chooses, in this process."""
    data = records(size, vocab)
    words = vocabulary(vocab)
    digest = Digest()

    def build(worker: Any) -> Dict[str, Any]:
        out: Dict[str, Any] = {}

        def dataflow(scope: Any) -> Tuple[List[Any], Any, Any]:
            session, coll = scope.new_collection()
            if workload == "arrange":
                arranged = coll.arrange_by_key()
                return [session], arranged.stream.probe(), arranged
            if workload == "join":
                other_in, other = scope.new_collection()
                return [session, other_in], coll.join(other).inspect(digest).probe(), None
            summed = coll.map(lambda r: (r[0], r[1] % 100)).sum()
            return [session], summed.inspect(digest).probe(), None

        if workload == "arrange":
            tracemalloc.start()
        sessions, probe, arranged = worker.dataflow(dataflow)
        parts = [data, [(w, len(w)) for w in words]] if workload == "join" else [data]
        cpu = time.process_time()
        out["load_s"] = _load(worker, sessions, probe, parts)
        out["cpu_s"] = time.process_time() - cpu
        if arranged is not None:
            gc.collect()
            held = tracemalloc.get_traced_memory()[0]
            tracemalloc.stop()
            stored = max(1, arranged.spine.stored_updates())
            out["bytes_per_stored_update"] = round(held / stored, 1)
            out["column_batches"] = arranged.spine.column_batches()
        for session in sessions:
            session.close()
        return out

    [result] = tp.execute(build)
    result.update(digest=digest.value, output_updates=digest.updates)
    return result


def run_count_arrow(size: int, vocab: int, mode: str, workers: int) -> Dict[str, Any]:
    """``count_arrow`` in this process (and its worker processes): see the module."""
    import pyarrow as pa

    data = records(size, vocab)
    table = pa.table(
        {"word": pa.array([w for w, _ in data], pa.string()), "n": [p % 16 for _, p in data]}
    )
    pairs = [(w, p % 16) for w, p in data]

    def build(worker: Any) -> Dict[str, Any]:
        import pyarrow.compute  # noqa: F401  (imported once per process, not timed)

        digest = Digest()

        def dataflow(scope: Any) -> Tuple[Any, Any]:
            session, coll = scope.new_collection("words")
            return session, coll.count().inspect(digest).probe()

        session, probe = worker.dataflow(dataflow)
        share = -(-size // worker.peers)
        lo, hi = worker.index * share, min(size, (worker.index + 1) * share)
        session.advance_to(1)  # every worker ready (built, its data unpickled) before timing
        session.flush()
        worker.step_until(probe, 1, timeout=WAIT_S)
        start, cpu = now(), time.process_time()
        if mode == "arrow":
            for at in range(lo, hi, ARROW_SLICE):
                session.update_arrow(table.slice(at, min(ARROW_SLICE, hi - at)), ["word"], ["n"])
        else:
            insert = session.insert
            for record in pairs[lo:hi]:
                insert(record)
        session.advance_to(2)
        session.flush()
        worker.step_until(probe, 2, timeout=WAIT_S)
        elapsed, cpu = now() - start, time.process_time() - cpu
        session.close()
        return {"load_s": elapsed, "cpu_s": cpu, "digest": digest.value, "updates": digest.updates}

    backend = "inline" if workers == 1 else "processes"
    results = tp.execute(build, workers=workers, backend=backend)
    load = max(r["load_s"] for r in results)
    return {
        "load_s": load,
        "cpu_s": sum(r["cpu_s"] for r in results),
        "rows_per_s": round(size / load),
        "digest": sum(r["digest"] for r in results) & _MASK,
        "output_updates": sum(r["updates"] for r in results),
    }


def measure_count_arrow(args: argparse.Namespace, vocab: int) -> Dict[str, Any]:
    """``count_arrow``: both modes alternated, ``--reps`` times each, per worker count."""
    out: Dict[str, Any] = {"vocab": vocab}
    for workers in (1, 2):
        runs: Dict[str, List[Dict[str, Any]]] = {m: [] for m in MODES}
        for rep in range(args.reps):
            for mode in MODES if rep % 2 == 0 else MODES[::-1]:
                note(f"strings: count_arrow N={args.size} V={vocab} {mode} x{workers} ({rep + 1})")
                runs[mode].append(
                    _child(
                        args,
                        "auto",
                        "count_arrow",
                        vocab,
                        ["--mode", mode, "--workers", str(workers)],
                    )
                )
        figures = {
            m: {f: median([r[f] for r in runs[m]]) for f in ("load_s", "cpu_s", "rows_per_s")}
            for m in MODES
        }
        for m in MODES:
            figures[m]["load_s_runs"] = [r["load_s"] for r in runs[m]]
        figures["arrow_over_tuples_rows_per_s"] = round(
            figures["arrow"]["rows_per_s"] / figures["tuples"]["rows_per_s"], 2
        )
        figures["digests_equal"] = len({r["digest"] for rs in runs.values() for r in rs}) == 1
        out[f"workers_{workers}"] = figures
    return out


def _child(
    args: argparse.Namespace, path: str, workload: str, vocab: int, extra: Sequence[str] = ()
) -> Dict[str, Any]:
    env = dict(os.environ, TIMELYPY_COLUMNS=path, PYTHONHASHSEED="0")
    command = [sys.executable, os.path.abspath(__file__), "--child", workload]
    command += ["--size", str(args.size), "--vocab", str(vocab), *extra]
    out = subprocess.run(
        command, env=env, capture_output=True, text=True, check=True, timeout=args.timeout
    )
    return json.loads(out.stdout)


FIGURES = ("load_s", "cpu_s", "bytes_per_stored_update")


def measure(args: argparse.Namespace, workload: str, vocab: int) -> Dict[str, Any]:
    """Both paths, alternated, ``--reps`` times each."""
    runs: Dict[str, List[Dict[str, Any]]] = {p: [] for p in PATHS}
    for rep in range(args.reps):
        for path in list(PATHS) if rep % 2 == 0 else list(PATHS)[::-1]:
            note(f"strings: {workload} N={args.size} V={vocab} {PATHS[path]} (rep {rep + 1})")
            runs[path].append(_child(args, path, workload, vocab))
    out: Dict[str, Any] = {"vocab": vocab}
    for path, name in PATHS.items():
        out[name] = {
            f: {"runs": [r[f] for r in runs[path]], "median": median([r[f] for r in runs[path]])}
            for f in FIGURES
            if f in runs[path][0]
        }
    ratios = {}
    for f in FIGURES:
        if f in out["objects"]:
            a, b = out["objects"][f]["median"], out["columns"][f]["median"]
            ratios[f] = round(b / a, 3) if a else None
    out["columns_over_objects"] = ratios
    digests = {r["digest"] for rs in runs.values() for r in rs}
    out["digests_equal"] = len(digests) == 1
    out["column_batches"] = [r.get("column_batches") for r in runs["auto"]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--child", choices=WORKLOADS, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="arrow", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "count_arrow":
        result = run_count_arrow(args.size, args.vocab[0], args.mode, args.workers)
        print(json.dumps(result))
        return
    if args.child:
        print(json.dumps(run(args.child, args.size, args.vocab[0])))
        return
    result: Dict[str, Any] = {
        "benchmark": "strings",
        "size": args.size,
        "reps": args.reps,
        "environment": environment(),
    }
    for workload in args.workloads:
        if workload == "count_arrow":
            result[workload] = [measure_count_arrow(args, v) for v in args.vocab]
        else:
            result[workload] = [measure(args, workload, v) for v in args.vocab]
    emit(result)


if __name__ == "__main__":
    main()
