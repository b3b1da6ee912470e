"""Spark DataFrames into and out of driver sessions: loads, atomic epochs, foreachBatch, views.

The plain PySpark path (docs/spark.md): the DataFrame's rows reach the session's workers
through the driver, in bounded batches.

- :class:`Columns`: which columns make a record (and its key), the diff or op, the time.
- :func:`local_spark`: a local Spark with the settings this machine needs (Java 17 flags, this
  Python for the executors, Arrow on, UI off, loopback). Any existing ``SparkSession`` works
  everywhere else.
- :func:`load`: stream a DataFrame into an input, ``batch_rows`` at a time (the driver holds
  about one batch), flushing per batch.
- :func:`apply_changes`: a change DataFrame as one atomic epoch: validated in Spark first, then
  applied and the session advanced; a bad row refuses the whole DataFrame.
- :class:`ForeachBatchSink`: ``writeStream.foreachBatch(sink)``: each micro-batch one epoch,
  exactly once per ``batch_id``.
- :class:`CollectionView`: a capture's changes accumulated on the driver, back to Spark as
  DataFrames with a declared schema.

pyspark is imported inside the functions that need it: importing this module works without it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time as _time
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from ...errors import SessionInputError, WorkerError
from ...workers.sessions.session import DataflowSession
from .columns import (
    INSTALL_HINT,
    BadRow,
    Columns,
    RowReader,
    SparkConnectorError,
    SparkInputError,
    SparkOutputError,
    SparkUnavailableError,
    require_pyspark,
)
from .view import CollectionView

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "Columns",
    "local_spark",
    "load",
    "arrow_batches",
    "apply_changes",
    "ForeachBatchSink",
    "CollectionView",
    "SparkConnectorError",
    "SparkInputError",
    "SparkOutputError",
    "SparkUnavailableError",
    "JAVA_OPTIONS",
    "SPARK_SETTINGS",
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

DEFAULT_BATCH_ROWS = 50_000


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


# ----------------------------------------------------------------------------- into sessions
def _reader(df: "DataFrame", columns: Columns, input: str) -> RowReader:
    """Check ``columns`` against ``df``'s schema (naming the first row in an error)."""
    require_pyspark()
    if not isinstance(columns, Columns):
        raise TypeError(f"columns must be a Columns mapping, got {type(columns).__name__}")

    def example() -> Optional[Dict[str, Any]]:
        first = df.limit(1).collect()
        return first[0].asDict() if first else None

    return columns.reader(df.schema, input, example)


class _Progress:
    """How many rows a stream sent (flushed) so far, and the latest time it used."""

    def __init__(self) -> None:
        self.sent = 0
        self.latest: Optional[int] = None


def _to_ipc(batches: Iterable[Any]) -> Iterator[Any]:
    """In Spark's Python workers (``mapInArrow``): each Arrow batch as one row of Arrow IPC
    bytes, so that the driver receives whole batches through ``toLocalIterator``."""
    import pyarrow as pa

    for batch in batches:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        yield pa.RecordBatch.from_pydict({"ipc": [sink.getvalue().to_pybytes()]})


def arrow_batches(df: "DataFrame") -> Iterator[Any]:
    """The rows of ``df`` as Arrow tables, streamed to the driver one partition at a time
    (``mapInArrow`` packs Spark's Arrow batches, ``toLocalIterator`` fetches them): the driver
    holds about one partition, Spark's JVM one more. The public road from Spark's executors to
    the driver in Arrow (``toPandas`` and ``toArrow`` collect the whole DataFrame)."""
    import pyarrow as pa

    packed = df.mapInArrow(_to_ipc, "ipc binary")
    for (blob,) in packed.toLocalIterator(prefetchPartitions=False):
        yield pa.ipc.open_stream(blob).read_all()


def _stream(
    session: DataflowSession,
    input: str,
    reader: RowReader,
    rows: "DataFrame",
    batch_rows: int,
    time: Optional[int],
    progress: _Progress,
    sign: int = 1,
    limit: Optional[int] = None,
) -> None:
    """Send the rows of ``rows`` to ``input`` (diffs times ``sign``) from Arrow batches
    (:func:`arrow_batches`), flushing every ``batch_rows`` rows (the session holds at most
    that many); stop after ``limit`` rows. Raises :class:`BadRow` or the session's errors."""
    buffered = 0
    for table in arrow_batches(rows):
        offset = 0
        while offset < table.num_rows:
            room = batch_rows - buffered
            if limit is not None:
                room = min(room, limit - progress.sent - buffered)
                if room <= 0:
                    break
            part = table.slice(offset, room)
            offset += part.num_rows
            buffered += _send_part(session, input, reader, part, time, progress, sign)
            if buffered >= batch_rows:
                session.flush()
                progress.sent += buffered
                buffered = 0
    if buffered:
        session.flush()
        progress.sent += buffered


def _send_part(
    session: DataflowSession,
    input: str,
    reader: RowReader,
    part: Any,
    time: Optional[int],
    progress: _Progress,
    sign: int,
) -> int:
    """Buffer one Arrow slice's rows in the session; the number of updates buffered."""
    records, diffs, times = reader.convert_table(part)
    if sign != 1:
        diffs = [sign * d for d in diffs]
    try:
        session.update_many(input, records, diffs, time if times is None else times)
    except SessionInputError as exc:
        raise BadRow(
            ({"record": exc.value}, reader.columns.names[0], f"refused by the session: {exc}")
        ) from exc
    if times:
        latest = max((t for t in times if t is not None), default=None)
    else:
        latest = time if records else None
    if latest is not None and (progress.latest is None or latest > progress.latest):
        progress.latest = latest
    return len(records)


def _check_batch_rows(batch_rows: int) -> None:
    if not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows must be a positive int, got {batch_rows!r}")


def load(
    session: DataflowSession,
    input: str,
    df: "DataFrame",
    columns: Columns,
    *,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    time: Optional[int] = None,
) -> int:
    """Stream ``df``'s rows into the session's ``input`` as records per ``columns``, at
    ``time`` (default: the input's time; a ``time`` column of ``columns`` wins), ``batch_rows``
    rows per flush; returns the number of rows sent. The driver holds about one batch at a
    time. The session is not advanced. Not atomic: a bad row raises
    :class:`SparkInputError` saying how many rows before it were applied (use
    :func:`apply_changes` for all or nothing). Updates already buffered in the session are
    flushed with the first batch."""
    _check_batch_rows(batch_rows)
    reader = _reader(df, columns, input)
    progress = _Progress()
    try:
        _stream(session, input, reader, reader.select(df), batch_rows, time, progress)
    except BadRow as exc:
        session.discard()
        raise reader.refused(
            [exc.bad],
            f"load stopped there: the {progress.sent} rows before "
            f"its batch were applied, the rest not.",
        ) from exc
    log.info("load: %d rows into input %r", progress.sent, input)
    return progress.sent


def apply_changes(
    session: DataflowSession,
    input: str,
    df: "DataFrame",
    columns: Columns,
    *,
    advance: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    persist: bool = True,
    max_errors: int = 5,
) -> int:
    """Apply a change DataFrame to ``input`` as one atomic epoch; returns the number of rows.

    Every row is checked before anything is sent: null keys (unless ``null_keys="drop"``), NaN
    in a record column, null diff, unknown op, null time, a time behind the session's time. If
    any row is bad, :class:`SparkInputError` names the column, the row and the reason (up to
    ``max_errors`` bad rows in ``.rows``) and nothing is applied. Otherwise the rows are applied
    (all at the session's time, or each at its ``time`` column's) and, if ``advance``, the
    session advances to one past the latest time used, so the changes form one epoch.

    A DataFrame of at most ``batch_rows`` rows is read with one Spark job and checked on the
    driver. A larger one is checked by one Spark query (collecting only the bad rows), then
    streamed ``batch_rows`` per flush; ``persist`` caches its mapped columns in Spark meanwhile
    so both passes see the same rows. Should the session refuse a row while streaming, the rows
    already sent are retracted at the same times (nothing of the DataFrame remains) and the
    error is raised. Updates already buffered in the session are flushed first, on their own.
    """
    _check_batch_rows(batch_rows)
    reader = _reader(df, columns, input)
    if session.pending:
        session.flush()
    now = session.time
    if not isinstance(now, int):
        raise SparkInputError(
            f"input {input!r}: apply_changes needs integer session times, the "
            f"session is at {now!r}",
            input=input,
            value=now,
        )
    rows = reader.select(df)
    small = rows.limit(batch_rows + 1).collect()
    if len(small) <= batch_rows:
        latest = _apply_collected(session, input, reader, small, now, max_errors)
        sent = len(small)
    else:
        sent, latest = _apply_streamed(
            session, input, reader, rows, now, batch_rows, persist, max_errors
        )
    if advance:
        session.advance_to(max(now, latest if latest is not None else now) + 1)
    return sent


def _apply_collected(
    session: DataflowSession,
    input: str,
    reader: RowReader,
    rows: List[Any],
    now: int,
    max_errors: int,
) -> Optional[int]:
    """Check every collected row, then send them all in one flush; the latest time used."""
    items, bad = [], []
    for row in rows:
        try:
            item = reader.convert(row, now)
        except BadRow as exc:
            bad.append(exc.bad)
            if len(bad) >= max_errors:
                break
            continue
        if item is not None:
            items.append((item, row))
    if bad:
        raise reader.refused(bad)
    latest = None
    for (record, diff, t), row in items:
        try:
            session.update(input, record, diff, t)
        except SessionInputError as exc:
            session.discard()
            raise reader.refused(
                [(reader.row_dict(row), reader.columns.names[0], f"refused by the session: {exc}")]
            ) from exc
        latest = t if t is not None and (latest is None or t > latest) else latest
    try:
        session.flush()  # atomic: a refusal leaves nothing of it applied
    except SessionInputError as exc:
        session.discard()
        raise reader.refused(
            [({"record": exc.value}, reader.columns.names[0], f"refused by the session: {exc}")]
        ) from exc
    return latest


def _apply_streamed(
    session: DataflowSession,
    input: str,
    reader: RowReader,
    rows: "DataFrame",
    now: int,
    batch_rows: int,
    persist: bool,
    max_errors: int,
) -> Tuple[int, Optional[int]]:
    """Check the rows in Spark, then stream them (retracting them again on a failure)."""
    if persist:
        rows = rows.persist()
    try:
        bad = reader.bad_rows(rows, now, max_errors)
        if bad:
            raise reader.refused(bad)
        progress = _Progress()
        try:
            _stream(session, input, reader, rows, batch_rows, None, progress)
        except BaseException as exc:
            _roll_back(session, input, reader, rows, batch_rows, progress, exc)
            if isinstance(exc, BadRow):
                raise reader.refused(
                    [exc.bad],
                    f"The whole DataFrame was refused: the "
                    f"{progress.sent} rows sent before it were "
                    f"retracted.",
                ) from exc
            raise
    finally:
        if persist:
            rows.unpersist()
    return progress.sent, progress.latest


def _roll_back(
    session: DataflowSession,
    input: str,
    reader: RowReader,
    rows: "DataFrame",
    batch_rows: int,
    progress: _Progress,
    cause: BaseException,
) -> None:
    """Retract the ``progress.sent`` rows already applied (same records, same times, negated
    diffs), so that nothing of the DataFrame remains. Impossible once a worker failed."""
    session.discard()
    if not progress.sent:
        return
    if isinstance(cause, WorkerError):
        log.error(
            "apply_changes: input %r: a worker failed after %d rows; the session cannot go on",
            input,
            progress.sent,
        )
        return
    undo = _Progress()
    try:
        _stream(session, input, reader, rows, batch_rows, None, undo, sign=-1, limit=progress.sent)
    except Exception as exc:
        session.discard()
        raise SparkConnectorError(
            f"apply_changes: input {input!r}: {progress.sent} rows were applied before "
            f"{type(cause).__name__}: {cause}; retracting them failed after {undo.sent} rows "
            f"({type(exc).__name__}: {exc}): the input holds part of the DataFrame"
        ) from exc
    log.warning(
        "apply_changes: input %r: retracted the %d rows sent before %s",
        input,
        undo.sent,
        type(cause).__name__,
    )


# ----------------------------------------------------------------------------- streaming
class ForeachBatchSink:
    """``query = df.writeStream.foreachBatch(ForeachBatchSink(session, "edges", columns))``:
    each micro-batch becomes one epoch of ``input`` (:func:`apply_changes` with
    ``advance=True``; then, if ``probe`` is given, a wait until the probe passed it, at most
    ``wait_timeout`` seconds, default the session's timeout).

    Exactly once: a ``batch_id`` at or below the last one applied is a replay (Spark replays a
    micro-batch after a failure) and is ignored, logged at INFO (listed in :attr:`ignored`);
    ids may jump upward. ``last_batch_id`` starts from a known point (a query resumed from a
    checkpoint while the session kept its state). A refused micro-batch raises
    :class:`SparkInputError` (the query fails; nothing of the batch was applied, and a replay
    of it is tried again). Spark hands the caller only a ``StreamingQueryException`` with the
    error's text: the sink keeps the exception itself in :attr:`last_error` (with
    ``batch_id`` set on it), so ``raise sink.last_error from exc`` after the query failed
    gives back the typed error and its fields. Calls are serialised by :attr:`lock` (Spark
    calls the sink from a thread of its own: hold ``sink.lock`` to use the session from another
    thread while a query runs). :attr:`latencies` maps each applied batch id to its seconds
    from call to return, :attr:`epochs` to the session's time when it was applied,
    :attr:`rows` to its row count.
    """

    def __init__(
        self,
        session: DataflowSession,
        input: str,
        columns: Columns,
        probe: Optional[str] = None,
        *,
        wait_timeout: Optional[float] = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        persist: bool = True,
        last_batch_id: Optional[int] = None,
    ) -> None:
        _check_batch_rows(batch_rows)
        self.session = session
        self.input = input
        self.columns = columns
        self.probe = probe
        self.wait_timeout = wait_timeout
        self.batch_rows = batch_rows
        self.persist = persist
        self.last_batch_id = last_batch_id
        self.latencies: Dict[int, float] = {}
        self.epochs: Dict[int, int] = {}
        self.rows: Dict[int, int] = {}
        self.ignored: List[int] = []
        self.last_error: Optional[BaseException] = None
        """The exception the last failed micro-batch raised (a :class:`SparkInputError` for a
        refused one, with ``batch_id``; the session's own errors as they are); None before
        any failure and again once a later micro-batch is applied."""
        self.lock = threading.RLock()
        """Held while a micro-batch is applied."""

    def __call__(self, df: "DataFrame", batch_id: int) -> None:
        """Apply micro-batch ``batch_id`` (``df``) as one epoch, unless it was applied."""
        batch_id = int(batch_id)
        with self.lock:
            if self.last_batch_id is not None and batch_id <= self.last_batch_id:
                log.info(
                    "foreachBatch sink for input %r: micro-batch %d replayed (last applied "
                    "%d): ignored",
                    self.input,
                    batch_id,
                    self.last_batch_id,
                )
                self.ignored.append(batch_id)
                return
            start = _time.monotonic()
            epoch = self.session.time
            try:
                try:
                    rows = apply_changes(
                        self.session,
                        self.input,
                        df,
                        self.columns,
                        advance=True,
                        batch_rows=self.batch_rows,
                        persist=self.persist,
                    )
                except SparkInputError as exc:
                    refused = SparkInputError(
                        f"micro-batch {batch_id}: {exc}",
                        input=exc.input,
                        column=exc.column,
                        row=exc.row,
                        value=exc.value,
                        reason=exc.reason,
                        rows=exc.rows,
                    )
                    refused.batch_id = batch_id
                    raise refused from exc
                self.last_batch_id = batch_id
                self.epochs[batch_id] = epoch
                self.rows[batch_id] = rows
                if self.probe is not None:
                    self.session.wait(self.probe, timeout=self.wait_timeout)
            except BaseException as exc:
                self.last_error = exc  # Spark passes on only its text: keep the typed error
                raise
            self.last_error = None
            self.latencies[batch_id] = _time.monotonic() - start
            log.debug(
                "foreachBatch sink for input %r: micro-batch %d, %d rows, epoch %r, %.3f s",
                self.input,
                batch_id,
                rows,
                epoch,
                self.latencies[batch_id],
            )

    def __repr__(self) -> str:
        return (
            f"ForeachBatchSink(input={self.input!r}, last_batch_id={self.last_batch_id}, "
            f"applied={len(self.latencies)}, ignored={len(self.ignored)})"
        )
