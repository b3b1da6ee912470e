"""A local Spark with this machine's settings, and the plain PySpark road (re-exported).

The modules that hold the road in and out of driver sessions (docs/spark.md) are re-exported
here, where they used to live.

The plain PySpark path: the DataFrame's rows reach the session's workers through the driver, in
bounded batches.

- :class:`Columns`: which columns make a record (and its key), the diff or op, the time.
- :func:`local_spark` (here): a local Spark with the settings this machine needs (Java 17
  flags, this Python for the executors, Arrow on, UI off, loopback). Any existing
  ``SparkSession`` works everywhere else.
- :func:`load`, :func:`apply_changes`, :func:`arrow_batches`, :func:`arrow_stream`
  (:mod:`.loading`): DataFrames into an input, streamed in batches or as one atomic epoch.
- :class:`ForeachBatchSink` (:mod:`.sink`): ``writeStream.foreachBatch(sink)``: each
  micro-batch one epoch, exactly once per ``batch_id``, also across driver restarts (an input
  journal beside the session's checkpoints).
- :class:`CollectionView` (:mod:`.view`): a capture's changes accumulated on the driver, back to
  Spark as DataFrames with a declared schema.

pyspark is imported inside the functions that need it: importing this module works without it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from .columns import (
    INSTALL_HINT,
    Columns,
    SparkConnectorError,
    SparkInputError,
    SparkOutputError,
    SparkUnavailableError,
    require_pyspark,
)
from .loading import DEFAULT_BATCH_ROWS, apply_changes, arrow_batches, arrow_stream, load
from .sink import ForeachBatchSink
from .view import CollectionView

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import SparkSession

__all__ = [
    "Columns",
    "local_spark",
    "load",
    "arrow_batches",
    "arrow_stream",
    "apply_changes",
    "ForeachBatchSink",
    "CollectionView",
    "SparkConnectorError",
    "SparkInputError",
    "SparkOutputError",
    "SparkUnavailableError",
    "JAVA_OPTIONS",
    "SPARK_SETTINGS",
    "DEFAULT_BATCH_ROWS",
]

log = logging.getLogger(__name__)

JAVA_OPTIONS = " ".join(
    ["-XX:+IgnoreUnrecognizedVMOptions"]
    + [
        f"--add-opens=java.base/{p}=ALL-UNNAMED"
        for p in (
            "java.lang",
            "java.lang.invoke",
            "java.lang.reflect",
            "java.io",
            "java.net",
            "java.nio",
            "java.util",
            "java.util.concurrent",
            "java.util.concurrent.atomic",
            "sun.nio.ch",
            "sun.nio.cs",
            "sun.security.action",
            "sun.util.calendar",
        )
    ]
)
"""The JVM flags Spark 3.5 needs on Java 17 (driver and executors)."""

SPARK_SETTINGS: Dict[str, str] = {
    "spark.driver.extraJavaOptions": JAVA_OPTIONS,
    "spark.executor.extraJavaOptions": JAVA_OPTIONS,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}
"""What :func:`local_spark` sets (plus ``spark.sql.shuffle.partitions`` = cores)."""


# ----------------------------------------------------------------------------- local Spark
def local_spark(
    app_name: str = "timelypy",
    cores: int = 2,
    *,
    local_dir: Optional[str] = None,
    config: Optional[Mapping[str, Any]] = None,
    log_level: str = "WARN",
) -> "SparkSession":
    """Start (or get) a local Spark on ``cores`` cores with the settings of
    :data:`SPARK_SETTINGS`, this interpreter as the executors' Python (``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` are set in ``os.environ``; ``SPARK_LOCAL_IP`` defaults to
    127.0.0.1), and Spark's scratch and warehouse
    directories under ``local_dir`` if given. ``config`` adds or overrides settings (extra Java
    options are appended to the required ones). A ``SparkSession`` is a context manager:
    ``with local_spark() as spark:`` stops it at the end. If a Spark is already running in this
    process, it is returned as is (Spark keeps its static settings) and a warning is logged.
    """
    require_pyspark()
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SparkUnavailableError(
            f"the Spark connector needs Java (no java on PATH and no JAVA_HOME): {INSTALL_HINT}"
        )
    from pyspark.sql import SparkSession

    if cores < 1:
        raise ValueError(f"local_spark: cores must be >= 1, got {cores}")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind to loopback, not the LAN
    settings = dict(SPARK_SETTINGS, **{"spark.sql.shuffle.partitions": str(cores)})
    if local_dir is not None:
        settings["spark.local.dir"] = os.path.join(local_dir, "scratch")
        settings["spark.sql.warehouse.dir"] = os.path.join(local_dir, "warehouse")
    for name, value in (config or {}).items():
        if name in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
            value = f"{settings[name]} {value}"
        settings[name] = str(value)
    if SparkSession.getActiveSession() is not None:
        log.warning(
            "local_spark: a Spark session is already running in this process; it is "
            "returned with its own settings"
        )
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for name, value in settings.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
