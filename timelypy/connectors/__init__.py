"""Connectors between timelypy sessions and other systems: Spark, plain or on Ray.

- :mod:`.spark`: DataFrames into driver sessions (``load``, ``apply_changes``, the
  ``ForeachBatchSink`` of Structured Streaming) and results back (``CollectionView``).
- :mod:`.spark_ray`: Spark on Ray through RayDP (``spark_on_ray``), loads from Spark's
  executors straight to the workers (``dataset_shards``, ``shard_collection``), results as Ray
  Datasets.
- :mod:`.spark_cluster`: Spark and timelypy workers sized and torn down together
  (``spark_and_workers``).

This layer may import every other layer; no other layer imports it. Each connector imports its
third-party library lazily, so ``import timelypy.connectors`` works without pyspark or Ray and
says what to install when a function that needs it is called.
"""

from __future__ import annotations

from .spark import (
    CollectionView,
    Columns,
    ForeachBatchSink,
    SparkConnectorError,
    SparkInputError,
    SparkOutputError,
    SparkUnavailableError,
    apply_changes,
    arrow_batches,
    load,
    local_spark,
)
from .spark_cluster import SparkAndWorkers, spark_and_workers, worker_cpus
from .spark_ray import (
    changes_to_dataset,
    dataset_shards,
    dataset_to_spark,
    feed_shard,
    is_spark_on_ray,
    shard_collection,
    spark_on_ray,
    stop_spark_on_ray,
    view_to_dataset,
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
