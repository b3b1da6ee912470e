"""Loads from Spark's executors straight to the workers: a DataFrame in shards, one per worker.

:func:`dataset_shards` turns a DataFrame of a Spark on Ray into a Ray Dataset split in one
:class:`Shard` per worker; inside ``build`` (or a session's ``dataflow``) each worker reads its
own shard, without the driver, through :func:`shard_collection` (an input that closes once the
shard is read) or :func:`feed_shard` (into an input session, stepping between batches).
"""

from __future__ import annotations

import logging
import queue
import threading
import time as _time
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
)

from .columns import (
    BadRow,
    Columns,
    RowReader,
    SparkConnectorError,
)
from .datasets import (
    RAY_TIMEOUT,
    bounded,
    cpu_report,
    is_spark_on_ray,
    metadata_cpus,
    metadata_tasks_without_cpu,
)
from .on_ray import require_raydp

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame

    from ...dataflow.scope import Scope
    from ...differential.collection import Collection
    from ...differential.input import InputSession
    from ...workers.worker import Worker

__all__ = [
    "dataset_shards",
    "SparkShards",
    "Shard",
    "shard_collection",
    "ShardInput",
    "feed_shard",
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_READ_TIMEOUT",
]

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 10_000
_POLL = 0.005  # seconds a step waits (at most) for a batch of its shard that is not ready yet
DEFAULT_READ_TIMEOUT = 300.0  # seconds a worker may wait for the next batch of its shard


class Shard(NamedTuple):
    """One timelypy worker's part of a DataFrame: a Ray Data iterator (of a
    ``streaming_split``) over the mapped columns, and the reader that turns rows into
    ``(record, diff, time)``. Picklable: it travels to the worker's Ray actor."""

    index: int  # type: ignore[assignment]  # the worker's number; shadows tuple.index
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
    require_raydp()
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
        with metadata_tasks_without_cpu():
            dataset = from_spark_recoverable(
                frame, parallelism=wanted if wanted != partitions else None
            )
        return dataset, dataset.streaming_split(workers, equal=False)

    dataset, iterators = bounded(
        f"dataset_shards of input {input!r}",
        f"Spark's executors to write {wanted} Arrow "
        f"blocks into Ray's object store, Ray tasks (0 CPUs asked) to fetch them and Ray "
        f"Data's tasks to read their metadata ({metadata_cpus()})",
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


def _insert(session: InputSession, shard: Shard, batch: Any, sent: int) -> int:
    """Insert an Arrow batch's rows into ``session`` (an ``InputSession``); the rows used.
    A bad row raises :class:`SparkInputError`; nothing of its batch is inserted."""
    reader, at = shard.reader, shard.time
    if at == session.time:
        parts = reader.column_parts(batch, at)
        if parts is not None:  # fixed-width (key, value) columns: one column message
            session.update_columns(*parts)
            return batch.num_rows
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

    def __init__(
        self, session: InputSession, shard: Shard, batch_rows: int, read_timeout: float
    ) -> None:
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
    scope: Scope,
    shards: Sequence[Shard],
    name: Optional[str] = None,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
) -> Tuple[ShardInput, "Collection"]:
    """A collection fed by this worker's shard (``shards[scope.worker.index]``): returns
    ``(input, collection)``. Every record is inserted at the shard's time (or its ``time``
    column's); the input closes once the shard is read, so a probe downstream passes that
    time when every worker has loaded its part. Call it in ``build`` of an
    ``execute(..., backend="ray")`` job or in a session's ``dataflow`` (same number of
    workers as shards). A worker holds about ``batch_rows`` * 3 rows of the shard at a time.
    A bad row fails the worker with :class:`SparkInputError` (rows already inserted stay).
    """
    from ...differential.collection import Collection
    from ...differential.input import InputSession

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
    worker: Worker,
    session: InputSession,
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
