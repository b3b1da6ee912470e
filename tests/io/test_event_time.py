"""File sources at event time: a column as each row's event time (ints, ISO timestamps and
datetimes as milliseconds), the input advanced to the watermark after each file."""

from __future__ import annotations

import datetime as dt
import json

import pytest

import timelypy as tp
import timelypy.io as tio
from timelypy.io.event_time import to_event_time
from timelypy.windows import EventTimeInput

pytestmark = pytest.mark.timeout(300)


def collect(scope):
    rows_in, rows = scope.new_collection()
    return {"rows": rows_in, "probe": rows.probe(), "out": rows.capture()}


def stamps(event_times, bound, start=0):
    """From scratch: the time each event goes in at."""
    out, latest = [], None
    for et in event_times:
        wm = start if latest is None else max(start, latest - bound)
        out.append(max(et, wm))
        latest = et if latest is None else max(latest, et)
    return out


def test_event_time_values():
    assert to_event_time(17) == 17 and to_event_time("-3") == -3 and to_event_time(4.0) == 4
    assert to_event_time("2024-05-01T12:00:00.250Z") == 1714564800250
    assert to_event_time("2024-05-01T14:00:00.250+02:00") == 1714564800250
    assert to_event_time("2024-05-01 12:00:00.250") == 1714564800250  # no zone: UTC
    assert to_event_time(dt.datetime(1970, 1, 1, 0, 0, 2, 999999)) == 2999
    assert to_event_time(dt.date(1970, 1, 2)) == 86_400_000
    for bad in (1.5, True, "soon", None, float("nan")):
        with pytest.raises(ValueError):
            to_event_time(bad)


def test_csv_rows_go_in_at_their_event_times(tmp_path):
    files = []
    event_times = [[5, 3, 9, 1], [12, 4, 10, 20], [15, 30]]
    for k, ets in enumerate(event_times):
        path = tmp_path / f"part-{k}.csv"
        path.write_text("word,ts\n" + "".join(f"w{k}{i},{et}\n" for i, et in enumerate(ets)))
        files.append(path)
    fmt = tio.Csv(columns="word")
    flat = [et for ets in event_times for et in ets]
    at = stamps(flat, 3)
    with tp.open_session(collect) as s:
        times = tio.load_files(
            s, "rows", files, fmt, wait="probe", event_time="ts", max_out_of_orderness=3
        )
        assert times == [6, 17, 27]  # the watermark after each file: latest - 3
        assert s.time == 27
        changes = sorted(s.changes("out"), key=lambda u: u[0])
    words = [f"w{k}{i}" for k, ets in enumerate(event_times) for i in range(len(ets))]
    assert changes == sorted(zip(words, at, [1] * len(at)), key=lambda u: u[0])
    assert sum(1 for et, a in zip(flat, at) if a > et) == 3  # 1, 4 and 15: stamped at the watermark


def test_json_lines_with_iso_timestamps_and_a_feed_kept_across_calls(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(
        json.dumps({"user": "u1", "at": "2024-01-01T00:00:01Z"})
        + "\n"
        + json.dumps({"user": "u2", "at": "2024-01-01T00:00:03.5Z"})
        + "\n"
    )
    second.write_text(json.dumps({"user": "u3", "at": "2024-01-01T00:00:02Z"}) + "\n")
    base = to_event_time("2024-01-01T00:00:00Z")
    fmt = tio.JsonLines(columns=["user", "at"])  # the record keeps its timestamp too
    with tp.open_session(collect) as s:
        s.advance_to(base)
        feed = EventTimeInput(s, "rows", max_out_of_orderness=1000)
        tio.load_files(s, "rows", [first], fmt, event_time="at", feed=feed)
        tio.load_files(s, "rows", [second], fmt, event_time="at", feed=feed)
        assert feed.watermark == base + 2500 and feed.behind == 1
        feed.finish()
        s.wait("probe")
        changes = sorted(s.changes("out"), key=lambda u: u[1])
    assert [(r[0], t) for r, t, _ in changes] == [
        ("u1", base + 1000),
        ("u3", base + 2500),  # 2 s is behind the watermark 3.5 s - 1 s: stamped there
        ("u2", base + 3500),
    ]
    with pytest.raises(ValueError, match="feeds input 'rows', not 'other'"):
        tio.load_files(s, "other", [first], fmt, event_time="at", feed=feed)


def test_parquet_timestamp_columns_are_milliseconds(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    moments = [dt.datetime(2024, 3, 1, 0, 0, s, tzinfo=dt.timezone.utc) for s in (5, 1, 9)]
    table = pa.table({"k": [1, 2, 3], "ts": pa.array(moments, type=pa.timestamp("us", "UTC"))})
    path = tmp_path / "events.parquet"
    pq.write_table(table, path)
    with tp.open_session(collect) as s:
        start = to_event_time("2024-03-01T00:00:00Z")
        s.advance_to(start)
        tio.load_files(s, "rows", [path], tio.Parquet(columns="k"), event_time="ts")
        s.advance_to(start + 10_000)
        s.wait("probe")
        changes = sorted(s.changes("out"))
    assert changes == [(1, start + 5000, 1), (2, start + 5000, 1), (3, start + 9000, 1)]


def test_a_bad_event_time_refuses_the_whole_file(tmp_path):
    good, bad = tmp_path / "1.csv", tmp_path / "2.csv"
    good.write_text("word,ts\na,1\n")
    bad.write_text("word,ts\nb,2\nc,later\nd,\n")
    with tp.open_session(collect) as s:
        with pytest.raises(tio.FileInputError, match=r"2.csv, line 3: .*'later'") as e:
            tio.load_files(s, "rows", [good, bad], tio.Csv(columns="word"), event_time="ts")
        assert e.value.line == 3
        s.advance_to(10)
        s.wait("probe")
        assert s.changes("out") == [("a", 1, 1)]  # nothing of the bad file
        missing = tmp_path / "3.csv"
        missing.write_text("word\ne\n")
        with pytest.raises(tio.FileInputError, match="no event time in column 'ts'"):
            tio.load_files(s, "rows", [missing], tio.Csv(columns="word"), event_time="ts")


def test_a_watched_directory_at_event_time(tmp_path):
    (tmp_path / "a.csv").write_text("word,ts\nx,10\ny,4\n")
    (tmp_path / "b.csv").write_text("word,ts\nz,30\n")
    seen = []
    with tp.open_session(collect) as s:
        tio.watch_directory(
            s,
            "rows",
            tmp_path,
            tio.Csv(columns="word"),
            settle=0,
            max_files=2,
            timeout=30,
            event_time="ts",
            max_out_of_orderness=5,
            on_file=lambda path, at: seen.append((path.name, at)),
        )
        s.advance_to(31)
        s.wait("probe")
        changes = sorted(s.changes("out"))
    assert sorted(seen) == [("a.csv", 5), ("b.csv", 25)]
    assert changes == [("x", 10, 1), ("y", 5, 1), ("z", 30, 1)]
