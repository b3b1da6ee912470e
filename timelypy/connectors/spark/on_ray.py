"""Spark on Ray (RayDP): starting and stopping a Spark whose executors are Ray actors.

Loads from its executors straight to the workers are :mod:`.shards`; results as Ray Datasets
are :mod:`.datasets`.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time as _time
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    List,
    Mapping,
    Optional,
    Union,
)

from ...workers.launch.ray_start import ensure_ray
from .columns import (
    INSTALL_HINT,
    SparkConnectorError,
    SparkUnavailableError,
    require_pyspark,
)
from .datasets import (
    bounded,
    cpu_report,
    is_spark_on_ray,
    require_ray,
)
from .driver import JAVA_OPTIONS

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import SparkSession

__all__ = [
    "spark_on_ray",
    "stop_spark_on_ray",
    "require_raydp",
    "RAYDP_JAVA_OPTIONS",
    "RAYDP_SETTINGS",
    "START_TIMEOUT",
    "STOP_TIMEOUT",
]

log = logging.getLogger(__name__)

RAYDP_JAVA_OPTIONS = (
    JAVA_OPTIONS
    + " "
    + " ".join(
        f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in ("java.math", "java.text", "java.time")
    )
)
"""The JVM flags of Spark on Java 17, plus what RayDP's Java actors need (their serializer
reads private fields of ``java.math.BigDecimal``: without ``java.math`` opened, the first
Spark -> Ray conversion kills RayDP's app master with ``InaccessibleObjectException``)."""

_JAVA_KEYS = (
    "spark.ray.raydp_app_master.extraJavaOptions",
    "spark.driver.extraJavaOptions",
    "spark.executor.extraJavaOptions",
)

RAYDP_SETTINGS: Dict[str, str] = {
    **{key: RAYDP_JAVA_OPTIONS for key in _JAVA_KEYS},
    "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.ui.showConsoleProgress": "false",
    "spark.ray.raydp_recoverable_fetch.task.resource.CPU": "0",
    "spark.ray.raydp_spark_master.actor.resource.CPU": "0",
}
"""What :func:`spark_on_ray` sets (plus ``spark.sql.shuffle.partitions`` = the executors'
cores, at least 2, and loopback addresses for the driver on a one-node loopback Ray). RayDP's
master actor and the tasks that fetch a DataFrame's Arrow blocks from the executors into Ray's
object store reserve no CPU (the master is idle between calls, a fetch waits on the executor,
which holds its own CPUs), so neither waits for a CPU that Spark's executors and timelypy's
workers hold: only the executors reserve CPUs."""

STOP_TIMEOUT = 120.0  # seconds stop_spark_on_ray waits for RayDP to stop
START_TIMEOUT = 120.0  # seconds spark_on_ray waits for RayDP and its executors to start


def require_raydp() -> Any:
    """The ``raydp`` module (with pyspark and Ray), or :class:`SparkUnavailableError`."""
    require_pyspark()
    require_ray()
    try:
        import raydp
    except ImportError as exc:
        raise SparkUnavailableError(f"Spark on Ray needs raydp ({exc}): {INSTALL_HINT}") from exc
    return raydp


# ----------------------------------------------------------------------------- Spark on Ray
class _State:  # the RayDP Spark this module started (RayDP keeps one per process)
    session: Any = None
    stopping = False
    lock = threading.RLock()


@functools.lru_cache(maxsize=None)
def _owned_class() -> Any:
    """A ``SparkSession`` subclass whose ``stop()`` (and ``with`` exit) stops RayDP."""
    from pyspark.sql import SparkSession

    class RayDPSparkSession(SparkSession):
        """A RayDP Spark started by :func:`spark_on_ray`: ``stop()`` stops RayDP too."""

        def stop(self) -> None:
            if _State.stopping or _State.session is not self or _inside_raydp_stop():
                SparkSession.stop(self)
            else:
                stop_spark_on_ray()

    return RayDPSparkSession


def _inside_raydp_stop() -> bool:
    """This thread runs ``raydp.stop_spark()`` (RayDP's exit hook, or a user's call), which
    holds RayDP's lock and stops the session itself: stopping RayDP again from here, in
    another thread, would wait for that lock for ever."""
    try:
        from raydp import context
    except ImportError:  # pragma: no cover - RayDP started this session
        return False
    owned = getattr(context._spark_context_lock, "_is_owned", None)
    return bool(owned and owned())


_PLAIN_SPARK = (
    "pyspark keeps one JVM per process, and a plain (non-Ray) Spark started it "
    "without RayDP's classes: start Spark on Ray in a process whose first Spark it "
    "is"
)


def _settings(
    executors: int, executor_cores: int, configs: Optional[Mapping[str, Any]], ray: Any
) -> Dict[str, str]:
    """RayDP's configs: :data:`RAYDP_SETTINGS`, loopback on a loopback Ray, ``configs``."""
    settings = dict(RAYDP_SETTINGS)
    settings["spark.sql.shuffle.partitions"] = str(max(2, executors * executor_cores))
    settings["spark.pyspark.python"] = sys.executable
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) == 1 and nodes[0].get("NodeManagerAddress") == "127.0.0.1":
        settings["spark.driver.host"] = settings["spark.driver.bindAddress"] = "127.0.0.1"
    for name, value in (configs or {}).items():
        if name in _JAVA_KEYS:
            value = f"{settings[name]} {value}"
        settings[name] = str(value)
    return settings


def spark_on_ray(
    app_name: str = "timelypy",
    executors: int = 1,
    executor_cores: int = 1,
    executor_memory: Union[str, int] = "1G",
    configs: Optional[Mapping[str, Any]] = None,
    *,
    spark: Optional["SparkSession"] = None,
    address: Optional[str] = None,
    log_level: str = "WARN",
    warm: bool = False,
    start_timeout: float = START_TIMEOUT,
) -> "SparkSession":
    """A Spark on the current Ray cluster through RayDP: ``executors`` executor actors of
    ``executor_cores`` CPUs and ``executor_memory`` each.

    Ray: the connected one, else the one at ``address`` (or ``RAY_ADDRESS``), else a new local
    Ray started as the Ray backend starts one
    (:func:`~timelypy.workers.launch.ray_start.ensure_ray`:
    loopback only, Ray's token authentication, ended with this process however it ends); that
    Ray stays up after Spark stops, for later calls. Settings: :data:`RAYDP_SETTINGS`, this
    interpreter as the executors' Python (``PYSPARK_PYTHON``), ``configs`` on top (extra Java
    options are appended). RayDP's recoverable Spark -> Ray conversion stays on. ``warm`` runs
    a tiny job (the first job costs seconds more than later ones). The session returned is a
    context manager: the ``with`` exit and ``stop()`` stop RayDP (:func:`stop_spark_on_ray`).
    ``spark=`` an existing RayDP session returns it as is (this module never stops it).

    Sizing on a shared Ray cluster: each executor is a Ray actor that reserves
    ``executor_cores`` CPUs and ``executor_memory`` of Ray's ``memory`` for its whole life
    (RayDP's master actors reserve no CPU once started); each timelypy worker reserves
    ``num_cpus_per_worker`` (default 0.5) while its job or session runs. Both must fit at once,
    ``executors * executor_cores + workers * num_cpus_per_worker <= the cluster's CPUs``, or
    the later one waits (timelypy's ``startup_timeout`` bounds that). On a small machine give
    Spark one executor of one core and timelypy 0.25-0.5 CPU per worker: Ray's CPUs are
    logical, and during a load Spark produces while timelypy consumes, sharing the real cores.

    Starting waits at most ``start_timeout`` seconds for RayDP, which waits for its executors
    (each waits for its CPUs); on expiry RayDP is stopped and
    :class:`SparkConnectorError` names the CPUs asked and the CPUs Ray has free.
    """
    if spark is not None:
        if is_spark_on_ray(spark):
            return spark
        raise SparkConnectorError(
            "spark_on_ray: the SparkSession given does not run on Ray "
            "(RayDP); use timelypy.connectors.spark for a plain Spark"
        )
    if executors < 1 or executor_cores < 1:
        raise ValueError(
            f"spark_on_ray: executors and executor_cores must be >= 1, got "
            f"{executors} and {executor_cores}"
        )
    raydp, ray = require_raydp(), require_ray()
    with _State.lock:
        if _State.session is not None:
            raise SparkConnectorError(
                "spark_on_ray: a RayDP Spark started here runs (RayDP "
                "keeps one per process): stop it, or pass it as spark="
            )
        _refuse_plain_spark()
        ensure_ray(address)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        start = _time.monotonic()
        asked = (
            f"{executors} executor(s) of {executor_cores} CPU(s) and {executor_memory} "
            f"each ({executors * executor_cores} CPUs asked)"
        )
        start_spark = functools.partial(
            raydp.init_spark,
            app_name,
            num_executors=executors,
            executor_cores=executor_cores,
            executor_memory=executor_memory,
            configs=_settings(executors, executor_cores, configs, ray),
        )
        session = _start_raydp(raydp, start_spark, asked, start_timeout)
        session.__class__ = _owned_class()
        _State.session = session
    _await_executors(session, executors, asked, start_timeout - (_time.monotonic() - start))
    session.sparkContext.setLogLevel(log_level)
    log.info(
        "spark_on_ray: %d executor(s) of %d core(s), %s, up in %.1f s",
        executors,
        executor_cores,
        executor_memory,
        _time.monotonic() - start,
    )
    if warm:
        session.range(1).count()
    return session


def _refuse_plain_spark() -> None:
    """RayDP cannot start beside a plain Spark of this process: say so before trying."""
    from pyspark.sql import SparkSession

    try:
        active = SparkSession.active()  # the active or default session
    except Exception:  # noqa: BLE001 - none
        active = None
    if active is not None and not is_spark_on_ray(active):
        raise SparkConnectorError(f"spark_on_ray: a plain Spark runs here: {_PLAIN_SPARK}")


def _start_raydp(
    raydp: Any, start_spark: Callable[[], Any], asked: str, start_timeout: float
) -> Any:
    """``start_spark()`` (RayDP's ``init_spark``) within ``start_timeout`` seconds; a failure
    stops what RayDP half started and names the cause."""
    try:
        return bounded("spark_on_ray", asked, start_timeout, start_spark, option="start_timeout")
    except Exception as exc:
        _stop_half_started(raydp)  # RayDP keeps a half-started Spark that blocks the next
        if isinstance(exc, SparkConnectorError):
            raise
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise SparkConnectorError(
            f"spark_on_ray: RayDP could not start Spark "
            f"({type(exc).__name__}: {first}). If a plain Spark ran "
            f"in this process, that is why: {_PLAIN_SPARK}"
        ) from exc


def _await_executors(session: Any, executors: int, asked: str, timeout: float) -> None:
    """Wait at most ``timeout`` seconds for ``executors`` executors to register with the Spark
    driver (RayDP's start returns before Ray has placed them; a Spark whose executors Ray
    cannot place would take jobs and never run them); on expiry stop it and raise
    :class:`SparkConnectorError` naming the CPUs asked and free."""
    deadline = _time.monotonic() + max(timeout, 0.0)
    while True:
        try:  # the driver counts itself among the block managers
            registered = session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1
        except Exception:  # noqa: BLE001 - not answerable: RayDP's start is the word
            return
        if registered >= executors:
            return
        if _time.monotonic() >= deadline:
            break
        _time.sleep(0.2)
    try:
        stop_spark_on_ray(timeout=30.0)
    except SparkConnectorError:
        log.warning(
            "spark_on_ray: RayDP did not stop after its executors were not placed", exc_info=True
        )
    raise SparkConnectorError(
        f"spark_on_ray: {registered} of {executors} executor(s) "
        f"registered within the start_timeout; Ray has not placed the "
        f"rest: {asked}; {cpu_report()}. Free CPUs (fewer executor "
        f"cores) or pass a longer start_timeout"
    )


def _stop_half_started(raydp: Any) -> None:
    """``raydp.stop_spark()`` after a failed start, waited for at most 30 s."""
    try:
        bounded("spark_on_ray cleanup", "RayDP to stop", 30.0, raydp.stop_spark)
    except Exception:  # noqa: BLE001 - the caller's error says what failed
        log.warning("spark_on_ray: RayDP failed to clean up", exc_info=True)


def stop_spark_on_ray(timeout: float = STOP_TIMEOUT) -> None:
    """Stop the RayDP Spark :func:`spark_on_ray` started (its executor and master actors and
    the Spark driver); waits at most ``timeout`` seconds. A no-op when none runs."""
    with _State.lock:
        if _State.session is None or _State.stopping:
            return
        _State.stopping = True
    errors: List[BaseException] = []

    def stop() -> None:
        try:
            require_raydp().stop_spark()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    try:
        worker = threading.Thread(target=stop, name="timelypy-raydp-stop", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise SparkConnectorError(f"stop_spark_on_ray: RayDP did not stop within {timeout} s")
        if errors:
            raise SparkConnectorError(
                f"stop_spark_on_ray: RayDP failed to stop: {type(errors[0]).__name__}: {errors[0]}"
            ) from errors[0]
    finally:
        with _State.lock:
            _State.session = None
            _State.stopping = False
    log.info("spark_on_ray: stopped")
