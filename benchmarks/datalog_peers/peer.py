"""One system's run of one Datalog workload, in a process of its own (``benchmarks/datalog.py``
starts it; it is not meant to be run by hand, though it can be).

    python benchmarks/datalog_peers/peer.py --system duckdb --spec '{"workload": "tc"}'

Prints one JSON line per phase on stdout as soon as the phase ends (``"phase": "initial"``,
then ``"phase": "changes"``), so that the parent keeps what was measured when it has to stop a
slow system at its time limit:

* ``initial``: seconds to load the input facts and evaluate the program until the output is
  complete (``initial_s``), the output's size and digest;
* ``changes``: for each change (insert or remove one fact, then wait until the output is
  complete again) its latency; stops early after ``--change-budget`` seconds
  (``changes_done`` says how many ran); the five slowest changes (``[index, µs]``); the final
  output's size and digest.

Every line also has the process's peak resident memory so far (``peak_rss_mb``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.dirname(HERE))

from common import latency_stats_us, slowest  # noqa: E402
from workloads import Workload, build, digest  # noqa: E402

SYSTEMS = ("timelypy", "duckdb", "pydbsp")


def make_peer(system: str, workload: Workload, options: Dict[str, Any]) -> Any:
    """The system's peer object (``load``, ``change``, ``output``, ``close``, ``describe``)."""
    if system == "timelypy":
        from timelypy_peer import TimelypyPeer

        return TimelypyPeer(workload, options)
    if system == "duckdb":
        from duckdb_peer import DuckDBPeer

        return DuckDBPeer(workload, options)
    if system == "pydbsp":
        from pydbsp_peer import PydbspPeer

        return PydbspPeer(workload, options)
    raise ValueError(f"datalog benchmark: unknown system {system!r} (known: {SYSTEMS})")


def _line(obj: Dict[str, Any]) -> None:
    # ru_maxrss is in KiB on Linux: the process's peak resident memory so far.
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(json.dumps({**obj, "peak_rss_mb": peak}), flush=True)


def run(system: str, spec: Dict[str, Any], options: Dict[str, Any], change_budget: float) -> None:
    workload = build(spec)
    peer = make_peer(system, workload, options)
    try:
        start = time.perf_counter()
        peer.load(workload.facts)
        initial_s = time.perf_counter() - start
        out = peer.output()
        _line(
            {
                "phase": "initial",
                "initial_s": round(initial_s, 4),
                "output_size": len(out),
                "digest": digest(out),
                **peer.describe(),
            }
        )
        latencies: List[float] = []
        deadline = time.perf_counter() + change_budget
        for relation, fact, diff in workload.changes:
            if time.perf_counter() > deadline:
                break
            t = time.perf_counter()
            peer.change(relation, fact, diff)
            latencies.append(time.perf_counter() - t)
        out = peer.output()
        complete = len(latencies) == len(workload.changes)
        _line(
            {
                "phase": "changes",
                "changes_done": len(latencies),
                "complete": complete,
                "latency": latency_stats_us(latencies),
                "slowest": slowest(latencies),
                "output_size": len(out),
                "digest": digest(out),
            }
        )
    finally:
        peer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", choices=SYSTEMS, required=True)
    ap.add_argument("--spec", required=True, help="the workload as JSON (see workloads.build)")
    ap.add_argument("--options", default="{}", help="the system's options as JSON")
    ap.add_argument("--change-budget", type=float, default=600.0, help="seconds for changes")
    ap.add_argument(
        "--memory-limit-gb", type=float, default=0.0, help="address space limit (0: none)"
    )
    args = ap.parse_args()
    if args.memory_limit_gb > 0:
        limit = int(args.memory_limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    run(args.system, json.loads(args.spec), json.loads(args.options), args.change_budget)


if __name__ == "__main__":
    main()
