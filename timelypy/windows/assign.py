"""Window assignment: the functions that put each ``(key, value)`` into its windows.

Two shapes, both linear stages of a collection: :func:`assigner` (a ``flat_map``: every window
of the value's event time, keyed by ``(window, key)``) and :func:`opener` (a ``join_function``:
the same records while their window can change, i.e. a temporal filter from the window's end
to its end plus the lateness, written as the filter's two updates in one stage). The windows
of recent event times are cached: a stream's event times repeat.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from .spec import Window

__all__ = ["assigner", "opener", "CACHED_EVENT_TIMES"]

CACHED_EVENT_TIMES = 4096
"""How many event times' windows are kept (the cache is cleared when full)."""


def _windows(spec: Any) -> Callable[[int], List[Window]]:
    windows_of = spec.windows_of
    cache: Dict[int, List[Window]] = {}

    def windows(et: int) -> List[Window]:
        found = cache.get(et)
        if found is None:
            if len(cache) >= CACHED_EVENT_TIMES:
                cache.clear()
            found = cache[et] = windows_of(et)
        return found

    return windows


def assigner(
    spec: Any, event_time: Callable[[Any], int]
) -> Callable[[Tuple[Any, Any]], List[Tuple[Tuple[Window, Any], Any]]]:
    """``(key, value) -> [((window, key), value), ...]`` for every window of
    ``event_time(value)`` under ``spec`` (tumbling or sliding).

    Example: ``assigner(Tumbling(5), lambda v: v)(("k", 7))`` is ``[((Window(5, 10), "k"),
    7)]``."""
    windows = _windows(spec)

    def assign(kv: Tuple[Any, Any]) -> List[Tuple[Tuple[Window, Any], Any]]:
        key, value = kv
        return [((w, key), value) for w in windows(event_time(value))]

    return assign


def opener(
    spec: Any, event_time: Callable[[Any], int], lateness: int, with_value: bool = True
) -> Callable[[Tuple[Any, Any]], List[Tuple[Any, int, int]]]:
    """``(key, value) -> [(record, end, +1), (record, end + lateness + 1, -1), ...]`` for every
    window ``[start, end)`` of ``event_time(value)``, where ``record`` is ``((window, key),
    value)`` (``(window, key)`` without ``with_value``): as a ``join_function`` (output times
    joined with the arrival time), the record is present from ``max(t, end)`` until
    ``max(t, end + lateness + 1)``, i.e. not at all when it arrives after ``end + lateness``.

    Example: ``opener(Tumbling(5), lambda v: v, 1)(("k", 7))`` is ``[(((Window(5, 10), "k"),
    7), 10, 1), (((Window(5, 10), "k"), 7), 12, -1)]``."""
    windows = _windows(spec)
    after = lateness + 1

    def open_value(kv: Tuple[Any, Any]) -> List[Tuple[Any, int, int]]:
        key, value = kv
        out = []
        for w in windows(event_time(value)):
            record = ((w, key), value)
            out.append((record, w[1], 1))
            out.append((record, w[1] + after, -1))
        return out

    def open_key(kv: Tuple[Any, Any]) -> List[Tuple[Any, int, int]]:
        key, value = kv
        out = []
        for w in windows(event_time(value)):
            record = (w, key)
            out.append((record, w[1], 1))
            out.append((record, w[1] + after, -1))
        return out

    return open_value if with_value else open_key
