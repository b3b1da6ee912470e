"""One system's run of one windowed query, in a process of its own (``benchmarks/windows.py``
starts it; it can be run by hand too).

    python benchmarks/windows_peers/peer.py --system timelypy --query q7 \\
        --spec '{"events": 100000}'

Generates the seeded Nexmark-style stream (:mod:`nexmark`) in memory first (not timed), then
hands it to the system in batches of ``batch`` events, each followed by the watermark
``max(event times seen) - disorder``, and at the end closes every window. Prints one JSON
line:

* ``seconds`` / ``events_per_s``: from the first event handed over to the last window's result
  received (every event is pushed, every kind: each query filters the stream itself); the
  system's start-up before it asks for the first batch is apart (``startup_s``, peers);
* ``window_close_latency``: per window, the seconds from the moment the batch whose watermark
  passed the window's end was handed over (or the end of the input) to the moment the
  window's result was seen at the output: median / p90 / p99 / max (µs);
* ``results`` and ``digest``: the final window results (sorted tuples, see :mod:`nexmark`);
* ``peak_rss_mb``: the process's peak resident memory (the generated stream included; it is
  frozen out of the cyclic garbage collector's scans, ``gc.freeze``, before the system starts).

``--query memory`` (timelypy only) is the bounded-memory workload instead: a sliding-window
count over a stream generated as it is pushed, RSS sampled every ``sample_every`` events
(``timelypy_peer.memory``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from typing import Any, Dict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import nexmark  # noqa: E402

SYSTEMS = ("timelypy", "bytewax", "pathway")
DEFAULTS: Dict[str, Any] = {
    "events": 100_000,
    "seed": 1,
    "rate": 1000,
    "disorder": 500,
    "size": 10_000,
    "hop": 2_000,
    "batch": 1000,
}


def _stats_us(seconds: Any) -> Dict[str, Any]:
    if not seconds:
        return {"count": 0}
    us = sorted(s * 1e6 for s in seconds)
    n = len(us)

    def q(p: float) -> float:
        return round(us[min(n - 1, max(0, int(p * n + 0.999999) - 1))], 1)

    return {
        "count": n,
        "median_us": q(0.5),
        "p90_us": q(0.9),
        "p99_us": q(0.99),
        "max_us": round(us[-1], 1),
    }


def peak_rss_mb() -> int:
    """The process's peak resident memory so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def make_runner(system: str) -> Any:
    """The system's ``run(query, events, params, options) -> dict`` function."""
    if system == "timelypy":
        from timelypy_peer import run
    elif system == "bytewax":
        from bytewax_peer import run
    elif system == "pathway":
        from pathway_peer import run
    else:
        raise ValueError(f"windows benchmark: unknown system {system!r} (known: {SYSTEMS})")
    return run


def run(system: str, query: str, spec: Dict[str, Any], options: Dict[str, Any]) -> Dict[str, Any]:
    params = {**DEFAULTS, **spec}
    runner = make_runner(system)
    started = time.perf_counter()
    events = list(
        nexmark.events(params["events"], params["seed"], params["rate"], params["disorder"])
    )
    generate_s = time.perf_counter() - started
    # The stream is the harness's, not the system's: keep it out of the cyclic collector's
    # full scans (about a second per collection at 10^6 tuples, charged to whichever system
    # happened to trigger it).
    gc.collect()
    gc.freeze()
    out = runner(query, events, params, options)
    rows = out.pop("rows")
    seen = out.pop("seen")
    latencies = nexmark.close_latencies(seen, out.pop("emitted"), out.pop("final_at"))
    seconds = out.pop("seconds")
    return {
        "system": system,
        "query": query,
        "events": len(events),
        "generate_s": round(generate_s, 3),
        "seconds": round(seconds, 4),
        "events_per_s": round(len(events) / seconds) if seconds > 0 else None,
        "window_close_latency": _stats_us(latencies),
        "windows_closed": len(seen),
        "results": len(rows),
        "digest": nexmark.digest(rows),
        "peak_rss_mb": peak_rss_mb(),
        **out,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", choices=SYSTEMS, required=True)
    ap.add_argument("--query", choices=nexmark.QUERIES + ("memory",), required=True)
    ap.add_argument("--spec", default="{}", help="stream and window sizes as JSON (DEFAULTS)")
    ap.add_argument("--options", default="{}", help="the system's options as JSON")
    args = ap.parse_args()
    spec, options = json.loads(args.spec), json.loads(args.options)
    if args.query == "memory":
        if args.system != "timelypy":
            raise SystemExit("windows benchmark: the memory workload runs on timelypy only")
        from timelypy_peer import memory

        result = {**memory({**DEFAULTS, **spec}, options), "peak_rss_mb": peak_rss_mb()}
    else:
        result = run(args.system, args.query, spec, options)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
