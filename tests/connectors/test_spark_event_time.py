"""Spark columns as event time: timestamps as milliseconds since the epoch, integer columns as
they are, the input advanced to the watermark after each load or micro-batch (plain, through a
Structured Streaming query, and journaled with a restore)."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
from typing import Any, Iterator, List

import cloudpickle
import pytest

import timelypy as tp
from timelypy.connectors.spark import Columns, ForeachBatchSink, SparkInputError, load

cloudpickle.register_pickle_by_value(sys.modules[__name__])

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

UTC = dt.timezone.utc
BASE = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
BASE_MS = 1714564800000


def collect(scope):
    bids_in, bids = scope.new_collection()
    return {"bids": bids_in, "out": bids.capture(), "probe": bids.probe()}


def stamps(event_times: List[int], bound: int, start: int) -> List[int]:
    """From scratch: the time each event goes in at (the watermark rule)."""
    out, latest = [], None
    for et in event_times:
        wm = start if latest is None else max(start, latest - bound)
        out.append(max(et, wm))
        latest = et if latest is None else max(latest, et)
    return out


@pytest.fixture(scope="module")
def spark(tmp_path_factory) -> Iterator[Any]:
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17 (no java on PATH, no JAVA_HOME)")
    from timelypy.connectors.spark import local_spark

    base = tmp_path_factory.mktemp("spark-event-time")
    session = local_spark("timelypy-event-time", cores=2, local_dir=str(base), log_level="ERROR")
    try:
        yield session
    finally:
        session.stop()


def bids(spark, offsets_ms, first=0):
    rows = [
        (first + i, 10 * i, BASE + dt.timedelta(milliseconds=ms)) for i, ms in enumerate(offsets_ms)
    ]
    return spark.createDataFrame(rows, "auction long, price long, ts timestamp")


def test_load_a_timestamp_column_as_milliseconds(spark):
    offsets = [0, 1500, 700, 4000, 1000, 2600]  # 700 and 1000 come late for a 2 s bound
    with tp.open_session(collect) as s:
        s.advance_to(BASE_MS)
        columns = Columns(key="auction", value="price")
        sent = load(
            s,
            "bids",
            bids(spark, offsets),
            columns,
            event_time="ts",
            max_out_of_orderness=2000,
            batch_rows=4,
        )
        assert sent == 6 and s.time == BASE_MS + 2000  # the watermark: 4000 - 2000
        s.advance_to(BASE_MS + 5000)
        s.wait("probe")
        got = sorted((rec[0], t) for rec, t, _ in s.changes("out"))
        ints = spark.createDataFrame([(1, 5, 10), (2, 6, 3)], "auction long, price long, t int")
        with pytest.raises(SparkInputError, match="event-time column 'price2' is not in"):
            load(s, "bids", ints, columns, event_time="price2")
        text = spark.createDataFrame([(1, 5, "x")], "auction long, price long, t string")
        with pytest.raises(SparkInputError, match="'t' has type string: it must be a timestamp"):
            load(s, "bids", text, columns, event_time="t")
        nulls = spark.createDataFrame([(1, 5, None)], "auction long, price long, t long")
        with pytest.raises(SparkInputError, match="null time"):
            load(s, "bids", nulls, columns, event_time="t")
        # an integer column is taken as it is (here: behind the watermark, so at it)
        load(s, "bids", ints, columns, event_time="t")
        s.advance_to(BASE_MS + 6000)
        s.wait("probe")
        assert sorted(s.changes("out")) == [
            ((1, 5), BASE_MS + 5000, 1),
            ((2, 6), BASE_MS + 5000, 1),
        ]
    expected = stamps([BASE_MS + ms for ms in offsets], 2000, BASE_MS)
    assert got == sorted(enumerate(expected))


def test_a_streaming_query_advances_to_the_watermark_after_each_micro_batch(spark, tmp_path):
    directory = str(tmp_path / "bids")
    batches = [[0, 3000, 1000], [2500, 9000], [4000, 12000]]
    first = 0
    for offsets in batches:
        bids(spark, offsets, first).coalesce(1).write.mode("append").parquet(directory)
        first += len(offsets)
    with tp.open_session(collect) as s:
        s.advance_to(BASE_MS)
        sink = ForeachBatchSink(
            s,
            "bids",
            Columns(key="auction", value="price"),
            probe="probe",
            event_time="ts",
            max_out_of_orderness=1000,
        )
        query = (
            spark.readStream.schema("auction long, price long, ts timestamp")
            .option("maxFilesPerTrigger", 1)
            .parquet(directory)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(timeout=300)
        assert sink.last_error is None and sorted(sink.rows) == [0, 1, 2]
        # each micro-batch applied at the watermark the one before left
        assert [sink.epochs[b] - BASE_MS for b in range(3)] == [0, 2000, 8000]
        assert s.time == BASE_MS + 11000 and sink.feed.behind == 2  # 1000 and 4000
        got = sorted((rec[0], t) for rec, t, _ in s.changes("out"))
    flat = [BASE_MS + ms for offsets in batches for ms in offsets]
    assert got == sorted(enumerate(stamps(flat, 1000, BASE_MS)))


def test_journaled_micro_batches_at_event_time_come_back_after_a_restore(spark, tmp_path):
    """Records ahead of the watermark are pending work when a checkpoint is taken: the
    checkpoint keeps them (it is not put off), records the micro-batch it covers, and a restored
    sink replays only the journal after it."""
    every = tp.Checkpoints(str(tmp_path / "job"), every_times=1)
    columns = Columns(key="auction", value="price")
    with tp.open_session(collect, checkpoint=every) as s:
        s.advance_to(BASE_MS)
        sink = ForeachBatchSink(s, "bids", columns, event_time="ts", max_out_of_orderness=500)
        sink(bids(spark, [100, 900, 300]), 0)  # 900 waits ahead of the watermark 400
        assert s.time == BASE_MS + 400 and sink.journal is not None
        assert s.last_checkpoint.time == BASE_MS + 400
        assert s.last_checkpoint.extra[sink.extra_key]["last_batch_id"] == 0
        sink(bids(spark, [2000, 200], first=3), 1)  # 200: behind the watermark 1500
        assert s.time == BASE_MS + 1500 and sink.feed.behind == 2
        assert s.last_checkpoint.extra[sink.extra_key]["last_batch_id"] == 1
        sink(bids(spark, [1700], first=5), 2)  # journaled, then the driver dies
        s.wait("probe")
        before = sorted((rec[0], t) for rec, t, _ in s.changes("out"))
    with tp.open_session(collect, restore=every) as s:
        sink = ForeachBatchSink(s, "bids", columns, event_time="ts", max_out_of_orderness=500)
        assert sink.replayed == [2] and s.time == BASE_MS + 1500
        assert sink.feed.watermark == BASE_MS + 1500  # starts at the restored time
        restored = sorted((rec[0], t) for rec, t, _ in s.restored("out"))
        s.advance_to(BASE_MS + 3000)
        s.wait("probe")
        after = sorted((rec[0], t) for rec, t, _ in s.changes("out"))
    stamped = [BASE_MS + ms for ms in (100, 900, 400, 2000, 1500)]
    assert before == restored == list(enumerate(stamped))  # 2000: kept while it waited ahead
    assert after == [(5, BASE_MS + 1700)]  # batch 2 from the journal, at its event time
