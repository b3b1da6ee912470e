"""timelypy: the queries as windowed collections over one input of events stamped with their
event times, the input advanced to the watermark after every batch.

Two ways to write the queries (``options["path"]``):

* ``windows``: :func:`timelypy.windows.windowed` with ``Sliding`` / ``Tumbling`` specs and its
  ``count`` / ``max`` / ``join`` (used when ``timelypy.windows`` has them);
* ``direct``: the same shape by hand: records keyed by ``((start, end), key)``, kept from the
  window's end until just after it (``Collection.temporal_filter``), aggregated with ``count`` /
  ``reduce`` / ``join``, and the results frozen at the end plus one (``freeze_at``) so that the
  aggregation's state compacts away once the window closed.

The driver (a :func:`timelypy.open_session`, ``workers`` / ``backend`` in the options) pushes a
batch with ``update_many(times=event times)``, advances the input to the watermark, waits on the
output's probe and reads the output's changes (when each window's result was first seen).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

import nexmark

PERSON, AUCTION, BID = nexmark.PERSON, nexmark.AUCTION, nexmark.BID


def windows_available() -> bool:
    """Whether ``timelypy.windows`` has the windowed API (it is built beside this benchmark)."""
    try:
        from timelypy.windows import Sliding, Tumbling, windowed  # noqa: F401
    except ImportError:
        return False
    return True


def _et(e: Any) -> int:
    return e[4]


# ---------------------------------------------------------------- the "windows" path
def windows_query(query: str, events: Any, size: int, hop: int) -> Any:
    """The query with :mod:`timelypy.windows`; rows ``(start, ...)`` via :func:`row_of`."""
    from timelypy.windows import Sliding, Tumbling, windowed

    if query == "q5":
        bids = events.filter(lambda e: e[0] == BID).map(lambda e: (e[1], e))
        return windowed(bids, Sliding(size, hop), _et, name="q5").count()
    if query == "q7":
        bids = events.filter(lambda e: e[0] == BID).map(lambda e: (0, e))
        return windowed(bids, Tumbling(size), _et, name="q7").max(lambda e: e[3])
    if query == "q8":
        persons = events.filter(lambda e: e[0] == PERSON).map(lambda e: (e[1], e))
        sellers = events.filter(lambda e: e[0] == AUCTION).map(lambda e: (e[2], e))
        spec = Tumbling(size)
        joined = windowed(persons, spec, _et, name="q8.persons").join(
            windowed(sellers, spec, _et, name="q8.auctions")
        )
        return joined.map(lambda r: r[0]).distinct()
    raise ValueError(f"timelypy peer: unknown query {query!r}")


# ---------------------------------------------------------------- the "direct" path
def _end(r: Any) -> int:
    return r[0][1]


def _key_end(r: Any) -> int:
    return r[0][0][1]


def _open(c: Any, end: Callable[[Any], int]) -> Any:
    """Each record from its window's end until just after it (the window cannot change)."""
    return c.temporal_filter(lower=end, upper=lambda r: end(r) + 1)


def _max_logic(key: Any, vals: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
    present = [v for v, c in vals if c > 0]
    return [(max(present), 1)] if present else []


def direct_query(query: str, events: Any, size: int, hop: int) -> Any:
    """The query from ``temporal_filter`` + ``freeze_at`` + count / reduce / join."""
    if query == "q5":

        def assign(e: Any) -> List[Any]:
            et = e[4]
            return [
                ((j * hop, j * hop + size), e[1])
                for j in range((et - size) // hop + 1, et // hop + 1)
            ]

        windowed = events.filter(lambda e: e[0] == BID).flat_map(assign)
        return _open(windowed, lambda r: r[0][1]).count().freeze_at(lambda r: _key_end(r) + 1)
    if query == "q7":

        def by_window(e: Any) -> Any:
            s = e[4] // size * size
            return ((s, s + size), e[3])

        bids = events.filter(lambda e: e[0] == BID).map(by_window)
        return _open(bids, _end).reduce(_max_logic, "q7.max").freeze_at(lambda r: _end(r) + 1)
    if query == "q8":

        def keyed(key: int) -> Callable[[Any], Any]:
            def f(e: Any) -> Any:
                s = e[4] // size * size
                return (((s, s + size), e[key]), e[1])

            return f

        persons = events.filter(lambda e: e[0] == PERSON).map(keyed(1))
        sellers = events.filter(lambda e: e[0] == AUCTION).map(keyed(2))
        joined = _open(persons, _key_end).join(_open(sellers, _key_end))
        return joined.map(lambda r: r[0]).distinct().freeze_at(lambda r: _end(r) + 1)
    raise ValueError(f"timelypy peer: unknown query {query!r}")


def row_of(query: str, data: Any) -> Tuple[Tuple[int, ...], int]:
    """A result record as the benchmark's row, and its window's end."""
    if query == "q5":
        (w, auction), n = data
        return (w[0], auction, n), w[1]
    if query == "q7":
        key, price = data
        w = key[0] if len(key) == 2 and isinstance(key[0], tuple) else key  # (w, 0) or w
        return (w[0], price), w[1]
    w, person = data
    return (w[0], person), w[1]


def build(query: str, path: str, size: int, hop: int) -> Callable[[Any], Dict[str, Any]]:
    """The session's dataflow: one input ``events``, the query's output captured and probed."""

    def dataflow(scope: Any) -> Dict[str, Any]:
        handle, events = scope.new_collection("events")
        make = windows_query if path == "windows" else direct_query
        out = make(query, events, size, hop)
        return {"events": handle, "out": out.capture(), "probe": out.probe()}

    return dataflow


def feeder(
    session: Any, path: str, params: Dict[str, Any], options: Dict[str, Any]
) -> Tuple[Callable[[List[Any], int], None], Callable[[int], None], str]:
    """``(push(batch, watermark), finish(end), name)``: the batch into the session at its event
    times and the input advanced to the watermark. With the windows path, through
    ``timelypy.windows.EventTimeInput`` where it exists (its own watermark, the same rule:
    ``max(event times seen) - disorder``) unless ``options["feed"] == "session"``; else by hand
    (``update_many`` with the event times, ``advance_to``)."""
    feed_class: Any = None
    if path == "windows" and options.get("feed", "auto") != "session":
        import timelypy.windows

        feed_class = getattr(timelypy.windows, "EventTimeInput", None)
    if feed_class is not None:
        feed = feed_class(
            session, "events", max_out_of_orderness=params["disorder"], batch=params["batch"]
        )

        def push_feed(batch: List[Any], watermark: int) -> None:
            feed.push_columns(batch, [e[4] for e in batch])

        return push_feed, lambda end: feed.finish(end=end), "EventTimeInput"

    def push(batch: List[Any], watermark: int) -> None:
        session.update_many("events", batch, times=[e[4] for e in batch])
        session.advance_to(watermark)

    return push, session.advance_to, "update_many+advance_to"


def run(query: str, events: List[Any], params: Dict[str, Any], options: Dict[str, Any]) -> Any:
    import timelypy as tp

    path = options.get("path", "auto")
    if path == "auto":
        path = "windows" if windows_available() else "direct"
    size, hop, disorder = params["size"], params["hop"], params["disorder"]
    workers = int(options.get("workers", 1))
    backend = str(options.get("backend", "inline"))
    timeout = float(options.get("timeout", 600))
    contents: Dict[Any, int] = {}
    seen: Dict[int, float] = {}
    emitted: List[Tuple[int, float]] = []
    batch_latency: List[float] = []

    def read(session: Any) -> None:
        at = time.perf_counter()
        for data, _t, diff in session.changes("out"):
            n = contents.get(data, 0) + diff
            if n:
                contents[data] = n
            else:
                del contents[data]
            if diff > 0:
                end = row_of(query, data)[1]
                if end not in seen:
                    seen[end] = at

    session = tp.open_session(
        build(query, path, size, hop), workers=workers, backend=backend, timeout=timeout
    )
    with session:
        push, finish, feed = feeder(session, path, params, options)
        top = 0
        start = time.perf_counter()
        for batch, watermark in nexmark.batches(events, params["batch"], disorder):
            t = time.perf_counter()
            push(batch, watermark)
            emitted.append((watermark, time.perf_counter()))
            session.wait("probe")
            read(session)
            batch_latency.append(time.perf_counter() - t)
            top = max(top, batch[-1][4] + disorder)
        final_at = time.perf_counter()
        finish(top + size + hop + 2)  # past every window's end
        session.wait("probe")
        read(session)
        seconds = time.perf_counter() - start
    rows = [row_of(query, data)[0] for data, n in contents.items() for _ in range(n)]
    return {
        "rows": rows,
        "seen": seen,
        "emitted": emitted,
        "final_at": final_at,
        "seconds": seconds,
        "batch_latency_us": _batch_stats(batch_latency),
        "how": f"timelypy.{path}, fed by {feed}",
        "path": path,
        "feed": feed,
        "version": getattr(tp, "__version__", None),
        "workers": workers,
        "backend": backend,
    }


def _batch_stats(seconds: List[float]) -> Dict[str, Any]:
    from peer import _stats_us

    return _stats_us(seconds)


# ---------------------------------------------------------------- the memory workload
def rss_mb() -> float:
    """The process's resident memory now (psutil if installed, else /proc/self/status)."""
    try:
        import psutil

        return float(psutil.Process().memory_info().rss) / 2**20
    except ImportError:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1]) / 1024
    return float("nan")


def memory(params: Dict[str, Any], options: Dict[str, Any]) -> Dict[str, Any]:
    """A sliding-window count per (window, auction) over an endless-looking stream: events
    generated as they are pushed (constant memory), every closed window's result read and
    dropped by the driver, and the results leaving the output ``retain`` after their window
    closed; RSS sampled every ``sample_every`` events."""
    import timelypy as tp

    path = options.get("path", "auto")
    if path == "auto":
        path = "windows" if windows_available() else "direct"
    size, hop, disorder = params["size"], params["hop"], params["disorder"]
    retain = int(params.get("retain", 0))
    every = int(params.get("sample_every", 1_000_000))

    def dataflow(scope: Any) -> Dict[str, Any]:
        handle, events = scope.new_collection("events")
        if path == "windows":
            from timelypy.windows import Sliding, windowed

            bids = events.filter(lambda e: e[0] == BID).map(lambda e: (e[1], e))
            out = windowed(bids, Sliding(size, hop), _et, retain=retain, name="memory").count()
        else:
            out = direct_query("q5", events, size, hop).temporal_filter(
                upper=lambda r: _key_end(r) + 1 + retain
            )
        return {"events": handle, "out": out.capture(), "probe": out.probe()}

    samples: List[Dict[str, Any]] = []
    results = pushed = 0
    session = tp.open_session(
        dataflow,
        workers=int(options.get("workers", 1)),
        backend=str(options.get("backend", "inline")),
        timeout=float(options.get("timeout", 600)),
    )
    stream = nexmark.events(params["events"], params["seed"], params["rate"], disorder)
    with session:
        start = time.perf_counter()
        for batch, watermark in nexmark.batches(stream, params["batch"], disorder):
            session.update_many("events", batch, times=[e[4] for e in batch])
            session.advance_to(watermark)
            session.wait("probe")
            results += sum(1 for _d, _t, diff in session.changes("out") if diff > 0)
            before = pushed
            pushed += len(batch)
            if pushed // every > before // every:
                samples.append(
                    {
                        "events": pushed,
                        "rss_mb": round(rss_mb(), 1),
                        "seconds": round(time.perf_counter() - start, 2),
                    }
                )
        seconds = time.perf_counter() - start
    first, last = (samples[0]["rss_mb"], samples[-1]["rss_mb"]) if samples else (None, None)
    growth = round((last - first) / first * 100, 2) if first and last else None
    return {
        "events": pushed,
        "seconds": round(seconds, 2),
        "events_per_s": round(pushed / seconds) if seconds > 0 else None,
        "samples": samples,
        "rss_growth_pct": growth,
        "window_results_seen": results,
        "how": f"timelypy.{path}",
        "path": path,
        "retain": retain,
    }
