"""A Spark column as event time: DataFrames and micro-batches into an event-time input.

``load(session, "bids", df, Columns(key="auction", value="price"), event_time="ts",
max_out_of_orderness=5_000)`` and ``ForeachBatchSink(..., event_time="ts", ...)`` put each row
in at its ``ts`` through a :class:`~timelypy.windows.EventTimeInput` (the Differential Dataflow
book's real-time streaming input): at its event time, or at the watermark if it came later than
``max_out_of_orderness`` allows, and the input advances to the watermark after each load or
micro-batch.

The event-time column may be a Spark ``timestamp`` (``TimestampType``), taken as integer
**milliseconds since the Unix epoch** (Spark's ``unix_millis``: the instant, whatever the
session's time zone), or an integer column, taken as it is (in the data's own unit). It is
converted in Spark, into a column of its own, so it need not be part of the record; a null
event time refuses the row.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, List, Optional, Tuple

from ...windows.event_time import EventTimeInput
from .columns import BadRow, Columns, RowReader, SparkInputError, require_pyspark

if TYPE_CHECKING:  # pragma: no cover - types only
    from pyspark.sql import DataFrame

__all__ = ["EVENT_TIME_COLUMN", "event_time_reader", "convert_all", "event_time_feed"]

EVENT_TIME_COLUMN = "__timelypy_event_time"
"""The column the event time is converted into (integer milliseconds for a timestamp)."""

INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")


def event_time_reader(
    df: "DataFrame", columns: Columns, event_time: str, input: str
) -> Tuple["DataFrame", RowReader]:
    """``df`` with its event-time column converted (:data:`EVENT_TIME_COLUMN`), and the reader
    of ``columns`` whose time is that column. :class:`SparkInputError` names the column if it
    is missing or of another type, or if ``columns`` has a time column of its own."""
    require_pyspark()
    from pyspark.sql import functions as F

    if not isinstance(columns, Columns):
        raise TypeError(f"columns must be a Columns mapping, got {type(columns).__name__}")
    if columns.time is not None:
        raise SparkInputError(
            f"input {input!r}: event_time={event_time!r} and Columns(time={columns.time!r}) "
            f"both give times: the event time decides, drop time=",
            input=input,
            column=columns.time,
        )
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    kind = types.get(event_time)
    if kind == "timestamp":
        converted = F.unix_millis(F.col(event_time))
    elif kind in INTEGER_TYPES:
        converted = F.col(event_time).cast("long")
    else:
        listing = ", ".join(f"{n} {t}" for n, t in types.items()) or "none"
        reason = "is not in the DataFrame" if kind is None else f"has type {kind}"
        raise SparkInputError(
            f"input {input!r}: event-time column {event_time!r} {reason}: it must be a timestamp "
            f"(taken as milliseconds since the epoch) or an integer (the DataFrame's columns: "
            f"{listing})",
            input=input,
            column=event_time,
            reason=reason,
        )
    timed = copy.copy(columns)
    timed.time = EVENT_TIME_COLUMN
    with_time = df.withColumn(EVENT_TIME_COLUMN, converted)

    def example() -> Any:
        rows = with_time.limit(1).collect()
        return rows[0].asDict() if rows else None

    return with_time, timed.reader(with_time.schema, input, example)


def convert_all(
    reader: RowReader, rows: "DataFrame", arrow_batches: Any
) -> Tuple[List[Any], List[int], List[Any]]:
    """Every row of ``rows`` (the reader's selection) as columns ``(records, diffs,
    event_times)``, read in Arrow batches; :class:`BadRow` for the first bad row (a null key or
    event time, NaN...)."""
    records: List[Any] = []
    diffs: List[int] = []
    times: List[Any] = []
    for table in arrow_batches(rows):
        r, d, t = reader.convert_table(table)
        if t is None:  # pragma: no cover - the reader has a time column
            raise BadRow(({}, EVENT_TIME_COLUMN, "no event time"))
        records += r
        diffs += d
        times += t
    return records, diffs, times


def event_time_feed(
    session: Any, input: str, feed: Optional[EventTimeInput], max_out_of_orderness: int
) -> EventTimeInput:
    """``feed`` if given (it must feed ``input``), else a new one on ``session``."""
    if feed is None:
        return EventTimeInput(session, input, max_out_of_orderness)
    if feed.input != input:
        raise ValueError(f"event_time: the feed given feeds input {feed.input!r}, not {input!r}")
    return feed
