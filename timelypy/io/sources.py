"""File sources: each file one atomic epoch, into a driver session or inside a dataflow.

- :func:`load_files` (driver session): every file is parsed and checked whole, then its
  records are inserted at one time and the input advanced past it; a bad row raises
  :class:`~timelypy.io.formats.FileInputError` and nothing of that file is sent.
- :func:`feed_files` (inside ``build(worker)``): file ``k`` is read by worker ``k % peers``
  (each file by one worker, so its check and its epoch stay whole); every worker advances its
  input past the file's time, so the epochs line up across workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, List, Optional, Sequence, Union

from ..errors import SessionInputError
from ..windows.event_time import EventTimeInput
from .event_time import event_time_feed, push_rows, with_event_time
from .formats import FileFormat, FileInputError, Parquet, PathLike, Rows, format_for

if TYPE_CHECKING:
    from ..workers.sessions.session import DataflowSession
    from ..workers.worker import Worker

__all__ = ["read_rows", "load_rows", "load_files", "feed_files"]

FormatArg = Union[None, FileFormat]


def read_rows(path: PathLike, fmt: FormatArg = None) -> Rows:
    """The rows of one file, parsed and checked (the format from the suffix if not given)."""
    return (fmt or format_for(path)).read(path)


def load_rows(session: DataflowSession, input: str, rows: Rows, advance: bool = True) -> Any:
    """Insert ``rows`` into the session's ``input`` at its current time as one atomic epoch and
    (if ``advance``) advance the session one past it; returns the time the rows were given.

    Updates already buffered in the session are flushed first, on their own. If the session
    refuses a record (one it cannot route, say), :class:`~timelypy.io.formats.FileInputError`
    names the file and nothing of it is sent."""
    if session.pending:
        session.flush()
    now = session.time
    if rows.records:
        try:
            session.update_many(input, rows.records, diffs=rows.diffs)
        except SessionInputError as exc:
            line = _line_of(rows, exc.value)
            where = f"{rows.source}, line {line}" if line is not None else rows.source
            raise FileInputError(
                f"{where}: refused by the session, nothing of the file applied: {exc}",
                path=rows.source,
                line=line,
                value=exc.value,
            ) from exc
    if advance:
        session.advance_to(now + 1)
    else:
        session.flush()
    return now


def _line_of(rows: Rows, record: Any) -> Optional[int]:
    """The line of the first row whose record is ``record`` (None if none is)."""
    for r, line in zip(rows.records, rows.lines, strict=True):
        try:
            if r is record or r == record:
                return line
        except Exception:  # noqa: BLE001 - a record whose __eq__ raises
            continue
    return None


def load_files(
    session: DataflowSession,
    input: str,
    paths: Iterable[PathLike],
    fmt: FormatArg = None,
    wait: Optional[str] = None,
    timeout: Optional[float] = None,
    *,
    event_time: Optional[str] = None,
    max_out_of_orderness: int = 0,
    feed: Optional[EventTimeInput] = None,
) -> List[Any]:
    """Load each of ``paths``, in order, as one epoch of the session's ``input``; returns the
    time of each. With ``wait`` (a probe's name), waits after each file until the dataflow
    has taken it (``session.wait(wait, timeout=timeout)``), which bounds what is in flight.

    With ``event_time`` (a column name), each row goes in at its event time instead, through
    an :class:`~timelypy.windows.EventTimeInput` with ``max_out_of_orderness`` (or the ``feed``
    given, to keep its watermark across calls), and after each file the input advances to the
    watermark; the times returned are those watermarks (see :mod:`timelypy.io.event_time` for
    the values an event-time column may hold: ints, ISO timestamps as milliseconds)."""
    timed = None
    if event_time is not None:
        timed = event_time_feed(session, input, feed, max_out_of_orderness)
    times = []
    for path in paths:
        if timed is None or event_time is None:
            times.append(load_rows(session, input, read_rows(path, fmt)))
        else:
            shaped = with_event_time(fmt or format_for(path), event_time)
            times.append(push_rows(timed, read_rows(path, shaped)))
        if wait is not None:
            session.wait(wait, timeout=timeout)
    return times


def feed_files(
    worker: Worker,
    input: Any,
    paths: Sequence[PathLike],
    fmt: FormatArg = None,
    probe: Any = None,
    timeout: float = 60.0,
    split: str = "files",
) -> Any:
    """Feed ``paths`` into a differential ``input`` (an ``InputSession``) inside
    ``build(worker)``: file ``k`` at time ``input.time + k``, and every worker advances past
    each file's time. Call it on every worker with the same paths. ``split="files"``: file
    ``k`` is read by worker ``k % peers``; ``split="row_groups"`` (Parquet): every worker reads
    the row groups ``g`` of every file with ``g % peers == index``, so one large file is read
    in parallel (a bad row then fails the worker that read it, and so the job). With ``probe``,
    each worker steps until the probe passed the file's time before the next (at most
    ``timeout`` seconds per file, then :class:`~timelypy.errors.WaitTimeoutError`). Returns
    the input's time after the last file."""
    if split not in ("files", "row_groups"):
        raise ValueError(f"feed_files: split must be 'files' or 'row_groups', not {split!r}")
    start = input.time
    for k, path in enumerate(paths):
        rows = _share(worker, k, path, fmt, split)
        if rows is not None:
            for record, diff in zip(rows.records, rows.diffs, strict=True):
                input.update(record, diff)
        input.advance_to(start + k + 1)
        input.flush()
        if probe is not None:
            worker.step_until(probe, start + k + 1, timeout=timeout)
    return input.time


def _share(worker: Worker, k: int, path: PathLike, fmt: FormatArg, split: str) -> Optional[Rows]:
    """This worker's rows of file ``k`` (None: none of it is this worker's)."""
    if split == "files":
        return read_rows(path, fmt) if k % worker.peers == worker.index else None
    fmt = fmt or format_for(path)
    if not isinstance(fmt, Parquet):
        raise ValueError(f"feed_files: split='row_groups' needs Parquet files, not {path}")
    groups = [g for g in range(fmt.row_groups(path)) if g % worker.peers == worker.index]
    return fmt.read(path, row_groups=groups) if groups else None
