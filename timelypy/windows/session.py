"""Session windows: per key, a reduce over the event times present.

A session is a maximal run of a key's events whose event times are less than ``gap`` apart;
its window is ``[first, last + gap)``. The reduce sees, per key, the records ``(event_time,
value)`` accepted so far and splits them into sessions at every time the key changes, so an
event that arrives between two sessions merges them and one that is removed splits its
session again (exactly, at the time of the change).

Lateness is per record: a record with event time ``et`` counts when it arrives at logical time
``t <= et + lateness`` (the watermark had not passed its event time by more than the lateness),
and is late otherwise. With that rule no accepted record can change a session ``[s, e)`` after
``e + lateness`` (an accepted record arriving later has an event time of at least ``e``, too far
to merge), so a session's result is final there, as a tumbling window's is.

State: the reduce keeps each key's accepted records (one entry per distinct record, its times
compacted as the frontier passes), because an open session can grow for as long as its key has
events less than ``gap`` apart: memory follows the number of distinct records per key, not the
number of open sessions. For endless streams of keys that never stop, prefer tumbling or
sliding windows (their state is the open windows only) or remove a key's records once done.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from .spec import Window

__all__ = ["split_sessions", "session_logic"]

Values = List[Tuple[Any, int]]
"""``[(value, count), ...]`` as a reduce's logic sees them."""


def split_sessions(
    gap: int, timed: List[Tuple[Tuple[int, Any], int]]
) -> List[Tuple[Window, Values]]:
    """``timed``: ``[((event_time, value), count), ...]`` sorted by event time; the sessions
    as ``(Window, [(value, count), ...])`` (values sorted, counts summed, zeros dropped).

    Example: ``split_sessions(5, [((0, "a"), 1), ((3, "b"), 1), ((12, "a"), 1)])`` is
    ``[(Window(0, 8), [("a", 1), ("b", 1)]), (Window(12, 17), [("a", 1)])]``."""
    out: List[Tuple[Window, Values]] = []
    if not timed:
        return out
    first = last = timed[0][0][0]
    counts: Dict[Any, int] = {}
    for (et, value), count in timed:
        if et - last >= gap:
            out.append((Window(first, last + gap), _sorted(counts)))
            first, counts = et, {}
        last = et
        counts[value] = counts.get(value, 0) + count
    out.append((Window(first, last + gap), _sorted(counts)))
    return out


def _sorted(counts: Dict[Any, int]) -> Values:
    items = [(v, c) for v, c in counts.items() if c]
    try:
        items.sort()
    except TypeError:  # values that do not compare keep their order of event time
        pass
    return items


def session_logic(
    gap: int, per_session: Callable[[Any, Values], Values]
) -> Callable[[Any, List[Tuple[Any, int]]], List[Tuple[Any, int]]]:
    """A reduce logic over a key's ``(event_time, value)`` records: ``per_session((window,
    key), values)`` for each of its sessions, as ``[((window, out), diff), ...]``."""

    def logic(key: Any, timed: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        out: List[Tuple[Any, int]] = []
        for window, values in split_sessions(gap, timed):
            if values:
                out.extend(((window, o), d) for o, d in per_session((window, key), values))
        return out

    return logic
