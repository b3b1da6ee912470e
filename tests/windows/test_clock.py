"""ProcessingTimeClock: wall-clock stamps in integer units, ticks every period, run() bounded by
its limits, driven by a fake clock; and a processing-time window count in a real session."""

from __future__ import annotations

from typing import Any, List

import pytest

import timelypy as tp
from timelypy.windows import ProcessingTimeClock
from timelypy.windows.event_time import EventTimeError

from .test_event_time import BulkSession, FakeSession, contents_at


class FakeClock:
    """Wall time in seconds that moves only when told (or when slept)."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        assert 0 <= seconds <= 60, seconds  # every wait is bounded
        self.slept.append(seconds)
        self.t += seconds


def test_records_are_stamped_with_the_wall_time_in_units():
    clock = FakeClock(1000.0)
    s = BulkSession()
    c = ProcessingTimeClock(s, "clicks", period=1.0, clock=clock, unit=1000)
    assert c.push("a") == 1_000_000  # milliseconds
    clock.t = 1000.25
    assert c.push("b") == 1_000_250
    clock.t = 1000.1  # the wall clock stepped back: stamps do not
    assert c.push("c") == 1_000_250
    assert s.updates == [] and c.pending == 3
    assert c.tick() == 1_000_251  # past every record stamped so far
    assert s.updates == [
        ("clicks", "a", 1_000_000, 1),
        ("clicks", "b", 1_000_250, 1),
        ("clicks", "c", 1_000_250, 1),
    ]
    assert s.time == 1_000_251 and c.ticks == 1
    seconds = ProcessingTimeClock(BulkSession(), "x", period=5, clock=clock, unit=1)
    assert seconds.push("a") == 1000


def test_push_ticks_once_a_period_passed():
    clock = FakeClock(50.0)
    s = FakeSession()
    c = ProcessingTimeClock(s, "x", period=2.0, clock=clock, unit=10, advance="input")
    for step in range(10):  # 0.5 s apart: a tick every 4 pushes
        clock.t = 50.0 + step * 0.5
        c.push(step)
    advances = [call for call in s.calls if call[0] == "advance_to"]
    assert advances == [("advance_to", 521, "x"), ("advance_to", 541, "x")]
    assert [u[2] for u in s.updates] == [500, 505, 510, 515, 521, 525, 530, 535]
    assert s.time == 0  # advance="input": the session's own time is not moved


def test_run_an_iterable_then_tick():
    clock = FakeClock(10.0)
    s = BulkSession()
    c = ProcessingTimeClock(s, "x", period=1.0, clock=clock, sleep=clock.sleep)
    assert c.run(iter(range(5))) == 5
    assert [u[1] for u in s.updates] == [0, 1, 2, 3, 4] and c.advanced == 10_001
    assert c.run(range(100), max_records=7) == 7


def test_run_a_poll_function_is_bounded_by_stop_after():
    clock = FakeClock(0.0)
    s = BulkSession()
    c = ProcessingTimeClock(s, "x", period=1.0, clock=clock, sleep=clock.sleep)
    batches = [[1, 2], [], [], [3], []]

    def poll() -> List[Any]:
        return batches.pop(0) if batches else []

    assert c.run(poll, stop_after=5.0, poll=0.3) == 3
    assert 5.0 <= clock.t <= 5.31 and max(clock.slept) <= 0.3
    assert c.ticks >= 5  # the input advanced every period while the source was idle
    with pytest.raises(EventTimeError, match=r"run\(poll_function\) needs stop_after"):
        c.run(poll)


def test_bad_arguments_are_refused():
    for period in (0, -1, "1", None):
        with pytest.raises(EventTimeError, match="period must be a positive number"):
            ProcessingTimeClock(BulkSession(), "x", period=period)
    with pytest.raises(EventTimeError, match="unit 0.5 of type float is not an int"):
        ProcessingTimeClock(BulkSession(), "x", period=1, unit=0.5)


PERIOD_UNITS = 100  # windows of 100 ms of processing time


def processing_time_count(scope):
    clicks_in, clicks = scope.new_collection()  # (page, arrival time in ms)
    counts = (
        clicks.map(lambda c: ((c[1] // PERIOD_UNITS + 1) * PERIOD_UNITS, c[0]))
        .temporal_filter(lower=lambda r: r[0])
        .count()
    )
    return {"clicks": clicks_in, "probe": counts.probe(), "out": counts.capture()}


@pytest.mark.parametrize(
    "backend,workers", [("inline", 1), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_processing_time_windows_close_as_the_clock_passes(backend, workers):
    """Each click is stamped with its arrival time (``with_time``: the record carries it); its
    window's count appears once the input advanced past the window's end: exactly the clicks
    that arrived in it, at every time the session completed."""
    clock = FakeClock(1_700_000_000.0)
    with tp.open_session(processing_time_count, workers=workers, backend=backend) as s:
        c = ProcessingTimeClock(
            s, "clicks", period=0.1, clock=clock, sleep=clock.sleep, with_time=True
        )
        start = c.advanced
        arrivals = []
        for i in range(40):
            clock.t += 0.037
            page = "ab"[i % 2]
            arrivals.append((page, c.push(page)))
        assert c.ticks >= 10
        c.tick()
        s.wait("probe")
        changes = s.changes("out")
    assert {u[2] for u in changes} == {1, -1} or {u[2] for u in changes} == {1}
    for t in range(start, c.advanced):
        expected: dict = {}
        for page, at in arrivals:
            end = (at // PERIOD_UNITS + 1) * PERIOD_UNITS
            if end <= t:
                expected[(end, page)] = expected.get((end, page), 0) + 1
        assert contents_at(changes, t) == {(k, n): 1 for k, n in expected.items()}, t
