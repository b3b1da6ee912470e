"""Bytewax 0.21: the queries with ``bytewax.operators.windowing`` on one worker (``run_main``).

* the source hands over the stream in batches (a ``DynamicSource`` partition's
  ``next_batch``), and its end (EOF) closes every window;
* event time: an ``EventClock`` on the event's time (``datetime`` = the epoch + its ms), with
  ``wait_for_system_duration`` = the disorder, so that its watermark is ``max(event time seen) -
  disorder`` as in the other systems. Bytewax's clock also adds the system time elapsed since
  the newest event to the watermark; ``now_getter`` is a fixed instant here so that a pause of
  the process cannot make an event late (the other systems' watermarks do not move with the
  wall clock either), and ``to_system_utc`` returns ``None`` (no wake-ups: windows close on
  items and at EOF);
* windows: ``SlidingWindower(length, offset=hop)`` (q5), ``TumblingWindower`` (q7, q8), aligned
  to the epoch so that window ``i`` starts at ``i * hop`` (``i * size``) ms; open times inclusive,
  close times exclusive, closed once the watermark reaches the close time;
* q5: ``count_window`` keyed by auction; q7: ``max_window`` by price on one key; q8:
  ``join_window`` of persons keyed by id and auctions keyed by seller (``insert_mode="last"``,
  ``emit_mode="final"``: one row per key at the window's close, ``None`` for a side that had
  nothing), keeping the keys where both sides are present.

The sink records the wall time each window's first result arrives.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

import nexmark

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def query_stream(query: str, stream: Any, params: Dict[str, Any]) -> Any:
    """The query's result rows ``(start, ...)`` as a Bytewax stream, from the event stream."""
    import bytewax.operators as op
    from bytewax.operators.windowing import (
        EventClock,
        SlidingWindower,
        TumblingWindower,
        count_window,
        join_window,
        max_window,
    )

    size, hop, disorder = params["size"], params["hop"], params["disorder"]
    clock = EventClock(
        ts_getter=_ts,
        wait_for_system_duration=timedelta(milliseconds=disorder),
        now_getter=_fixed_now,
        to_system_utc=_no_wakeup,
    )
    tumbling = TumblingWindower(length=timedelta(milliseconds=size), align_to=EPOCH)
    if query == "q5":
        bids = op.filter("bids", stream, lambda e: e[0] == nexmark.BID)
        windower = SlidingWindower(
            length=timedelta(milliseconds=size), offset=timedelta(milliseconds=hop), align_to=EPOCH
        )
        counts = count_window("count", bids, clock, windower, key=lambda e: str(e[1]))
        return op.map("row", counts.down, lambda kv: (kv[1][0] * hop, int(kv[0]), kv[1][1]))
    if query == "q7":
        bids = op.key_on("one", op.filter("bids", stream, lambda e: e[0] == nexmark.BID), _one)
        best = max_window("max", bids, clock, tumbling, by=lambda e: e[3])
        return op.map("row", best.down, lambda kv: (kv[1][0] * size, kv[1][1][3]))
    if query == "q8":
        persons = op.key_on(
            "persons", op.filter("p", stream, lambda e: e[0] == nexmark.PERSON), lambda e: str(e[1])
        )
        sellers = op.key_on(
            "sellers",
            op.filter("a", stream, lambda e: e[0] == nexmark.AUCTION),
            lambda e: str(e[2]),
        )
        joined = join_window(
            "join", clock, tumbling, persons, sellers, insert_mode="last", emit_mode="final"
        )
        both = op.filter("both", joined.down, lambda kv: None not in kv[1][1])
        return op.map("row", both, lambda kv: (kv[1][0] * size, int(kv[0])))
    raise ValueError(f"bytewax peer: unknown query {query!r}")


def run(query: str, events: List[Any], params: Dict[str, Any], options: Dict[str, Any]) -> Any:
    import bytewax
    import bytewax.operators as op
    from bytewax.dataflow import Dataflow
    from bytewax.inputs import DynamicSource, StatelessSourcePartition
    from bytewax.outputs import DynamicSink, StatelessSinkPartition
    from bytewax.testing import run_main

    emitted: List[Tuple[int, float]] = []
    final: List[float] = []
    first: List[float] = []
    seen: Dict[int, float] = {}
    rows: List[Tuple[int, ...]] = []

    class Batches(StatelessSourcePartition):
        def __init__(self) -> None:
            self.it = nexmark.batches(events, params["batch"], params["disorder"])

        def next_batch(self) -> List[Any]:
            if not first:
                first.append(time.perf_counter())
            try:
                batch, watermark = next(self.it)
            except StopIteration:
                final.append(time.perf_counter())
                raise
            emitted.append((watermark, time.perf_counter()))
            return batch

    class Source(DynamicSource):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Batches:
            return Batches()

    class Rows(StatelessSinkPartition):
        def write_batch(self, items: List[Tuple[int, ...]]) -> None:
            at = time.perf_counter()
            for row in items:
                rows.append(row)
                end = row[0] + params["size"]
                if end not in seen:
                    seen[end] = at

    class Sink(DynamicSink):
        def build(self, step_id: str, worker_index: int, worker_count: int) -> Rows:
            return Rows()

    flow = Dataflow(f"nexmark_{query}")
    op.output("rows", query_stream(query, op.input("events", flow, Source()), params), Sink())
    start = time.perf_counter()
    run_main(flow)
    done = time.perf_counter()
    began = first[0] if first else start
    return {
        "rows": rows,
        "seen": seen,
        "emitted": emitted,
        "final_at": final[0] if final else time.perf_counter(),
        "seconds": done - began,
        "startup_s": round(began - start, 4),
        "how": "bytewax.operators.windowing, run_main (one worker)",
        "bytewax": getattr(bytewax, "__version__", None),
    }


def _ts(e: Any) -> datetime:
    return EPOCH + timedelta(milliseconds=e[4])


def _fixed_now() -> datetime:
    return EPOCH


def _no_wakeup(_t: datetime) -> Optional[datetime]:
    return None


def _one(_e: Any) -> str:
    return "all"
