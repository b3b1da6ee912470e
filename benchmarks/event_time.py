"""Event-time input: how fast records go into a session at their event times.

usage: python benchmarks/event_time.py [--events N] [--bound B] [--batch K]
                                       [--backend inline|processes] [--workers W]

``--events`` records ``i`` with event times ``i // 10 - (i % 7)`` (increasing, with disorder up
to 6 units: with ``--bound`` 5 about one in twenty comes behind the watermark) go through an
``EventTimeInput`` (``push_many``, ``batch`` records per hand-over) into a session that counts
them per key; then the input finishes and the session waits. Reports pushes per second for the
adapter alone (stamping, buffering, the session's checks of each batch, one advance per batch)
and for the whole run with the dataflow's work, and the same events pushed one by one with
``update_at`` and ``advance_to`` per event for a sample (a round trip each), for comparison.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
from typing import Any, Dict

from common import emit, environment, now

import timelypy as tp
from timelypy.windows import EventTimeInput


def dataflow(scope: Any) -> Dict[str, Any]:
    events_in, events = scope.new_collection()
    counts = events.map(lambda r: r % 10).count()
    return {"events": events_in, "probe": counts.probe()}


def event_time(i: int) -> int:
    return max(0, i // 10 - (i % 7))


def adapter(args: Any) -> Dict[str, Any]:
    with tp.open_session(dataflow, backend=args.backend, workers=args.workers, timeout=600) as s:
        feed = EventTimeInput(s, "events", max_out_of_orderness=args.bound, batch=args.batch)
        start = now()
        feed.push_many((i, event_time(i), 1) for i in range(args.events))
        pushed = now() - start
        feed.finish()
        s.wait("probe")
        total = now() - start
    return {
        "events": args.events,
        "behind": feed.behind,
        "pushes_per_s": round(args.events / pushed),
        "with_dataflow_per_s": round(args.events / total),
    }


def one_by_one(args: Any, sample: int) -> Dict[str, Any]:
    """The naive road: ``update_at`` and ``advance_to`` for every event."""
    with tp.open_session(dataflow, backend=args.backend, workers=args.workers, timeout=600) as s:
        start, watermark, latest = now(), 0, None
        for i in range(sample):
            et = event_time(i)
            s.update_at("events", i, max(et, watermark), 1)
            latest = et if latest is None else max(latest, et)
            if latest - args.bound > watermark:
                watermark = latest - args.bound
                s.advance_to(watermark)
        s.advance_to(watermark + 1)
        s.wait("probe")
        elapsed = now() - start
    return {"events": sample, "per_s": round(sample / elapsed)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--bound", type=int, default=5)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--backend", default="inline", choices=["inline", "processes"])
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    emit(
        {
            "benchmark": "event_time",
            "environment": environment(),
            "arguments": vars(args),
            "event_time_input": adapter(args),
            "update_at_per_event": one_by_one(args, min(args.events, 20_000)),
        }
    )


if __name__ == "__main__":
    main()
