"""Processing time: records stamped with the wall clock, the input advanced every period.

Where records carry no event time of their own (or their arrival is what matters), the time
of a dataflow can be the wall clock: :class:`ProcessingTimeClock` puts each record in at the
current wall time in integer units (milliseconds by default) and advances the session's input
to the wall time every ``period`` seconds, so windows over processing time (a
:meth:`~timelypy.Collection.temporal_filter` on the stamped time, or the windows of
:mod:`timelypy.windows` over it) close as the clock passes their ends. A processing-time window
never sees a late record: every record goes in at the time it arrives.

The clock function and the sleep are injectable, so tests drive a fake clock; every wait of
:meth:`ProcessingTimeClock.run` is bounded by ``stop_after``.
"""

from __future__ import annotations

import time as _time
from typing import Any, Callable, Iterable, List, Optional, Union

from .event_time import DEFAULT_BATCH, EventTimeError, check_session, event_time_int

__all__ = ["ProcessingTimeClock"]

Source = Union[Iterable[Any], Callable[[], Iterable[Any]]]


class ProcessingTimeClock:
    """A session input fed at wall-clock times, advanced every ``period`` seconds.

    ``clock = ProcessingTimeClock(session, "clicks", period=1.0)``: :meth:`push` buffers a
    record at ``int(clock() * unit)`` (``unit`` = 1000: milliseconds since the epoch with the
    default ``clock=time.time``; never earlier than the time before, should the wall clock step
    back); :meth:`tick` hands the buffer to the session and advances the input to the current
    time, and :meth:`push` ticks by itself once ``period`` seconds passed since the last tick.
    :meth:`run` drives a source for a bounded time. ``advance`` is as for
    :class:`~timelypy.windows.EventTimeInput` (``"session"``: every input; ``"input"``: this
    one). The first time is the wall time at construction (or the session's, if later).
    ``with_time=True`` pushes ``(record, time)`` instead of ``record``: windows read an event
    time from the record, so this makes the arrival time the event time of processing-time
    windows (``event_time=lambda r: r[1]``).

    Example::

        clock = ProcessingTimeClock(session, "clicks", period=0.5)
        clock.run(["a", "b", "c"])          # stamped now; the input advances to now at the end
        clock.run(poll_new_clicks, stop_after=10.0)   # a poll function, for at most 10 s
    """

    def __init__(
        self,
        session: Any,
        input: str,
        period: float,
        clock: Callable[[], float] = _time.time,
        unit: int = 1000,
        *,
        sleep: Callable[[float], None] = _time.sleep,
        advance: str = "session",
        batch: int = DEFAULT_BATCH,
        with_time: bool = False,
    ) -> None:
        if not isinstance(period, (int, float)) or isinstance(period, bool) or not period > 0:
            raise EventTimeError(
                f"input {input!r}: period must be a positive number of seconds, got {period!r}",
                input=input,
                value=period,
            )
        unit = event_time_int(unit, input, "unit")
        if unit < 1:
            raise EventTimeError(f"input {input!r}: unit must be >= 1, got {unit}", input, unit)
        if advance not in ("session", "input"):
            raise EventTimeError(
                f"input {input!r}: advance must be 'session' or 'input', not {advance!r}",
                input=input,
                value=advance,
            )
        check_session(session, input)
        self.session = session
        self.input = input
        self.period = float(period)
        self.unit = unit
        self.batch = batch
        self.advance_mode = advance
        self.with_time = with_time
        self._clock = clock
        self._sleep = sleep
        self._last = event_time_int(session.time, input, "session time")
        self._last = self.now()
        self._advanced = self._last
        self._last_tick = clock()
        self._ticks = 0
        self._pushed = 0
        self._records: List[Any] = []
        self._times: List[int] = []
        self._diffs: List[int] = []

    # -- time ----------------------------------------------------------------------------
    def now(self) -> int:
        """The current wall time in integer units (never below the time it gave before)."""
        t = int(self._clock() * self.unit)
        if t > self._last:
            self._last = t
        return self._last

    @property
    def advanced(self) -> int:
        """The time the input was last advanced to: results before it are complete."""
        return self._advanced

    @property
    def ticks(self) -> int:
        """How many times the input was advanced."""
        return self._ticks

    @property
    def pushed(self) -> int:
        """How many records were pushed."""
        return self._pushed

    @property
    def pending(self) -> int:
        """Records pushed but not yet handed to the session."""
        return len(self._records)

    def __repr__(self) -> str:
        return (
            f"ProcessingTimeClock({self.input!r}, period={self.period}s, unit={self.unit}/s, "
            f"advanced={self._advanced}, pushed={self._pushed}, ticks={self._ticks})"
        )

    # -- feeding -------------------------------------------------------------------------
    def push(self, record: Any, diff: int = 1) -> int:
        """Buffer ``record`` (by ``diff``) at the current wall time; returns that time. Ticks
        first if ``period`` seconds passed since the last tick."""
        if self._clock() - self._last_tick >= self.period:
            self.tick()
        at = self.now()
        self._records.append((record, at) if self.with_time else record)
        self._times.append(at)
        self._diffs.append(diff)
        self._pushed += 1
        if len(self._records) >= self.batch:
            self._hand_over()
        return at

    def _hand_over(self) -> None:
        if not self._records:
            return
        records, times, diffs = self._records, self._times, self._diffs
        self._records, self._times, self._diffs = [], [], []
        bulk = getattr(self.session, "update_many", None)
        if bulk is not None:
            bulk(self.input, records, diffs, times)
        else:
            for record, t, d in zip(records, times, diffs, strict=True):
                self.session.update_at(self.input, record, t, d)

    def tick(self) -> int:
        """Hand the buffered records to the session and advance the input to the current
        wall time (every record so far is then before it). Returns that time."""
        self._hand_over()
        self._last_tick = self._clock()
        t = self.now() + 1  # past the records stamped at this very time
        self._last = t
        if t > self._advanced:
            if self.advance_mode == "session":
                self.session.advance_to(t)
            else:
                self.session.advance_to(t, input=self.input)
            self._advanced = t
            self._ticks += 1
        return self._advanced

    def run(
        self,
        source: Source,
        stop_after: Optional[float] = None,
        *,
        max_records: Optional[int] = None,
        poll: float = 0.05,
    ) -> int:
        """Push the records of ``source``, ticking every ``period``, until it is exhausted,
        ``stop_after`` seconds (of the clock) passed, or ``max_records`` were pushed; then tick
        once more. Returns how many records were pushed.

        ``source`` is an iterable of records (read as fast as it yields; the limits are checked
        between records) or a function returning the records that arrived since its last call
        (a poll; an empty result sleeps until the next poll or tick, at most ``poll`` seconds):
        a function needs ``stop_after``, so that the loop ends."""
        if callable(source) and stop_after is None:
            raise EventTimeError(
                f"input {self.input!r}: run(poll_function) needs stop_after= (seconds): a poll "
                "never runs out by itself",
                input=self.input,
            )
        start = self._clock()
        pushed = 0

        def done() -> bool:
            if max_records is not None and pushed >= max_records:
                return True
            return stop_after is not None and self._clock() - start >= stop_after

        if callable(source):
            while not done():
                new = list(source())
                for record in new:
                    self.push(record)
                    pushed += 1
                    if done():
                        break
                if not new:
                    self._wait(start, stop_after, poll)
        else:
            for record in source:
                if done():
                    break
                self.push(record)
                pushed += 1
        self.tick()
        return pushed

    def _wait(self, start: float, stop_after: Optional[float], poll: float) -> None:
        """Sleep until the next poll, tick or the end, whichever comes first (ticking if due)."""
        now = self._clock()
        to_tick = self._last_tick + self.period - now
        if to_tick <= 0:
            self.tick()
            return
        pause = min(poll, to_tick)
        if stop_after is not None:
            pause = min(pause, max(start + stop_after - now, 0.0))
        self._sleep(max(pause, 0.0))
