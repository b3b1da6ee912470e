"""The journaled ForeachBatchSink in one process: micro-batches journaled and applied, refusals
that leave nothing behind, replays ignored, the journal pruned by the checkpoints, and a
restored session's sink applying the journal's entries after its checkpoint again."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import timelypy as tp
from timelypy.errors import RecoveryError

pytestmark = pytest.mark.spark

SCHEMA = "k long, v long, op string"


@pytest.fixture(scope="module")
def spark(tmp_path_factory) -> Iterator[Any]:
    """A local Spark (the one of this process if one runs: pyspark keeps one per process)."""
    pytest.importorskip("pyspark", reason="pyspark is not installed: pip install -e '.[spark]'")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17 (no java on PATH, no JAVA_HOME)")
    from timelypy.connectors.spark import local_spark

    base = tmp_path_factory.mktemp("spark-recovery")
    yield local_spark("timelypy-recovery-tests", cores=1, local_dir=str(base), log_level="ERROR")


def dataflow(scope):
    rows_in, rows = scope.new_collection()
    return {"rows": rows_in, "out": rows.capture(), "probe": rows.probe()}


def columns():
    from timelypy.connectors.spark import Columns

    return Columns(["k", "v"], op="op", ops=("+", "-"))


def batch(i: int, n: int = 4) -> List[Tuple[int, int, str]]:
    rows = [(i, j, "+") for j in range(n)]
    if i:
        rows.append((i - 1, 0, "-"))  # a row of the batch before
    return rows


def expected(batches: List[List[Tuple[int, int, str]]]) -> Dict[Any, int]:
    total: Counter = Counter()
    for rows in batches:
        for k, v, op in rows:
            total[(k, v)] += 1 if op == "+" else -1
    return {r: n for r, n in total.items() if n}


def contents(changes: List[Tuple[Any, Any, int]]) -> Dict[Any, int]:
    total: Counter = Counter()
    for record, _time, diff in changes:
        total[record] += diff
    return {r: n for r, n in total.items() if n}


def test_a_journaled_sink_applies_refuses_ignores_and_recovers(spark, tmp_path):
    from timelypy.connectors.spark import ForeachBatchSink, SparkConnectorError, SparkInputError

    every = tp.Checkpoints(str(tmp_path), every_times=2, keep=2)
    batches = [batch(i) for i in range(6)]
    with tp.open_session(dataflow, checkpoint=every) as s:
        sink = ForeachBatchSink(s, "rows", columns(), "probe")
        assert sink.journal is not None
        sink(spark.createDataFrame(batches[0], SCHEMA), 0)
        sink(spark.createDataFrame(batches[1], SCHEMA), 1)  # a checkpoint at time 2
        assert s.last_checkpoint.extra["spark_sink:rows"] == {"last_batch_id": 1, "input": "rows"}
        bad = spark.createDataFrame(batches[2] + [(9, 9, "?")], SCHEMA)
        with pytest.raises(SparkInputError, match="micro-batch 2: .*op is neither") as info:
            sink(bad, 2)
        assert info.value.batch_id == 2 and sink.last_batch_id == 1
        assert sink.journal.batch_ids() == []  # 0 and 1 checkpointed; nothing of the refused
        sink(spark.createDataFrame(batches[2], SCHEMA), 2)
        sink(spark.createDataFrame(batches[2], SCHEMA), 2)  # Spark's replay
        assert sink.ignored == [2]
        sink.batch_rows = 3  # larger micro-batches: checked in Spark, then streamed in
        sink(spark.createDataFrame(batches[3], SCHEMA), 3)  # a checkpoint at time 4
        assert sink.journal.batch_ids() == [2, 3]  # what both kept checkpoints cover went
        sink(spark.createDataFrame(batches[4], SCHEMA), 4)  # journaled, not checkpointed
        assert sink.epochs == {0: 0, 1: 1, 2: 2, 3: 3, 4: 4} and s.time == 5
        s.wait("probe")
        assert contents(s.changes("out")) == expected(batches[:5])
    # a new driver: the checkpoint covers up to batch 3, the journal holds batch 4
    with tp.open_session(dataflow, restore=every) as s:
        assert s.time == 4
        sink = ForeachBatchSink(s, "rows", columns(), "probe")
        assert sink.replayed == [4] and sink.last_batch_id == 4 and s.time == 5
        sink(spark.createDataFrame(batches[4], SCHEMA), 4)  # Spark runs it again: ignored
        sink(spark.createDataFrame(batches[5], SCHEMA), 5)
        assert sink.ignored == [4]
        s.wait("probe")
        assert contents(s.restored("out") + s.changes("out")) == expected(batches)
    # a fresh session at the same location is no continuation of that run
    with tp.open_session(dataflow, checkpoint=every) as s:
        with pytest.raises(SparkConnectorError, match="of an earlier run"):
            ForeachBatchSink(s, "rows", columns())
        with pytest.raises(RecoveryError, match="holds checkpoints"):
            ForeachBatchSink(s, "rows", columns(), recover=True)


def test_a_run_killed_before_its_first_checkpoint_is_recovered_from_the_journal(spark, tmp_path):
    from timelypy.connectors.spark import ForeachBatchSink

    every = tp.Checkpoints(str(tmp_path), every_times=10)
    batches = [batch(i) for i in range(3)]
    with tp.open_session(dataflow, checkpoint=every) as s:
        sink = ForeachBatchSink(s, "rows", columns())
        for i in range(2):
            sink(spark.createDataFrame(batches[i], SCHEMA), i)
    with tp.open_session(dataflow, checkpoint=every) as s:
        sink = ForeachBatchSink(s, "rows", columns(), "probe", recover=True)
        assert sink.replayed == [0, 1] and s.time == 2
        sink(spark.createDataFrame(batches[1], SCHEMA), 1)
        sink(spark.createDataFrame(batches[2], SCHEMA), 2)
        s.wait("probe")
        assert contents(s.changes("out")) == expected(batches)


def test_without_checkpoints_the_sink_keeps_no_journal(spark):
    from timelypy.connectors.spark import ForeachBatchSink

    with tp.open_session(dataflow) as s:
        sink = ForeachBatchSink(s, "rows", columns())
        assert sink.journal is None
        with pytest.raises(ValueError, match="journal=True needs a session that takes"):
            ForeachBatchSink(s, "rows", columns(), journal=True)
