"""The Spark connector: rows/s loaded from Spark, and an incremental view next to Spark recomputing.

(a) Load: a DataFrame of ``--rows`` rows ``(k, v)`` (``--key-type``: ``k`` an int, or a string
    of 1,000 distinct ones) is loaded into an input collection of a
    session with 1 worker (inline) and with 2 workers (processes): rows per second, from the
    call to the last worker's probe passing the load, once Spark's Python workers run
    (starting them, 2-3 s once per Spark session, and a first pass of Spark's JVM over the rows
    are timed apart: ``spark_warm_up_s``).
    Spark's own part is measured apart too (``spark_only_*``: the same Arrow batches drained
    on the driver, nothing done with them), and the CPU seconds of the driver and of the whole
    process tree (``cpu_s``, with Spark's JVM; a busy machine inflates them less than wall
    time). ``--load-only`` skips (b).
(b) Connected components over a random graph of ``--edges`` edges on ``--nodes`` nodes: a
    session maintains them (``examples/spark_pipeline.py``'s dataflow); ``--batches``
    micro-batches of ``--changes`` edge changes are applied with ``apply_changes`` (one atomic
    epoch each) and the view refreshed: latency per micro-batch. In the same run Spark computes
    the same result from scratch for a sample of the micro-batches, as a Spark user would
    without timelypy: label propagation with DataFrame joins to a fixpoint.

``--raydp`` measures instead the load through Spark on Ray (RayDP): Spark's executors write
Arrow blocks into Ray's object store and each Ray worker reads its shard (``dataset_shards``),
into 1 and 2 Ray workers: rows per second overall (shards + job) and inside the workers.

Prints one JSON object::

    python benchmarks/spark_connector.py --rows 1000000 --nodes 100000 --edges 100000 \\
        --batches 10 --changes 1000 --spark-samples 2
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from typing import Any, Dict, List

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
)

from common import (
    add_profile_argument,
    emit,
    environment,
    latency_stats_us,
    note,  # noqa: E402
    profiled,
)
from spark_pipeline import dataflow as components_dataflow  # noqa: E402
from spark_pipeline import make_changes, make_graph  # noqa: E402

import timelypy as tp  # noqa: E402
from timelypy.connectors.spark import (
    CollectionView,
    Columns,
    apply_changes,  # noqa: E402
    arrow_batches,
    arrow_stream,
    load,
    local_spark,
)


def _counts_dataflow(scope: Any) -> Dict[str, Any]:
    records, coll = scope.new_collection("records")
    return {"records": records, "probe": coll.probe()}


KEYS = {"int": "id % 1000 AS k", "string": "concat('key', CAST(id % 1000 AS STRING)) AS k"}
"""The key column of the loaded rows, per ``--key-type``."""


def measure_load(
    spark: Any, rows: int, backend: str, workers: int, key_type: str = "int"
) -> Dict[str, Any]:
    """Rows per second from a Spark DataFrame into a session's input."""
    df = spark.range(rows).selectExpr(KEYS[key_type], "id AS v").cache()
    df.count()  # materialised: the timing is the connector's, not the range's
    # Spark starts its Python workers (for mapInArrow) at the first use, 2-3 s here, and its
    # JVM compiles the Arrow collect's code in the first pass over the rows: costs of the Spark
    # session, once, not of the rows loaded.
    warm_up = time.perf_counter()
    sum(t.num_rows for t in arrow_batches(df.limit(10)))
    sum(b.num_rows for b in arrow_stream(df))
    warm_up = time.perf_counter() - warm_up
    # Spark's own part: the same Arrow batches drained, nothing done with them
    spark_started, spark_cpu = time.perf_counter(), _tree_cpu()
    spark_rows = sum(b.num_rows for b in arrow_stream(df))
    spark_seconds = time.perf_counter() - spark_started
    spark_cpu = _tree_cpu() - spark_cpu
    with tp.open_session(
        _counts_dataflow, workers=workers, backend=backend, timeout=600
    ) as session:
        started, cpu, driver_cpu = time.perf_counter(), _tree_cpu(), time.process_time()
        sent = load(session, "records", df, Columns(key=["k"], value=["v"]))
        session.advance_to(1)
        session.wait("probe")
        seconds = time.perf_counter() - started
        cpu, driver_cpu = _tree_cpu() - cpu, time.process_time() - driver_cpu
    df.unpersist()
    return {
        "backend": backend,
        "workers": workers,
        "key_type": key_type,
        "rows": sent,
        "seconds": round(seconds, 3),
        "rows_per_s": round(sent / seconds),
        # CPU seconds of this process and its children (Spark's JVM, the workers): a figure
        # that a busy machine inflates less than the wall clock
        "cpu_s": round(cpu, 3),
        "driver_cpu_s": round(driver_cpu, 3),
        "spark_only_rows_per_s": round(spark_rows / spark_seconds),
        "spark_only_cpu_s": round(spark_cpu, 3),
        "spark_warm_up_s": round(warm_up, 3),
    }


def _tree_cpu() -> float:
    """CPU seconds of this process and its live descendants (0 without psutil)."""
    try:
        import psutil
    except ImportError:
        return 0.0
    total = 0.0
    me = psutil.Process()
    for process in [me] + me.children(recursive=True):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _count_shards(shards: Any) -> Any:
    """``build`` of a Ray job: load this worker's shard, count per key; rows and seconds."""

    def build(worker: Any) -> Dict[str, Any]:
        from timelypy.connectors.spark import shard_collection

        started = time.perf_counter()

        def flow(scope: Any) -> Any:
            source, records = shard_collection(scope, shards)
            return source, records.map(lambda kv: kv[0]).count().probe()

        source, _ = worker.dataflow(flow)
        worker.step_until_done(timeout=600)
        return {"rows": source.rows, "seconds": time.perf_counter() - started}

    return build


def measure_load_raydp(rows: int, worker_counts: List[int]) -> List[Dict[str, Any]]:
    """Rows per second from Spark on Ray (RayDP) into Ray workers through Dataset shards:
    Spark's executors write Arrow blocks to Ray's object store, each worker reads its own."""
    from timelypy.connectors.spark import dataset_shards, spark_and_workers

    out = []
    with spark_and_workers(
        workers=max(worker_counts), app_name="bench-raydp", log_level="ERROR"
    ) as cluster:
        df = cluster.spark.range(rows).selectExpr("id % 1000 AS k", "id AS v").cache()
        df.count()
        for workers in worker_counts:
            started = time.perf_counter()
            with dataset_shards(
                df, workers, Columns(key=["k"], value=["v"]), input="records", check=False
            ) as shards:
                split = time.perf_counter()
                results = tp.execute(
                    _count_shards(shards),
                    workers=workers,
                    backend="ray",
                    timeout=600,
                    num_cpus_per_worker=cluster.num_cpus_per_worker,
                )
            seconds = time.perf_counter() - started
            loaded = sum(r["rows"] for r in results)
            in_workers = max(r["seconds"] for r in results)
            out.append(
                {
                    "backend": "ray (RayDP shards)",
                    "workers": workers,
                    "rows": loaded,
                    "shards_s": round(split - started, 3),
                    "seconds": round(seconds, 3),
                    "rows_per_s": round(loaded / seconds),
                    "rows_per_s_in_workers": round(loaded / in_workers),
                }
            )
    return out


def spark_components(spark: Any, edges: List[Any]) -> Dict[int, int]:
    """Connected components by label propagation with DataFrame joins, to a fixpoint."""
    from pyspark.sql import functions as F

    e = spark.createDataFrame(edges, "src long, dst long")
    sym = e.union(e.select(F.col("dst").alias("src"), F.col("src").alias("dst"))).cache()
    labels = (
        sym.select(F.col("src").alias("node"))
        .distinct()
        .withColumn("label", F.col("node"))
        .localCheckpoint()
    )
    while True:
        proposed = labels.join(sym, labels.node == sym.src).select(
            F.col("dst").alias("node"), F.col("label")
        )
        new = (
            proposed.union(labels)
            .groupBy("node")
            .agg(F.min("label").alias("label"))
            .localCheckpoint()
        )
        changed = new.join(labels, "node").where(new.label != labels.label).limit(1).count()
        labels = new
        if not changed:
            break
    result = {row.node: row.label for row in labels.collect()}
    sym.unpersist()
    return result


def measure_components(spark: Any, args: Any) -> Dict[str, Any]:
    """Micro-batch latency of the maintained view, and of Spark recomputing, same graph."""
    rng = random.Random(args.seed)
    graph = make_graph(args.nodes, args.edges, rng)
    batches = make_changes(graph, args.nodes, args.batches, args.changes, rng)
    columns = Columns(["src", "dst"], diff="diff")
    latencies: List[float] = []
    spark_seconds: List[float] = []
    current = set(graph)
    with tp.open_session(components_dataflow, timeout=600) as session:
        started = time.perf_counter()
        load(
            session,
            "edges",
            spark.createDataFrame(sorted(graph), "src long, dst long"),
            Columns(["src", "dst"]),
        )
        session.advance_to(1)
        view = CollectionView(session, "labels")
        view.refresh()
        load_seconds = time.perf_counter() - started
        sample = set(range(0, len(batches), max(1, len(batches) // max(1, args.spark_samples))))
        for i, batch in enumerate(batches):
            df = spark.createDataFrame(batch, "src long, dst long, diff int").cache()
            df.count()
            started = time.perf_counter()
            apply_changes(session, "edges", df, columns)
            view.refresh()
            latencies.append(time.perf_counter() - started)
            df.unpersist()
            for src, dst, diff in batch:
                (current.add if diff > 0 else current.discard)((src, dst))
            if i in sample and len(spark_seconds) < args.spark_samples:
                started = time.perf_counter()
                expected = spark_components(spark, sorted(current))
                spark_seconds.append(time.perf_counter() - started)
                assert view.contents() == {item: 1 for item in expected.items()}, i
    inc = latency_stats_us(latencies)
    naive = latency_stats_us(spark_seconds) if spark_seconds else None
    return {
        "nodes": args.nodes,
        "edges": args.edges,
        "changes_per_batch": args.changes,
        "load_s": round(load_seconds, 3),
        "timelypy_per_batch": inc,
        "spark_recompute_per_batch": naive,
        "speedup_median": (round(naive["median_us"] / inc["median_us"], 1) if naive else None),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1, 2],
        help="worker counts for the load (1: inline, more: processes)",
    )
    ap.add_argument(
        "--key-type",
        nargs="+",
        choices=sorted(KEYS),
        default=["int"],
        help="the loaded rows' key column: ints (k < 1000) or strings ('key0' .. 'key999')",
    )
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--edges", type=int, default=20_000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument(
        "--spark-samples",
        type=int,
        default=1,
        help="micro-batches for which Spark recomputes from scratch",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--load-only", action="store_true", help="measure the load only (no connected components)"
    )
    ap.add_argument(
        "--raydp",
        action="store_true",
        help="measure only the load through Spark on Ray (RayDP) and Dataset shards "
        "into Ray workers (a process whose first Spark is RayDP's)",
    )
    add_profile_argument(ap)
    args = ap.parse_args()
    result: Dict[str, Any] = {
        "benchmark": "spark_connector",
        "parameters": vars(args),
        **environment(),
    }
    if args.raydp:
        note("load through RayDP shards ...")
        result["load"] = measure_load_raydp(args.rows, args.workers)
        emit(result)
        return
    with tempfile.TemporaryDirectory(prefix="timelypy-bench-spark-") as directory:
        spark = local_spark("bench-spark-connector", cores=2, local_dir=directory)
        try:
            note("load ...")
            result["load"] = [
                measure_load(spark, args.rows, "inline" if w == 1 else "processes", w, key_type)
                for key_type in args.key_type
                for w in args.workers
            ]
            if not args.load_only:
                note("connected components ...")
                result["components"] = measure_components(spark, args)
        finally:
            spark.stop()
    emit(result)


if __name__ == "__main__":
    with profiled():
        main()
