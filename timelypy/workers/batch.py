"""A driver session's buffered updates: each checked at the call, routed, and sent atomically.

:func:`check_update` runs when the user calls ``update`` / ``insert`` / ``remove``: the record
must be routable to a worker (:func:`~timelypy.hashing.stable_hash` accepts it, and it is
hashable), the diff an integer (``int`` or a numpy integer, not ``bool``), the time an integer
(or a ``Product``) at or after the input's time. A rejected update raises
:class:`~timelypy.errors.SessionInputError` naming the input, the worker, the value and its type,
and is not buffered. A :class:`Batch` keeps the accepted updates in call order until the session
flushes them (see ``DataflowSession.flush`` for the two phases that make a flush atomic).
"""

from __future__ import annotations

import numbers
import reprlib
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import SessionInputError, UnhashableDataError
from ..hashing import stable_hash
from ..order import Product, less_equal

__all__ = ["Update", "Batch", "Parts", "check_update", "check_updates", "check_time", "route",
           "show", "rejected_error"]

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlevel = 4


def show(value: Any) -> str:
    """A short ``repr`` of ``value`` (for messages), even for huge, deep or broken values."""
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a __repr__ that raises
        return f"<unprintable {type(value).__name__}>"


class Update(NamedTuple):
    """One accepted update, waiting to be sent."""

    input: str
    data: Any
    time: Any
    diff: int
    worker: int


Parts = Dict[int, List[Tuple[str, List[Tuple[Any, Any, int]], List[int]]]]
"""Per worker: ``[(input, [(data, time, diff), ...], [position in the batch, ...]), ...]``."""


def route(data: Any, workers: int, what: str, input: Optional[str] = None) -> int:
    """The worker that owns ``data``; :class:`SessionInputError` if it cannot be routed."""
    try:
        h = stable_hash(data)
        hash(data)
    except RecursionError:
        reason = "it is nested too deeply"
    except UnhashableDataError:
        reason = ("keys must be ints, strings, bytes, floats, None, or tuples or frozensets of "
                  "those")
    except Exception as exc:  # noqa: BLE001 - whatever __hash__ raises
        reason = f"{type(exc).__name__}: {exc}"
    else:
        return h % workers if workers > 1 else 0
    raise SessionInputError(
        f"session: {what} {show(data)} of type {type(data).__name__} cannot be routed to a "
        f"worker ({reason})", input=input, value=data)


def check_time(input: Optional[str], time: Any, now: Any, what: str) -> Any:
    """``time`` (numpy integers as ``int``) if it is a valid time at or after ``now``."""
    where = f"input {input!r}" if input is not None else "the session"
    if isinstance(time, numbers.Integral) and not isinstance(time, bool):
        time = int(time)
    elif type(time) is not Product:
        raise SessionInputError(
            f"session: {what} time {show(time)} of type {type(time).__name__} for {where} is "
            f"not a time (an int, or a Product in a nested scope)", input=input, value=time)
    try:
        behind = not less_equal(now, time)
    except Exception as exc:  # noqa: BLE001 - incomparable times
        raise SessionInputError(
            f"session: {what} time {show(time)} of type {type(time).__name__} cannot be "
            f"compared with the time {now!r} of {where} ({exc})", input=input,
            value=time) from None
    if behind:
        raise SessionInputError(
            f"session: {what} time {time!r} is before the time {now!r} of {where} (not at or "
            f"after it)",
            input=input, value=time)
    return time


def check_update(input: str, data: Any, diff: Any, time: Any, now: Any, workers: int,
                 retracts: bool) -> Update:
    """The :class:`Update` of a user's call, or :class:`SessionInputError` saying what is wrong."""
    worker = route(data, workers, f"input {input!r}: record", input)
    if type(diff) is int and type(time) is int and type(now) is int and now <= time and (
            diff >= 0 or retracts):
        return Update(input, data, time, diff, worker)  # the common case, no message built
    if not isinstance(diff, numbers.Integral) or isinstance(diff, bool):
        raise SessionInputError(
            f"session: input {input!r}, worker {worker}: diff {show(diff)} of type "
            f"{type(diff).__name__} for record {show(data)} is not an integer (int or numpy "
            f"integer)", input=input, worker=worker, value=diff)
    diff = int(diff)
    if diff < 0 and not retracts:
        raise SessionInputError(
            f"session: input {input!r}, worker {worker}: cannot retract record {show(data)} "
            f"(diff {diff}): the input takes positive counts only (a timely input; use "
            f"scope.new_collection for a collection)", input=input, worker=worker, value=diff)
    time = check_time(input, time, now, f"input {input!r}, worker {worker}: update of record "
                                         f"{show(data)} at")
    return Update(input, data, time, diff, worker)


def _spread(values: Any, n: int, what: str, input: str) -> List[Any]:
    """``values`` as a list of ``n``: one value for all, or a sequence of exactly ``n``."""
    if values is None or isinstance(values, (numbers.Number, Product, str, bytes)):
        return [values] * n
    values = list(values)
    if len(values) != n:
        raise SessionInputError(f"session: input {input!r}: {len(values)} {what} for {n} records "
                                f"(give one for all, or one per record)", input=input,
                                value=len(values))
    return values


def check_updates(input: str, records: Sequence[Any], diffs: Any, times: Any, now: Any,
                  workers: int, retracts: bool) -> List[Update]:
    """:func:`check_update` of many records at once: the :class:`Update` of each, or the
    :class:`SessionInputError` of the first bad one (then none is accepted). ``diffs`` and
    ``times`` are one value for all records or one per record (a time of None: ``now``).
    Clean int updates take a fast path; anything else is checked one by one."""
    n = len(records)
    diff_list = _spread(diffs, n, "diffs", input)
    time_list = [now if t is None else t for t in _spread(times, n, "times", input)]
    fast = type(now) is int and all(type(d) is int for d in diff_list) and all(
        type(t) is int and t >= now for t in time_list) and (retracts or min(diff_list,
                                                                            default=0) >= 0)
    if fast:
        try:
            hashes = [stable_hash(r) for r in records]
        except Exception:  # noqa: BLE001 - the slow path names the record
            fast = False
    if not fast:
        return [check_update(input, r, d, t, now, workers, retracts)
                for r, d, t in zip(records, diff_list, time_list)]
    owners = [h % workers for h in hashes] if workers > 1 else [0] * n
    return [Update(input, r, t, d, w)
            for r, t, d, w in zip(records, time_list, diff_list, owners)]


class Batch:
    """The accepted updates of a session that were not sent yet, in call order."""

    def __init__(self) -> None:
        self.updates: List[Update] = []

    def __len__(self) -> int:
        return len(self.updates)

    def add(self, update: Update) -> None:
        """Buffer ``update``."""
        self.updates.append(update)

    def extend(self, updates: Iterable[Update]) -> None:
        """Buffer ``updates``, in order."""
        self.updates.extend(updates)

    def parts(self, workers: int) -> Parts:
        """The updates grouped by worker, then by input (each with its positions)."""
        grouped: Dict[int, Dict[str, Tuple[List[Tuple[Any, Any, int]], List[int]]]] = {
            i: {} for i in range(workers)}
        for position, u in enumerate(self.updates):
            updates, positions = grouped[u.worker].setdefault(u.input, ([], []))
            updates.append((u.data, u.time, u.diff))
            positions.append(position)
        return {i: [(name, ups, pos) for name, (ups, pos) in by_input.items()]
                for i, by_input in grouped.items()}

    def take_out(self, positions: Iterable[int]) -> List[Update]:
        """Remove the updates at ``positions``; returns them."""
        drop = set(positions)
        taken = [u for p, u in enumerate(self.updates) if p in drop]
        self.updates = [u for p, u in enumerate(self.updates) if p not in drop]
        return taken

    def clear(self) -> List[Update]:
        """Remove every update; returns them."""
        taken, self.updates = self.updates, []
        return taken


def rejected_error(rejected: Sequence[Tuple[Update, str]], kept: int) -> SessionInputError:
    """The error for updates a flush rejected: names the first, counts the others."""
    first, reason = rejected[0]
    more = f" (and {len(rejected) - 1} more rejected updates)" if len(rejected) > 1 else ""
    return SessionInputError(
        f"session: input {first.input!r}, worker {first.worker}: record {show(first.data)} of "
        f"type {type(first.data).__name__} (time {first.time!r}, diff {first.diff}) was "
        f"rejected: {reason}{more}. Nothing of the batch was applied; the rejected updates were "
        f"dropped and the {kept} others stay buffered for the next flush.",
        input=first.input, worker=first.worker, value=first.data,
        rejected=[(u.input, u.data, u.time, u.diff) for u, _ in rejected])
