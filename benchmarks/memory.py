"""Memory: bytes per stored update of an arrangement, and the peak of the skip-level open loop.

Two measurements, each on both paths, each in a fresh process of its own (this script runs
itself once per mode and path: ``TIMELYPY_COLUMNS=off``, the object path, and ``auto``, columns
where the records allow; ``--paths`` picks them):

* ``arrangement``: N pairs ``(p // 2, p)`` arranged by key at time 0, then ``--changes``
  modifications ``remove((p // 2, p)); insert((p // 3, p))`` at times 1, 2, ... (open loop),
  with ``tracemalloc`` counting what the dataflow allocated and still holds: bytes per stored
  update (the spine's ``(key, val, time, diff)`` entries) and per live update (the
  consolidated collection), and how many updates are stored against live. Measured twice:
  as the run leaves it (workers run with the cyclic collector paused, so garbage in reference
  cycles is still held) and after a ``gc.collect()``. The column batches' own size
  (``ColumnBatch.nbytes()``, dictionaries of strings included) is reported beside it, per
  update they store. ``--keys strings`` makes the keys words instead of ints: manager ``m`` is
  the word ``m % --vocab`` of a vocabulary of words of 3 to 12 letters (so the column path
  keeps them as codes into per-batch dictionaries).
* ``skip-level``: the Differential Dataflow book's skip-level program,
  ``manages.map(swap).join(manages)``, load N then N - 1 modifications in one open loop (as the
  comparison with the Rust engines runs it, output counted but not kept): peak RSS, and the
  RSS of the input data alone before the dataflow starts.

Each measure gives both paths and ``columns_over_objects`` (below 1: columns take less).

    python benchmarks/memory.py --size 1000000 --changes 1000000
    python benchmarks/memory.py --size 1000000 --mode arrangement --keys strings --vocab 100000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tracemalloc
from typing import Any, Dict, List

from common import add_profile_argument, emit, environment, note, now, profiled, vocabulary

import timelypy as tp
from timelypy.differential.trace.column_batch import ColumnBatch

PATHS = {"objects": "off", "columns": "auto"}
"""``TIMELYPY_COLUMNS`` per path."""


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def arrangement(n: int, changes: int, vocab: int = 0) -> Dict[str, Any]:
    """Traced bytes held by one arrangement of n pairs after ``changes`` modifications (keys
    are words of a vocabulary of ``vocab`` when it is not 0)."""
    words = vocabulary(vocab) if vocab else []

    def key(m: int) -> Any:
        return words[m % vocab] if vocab else m

    def build(worker):
        def define(scope):
            session, manages = scope.new_collection()
            arranged = manages.arrange_by_key()
            return session, arranged, arranged.stream.probe()

        tracemalloc.start()
        session, arranged, probe = worker.dataflow(define)
        for p in range(n):
            session.insert((key(p // 2), p))
        session.advance_to(1)
        session.flush()
        while probe.less_than(1):
            worker.step()
        for p in range(1, min(changes, n - 1) + 1):
            session.advance_to(p + 1)
            session.remove((key(p // 2), p))
            session.insert((key(p // 3), p))
        session.advance_to(changes + 2)
        session.flush()
        while probe.less_than(changes + 2):
            worker.step()
        spine = arranged.spine
        spine.compact()
        held = tracemalloc.get_traced_memory()[0]
        gc.collect()
        held_after_collect = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return {
            "traced_bytes": held,
            "traced_bytes_after_collect": held_after_collect,
            "stored_updates": spine.stored_updates(),
            "live_updates": n,
            **_batch_sizes(spine.batches),
            "keys": len(spine.keys()),
        }

    started = now()
    [r] = tp.execute(build)
    stored, live = max(1, r["stored_updates"]), max(1, r["live_updates"])
    r.update(
        seconds=round(now() - started, 2),
        bytes_per_stored_update=round(r["traced_bytes"] / stored, 1),
        bytes_per_live_update=round(r["traced_bytes"] / live, 1),
        bytes_per_stored_update_after_collect=round(r["traced_bytes_after_collect"] / stored, 1),
    )
    return r


def _batch_sizes(batches: List[Any]) -> Dict[str, Any]:
    """How many batches there are, how many keep columns, and the columns' bytes per update
    they store."""
    columns = [b for b in batches if type(b) is ColumnBatch]
    column_updates = sum(b.count for b in columns)
    column_bytes = sum(b.nbytes() for b in columns)
    return {
        "batches": len(batches),
        "column_batches": len(columns),
        "column_updates": column_updates,
        "column_bytes": column_bytes,
        "column_bytes_per_update": round(column_bytes / column_updates, 1)
        if column_updates
        else None,
    }


def skip_level(n: int) -> Dict[str, Any]:
    """Peak RSS of the skip-level open loop (load n, n - 1 modifications, output counted)."""
    initial = [(p // 2, p) for p in range(n)]
    changes = [(p, (p // 2, p), (p // 3, p)) for p in range(1, n)]
    data_mb = _rss_mb()

    def build(worker):
        totals = [0, 0]

        def count(update):
            totals[0] += 1
            totals[1] += update[2]

        def define(scope):
            session, manages = scope.new_collection()
            probe = manages.map(lambda mp: (mp[1], mp[0])).join(manages).inspect(count).probe()
            return session, probe

        session, probe = worker.dataflow(define)
        for record in initial:
            session.insert(record)
        session.advance_to(1)
        session.flush()
        while probe.less_than(1):
            worker.step()
        for t, old, new in changes:
            session.remove(old)
            session.insert(new)
            session.advance_to(t + 1)
        session.close()
        while worker.step():
            pass
        return totals

    started = now()
    [(updates, net)] = tp.execute(build)
    return {
        "seconds": round(now() - started, 2),
        "output_updates": updates,
        "output_net": net,
        "data_rss_mb": round(data_mb, 1),
        "peak_rss_mb": round(_peak_mb(), 1),
        "peak_over_data_mb": round(_peak_mb() - data_mb, 1),
    }


RATIOS = {
    "arrangement": (
        "bytes_per_stored_update",
        "bytes_per_stored_update_after_collect",
        "bytes_per_live_update",
    ),
    "skip-level": ("peak_rss_mb", "peak_over_data_mb", "seconds"),
}
"""The figures given as ``columns / objects`` per mode."""


def _measure_in_child(args: argparse.Namespace, mode: str, path: str, changes: int) -> Any:
    """One mode on one path, in a process of its own (bounded by ``--timeout``)."""
    env = dict(os.environ, TIMELYPY_COLUMNS=PATHS[path])
    command = [sys.executable, os.path.abspath(__file__), "--size", str(args.size)]
    command += ["--changes", str(changes), "--mode", mode]
    command += ["--keys", args.keys, "--vocab", str(args.vocab)]
    out = subprocess.run(
        command, env=env, capture_output=True, text=True, check=True, timeout=args.timeout
    )
    return json.loads(out.stdout)[mode]


def _side_by_side(mode: str, by_path: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = dict(by_path)
    if "objects" in by_path and "columns" in by_path:
        ratios = {}
        for name in RATIOS[mode]:
            objects, columns = by_path["objects"].get(name), by_path["columns"].get(name)
            ratios[name] = round(columns / objects, 3) if objects and columns else None
        out["columns_over_objects"] = ratios
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument(
        "--changes",
        type=int,
        default=None,
        help="modifications in the arrangement measure (default: --size)",
    )
    parser.add_argument("--mode", choices=["both", "arrangement", "skip-level"], default="both")
    parser.add_argument(
        "--paths",
        nargs="+",
        choices=sorted(PATHS),
        default=["objects", "columns"],
        help="the paths measured by --mode both (each a process of its own)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a measure may take")
    parser.add_argument(
        "--keys",
        choices=["ints", "strings"],
        default="ints",
        help="the arrangement's keys: ints, or words of a vocabulary of --vocab",
    )
    parser.add_argument("--vocab", type=int, default=100_000, help="words, with --keys strings")
    add_profile_argument(parser)
    args = parser.parse_args()
    changes = args.size if args.changes is None else args.changes
    if args.mode == "both":
        result: Dict[str, Any] = {
            "benchmark": "memory",
            "size": args.size,
            "changes": changes,
            "keys": args.keys,
            "vocab": args.vocab if args.keys == "strings" else None,
            "environment": environment(),
        }
        modes = ("arrangement", "skip-level") if args.keys == "ints" else ("arrangement",)
        for mode in modes:
            by_path = {}
            for path in args.paths:
                note(f"memory: {mode} at {args.size}, {path} path, in a process of its own")
                by_path[path] = _measure_in_child(args, mode, path, changes)
            result[mode] = _side_by_side(mode, by_path)
        emit(result)
        return
    with profiled(args, "memory"):
        measure = (
            arrangement(args.size, changes, args.vocab if args.keys == "strings" else 0)
            if args.mode == "arrangement"
            else skip_level(args.size)
        )
    emit(
        {
            "benchmark": "memory",
            "size": args.size,
            "changes": changes,
            "columns": os.environ.get("TIMELYPY_COLUMNS", "auto"),
            "environment": environment(),
            args.mode: measure,
        }
    )


if __name__ == "__main__":
    main()
