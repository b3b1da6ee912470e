"""Sinks: a capture's changes, or its contents per time, written to CSV, JSON Lines or Parquet.

A row is the record's fields, then ``time``, then ``diff`` (changes) or ``count`` (contents):
with ``columns=("word", "n")`` a record ``("a", 2)`` at time 3 with diff -1 is the row
``word=a, n=2, time=3, diff=-1``; without ``columns`` the record is one column, ``data``. JSON
Lines writes tuples as lists; CSV writes a tuple-valued field as JSON text; Parquet infers the
column types from the first rows written.

- :class:`ChangeWriter`: a file (or a text stream such as stdout) kept open, written to as the
  program runs (``writer.write(session.changes("out"))`` after each wait).
- :func:`write_changes` / :func:`write_contents`: one call, the whole history.

``updates`` may be a list of ``(data, time, diff)`` or anything with ``.updates()`` (a
``CapturedCollection``).
"""

from __future__ import annotations

import csv
import json
import pathlib
from typing import IO, Any, Dict, List, Optional, Sequence, Tuple, Union, cast

from .formats import PathLike, require_pyarrow

__all__ = ["ChangeWriter", "write_changes", "write_contents", "updates_of"]

Update = Tuple[Any, Any, int]
FORMATS = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def updates_of(source: Any) -> List[Update]:
    """``source``'s updates: a list of ``(data, time, diff)``, or a capture's ``updates()``."""
    if hasattr(source, "updates"):
        return list(source.updates())
    return list(source)


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted((_plain(v) for v in value), key=repr)
    return value


class ChangeWriter:
    """Rows of changes (``mode="changes"``: record fields, time, diff; consolidated within a
    :meth:`write`, so a record appears once per time and never with diff 0) or of contents per time
    (``mode="contents"``: for every time in a :meth:`write`, the collection's whole content at
    that time: record fields, time, count) to ``target``: a path (format from its suffix, or
    ``format`` = ``"csv"`` / ``"jsonl"`` / ``"parquet"``) or an open text stream (csv / jsonl).
    In contents mode, write each time's changes complete (after the probe passed it)."""

    def __init__(
        self,
        target: Union[PathLike, IO[str]],
        format: Optional[str] = None,
        columns: Optional[Sequence[str]] = None,
        mode: str = "changes",
    ) -> None:
        if mode not in ("changes", "contents"):
            raise ValueError(f"ChangeWriter: mode must be 'changes' or 'contents', not {mode!r}")
        self.mode = mode
        self.columns = tuple(columns) if columns else None
        self._owns = not hasattr(target, "write")
        if format is None:
            if not self._owns:
                format = "jsonl"
            else:
                suffix = pathlib.Path(target).suffix.lower()  # type: ignore[arg-type]
                if suffix not in FORMATS:
                    raise ValueError(
                        f"ChangeWriter: unknown suffix {suffix!r} of {target}; "
                        f"give format= one of csv, jsonl, parquet"
                    )
                format = FORMATS[suffix]
        if format not in ("csv", "jsonl", "parquet"):
            raise ValueError(f"ChangeWriter: unknown format {format!r} (csv, jsonl, parquet)")
        if format == "parquet" and not self._owns:
            raise ValueError("ChangeWriter: Parquet goes to a file, not a text stream")
        self.format = format
        self.target = target
        self._pq: Any = require_pyarrow() if format == "parquet" else None
        self._stream: Any = None
        if format != "parquet":
            self._stream = (
                open(cast(PathLike, target), "w", newline="", encoding="utf-8")
                if self._owns
                else target
            )
        self._csv: Any = None
        self._parquet: Any = None
        self._schema: Any = None
        self._contents: Dict[Any, int] = {}
        self.rows = 0

    @property
    def fields(self) -> Tuple[str, ...]:
        """The column names of a row."""
        return (self.columns or ("data",)) + ("time", "diff" if self.mode == "changes" else "count")

    def _row(self, data: Any, time: Any, n: int) -> List[Any]:
        if self.columns is None:
            values = [data]
        elif len(self.columns) == 1:
            values = [data]
        elif isinstance(data, tuple) and len(data) == len(self.columns):
            values = list(data)
        else:
            raise ValueError(
                f"ChangeWriter: record {data!r} does not have the "
                f"{len(self.columns)} fields of columns={self.columns!r}"
            )
        return values + [time, n]

    def write(self, updates: Any) -> int:
        """Write ``updates`` (changes, or in contents mode the content at each of their times);
        returns the number of rows written."""
        rows = self._rows(updates_of(updates))
        if self.format == "csv":
            self._write_csv(rows)
        elif self.format == "jsonl":
            names = self.fields
            for row in rows:
                self._stream.write(
                    json.dumps(dict(zip(names, map(_plain, row), strict=True)), default=str) + "\n"
                )
        elif rows:
            self._write_parquet(rows)
        if self._stream is not None:
            self._stream.flush()
        self.rows += len(rows)
        return len(rows)

    def _rows(self, updates: List[Update]) -> List[List[Any]]:
        if self.mode == "changes":  # consolidated: one row per (record, time), none with 0
            sums: Dict[Tuple[Any, Any], int] = {}
            for d, t, n in updates:
                sums[(t, d)] = sums.get((t, d), 0) + n
            return [self._row(d, t, n) for (t, d), n in sums.items() if n]
        by_time: Dict[Any, List[Tuple[Any, int]]] = {}
        for d, t, n in updates:
            by_time.setdefault(t, []).append((d, n))
        rows = []
        for t in sorted(by_time):
            for d, n in by_time[t]:
                count = self._contents.get(d, 0) + n
                if count:
                    self._contents[d] = count
                else:
                    self._contents.pop(d, None)
            rows += [self._row(d, t, c) for d, c in sorted(self._contents.items(), key=_order)]
        return rows

    def _write_csv(self, rows: List[List[Any]]) -> None:
        if self._csv is None:
            self._csv = csv.writer(self._stream)
            self._csv.writerow(self.fields)
        self._csv.writerows(
            [json.dumps(_plain(v)) if isinstance(v, (tuple, frozenset)) else v for v in row]
            for row in rows
        )

    def _write_parquet(self, rows: List[List[Any]]) -> None:
        import pyarrow as pa

        names = self.fields
        table = pa.table({name: [_plain(row[i]) for row in rows] for i, name in enumerate(names)})
        if self._parquet is None:
            self._parquet = self._pq.ParquetWriter(str(self.target), table.schema)
            self._schema = table.schema
        else:
            schema = self._schema
            try:
                table = table.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                kinds = ", ".join(
                    f"{f.name}: {f.type} (first rows) vs {table.schema.field(f.name).type}"
                    for f in schema
                    if f.type != table.schema.field(f.name).type
                )
                raise ValueError(
                    f"ChangeWriter: {self.target}: these rows do not fit the "
                    f"columns the first rows gave the file ({kinds}): {exc}"
                ) from exc
        self._parquet.write_table(table)

    def close(self) -> None:
        """Finish the file (Parquet: its footer; CSV: the header even without rows); a stream
        that was passed in is flushed, not closed."""
        if self.format == "csv" and self._csv is None:
            self._write_csv([])
        if self.format == "parquet":
            if self._parquet is None:
                import pyarrow as pa

                empty = pa.table({name: pa.array([], pa.null()) for name in self.fields})
                self._parquet = self._pq.ParquetWriter(str(self.target), empty.schema)
            self._parquet.close()
        elif self._owns:
            self._stream.close()
        else:
            self._stream.flush()

    def __enter__(self) -> "ChangeWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _order(item: Tuple[Any, int]) -> Any:
    return repr(item[0])


def write_changes(
    target: Union[PathLike, IO[str]],
    updates: Any,
    columns: Optional[Sequence[str]] = None,
    format: Optional[str] = None,
) -> int:
    """Write every change of ``updates`` (``(data, time, diff)``), consolidated (one row per
    record and time, none with diff 0) and in time order; returns the number of rows."""
    ordered = sorted(updates_of(updates), key=lambda u: u[1])
    with ChangeWriter(target, format, columns) as writer:
        return writer.write(ordered)


def write_contents(
    target: Union[PathLike, IO[str]],
    updates: Any,
    columns: Optional[Sequence[str]] = None,
    format: Optional[str] = None,
) -> int:
    """Write the content at every time of ``updates``: for each time, in order, every record
    with its accumulated count; returns the number of rows."""
    with ChangeWriter(target, format, columns, mode="contents") as writer:
        return writer.write(updates_of(updates))
