"""Memory: bytes per stored update of an arrangement, and the peak of the skip-level open loop.

Two measurements, each in a fresh process of its own (this script runs itself once per mode):

* ``arrangement``: N pairs ``(p // 2, p)`` arranged by key at time 0, then ``--changes``
  modifications ``remove((p // 2, p)); insert((p // 3, p))`` at times 1, 2, ... (open loop),
  with ``tracemalloc`` counting what the dataflow allocated and still holds: bytes per stored
  update (the spine's ``(key, val, time, diff)`` entries) and per live update (the
  consolidated collection), and how many updates are stored against live.
* ``skip-level``: the Differential Dataflow book's skip-level program,
  ``manages.map(swap).join(manages)``, load N then N - 1 modifications in one open loop (as the
  comparison with the Rust engines runs it, output counted but not kept): peak RSS, and the
  RSS of the input data alone before the dataflow starts.

    python benchmarks/memory.py --size 1000000 --changes 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tracemalloc
from typing import Any, Dict

from common import add_profile_argument, emit, environment, note, now, profiled

import timelypy as tp


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def arrangement(n: int, changes: int) -> Dict[str, Any]:
    """Traced bytes held by one arrangement of n pairs after ``changes`` modifications."""

    def build(worker):
        def define(scope):
            session, manages = scope.new_collection()
            arranged = manages.arrange_by_key()
            return session, arranged, arranged.stream.probe()

        tracemalloc.start()
        session, arranged, probe = worker.dataflow(define)
        for p in range(n):
            session.insert((p // 2, p))
        session.advance_to(1)
        session.flush()
        while probe.less_than(1):
            worker.step()
        for p in range(1, min(changes, n - 1) + 1):
            session.advance_to(p + 1)
            session.remove((p // 2, p))
            session.insert((p // 3, p))
        session.advance_to(changes + 2)
        session.flush()
        while probe.less_than(changes + 2):
            worker.step()
        spine = arranged.spine
        spine.compact()
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        stored = spine.stored_updates()
        return {
            "traced_bytes": held,
            "stored_updates": stored,
            "live_updates": n,
            "keys": len(spine.keys()),
            "batches": len(spine.batches),
        }

    started = now()
    [r] = tp.execute(build)
    r.update(
        seconds=round(now() - started, 2),
        bytes_per_stored_update=round(r["traced_bytes"] / max(1, r["stored_updates"]), 1),
        bytes_per_live_update=round(r["traced_bytes"] / max(1, r["live_updates"]), 1),
    )
    return r


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
    add_profile_argument(parser)
    args = parser.parse_args()
    changes = args.size if args.changes is None else args.changes
    if args.mode == "both":
        result: Dict[str, Any] = {
            "benchmark": "memory",
            "size": args.size,
            "changes": changes,
            "environment": environment(),
        }
        for mode in ("arrangement", "skip-level"):
            note(f"memory: {mode} at {args.size} in a process of its own")
            out = subprocess.run(
                [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--size",
                    str(args.size),
                    "--changes",
                    str(changes),
                    "--mode",
                    mode,
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            result[mode] = json.loads(out.stdout)[mode]
        emit(result)
        return
    with profiled(args, "memory"):
        measure = (
            arrangement(args.size, changes) if args.mode == "arrangement" else skip_level(args.size)
        )
    emit(
        {
            "benchmark": "memory",
            "size": args.size,
            "changes": changes,
            "environment": environment(),
            args.mode: measure,
        }
    )


if __name__ == "__main__":
    main()
