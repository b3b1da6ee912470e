"""Windowed results computed from scratch, at one logical time, from the list of updates.

An update is ``(key, value, event_time, arrival, diff)``: the record ``(key, value)`` with
its event time, the logical time it arrives at, and its diff. Written plainly from the rules
of ``docs/time.md``, sharing nothing with ``timelypy.windows`` but the ``Window`` tuple:

* tumbling / sliding: a record belongs to every window ``[s, e)`` with ``s <= et < e`` (``s``
  on the grid ``offset + k*hop``); it counts for a window if it arrives at ``t <= e +
  lateness``, from ``max(t, e)`` on, and is late for it otherwise (shown from ``t`` on);
* sessions: per key, a record counts if it arrives at ``t <= et + lateness``; the key's
  records that count and have arrived by ``T``, sorted by event time, split where two event
  times are ``gap`` or more apart; a session ``[first, last + gap)`` shows from its end on;
* ``retain``: a window's results (not the late records) leave at ``e + lateness + 1 + retain``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Dict, List, Optional, Tuple

from timelypy.windows import Window

Update = Tuple[Any, Any, int, int, int]
Content = Dict[Any, int]


def grid_windows(size: int, hop: int, offset: int, et: int) -> List[Window]:
    """Every window of length ``size`` starting on ``offset + k*hop`` that holds ``et``."""
    out = []
    for start in range(et - size + 1, et + 1):
        if (start - offset) % hop == 0:
            out.append(Window(start, start + size))
    return out


def windows_for(spec: Any, et: int) -> List[Window]:
    if type(spec).__name__ == "Tumbling":
        return grid_windows(spec.size, spec.size, spec.offset, et)
    return grid_windows(spec.size, spec.hop, spec.offset, et)


def _nonzero(acc: Dict[Any, int]) -> Content:
    return {r: n for r, n in acc.items() if n}


def _kept(end: int, lateness: int, retain: Optional[int], time: int) -> bool:
    return time >= end and (retain is None or time < end + lateness + 1 + retain)


def records(
    updates: List[Update], spec: Any, lateness: int, retain: Optional[int], time: int
) -> Content:
    """``{((window, key), value): count}`` at ``time`` (tumbling and sliding)."""
    acc: Dict[Any, int] = defaultdict(int)
    for key, value, et, t, d in updates:
        for w in windows_for(spec, et):
            if t <= w.end + lateness and t <= time and _kept(w.end, lateness, retain, time):
                acc[((w, key), value)] += d
    return _nonzero(acc)


def late(updates: List[Update], spec: Any, lateness: int, time: int) -> Content:
    """``{((window, key), value): count}`` of the late updates that arrived by ``time``."""
    acc: Dict[Any, int] = defaultdict(int)
    for key, value, et, t, d in updates:
        if t > time:
            continue
        if type(spec).__name__ == "Session":
            if t > et + lateness:
                acc[((Window(et, et + spec.gap), key), value)] += d
            continue
        for w in windows_for(spec, et):
            if t > w.end + lateness:
                acc[((w, key), value)] += d
    return _nonzero(acc)


def session_records(
    updates: List[Update], gap: int, lateness: int, retain: Optional[int], time: int
) -> Content:
    """``{((window, key), value): count}`` at ``time`` for session windows."""
    by_key: Dict[Any, Dict[Tuple[int, Any], int]] = defaultdict(lambda: defaultdict(int))
    for key, value, et, t, d in updates:
        if t <= time and t <= et + lateness:
            by_key[key][(et, value)] += d
    acc: Dict[Any, int] = defaultdict(int)
    for key, present in by_key.items():
        events = sorted((et, v, n) for (et, v), n in present.items() if n)
        sessions: List[List[Tuple[int, Any, int]]] = []
        for event in events:
            if sessions and event[0] - sessions[-1][-1][0] < gap:
                sessions[-1].append(event)
            else:
                sessions.append([event])
        for session in sessions:
            w = Window(session[0][0], session[-1][0] + gap)
            if _kept(w.end, lateness, retain, time):
                for _, v, n in session:
                    acc[((w, key), v)] += n
    return _nonzero(acc)


def window_records(
    updates: List[Update], spec: Any, lateness: int, retain: Optional[int], time: int
) -> Content:
    """:func:`records` or :func:`session_records`, by the kind of ``spec``."""
    if type(spec).__name__ == "Session":
        return session_records(updates, spec.gap, lateness, retain, time)
    return records(updates, spec, lateness, retain, time)


def groups(content: Content) -> Dict[Any, List[Tuple[Any, int]]]:
    """``{(window, key): [(value, count), ...]}``, values sorted."""
    out: Dict[Any, List[Tuple[Any, int]]] = defaultdict(list)
    for (wk, value), n in content.items():
        out[wk].append((value, n))
    return {wk: sorted(vals) for wk, vals in out.items()}


def counts(content: Content) -> Content:
    """``{((window, key), n): 1}`` from windowed records."""
    totals = {wk: sum(n for _, n in vals) for wk, vals in groups(content).items()}
    return {(wk, n): 1 for wk, n in totals.items() if n}


def reduced(content: Content, logic: Callable[[Any, List[Tuple[Any, int]]], Any]) -> Content:
    """``{((window, key), out): diff}`` of ``logic`` over windowed records."""
    acc: Dict[Any, int] = defaultdict(int)
    for wk, vals in groups(content).items():
        for out, d in logic(wk, vals):
            acc[(wk, out)] += d
    return _nonzero(acc)


def joined(left: Content, right: Content) -> Content:
    """``{((window, key), (v1, v2)): n1 * n2}`` of two windowed contents."""
    acc: Dict[Any, int] = defaultdict(int)
    for (wk1, v1), n1 in left.items():
        for (wk2, v2), n2 in right.items():
            if wk1 == wk2:
                acc[(wk1, (v1, v2))] += n1 * n2
    return _nonzero(acc)
