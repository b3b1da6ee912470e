"""Spark on Ray (RayDP): co-scheduled Spark, loads that bypass the driver, Ray Dataset sinks."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import queue
import sys
import threading
import time as _time
from typing import (TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, NamedTuple,
                    Optional, Sequence, Tuple, Union)

from ..workers.batch import show
from .spark import JAVA_OPTIONS, Columns
from .spark_columns import (INSTALL_HINT, BadRow, RowReader, SparkConnectorError,
                            SparkOutputError, SparkUnavailableError, require_pyspark)

if TYPE_CHECKING:  # pragma: no cover - types only
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["spark_on_ray", "stop_spark_on_ray", "is_spark_on_ray", "dataset_shards",
           "SparkShards", "Shard", "shard_collection", "ShardInput", "feed_shard",
           "records_to_arrow", "view_to_dataset", "changes_to_dataset", "dataset_to_spark",
           "arrow_schema", "cpu_report", "RAYDP_JAVA_OPTIONS", "RAYDP_SETTINGS"]

log = logging.getLogger("timelypy.connectors.spark_ray")

RAYDP_JAVA_OPTIONS = JAVA_OPTIONS + " " + " ".join(
    f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in ("java.math", "java.text", "java.time"))
"""The JVM flags of Spark on Java 17, plus what RayDP's Java actors need (their serializer
reads private fields of ``java.math.BigDecimal``: without ``java.math`` opened, the first
Spark -> Ray conversion kills RayDP's app master with ``InaccessibleObjectException``)."""

_JAVA_KEYS = ("spark.ray.raydp_app_master.extraJavaOptions", "spark.driver.extraJavaOptions",
              "spark.executor.extraJavaOptions")

RAYDP_SETTINGS: Dict[str, str] = {
    **{key: RAYDP_JAVA_OPTIONS for key in _JAVA_KEYS}, "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true", "spark.ui.showConsoleProgress": "false",
    "spark.ray.raydp_recoverable_fetch.task.resource.CPU": "0",
    "spark.ray.raydp_spark_master.actor.resource.CPU": "0"}
"""What :func:`spark_on_ray` sets (plus ``spark.sql.shuffle.partitions`` = the executors'
cores, at least 2, and loopback addresses for the driver on a one-node loopback Ray). RayDP's
master actor and the tasks that fetch a DataFrame's Arrow blocks from the executors into Ray's
object store reserve no CPU (the master is idle between calls, a fetch waits on the executor,
which holds its own CPUs), so neither waits for a CPU that Spark's executors and timelypy's
workers hold: only the executors reserve CPUs."""

DEFAULT_BATCH_ROWS = 10_000
_POLL = 0.005  # seconds a step waits (at most) for a batch of its shard that is not ready yet
DEFAULT_READ_TIMEOUT = 300.0  # seconds a worker may wait for the next batch of its shard
STOP_TIMEOUT = 120.0  # seconds stop_spark_on_ray waits for RayDP to stop
START_TIMEOUT = 120.0  # seconds spark_on_ray waits for Spark's executors to register
RAY_TIMEOUT = 120.0  # seconds a conversion between Spark, Ray Data and a view waits on Ray


def _ray() -> Any:
    """The ``ray`` module with Ray Data, or :class:`SparkUnavailableError`."""
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Datasets
    except ImportError as exc:
        raise SparkUnavailableError(f"Spark on Ray needs ray[data] ({exc}): {INSTALL_HINT}"
                                    ) from exc
    return ray


def _raydp() -> Any:
    """The ``raydp`` module (with pyspark and Ray), or :class:`SparkUnavailableError`."""
    require_pyspark()
    _ray()
    try:
        import raydp
    except ImportError as exc:
        raise SparkUnavailableError(f"Spark on Ray needs raydp ({exc}): {INSTALL_HINT}") from exc
    return raydp


# ----------------------------------------------------------------------------- waits on Ray
def cpu_report(ray: Any = None) -> str:
    """``"the cluster has N CPUs, F free (ray.available_resources())"``: what an error says
    when a call waits on Ray for CPUs."""
    ray = ray or _ray()
    try:
        total = float(ray.cluster_resources().get("CPU", 0))
        free = float(ray.available_resources().get("CPU", 0))
    except Exception as exc:  # noqa: BLE001 - a report, never the error itself
        return f"Ray's resources could not be read ({type(exc).__name__}: {exc})"
    return f"the cluster has {total:g} CPUs, {free:g} free (ray.available_resources())"


def _bounded(what: str, waits_for: str, timeout: float, call: Any, *args: Any,
             option: str = "timeout") -> Any:
    """``call(*args)`` in a thread, waited for at most ``timeout`` seconds; on expiry
    :class:`SparkConnectorError` names ``what``, the resource it waits for and Ray's CPUs
    (the call goes on in the background until Ray schedules it or the cluster goes)."""
    if timeout is None or timeout <= 0:
        raise ValueError(f"{what}: timeout must be a positive number of seconds, got "
                         f"{timeout!r}")
    done: List[Any] = []

    def run() -> None:
        try:
            done.append((True, call(*args)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            done.append((False, exc))
    thread = threading.Thread(target=run, name=f"timelypy-ray-wait-{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not done:
        raise SparkConnectorError(f"{what}: no answer from Ray within {timeout:g} s; it waits "
                                  f"for {waits_for}; {cpu_report()}. Free CPUs (fewer "
                                  f"executor cores or a smaller num_cpus_per_worker) or pass "
                                  f"a longer {option}")
    ok, value = done[0]
    if not ok:
        raise value
    return value


_CACHE_LOCK = threading.Lock()


class _Override:  # conversions under way with the 0-CPU metadata task, and what it replaced
    users = 0
    before: Any = None


def _light_metadata_task() -> Optional[Tuple[Any, Any, Any]]:
    """Ray Data's cache of remote functions, the key of its metadata task and that task asking
    for 0 CPUs; None where this Ray has no such cache (the task then keeps Ray's 1 CPU)."""
    try:
        from ray.data._internal import remote_fn
        from ray.data._internal.util import get_table_block_metadata_schema
        key = (get_table_block_metadata_schema, hash(remote_fn._make_hashable({})))
        light = remote_fn.cached_remote_fn(get_table_block_metadata_schema, num_cpus=0)
    except Exception:  # noqa: BLE001 - another Ray version
        log.debug("Ray Data's metadata task keeps its default CPU", exc_info=True)
        return None
    return remote_fn, key, light


def _metadata_cpus() -> str:
    """What Ray Data's metadata task asks for, for error messages."""
    return "0 CPUs asked" if _light_metadata_task() is not None else "1 CPU asked"


@contextlib.contextmanager
def _metadata_tasks_without_cpu() -> Iterator[None]:
    """Ray Data's ``from_arrow_refs`` (behind ``from_arrow`` and RayDP's conversions) reads
    each block's metadata in a Ray task of Ray's default 1 CPU. Beside a Spark executor and
    timelypy's workers no whole CPU may be free (2 CPUs: 1 + 2 x 0.5), and the task, so the
    call, waits for ever. Reading a block's row count and schema takes no CPU worth
    reserving: while this is active the task asks for 0 CPUs. Without Ray Data's cache of
    remote functions (another Ray version) nothing changes and the caller's bound applies."""
    override = _light_metadata_task()
    if override is None:  # another Ray: the default task, and the caller's bound
        yield
        return
    remote_fn, key, light = override
    cache = remote_fn.CACHED_FUNCTIONS
    with _CACHE_LOCK:  # held only to count the conversions under way, never while waiting
        if _Override.users == 0:
            _Override.before = cache.get(key)
            cache[key] = light
        _Override.users += 1
    try:
        yield
    finally:
        with _CACHE_LOCK:
            _Override.users -= 1
            if _Override.users == 0:
                if _Override.before is None:
                    cache.pop(key, None)
                else:
                    cache[key] = _Override.before
                _Override.before = None


def _arrow_dataset(table: "pa.Table", what: str, timeout: float) -> Any:
    """``ray.data.from_arrow(table)``, its metadata task without a CPU, bounded."""
    ray = _ray()

    def convert() -> Any:
        with _metadata_tasks_without_cpu():
            return ray.data.from_arrow(table)
    return _bounded(what, f"Ray Data's task that reads the block's metadata "
                          f"({_metadata_cpus()})", timeout, convert)


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
            if _State.stopping or _State.session is not self:
                SparkSession.stop(self)
            else:
                stop_spark_on_ray()
    return RayDPSparkSession


def is_spark_on_ray(spark: "SparkSession") -> bool:
    """``spark`` runs its executors on Ray (RayDP)."""
    try:
        return (spark.sparkContext.master or "").startswith("ray")
    except Exception:  # noqa: BLE001 - a stopped session
        return False


_PLAIN_SPARK = ("pyspark keeps one JVM per process, and a plain (non-Ray) Spark started it "
                "without RayDP's classes: start Spark on Ray in a process whose first Spark it "
                "is")


def _settings(executors: int, executor_cores: int, configs: Optional[Mapping[str, Any]],
              ray: Any) -> Dict[str, str]:
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


def spark_on_ray(app_name: str = "timelypy", executors: int = 1, executor_cores: int = 1,
                 executor_memory: Union[str, int] = "1G",
                 configs: Optional[Mapping[str, Any]] = None, *,
                 spark: Optional["SparkSession"] = None, address: Optional[str] = None,
                 log_level: str = "WARN", warm: bool = False,
                 start_timeout: float = START_TIMEOUT) -> "SparkSession":
    """A Spark on the current Ray cluster through RayDP: ``executors`` executor actors of
    ``executor_cores`` CPUs and ``executor_memory`` each.

    Ray: the connected one, else ``ray.init(address=address)`` with Ray's defaults (a new local
    Ray gets Ray's token authentication; nothing here changes it); that Ray stays up after
    Spark stops (``ray.shutdown()`` ends it). Settings: :data:`RAYDP_SETTINGS`, this
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

    Starting waits at most ``start_timeout`` seconds for RayDP and for every executor to
    register with Spark (an executor waits for its CPUs); on expiry RayDP is stopped and
    :class:`SparkConnectorError` names the CPUs asked and the CPUs Ray has free.
    """
    if spark is not None:
        if is_spark_on_ray(spark):
            return spark
        raise SparkConnectorError("spark_on_ray: the SparkSession given does not run on Ray "
                                  "(RayDP); use timelypy.connectors.spark for a plain Spark")
    if executors < 1 or executor_cores < 1:
        raise ValueError(f"spark_on_ray: executors and executor_cores must be >= 1, got "
                         f"{executors} and {executor_cores}")
    raydp, ray = _raydp(), _ray()
    with _State.lock:
        if _State.session is not None:
            raise SparkConnectorError("spark_on_ray: a RayDP Spark started here runs (RayDP "
                                      "keeps one per process): stop it, or pass it as spark=")
        from pyspark.sql import SparkSession

        try:
            active = SparkSession.active()  # the active or default session
        except Exception:  # noqa: BLE001 - none
            active = None
        if active is not None and not is_spark_on_ray(active):
            raise SparkConnectorError(f"spark_on_ray: a plain Spark runs here: {_PLAIN_SPARK}")
        if not ray.is_initialized():
            ray.init(address=address)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        start = _time.monotonic()
        asked = (f"{executors} executor(s) of {executor_cores} CPU(s) and {executor_memory} "
                 f"each ({executors * executor_cores} CPUs asked)")
        try:
            session = _bounded("spark_on_ray", asked, start_timeout, functools.partial(
                raydp.init_spark, app_name, num_executors=executors,
                executor_cores=executor_cores, executor_memory=executor_memory,
                configs=_settings(executors, executor_cores, configs, ray)),
                option="start_timeout")
            left = start_timeout - (_time.monotonic() - start)
            _wait_for_executors(session, executors, asked, max(left, 1.0))
        except Exception as exc:
            _stop_half_started(raydp)  # RayDP keeps a half-started Spark that blocks the next
            if isinstance(exc, SparkConnectorError):
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise SparkConnectorError(f"spark_on_ray: RayDP could not start Spark "
                                      f"({type(exc).__name__}: {first}). If a plain Spark ran "
                                      f"in this process, that is why: {_PLAIN_SPARK}") from exc
        session.__class__ = _owned_class()
        _State.session = session
    session.sparkContext.setLogLevel(log_level)
    log.info("spark_on_ray: %d executor(s) of %d core(s), %s, up in %.1f s", executors,
             executor_cores, executor_memory, _time.monotonic() - start)
    if warm:
        session.range(1).count()
    return session


def _wait_for_executors(session: "SparkSession", executors: int, asked: str,
                        timeout: float) -> None:
    """Wait until ``executors`` executors registered with Spark (each is a Ray actor that
    waits for its CPUs first), at most ``timeout`` seconds; else :class:`SparkConnectorError`
    naming what was asked and Ray's free CPUs."""
    tracker = session.sparkContext._jsc.sc().statusTracker()
    deadline = _time.monotonic() + timeout
    while True:
        registered = len(tracker.getExecutorInfos()) - 1  # the driver is listed too
        if registered >= executors:
            return
        if _time.monotonic() > deadline:
            raise SparkConnectorError(
                f"spark_on_ray: {registered} of {executors} executor(s) registered within "
                f"{timeout:.0f} s; Spark asked Ray for {asked}; {cpu_report()}. Free CPUs "
                f"(close sessions or jobs that hold them), ask for fewer executors or cores, "
                f"or pass a longer start_timeout")
        _time.sleep(0.2)


def _stop_half_started(raydp: Any) -> None:
    """``raydp.stop_spark()`` after a failed start, waited for at most 30 s."""
    try:
        _bounded("spark_on_ray cleanup", "RayDP to stop", 30.0, raydp.stop_spark)
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
            _raydp().stop_spark()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    try:
        worker = threading.Thread(target=stop, name="timelypy-raydp-stop", daemon=True)
        worker.start()
        worker.join(timeout)
        if worker.is_alive():
            raise SparkConnectorError(f"stop_spark_on_ray: RayDP did not stop within {timeout} s")
        if errors:
            raise SparkConnectorError(f"stop_spark_on_ray: RayDP failed to stop: "
                                      f"{type(errors[0]).__name__}: {errors[0]}") from errors[0]
    finally:
        with _State.lock:
            _State.session = None
            _State.stopping = False
    log.info("spark_on_ray: stopped")


# ----------------------------------------------------------------------------- shards
class Shard(NamedTuple):
    """One timelypy worker's part of a DataFrame: a Ray Data iterator (of a
    ``streaming_split``) over the mapped columns, and the reader that turns rows into
    ``(record, diff, time)``. Picklable: it travels to the worker's Ray actor."""

    index: int
    workers: int
    iterator: Any
    reader: RowReader
    time: int

    @property
    def input(self) -> str:
        """The input name errors name."""
        return self.reader.input


class SparkShards(List[Shard]):
    """The shards of one DataFrame (``shards[worker.index]``), one per worker; the Ray Dataset
    (:attr:`dataset`) behind them. :meth:`release` (or the ``with`` exit) frees the Spark copy
    that feeds the dataset. Pickled, it is just the list of shards (as a build closure needs)."""

    def __init__(self, shards: List[Shard], dataset: Any, frame: Any) -> None:
        super().__init__(shards)
        self.dataset = dataset
        self._frame = frame

    def __reduce__(self) -> Any:
        return (list, (list(self),))

    def release(self) -> None:
        """Unpersist the Arrow copy Spark keeps for the dataset (after the load)."""
        frame, self._frame = self._frame, None
        if frame is not None:
            from raydp.spark.dataset import release_spark_recoverable

            release_spark_recoverable(frame)

    def __enter__(self) -> "SparkShards":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def dataset_shards(df: "DataFrame", workers: int, columns: Columns, *, input: str = "spark",
                   time: int = 0, check: bool = True, blocks: Optional[int] = None,
                   timeout: float = RAY_TIMEOUT) -> SparkShards:
    """Split ``df``'s mapped columns into one shard per timelypy worker, through Ray.

    The DataFrame's Spark must be a RayDP Spark (:func:`spark_on_ray`). Checks first: the
    schema against ``columns``, and (``check=True``, one Spark query) every row - null keys,
    NaN, null or non-integer diffs, bad ops, times before ``time`` - so a bad row fails here,
    on the driver, before any worker starts (:class:`SparkInputError` naming ``input``, the
    column, the row and the value). Then Spark writes the rows into Ray's object store as Arrow
    blocks (``blocks``; default: the DataFrame's partitions, at least one per worker), and
    ``streaming_split(workers, equal=False)`` hands every worker the blocks it pulls. Use the
    result in ``build`` (:func:`shard_collection`, :func:`feed_shard`) or in a session's
    dataflow, then :meth:`SparkShards.release` it.

    The conversion's Ray tasks (fetching blocks from the executors, reading their metadata)
    reserve no CPU, so it completes while Spark's executors and timelypy's workers hold every
    CPU; it waits for them at most ``timeout`` seconds (:class:`SparkConnectorError` naming
    what it waits for and Ray's free CPUs).
    """
    if workers < 1:
        raise ValueError(f"dataset_shards: workers must be >= 1, got {workers}")
    if not isinstance(columns, Columns):
        raise TypeError(f"columns must be a Columns mapping, got {type(columns).__name__}")
    if not is_spark_on_ray(df.sparkSession):
        raise SparkConnectorError(f"input {input!r}: the DataFrame's Spark does not run on Ray "
                                  f"(start it with spark_on_ray()); with a plain Spark use "
                                  f"timelypy.connectors.spark.load")
    _raydp()
    from raydp.spark.dataset import from_spark_recoverable

    def example() -> Optional[Dict[str, Any]]:  # a row to show in a schema error
        first = df.limit(1).collect()
        return first[0].asDict() if first else None
    reader = columns.reader(df.schema, input, example)
    frame = reader.select(df)
    bad = reader.bad_rows(frame, time) if check else []
    if bad:
        raise reader.refused(bad, "Nothing of it was loaded.")
    partitions = frame.rdd.getNumPartitions()
    wanted = blocks or max(partitions, workers)
    start = _time.monotonic()

    def convert() -> Tuple[Any, Any]:
        with _metadata_tasks_without_cpu():
            dataset = from_spark_recoverable(
                frame, parallelism=wanted if wanted != partitions else None)
        return dataset, dataset.streaming_split(workers, equal=False)
    dataset, iterators = _bounded(
        f"dataset_shards of input {input!r}", f"Spark's executors to write {wanted} Arrow "
        f"blocks into Ray's object store, Ray tasks (0 CPUs asked) to fetch them and Ray "
        f"Data's tasks to read their metadata ({_metadata_cpus()})", timeout, convert)
    log.info("dataset_shards: input %r in %d blocks for %d workers (%.2f s)", input, wanted,
             workers, _time.monotonic() - start)
    return SparkShards([Shard(i, workers, it, reader, time) for i, it in enumerate(iterators)],
                       dataset, frame)


class _ShardReader:
    """Reads a shard's Arrow batches in a thread into a queue of at most ``prefetch`` batches
    (bounded memory); :meth:`take` never blocks longer than asked."""

    _END = object()

    def __init__(self, shard: Shard, batch_rows: int, read_timeout: float, prefetch: int = 2
                 ) -> None:
        self.shard = shard
        self.batch_rows = batch_rows
        self.read_timeout = read_timeout
        self.last = _time.monotonic()
        self.queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, prefetch))
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"timelypy-shard-{shard.index}")
        self.thread.start()

    def _run(self) -> None:
        try:
            for batch in self.shard.iterator.iter_batches(batch_size=self.batch_rows,
                                                          batch_format="pyarrow",
                                                          prefetch_batches=1):
                if not self._put(batch):
                    return
            self._put(self._END)
        except BaseException as exc:  # noqa: BLE001 - handed to the worker
            self._put(exc)

    def _put(self, item: Any) -> bool:
        while not self.stopped.is_set():
            try:
                self.queue.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def take(self) -> Any:
        """The next batch, :attr:`_END`, or None if none came within :data:`_POLL` seconds;
        :class:`SparkConnectorError` if the reading failed or no batch came for
        ``read_timeout`` seconds."""
        shard = self.shard
        try:
            item = self.queue.get(timeout=_POLL)
        except queue.Empty:
            if _time.monotonic() - self.last > self.read_timeout:
                self.stop()
                raise SparkConnectorError(f"input {shard.input!r}: worker {shard.index} got no "
                                          f"batch of its shard within {self.read_timeout} s "
                                          f"(read from Ray's object store: {cpu_report()})")
            return None
        self.last = _time.monotonic()
        if isinstance(item, BaseException):
            raise SparkConnectorError(f"input {self.shard.input!r}: reading shard "
                                      f"{self.shard.index} from Ray failed: "
                                      f"{type(item).__name__}: {item}") from item
        return item

    def stop(self) -> None:
        self.stopped.set()


def _insert(session: Any, shard: Shard, batch: Any, sent: int) -> int:
    """Insert an Arrow batch's rows into ``session`` (an ``InputSession``); the rows used.
    A bad row raises :class:`SparkInputError`; nothing of its batch is inserted."""
    reader, at = shard.reader, shard.time
    try:
        records, diffs, times = reader.convert_table(batch, at)
    except BadRow as exc:
        raise reader.refused([exc.bad], f"Worker {shard.index} stopped there: the {sent} rows "
                                        f"of its shard before its batch were inserted.") from exc
    if times is None and at == session.time and all(d == 1 for d in diffs):
        session.insert_many(records)  # the common load: one copy of each row, now
    else:
        session.send_updates(zip(records, times or [at] * len(records), diffs))
    return len(records)


class ShardInput:
    """The input a shard feeds (see :func:`shard_collection`): every worker step inserts the
    next batch that is ready (a reader thread prefetches at most two); after the last batch the
    input closes by itself. Its ``close()`` (when ``build`` returns, or a session closes) waits
    for the rest of the shard rather than dropping it. Holds a capability at the shard's time
    until then, and reports none to stall checks (it advances by itself)."""

    def __init__(self, session: Any, shard: Shard, batch_rows: int, read_timeout: float) -> None:
        self.session = session
        self.shard = shard
        self.rows = 0  # rows inserted so far
        self.done = False  # the whole shard was read (the input is closed)
        self._reader = _ShardReader(shard, batch_rows, read_timeout)

    closed = property(lambda self: self.done, doc="The shard was read and the input closed.")

    def flush(self) -> None:
        """Insert the next ready batch (if any) and flush; close the input after the last."""
        try:
            batch = None if self.done else self._reader.take()
            if batch is not None and batch is not _ShardReader._END:
                self.rows += _insert(self.session, self.shard, batch, self.rows)
        except BaseException:
            self._reader.stop()
            raise
        if batch is _ShardReader._END:
            self.done = True
            self._reader.stop()
            self.session.close()
        self.session.flush()

    def close(self) -> None:
        """Let the rest of the shard in, then close (the worker keeps stepping meanwhile)."""

    def has_pending(self) -> bool:
        """Until the shard is read (so that a worker alone does not take the wait for Ray's
        next batch for a stall; :meth:`flush` paces the steps meanwhile), or records are
        buffered."""
        return not self.done or self.session.has_pending()

    def describe(self) -> str:
        """The input, its shard and progress (for stall diagnostics)."""
        return (f"{self.shard.input!r} shard {self.shard.index} at {self.shard.time!r} "
                f"({self.rows} rows, {'read' if self.done else 'reading'})")


def _check_batch_rows(batch_rows: int) -> None:
    if not isinstance(batch_rows, int) or isinstance(batch_rows, bool) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")


def shard_collection(scope: Any, shards: Sequence[Shard], name: Optional[str] = None, *,
                     batch_rows: int = DEFAULT_BATCH_ROWS,
                     read_timeout: float = DEFAULT_READ_TIMEOUT) -> Tuple[ShardInput, Any]:
    """A collection fed by this worker's shard (``shards[scope.worker.index]``): returns
    ``(input, collection)``. Every record is inserted at the shard's time (or its ``time``
    column's); the input closes once the shard is read, so a probe downstream passes that
    time when every worker has loaded its part. Call it in ``build`` of an
    ``execute(..., backend="ray")`` job or in a session's ``dataflow`` (same number of
    workers as shards). A worker holds about ``batch_rows`` * 3 rows of the shard at a time.
    A bad row fails the worker with :class:`SparkInputError` (rows already inserted stay).
    """
    from ..differential.collection import Collection
    from ..differential.input import InputSession

    _check_batch_rows(batch_rows)
    worker = scope.worker
    if len(shards) != worker.peers:
        raise SparkConnectorError(f"shard_collection: {len(shards)} shards for "
                                  f"{worker.peers} workers (make them with "
                                  f"dataset_shards(df, {worker.peers}, ...))")
    shard = shards[worker.index]
    name = name or shard.input
    handle, stream = scope.new_input(name, register=False)
    source = ShardInput(InputSession(handle, name), shard, batch_rows, read_timeout)
    worker.register_input(source)
    return source, Collection(scope, stream)


def feed_shard(worker: Any, session: Any, shard: Shard, *, batch_rows: int = DEFAULT_BATCH_ROWS,
               read_timeout: float = DEFAULT_READ_TIMEOUT) -> int:
    """Insert ``shard``'s rows into ``session`` (an input session of this worker's dataflow)
    batch by batch, flushing and stepping the worker between batches (bounded memory); returns
    the rows inserted. The session is neither advanced nor closed. Waits at most
    ``read_timeout`` seconds for any one batch."""
    _check_batch_rows(batch_rows)
    reader = _ShardReader(shard, batch_rows, read_timeout)
    rows = 0
    try:
        while True:
            batch = reader.take()
            if batch is _ShardReader._END:
                return rows
            if batch is not None:
                rows += _insert(session, shard, batch, rows)
                session.flush()
            worker.step()
    finally:
        reader.stop()


# ----------------------------------------------------------------------------- sinks
_ARROW_TYPES = {"tinyint": "int8", "smallint": "int16", "int": "int32", "bigint": "int64",
                "float": "float32", "double": "float64", "string": "string", "boolean": "bool_",
                "binary": "binary"}
_ALIASES = {"long": "bigint", "integer": "int", "short": "smallint", "byte": "tinyint",
            "bool": "boolean", "str": "string"}

_PYTHON_TYPES: Dict[str, Tuple[type, ...]] = {
    **{f"{u}int{n}": (int,) for u in ("", "u") for n in (8, 16, 32, 64)},
    "float": (float, int), "double": (float, int), "bool": (bool,), "string": (str,),
    "large_string": (str,), "binary": (bytes, bytearray), "large_binary": (bytes, bytearray)}
"""The Python types a column of each Arrow type takes (others are not checked here)."""

Schema = Union[str, "pa.Schema"]


def arrow_schema(schema: Schema) -> "pa.Schema":
    """``schema`` as a ``pyarrow.Schema``: one already, or Spark-style DDL such as
    ``"src bigint, dst bigint NOT NULL"`` (types: tinyint, smallint, int, bigint, float,
    double, string, boolean, binary, and long, integer, short, byte, bool, str)."""
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        return schema
    if not isinstance(schema, str):
        raise TypeError(f"schema must be a pyarrow.Schema or a DDL string, got "
                        f"{type(schema).__name__}")
    fields = []
    for part in (p.strip() for p in schema.split(",")):
        words = part.split()
        nullable = not (len(words) == 4 and [w.lower() for w in words[2:]] == ["not", "null"])
        if len(words) not in (2, 4) or (len(words) == 4 and nullable):
            raise ValueError(f"schema {schema!r}: {part!r} is not 'name type [NOT NULL]'")
        kind = _ALIASES.get(words[1].lower(), words[1].lower())
        if kind not in _ARROW_TYPES:
            raise ValueError(f"schema {schema!r}: column {words[0]!r} has type {words[1]!r}, "
                             f"not one of {', '.join(sorted(_ARROW_TYPES))}")
        fields.append(pa.field(words[0], getattr(pa, _ARROW_TYPES[kind])(), nullable=nullable))
    return pa.schema(fields)


def _table(rows: List[Tuple[Any, ...]], sources: List[Any], schema: "pa.Schema",
           order: List[str], where: str) -> "pa.Table":
    """An Arrow table of ``schema`` from ``rows`` whose values are in ``order``; every value is
    checked first (:class:`SparkOutputError` names the record of ``sources``, column, value)."""
    import pyarrow as pa

    if sorted(order) != sorted(schema.names):
        raise SparkOutputError(f"{where}: the schema's columns {schema.names} do not match the "
                               f"columns {order}")
    position = {name: i for i, name in enumerate(order)}
    arrays = []
    for field in schema:
        values = [r[position[field.name]] for r in rows]
        allowed = _PYTHON_TYPES.get(str(field.type))
        for value, record in zip(values, sources):
            if value is None and not field.nullable:
                raise SparkOutputError(f"{where}: column {field.name!r} is not nullable, but "
                                       f"record {show(record)} has null there")
            if value is not None and allowed is not None and (
                    not isinstance(value, allowed)
                    or (bool not in allowed and isinstance(value, bool))):
                raise SparkOutputError(f"{where}: column {field.name!r} has type {field.type}, "
                                       f"but record {show(record)} has {show(value)} of type "
                                       f"{type(value).__name__} there")
        arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def records_to_arrow(contents: Mapping[Any, int], schema: Schema,
                     columns: Optional[Columns] = None, *, count: Optional[str] = None,
                     where: str = "records") -> "pa.Table":
    """An Arrow table of ``schema`` from ``{record: count}`` (a collection's contents).

    Records are flattened into columns by ``columns`` (default: every schema column but
    ``count``, in order, as ``Columns([...])``). ``count=None``: a record of count n is n rows
    (a negative count is an error); ``count="n"``: one row per record, its count in column
    ``n``. Values are checked against their column's type: :class:`SparkOutputError` names the
    record, the column and the value.
    """
    schema = arrow_schema(schema)
    columns = columns or Columns([n for n in schema.names if n != count])
    rows, sources = [], []
    for record, n in contents.items():
        values = columns.flatten(record)
        if count is None and n < 0:
            raise SparkOutputError(f"{where}: record {show(record)} has count {n}: use "
                                   f"count='...' for negative counts")
        copies = 1 if count is not None else n
        rows.extend([values + ((n,) if count is not None else ())] * copies)
        sources.extend([record] * copies)
    return _table(rows, sources, schema, list(columns.names) + ([count] if count else []), where)


def view_to_dataset(view: Any, schema: Schema, columns: Optional[Columns] = None, *,
                    at: Any = None, count: Optional[str] = None,
                    timeout: float = RAY_TIMEOUT) -> Any:
    """A ``CollectionView``'s contents at ``at`` (default: the latest closed time) as a
    ``ray.data.Dataset`` of ``schema`` (see :func:`records_to_arrow` for ``columns`` and
    ``count``). Call ``view.refresh()`` first. Ray Data's task that reads the block's
    metadata reserves no CPU (beside Spark's executors and timelypy's workers none may be
    free); the call waits at most ``timeout`` seconds (:class:`SparkConnectorError` naming
    what it waits for and Ray's free CPUs)."""
    where = f"view of {view.capture!r}"
    table = records_to_arrow(view.contents(at), schema, columns, count=count, where=where)
    return _arrow_dataset(table, f"view_to_dataset of {view.capture!r}", timeout)


def changes_to_dataset(view: Any, schema: Schema, columns: Optional[Columns] = None, *,
                       time: str = "time", diff: str = "diff",
                       timeout: float = RAY_TIMEOUT) -> Any:
    """A ``CollectionView``'s consolidated changes as a ``ray.data.Dataset`` of ``schema``:
    the record's columns, then ``time`` and ``diff`` (integer columns). Bounded by
    ``timeout`` as :func:`view_to_dataset`."""
    schema = arrow_schema(schema)
    columns = columns or Columns([n for n in schema.names if n not in (time, diff)])
    changes = view.changes()
    rows = [columns.flatten(d) + (t, r) for d, t, r in changes]
    table = _table(rows, [d for d, _, _ in changes], schema, list(columns.names) + [time, diff],
                   f"changes of {view.capture!r}")
    return _arrow_dataset(table, f"changes_to_dataset of {view.capture!r}", timeout)


def dataset_to_spark(dataset: Any, spark: "SparkSession", *,
                     timeout: float = RAY_TIMEOUT) -> "DataFrame":
    """A Ray Dataset (of Arrow blocks) as a DataFrame of the RayDP Spark ``spark``
    (``dataset.to_spark(spark)``: the blocks go from Ray's object store to the executors when
    Spark reads them). Handing the blocks to RayDP's master waits at most ``timeout``
    seconds."""
    if not is_spark_on_ray(spark):
        raise SparkConnectorError("dataset_to_spark: the SparkSession does not run on Ray "
                                  "(RayDP): start it with spark_on_ray()")
    return _bounded("dataset_to_spark", "RayDP's master actor (0 CPUs asked) to take the "
                    "dataset's blocks", timeout, dataset.to_spark, spark)
