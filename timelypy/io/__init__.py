"""Files in and out: CSV, JSON Lines and Parquet sources and sinks, a watched directory, stdio.

>>> import timelypy.io as tio

Sources (each file, or each batch of stdin, is one atomic epoch: parsed and checked whole, its
rows inserted at one time, the input advanced past it; a bad row raises
:class:`FileInputError` naming the file, line and column, and nothing of that file is applied):

- formats: :class:`Csv`, :class:`JsonLines`, :class:`Parquet` (pyarrow, imported when used),
  :func:`format_for` (by suffix);
- into a driver session: :func:`load_files`, :func:`load_rows`, :func:`watch_directory` (new
  files of a directory, each once, the files taken kept in a :class:`WatchState`),
  :func:`feed_stdin`;
- inside ``build(worker)``: :func:`feed_files` (file ``k`` read by worker ``k % peers``);
- at event time (``event_time="column"`` of :func:`load_files` and :func:`watch_directory`):
  each row at its column's event time, the input at a watermark (:mod:`.event_time`).

Sinks: :class:`ChangeWriter`, :func:`write_changes`, :func:`write_contents`,
:func:`write_stdout`.
"""

from __future__ import annotations

from .event_time import to_event_time, with_event_time
from .formats import (
    Csv,
    FileFormat,
    FileInputError,
    FormatUnavailableError,
    JsonLines,
    Parquet,
    Rows,
    format_for,
    parse_text,
)
from .sinks import ChangeWriter, write_changes, write_contents
from .sources import feed_files, load_files, load_rows, read_rows
from .stdio import feed_stdin, read_batches, write_stdout
from .watch import DirectoryWatcher, WatchState, files_in, is_temporary, watch_directory

__all__ = [
    "Csv",
    "JsonLines",
    "Parquet",
    "FileFormat",
    "Rows",
    "format_for",
    "parse_text",
    "FileInputError",
    "FormatUnavailableError",
    "read_rows",
    "load_rows",
    "load_files",
    "feed_files",
    "DirectoryWatcher",
    "WatchState",
    "watch_directory",
    "files_in",
    "is_temporary",
    "read_batches",
    "feed_stdin",
    "write_stdout",
    "ChangeWriter",
    "write_changes",
    "write_contents",
    "to_event_time",
    "with_event_time",
]
