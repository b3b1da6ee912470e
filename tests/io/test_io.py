"""timelypy.io: file sources (each file one atomic epoch), a watched directory, sinks, stdio."""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from support.paths import ROOT

import timelypy as tp
import timelypy.io as tio

pytestmark = pytest.mark.timeout(300)


WORDS = tio.Csv(schema={"word": str, "n": int})


def _total(key, values):
    total = sum(v * c for v, c in values)
    return [(total, 1)] if total else []


def counts(scope):
    """Per word, the sum of its n: a reduce over what the files loaded."""
    rows_in, rows = scope.new_collection()
    totals = rows.reduce(_total)
    return {"rows": rows_in, "probe": totals.probe(), "totals": totals.capture()}


def by_time(updates):
    out = {}
    for data, t, diff in updates:
        out.setdefault(t, {}).setdefault(data, 0)
        out[t][data] += diff
    return {t: {d: n for d, n in c.items() if n} for t, c in sorted(out.items())}


# ----------------------------------------------------------------------------- formats
def test_csv_schema_types_the_columns_and_shapes_records(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text('word,n,note\nhello,1,x\n"a, b",2,y\n')
    assert WORDS.read(path).records == [("hello", 1), ("a, b", 2)]
    assert WORDS.read(path).lines == [2, 3]
    assert tio.Csv(columns="word").read(path).records == ["hello", "a, b"]
    assert tio.Csv(schema={"n": "int"}, columns=("n", "note")).read(path).records == [
        (1, "x"),
        (2, "y"),
    ]
    rows = tio.Csv(record=lambda r: r["word"].upper()).read(path)
    assert rows.records == ["HELLO", "A, B"] and rows.diffs == [1, 1]


def test_csv_built_in_and_custom_converters_agree(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("k,v,d\n" + "".join(f"k{i},{i * 1.5},{i % 3 - 1}\n" for i in range(50)))
    built_in = tio.Csv(columns=("k", "v"), schema={"v": float}, diff="d").read(path)
    custom = tio.Csv(columns=("k", "v"), schema={"v": lambda x: float(x)}, diff="d").read(path)
    assert (built_in.records, built_in.diffs, built_in.lines) == (
        custom.records,
        custom.diffs,
        custom.lines,
    )
    assert built_in.records[3] == ("k3", 4.5) and built_in.diffs[:3] == [-1, 0, 1]


def test_csv_diff_column_and_headerless_files(tmp_path):
    path = tmp_path / "changes.csv"
    path.write_text("a,3,1\nb,4,-2\n")
    fmt = tio.Csv(header=False, columns=("k", "v"), schema={"v": int}, diff="d")
    with pytest.raises(tio.FileInputError, match="no column 'd'"):
        fmt.read(path)
    path.write_text("k,v,d\na,3,1\nb,4,-2\n")
    rows = tio.Csv(columns=("k", "v"), schema={"v": int}, diff="d").read(path)
    assert rows.records == [("a", 3), ("b", 4)] and rows.diffs == [1, -2]


@pytest.mark.parametrize(
    "text, line, column, fragment",
    [
        ("word,n\nok,1\nbad,x\n", 3, "n", "'x' does not convert"),
        ("word,n\nok,1\nok,2\n,2.5\n", 4, "n", "'2.5' does not convert"),
        ("word,n\nok,1\ntoo,many,fields\n", 3, None, "3 fields, the header has 2"),
        ("word\nok\n", 1, "n", "no column 'n'"),
        ('word,n\nok,1\n"never closed,1\n', 3, None, "unexpected end of data"),
    ],
)
def test_csv_bad_rows_name_file_line_and_column(tmp_path, text, line, column, fragment):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(tio.FileInputError) as caught:
        WORDS.read(path)
    error = caught.value
    assert (error.path, error.line, error.column) == (str(path), line, column)
    assert fragment in str(error) and str(path) in str(error)
    if column:
        assert f"column {column!r}" in str(error) or f"no column {column!r}" in str(error)


def test_json_lines_objects_lists_and_scalars(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(
        '{"user": "ann", "tags": ["x", "y"], "n": 2}\n\n{"user": "bob", "tags": [], "n": 1}\n'
    )
    fmt = tio.JsonLines(columns=("user", "tags"), schema={"n": int}, diff="n")
    rows = fmt.read(path)
    assert rows.records == [("ann", ("x", "y")), ("bob", ())] and rows.diffs == [2, 1]
    plain = tmp_path / "b.jsonl"
    plain.write_text('[1, [2, 3]]\n"word"\n7\n')
    assert tio.JsonLines().read(plain).records == [(1, (2, 3)), "word", 7]


@pytest.mark.parametrize(
    "text, line, column, fragment",
    [
        ('{"user": "ann", "n": 1}\n{"user": "bob"\n', 2, None, "not JSON"),
        ('{"user": "ann"}\n', 1, "n", "missing"),
        ('{"user": "ann", "n": 1}\n{"n": 2}\n', 2, "user", "missing"),
        (
            '{"user": "ann", "n": 1}\n{"user": "bob", "n": "two"}\n',
            2,
            "n",
            "'two' does not convert",
        ),
        ('{"user": "ann", "n": 1}\n{"user": null, "n": 1}\n', 2, "user", "no value"),
        ('{"user": "ann", "n": true}\n', 1, "n", "a bool is not an int"),
        (
            '{"user": "ann", "n": 1}\n{"user": {"first": "bo"}, "n": 1}\n',
            2,
            "user",
            "dict {'first': 'bo'} cannot be part of a record",
        ),
    ],
)
def test_json_lines_bad_rows_name_line_and_column(tmp_path, text, line, column, fragment):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(tio.FileInputError) as caught:
        tio.JsonLines(columns=("user",), schema={"n": int}).read(path)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert fragment in str(caught.value) and f"bad.jsonl, line {line}" in str(caught.value)


@pytest.mark.parametrize("fmt, suffix", [(WORDS, ".csv"), (tio.JsonLines(), ".jsonl")])
def test_text_that_is_not_utf8_names_its_line(tmp_path, fmt, suffix):
    path = tmp_path / f"latin1{suffix}"
    path.write_bytes("word,n\n".encode() + '"caf\u00e9",1\n'.encode("latin-1"))
    with pytest.raises(tio.FileInputError) as caught:
        fmt.read(path)
    assert caught.value.line == 2 and "line 2: not utf-8" in str(caught.value)


def test_gzipped_text_files(tmp_path):
    import gzip

    path = tmp_path / "a.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("word,n\na,1\nb,x\n")
    with pytest.raises(tio.FileInputError) as caught:
        tio.format_for(path, schema={"word": str, "n": int}).read(path)
    assert (caught.value.line, caught.value.column) == (3, "n")
    lines = tmp_path / "b.jsonl.gz"
    with gzip.open(lines, "wt") as f:
        f.write('["a", 1]\n["b", 2]\n')
    assert tio.format_for(lines).read(lines).records == [("a", 1), ("b", 2)]
    with pytest.raises(ValueError, match="unknown file suffix"):
        tio.format_for(tmp_path / "c.parquet.gz")


def test_a_missing_file_is_file_not_found(tmp_path):
    for name in ("gone.csv", "gone.jsonl", "gone.parquet"):
        with pytest.raises(FileNotFoundError):
            tio.format_for(name).read(tmp_path / name)


def test_json_lines_object_without_columns_is_refused_with_the_fix(tmp_path):
    path = tmp_path / "o.jsonl"
    path.write_text('{"a": 1}\n')
    with pytest.raises(
        tio.FileInputError, match="line 1: an object, but the format has no columns="
    ):
        tio.JsonLines().read(path)


def test_parquet_reads_columns_and_refuses_nulls_by_row(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"word": ["a", "b", "c"], "n": [1, 2, 3]}), path, row_group_size=2)
    assert tio.Parquet().read(path).records == [("a", 1), ("b", 2), ("c", 3)]
    assert tio.format_for(path, columns="word").read(path).records == ["a", "b", "c"]
    pq.write_table(pa.table({"word": ["a", None, "c"], "n": [1, 2, 3]}), path)
    with pytest.raises(tio.FileInputError) as caught:
        tio.Parquet().read(path)
    assert (caught.value.line, caught.value.column) == (2, "word")
    pq.write_table(pa.table({"x": [1.5, float("nan")], "d": [1, -1]}), path)
    with pytest.raises(tio.FileInputError) as caught:
        tio.Parquet(columns="x").read(path)
    assert (caught.value.line, caught.value.column) == (2, "x")
    pq.write_table(pa.table({"x": [1.5, 2.5], "d": [1, -1]}), path)
    rows = tio.Parquet(columns="x", diff="d").read(path)
    assert (rows.records, rows.diffs) == ([1.5, 2.5], [1, -1])
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really")
    with pytest.raises(tio.FileInputError, match="not a readable Parquet file"):
        tio.Parquet().read(broken)


def test_format_for_picks_by_suffix_and_refuses_unknown_ones(tmp_path):
    assert isinstance(tio.format_for("x.CSV"), tio.Csv)
    assert isinstance(tio.format_for("x.ndjson"), tio.JsonLines)
    assert isinstance(tio.format_for("x.pq"), tio.Parquet)
    for name in ("x.txt", "x.json"):  # .json: usually one document
        with pytest.raises(ValueError, match="unknown file suffix"):
            tio.format_for(name)


# ----------------------------------------------------------------------------- into sessions
def test_each_file_is_one_epoch_of_a_session(tmp_path):
    (tmp_path / "0.csv").write_text("word,n\na,1\nb,2\n")
    (tmp_path / "1.csv").write_text("word,n\na,5\n")
    (tmp_path / "2.csv").write_text("word,n\n")  # an empty file: an empty epoch
    (tmp_path / "3.csv").write_text("word,n\nb,-2\nc,1\n")
    with tp.open_session(counts) as s:
        times = tio.load_files(s, "rows", tio.files_in(tmp_path, "*.csv"), WORDS, wait="probe")
        assert times == [0, 1, 2, 3] and s.time == 4
        assert by_time(s.changes("totals")) == {
            0: {("a", 1): 1, ("b", 2): 1},
            1: {("a", 1): -1, ("a", 6): 1},
            3: {("b", 2): -1, ("c", 1): 1},
        }


def test_a_bad_row_refuses_the_whole_file_and_the_session_goes_on(tmp_path):
    good, bad, later = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    good.write_text("word,n\na,1\n")
    bad.write_text("word,n\nb,1\nb,2\nb,three\nb,4\n")  # three good rows before the bad one
    later.write_text("word,n\nc,1\n")
    with tp.open_session(counts, workers=2) as s:
        tio.load_files(s, "rows", [good], WORDS)
        with pytest.raises(tio.FileInputError) as caught:
            tio.load_files(s, "rows", [bad], WORDS)
        assert (caught.value.line, caught.value.column, caught.value.value) == (4, "n", "three")
        assert s.time == 1 and s.pending == 0  # nothing of b.csv, not even a time
        tio.load_files(s, "rows", [later], WORDS, wait="probe")
        totals = [d for d, _, _ in s.changes("totals")]
        assert sorted(totals) == [("a", 1), ("c", 1)]


def test_a_record_the_session_refuses_names_the_file(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("word,n\na,1\n")
    with tp.open_session(counts) as s:
        fmt = tio.Csv(record=lambda row: frozenset([object()]))  # hashable, not routable
        with pytest.raises(
            tio.FileInputError, match="a.csv, line 2: refused by the session"
        ) as caught:
            tio.load_files(s, "rows", [path], fmt)
        assert caught.value.line == 2
        assert s.pending == 0 and s.time == 0


def _write_parts(directory: pathlib.Path) -> list:
    paths = []
    for k, rows in enumerate([["a,1", "b,2"], ["a,3"], ["c,4", "b,-2"], ["d,1"], ["a,-4"]]):
        path = directory / f"part-{k}.csv"
        path.write_text("word,n\n" + "\n".join(rows) + "\n")
        paths.append(path)
    return paths


def _feed_build(paths):
    def build(worker):
        handles = worker.dataflow(counts)
        end = tio.feed_files(
            worker, handles["rows"], paths, WORDS, probe=handles["probe"], timeout=60
        )
        handles["rows"].close()
        worker.step_until_done(timeout=60)
        return end, handles["totals"].updates()

    return build


@pytest.mark.parametrize(
    "workers, backend", [(2, "inline"), pytest.param(2, "processes", marks=pytest.mark.processes)]
)
def test_feed_files_inside_a_dataflow_matches_one_worker(tmp_path, workers, backend):
    paths = _write_parts(tmp_path)
    one = tp.execute(_feed_build(paths))[0]
    many = tp.execute(_feed_build(paths), workers=workers, backend=backend)
    assert [end for end, _ in many] == [5] * workers and one[0] == 5
    merged = by_time([u for _, updates in many for u in updates])
    assert merged == by_time(one[1])
    assert merged[4] == {("a", 4): -1}  # the last file is the last epoch


def test_feed_files_bad_file_fails_the_worker_naming_it(tmp_path):
    paths = _write_parts(tmp_path)
    paths[3].write_text("word,n\nd,1\nd,oops\n")
    with pytest.raises(tp.WorkerError) as caught:
        tp.execute(_feed_build(paths), workers=2)
    assert "part-3.csv, line 3, column 'n'" in str(caught.value)


def _parquet_build(path, split):
    def build(worker):
        handles = worker.dataflow(counts)
        tio.feed_files(worker, handles["rows"], [path], tio.Parquet(), split=split)
        handles["rows"].close()
        worker.step_until_done(timeout=60)
        return handles["totals"].updates()

    return build


@pytest.mark.parametrize(
    "workers, backend", [(2, "inline"), pytest.param(2, "processes", marks=pytest.mark.processes)]
)
def test_parquet_row_groups_split_by_worker(tmp_path, workers, backend):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "big.parquet"
    words = [f"w{i % 7}" for i in range(1000)]
    pq.write_table(pa.table({"word": words, "n": list(range(1000))}), path, row_group_size=150)
    assert tio.Parquet().row_groups(path) == 7
    expected = {}
    for w, n in zip(words, range(1000), strict=True):
        expected[w] = expected.get(w, 0) + n
    many = tp.execute(_parquet_build(path, "row_groups"), workers=workers, backend=backend)
    assert sorted(d for part in many for d, _, _ in part) == sorted(expected.items())
    assert all(part for part in many)  # every worker read a share
    assert by_time([u for part in many for u in part]) == by_time(
        tp.execute(_parquet_build(path, "files"))[0]
    )


def test_parquet_row_numbers_count_from_the_start_of_the_file(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "gaps.parquet"
    pq.write_table(
        pa.table({"word": ["a"] * 5 + [None], "n": list(range(6))}), path, row_group_size=2
    )
    with pytest.raises(tio.FileInputError) as caught:
        tio.Parquet().read(path, row_groups=[2])
    assert (caught.value.line, caught.value.column) == (6, "word")
    assert tio.Parquet().read(path, row_groups=[1]).records == [("a", 2), ("a", 3)]
    csv_file = tmp_path / "x.csv"
    csv_file.write_text("word,n\na,1\n")

    def build(worker):
        handles = worker.dataflow(counts)
        tio.feed_files(worker, handles["rows"], [csv_file], split="row_groups")

    with pytest.raises(ValueError, match="split='row_groups' needs Parquet files, not .*x.csv"):
        tp.execute(build)


def test_csv_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_bytes("word,n\r\na,1\r\n".encode("utf-8-sig"))
    assert WORDS.read(path).records == [("a", 1)]


# ----------------------------------------------------------------------------- watch
def test_watcher_takes_a_growing_file_only_once_it_is_stable(tmp_path):
    now = [0.0]
    watcher = tio.DirectoryWatcher(tmp_path, "*.csv", settle=1.0, clock=lambda: now[0])
    path = tmp_path / "a.csv"
    path.write_text("word,n\na,1\n")
    (tmp_path / ".hidden.csv").write_text("word,n\n")
    (tmp_path / "b.csv.tmp").write_text("word,n\n")
    assert watcher.poll() == []  # first sighting
    now[0] = 0.6
    with open(path, "a") as f:
        f.write("b,2\n")  # still being written
    os.utime(path, ns=(10**9, 10**9))
    assert watcher.poll() == []  # changed: the clock restarts
    now[0] = 1.2
    assert watcher.poll() == []
    now[0] = 1.7
    assert watcher.poll() == [path]
    watcher.mark_taken(path)
    now[0] = 5.0
    assert watcher.poll() == []  # each file once


def test_watch_directory_takes_files_appearing_while_it_runs(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "000.csv").write_text("word,n\na,1\n")  # there before the watch starts
    done = threading.Event()

    def producer():
        time.sleep(0.3)
        scratch = inbox / ".001.csv"  # written hidden, then renamed
        scratch.write_text("word,n\nb,2\n")
        os.replace(scratch, inbox / "001.csv")
        time.sleep(0.3)
        with open(inbox / "002.csv", "w") as f:  # written in two parts
            f.write("word,n\nc,")
            f.flush()
            time.sleep(0.2)  # well within settle (1.5 s)
            f.write("3\n")
        (inbox / "003.csv.part").write_text("word,n\nzz,9\n")  # never completed
        time.sleep(0.2)
        done.set()

    thread = threading.Thread(target=producer)
    taken = []
    with tp.open_session(counts) as s:
        thread.start()
        state = tio.watch_directory(
            s,
            "rows",
            inbox,
            WORDS,
            pattern="*.csv",
            settle=1.5,
            poll=0.05,
            timeout=30,
            stop=lambda: done.is_set() and len(taken) >= 3,
            on_file=lambda path, at: taken.append((path.name, at)),
        )
        thread.join(10)
        assert taken == [("000.csv", 0), ("001.csv", 1), ("002.csv", 2)]
        s.wait("probe", timeout=30)
        assert sorted(d for d, _, _ in s.changes("totals")) == [("a", 1), ("b", 2), ("c", 3)]
    assert sorted(state.taken) == ["000.csv", "001.csv", "002.csv"]


def test_watch_state_saved_and_restored_takes_only_new_files(tmp_path):
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "a.csv").write_text("word,n\na,1\n")
    (inbox / "b.csv").write_text("word,n\nb,1\n")
    saved = tmp_path / "watch-state.json"
    with tp.open_session(counts) as s:
        state = tio.watch_directory(s, "rows", inbox, WORDS, settle=0, poll=0.01, idle=0.2)
        state.save(saved)
    (inbox / "c.csv").write_text("word,n\nc,1\n")
    (inbox / "d.csv").write_text("word,n\nd,x\n")  # bad: refused, remembered
    restored = tio.WatchState.load(saved)
    assert restored == state and sorted(restored.taken) == ["a.csv", "b.csv"]
    with tp.open_session(counts) as s:
        after = tio.watch_directory(
            s, "rows", inbox, WORDS, settle=0, poll=0.01, idle=0.2, state=restored, on_error="skip"
        )
        s.wait("probe", timeout=30)
        assert [d for d, _, _ in s.changes("totals")] == [("c", 1)]
    assert sorted(after.taken) == ["a.csv", "b.csv", "c.csv"]
    assert "line 2, column 'n'" in after.refused["d.csv"]
    assert tio.WatchState.from_dict(json.loads(json.dumps(after.to_dict()))) == after


def test_watch_raises_on_a_bad_file_and_does_not_mark_it(tmp_path):
    (tmp_path / "a.csv").write_text("word,n\na,x\n")
    with tp.open_session(counts) as s:
        state = tio.WatchState()
        with pytest.raises(tio.FileInputError, match="a.csv, line 2, column 'n'"):
            tio.watch_directory(s, "rows", tmp_path, WORDS, settle=0, timeout=5, state=state)
        assert state.taken == {} and s.time == 0


def test_watch_is_bounded_by_its_timeout(tmp_path):
    with tp.open_session(counts) as s:
        started = time.monotonic()
        tio.watch_directory(s, "rows", tmp_path, WORDS, timeout=0.3, poll=0.05)
        assert 0.3 <= time.monotonic() - started < 5


# ----------------------------------------------------------------------------- sinks
def _history():
    with tp.open_session(counts) as s:
        for rows in ([("a", 1), ("b", 2)], [("a", 3)], [("b", -2)]):
            s.update_many("rows", rows)
            s.advance_to(s.time + 1)
        s.wait("probe", timeout=30)
        return s.changes("totals")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_changes_written_read_back_by_the_sources(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    updates = _history()
    path = tmp_path / f"out{suffix}"
    assert tio.write_changes(path, updates, columns=("word", "total")) == len(updates)
    fmt = tio.format_for(
        path, columns=("word", "total", "time"), schema={"total": int, "time": int}, diff="diff"
    )
    rows = fmt.read(path)
    back = [(r[:2], r[2], d) for r, d in zip(rows.records, rows.diffs, strict=True)]
    assert sorted(back) == sorted(updates)
    assert [t for _, t, _ in back] == sorted(t for _, t, _ in back)  # in time order


def test_changes_are_consolidated_per_record_and_time():
    stream = io.StringIO()
    updates = [("a", 1, 1), ("b", 0, 1), ("a", 1, 1), ("b", 0, -1), ("c", 0, 2)]
    assert tio.write_changes(stream, updates) == 2
    assert [json.loads(line) for line in stream.getvalue().splitlines()] == [
        {"data": "c", "time": 0, "diff": 2},
        {"data": "a", "time": 1, "diff": 2},
    ]


def test_parquet_without_pyarrow_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)  # import fails as if missing
    with pytest.raises(tio.FormatUnavailableError, match="pip install pyarrow"):
        tio.Parquet().read(tmp_path / "a.parquet")
    with pytest.raises(ImportError):
        tio.ChangeWriter(tmp_path / "out.parquet")
    (tmp_path / "a.csv").write_text("word,n\na,1\n")
    assert WORDS.read(tmp_path / "a.csv").records == [("a", 1)]  # CSV does not need it


def test_parquet_rows_that_change_type_are_refused_naming_the_column(tmp_path):
    pytest.importorskip("pyarrow")
    with tio.ChangeWriter(tmp_path / "t.parquet", columns=("k", "v")) as out:
        out.write([(("a", 1), 0, 1)])
        with pytest.raises(ValueError, match=r"v: int64 \(first rows\) vs string"):
            out.write([(("b", "not a number"), 1, 1)])
    assert tio.Parquet(columns=("k", "v")).read(tmp_path / "t.parquet").records == [("a", 1)]


def test_contents_per_time(tmp_path):
    path = tmp_path / "contents.jsonl"
    tio.write_contents(path, _history(), columns=("word", "total"))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows == [
        {"word": "a", "total": 1, "time": 0, "count": 1},
        {"word": "b", "total": 2, "time": 0, "count": 1},
        {"word": "a", "total": 4, "time": 1, "count": 1},
        {"word": "b", "total": 2, "time": 1, "count": 1},
        {"word": "a", "total": 4, "time": 2, "count": 1},
    ]


def test_change_writer_appends_as_the_program_runs(tmp_path):
    path = tmp_path / "live.csv"
    with tp.open_session(counts) as s, tio.ChangeWriter(path, columns=("word", "total")) as out:
        for rows in ([("a", 1)], [("a", 1), ("b", 1)]):
            s.update_many("rows", rows)
            s.advance_to(s.time + 1)
            s.wait("probe", timeout=30)
            out.write(s.changes("totals"))
            assert path.read_text().count("\n") == 1 + out.rows  # flushed per write
    lines = path.read_text().splitlines()
    assert lines[:2] == ["word,total,time,diff", "a,1,0,1"]
    assert sorted(lines[2:]) == ["a,1,1,-1", "a,2,1,1", "b,1,1,1"]
    with pytest.raises(ValueError, match=r"does not have the 2 fields"):
        tio.ChangeWriter(io.StringIO(), columns=("x", "y")).write([(("a", 1, 2), 0, 1)])


# ----------------------------------------------------------------------------- stdio
def test_stdin_batches_are_epochs_and_a_bad_batch_applies_nothing():
    text = (
        '{"word": "a", "n": 1}\n{"word": "b", "n": 2}\n\n'
        '{"word": "a", "n": 2}\n{"word": "b", "n": "x"}\n'
    )
    fmt = tio.JsonLines(columns=("word", "n"), schema={"n": int})
    with tp.open_session(counts) as s:
        with pytest.raises(tio.FileInputError) as caught:
            tio.feed_stdin(s, "rows", fmt, stream=io.StringIO(text), wait="probe")
        assert "<stdin>, line 5, column 'n'" in str(caught.value) and caught.value.line == 5
        s.wait("probe", timeout=30)
        assert sorted(d for d, _, _ in s.changes("totals")) == [("a", 1), ("b", 2)]
        assert s.time == 1


def test_stdin_csv_keeps_its_header_and_line_numbers():
    text = "word,n\na,1\n\nb,2\nc,oops\n"
    batches = tio.read_batches(WORDS, io.StringIO(text))
    assert next(batches).records == [("a", 1)]
    with pytest.raises(tio.FileInputError) as caught:
        next(batches)
    assert (caught.value.path, caught.value.line, caught.value.column) == ("<stdin>", 5, "n")


PIPELINE = textwrap.dedent("""
    import sys
    import timelypy as tp
    import timelypy.io as tio

    def dataflow(scope):
        words_in, words = scope.new_collection()
        totals = words.count()
        return {"words": words_in, "probe": totals.probe(), "totals": totals.capture()}

    if __name__ == "__main__":
        with tp.open_session(dataflow) as s:
            for rows in tio.read_batches(tio.JsonLines()):
                tio.load_rows(s, "words", rows)
                s.wait("probe", timeout=60)
                tio.write_stdout(s.changes("totals"), columns=("word", "count"))
""")


@pytest.mark.processes
def test_a_timelypy_run_pipeline_from_stdin_to_stdout(tmp_path):
    program = tmp_path / "pipeline.py"
    program.write_text(PIPELINE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "timelypy",
            "run",
            str(program),
            "--workers",
            "2",
            "--backend",
            "processes",
        ],
        input='"a"\n"b"\n"a"\n\n"b"\n',
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    key = lambda r: (r["time"], r["word"], r["count"])  # noqa: E731
    assert sorted(rows, key=key) == [
        {"word": "a", "count": 2, "time": 0, "diff": 1},
        {"word": "b", "count": 1, "time": 0, "diff": 1},
        {"word": "b", "count": 1, "time": 1, "diff": -1},
        {"word": "b", "count": 2, "time": 1, "diff": 1},
    ]


FILE_PIPELINE = (
    "time 0: 0001.csv loaded, 2 changes\n"
    "time 1: 0002.csv loaded, 3 changes\n"
    "time 2: 0004.csv loaded, 2 changes\n"
    "taken: ['0001.csv', '0002.csv', '0004.csv']\n"
    "refused: 0003.csv: line 3, column 'units': 'lots' does not convert"
    " (invalid literal for int() with base 10: 'lots')\n"
    "revenue: [('cake', 16.0), ('coffee', 5.0), ('tea', 10.5)]\n"
    "7 rows in revenue.jsonl, the same as from scratch\n"
)


@pytest.mark.parametrize(
    "cli",
    [[], pytest.param(["--workers", "2", "--backend", "processes"], marks=pytest.mark.processes)],
)
def test_the_file_pipeline_example(cli):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIMELYPY_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = (
        [sys.executable, "-m", "timelypy", "run", "examples/file_pipeline.py", *cli]
        if cli
        else [sys.executable, "examples/file_pipeline.py"]
    )
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout == FILE_PIPELINE
