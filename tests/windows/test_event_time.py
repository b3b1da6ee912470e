"""EventTimeInput: watermark arithmetic, stamping of late records, the calls it makes on the
session, its errors, and a windowed count fed through it, exact at every time against a
from-scratch computation (inline, and two worker processes)."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

import timelypy as tp
from timelypy.windows import EventTimeInput
from timelypy.windows.event_time import EventTimeError


class FakeSession:
    """The duck-typed session: records every call (``bulk=False``: no ``update_many``)."""

    def __init__(self, time: int = 0) -> None:
        self.time = time
        self.calls: List[Tuple[Any, ...]] = []
        self.updates: List[Tuple[str, Any, int, int]] = []

    def update_at(self, input: str, data: Any, time: int, diff: int) -> None:
        self.calls.append(("update_at",))
        self.updates.append((input, data, time, diff))

    def advance_to(self, time: int, input: Any = None) -> None:
        self.calls.append(("advance_to", time, input))
        if input is None:
            self.time = time

    def flush(self) -> None:
        self.calls.append(("flush",))


class BulkSession(FakeSession):
    """With the bulk path; refuses an update behind its time, as a driver session does."""

    def update_many(self, input: str, records: Any, diffs: Any, times: Any) -> None:
        assert min(times) >= self.time, (min(times), self.time)
        self.calls.append(("update_many", len(records)))
        self.updates += [(input, r, t, d) for r, t, d in zip(records, times, diffs, strict=True)]


def stamps(events: List[int], bound: int, start: int = 0) -> List[int]:
    """From scratch: the time each event time goes in at (the watermark rule)."""
    out, latest = [], None
    for et in events:
        wm = start if latest is None else max(start, latest - bound)
        out.append(max(et, wm))
        latest = et if latest is None else max(latest, et)
    return out


def test_watermark_is_the_latest_event_time_minus_the_bound():
    s = BulkSession()
    feed = EventTimeInput(s, "bids", max_out_of_orderness=5, start=0)
    assert feed.watermark == 0 and feed.latest is None
    assert feed.push("a", 3) == 3 and feed.watermark == 0  # 3 - 5 < 0: stays at start
    assert feed.push("b", 12) == 12 and feed.watermark == 7
    assert feed.push("c", 9) == 9 and feed.watermark == 7  # in order enough: its own time
    assert feed.push("d", 4) == 7 and feed.behind == 1  # behind the watermark: stamped there
    assert feed.push("e", 10) == 10 and feed.watermark == 7  # never decreases
    assert feed.latest == 12 and feed.pushed == 5
    assert s.updates == [] and feed.pending == 5  # buffered until a flush or a full batch
    feed.flush()
    assert s.calls == [("update_many", 5), ("advance_to", 7, None)]
    assert s.updates == [
        ("bids", "a", 3, 1),
        ("bids", "b", 12, 1),
        ("bids", "c", 9, 1),
        ("bids", "d", 7, 1),
        ("bids", "e", 10, 1),
    ]
    assert feed.advanced == 7 and s.time == 7


@pytest.mark.parametrize("bound", [0, 1, 3, 10])
def test_stamps_match_the_rule_on_random_disorder(bound):
    rng = random.Random(bound)
    events = [max(0, i + rng.randint(-8, 2)) for i in range(500)]
    s = BulkSession()
    feed = EventTimeInput(s, "x", max_out_of_orderness=bound, batch=64)
    feed.push_many((i, et, 1) for i, et in enumerate(events))
    expected = stamps(events, bound)
    assert [t for _, _, t, _ in s.updates] == expected
    assert feed.behind == sum(1 for et, at in zip(events, expected, strict=True) if at > et)
    assert feed.watermark == max(events) - bound
    # the session advanced every batch (about 500 / 64 times), never backwards, never past
    # the watermark at that point: every update went in at or after its input's time
    advances = [c[1] for c in s.calls if c[0] == "advance_to"]
    assert advances == sorted(advances) and 5 <= len(advances) <= 9
    assert [c[0] for c in s.calls].count("update_many") == 8  # 7 full batches and the rest


def test_updates_never_go_behind_the_input_time():
    """Every batch handed over is at or after the time the input was advanced to before
    (BulkSession asserts it, as a driver session refuses such an update)."""
    rng = random.Random(7)
    s = BulkSession()
    feed = EventTimeInput(s, "x", max_out_of_orderness=2, batch=10)
    for i in range(300):
        feed.push(i, max(0, i // 2 + rng.randint(-6, 3)))
    feed.finish()
    assert len(s.updates) == 300 and feed.behind > 20


def test_explicit_watermarks_move_up_only_and_smaller_ones_are_ignored():
    s = BulkSession()
    feed = EventTimeInput(s, "x", max_out_of_orderness=100, start=0)
    feed.push("a", 50)
    assert feed.advance(30) == 30 and s.time == 30
    assert feed.push("late", 10) == 30 and feed.behind == 1
    assert feed.advance(20) == 30  # smaller: ignored
    assert feed.advance(np.int64(40)) == 40 and s.time == 40
    assert [c for c in s.calls if c[0] == "advance_to"] == [
        ("advance_to", 30, None),
        ("advance_to", 40, None),
    ]


def test_finish_advances_past_every_event_and_refuses_more():
    s = BulkSession()
    feed = EventTimeInput(s, "x", max_out_of_orderness=10)
    feed.push_many([("a", 5, 1), ("b", 17, 1), ("c", 2, -1)])
    assert feed.finish() == 18 and s.time == 18 and feed.finished
    assert feed.finish() == 18  # a no-op
    with pytest.raises(EventTimeError, match=r"input 'x': push after finish\(\)"):
        feed.push("d", 30)
    with pytest.raises(EventTimeError, match="push after finish"):
        feed.advance(40)
    other = EventTimeInput(BulkSession(), "y")
    other.push("a", 3)
    assert other.finish(end=100) == 100


def test_event_times_must_be_ints():
    feed = EventTimeInput(BulkSession(), "bids", max_out_of_orderness=1)
    for bad in (1.5, "3", None, True, 2.0):
        with pytest.raises(EventTimeError, match="input 'bids': event time .* is not an int") as e:
            feed.push("r", bad)
        assert e.value.input == "bids" and e.value.value is bad
    assert feed.pushed == 0 and feed.pending == 0  # nothing of a refused push is kept
    with pytest.raises(EventTimeError, match="watermark 2.5 of type float"):
        feed.advance(2.5)
    with pytest.raises(EventTimeError, match="max_out_of_orderness must be >= 0"):
        EventTimeInput(BulkSession(), "bids", max_out_of_orderness=-1)
    with pytest.raises(EventTimeError, match="advance must be 'session' or 'input'"):
        EventTimeInput(BulkSession(), "bids", advance="all")


def test_one_input_advance_and_the_update_at_path():
    s = FakeSession(time=4)
    feed = EventTimeInput(s, "x", advance="input")  # starts at the session's time
    assert feed.watermark == 4
    feed.push("a", 9)
    feed.push("b", 1)
    feed.flush()
    assert s.updates == [("x", "a", 9, 1), ("x", "b", 9, 1)]
    assert s.calls[-1] == ("advance_to", 9, "x") and s.time == 4
    feed.flush()  # nothing new: only a flush
    assert s.calls[-1] == ("flush",)


# -- a windowed count fed at event time, exact at every time --------------------------------
SIZE, LATENESS, BOUND = 10, 4, 6


def windowed_count(scope):
    events_in, events = scope.new_collection()  # (key, event_time)

    def window_end(pair):
        return pair[1] // SIZE * SIZE + SIZE

    counts = (
        events.map(lambda p: ((window_end(p), p[0]), p[1]))
        .temporal_filter(lower=lambda r: r[0][0], upper=lambda r: r[0][0] + LATENESS + 1)
        .map(lambda r: r[0])
        .count()
        .freeze_at(lambda r: r[0][0] + LATENESS + 1)
    )
    return {"events": events_in, "probe": counts.probe(), "out": counts.capture()}


def from_scratch(events: List[Tuple[str, int]], at: List[int], t: int) -> Dict[Any, int]:
    """The windowed counts as of time ``t``: window ``[e - SIZE, e)`` closes at ``e``; a record
    stamped at ``s`` counts from ``max(s, e)`` if ``s <= e + LATENESS``, else never."""
    counts: Dict[Any, int] = defaultdict(int)
    for (key, et), s in zip(events, at, strict=True):
        end = et // SIZE * SIZE + SIZE
        if t >= end and s <= min(t, end + LATENESS):
            counts[(end, key)] += 1
    return {(window_key, n): 1 for window_key, n in counts.items()}  # count's output records


def contents_at(changes: List[Tuple[Any, int, int]], t: int) -> Dict[Any, int]:
    acc: Dict[Any, int] = defaultdict(int)
    for record, time, diff in changes:
        if time <= t:
            acc[record] += diff
    return {r: n for (r, n) in acc.items() if n}


def generate(n: int, seed: int) -> List[Tuple[str, int]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        et = i // 3 + rng.choice([0, 0, 0, -1, -3, -7, -12, 2])  # some beyond the bound
        out.append((rng.choice("abc"), max(0, et)))
    return out


@pytest.mark.parametrize(
    "backend,workers",
    [("inline", 1), ("inline", 2), pytest.param("processes", 2, marks=pytest.mark.processes)],
)
def test_a_windowed_count_at_event_time_is_exact_at_every_time(backend, workers):
    events = generate(600, seed=workers)
    at = stamps([et for _, et in events], BOUND)
    assert any(a > et + LATENESS for (_, et), a in zip(events, at, strict=True))  # some late
    with tp.open_session(windowed_count, workers=workers, backend=backend, timeout=120) as s:
        feed = EventTimeInput(s, "events", max_out_of_orderness=BOUND, batch=50)
        for lo in range(0, len(events), 150):  # four pushes, each followed by a check
            feed.push_many((e, e[1], 1) for e in events[lo : lo + 150])
            s.wait("probe")
            changes = s.changes("out")
            if lo == 0:
                seen = changes
            else:
                seen += changes
            for t in range(0, feed.advanced):  # every time the session completed
                assert contents_at(seen, t) == from_scratch(events[: lo + 150], at[: lo + 150], t)
        last_close = max(et // SIZE * SIZE + SIZE for _, et in events) + LATENESS + 1
        end = feed.finish(end=last_close + 3)  # past the last window's lateness
        s.wait("probe")
        seen += s.changes("out")
        for t in range(0, end):
            assert contents_at(seen, t) == from_scratch(events, at, t), t
        assert contents_at(seen, end - 1) == from_scratch(events, at, 10**9)
        assert feed.behind == sum(1 for (_, et), a in zip(events, at, strict=True) if a > et)


def test_push_columns_hands_a_whole_column_over_in_one_call():
    s = BulkSession()
    feed = EventTimeInput(s, "x", max_out_of_orderness=2, batch=2)
    feed.push("first", 1)
    assert feed.push_columns(["a", "b", "c", "d"], [5, 1, 8, np.int32(3)], [1, 1, -1, 1]) == [
        5,
        3,
        8,
        6,
    ]
    assert s.calls == [("update_many", 1), ("update_many", 4), ("advance_to", 6, None)]
    with pytest.raises(EventTimeError, match="event time '9' of type str"):
        feed.push_columns(["e", "f"], [9, "9"])
    assert feed.pushed == 5 and feed.watermark == 6  # nothing of the refused column
    with pytest.raises(EventTimeError, match="2 records but 1 event times"):
        feed.push_columns(["e", "f"], [9])


def test_the_watermark_follows_a_session_advanced_by_someone_else():
    s = BulkSession()
    feed = EventTimeInput(s, "x", max_out_of_orderness=5)
    feed.push("a", 10)
    feed.push("b", 12)
    s.advance_to(11)  # the user's own advance (or a source of another kind)
    feed.flush()  # "a" at 10 is behind the session now: it goes in at 11
    assert [u[2] for u in s.updates] == [11, 12] and feed.behind == 1
    assert feed.watermark == 11 and feed.advanced == 11
    assert feed.stamp_columns([3]) == [11] and feed.behind == 2


def test_a_record_the_session_refuses_is_dropped_and_the_others_go_on():
    with tp.open_session(windowed_count, workers=2) as s:
        feed = EventTimeInput(s, "events", max_out_of_orderness=0, batch=100)
        feed.push(("a", 1), 1)
        feed.push(["unhashable"], 2)
        feed.push(("b", 3), 3)
        with pytest.raises(tp.errors.SessionInputError, match="unhashable") as e:
            feed.flush()
        assert e.value.value == ["unhashable"] and feed.pending == 2
        feed.finish(end=20)
        s.wait("probe")
        assert sorted(r for r, _, d in s.changes("out") if d > 0) == [
            ((10, "a"), 1),
            ((10, "b"), 1),
        ]


def test_the_update_at_path_keeps_what_follows_a_refused_record():
    class Refusing(FakeSession):
        def update_at(self, input, data, time, diff):
            if data == "bad":
                raise tp.errors.SessionInputError("cannot route 'bad'", input=input, value=data)
            super().update_at(input, data, time, diff)

    s = Refusing()
    feed = EventTimeInput(s, "x")
    for r, t in (("a", 1), ("bad", 2), ("c", 3)):
        feed.push(r, t)
    with pytest.raises(tp.errors.SessionInputError):
        feed.flush()
    assert [u[1] for u in s.updates] == ["a"] and feed.pending == 1
    feed.flush()
    assert [u[1] for u in s.updates] == ["a", "c"] and s.time == 3


def test_a_session_without_the_input_protocol_is_refused_by_name():
    class Half:
        time = 0

        def update_at(self, input, data, time, diff):
            pass

    with pytest.raises(
        TypeError, match=r"input 'x': Half is not a session .* no advance_to, flush"
    ):
        EventTimeInput(Half(), "x")


def two_sources(scope):
    bids_in, bids = scope.new_collection()  # (auction, event_time)
    asks_in, asks = scope.new_collection()
    per_window = (
        bids.concat(asks)
        .map(lambda r: (r[1] // SIZE * SIZE + SIZE, r[0]))
        .temporal_filter(lower=lambda r: r[0])
        .count()
    )
    return {
        "bids": bids_in,
        "asks": asks_in,
        "probe": per_window.probe(),
        "out": per_window.capture(),
    }


@pytest.mark.parametrize(
    "backend,workers", [("inline", 1), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_two_sources_each_with_its_watermark_hold_the_results_at_the_lower(backend, workers):
    with tp.open_session(two_sources, workers=workers, backend=backend, timeout=120) as s:
        bids = EventTimeInput(s, "bids", max_out_of_orderness=2, advance="input")
        asks = EventTimeInput(s, "asks", max_out_of_orderness=2, advance="input")
        bids.push_many([(("x", t), t, 1) for t in (1, 5, 12, 25)])  # bids at 23
        asks.push_many([(("x", t), t, 1) for t in (3, 14)])  # asks at 12: the low watermark
        assert (bids.advanced, asks.advanced, s.time) == (23, 12, 0)
        s.wait("probe", time=12)
        out = s.changes("out")
        assert contents_at(out, 11) == {((10, "x"), 3): 1}  # window [0, 10) only
        assert all(t >= 10 for _, t, _ in out)
        asks.push_many([(("x", 30), 30, 1)])  # asks at 28: the low watermark is now 23
        s.wait("probe", time=23)
        out += s.changes("out")
        assert contents_at(out, 22) == {((10, "x"), 3): 1, ((20, "x"), 2): 1}
