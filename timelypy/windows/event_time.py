"""Event time from a source: records in at their event times, the input at a low watermark.

Records are stamped with their event times and the input advanced to a low watermark with
bounded out-of-orderness.

This is the pattern of the Differential Dataflow book's chapter on real-time streaming input:
the dataflow's logical time IS the event-time clock. Each record goes in at its event time
(never earlier than the input's time), and the input advances to the *low watermark*, the time
before which no more records are expected, so every result for times before it is complete and
final. With a bound ``max_out_of_orderness`` on how far behind the newest event a record may
arrive, the watermark is ``max(event times seen) - max_out_of_orderness``, never decreasing.

A record older than the watermark (it came later than the bound allows) cannot go in at its
event time any more, since those times are closed: it is stamped at the watermark instead
(:attr:`EventTimeInput.behind` counts them). Its event time stays in the record if the dataflow
needs it (windows take ``event_time(value)``); whether it still counts for its windows is the
windows' lateness rule.

The session is duck-typed: anything with ``update_at(input, data, time, diff)``,
``advance_to(time, input=None)``, ``flush()`` and ``time`` (a driver ``DataflowSession``, or
a wrapper like it), and, used when present, ``update_many(input, records, diffs, times)``, the
bulk path that checks and buffers a whole column of updates in one call.
"""

from __future__ import annotations

import numbers
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from ..errors import SessionInputError, TimelyError, short_repr

__all__ = [
    "EventTimeInput",
    "EventTimeError",
    "event_time_int",
    "check_session",
    "DEFAULT_BATCH",
]

DEFAULT_BATCH = 10_000
"""How many pushed records an :class:`EventTimeInput` buffers before it hands them to the
session and advances it (one round trip to the workers per batch, not per record)."""


class EventTimeError(TimelyError, ValueError):
    """An event time, a watermark or a call an event-time input refuses; names the input and
    the value (``input``, ``value``)."""

    def __init__(self, message: str, input: Optional[str] = None, value: Any = None) -> None:
        super().__init__(message)
        self.input = input
        self.value = value


def event_time_int(value: Any, input: Optional[str] = None, what: str = "event time") -> int:
    """``value`` as an int time (numpy integers too); :class:`EventTimeError` for anything else
    (a bool, a float, a string, None: convert it in the source, with a documented unit).

    >>> from timelypy.windows.event_time import event_time_int
    >>> event_time_int(7)
    7
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    where = f"input {input!r}: " if input is not None else ""
    raise EventTimeError(
        f"{where}{what} {short_repr(value)} of type {type(value).__name__} is not an int "
        f"(convert it in the source: e.g. a datetime to integer milliseconds since the epoch)",
        input=input,
        value=value,
    )


SESSION_METHODS = ("update_at", "advance_to", "flush")


def check_session(session: Any, input: str) -> None:
    """:class:`TypeError` unless ``session`` has what an event-time input calls (naming what
    it lacks): ``update_at``, ``advance_to``, ``flush`` and ``time``."""
    missing = [m for m in SESSION_METHODS if not callable(getattr(session, m, None))]
    missing += [] if hasattr(session, "time") else ["time"]
    if missing:
        raise TypeError(
            f"input {input!r}: {type(session).__name__} is not a session an event-time input "
            f"can feed: it has no {', '.join(missing)} (a driver session has them all; wrap "
            f"another kind of session in an object that does)"
        )


class EventTimeInput:
    """A session input fed at event times, advanced to a low watermark.

    ``feed = EventTimeInput(session, "bids", max_out_of_orderness=5, start=0)``:

    - :meth:`push` ``(record, event_time, diff=1)`` stamps the record at
      ``max(event_time, watermark)`` and raises the watermark to ``max(event times seen) -
      max_out_of_orderness`` (it never decreases);
    - pushed records are buffered here and handed to the session ``batch`` at a time (through
      its ``update_many`` when it has one), and the session's input is then advanced to the
      watermark: results for the times before it appear. :meth:`flush` does that at once;
      :meth:`push_many`, :meth:`advance` and :meth:`finish` end with it;
    - :meth:`advance` ``(watermark)`` moves the watermark explicitly (a source that knows it,
      e.g. a punctuation or an idle source); a watermark below the current one is ignored,
      not an error, since watermarks from several sources or retries may arrive out of order
      and an older one says nothing new;
    - :meth:`finish` ``(end=None)`` advances past every pushed event (or to ``end``) and refuses
      further pushes;
    - a record the session refuses at the hand-over (one it cannot route to a worker) raises
      its :class:`~timelypy.errors.SessionInputError` naming the record; that record is
      dropped and the others stay buffered for the next flush.

    ``advance="session"`` (default) advances every input of the session (``advance_to(t)``:
    the session's time moves, ``session.wait(probe)`` waits for it, checkpoints are taken);
    ``advance="input"`` advances only this input (``advance_to(t, input=name)``), for a session
    fed by several event-time inputs, each with its own watermark (the dataflow's frontier is
    then the lowest of them; wait with ``session.wait(probe, time=...)``).

    ``start`` is the first watermark (default: the session's time). Event times are ints in
    the unit of the source (seconds, milliseconds...); :class:`EventTimeError` for other types.

    >>> import timelypy as tp
    >>> from timelypy.windows import EventTimeInput
    >>> def dataflow(scope):
    ...     clicks_in, clicks = scope.new_collection()
    ...     return {"clicks": clicks_in, "probe": clicks.probe(), "out": clicks.capture()}
    >>> with tp.open_session(dataflow) as s:
    ...     feed = EventTimeInput(s, "clicks", max_out_of_orderness=2)
    ...     feed.push("a", 10)      # its event time; the watermark becomes 8
    ...     feed.push("b", 7)       # behind the watermark: stamped at 8
    ...     feed.finish()           # the input advances past every event: 11
    ...     s.wait("probe")
    ...     sorted(s.changes("out"), key=lambda u: u[1]), feed.behind
    10
    8
    11
    ([('b', 8, 1), ('a', 10, 1)], 1)
    """

    def __init__(
        self,
        session: Any,
        input: str,
        max_out_of_orderness: int = 0,
        start: Optional[int] = None,
        *,
        batch: int = DEFAULT_BATCH,
        advance: str = "session",
    ) -> None:
        self.session = session
        self.input = input
        self.max_out_of_orderness = event_time_int(
            max_out_of_orderness, input, "max_out_of_orderness"
        )
        if self.max_out_of_orderness < 0:
            raise EventTimeError(
                f"input {input!r}: max_out_of_orderness must be >= 0, got "
                f"{self.max_out_of_orderness}",
                input=input,
                value=max_out_of_orderness,
            )
        if not isinstance(batch, int) or batch < 1:
            raise EventTimeError(f"input {input!r}: batch must be a positive int, got {batch!r}")
        if advance not in ("session", "input"):
            raise EventTimeError(
                f"input {input!r}: advance must be 'session' or 'input', not {advance!r}",
                input=input,
                value=advance,
            )
        check_session(session, input)
        self.batch = batch
        self.advance_mode = advance
        first = session.time if start is None else start
        self._watermark = event_time_int(first, input, "start")
        self._advanced = self._watermark
        """The time the session's input was last advanced to (or started at)."""
        self._latest: Optional[int] = None
        self._behind = 0
        self._pushed = 0
        self._finished = False
        self._records: List[Any] = []
        self._times: List[int] = []
        self._diffs: List[int] = []

    # -- state ---------------------------------------------------------------------------
    @property
    def watermark(self) -> int:
        """The low watermark: every time before it is closed (no record is stamped there)."""
        return self._watermark

    @property
    def advanced(self) -> int:
        """The time the session's input was last advanced to (the watermark, as of the last
        :meth:`flush`; the dataflow's results before it are complete once it catches up)."""
        return self._advanced

    @property
    def latest(self) -> Optional[int]:
        """The largest event time pushed so far (None before the first)."""
        return self._latest

    @property
    def behind(self) -> int:
        """How many pushed records were stamped later than their event time (they arrived
        behind the watermark)."""
        return self._behind

    @property
    def pushed(self) -> int:
        """How many records were pushed."""
        return self._pushed

    @property
    def finished(self) -> bool:
        """Whether :meth:`finish` was called (pushes are refused from then on)."""
        return self._finished

    @property
    def pending(self) -> int:
        """Records pushed but not yet handed to the session."""
        return len(self._records)

    def __repr__(self) -> str:
        return (
            f"EventTimeInput({self.input!r}, watermark={self._watermark}, "
            f"max_out_of_orderness={self.max_out_of_orderness}, pushed={self._pushed}, "
            f"behind={self._behind}{', finished' if self._finished else ''})"
        )

    # -- pushing -------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._finished:
            raise EventTimeError(
                f"input {self.input!r}: push after finish() (the input was advanced to "
                f"{self._advanced}; open a new EventTimeInput to go on)",
                input=self.input,
            )

    def stamp(self, event_time: Any) -> int:
        """Take one event time in: the time its record goes in at (``max(event_time,
        watermark)``), and the watermark raised by it. Pure bookkeeping: nothing is sent (a
        source that writes the updates itself, e.g. through a journal, uses this)."""
        self._check_open()
        if type(event_time) is not int:
            event_time = event_time_int(event_time, self.input)
        self._pushed += 1
        if self._latest is None or event_time > self._latest:
            self._latest = event_time
        wm = self._watermark
        if event_time < wm:
            self._behind += 1
            return wm
        if event_time - self.max_out_of_orderness > wm:
            self._watermark = event_time - self.max_out_of_orderness
        return event_time

    def push(self, record: Any, event_time: Any, diff: int = 1) -> int:
        """Buffer ``record`` (by ``diff``) at ``max(event_time, watermark)``; returns that time.
        Every ``batch`` records the buffer goes to the session and the input advances."""
        at = self.stamp(event_time)
        self._records.append(record)
        self._times.append(at)
        self._diffs.append(diff)
        if len(self._records) >= self.batch:
            self.flush()
        return at

    def push_many(self, events: Iterable[Tuple[Any, Any, int]]) -> int:
        """Push every ``(record, event_time, diff)`` of ``events`` (any iterable, also an
        endless one: the buffer goes to the session every ``batch`` records), then
        :meth:`flush`. Returns how many were pushed."""
        n = 0
        records, times, diffs = self._records, self._times, self._diffs
        stamp, limit = self.stamp, self.batch
        for record, event_time, diff in events:
            at = stamp(event_time)
            records.append(record)
            times.append(at)
            diffs.append(diff)
            n += 1
            if len(records) >= limit:
                self.flush()  # new buffers: take them again
                records, times, diffs = self._records, self._times, self._diffs
        self.flush()
        return n

    def stamp_columns(self, event_times: Sequence[Any]) -> List[int]:
        """:meth:`stamp` of every one of ``event_times``, in order: the times their records go
        in at. Nothing is sent (a source that writes the updates itself uses this); if one is
        refused, the ones before it were taken in."""
        now = self.session.time if self.advance_mode == "session" else None
        if type(now) is int and now > self._advanced:
            self._catch_up(now, [])
        stamp = self.stamp
        return [stamp(t) for t in event_times]

    def push_columns(
        self, records: Sequence[Any], event_times: Sequence[Any], diffs: Any = 1
    ) -> List[int]:
        """Push whole columns at once (a file, an Arrow batch, a micro-batch): every record at
        its stamped time, handed to the session in ONE call (so its flush sends them together:
        atomically, with a driver session), then :meth:`flush`. ``diffs`` is one int for all or
        one per record. Returns the times used."""
        if len(records) != len(event_times):
            raise EventTimeError(
                f"input {self.input!r}: {len(records)} records but {len(event_times)} event times",
                input=self.input,
            )
        self._check_open()
        for t in event_times:  # check them all first: a refused column takes nothing in
            if type(t) is not int:
                event_time_int(t, self.input)
        times = self.stamp_columns(event_times)
        self._hand_over()
        column = [diffs] * len(records) if isinstance(diffs, int) else list(diffs)
        self._records, self._times, self._diffs = list(records), times, column
        self.flush()
        return times

    # -- the session ---------------------------------------------------------------------
    def _hand_over(self) -> None:
        """Give the buffered updates to the session (buffered there until its flush)."""
        if not self._records:
            return
        records, times, diffs = self._records, self._times, self._diffs
        self._records, self._times, self._diffs = [], [], []
        now = self.session.time if self.advance_mode == "session" else None
        if type(now) is int and now > self._advanced:
            times = self._catch_up(now, times)
        bulk = getattr(self.session, "update_many", None)
        done = 0  # updates the session took (update_many: all or none)
        try:
            if bulk is not None:
                bulk(self.input, records, diffs, times)
            else:
                for record, t, d in zip(records, times, diffs, strict=True):
                    self.session.update_at(self.input, record, t, d)
                    done += 1
        except SessionInputError as exc:
            self._keep_but(exc.value, records[done:], times[done:], diffs[done:])
            raise

    def _keep_but(self, bad: Any, records: List[Any], times: List[int], diffs: List[int]) -> None:
        """The session refused ``bad`` (and so, with ``update_many``, the batch): buffer the
        batch again without it, so that the next flush sends the others."""
        for i, record in enumerate(records):
            try:
                same = record is bad or bool(record == bad)
            except Exception:  # noqa: BLE001 - a record whose __eq__ raises
                same = False
            if same:
                del records[i], times[i], diffs[i]
                break
        self._records[:0], self._times[:0], self._diffs[:0] = records, times, diffs

    def _catch_up(self, now: int, times: List[int]) -> List[int]:
        """The session was advanced past this input's last advance by someone else (its own
        ``advance_to``): the watermark follows it, and buffered records behind ``now`` go in
        at ``now`` (counted in :attr:`behind`)."""
        behind = sum(1 for t in times if t < now)
        self._behind += behind
        self._advanced = now
        if now > self._watermark:
            self._watermark = now
        return [t if t >= now else now for t in times] if behind else times

    def flush(self) -> None:
        """Hand the buffered records to the session and advance its input to the watermark
        (or just flush the session if the watermark did not move)."""
        self._hand_over()
        if self._watermark > self._advanced:
            if self.advance_mode == "session":
                self.session.advance_to(self._watermark)
            else:
                self.session.advance_to(self._watermark, input=self.input)
            self._advanced = self._watermark
        else:
            self.session.flush()

    def advance(self, watermark: Any) -> int:
        """Raise the watermark to ``watermark`` (an int) and flush; a value at or below the
        current watermark is ignored. Returns the watermark."""
        self._check_open()
        wm = event_time_int(watermark, self.input, "watermark")
        if wm > self._watermark:
            self._watermark = wm
        self.flush()
        return self._watermark

    def finish(self, end: Any = None) -> int:
        """Advance past every pushed event (``latest + 1``), or to ``end``, flush, and refuse
        further pushes. Returns the time the input was advanced to. A second call is a no-op."""
        if self._finished:
            return self._advanced
        if end is None:
            target = self._watermark if self._latest is None else self._latest + 1
        else:
            target = event_time_int(end, self.input, "end")
        if target > self._watermark:
            self._watermark = target
        self.flush()
        self._finished = True
        return self._advanced
