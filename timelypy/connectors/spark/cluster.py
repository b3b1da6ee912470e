"""Spark and timelypy workers side by side on one Ray cluster, sized together, torn down together.

:func:`spark_and_workers` is the one call of the co-scheduled road: it connects to (or starts)
Ray, starts Spark on it through RayDP (or takes a RayDP ``SparkSession`` the caller already
has), and returns a :class:`SparkAndWorkers` whose :meth:`~SparkAndWorkers.open_session` opens
driver sessions on Ray workers sized to fit beside Spark. Leaving the ``with`` block closes the
sessions it opened, then stops the Spark it started (never one it was given, nor Ray)::

    with spark_and_workers(workers=2) as cluster:
        df = cluster.spark.read.parquet("edges/")
        with dataset_shards(df, 2, Columns(["src", "dst"])) as shards:
            session = cluster.open_session(lambda scope: my_dataflow(scope, shards))
            ...
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from ...workers.launch.ray_start import ensure_ray
from .columns import SparkConnectorError
from .datasets import is_spark_on_ray
from .on_ray import START_TIMEOUT, spark_on_ray, stop_spark_on_ray

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import SparkSession

    from ...workers.sessions.handles import Dataflow
    from ...workers.sessions.session import DataflowSession

__all__ = ["spark_and_workers", "SparkAndWorkers", "worker_cpus"]

log = logging.getLogger(__name__)

MAX_CPUS_PER_WORKER = 1.0
"""A timelypy worker is one Python thread: more than one CPU per worker buys nothing."""


def worker_cpus(cluster_cpus: float, spark_cpus: float, workers: int) -> float:
    """The CPUs to reserve per timelypy worker so that ``workers`` of them fit beside Spark's
    ``spark_cpus`` on a cluster of ``cluster_cpus`` (Ray's logical CPUs): an equal share of
    what Spark leaves, at most one CPU, rounded down to a hundredth.
    :class:`SparkConnectorError` says what to change when nothing is left.

    >>> worker_cpus(8, 2, 2), worker_cpus(2, 1, 2)
    (1.0, 0.5)
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    left = cluster_cpus - spark_cpus
    share = min(MAX_CPUS_PER_WORKER, int(100 * left / workers) / 100)
    if share <= 0:
        raise SparkConnectorError(
            f"spark_and_workers: Spark's executors reserve {spark_cpus:g} of the cluster's "
            f"{cluster_cpus:g} CPUs, none is left for {workers} timelypy worker(s): give Spark "
            f"fewer executors or cores, or pass num_cpus_per_worker (0 reserves nothing)"
        )
    return share


class SparkAndWorkers:
    """A Spark on Ray and the sizing of timelypy's Ray workers beside it (made by
    :func:`spark_and_workers`). ``spark`` is the RayDP ``SparkSession``; ``workers`` and
    ``num_cpus_per_worker`` are what :meth:`open_session` uses unless told otherwise."""

    def __init__(
        self,
        spark: "SparkSession",
        workers: int,
        num_cpus_per_worker: float,
        owns_spark: bool,
        session_options: Dict[str, Any],
    ) -> None:
        self.spark = spark
        self.workers = workers
        self.num_cpus_per_worker = num_cpus_per_worker
        self.owns_spark = owns_spark
        self._options = session_options
        self._sessions: List["DataflowSession"] = []

    def open_session(
        self,
        dataflow: Dataflow,
        workers: Optional[int] = None,
        **options: Any,
    ) -> "DataflowSession":
        """A driver session of ``dataflow`` on Ray workers (default: this plan's number and
        CPUs); closed when the plan closes, if not before. ``options`` go to
        :func:`timelypy.open_session`."""
        from ...workers.sessions.session import open_session

        merged = dict(self._options, num_cpus_per_worker=self.num_cpus_per_worker, **options)
        session = open_session(dataflow, workers=workers or self.workers, backend="ray", **merged)
        self._sessions.append(session)
        return session

    def close(self) -> None:
        """Close the sessions opened here (aborting one that will not close), then stop the
        Spark if this plan started it. Ray stays up."""
        errors: List[BaseException] = []
        for session in reversed(self._sessions):
            try:
                session.close()
            except Exception as exc:  # noqa: BLE001 - the others still close; reported below
                log.warning("spark_and_workers: a session failed to close: %s", exc)
                session.abort()
                errors.append(exc)
        self._sessions.clear()
        if self.owns_spark:
            stop_spark_on_ray()
        if errors:
            raise errors[0]

    def __enter__(self) -> "SparkAndWorkers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        spark = "started here" if self.owns_spark else "given"
        return (
            f"SparkAndWorkers(workers={self.workers}, num_cpus_per_worker="
            f"{self.num_cpus_per_worker:g}, spark={spark})"
        )


def spark_and_workers(
    workers: int = 2,
    *,
    app_name: str = "timelypy",
    executors: int = 1,
    executor_cores: int = 1,
    executor_memory: Union[str, int] = "1G",
    num_cpus_per_worker: Optional[float] = None,
    spark: Optional["SparkSession"] = None,
    address: Optional[str] = None,
    configs: Optional[Dict[str, Any]] = None,
    log_level: str = "WARN",
    start_timeout: float = START_TIMEOUT,
    **session_options: Any,
) -> SparkAndWorkers:
    """Spark on Ray (RayDP) and room for ``workers`` timelypy workers beside it.

    Ray: the connected one, else the one at ``address`` (or ``RAY_ADDRESS``), else a new local Ray
    as the Ray backend starts one (:func:`~timelypy.workers.launch.ray_start.ensure_ray`). Spark:
    ``spark`` if given (it must run on Ray; it is not stopped here), else
    :func:`~timelypy.connectors.spark.on_ray.spark_on_ray` with ``executors`` executors of
    ``executor_cores`` CPUs and ``executor_memory`` (and ``configs``, ``log_level``; it waits at
    most ``start_timeout`` seconds for the executors, then names the CPUs asked and free).
    ``num_cpus_per_worker`` defaults to :func:`worker_cpus` of the cluster's CPUs and Spark's
    reservation, so both fit at once. ``session_options`` (``timeout``, ``heartbeat_timeout``, ...)
    go to every :meth:`SparkAndWorkers.open_session`.

    Only Spark's executors and the workers reserve CPUs: RayDP's master, the tasks that move
    blocks between Spark and Ray's object store and the Ray Data tasks of
    :mod:`~timelypy.connectors.spark.datasets`' conversions reserve none, so the whole cluster
    can be handed out (on 2 CPUs: 1 executor core and 2 workers of 0.5) and every
    conversion still runs.
    """
    if workers < 1:
        raise ValueError(f"spark_and_workers: workers must be >= 1, got {workers}")
    ray = ensure_ray(address)
    owns = spark is None
    if spark is not None and not is_spark_on_ray(spark):
        raise SparkConnectorError(
            "spark_and_workers: the SparkSession given does not run on "
            "Ray (RayDP); start one with spark_on_ray()"
        )
    if num_cpus_per_worker is None:
        cluster = float(ray.cluster_resources().get("CPU", 0))
        spark_cpus = executors * executor_cores if spark is None else _spark_cpus(spark)
        num_cpus_per_worker = worker_cpus(cluster, spark_cpus, workers)
    if spark is None:
        spark = spark_on_ray(
            app_name,
            executors,
            executor_cores,
            executor_memory,
            configs,
            log_level=log_level,
            start_timeout=start_timeout,
        )
    plan = SparkAndWorkers(spark, workers, num_cpus_per_worker, owns, session_options)
    log.info("spark_and_workers: %r", plan)
    return plan


def _spark_cpus(spark: "SparkSession") -> float:
    """The CPUs a running RayDP Spark's executors reserve (from its configuration)."""
    conf = spark.sparkContext.getConf()
    executors = int(conf.get("spark.executor.instances", "1"))
    cores = int(conf.get("spark.executor.cores", "1"))
    return float(executors * cores)
