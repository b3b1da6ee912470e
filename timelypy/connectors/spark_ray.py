"""Spark on Ray (RayDP): co-scheduled Spark, loads that bypass the driver, Ray Dataset sinks."""

from __future__ import annotations

import functools
import logging
import os
import queue
import sys
import threading
import time as _time
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from ..workers.launch.ray_start import ensure_ray
from .ray_data import (
    RAY_TIMEOUT,
    _bounded,
    _metadata_cpus,
    _metadata_tasks_without_cpu,
    _ray,
    arrow_schema,
    changes_to_dataset,
    cpu_report,
    dataset_to_spark,
    is_spark_on_ray,
    records_to_arrow,
    view_to_dataset,
)
from .spark import JAVA_OPTIONS, Columns
from .spark_columns import (
    INSTALL_HINT,
    BadRow,
    RowReader,
    SparkConnectorError,
    SparkUnavailableError,
    require_pyspark,
)

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "spark_on_ray",
    "stop_spark_on_ray",
    "is_spark_on_ray",
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
    "RAYDP_JAVA_OPTIONS",
    "RAYDP_SETTINGS",
]

log = logging.getLogger("timelypy.connectors.spark_ray")

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

DEFAULT_BATCH_ROWS = 10_000
_POLL = 0.005  # seconds a step waits (at most) for a batch of its shard that is not ready yet
DEFAULT_READ_TIMEOUT = 300.0  # seconds a worker may wait for the next batch of its shard
STOP_TIMEOUT = 120.0  # seconds stop_spark_on_ray waits for RayDP to stop
START_TIMEOUT = 120.0  # seconds spark_on_ray waits for RayDP and its executors to start


def _raydp() -> Any:
    """The ``raydp`` module (with pyspark and Ray), or :class:`SparkUnavailableError`."""
    require_pyspark()
    _ray()
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
    raydp, ray = _raydp(), _ray()
    with _State.lock:
        if _State.session is not None:
            raise SparkConnectorError(
                "spark_on_ray: a RayDP Spark started here runs (RayDP "
                "keeps one per process): stop it, or pass it as spark="
            )
        from pyspark.sql import SparkSession

        try:
            active = SparkSession.active()  # the active or default session
        except Exception:  # noqa: BLE001 - none
            active = None
        if active is not None and not is_spark_on_ray(active):
            raise SparkConnectorError(f"spark_on_ray: a plain Spark runs here: {_PLAIN_SPARK}")
        ensure_ray(address)
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        start = _time.monotonic()
        asked = (
            f"{executors} executor(s) of {executor_cores} CPU(s) and {executor_memory} "
            f"each ({executors * executor_cores} CPUs asked)"
        )
        try:
            session = _bounded(
                "spark_on_ray",
                asked,
                start_timeout,
                functools.partial(
                    raydp.init_spark,
                    app_name,
                    num_executors=executors,
                    executor_cores=executor_cores,
                    executor_memory=executor_memory,
                    configs=_settings(executors, executor_cores, configs, ray),
                ),
                option="start_timeout",
            )
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
            raise SparkConnectorError(
                f"stop_spark_on_ray: RayDP failed to stop: {type(errors[0]).__name__}: {errors[0]}"
            ) from errors[0]
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


def dataset_shards(
    df: "DataFrame",
    workers: int,
    columns: Columns,
    *,
    input: str = "spark",
    time: int = 0,
    check: bool = True,
    blocks: Optional[int] = None,
    timeout: float = RAY_TIMEOUT,
) -> SparkShards:
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
        raise SparkConnectorError(
            f"input {input!r}: the DataFrame's Spark does not run on Ray "
            f"(start it with spark_on_ray()); with a plain Spark use "
            f"timelypy.connectors.spark.load"
        )
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
                frame, parallelism=wanted if wanted != partitions else None
            )
        return dataset, dataset.streaming_split(workers, equal=False)

    dataset, iterators = _bounded(
        f"dataset_shards of input {input!r}",
        f"Spark's executors to write {wanted} Arrow "
        f"blocks into Ray's object store, Ray tasks (0 CPUs asked) to fetch them and Ray "
        f"Data's tasks to read their metadata ({_metadata_cpus()})",
        timeout,
        convert,
    )
    log.info(
        "dataset_shards: input %r in %d blocks for %d workers (%.2f s)",
        input,
        wanted,
        workers,
        _time.monotonic() - start,
    )
    return SparkShards(
        [Shard(i, workers, it, reader, time) for i, it in enumerate(iterators)], dataset, frame
    )


class _ShardReader:
    """Reads a shard's Arrow batches in a thread into a queue of at most ``prefetch`` batches
    (bounded memory); :meth:`take` never blocks longer than asked."""

    _END = object()

    def __init__(
        self, shard: Shard, batch_rows: int, read_timeout: float, prefetch: int = 2
    ) -> None:
        self.shard = shard
        self.batch_rows = batch_rows
        self.read_timeout = read_timeout
        self.last = _time.monotonic()
        self.queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, prefetch))
        self.stopped = threading.Event()
        self.thread = threading.Thread(
            target=self._run, daemon=True, name=f"timelypy-shard-{shard.index}"
        )
        self.thread.start()

    def _run(self) -> None:
        try:
            for batch in self.shard.iterator.iter_batches(
                batch_size=self.batch_rows, batch_format="pyarrow", prefetch_batches=1
            ):
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
                raise SparkConnectorError(
                    f"input {shard.input!r}: worker {shard.index} got no "
                    f"batch of its shard within {self.read_timeout} s "
                    f"(read from Ray's object store: {cpu_report()})"
                ) from None
            return None
        self.last = _time.monotonic()
        if isinstance(item, BaseException):
            raise SparkConnectorError(
                f"input {self.shard.input!r}: reading shard "
                f"{self.shard.index} from Ray failed: "
                f"{type(item).__name__}: {item}"
            ) from item
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
        raise reader.refused(
            [exc.bad],
            f"Worker {shard.index} stopped there: the {sent} rows "
            f"of its shard before its batch were inserted.",
        ) from exc
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
        return (
            f"{self.shard.input!r} shard {self.shard.index} at {self.shard.time!r} "
            f"({self.rows} rows, {'read' if self.done else 'reading'})"
        )


def _check_batch_rows(batch_rows: int) -> None:
    if not isinstance(batch_rows, int) or isinstance(batch_rows, bool) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")


def shard_collection(
    scope: Any,
    shards: Sequence[Shard],
    name: Optional[str] = None,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Tuple[ShardInput, Any]:
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
        raise SparkConnectorError(
            f"shard_collection: {len(shards)} shards for "
            f"{worker.peers} workers (make them with "
            f"dataset_shards(df, {worker.peers}, ...))"
        )
    shard = shards[worker.index]
    name = name or shard.input
    handle, stream = scope.new_input(name, register=False)
    source = ShardInput(InputSession(handle, name), shard, batch_rows, read_timeout)
    worker.register_input(source)
    return source, Collection(scope, stream)


def feed_shard(
    worker: Any,
    session: Any,
    shard: Shard,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> int:
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
