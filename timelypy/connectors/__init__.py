"""Connectors between timelypy sessions and other systems: Spark, plain or on Ray.

- :mod:`.spark` (a package): DataFrames into driver sessions (``load``, ``apply_changes``,
  the ``ForeachBatchSink`` of Structured Streaming) and results back (``CollectionView``);
  Spark on Ray through RayDP (``spark_on_ray``), loads from Spark's executors straight to the
  workers (``dataset_shards``, ``shard_collection``), results as Ray Datasets; Spark and
  timelypy workers sized and torn down together (``spark_and_workers``).

This layer may import every other layer; no other layer imports it. Each connector imports its
third-party library lazily, so ``import timelypy.connectors`` works without pyspark or Ray and
says what to install when a function that needs it is called.
"""

from __future__ import annotations

from .spark import (
    CollectionView,
    Columns,
    ForeachBatchSink,
    SparkAndWorkers,
    SparkConnectorError,
    SparkInputError,
    SparkOutputError,
    SparkUnavailableError,
    apply_changes,
    arrow_batches,
    changes_to_dataset,
    dataset_shards,
    dataset_to_spark,
    feed_shard,
    is_spark_on_ray,
    load,
    local_spark,
    shard_collection,
    spark_and_workers,
    spark_on_ray,
    stop_spark_on_ray,
    view_to_dataset,
    worker_cpus,
)

__all__ = [
    "Columns",
    "CollectionView",
    "ForeachBatchSink",
    "SparkConnectorError",
    "SparkInputError",
    "SparkOutputError",
    "SparkUnavailableError",
    "apply_changes",
    "arrow_batches",
    "load",
    "local_spark",
    "SparkAndWorkers",
    "spark_and_workers",
    "worker_cpus",
    "changes_to_dataset",
    "dataset_shards",
    "dataset_to_spark",
    "feed_shard",
    "is_spark_on_ray",
    "shard_collection",
    "spark_on_ray",
    "stop_spark_on_ray",
    "view_to_dataset",
]
