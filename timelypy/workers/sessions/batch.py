"""A driver session's buffered updates: each checked at the call, routed, and sent atomically.

:func:`check_update` runs when the user calls ``update`` / ``insert`` / ``remove``: the record
must be routable to a worker (:func:`~timelypy.hashing.stable_hash` accepts it - the record
types of the guide's "What a record can be" - and it is hashable), the diff an integer (``int``
or a numpy integer, not ``bool``), the time an integer (or a ``Product``) at or after the
input's time. A rejected update raises :class:`~timelypy.errors.SessionInputError` naming the
input, the worker, the value and its type, and is not buffered. A :class:`Batch` keeps the
accepted updates in call order until the session flushes them (see ``DataflowSession.flush`` for
the two phases that make a flush atomic).
"""

from __future__ import annotations

import numbers
from operator import itemgetter
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ...differential.column_message import ColumnMessage
from ...differential.input_columns import Unfit, column_updates
from ...errors import SessionInputError, TimelyError, UnhashableDataError, short_repr
from ...hashing import owners, stable_hash, stable_hashes
from ...order import Product, less_equal

__all__ = [
    "Update",
    "UpdateColumns",
    "Batch",
    "Parts",
    "check_update",
    "check_updates",
    "check_time",
    "route",
    "rejected_error",
]


class Update(NamedTuple):
    """One accepted update, waiting to be sent."""

    input: str
    data: Any
    time: Any
    diff: int
    worker: int


Parts = Dict[int, List[Tuple[str, List[Any], List[Any], List[int], List[int]]]]
"""Per worker: ``[(input, records, times, diffs, positions in the batch), ...]``, columns."""


def route(data: Any, workers: int, what: str, input: Optional[str] = None) -> int:
    """The worker that owns ``data``; :class:`SessionInputError` if it cannot be routed."""
    try:
        h = stable_hash(data)
        hash(data)
    except RecursionError:
        reason = "it is nested too deeply"
    except UnhashableDataError as exc:
        reason = _unroutable_reason(data, exc)
    except Exception as exc:  # noqa: BLE001 - whatever __hash__ raises
        reason = f"{type(exc).__name__}: {exc}"
    else:
        return h % workers if workers > 1 else 0
    raise SessionInputError(
        f"session: {what} {short_repr(data)} of type {type(data).__name__} cannot be routed to a "
        f"worker ({reason})",
        input=input,
        value=data,
    )


def _unroutable_reason(data: Any, exc: UnhashableDataError) -> str:
    """Why :func:`~timelypy.hashing.stable_hash` refused ``data`` (or a value inside it), and
    what it takes, without repeating the record the message already shows."""
    message = str(exc)
    prefix = "cannot route by key "
    try:
        own = f"{prefix}{data!r} of type {type(data).__qualname__}: "
    except Exception:  # noqa: BLE001 - a __repr__ that raises
        own = None
    if own is not None and message.startswith(own):
        return message[len(own) :]
    if message.startswith(prefix):
        return "it holds " + message[len(prefix) :]
    return message


def check_time(input: Optional[str], time: Any, now: Any, what: str) -> Any:
    """``time`` (numpy integers as ``int``) if it is a valid time at or after ``now``."""
    where = f"input {input!r}" if input is not None else "the session"
    if isinstance(time, numbers.Integral) and not isinstance(time, bool):
        time = int(time)
    elif type(time) is not Product:
        raise SessionInputError(
            f"session: {what} time {short_repr(time)} of type {type(time).__name__} for {where} is "
            f"not a time (an int, or a Product in a nested scope)",
            input=input,
            value=time,
        )
    try:
        behind = not less_equal(now, time)
    except Exception as exc:  # noqa: BLE001 - incomparable times
        raise SessionInputError(
            f"session: {what} time {short_repr(time)} of type {type(time).__name__} cannot be "
            f"compared with the time {now!r} of {where} ({exc})",
            input=input,
            value=time,
        ) from None
    if behind:
        raise SessionInputError(
            f"session: {what} time {time!r} is before the time {now!r} of {where} (not at or "
            f"after it)",
            input=input,
            value=time,
        )
    return time


def check_update(
    input: str, data: Any, diff: Any, time: Any, now: Any, workers: int, retracts: bool
) -> Update:
    """The :class:`Update` of a user's call, or :class:`SessionInputError` saying what is wrong."""
    worker = route(data, workers, f"input {input!r}: record", input)
    if (
        type(diff) is int
        and type(time) is int
        and type(now) is int
        and now <= time
        and (diff >= 0 or retracts)
    ):
        return Update(input, data, time, diff, worker)  # the common case, no message built
    if not isinstance(diff, numbers.Integral) or isinstance(diff, bool):
        raise SessionInputError(
            f"session: input {input!r}, worker {worker}: diff {short_repr(diff)} of type "
            f"{type(diff).__name__} for record {short_repr(data)} is not an integer (int or numpy "
            f"integer)",
            input=input,
            worker=worker,
            value=diff,
        )
    diff = int(diff)
    if diff < 0 and not retracts:
        raise SessionInputError(
            f"session: input {input!r}, worker {worker}: cannot retract record {short_repr(data)} "
            f"(diff {diff}): the input takes positive counts only (a timely input; use "
            f"scope.new_collection for a collection)",
            input=input,
            worker=worker,
            value=diff,
        )
    where = f"input {input!r}, worker {worker}: update of record {short_repr(data)} at"
    time = check_time(input, time, now, where)
    return Update(input, data, time, diff, worker)


def _spread(values: Any, n: int, what: str, input: str) -> List[Any]:
    """``values`` as a list of ``n``: one value for all, or a sequence of exactly ``n``."""
    if values is None or isinstance(values, (numbers.Number, Product, str, bytes)):
        return [values] * n
    values = list(values)
    if len(values) != n:
        raise SessionInputError(
            f"session: input {input!r}: {len(values)} {what} for {n} records "
            f"(give one for all, or one per record)",
            input=input,
            value=len(values),
        )
    return values


class UpdateColumns(NamedTuple):
    """Accepted updates of one input as columns: record, time, diff and owning worker of each
    (``owners`` None: all go to worker 0)."""

    input: str
    records: List[Any]
    times: List[Any]
    diffs: List[int]
    owners: Optional[Sequence[int]]  # a list, or a numpy array from the column-wise hash


def check_updates(
    input: str,
    records: Sequence[Any],
    diffs: Any,
    times: Any,
    now: Any,
    workers: int,
    retracts: bool,
    routable: bool = False,
    owned: Optional[Sequence[int]] = None,
) -> UpdateColumns:
    """:func:`check_update` of many records at once: the accepted updates as columns, or the
    :class:`SessionInputError` of the first bad one (then none is accepted). ``diffs`` and
    ``times`` are one value for all records or one per record (a time of None: ``now``).
    Clean int updates take a fast path (records hashed column-wise by
    :func:`~timelypy.hashing.stable_hashes`; one diff and one time for all are checked once);
    anything else is checked one by one. ``routable``: the caller vouches that every record is
    routable and hashable (built from checked columns), so none is hashed to check it; with
    more than one worker they are hashed to route them unless ``owned`` gives each one's
    worker (``stable_hash(record) % workers``)."""
    n = len(records)
    if routable or _one_int(diffs) and _one_int(times):
        return _bulk_updates(input, records, diffs, times, now, workers, retracts, routable, owned)
    diff_list = _spread(diffs, n, "diffs", input)
    time_list = _spread(times, n, "times", input)
    if None in time_list:
        time_list = [now if t is None else t for t in time_list]
    fast = (
        type(now) is int
        and _all_type(diff_list, int)
        and _all_type(time_list, int)
        and (not n or min(time_list) >= now)
        and (retracts or min(diff_list, default=0) >= 0)
    )
    if fast:
        try:
            owned = owners(records, workers) if workers > 1 else stable_hashes(records)
        except Exception:  # noqa: BLE001 - the slow path names the record
            fast = False
    if not fast:
        checked = [
            check_update(input, r, d, t, now, workers, retracts)
            for r, d, t in zip(records, diff_list, time_list)
        ]
        return UpdateColumns(
            input,
            [u.data for u in checked],
            [u.time for u in checked],
            [u.diff for u in checked],
            [u.worker for u in checked] if workers > 1 else None,
        )
    return UpdateColumns(input, list(records), time_list, diff_list, owned if workers > 1 else None)


def check_columns(
    input: str, keys: Any, values: Any, diffs: Any, now: Any, retracts: bool
) -> Union[ColumnMessage, List[Any]]:
    """The updates of columns (see ``update_columns``) at the input's time ``now`` as one
    :class:`ColumnMessage`, checked; or, for columns holding a NaN or ``-0.0``, their
    ``(data, time, diff)`` tuples (the object path takes them). Raises
    :class:`SessionInputError` naming the input and the offending column or value."""
    if type(now) is not int:
        raise SessionInputError(
            f"session: input {input!r}: columns are taken at int times only (the input is at "
            f"{now!r}); use update_many",
            input=input,
            value=now,
        )
    try:
        message = column_updates(input, keys, values, diffs, now, None)
    except Unfit as unfit:
        return unfit.records
    except (TimelyError, TypeError, ValueError) as exc:
        raise SessionInputError(f"session: {exc}", input=input) from exc
    if not retracts and len(message) and int(message.diffs.min()) < 0:
        row = int(np.flatnonzero(message.diffs < 0)[0])
        raise SessionInputError(
            f"session: input {input!r}: diff {int(message.diffs[row])} (row {row}) retracts a "
            f"record, but the input takes positive counts only",
            input=input,
            value=int(message.diffs[row]),
        )
    return message


def _one_int(value: Any) -> bool:
    """``value`` is one int time or diff for all records (None: the input's time)."""
    return value is None or type(value) is int


def _bulk_updates(
    input: str,
    records: Sequence[Any],
    diffs: Any,
    times: Any,
    now: Any,
    workers: int,
    retracts: bool,
    routable: bool,
    owned: Optional[Sequence[int]],
) -> UpdateColumns:
    """:func:`check_updates` of records with one diff and one time for all (each checked once)
    or of ``routable`` records (diffs and times checked column-wise, records not hashed to
    check them); falls back to the record-by-record checks for anything unclean."""
    n = len(records)
    if type(diffs) is int:
        diff_list = [diffs] * n
        clean = retracts or diffs >= 0
    else:
        diff_list = _spread(diffs, n, "diffs", input)
        clean = not n or _all_type(diff_list, int) and (retracts or min(diff_list) >= 0)
    if times is None or type(times) is int:
        time = now if times is None else times
        time_list = [time] * n
        clean = clean and type(time) is int and type(now) is int and time >= now
    else:
        time_list = _spread(times, n, "times", input)
        clean = clean and type(now) is int and (not n or _all_type(time_list, int))
        clean = clean and (not n or min(time_list) >= now)
    if clean and owned is not None and len(owned) != n:
        raise SessionInputError(
            f"session: input {input!r}: {len(owned)} owners for {n} records",
            input=input,
            value=len(owned),
        )
    if clean and workers > 1 and owned is None:
        try:
            owned = owners(records, workers)
        except Exception:  # noqa: BLE001 - the slow path names the record
            clean = False
    elif clean and not routable:
        try:
            stable_hashes(records)
        except Exception:  # noqa: BLE001 - the slow path names the record
            clean = False
    if not clean:
        return check_updates(input, records, diff_list, time_list, now, workers, retracts)
    return UpdateColumns(input, list(records), time_list, diff_list, owned if workers > 1 else None)


def _all_type(values: Sequence[Any], kind: type) -> bool:
    """Every one of ``values`` is exactly of type ``kind`` (not a subclass: no bools for ints)."""
    return not values or set(map(type, values)) == {kind}


def _by_owner(owned: Sequence[int]) -> List[Tuple[int, List[int]]]:
    """``[(worker, [index, ...]), ...]``: the indexes of ``owned`` grouped by value, by worker
    then index (a numpy array of owners is grouped by a stable sort in C)."""
    if type(owned) is not list:
        import numpy as np

        order = np.argsort(owned, kind="stable")
        counts = np.bincount(owned)
        groups, start = [], 0
        for worker, count in enumerate(counts.tolist()):
            if count:
                groups.append((worker, order[start : start + count].tolist()))
                start += count
        return groups
    by_worker: Dict[int, List[int]] = {}
    for index, owner in enumerate(owned):
        chosen = by_worker.get(owner)
        if chosen is None:
            chosen = by_worker[owner] = []
        chosen.append(index)
    return sorted(by_worker.items())


class _Group:
    """The buffered updates of one input on one worker, as columns in call order (and the
    column messages, each with the place of its first update)."""

    __slots__ = ("records", "times", "diffs", "positions", "messages")

    def __init__(self) -> None:
        self.records: List[Any] = []
        self.times: List[Any] = []
        self.diffs: List[int] = []
        self.positions: List[int] = []  # each update's place in the session's call order
        self.messages: List[Tuple[ColumnMessage, int]] = []

    def extend(
        self,
        records: Sequence[Any],
        times: Sequence[Any],
        diffs: Sequence[int],
        positions: Iterable[int],
    ) -> None:
        self.records.extend(records)
        self.times.extend(times)
        self.diffs.extend(diffs)
        self.positions.extend(positions)


class Batch:
    """The accepted updates of a session that were not sent yet: kept per worker and input as
    columns (so a flush sends them without regrouping), each with its place in call order."""

    def __init__(self) -> None:
        self._groups: Dict[Tuple[int, str], _Group] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _group(self, worker: int, input: str) -> _Group:
        group = self._groups.get((worker, input))
        if group is None:
            group = self._groups[(worker, input)] = _Group()
        return group

    def add(self, update: Update) -> None:
        """Buffer ``update``."""
        group = self._group(update.worker, update.input)
        group.records.append(update.data)
        group.times.append(update.time)
        group.diffs.append(update.diff)
        group.positions.append(self._size)
        self._size += 1

    def extend(self, updates: Iterable[Update]) -> None:
        """Buffer ``updates``, in order."""
        for update in updates:
            self.add(update)

    def extend_columns(self, columns: UpdateColumns) -> None:
        """Buffer the updates of ``columns`` (from :func:`check_updates`), in order."""
        start, n = self._size, len(columns.records)
        if columns.owners is None:
            self._group(0, columns.input).extend(
                columns.records, columns.times, columns.diffs, range(start, start + n)
            )
        else:
            for owner, chosen in _by_owner(columns.owners):
                self._group(owner, columns.input).extend(
                    list(map(columns.records.__getitem__, chosen)),
                    list(map(columns.times.__getitem__, chosen)),
                    list(map(columns.diffs.__getitem__, chosen)),
                    [start + i for i in chosen],
                )
        self._size += n

    def extend_message(self, input: str, parts: Sequence[Any]) -> None:
        """Buffer column messages: ``parts[w]`` (a :class:`ColumnMessage`, or None or empty)
        holds the updates of worker ``w``, in order."""
        start = self._size
        for worker, part in enumerate(parts):
            if part is not None and len(part):
                self._group(worker, input).messages.append((part, start))
                start += len(part)
        self._size = start

    def parts(self, workers: int) -> Parts:
        """The updates grouped by worker, then by input, as columns (with their positions); a
        column message is a part of its own: ``(input, message, None, None, positions)``."""
        grouped: Parts = {i: [] for i in range(workers)}
        for (worker, input), g in self._groups.items():
            if g.records:
                grouped[worker].append((input, g.records, g.times, g.diffs, g.positions))
            for message, start in g.messages:
                chosen = list(range(start, start + len(message)))
                grouped[worker].append((input, message, None, None, chosen))  # type: ignore
        return grouped

    def updates(self) -> List[Update]:
        """Every buffered update, in call order."""
        placed = [
            (p, Update(input, r, t, d, worker))
            for (worker, input), g in self._groups.items()
            for r, t, d, p in zip(g.records, g.times, g.diffs, g.positions)
        ]
        placed += [
            (start + i, Update(input, data, t, d, worker))
            for (worker, input), g in self._groups.items()
            for message, start in g.messages
            for i, (data, t, d) in enumerate(message.records())
        ]
        placed.sort(key=itemgetter(0))
        return [u for _, u in placed]

    def take_out(self, positions: Iterable[int]) -> List[Update]:
        """Remove the updates at ``positions``; returns them (in call order)."""
        drop = set(positions)
        everything = self.updates()
        self.drop()
        taken = [u for p, u in enumerate(everything) if p in drop]
        self.extend(u for p, u in enumerate(everything) if p not in drop)
        return taken

    def clear(self) -> List[Update]:
        """Remove every update; returns them (in call order)."""
        taken = self.updates()
        self.drop()
        return taken

    def drop(self) -> None:
        """Remove every update (the lists handed out by :meth:`parts` stay intact)."""
        self._groups = {}
        self._size = 0


def rejected_error(rejected: Sequence[Tuple[Update, str]], kept: int) -> SessionInputError:
    """The error for updates a flush rejected: names the first, counts the others."""
    first, reason = rejected[0]
    more = f" (and {len(rejected) - 1} more rejected updates)" if len(rejected) > 1 else ""
    return SessionInputError(
        f"session: input {first.input!r}, worker {first.worker}: record "
        f"{short_repr(first.data)} of type {type(first.data).__name__} "
        f"(time {first.time!r}, diff {first.diff}) was "
        f"rejected: {reason}{more}. Nothing of the batch was applied; the rejected updates were "
        f"dropped and the {kept} others stay buffered for the next flush.",
        input=first.input,
        worker=first.worker,
        value=first.data,
        rejected=[(u.input, u.data, u.time, u.diff) for u, _ in rejected],
    )
