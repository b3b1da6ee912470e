"""Windowed aggregations over event time, built from temporal filters and ordinary operators.

``windowed(pairs, spec, event_time)`` assigns every record ``(key, value)`` to the windows of
its event time ``event_time(value)`` and keys it by ``(window, key)``. A window ``[s, e)``
closes at logical time ``e``: a record arriving at ``t <= e + lateness`` counts from
``max(t, e)`` on; one arriving later is *late* for that window (dropped from its result, shown
in :attr:`Windowed.late`).

How memory stays bounded (Materialize's temporal filters; the "real-time streaming input"
chapter of the Differential Dataflow book): the records an aggregation reads are
``temporal_filter(lower=e, upper=e + lateness + 1)`` of the windowed records, so they enter at
the window's end and leave by themselves once it can no longer change; the aggregation's output
is ``freeze_at(e + lateness + 1)``, so the final result stays while the aggregation's input and
output compact to nothing for every closed window. ``retain=N`` also removes a result from the
output at ``e + lateness + 1 + N`` so that an endless stream's output is bounded too.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from ..differential.collection import Collection
from ..errors import TimelyError
from .assign import assigner, opener
from .session import Values, session_results
from .spec import Session, Sliding, Spec, Tumbling, Window, check_lateness

__all__ = ["windowed", "Windowed"]

Logic = Callable[[Any, Values], Values]
"""``logic((window, key), [(value, count), ...]) -> [(out, diff), ...]``."""


def _end(wk_v: Tuple[Tuple[Window, Any], Any]) -> int:
    return wk_v[0][0][1]


def _checked(name: str, event_time: Callable[[Any], Any]) -> Callable[[Any], int]:
    """``event_time`` that raises TypeError (named, with the value) for a result not an int."""

    def et(value: Any) -> int:
        t = event_time(value)
        if type(t) is not int:
            raise TypeError(
                f"{name}: event_time({value!r}) returned {t!r} ({type(t).__name__}), not an "
                f"int (convert event times to ints in one unit, e.g. milliseconds)"
            )
        return t

    return et


class Windowed:
    """A collection of ``(key, value)`` assigned to windows of event time; build it with
    :func:`windowed`. Its results are collections keyed by ``(window, key)``.

    Example: ``windowed(bids, Tumbling(300), lambda b: b.time).count()`` holds
    ``((Window(0, 300), auction), n)`` from time 300 on."""

    def __init__(
        self,
        pairs: Collection,
        spec: Spec,
        event_time: Callable[[Any], Any],
        lateness: int = 0,
        retain: Optional[int] = None,
        name: Optional[str] = None,
    ) -> None:
        if not isinstance(spec, (Tumbling, Sliding, Session)):
            raise TypeError(f"windowed: spec must be Tumbling, Sliding or Session, got {spec!r}")
        check_lateness(spec, lateness, retain)
        self.name = name or f"Windowed[{spec}]"
        if not pairs.scope.order.is_total:
            raise TimelyError(
                f"{self.name}: windows need the top scope's (totally ordered) times; inside "
                f"an iterative scope leave() the collection first"
            )
        self.spec = spec
        self.lateness = lateness
        self.retain = retain
        self.event_time = _checked(self.name, event_time)
        self._late: Optional[Collection] = None
        self._gap = spec.gap if isinstance(spec, Session) else 0
        if isinstance(spec, Session):
            self._timed = pairs.map(self._timed_record)  # (key, (et, value))
        else:
            self._windowed = pairs.flat_map(assigner(spec, self.event_time))
            self._pairs = pairs
        if pairs.scope.worker.instruments.enabled:
            # Statistics are collected: count the late records (Late[<name>]) even if nobody
            # reads them. Without statistics the late branch is built only when asked for
            # (it costs about as much as the window assignment itself).
            self._build_late()

    # ------------------------------------------------------------------ assignment
    def _timed_record(self, kv: Tuple[Any, Any]) -> Tuple[Any, Tuple[int, Any]]:
        return kv[0], (self.event_time(kv[1]), kv[1])

    @property
    def _cutoff(self) -> Callable[[Tuple[Tuple[Window, Any], Any]], int]:
        """``record -> end + lateness + 1``: when a record's window can no longer change."""
        after = self.lateness + 1

        def cutoff(wk_v: Tuple[Tuple[Window, Any], Any]) -> int:
            return wk_v[0][0][1] + after

        return cutoff

    def _build_late(self) -> Collection:
        if self._late is None:
            if isinstance(self.spec, Session):
                self._late = self._session_late()
            else:
                self._late = self._grid_late()
        return self._late

    def _grid_late(self) -> Collection:
        r = self._windowed
        after = r.concat(r.freeze_at(self._cutoff).negate())
        return after.consolidate(name=f"Late[{self.name}]")

    def _session_late(self) -> Collection:
        lateness, gap = self.lateness, self._gap
        timed = self._timed
        after = timed.concat(timed.freeze_at(lambda r: r[1][0] + lateness + 1).negate())
        late = after.map(lambda r: ((Window(r[1][0], r[1][0] + gap), r[0]), r[1][1]))
        return late.consolidate(name=f"Late[{self.name}]")

    # ------------------------------------------------------------------ plumbing
    def _open(self, with_value: bool = True) -> Collection:
        """The windowed records while their window can change: from its end to its end
        plus lateness (tumbling and sliding windows): the temporal filter
        ``temporal_filter(lower=end, upper=end + lateness + 1)`` of the windowed records,
        fused with their assignment as one ``join_function`` stage (see :func:`.opener`)."""
        open_ = opener(self.spec, self.event_time, self.lateness, with_value)
        return self._pairs.join_function(open_)

    def _finish(self, results: Collection) -> Collection:
        """Results frozen once their window can no longer change, and removed ``retain``
        later if asked."""
        frozen = results.freeze_at(self._cutoff)
        return self._retained(frozen)

    def _retained(self, results: Collection) -> Collection:
        if self.retain is None:
            return results
        keep = self.lateness + 1 + self.retain
        return results.temporal_filter(upper=lambda r: _end(r) + keep)

    def _session_reduce(self, per_session: Logic, name: str) -> Collection:
        results = session_results(self._timed, self._gap, self.lateness, per_session, name)
        return self._retained(results)

    def _not_session(self, what: str) -> None:
        if isinstance(self.spec, Session):
            raise TimelyError(f"{self.name}: {what} needs tumbling or sliding windows")

    # ------------------------------------------------------------------ results
    def reduce(self, logic: Logic, name: Optional[str] = None) -> Collection:
        """Per window and key, ``logic((window, key), [(value, count), ...])`` (values sorted,
        counts non-zero) returns ``[(out, diff), ...]`` as :meth:`Collection.reduce`'s logic;
        the result holds ``((window, key), out)`` from the window's end on.

        Example: ``w.reduce(lambda wk, vals: [(max(v for v, _ in vals), 1)])`` is the highest
        value per window and key."""
        name = name or f"{self.name}.reduce"
        if isinstance(self.spec, Session):
            return self._session_reduce(logic, name)
        arranged = self._open().arrange_by_key(f"Arrange[{name}]")
        return self._finish(arranged.reduce(logic, name))

    def count(self) -> Collection:
        """``((window, key), n)``: the number of records (with their multiplicities) per
        window and key, from the window's end on.

        Example: ``windowed(clicks, Tumbling(300), lambda c: c.time).count()`` holds
        ``((Window(0, 300), "home"), 2)`` for two clicks on "home" at times 10 and 250."""
        if isinstance(self.spec, Session):
            return self._session_reduce(_count_values, f"{self.name}.count")
        return self._finish(self._open(with_value=False).count())

    def sum(self, f: Optional[Callable[[Any], Any]] = None) -> Collection:
        """``((window, key), total)``: the sum of ``f(value)`` (default: the value) times its
        count, per window and key.

        Example: ``w.sum(lambda bid: bid.price)`` is the turnover per window and key."""
        get = f or _identity
        return self.reduce(lambda wk, vals: [(sum(get(v) * c for v, c in vals), 1)])

    def min(self, f: Optional[Callable[[Any], Any]] = None) -> Collection:
        """``((window, key), least)``: the least ``f(value)`` of the values present (count
        > 0) per window and key.

        Example: ``w.min(lambda bid: bid.price)`` is the lowest bid per window and key."""
        return self._extreme(min, f)

    def max(self, f: Optional[Callable[[Any], Any]] = None) -> Collection:
        """``((window, key), greatest)``: the greatest ``f(value)`` of the values present
        (count > 0) per window and key.

        Example: ``w.max(lambda bid: bid.price)`` is the highest bid per window and key."""
        return self._extreme(max, f)

    def _extreme(self, pick: Callable[..., Any], f: Optional[Callable[[Any], Any]]) -> Collection:
        get = f or _identity

        def logic(wk: Any, vals: Values) -> List[Tuple[Any, int]]:
            present = [get(v) for v, c in vals if c > 0]
            return [(pick(present), 1)] if present else []

        return self.reduce(logic, f"{self.name}.{pick.__name__}")

    def join(self, other: "Windowed") -> Collection:
        """``((window, key), (v1, v2))`` for every pair of records of ``self`` and ``other``
        in the same window and key (counts multiply), from the window's end on. ``other``
        must have an equal tumbling or sliding spec and the same lateness.

        Example: ``windowed(persons, spec, et).join(windowed(auctions, spec, et))`` pairs
        the new persons and the auctions they opened in the same window."""
        self._not_session("join")
        if not isinstance(other, Windowed) or other.spec != self.spec:
            raise TimelyError(
                f"{self.name}.join: the other side must be windowed with the same spec "
                f"{self.spec}, got {getattr(other, 'spec', other)!r}"
            )
        if other.lateness != self.lateness:
            raise TimelyError(
                f"{self.name}.join: both sides need the same lateness, got {self.lateness} "
                f"and {other.lateness}"
            )
        mine = self._open().arrange_by_key(f"Arrange[{self.name}.join]")
        theirs = other._open().arrange_by_key(f"Arrange[{other.name}.join]")
        return self._finish(mine.join(theirs, f"{self.name}.join"))

    @property
    def late(self) -> Collection:
        """``((window, key), value)``: the records that arrived too late for that window (after
        its end plus the lateness), at their arrival time; dropped from the window's results.
        For session windows the window is the record's own ``[et, et + gap)``. Their count is
        the ``records_out`` of the operator named ``Late[<name>]`` in the statistics (built
        whenever statistics are collected, or when this is read). ``retain`` does not apply:
        each late record stays, as an arrival; count or sample it rather than arrange it.

        Example: ``w.late.inspect(print)`` prints each late record as it arrives."""
        return self._build_late()

    @property
    def records(self) -> Collection:
        """``((window, key), value)``: the records as the window results see them: each
        accepted record from its window's end on (then frozen), without the late ones.

        Example: ``w.records.count()`` is ``w.count()`` keyed by record instead of by window."""
        if isinstance(self.spec, Session):
            return self._session_reduce(_values, f"{self.name}.records")
        with_end = self._windowed.temporal_filter(lower=_end)
        return self._finish(with_end)

    def __repr__(self) -> str:
        return f"<{self.name} lateness={self.lateness} retain={self.retain}>"


def _identity(v: Any) -> Any:
    return v


def _count_values(wk: Any, vals: Values) -> List[Tuple[Any, int]]:
    n = sum(c for _, c in vals)
    return [(n, 1)] if n else []


def _values(wk: Any, vals: Values) -> List[Tuple[Any, int]]:
    return list(vals)


def windowed(
    pairs: Collection,
    spec: Spec,
    event_time: Callable[[Any], Any],
    lateness: int = 0,
    retain: Optional[int] = None,
    name: Optional[str] = None,
) -> Windowed:
    """Window the ``(key, value)`` records of ``pairs`` by the event time
    ``event_time(value)`` (an int) under ``spec`` (:class:`Tumbling`, :class:`Sliding` or
    :class:`Session`).

    ``lateness``: how long after a window's end records still count (they change its result
    when they arrive); later ones go to :attr:`Windowed.late`. ``retain``: results leave the
    output ``retain`` time units after they became final (None keeps them). ``name`` names
    the operators (statistics); default ``Windowed[<spec>]``. ValueError for a negative
    lateness or retain.

    Example::

        counts = windowed(clicks, Tumbling(300), lambda c: c[1]).count()
        # ((Window(0, 300), page), n) from time 300 on, for clicks (page, (user, time))
    """
    return Windowed(pairs, spec, event_time, lateness, retain, name)
