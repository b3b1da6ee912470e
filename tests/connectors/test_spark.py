"""The PySpark connector: load, atomic change epochs, Structured Streaming, views back to Spark.

One local Spark (2 cores) serves the whole test session; every answer is compared with Spark
computing the same thing from scratch.
"""

from __future__ import annotations

import logging
import math
import os
import random
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List, Tuple

import cloudpickle
import pytest

import timelypy as tp
from timelypy.connectors.spark import (
    CollectionView,
    Columns,
    ForeachBatchSink,
    SparkInputError,
    SparkOutputError,
    apply_changes,
    load,
)
from timelypy.errors import SessionInputError

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = pytest.mark.spark

EDGES = Columns(key="src", value="dst", diff="diff")


def edges_dataflow(scope):
    """Edges, their per-source counts, and captures of both."""
    edges_in, edges = scope.new_collection()
    counts = edges.map(lambda e: e[0]).count()
    return {
        "edges": edges_in,
        "edges_out": edges.capture(),
        "counts": counts.capture(),
        "probe": counts.probe(),
    }


@pytest.fixture(scope="session")
def spark(tmp_path_factory) -> Iterator[Any]:
    """ONE local Spark for the whole test session, its files under pytest's temp dir."""
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
    pytest.importorskip("pandas", reason="pandas is not installed: pip install -e '.[spark]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17 (no java on PATH, no JAVA_HOME)")
    from timelypy.connectors.spark import local_spark

    base = tmp_path_factory.mktemp("spark")
    session = local_spark("timelypy-tests", cores=2, local_dir=str(base), log_level="ERROR")
    try:
        yield session
    finally:
        session.stop()


# ----------------------------------------------------------------------------- mapping
def test_columns_map_rows_to_records_and_back():
    assert Columns(["a", "b"]).make_record((1, 2)) == (1, 2)
    assert Columns("a").make_record((7,)) == 7
    kv = Columns(key=["k1", "k2"], value="v")
    assert kv.make_record(("x", 1, 2.5)) == (("x", 1), 2.5)
    assert kv.flatten((("x", 1), 2.5)) == ("x", 1, 2.5)
    assert Columns(key="s", value="d", diff="diff", time="t").selected == ("s", "d", "diff", "t")
    with pytest.raises(SparkOutputError, match="key, value"):
        kv.flatten(("x", 1, 2.5))
    for bad in (
        dict(),
        dict(key="a"),
        dict(record=["a"], key="b", value="c"),
        dict(record="a", diff="d", op="o"),
        dict(record="a", null_keys="skip"),
        dict(record=["a", "a"]),
    ):
        with pytest.raises(ValueError):
            Columns(**bad)


def test_import_without_pyspark_says_what_to_install():
    code = (
        "import sys; sys.modules['pyspark'] = None\n"
        "import timelypy.connectors.spark as s\n"
        "try:\n    s.local_spark()\nexcept ImportError as e:\n    print(type(e).__name__, e)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    ).stdout
    assert out.startswith("SparkUnavailableError") and "pip install 'timelypy[spark]'" in out


# ----------------------------------------------------------------------------- load
@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "backend,workers", [("inline", 1), pytest.param("processes", 2, marks=pytest.mark.processes)]
)
def test_load_matches_spark_group_by(spark, backend, workers):
    df = spark.range(100_000).selectExpr("id % 997 as src", "id as dst").repartition(3)
    expected = {r["src"]: r["count"] for r in df.groupBy("src").count().collect()}
    with tp.open_session(edges_dataflow, workers=workers, backend=backend, timeout=120) as s:
        started = time.perf_counter()
        assert load(s, "edges", df, Columns(key="src", value="dst"), batch_rows=20_000) == 100_000
        logging.getLogger(__name__).info(
            "load of 1e5 rows on %s/%d: %.2f s", backend, workers, time.perf_counter() - started
        )
        s.advance_to(1)
        view = CollectionView(s, "counts")
        view.refresh()
        assert dict(view.contents()) == {(k, n): 1 for k, n in expected.items()}


class _SpySession:
    """A session wrapper that counts updates and flushes (and can fail a chosen flush)."""

    def __init__(self, session: Any, fail_flush: int = 0) -> None:
        self._s = session
        self.updates = self.flushed = self.flushes = 0
        self.max_held = 0
        self.fail_flush = fail_flush

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s, name)

    def update(self, *args: Any) -> None:
        self.updates += 1
        self.max_held = max(self.max_held, self._s.pending + 1)
        self._s.update(*args)

    def update_many(self, input: str, records: Any, *args: Any) -> None:
        self.updates += len(records)
        self.max_held = max(self.max_held, self._s.pending + len(records))
        self._s.update_many(input, records, *args)

    def flush(self) -> None:
        self.flushes += 1
        if self.flushes == self.fail_flush:
            raise SessionInputError("injected: the workers refused this flush")
        pending = self._s.pending
        self._s.flush()
        self.flushed += pending


def test_load_holds_about_one_batch(spark, monkeypatch):
    """Rows come from Spark's JVM in Arrow batches as its tasks finish (arrow_stream); the
    session never holds more than ``batch_rows`` of them unflushed."""
    from timelypy.connectors.spark import loading as connector

    rows, batch = 10_000, 1_000
    df = spark.range(rows).selectExpr("id % 10 as src", "id as dst").repartition(4)
    tables = []
    original = connector.arrow_stream

    def counted(frame: Any, *args: Any) -> Iterator[Any]:
        for table in original(frame, *args):
            tables.append(table.num_rows)
            yield table

    monkeypatch.setattr(connector, "arrow_stream", counted)
    with tp.open_session(edges_dataflow) as real:
        spy = _SpySession(real)
        assert load(spy, "edges", df, Columns(key="src", value="dst"), batch_rows=batch) == rows
    assert sum(tables) == rows and len(tables) >= 4  # streamed: one table per Arrow batch
    assert spy.updates == rows and spy.flushes == rows // batch
    assert spy.max_held <= batch  # buffered in the session, not flushed: at most one batch


# ----------------------------------------------------------------------------- bad input
BASE = [(1, 10), (1, 11), (2, 20)]


@pytest.fixture
def based():
    """A session holding BASE (loaded at 0, advanced to 3) and a refreshed view of its edges."""
    with tp.open_session(edges_dataflow) as s:
        for e in BASE:
            s.insert("edges", e)
        s.advance_to(3)
        view = CollectionView(s, "edges_out")
        view.refresh()
        assert view.contents() == {e: 1 for e in BASE}
        yield s, view


def _good(n: int = 200) -> List[Tuple[Any, ...]]:
    return [(i % 7, i, 1) for i in range(n)]


BAD_CASES = {
    "missing column": ("src long, dst long", [(1, 2)], EDGES, "diff", "not in the DataFrame"),
    "declared type": (
        "src string, dst long, diff long",
        [("1", 2, 1)],
        Columns(key="src", value="dst", diff="diff", types={"src": "long"}),
        "src",
        "but bigint is declared",
    ),
    "record type": (
        "src long, dst array<long>, diff long",
        [(1, [2], 1)],
        EDGES,
        "dst",
        "not a record type",
    ),
    "null key": (
        "src long, dst long, diff long",
        _good() + [(None, 5, 1)],
        EDGES,
        "src",
        "null key",
    ),
    "float diff": (
        "src long, dst long, diff double",
        [(1, 5, 1.0)],
        EDGES,
        "diff",
        "not an integer type",
    ),
    "string diff": (
        "src long, dst long, diff string",
        [(1, 5, "1")],
        EDGES,
        "diff",
        "not an integer type",
    ),
    "null diff": (
        "src long, dst long, diff long",
        _good() + [(1, 5, None)],
        EDGES,
        "diff",
        "null diff",
    ),
    "NaN": (
        "src long, dst double, diff long",
        [(1, 5.0, 1), (1, math.nan, 1)],
        EDGES,
        "dst",
        "NaN",
    ),
    "unknown op": (
        "src long, dst long, op string",
        [(1, 5, "insert"), (1, 6, "upsert")],
        Columns(key="src", value="dst", op="op"),
        "op",
        "neither 'insert'",
    ),
    "null op": (
        "src long, dst long, op string",
        [(1, 5, "insert"), (1, 6, None)],
        Columns(key="src", value="dst", op="op"),
        "op",
        "neither 'insert'",
    ),
    "time behind": (
        "src long, dst long, diff long, t long",
        [(1, 5, 1, 3), (1, 6, 1, 4), (2, 7, 1, 1)],
        Columns(key="src", value="dst", diff="diff", time="t"),
        "t",
        "behind",
    ),
    "null time": (
        "src long, dst long, diff long, t long",
        [(1, 5, 1, 3), (1, 6, 1, None)],
        Columns(key="src", value="dst", diff="diff", time="t"),
        "t",
        "null time",
    ),
    "float time": (
        "src long, dst long, diff long, t double",
        [(1, 5, 1, 3.0)],
        Columns(key="src", value="dst", diff="diff", time="t"),
        "t",
        "not an integer type",
    ),
}


@pytest.mark.parametrize("path", ["collected", "streamed"])
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_change_dataframes_are_refused_whole(spark, based, case, path):
    """Checked on the driver (a DataFrame within one batch) or in Spark (a larger one)."""
    schema, rows, columns, column, reason = BAD_CASES[case]
    s, view = based
    df = spark.createDataFrame(rows, schema)
    with pytest.raises(SparkInputError, match=reason) as caught:
        apply_changes(s, "edges", df, columns, batch_rows=1000 if path == "collected" else 1)
    err = caught.value
    assert err.input == "edges" and err.column == column and column in str(err)
    assert err.row is not None  # the offending (or, for a schema problem, the first) row
    assert s.time == 3 and s.pending == 0
    s.advance_to(4)
    view.refresh()
    assert view.contents() == {e: 1 for e in BASE}  # exactly unchanged


def test_null_keys_can_be_dropped(spark, based):
    s, view = based
    df = spark.createDataFrame(
        [(1, 5, 1), (None, 6, 1), (2, 20, -1)], "src long, dst long, diff long"
    )
    columns = Columns(key="src", value="dst", diff="diff", null_keys="drop")
    assert apply_changes(s, "edges", df, columns) == 2
    view.refresh()
    assert s.time == 4 and view.contents() == {(1, 10): 1, (1, 11): 1, (1, 5): 1}


def test_ops_and_times_make_one_epoch(spark, based):
    s, view = based
    ops = spark.createDataFrame(
        [(1, 10, "delete"), (3, 30, "insert"), (3, 30, "insert")], "src long, dst long, op string"
    )
    assert apply_changes(s, "edges", ops, Columns(key="src", value="dst", op="op")) == 3
    timed = spark.createDataFrame(
        [(4, 40, 1, 6), (4, 41, 1, 4)], "src long, dst long, diff long, t long"
    )
    apply_changes(s, "edges", timed, Columns(key="src", value="dst", diff="diff", time="t"))
    assert s.time == 7  # one past the latest time used
    view.refresh()
    assert view.contents(at=3) == {(1, 11): 1, (2, 20): 1, (3, 30): 2}
    assert view.contents(at=5) == {(1, 11): 1, (2, 20): 1, (3, 30): 2, (4, 41): 1}
    assert view.contents() == {(1, 11): 1, (2, 20): 1, (3, 30): 2, (4, 41): 1, (4, 40): 1}
    with pytest.raises(SparkOutputError, match="not closed"):
        view.contents(at=7)


def test_a_failure_while_streaming_retracts_what_was_sent(spark, based):
    s, view = based
    spy = _SpySession(s, fail_flush=3)  # two batches of 10 applied, then the third refused
    df = spark.createDataFrame([(9, i, 1) for i in range(50)], "src long, dst long, diff long")
    with pytest.raises(SessionInputError, match="injected"):
        apply_changes(spy, "edges", df.coalesce(1), EDGES, batch_rows=10)
    assert s.time == 3 and s.pending == 0
    s.advance_to(4)
    view.refresh()
    assert view.contents() == {e: 1 for e in BASE}
    assert not [c for c in view.changes() if c[1] == 3]  # +x and -x at 3 cancelled
    spy = _SpySession(s, fail_flush=1)  # within one batch: its only flush is refused
    with pytest.raises(SparkInputError, match="injected"):
        apply_changes(spy, "edges", df, EDGES)
    assert s.time == 4 and s.pending == 0
    s.advance_to(5)
    view.refresh()
    assert view.contents() == {e: 1 for e in BASE}


# ----------------------------------------------------------------------------- streaming
def _random_batches(count: int, seed: int = 7) -> List[List[Tuple[int, int, int]]]:
    """``count`` batches of (src, dst, diff): inserts, and deletes of rows that exist."""
    rng = random.Random(seed)
    live: Dict[Tuple[int, int], int] = {}
    batches = []
    for _ in range(count):
        rows = []
        for _ in range(rng.randint(5, 40)):
            existing = [e for e, n in live.items() if n > 0]
            if existing and rng.random() < 0.35:
                e = rng.choice(existing)
                live[e] -= 1
                rows.append((e[0], e[1], -1))
            else:
                e = (rng.randrange(8), rng.randrange(15))
                live[e] = live.get(e, 0) + 1
                rows.append((e[0], e[1], 1))
        batches.append(rows)
    return batches


def _write_batches(
    directory: str, batches: List[List[Tuple[int, int, int]]], first: int = 0
) -> None:
    """One parquet file per batch, modification times in batch order."""
    import pandas as pd

    os.makedirs(directory, exist_ok=True)
    for i, rows in enumerate(batches, start=first):
        frame = pd.DataFrame(
            {
                "batch": [i] * len(rows),
                "src": [r[0] for r in rows],
                "dst": [r[1] for r in rows],
                "diff": [r[2] for r in rows],
            },
            dtype="Int64",
        )
        path = os.path.join(directory, f"part-{i:04d}.parquet")
        frame.to_parquet(path + ".tmp", index=False)
        os.replace(path + ".tmp", path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


SCHEMA = "batch long, src long, dst long, diff long"


def _run_stream(spark: Any, source: str, checkpoint: str, fn: Any) -> Any:
    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .writeStream.foreachBatch(fn)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(timeout=150), "the streaming query did not finish"
    finally:
        if query.isActive:
            query.stop()
    return query


def _spark_edges(spark: Any, source: str, upto: int) -> Any:
    """The edges after batches 0..upto, recomputed from scratch: (src, dst, n), n > 0."""
    return (
        spark.read.schema(SCHEMA)
        .parquet(source)
        .where(f"batch <= {upto}")
        .groupBy("src", "dst")
        .agg({"diff": "sum"})
        .withColumnRenamed("sum(diff)", "n")
        .where("n != 0")
    )


@pytest.mark.timeout(240)
def test_structured_streaming_micro_batches_are_epochs(spark, tmp_path, caplog):
    source, checkpoint = str(tmp_path / "changes"), str(tmp_path / "checkpoint")
    _write_batches(source, _random_batches(20))
    seen: List[Tuple[int, int, Dict[int, int], Dict[int, int]]] = []
    with tp.open_session(edges_dataflow) as s:
        sink = ForeachBatchSink(s, "edges", EDGES, probe="probe")
        view = CollectionView(s, "counts")

        def check(df: Any, batch_id: int) -> None:
            sink(df, batch_id)
            number = df.select("batch").distinct().collect()[0][0]
            view.refresh()
            expected = {
                r[0]: r[1]
                for r in _spark_edges(spark, source, number)
                .groupBy("src")
                .agg({"n": "sum"})
                .collect()
                if r[1]
            }
            seen.append((batch_id, number, dict(view.contents()), expected))

        query = _run_stream(spark, source, checkpoint, check)
        assert query.exception() is None
        assert [b for b, *_ in seen] == list(range(20)) and [n for _, n, *_ in seen] == list(
            range(20)
        )
        for batch_id, _, got, expected in seen:
            assert got == {(k, n): 1 for k, n in expected.items()}, batch_id
        assert sorted(sink.latencies) == list(range(20)) and s.time == 20
        assert [sink.epochs[b] for b in range(20)] == list(range(20))

        # Spark replays the last micro-batch (its commit is lost): the sink ignores it.
        for name in ("19", ".19.crc"):
            path = os.path.join(checkpoint, "commits", name)
            if os.path.exists(path):
                os.remove(path)
        before = view.contents()
        with caplog.at_level(logging.INFO, logger="timelypy.connectors.spark"):
            _run_stream(spark, source, checkpoint, sink)
        assert sink.ignored == [19] and "micro-batch 19 replayed" in caplog.text
        sink(spark.createDataFrame([(0, 1, 1, 1)], SCHEMA), 3)  # an old id, called directly
        assert sink.ignored == [19, 3] and s.time == 20
        view.refresh()
        assert view.contents() == before

        # The maintained edges back to Spark: equal to Spark's own recomputation, both ways.
        edges = CollectionView(s, "edges_out")
        edges.refresh()
        truth = _spark_edges(spark, source, 19)
        repeated = truth.selectExpr("src", "dst", "explode(sequence(1, n))").drop("col")
        ours = edges.to_spark(spark, "src long, dst long")
        assert ours.exceptAll(repeated).count() == 0 and repeated.exceptAll(ours).count() == 0
        counted = edges.to_spark(spark, "src long, dst long, n long", count="n")
        assert counted.exceptAll(truth).count() == 0 and truth.exceptAll(counted).count() == 0
        counted.createOrReplaceTempView("edges_view")
        top = spark.sql("SELECT src, SUM(n) AS m FROM edges_view GROUP BY src").collect()
        assert {r["src"]: r["m"] for r in top} == {k: n for (k, n) in view.contents()}


@pytest.mark.timeout(120)
def test_a_refused_micro_batch_fails_the_stream_and_applies_nothing(spark, tmp_path):
    source, checkpoint = str(tmp_path / "changes"), str(tmp_path / "checkpoint")
    _write_batches(source, [[(1, 2, 1), (1, 3, 1)], [(2, 4, 1), (None, 5, 1), (2, 6, 1)]])
    with tp.open_session(edges_dataflow) as s:
        sink = ForeachBatchSink(s, "edges", EDGES)
        view = CollectionView(s, "edges_out")
        query = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .parquet(source)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        try:
            with pytest.raises(Exception, match="micro-batch 1") as caught:
                query.awaitTermination(timeout=60)
        finally:
            query.stop()
        assert "column 'src'" in str(caught.value) and "null key" in str(caught.value)
        from pyspark.errors import StreamingQueryException

        assert isinstance(caught.value, StreamingQueryException)  # Spark's type, not ours
        refused = sink.last_error  # ours, with its fields, kept by the sink
        assert isinstance(refused, SparkInputError) and refused.batch_id == 1
        assert (refused.input, refused.column) == ("edges", "src")
        assert refused.reason.startswith("null key")
        assert refused.row == {"src": None, "dst": 5, "diff": 1}
        assert [row for row, _, _ in refused.rows] == [{"src": None, "dst": 5, "diff": 1}]
        with pytest.raises(SparkInputError, match="micro-batch 1: ") as again:
            raise sink.last_error from caught.value  # as docs/spark.md shows
        assert again.value.__cause__ is caught.value
        assert sink.last_batch_id == 0 and s.time == 1
        view.refresh()
        assert view.contents() == {(1, 2): 1, (1, 3): 1}


def test_views_hand_changes_to_spark_sql(spark):
    with tp.open_session(edges_dataflow) as s:
        view = CollectionView(s, "counts")
        apply_changes(
            s,
            "edges",
            spark.createDataFrame(
                [(1, 2, 1), (1, 3, 1), (2, 3, 1)], "src long, dst long, diff long"
            ),
            EDGES,
        )
        apply_changes(
            s, "edges", spark.createDataFrame([(1, 2, -1)], "src long, dst long, diff long"), EDGES
        )
        view.refresh()
        counts = Columns(key="src", value="n")
        changes = view.changes_to_spark(spark, "src long, n long, time long, diff long", counts)
        changes.createOrReplaceTempView("count_changes")
        got = spark.sql("SELECT src, n, time, diff FROM count_changes ORDER BY time, src, n")
        assert [tuple(r) for r in got.collect()] == [
            (1, 2, 0, 1),
            (2, 1, 0, 1),
            (1, 1, 1, 1),
            (1, 2, 1, -1),
        ]
        assert view.contents(at=0) == {(1, 2): 1, (2, 1): 1}
        with pytest.raises(SparkOutputError, match="has type string, but row"):
            view.to_spark(spark, "src string, n long", counts)
        view.compact()
        assert view.contents() == {(1, 1): 1, (2, 1): 1}
        with pytest.raises(SparkOutputError, match="compacted"):
            view.contents(at=0)
        empty = CollectionView(s, "edges_out").to_spark(spark, "src long, dst long")
        assert empty.count() == 0 and empty.columns == ["src", "dst"]


def test_sink_calls_from_threads_are_serialised(spark):
    import threading

    with tp.open_session(edges_dataflow) as s:
        sink = ForeachBatchSink(s, "edges", EDGES)
        frames = {
            i: spark.createDataFrame([(i, i, 1)], "src long, dst long, diff long") for i in range(8)
        }

        def feed(ids: List[int]) -> None:
            for i in ids:
                sink(frames[i], i)

        threads = [threading.Thread(target=feed, args=([i, i + 4],)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sink.last_error is None  # no micro-batch failed
        applied = sorted(sink.epochs, key=sink.epochs.get)
        assert applied == sorted(applied)  # applied in increasing id order, the rest ignored
        assert sorted(applied + sink.ignored) == list(range(8)) and s.time == len(applied)
        with sink.lock:
            view = CollectionView(s, "edges_out")
            view.refresh()
        assert view.contents() == {(i, i): 1 for i in applied}
