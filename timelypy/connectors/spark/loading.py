"""DataFrames into driver sessions, through the driver: loads and atomic epochs.

- :func:`load`: stream a DataFrame into an input, ``batch_rows`` at a time (the driver holds
  about one batch), flushing per batch.
- :func:`apply_changes`: a change DataFrame as one atomic epoch: validated in Spark first, then
  applied and the session advanced; a bad row refuses the whole DataFrame.
- :func:`arrow_batches`: a DataFrame's rows streamed to the driver as Arrow tables.

pyspark is imported inside the functions that need it: importing this module works without it.
"""

from __future__ import annotations

import gc
import logging
import socket
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from ...errors import SessionInputError, WorkerError
from ...windows.event_time import EventTimeInput
from ...workers.sessions.session import DataflowSession
from .columns import (
    BadRow,
    Columns,
    RowReader,
    SparkConnectorError,
    SparkInputError,
    require_pyspark,
)
from .event_time import event_time_feed, event_time_reader
from .hashes import column_owners

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame

__all__ = ["load", "apply_changes", "arrow_batches", "arrow_stream", "DEFAULT_BATCH_ROWS"]

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 50_000
"""How many rows a load or a change DataFrame sends per flush, by default."""


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


ARROW_STREAM_TIMEOUT = 600.0
"""How long :func:`arrow_stream` waits for Spark's next bytes, by default (seconds)."""


def arrow_stream(df: "DataFrame", timeout: float = ARROW_STREAM_TIMEOUT) -> Iterator[Any]:
    """The rows of ``df`` as Arrow record batches, in the order Spark's tasks finish (not the
    DataFrame's order), straight from Spark's JVM as ``toPandas`` with Arrow collects them
    (no Python workers, no per-batch pickling: several times less work than
    :func:`arrow_batches`). The driver holds one batch at a time; Spark's JVM holds the
    partitions done but not read yet. Waits at most ``timeout`` seconds for each next bytes.
    Where that road does not exist (Spark Connect, another pyspark), :func:`arrow_batches`."""
    started = _start_arrow_collect(df)
    if started is None:
        yield from (b for t in arrow_batches(df) for b in t.to_batches())
        return
    import pyarrow as pa
    from pyspark.errors.exceptions.captured import unwrap_spark_exception
    from pyspark.java_gateway import local_connect_and_auth
    from pyspark.serializers import UTF8Deserializer, read_int

    port, secret, server = started
    sockfile, sock = local_connect_and_auth(port, secret)
    sock.settimeout(timeout)
    try:
        yield from pa.ipc.open_stream(sockfile)
        count = read_int(sockfile)  # then the batches' order, or -1 and the JVM's error
        if count == -1:
            raise SparkConnectorError(
                f"arrow_stream: Spark failed: {UTF8Deserializer().loads(sockfile)}"
            )
        for _ in range(count):
            read_int(sockfile)
    except socket.timeout:
        raise SparkConnectorError(
            f"arrow_stream: no data from Spark for {timeout} s (a partition slower than "
            f"that? pass a larger timeout)"
        ) from None
    finally:
        sock.close()  # a reader that left: the JVM's writer fails instead of waiting
    with unwrap_spark_exception():
        server.getResult()  # Spark's error, if any; it has sent everything


def _start_arrow_collect(df: "DataFrame") -> Optional[Tuple[int, str, Any]]:
    """Start Spark's Arrow collect of ``df``: ``(port, secret, server)``; None where this
    pyspark or DataFrame has no such road."""
    try:
        from pyspark.errors.exceptions.captured import unwrap_spark_exception  # noqa: F401
        from pyspark.java_gateway import local_connect_and_auth  # noqa: F401
        from pyspark.serializers import UTF8Deserializer, read_int  # noqa: F401
        from pyspark.traceback_utils import SCCallSiteSync

        collect = df._jdf.collectAsArrowToPython
        context = df.sparkSession.sparkContext
    except (ImportError, AttributeError):
        return None
    with SCCallSiteSync(context):
        port, secret, server = collect()
    return int(port), str(secret), server


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
    source: Callable[["DataFrame"], Iterable[Any]] = arrow_batches,
) -> None:
    """Send the rows of ``rows`` to ``input`` (diffs times ``sign``) from Arrow batches
    (``source``: :func:`arrow_batches`, in the DataFrame's order, or :func:`arrow_stream`),
    flushing every ``batch_rows`` rows (the session holds at most that many); stop after
    ``limit`` rows. Raises :class:`BadRow` or the session's errors."""
    buffered = 0
    for table in source(rows):
        offset = 0
        while offset < table.num_rows:
            room = batch_rows - buffered
            if limit is not None:
                room = min(room, limit - progress.sent - buffered)
                if room <= 0:
                    break
            part = table.slice(offset, room)
            offset += part.num_rows
            with _collector_paused():
                buffered += _send_part(session, input, reader, part, time, progress, sign)
                if buffered >= batch_rows:
                    session.flush()
                    progress.sent += buffered
                    buffered = 0
    if buffered:
        session.flush()
        progress.sent += buffered


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for one batch of rows: a batch makes hundreds
    of thousands of tuples of plain values (no cycles; reference counting frees them), and a
    collector running every 700 of them, over everything alive, costs more than making them
    (about 3x for 10^6 nested records). It runs again after the batch, as before."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


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
    if isinstance(session, DataflowSession) and time is None:
        parts = reader.column_parts(part)
        if parts is not None:  # as columns: no tuple per row on the driver
            keys, values, diffs = parts
            if sign != 1:
                diffs = _negated(diffs, sign)
            try:
                session.update_columns(input, keys, values, diffs)
            except SessionInputError as exc:
                raise BadRow(
                    ({}, reader.columns.names[0], f"refused by the session: {exc}")
                ) from exc
            return part.num_rows
    records, diffs, times = reader.convert_columns(part)
    if sign != 1:
        diffs = sign * diffs if isinstance(diffs, int) else [sign * d for d in diffs]
    try:
        if isinstance(session, DataflowSession):
            owners = None
            if session.workers > 1 and len(records) == part.num_rows:
                owners = column_owners(
                    part.columns[: reader.width], reader.columns.shape, session.workers
                )
            # the reader's records are routable by construction: record types only, no NaN
            session.update_many(
                input,
                records,
                diffs,
                time if times is None else times,
                routable=True,
                owners=owners,
            )
        else:  # a wrapper of a session, maybe without the keyword
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


def _negated(diffs: Any, sign: int) -> Any:
    """``diffs`` (one int or an Arrow array) times ``sign``."""
    if isinstance(diffs, int):
        return sign * diffs
    import pyarrow.compute as pc

    return pc.multiply(diffs.cast("int64"), sign)


def _timeout(session: DataflowSession) -> float:
    """How long a load waits for Spark's next bytes: the session's timeout."""
    timeout = getattr(session, "timeout", None)
    return float(timeout) if isinstance(timeout, (int, float)) else ARROW_STREAM_TIMEOUT


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
    event_time: Optional[str] = None,
    max_out_of_orderness: int = 0,
    feed: Optional[EventTimeInput] = None,
) -> int:
    """Stream ``df``'s rows into the session's ``input`` as records per ``columns``, at
    ``time`` (default: the input's time; a ``time`` column of ``columns`` wins), ``batch_rows``
    rows per flush; returns the number of rows sent. The driver holds about one batch at a
    time. The session is not advanced. Not atomic: a bad row raises
    :class:`SparkInputError` saying how many rows before it were applied (use
    :func:`apply_changes` for all or nothing). Updates already buffered in the session are
    flushed with the first batch.

    With ``event_time`` (a timestamp column, as integer milliseconds since the epoch, or an
    integer column), each row goes in at its event time through an
    :class:`~timelypy.windows.EventTimeInput` with ``max_out_of_orderness`` (or the ``feed``
    given, to keep its watermark across loads), and the input advances to the watermark after
    each batch (see :mod:`.event_time`)."""
    _check_batch_rows(batch_rows)
    if event_time is not None:
        timed = event_time_feed(session, input, feed, max_out_of_orderness)
        return _load_at_event_time(timed, df, columns, event_time, batch_rows)
    reader = _reader(df, columns, input)
    progress = _Progress()
    try:
        _stream(
            session,
            input,
            reader,
            reader.select(df),
            batch_rows,
            time,
            progress,
            source=lambda rows: arrow_stream(rows, _timeout(session)),
        )
    except BadRow as exc:
        session.discard()
        raise reader.refused(
            [exc.bad],
            f"load stopped there: the {progress.sent} rows before "
            f"its batch were applied, the rest not.",
        ) from exc
    log.info("load: %d rows into input %r", progress.sent, input)
    return progress.sent


def _load_at_event_time(
    feed: EventTimeInput, df: "DataFrame", columns: Columns, event_time: str, batch_rows: int
) -> int:
    """:func:`load` with ``event_time``: each Arrow slice pushed as columns, then the input
    advanced to the watermark."""
    with_time, reader = event_time_reader(df, columns, event_time, feed.input)
    sent = 0
    try:
        for table in arrow_batches(reader.select(with_time)):
            for offset in range(0, table.num_rows, batch_rows):
                records, diffs, times = reader.convert_table(table.slice(offset, batch_rows))
                try:
                    feed.push_columns(records, times or [], diffs)
                except SessionInputError as exc:
                    feed.session.discard()
                    raise BadRow(
                        (
                            {"record": exc.value},
                            reader.columns.names[0],
                            f"refused by the session: {exc}",
                        )
                    ) from exc
                sent += len(records)
    except BadRow as exc:
        raise reader.refused(
            [exc.bad],
            f"load stopped there: the {sent} rows before its batch were applied, the rest not.",
        ) from exc
    log.info("load: %d rows into input %r at event time %r", sent, feed.input, event_time)
    return sent


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
    items = reader.convert_rows(rows, now, max_errors)
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
