"""A Spark pipeline with an incremental view: connected components maintained by timelypy.

Spark writes a graph of edges to Parquet and a stream of edge-change files; Spark reads them
back (a batch read, then Structured Streaming over the change files, one file per
micro-batch); a timelypy session maintains the connected components of the graph
incrementally; after each micro-batch the components are a Spark DataFrame that a Spark SQL
query reads (the largest components), and the example prints each micro-batch's latency::

    python examples/spark_pipeline.py                       # plain local PySpark, inline worker
    python examples/spark_pipeline.py --backend processes --workers 2
    python examples/spark_pipeline.py --backend ray --workers 2   # Spark on Ray (RayDP)

With ``--backend ray`` Spark runs on Ray through RayDP and the graph goes from Spark's
executors to the timelypy workers through Ray's object store (``dataset_shards``), not through
the driver; the micro-batches of changes go through the driver session. Every micro-batch's
components are checked against a from-scratch union-find.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time
from typing import Any, Dict, Iterator, List, Set, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from connectivity import connected_labels, union_find_labels  # noqa: E402

import timelypy as tp  # noqa: E402
from timelypy.connectors.spark import (
    CollectionView,
    Columns,
    ForeachBatchSink,  # noqa: E402
    dataset_shards,
    is_spark_on_ray,  # noqa: E402
    load,
    local_spark,
    shard_collection,
    spark_on_ray,
)

Edge = Tuple[int, int]
TOP_QUERY = (
    "SELECT label, count(*) AS size FROM components GROUP BY label "
    "ORDER BY size DESC, label LIMIT 10"
)


def dataflow(scope: Any, shards: Any = None) -> Dict[str, Any]:
    """Edges in (directed as given); labels out: ``(node, smallest node of its component)``.
    With ``shards`` (Spark on Ray) the initial graph comes from this worker's shard too."""
    edges_in, edges = scope.new_collection("edges")
    if shards is not None:
        _, graph = shard_collection(scope, shards, "graph")
        edges = edges.concat(graph)
    symmetric = edges.flat_map(lambda e: [e, (e[1], e[0])])
    labels = connected_labels(symmetric)
    return {"edges": edges_in, "labels": labels.capture(), "probe": labels.probe()}


def make_graph(nodes: int, edges: int, rng: random.Random) -> Set[Edge]:
    """``edges`` distinct random edges ``(a, b)`` with ``a < b`` among ``nodes`` nodes."""
    graph: Set[Edge] = set()
    while len(graph) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            graph.add((min(a, b), max(a, b)))
    return graph


def make_changes(
    graph: Set[Edge], nodes: int, batches: int, per_batch: int, rng: random.Random
) -> List[List[Tuple[int, int, int]]]:
    """Micro-batches of ``(src, dst, diff)``: half deletions of present edges, half insertions
    of new ones (the graph is updated as they are drawn)."""
    current = set(graph)
    out = []
    for _ in range(batches):
        batch = []
        for victim in rng.sample(sorted(current), min(per_batch // 2, len(current))):
            current.discard(victim)
            batch.append((victim[0], victim[1], -1))
        while len(batch) < per_batch:
            a, b = rng.randrange(nodes), rng.randrange(nodes)
            edge = (min(a, b), max(a, b))
            if a != b and edge not in current:
                current.add(edge)
                batch.append((edge[0], edge[1], 1))
        out.append(batch)
    return out


@contextlib.contextmanager
def spark_for(backend: str, workers: int) -> Iterator[Any]:
    """Plain local PySpark, or (``backend="ray"``) Spark on the Ray cluster through RayDP."""
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if backend == "ray":
        if existing is not None and is_spark_on_ray(existing):
            yield existing
            return
        with spark_on_ray(app_name="spark-pipeline") as spark:
            yield spark
        return
    spark = existing or local_spark("spark-pipeline", cores=2)
    try:
        yield spark
    finally:
        if existing is None:
            spark.stop()


@contextlib.contextmanager
def _graph_session(spark: Any, edges_dir: str, backend: str, workers: int) -> Iterator[Any]:
    """A session of :func:`dataflow` holding the graph at time 0, advanced to time 1."""
    edges = spark.read.parquet(edges_dir)
    if backend != "ray":
        with tp.open_session(dataflow, workers=workers, backend=backend, timeout=120) as session:
            load(session, "edges", edges, Columns(["src", "dst"]))
            session.advance_to(1)
            yield session
        return
    import cloudpickle  # the Ray workers cannot import this file: send its functions by value
    import connectivity

    for module in (sys.modules[__name__], connectivity):
        cloudpickle.register_pickle_by_value(module)
    with dataset_shards(edges, workers, Columns(["src", "dst"]), input="graph") as shards:
        with tp.open_session(
            lambda scope: dataflow(scope, shards),
            workers=workers,
            backend="ray",
            timeout=120,
            num_cpus_per_worker=0.25,
        ) as session:
            session.advance_to(1)
            yield session


def run(
    spark: Any,
    directory: str,
    backend: str,
    workers: int,
    nodes: int,
    edges: int,
    batches: int,
    per_batch: int,
    seed: int,
    quiet: bool = False,
) -> List[Dict[str, Any]]:
    """The pipeline; returns per micro-batch its latency and the largest components."""
    rng = random.Random(seed)
    graph = make_graph(nodes, edges, rng)
    changes = make_changes(graph, nodes, batches, per_batch, rng)
    edges_dir, changes_dir = os.path.join(directory, "edges"), os.path.join(directory, "changes")
    spark.createDataFrame(sorted(graph), "src long, dst long").write.parquet(edges_dir)
    for batch in changes:  # one file per micro-batch, written in order
        spark.createDataFrame(batch, "src long, dst long, diff int").coalesce(1).write.mode(
            "append"
        ).parquet(changes_dir)
    results: List[Dict[str, Any]] = []
    with _graph_session(spark, edges_dir, backend, workers) as session:
        view = CollectionView(session, "labels")
        view.refresh()
        truth = set(graph)
        sink = ForeachBatchSink(
            session, "edges", Columns(["src", "dst"], diff="diff"), probe="probe"
        )

        def each_batch(df: Any, batch_id: int) -> None:
            started = time.perf_counter()
            sink(df, batch_id)
            view.refresh()
            maintained = time.perf_counter() - started
            components = view.to_spark(spark, "node long, label long")
            components.createOrReplaceTempView("components")
            top = [tuple(row) for row in spark.sql(TOP_QUERY).collect()]
            for src, dst, diff in changes[batch_id]:
                (truth.add if diff > 0 else truth.discard)((src, dst))
            expected = union_find_labels(truth | {(b, a) for a, b in truth})
            assert view.contents() == {item: 1 for item in expected.items()}, batch_id
            results.append(
                {
                    "batch": batch_id,
                    "maintain_s": maintained,
                    "with_query_s": time.perf_counter() - started,
                    "top": top,
                }
            )
            if not quiet:
                print(
                    f"micro-batch {batch_id}: view maintained in {maintained * 1e3:.1f} ms, "
                    f"largest components {top[:3]}",
                    flush=True,
                )

        query = (
            spark.readStream.schema("src long, dst long, diff int")
            .option("maxFilesPerTrigger", 1)
            .parquet(changes_dir)
            .writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", os.path.join(directory, "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(600)
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
    return results


def main(argv: List[str] = ()) -> List[Dict[str, Any]]:
    """Parse ``argv``, run the pipeline in a temporary directory; returns its results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="inline", choices=["inline", "processes", "ray"])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--edges", type=int, default=1500)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--changes", type=int, default=100, help="edge changes per micro-batch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(list(argv))
    with (
        tempfile.TemporaryDirectory(prefix="timelypy-spark-") as directory,
        spark_for(args.backend, args.workers) as spark,
    ):
        results = run(
            spark,
            directory,
            args.backend,
            args.workers,
            args.nodes,
            args.edges,
            args.batches,
            args.changes,
            args.seed,
            args.quiet,
        )
    if len(results) != args.batches:
        raise RuntimeError(f"expected {args.batches} micro-batches, got {len(results)}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
