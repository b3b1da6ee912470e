"""stdin and stdout for pipelines: batches of JSON lines or CSV rows in, changes out.

``cat changes.jsonl | timelypy run program.py`` with a program that calls
:func:`feed_stdin` and :func:`write_stdout`. On stdin a blank line ends a batch (and so does
the end of the input, or ``batch_lines`` lines); each batch is one atomic epoch, checked whole
before it is sent: a bad row raises :class:`~timelypy.io.formats.FileInputError` naming
``<stdin>``, the line and the column, and nothing of that batch is applied. For CSV, the first
line is the header (unless the format says ``header=False``) and holds for every batch.
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any, Iterator, List, Optional, Sequence, Tuple

from .formats import Csv, FileFormat, JsonLines, Rows
from .sinks import ChangeWriter
from .sources import load_rows

if TYPE_CHECKING:
    from ..workers.sessions.session import DataflowSession

__all__ = ["read_batches", "feed_stdin", "write_stdout"]


def _chunks(
    stream: IO[str], batch_lines: Optional[int], skip: int
) -> Iterator[Tuple[int, List[str]]]:
    """(number of the first line, the lines) of each batch."""
    lines: List[str] = []
    first = skip + 1
    for number, text in enumerate(stream, skip + 1):
        if not text.strip():
            if lines:
                yield first, lines
            lines, first = [], number + 1
            continue
        lines.append(text)
        if batch_lines is not None and len(lines) >= batch_lines:
            yield first, lines
            lines, first = [], number + 1
    if lines:
        yield first, lines


def read_batches(
    fmt: Optional[FileFormat] = None,
    stream: Optional[IO[str]] = None,
    batch_lines: Optional[int] = None,
    source: str = "<stdin>",
) -> Iterator[Rows]:
    """Batches of rows from ``stream`` (default ``sys.stdin``) in a line format (default
    :class:`~timelypy.io.formats.JsonLines`), each parsed and checked whole."""
    fmt = fmt if fmt is not None else JsonLines()
    if not isinstance(fmt, (Csv, JsonLines)):
        raise ValueError(
            f"read_batches: {type(fmt).__name__} is not a line format (Csv, JsonLines)"
        )
    stream = stream if stream is not None else sys.stdin
    skip = 0
    header: Sequence[str] = ()
    if isinstance(fmt, Csv) and fmt.header:
        header_line = stream.readline()
        if not header_line:
            return
        header, skip = (header_line,), 1
    for first, lines in _chunks(stream, batch_lines, skip):
        if header:
            rows = fmt.parse(list(header) + lines, source, first - 1)
        else:
            rows = fmt.parse(lines, source, first)
        yield rows


def feed_stdin(
    session: DataflowSession,
    input: str,
    fmt: Optional[FileFormat] = None,
    stream: Optional[IO[str]] = None,
    batch_lines: Optional[int] = None,
    wait: Optional[str] = None,
    timeout: Optional[float] = None,
) -> List[Any]:
    """Load each batch of ``stream`` (default stdin) into ``input`` as one epoch; returns the
    time of each. With ``wait`` (a probe's name), waits after each batch
    (``session.wait(wait, timeout=timeout)``)."""
    times = []
    for rows in read_batches(fmt, stream, batch_lines):
        times.append(load_rows(session, input, rows))
        if wait is not None:
            session.wait(wait, timeout=timeout)
    return times


def write_stdout(
    updates: Any,
    columns: Optional[Sequence[str]] = None,
    format: str = "jsonl",
    stream: Optional[IO[str]] = None,
) -> int:
    """Write ``updates`` (``(data, time, diff)`` or a capture) as rows of JSON lines (or CSV
    with a header, on every call: keep one ``ChangeWriter(sys.stdout, "csv")`` to write the
    header once) to ``stream`` (default ``sys.stdout``); returns the number of rows."""
    writer = ChangeWriter(stream if stream is not None else sys.stdout, format, columns)
    count = writer.write(updates)
    writer.close()
    return count
