"""Worked examples of timelypy.windows: the classic tumbling count, a sliding window, a session
that merges and splits, late data within and beyond the lateness, retain, the errors, and the
state behind a windowed count staying bounded while windows close."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest
from hypothesis import given
from hypothesis import strategies as st

import timelypy as tp
from timelypy.differential.reduce.total import CountTotal
from timelypy.errors import TimelyError, WorkerError
from timelypy.testing import contents_at, run_changes
from timelypy.windows import Session, Sliding, Tumbling, Window, windowed

from . import reference as ref


def _at(changes: Dict[int, Any], time: int) -> Dict[Any, int]:
    return contents_at(changes, time)


def _second(value: Any) -> int:
    return value[1]


def test_five_minute_tumbling_counts_appear_at_the_window_end():
    """Clicks ``(page, (user, second))``: per page, the clicks of each 5-minute window,
    shown from the window's end (300, 600) on, never before."""
    batches: List[Any] = [[] for _ in range(700)]
    batches[10] = [("home", ("ann", 10)), ("home", ("bob", 12))]
    batches[250] = [("cart", ("ann", 250))]
    batches[299] = [("home", ("cid", 299))]
    batches[301] = [("home", ("dan", 301))]
    out = run_changes(lambda clicks: windowed(clicks, Tumbling(300), _second).count(), batches)
    first, second = Window(0, 300), Window(300, 600)
    assert _at(out, 299) == {}
    assert _at(out, 300) == {((first, "home"), 3): 1, ((first, "cart"), 1): 1}
    assert sorted(out) == [300, 600]  # nothing changes between the window ends
    assert _at(out, 699) == {
        ((first, "home"), 3): 1,
        ((first, "cart"), 1): 1,
        ((second, "home"), 1): 1,
    }


def test_sliding_window_counts_each_event_in_every_window_holding_it():
    batches: List[Any] = [[] for _ in range(30)]
    batches[7] = [("k", ("a", 7))]
    batches[12] = [("k", ("b", 12))]
    out = run_changes(lambda c: windowed(c, Sliding(10, 5), _second).count(), batches)
    assert _at(out, 29) == {
        ((Window(0, 10), "k"), 1): 1,
        ((Window(5, 15), "k"), 2): 1,
        ((Window(10, 20), "k"), 1): 1,
    }
    assert _at(out, 14) == {((Window(0, 10), "k"), 1): 1}


def test_session_merges_when_an_event_bridges_and_splits_when_it_is_removed():
    """Gap 5: events at 0 and 8 are two sessions; 4 bridges them into one; removing 4 again
    (before the merged session closes) splits it back."""
    batches: List[Any] = [{} for _ in range(30)]
    batches[0] = {("u", ("x", 0)): 1, ("u", ("y", 8)): 1}
    batches[3] = {("u", ("z", 4)): 1}
    out = run_changes(lambda c: windowed(c, Session(5), _second, lateness=10).count(), batches)
    assert _at(out, 12) == {}  # the merged session [0, 13) has not closed
    assert _at(out, 13) == {((Window(0, 13), "u"), 3): 1}

    batches[9] = {("u", ("z", 4)): -1}
    out = run_changes(lambda c: windowed(c, Session(5), _second, lateness=10).count(), batches)
    assert _at(out, 8) == {}  # [0, 13) was never shown: the split came before its end
    assert _at(out, 9) == {((Window(0, 5), "u"), 1): 1}  # [0, 5) closed long ago: at once
    assert _at(out, 13) == {((Window(0, 5), "u"), 1): 1, ((Window(8, 13), "u"), 1): 1}


def test_late_data_within_lateness_changes_the_result_and_beyond_it_goes_to_late():
    """Window [0, 10) with lateness 3: a record arriving at 12 still counts (the result
    changes at 12); one arriving at 14 is late: dropped, shown in ``late`` and counted in the
    statistics as the records out of ``Late[<name>]``."""
    batches: List[Any] = [[] for _ in range(20)]
    batches[5] = [("k", ("a", 5))]
    batches[12] = [("k", ("b", 6))]
    batches[14] = [("k", ("c", 7)), ("k", ("d", 9))]

    def program(c):
        w = windowed(c, Tumbling(10), _second, lateness=3, name="clicks")
        return {"count": w.count(), "late": w.late, "records": w.records}

    out = run_changes(program, batches)
    w0 = Window(0, 10)
    assert _at(out["count"], 10) == {((w0, "k"), 1): 1}
    assert _at(out["count"], 12) == {((w0, "k"), 2): 1}
    assert _at(out["count"], 19) == {((w0, "k"), 2): 1}  # frozen: the late ones never count
    assert _at(out["late"], 13) == {}
    assert _at(out["late"], 14) == {((w0, "k"), ("c", 7)): 1, ((w0, "k"), ("d", 9)): 1}
    assert _at(out["records"], 19) == {((w0, "k"), ("a", 5)): 1, ((w0, "k"), ("b", 6)): 1}

    def dataflow(scope):
        c_in, c = scope.new_collection()
        w = windowed(c, Tumbling(10), _second, lateness=3, name="clicks")
        return {"c": c_in, "probe": w.count().probe()}

    with tp.open_session(dataflow, statistics=True) as s:
        for t, batch in enumerate(batches):
            for record in batch:
                s.insert("c", record)
            s.advance_to(t + 1)
        s.wait("probe", timeout=30)
        (late,) = s.stats().find("Late[clicks]")
        assert late["records_out"] == 2


def test_retain_removes_results_after_they_are_final():
    batches: List[Any] = [[] for _ in range(30)]
    batches[2] = [("k", ("a", 2))]
    out = run_changes(
        lambda c: windowed(c, Tumbling(5), _second, lateness=1, retain=4).count(), batches
    )
    # shown at 5; can change until 5 + 1; final from 7; kept 4 time units more (7 .. 10)
    assert _at(out, 5) == {((Window(0, 5), "k"), 1): 1}
    assert _at(out, 10) == {((Window(0, 5), "k"), 1): 1}
    assert _at(out, 11) == {}


def test_reduce_min_max_sum_per_window_and_key():
    batches: List[Any] = [[] for _ in range(12)]
    batches[1] = [("k", (3, 1)), ("k", (8, 2)), ("j", (5, 4))]

    def program(c):
        w = windowed(c, Tumbling(5), _second)
        first = lambda v: v[0]  # noqa: E731
        return {
            "min": w.min(first),
            "max": w.max(first),
            "sum": w.sum(first),
            "top": w.reduce(lambda wk, vals: [(max(v for v, _ in vals), 1)]),
        }

    out = run_changes(program, batches)
    w0 = Window(0, 5)
    assert _at(out["min"], 11) == {((w0, "k"), 3): 1, ((w0, "j"), 5): 1}
    assert _at(out["max"], 11) == {((w0, "k"), 8): 1, ((w0, "j"), 5): 1}
    assert _at(out["sum"], 11) == {((w0, "k"), 11): 1, ((w0, "j"), 5): 1}
    assert _at(out["top"], 11) == {((w0, "k"), (8, 2)): 1, ((w0, "j"), (5, 4)): 1}


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: Tumbling(0), ["Tumbling", "size", "0"]),
        (lambda: Tumbling(-5), ["Tumbling", "size", "-5"]),
        (lambda: Tumbling(2.5), ["Tumbling", "size", "2.5"]),
        (lambda: Sliding(10, 0), ["Sliding", "hop", "0"]),
        (lambda: Sliding(0, 2), ["Sliding", "size", "0"]),
        (lambda: Session(0), ["Session", "gap", "0"]),
        (lambda: Session(-1), ["Session", "gap", "-1"]),
    ],
)
def test_bad_specs_raise_value_errors_naming_the_spec_and_value(make, words):
    with pytest.raises(ValueError) as info:
        make()
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("lateness, retain, word", [(-1, None, "lateness"), (0, -2, "retain")])
def test_bad_lateness_or_retain_raise_value_errors(lateness, retain, word):
    def program(c):
        return windowed(c, Tumbling(5), _second, lateness=lateness, retain=retain).count()

    with pytest.raises(
        ValueError, match=rf"Tumbling\(size=5.*{word}.*{lateness if word == 'lateness' else retain}"
    ):
        run_changes(program, [[]])


@pytest.mark.parametrize("spec", [Tumbling(5), Sliding(4, 2), Session(3)])
def test_an_event_time_not_an_int_is_an_operator_error_naming_the_record(spec):
    def program(c):
        return windowed(c, spec, _second).count()

    with pytest.raises(WorkerError) as info:
        run_changes(program, [[("k", ("x", 1.5))]])
    text = str(info.value)
    assert "OperatorError" in text and "returned 1.5 (float), not an int" in text
    assert "record ('k', ('x', 1.5))" in text


def test_windows_inside_iterate_raise_a_clear_error():
    def program(c):
        return c.iterate(lambda x: windowed(x, Tumbling(5), _second).count())

    with pytest.raises(TimelyError, match="top scope's"):
        run_changes(program, [[("k", ("x", 1))]])


def test_join_needs_an_equal_spec_and_no_sessions():
    def mismatched(left, right):
        return windowed(left, Tumbling(5), _second).join(windowed(right, Tumbling(6), _second))

    with pytest.raises(TimelyError, match="same spec"):
        run_changes(mismatched, {"left": [[]], "right": [[]]})

    def sessions(left, right):
        return windowed(left, Session(5), _second).join(windowed(right, Session(5), _second))

    with pytest.raises(TimelyError, match="tumbling or sliding"):
        run_changes(sessions, {"left": [[]], "right": [[]]})


@pytest.mark.parametrize("events", [4000])
def test_state_behind_windowed_aggregates_stays_bounded(events):
    """A sliding-window count, max and join over ``events`` records (4 per time unit, the
    time advancing with them): once windows close, the arrangements behind the max and the
    join and the counts kept by the count hold only the open windows, at a quarter of the
    stream and at its end alike."""
    counters: List[CountTotal] = []

    def dataflow(scope):
        ev_in, ev = scope.new_collection()
        w = windowed(ev, Sliding(10, 5), _second, lateness=2)
        counts = w.count()
        counters.extend(op for op in scope.subgraph.children if isinstance(op, CountTotal))
        joined = w.join(windowed(ev, Sliding(10, 5), _second, lateness=2, name="again"))
        return {
            "events": ev_in,
            "count": counts.probe(),
            "max": w.max(lambda v: v[0]).probe(),
            "join": joined.probe(),
        }

    def wait(s):
        for probe in ("count", "max", "join"):
            s.wait(probe, timeout=60)

    sizes = []
    with tp.open_session(dataflow, statistics=True) as s:
        for i in range(events):
            et = i // 4
            s.insert("events", (i % 5, (i, et)))
            if i % 4 == 3:
                s.advance_to(et + 1)
                if et % 10 == 9:
                    wait(s)
            if i + 1 in (events // 4, events):
                wait(s)
                stats = s.stats()
                arranged = [op["arrangement"]["updates"] for op in stats.find("Arrange[")]
                count = counters[0]
                pending = sum(len(records) for records in count.pending.values())
                sizes.append((arranged, len(count.pairs) + pending))
    # Open windows only: each record is in 2 windows, as 2 updates each (enter at the end,
    # leave after the lateness), 4 records per time unit, over the window's size plus the
    # lateness plus the 10 time units between waits; times 3 for the spine's batches not yet
    # merged. It does not depend on the number of events (16 updates per event went in).
    open_updates = 2 * 2 * 4 * (10 + 2 + 10) * 3
    open_counts = 5 * (10 + 2 + 10)  # (window, key) pairs: 5 keys, a window per 5 time units
    for arranged, counted in sizes:
        assert len(arranged) == 3, sizes
        assert all(n <= open_updates for n in arranged), sizes
        assert counted <= open_counts, sizes


def test_session_state_keeps_only_open_sessions():
    """Bursts of events (10 time units, then a pause longer than the gap): once a session is
    final its records leave the reduce's input, so the arrangement behind the session count
    holds the open sessions only, at a quarter of the stream and at its end alike."""

    def dataflow(scope):
        ev_in, ev = scope.new_collection()
        w = windowed(ev, Session(3), _second, lateness=2, name="bursts")
        return {"events": ev_in, "probe": w.count().probe()}

    sizes = []
    with tp.open_session(dataflow, statistics=True) as s:
        for i in range(8000):
            et = i // 4 + (i // 40) * 3
            s.insert("events", (i % 5, (i, et)))
            if i % 40 == 39:
                s.advance_to(et + 1)
                s.wait("probe", timeout=60)
            if i + 1 in (2000, 8000):
                (arranged,) = [op for op in s.stats().find("Arrange[bursts")]
                sizes.append(arranged["arrangement"]["updates"])
    # 40 events a burst, each in and out once, plus the burst before (not yet final)
    assert all(n <= 4 * 40 for n in sizes), sizes


@given(st.integers(1, 12), st.integers(1, 12), st.integers(-20, 20), st.integers(-100, 100))
def test_windows_of_is_every_grid_window_holding_the_event_time(size, hop, offset, et):
    assert Sliding(size, hop, offset).windows_of(et) == ref.grid_windows(size, hop, offset, et)
    assert Tumbling(size, offset).windows_of(et) == ref.grid_windows(size, size, offset, et)
    assert len(Tumbling(size, offset).windows_of(et)) == 1


def test_a_session_has_no_windows_of_an_event_time_alone():
    with pytest.raises(TypeError, match="data-driven"):
        Session(5).windows_of(3)
