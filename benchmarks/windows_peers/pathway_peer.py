"""Pathway 0.33: the queries with ``Table.windowby`` on one worker (``PATHWAY_THREADS=1``).

* the stream comes in through a ``pw.io.python.ConnectorSubject`` (a thread of the process)
  that sends a batch's events with ``next`` and then ``commit``\\ s it (one Pathway time per
  batch; no autocommit);
* event time: the event's ``t`` column (int ms); windows ``pw.temporal.sliding(hop, duration)``
  (q5) and ``pw.temporal.tumbling(duration)`` (q7, q8) from origin 0, with
  ``pw.temporal.exactly_once_behavior(shift=disorder)``: a window's result is emitted once, when
  the greatest event time seen reaches its end plus the disorder (the watermark of the other
  systems passing its end), and records later than that would be ignored (none are);
* q5: ``windowby(t, sliding, instance=auction).reduce(count)``; q7: ``windowby(t, tumbling)``
  ``.reduce(max(price))``; q8: persons and auctions in one table keyed by the person (the
  seller for an auction), ``windowby(t, tumbling, instance=person)`` and a window kept when it
  holds both a person and an auction: the windowed join as a grouped window, so that it too
  emits once per window at its close (``pw.temporal.window_join`` would emit and revise
  rows while the window is open).

``pw.io.subscribe`` records the wall time each window's first result arrives.
"""

from __future__ import annotations

import time
from time import perf_counter
from typing import Any, Dict, List, Tuple

import nexmark


def query_table(query: str, table: Any, params: Dict[str, Any]) -> Tuple[Any, Tuple[str, ...]]:
    """The query's result table from the events table, and its columns in row order."""
    import pathway as pw

    size, hop = params["size"], params["hop"]
    behavior = pw.temporal.exactly_once_behavior(shift=params["disorder"])
    tumbling = pw.temporal.tumbling(duration=size, origin=0)
    if query == "q5":
        bids = table.filter(pw.this.kind == nexmark.BID)
        result = bids.windowby(
            pw.this.t,
            window=pw.temporal.sliding(hop=hop, duration=size, origin=0),
            instance=pw.this.a,
            behavior=behavior,
        ).reduce(start=pw.this._pw_window_start, auction=pw.this._pw_instance,
                 n=pw.reducers.count())  # fmt: skip
        return result, ("start", "auction", "n")
    if query == "q7":
        bids = table.filter(pw.this.kind == nexmark.BID)
        result = bids.windowby(pw.this.t, window=tumbling, behavior=behavior).reduce(
            start=pw.this._pw_window_start, price=pw.reducers.max(pw.this.c)
        )
        return result, ("start", "price")
    if query == "q8":
        people = table.filter(pw.this.kind != nexmark.BID).select(
            person=pw.if_else(pw.this.kind == nexmark.PERSON, pw.this.a, pw.this.b),
            is_person=pw.if_else(pw.this.kind == nexmark.PERSON, 1, 0),
            is_auction=pw.if_else(pw.this.kind == nexmark.AUCTION, 1, 0),
            t=pw.this.t,
        )
        grouped = people.windowby(
            pw.this.t, window=tumbling, instance=pw.this.person, behavior=behavior
        ).reduce(
            start=pw.this._pw_window_start,
            person=pw.this._pw_instance,
            persons=pw.reducers.max(pw.this.is_person),
            auctions=pw.reducers.max(pw.this.is_auction),
        )
        result = grouped.filter((pw.this.persons == 1) & (pw.this.auctions == 1))
        return result, ("start", "person")
    raise ValueError(f"pathway peer: unknown query {query!r}")


def run(query: str, events: List[Any], params: Dict[str, Any], options: Dict[str, Any]) -> Any:
    import pathway as pw

    size = params["size"]
    emitted: List[Tuple[int, float]] = []
    final: List[float] = []
    first: List[float] = []
    seen: Dict[int, float] = {}
    rows: Dict[Any, Tuple[int, ...]] = {}

    class Events(pw.Schema):
        kind: int
        a: int
        b: int
        c: int
        t: int

    class Subject(pw.io.python.ConnectorSubject):
        def run(self) -> None:
            first.append(time.perf_counter())
            for batch, watermark in nexmark.batches(events, params["batch"], params["disorder"]):
                for e in batch:
                    self.next(kind=e[0], a=e[1], b=e[2], c=e[3], t=e[4])
                self.commit()
                emitted.append((watermark, time.perf_counter()))
            final.append(time.perf_counter())

    table = pw.io.python.read(Subject(), schema=Events, autocommit_duration_ms=None)
    result, columns = query_table(query, table, params)

    def on_change(key: Any, row: Dict[str, Any], time: int, is_addition: bool) -> None:
        if is_addition:
            out = tuple(row[c] for c in columns)
            rows[key] = out
            end = out[0] + size
            if end not in seen:
                seen[end] = perf_counter()
        else:
            rows.pop(key, None)

    pw.io.subscribe(result, on_change=on_change)
    start = time.perf_counter()
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    done = time.perf_counter()
    began = first[0] if first else start
    return {
        "rows": list(rows.values()),
        "seen": seen,
        "emitted": emitted,
        "final_at": final[0] if final else time.perf_counter(),
        "seconds": done - began,
        "startup_s": round(began - start, 4),
        "how": "pathway windowby + exactly_once_behavior, python connector, one thread",
        "pathway": getattr(pw, "__version__", None),
    }
