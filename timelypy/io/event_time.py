"""Event time from files: a column of each row as its event time, into an event-time input.

``load_files(session, "clicks", paths, event_time="ts", max_out_of_orderness=5)`` (and
:func:`~timelypy.io.watch.watch_directory` likewise) reads each file whole as usual, takes the
column ``ts`` of every row as that record's event time, and pushes the records through a
:class:`~timelypy.windows.EventTimeInput`: each goes in at its event time (or at the watermark,
if it came too late), and after each file the input advances to the watermark, ``max(event
times seen) - max_out_of_orderness``. The record itself is shaped as the format says (its
``columns``, ``schema`` or ``record``); the event-time column may be part of it or not.

Event-time values (:func:`to_event_time`): ints as they are (in the unit of the data), strings
of digits as ints, ISO 8601 timestamps (``2024-05-01T12:00:00.250Z``, also with an offset) and
``datetime`` values (Parquet timestamp columns) as integer **milliseconds since the Unix
epoch**; a timestamp without a zone is taken as UTC. A ``date`` is its midnight UTC. Anything
else (floats with a fraction, bools, empty values) refuses the file with a
:class:`~timelypy.io.formats.FileInputError` naming the line, as any bad value does.
"""

from __future__ import annotations

import copy
import datetime as _dt
import math
import numbers
from typing import Any, Dict, Optional

from ..errors import SessionInputError
from ..windows.event_time import EventTimeError, EventTimeInput
from .formats import FileFormat, FileInputError, Rows

__all__ = ["to_event_time", "with_event_time", "push_rows", "event_time_feed"]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _millis(moment: _dt.datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def to_event_time(value: Any) -> int:
    """An event-time value of a file as an int: ints as they are, digit strings as ints, ISO
    timestamps and datetimes as milliseconds since the epoch (UTC when no zone is given).

    >>> from timelypy.io.event_time import to_event_time
    >>> to_event_time("1970-01-01T00:00:01.5Z"), to_event_time(" 42 ")
    (1500, 42)
    """
    if isinstance(value, bool):
        raise ValueError("a bool is not an event time")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        raise ValueError("a float with a fraction is not an event time (give ints or timestamps)")
    if isinstance(value, _dt.datetime):
        return _millis(value)
    if isinstance(value, _dt.date):
        return _millis(_dt.datetime(value.year, value.month, value.day))
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("+-").isdigit():
            return int(text)
        if text[-1:] in ("Z", "z"):
            text = text[:-1] + "+00:00"
        try:
            return _millis(_dt.datetime.fromisoformat(text))
        except ValueError:
            raise ValueError("neither an integer nor an ISO 8601 timestamp") from None
    raise ValueError(f"a {type(value).__name__} is not an event time")


def with_event_time(fmt: FileFormat, column: str) -> FileFormat:
    """A copy of ``fmt`` whose records are ``(record, event_time)``: the record as ``fmt``
    shapes it, and :func:`to_event_time` of the row's ``column``. A missing or bad value
    refuses the file (:class:`~timelypy.io.formats.FileInputError`, with the line)."""
    if not isinstance(column, str) or not column:
        raise ValueError(f"event_time must name a column, got {column!r}")
    shaped = copy.copy(fmt)
    inner = fmt.record

    def record(row: Dict[str, Any]) -> Any:
        if column not in row or row[column] is None or row[column] == "":
            raise ValueError(f"no event time in column {column!r}")
        try:
            at = to_event_time(row[column])
        except ValueError as exc:
            raise ValueError(
                f"column {column!r}: {row[column]!r} is not an event time ({exc})"
            ) from None
        if inner is not None:
            return inner(row), at
        names = fmt.record_columns(list(row))
        for name in names:
            value = row.get(name)
            if value is None or isinstance(value, float) and math.isnan(value):
                raise ValueError(f"column {name!r}: no value ({value!r}); records hold no nulls")
        value = row[names[0]] if fmt.scalar else tuple(row[name] for name in names)
        return value, at

    shaped.record = record
    return shaped


def event_time_feed(
    session: Any,
    input: str,
    feed: Optional[EventTimeInput],
    max_out_of_orderness: int,
) -> EventTimeInput:
    """``feed`` if given (it must feed ``input``), else a new one on ``session``."""
    if feed is None:
        return EventTimeInput(session, input, max_out_of_orderness)
    if feed.input != input:
        raise ValueError(f"event_time: the feed given feeds input {feed.input!r}, not {input!r}")
    return feed


def push_rows(feed: EventTimeInput, rows: Rows) -> int:
    """Push the ``(record, event_time)`` rows of one file (read through
    :func:`with_event_time`) into ``feed`` in one flush (atomic, as a file's epoch is), then
    advance the input to the watermark. Returns the time the input is at. A record the
    session refuses raises
    :class:`~timelypy.io.formats.FileInputError` naming the file."""
    try:
        feed.push_columns(
            [record for record, _ in rows.records], [at for _, at in rows.records], rows.diffs
        )
    except (SessionInputError, EventTimeError) as exc:
        raise FileInputError(
            f"{rows.source}: refused at event time ({type(exc).__name__}: {exc})",
            path=rows.source,
            value=getattr(exc, "value", None),
        ) from exc
    return feed.advanced
