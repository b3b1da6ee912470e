"""Spark in and out of timelypy: plain PySpark through the driver, or Spark on Ray (RayDP).

- :mod:`.columns`: which columns make a record (:class:`Columns`), checked on the schema and per
  row; the connector's errors.
- :mod:`.driver`: a local Spark with this machine's settings (:func:`local_spark`).
- :mod:`.loading`: DataFrames into driver sessions through the driver (:func:`load`,
  :func:`apply_changes`, :func:`arrow_batches`, :func:`arrow_stream`).
- :mod:`.sink`: the :class:`ForeachBatchSink` of Structured Streaming, exactly once per
  micro-batch, across driver restarts too (an input journal beside the session's checkpoints).
- :mod:`.view`: a session capture accumulated on the driver and handed back to Spark
  (:class:`CollectionView`).
- :mod:`.on_ray`: starting and stopping Spark on Ray (:func:`spark_on_ray`).
- :mod:`.shards`: loads from Spark's executors straight to the workers
  (:func:`dataset_shards`, :func:`shard_collection`, :func:`feed_shard`).
- :mod:`.datasets`: Ray's side: bounded waits on Ray, views and changes as Ray Datasets.
- :mod:`.cluster`: Spark and timelypy workers sized and torn down together
  (:func:`spark_and_workers`).

Every module imports pyspark, Ray and RayDP lazily: ``import timelypy.connectors.spark`` works
without them and a function that needs one says what to install.
"""

from __future__ import annotations

from .cluster import SparkAndWorkers, spark_and_workers, worker_cpus
from .columns import (
    Columns,
    SparkConnectorError,
    SparkInputError,
    SparkOutputError,
    SparkUnavailableError,
)
from .datasets import (
    arrow_schema,
    changes_to_dataset,
    cpu_report,
    dataset_to_spark,
    is_spark_on_ray,
    records_to_arrow,
    view_to_dataset,
)
from .driver import (
    JAVA_OPTIONS,
    SPARK_SETTINGS,
    ForeachBatchSink,
    apply_changes,
    arrow_batches,
    arrow_stream,
    load,
    local_spark,
)
from .on_ray import RAYDP_JAVA_OPTIONS, RAYDP_SETTINGS, spark_on_ray, stop_spark_on_ray
from .shards import Shard, ShardInput, SparkShards, dataset_shards, feed_shard, shard_collection
from .view import CollectionView

__all__ = [
    "Columns",
    "SparkConnectorError",
    "SparkInputError",
    "SparkOutputError",
    "SparkUnavailableError",
    "local_spark",
    "load",
    "arrow_batches",
    "arrow_stream",
    "apply_changes",
    "ForeachBatchSink",
    "JAVA_OPTIONS",
    "SPARK_SETTINGS",
    "CollectionView",
    "spark_on_ray",
    "stop_spark_on_ray",
    "is_spark_on_ray",
    "RAYDP_JAVA_OPTIONS",
    "RAYDP_SETTINGS",
    "dataset_shards",
    "SparkShards",
    "Shard",
    "shard_collection",
    "ShardInput",
    "feed_shard",
    "records_to_arrow",
    "view_to_dataset",
    "changes_to_dataset",
    "dataset_to_spark",
    "arrow_schema",
    "cpu_report",
    "SparkAndWorkers",
    "spark_and_workers",
    "worker_cpus",
]
