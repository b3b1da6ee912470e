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

State: the reduce keeps only the records of sessions that can still change. When a session
``[s, e)`` is final (at ``e + lateness + 1``), the reduce's own output names its records, and a
feedback edge at the top scope (one time unit round) retracts them from the reduce's input: the
arrangement and the reduce compact the closed session away, while ``freeze_at`` keeps its
result (and keeps the expiry from being undone when the records leave). So memory follows the
open sessions: a key whose events keep coming less than ``gap`` apart has one long open session
whose records stay until it closes.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

from ..differential.collection import Collection
from ..order import IntSummary
from .spec import Window

__all__ = ["split_sessions", "session_logic", "session_results", "RESULT", "EXPIRY"]

Values = List[Tuple[Any, int]]
"""``[(value, count), ...]`` as a reduce's logic sees them."""


def split_sessions(
    gap: int, timed: List[Tuple[Tuple[int, Any], int]]
) -> List[Tuple[Window, Values, Values]]:
    """``timed``: ``[((event_time, value), count), ...]`` sorted by event time; the sessions
    as ``(Window, [(value, count), ...], [((event_time, value), count), ...])``: the values
    (sorted, counts summed, zeros dropped) and the records of each.

    Example: ``split_sessions(5, [((0, "a"), 1), ((3, "b"), 1), ((12, "a"), 1)])`` has the
    windows ``Window(0, 8)`` (values ``[("a", 1), ("b", 1)]``) and ``Window(12, 17)``."""
    out: List[Tuple[Window, Values, Values]] = []
    if not timed:
        return out
    first = last = timed[0][0][0]
    counts: Dict[Any, int] = {}
    records: Values = []
    for record, count in timed:
        et, value = record
        if et - last >= gap:
            out.append((Window(first, last + gap), _sorted(counts), records))
            first, counts, records = et, {}, []
        last = et
        counts[value] = counts.get(value, 0) + count
        records.append((record, count))
    out.append((Window(first, last + gap), _sorted(counts), records))
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
    """A reduce logic over a key's ``(event_time, value)`` records. Its outputs are tagged:
    ``(RESULT, (window, out))`` for each ``(out, diff)`` of ``per_session((window, key),
    values)``, and ``(EXPIRY, ((event_time, value), end))`` with the record's count for every
    record, naming the end of the session that holds it."""

    def logic(key: Any, timed: List[Tuple[Any, int]]) -> List[Tuple[Any, int]]:
        out: List[Tuple[Any, int]] = []
        for window, values, records in split_sessions(gap, timed):
            end = window[1]
            out.extend(((EXPIRY, (record, end)), c) for record, c in records)
            if values:
                out.extend(
                    ((RESULT, (window, o)), d) for o, d in per_session((window, key), values)
                )
        return out

    return logic


RESULT, EXPIRY = 0, 1
"""The tags of :func:`session_logic`'s outputs."""


def session_results(
    timed: Collection,
    gap: int,
    lateness: int,
    per_session: Callable[[Any, Values], Values],
    name: str,
) -> Collection:
    """``((window, key), out)`` for the sessions of ``timed`` (``(key, (event_time,
    value))``), each from its end on, final at ``end + lateness`` and frozen there; the
    records of a final session leave the reduce's input (a feedback one time unit later), so
    the state is the open sessions'."""
    scope = timed.scope
    accepted = timed.freeze_at(lambda r: r[1][0] + lateness + 1)
    handle, stream = scope.feedback(IntSummary(1), name=f"Expired[{name}]")
    expired = Collection(scope, stream)  # (key, (et, value)) of closed sessions, for good
    present = accepted.concat(expired.negate())
    tagged = present.arrange_by_key(f"Arrange[{name}]").reduce(
        session_logic(gap, per_session), name
    )
    # A record leaves once its session is final (end + lateness + 1) and the feedback has
    # carried it round (one more time unit). When it leaves, the session's outputs are
    # retracted: freeze_at keeps both the expiry and the result as they were when final.
    expiring = tagged.filter(lambda kv: kv[1][0] == EXPIRY)
    expiry = expiring.temporal_filter(lower=lambda kv: kv[1][1][1] + lateness + 1)
    expiry = expiry.freeze_at(lambda kv: kv[1][1][1] + lateness + 2)
    expiry = expiry.map(lambda kv: (kv[0], kv[1][1][0]))
    expiry.results_in(IntSummary(1)).inner.connect_loop(handle)
    results = tagged.filter(lambda kv: kv[1][0] == RESULT)
    keyed = results.map(lambda kv: ((kv[1][1][0], kv[0]), kv[1][1][1]))
    # A key's sessions change with every event until they close; the changes of an open
    # session all land at its end and cancel there: consolidate them away.
    shown = keyed.temporal_filter(lower=_end).freeze_at(lambda r: _end(r) + lateness + 1)
    return shown.consolidate(f"{name}.closed")


def _end(wk_out: Tuple[Tuple[Window, Any], Any]) -> int:
    return wk_out[0][0][1]
