"""File formats for sources: CSV, JSON Lines and Parquet rows parsed into records, or refused.

A format turns one file (or one batch of lines) into a :class:`Rows`: the records and their
diffs, all parsed and checked before anything is inserted anywhere. A row that does not parse
raises :class:`FileInputError` naming the file, the line (the row number for Parquet), the
column and the value, so nothing of that file is applied.

- :class:`Csv`: the ``csv`` module; a header (or ``columns`` for files without one), typed
  columns through ``schema`` (``{"id": int, "score": float}``; names ``"int"``, ``"float"``,
  ``"str"``, ``"bool"`` or any callable that raises ``ValueError`` on a bad value).
- :class:`JsonLines`: one JSON value per line; objects give their ``columns``, lists become
  tuples, scalars stay scalars.
- :class:`Parquet`: pyarrow (imported when a file is read; :class:`FileInputError`'s sibling
  :class:`FormatUnavailableError` says what to install if it is missing).

Every format takes the same shaping options: ``columns`` (which columns make the record, in
order; one name gives a scalar record), ``record`` (a function of the row as a dict, for any
other shape) and ``diff`` (the name of an integer column holding each row's diff; default +1).
"""

from __future__ import annotations

import csv
import gzip
import io as _io
import json
import math
import os
import pathlib
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..errors import TimelyError

__all__ = [
    "Rows",
    "FileFormat",
    "Csv",
    "JsonLines",
    "Parquet",
    "format_for",
    "FileInputError",
    "FormatUnavailableError",
    "parse_text",
    "require_pyarrow",
]

PathLike = Union[str, "pathlib.Path"]
Converter = Callable[[Any], Any]


class FileInputError(TimelyError, ValueError):
    """A file (or a batch from stdin) has a bad row; nothing of it was applied.

    ``path``, ``line`` (1-based; the row number for Parquet), ``column`` and ``value`` say where;
    any of them is None when it does not apply (a missing column names no line)."""

    def __init__(
        self,
        message: str,
        path: Optional[str] = None,
        line: Optional[int] = None,
        column: Optional[str] = None,
        value: Any = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.column = column
        self.value = value


class FormatUnavailableError(TimelyError, ImportError):
    """A format needs a package that is not installed (Parquet needs pyarrow)."""


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a bool is not an int")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise ValueError("not an integer")
    if isinstance(value, str):
        return int(value.strip())
    raise ValueError(f"a {type(value).__name__} is not an int")


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("a bool is not a float")
    if isinstance(value, (int, float, str)):
        out = float(value.strip() if isinstance(value, str) else value)
        if math.isnan(out):
            raise ValueError("NaN is not a record value (NaN != NaN)")
        return out
    raise ValueError(f"a {type(value).__name__} is not a float")


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"a {type(value).__name__} is not a string")


_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("not a bool (true/false, 1/0, yes/no)")


NAMED_TYPES: Dict[Any, Converter] = {
    "int": _int,
    int: _int,
    "float": _float,
    float: _float,
    "str": _str,
    str: _str,
    "bool": _bool,
    bool: _bool,
}
"""The converters behind ``schema`` type names: strict (``int`` refuses ``"2.5"`` and ``True``,
``float`` refuses NaN, ``bool`` takes true/false, 1/0, yes/no)."""


def _converter(kind: Any) -> Converter:
    if kind in NAMED_TYPES:
        return NAMED_TYPES[kind]
    if callable(kind):
        return kind
    raise TypeError(
        f"schema: {kind!r} is neither a type name (int, float, str, bool) nor a callable"
    )


def _hashable(value: Any) -> Any:
    """JSON lists as tuples (records must be hashable), recursively."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


def _is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _gzipped(path: PathLike) -> bool:
    return str(path).lower().endswith(".gz")


def _open_text(path: PathLike, encoding: str, newline: Optional[str] = None) -> Any:
    """A text file, through gzip if its name ends in ``.gz``."""
    if _gzipped(path):
        return gzip.open(path, "rt", encoding=encoding, newline=newline)
    return open(path, encoding=encoding, newline=newline)


def _decode_error(path: PathLike, encoding: str, exc: UnicodeDecodeError) -> FileInputError:
    """The line of ``path`` that is not ``encoding`` text, found again line by line."""
    with gzip.open(path, "rb") if _gzipped(path) else open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                raw.decode(encoding)
            except UnicodeDecodeError as bad:
                return FileInputError(
                    f"{path}, line {number}: not {encoding} text ({bad.reason} "
                    f"at byte {bad.start + 1} of the line)",
                    path=str(path),
                    line=number,
                    value=raw[:80],
                )
    return FileInputError(f"{path}: not {encoding} text ({exc})", path=str(path))


class Rows:
    """One file's (or batch's) parsed records, their diffs and their line numbers (row numbers
    for Parquet), in file order."""

    __slots__ = ("source", "records", "diffs", "lines")

    def __init__(
        self, source: str, records: List[Any], diffs: List[int], lines: Optional[List[int]] = None
    ) -> None:
        self.source = source
        self.records = records
        self.diffs = diffs
        self.lines = lines if lines is not None else list(range(1, len(records) + 1))

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:
        return f"Rows({self.source!r}, {len(self.records)} records)"


class FileFormat:
    """What the formats share: shaping a row (a dict of column -> value) into a record."""

    suffixes: Tuple[str, ...] = ()

    def __init__(
        self,
        *,
        columns: Union[None, str, Sequence[str]] = None,
        schema: Optional[Mapping[str, Any]] = None,
        record: Optional[Callable[[Dict[str, Any]], Any]] = None,
        diff: Optional[str] = None,
    ) -> None:
        self.scalar = isinstance(columns, str)
        self.columns: Optional[Tuple[str, ...]] = (
            (columns,) if isinstance(columns, str) else tuple(columns) if columns else None
        )
        self.schema = {name: _converter(kind) for name, kind in (schema or {}).items()}
        self.record = record
        self.diff = diff

    def read(self, path: PathLike) -> Rows:
        """Every row of the file at ``path``, parsed and checked (:class:`FileInputError`)."""
        raise NotImplementedError

    def record_columns(self, available: Sequence[str]) -> Tuple[str, ...]:
        """The columns that make a record: ``columns``, else the schema's, else all but the
        diff column."""
        if self.columns is not None:
            return self.columns
        if self.schema:
            return tuple(c for c in self.schema if c != self.diff)
        return tuple(c for c in available if c != self.diff)

    def check_columns(self, source: str, available: Sequence[str]) -> None:
        """:class:`FileInputError` if a column the format needs is not in the file."""
        needed = list(self.record_columns(available) if self.record is None else ())
        needed += [c for c in self.schema if c not in needed]
        needed += [self.diff] if self.diff else []
        for name in needed:
            if name not in available:
                raise FileInputError(
                    f"{source}: no column {name!r} (the file has "
                    f"{', '.join(map(repr, available)) or 'no columns'})",
                    path=source,
                    line=1,
                    column=name,
                )

    def shape(
        self, source: str, line: int, row: Dict[str, Any], names: Tuple[str, ...]
    ) -> Tuple[Any, int]:
        """One row as ``(record, diff)``; :class:`FileInputError` naming the column if a value
        does not convert."""
        for name, convert in self.schema.items():
            row[name] = self._convert(source, line, name, row.get(name), convert)
        diff = 1
        if self.diff is not None:
            diff = self._convert(source, line, self.diff, row.get(self.diff), _int)
        if self.record is not None:
            try:
                record = self.record(row)
                hash(record)
            except Exception as exc:  # noqa: BLE001 - the user's function
                raise FileInputError(
                    f"{source}, line {line}: record({row!r}) failed: {type(exc).__name__}: {exc}",
                    path=source,
                    line=line,
                    value=row,
                ) from exc
            return record, diff
        for name in names:
            value = row.get(name)
            if value is None or isinstance(value, float) and math.isnan(value):
                raise FileInputError(
                    f"{source}, line {line}, column {name!r}: no value "
                    f"({value!r}); records hold no nulls",
                    path=source,
                    line=line,
                    column=name,
                    value=value,
                )
        record = row[names[0]] if self.scalar else tuple(row[name] for name in names)
        try:
            hash(record)
        except TypeError:
            name = next(n for n in names if not _is_hashable(row[n]))
            raise FileInputError(
                f"{source}, line {line}, column {name!r}: "
                f"{type(row[name]).__name__} {row[name]!r} cannot be part of a "
                f"record (records must be hashable; record= can reshape it)",
                path=source,
                line=line,
                column=name,
                value=row[name],
            ) from None
        return record, diff

    @staticmethod
    def _convert(source: str, line: int, column: str, value: Any, convert: Converter) -> Any:
        try:
            return convert(value)
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise FileInputError(
                f"{source}, line {line}, column {column!r}: {value!r} does not convert ({exc})",
                path=source,
                line=line,
                column=column,
                value=value,
            ) from exc


class Csv(FileFormat):
    """CSV rows (the ``csv`` module). With ``header=False``, ``columns`` names the fields in
    order (and is the record, unless ``record`` is given). Values are strings unless ``schema``
    types them; an empty field is a value (``""``), typed columns refuse it."""

    suffixes = (".csv",)

    def __init__(
        self,
        *,
        columns: Union[None, str, Sequence[str]] = None,
        schema: Optional[Mapping[str, Any]] = None,
        record: Optional[Callable[[Dict[str, Any]], Any]] = None,
        diff: Optional[str] = None,
        header: bool = True,
        delimiter: str = ",",
        encoding: str = "utf-8-sig",
    ) -> None:
        super().__init__(columns=columns, schema=schema, record=record, diff=diff)
        if not header and not self.columns:
            raise ValueError("Csv(header=False) needs columns=... to name the fields")
        self.header = header
        self.delimiter = delimiter
        self.encoding = encoding

    def read(self, path: PathLike) -> Rows:
        """Every row of the CSV file at ``path``, parsed and checked."""
        try:
            with _open_text(path, self.encoding, newline="") as f:
                return self.parse(f, str(path))
        except UnicodeDecodeError as exc:
            raise _decode_error(path, self.encoding, exc) from exc

    def parse(self, lines: Iterable[str], source: str, first_line: int = 1) -> Rows:
        """Rows from text lines (a file, or a batch read from stdin); ``first_line`` is the
        line number of the first of them, for messages."""
        reader = csv.reader(lines, delimiter=self.delimiter, strict=True)
        records: List[Any] = []
        diffs: List[int] = []
        lines_of: List[int] = []
        try:
            fields = list(next(reader)) if self.header else list(self.columns or ())
        except StopIteration:
            return Rows(source, records, diffs)
        except csv.Error as exc:
            raise FileInputError(
                f"{source}, line {first_line}: {exc}", path=source, line=first_line
            ) from exc
        self.check_columns(source, fields)
        names = self.record_columns(fields)
        fast = self._fast(fields, names)
        try:
            for values in reader:
                line = reader.line_num + first_line - 1
                if not values:
                    continue
                if len(values) != len(fields):
                    raise FileInputError(
                        f"{source}, line {line}: {len(values)} fields, the header "
                        f"has {len(fields)}",
                        path=source,
                        line=line,
                        value=values,
                    )
                try:
                    record, diff = fast(values) if fast is not None else (None, None)
                except (ValueError, TypeError, ArithmeticError):
                    fast_failed = True
                else:
                    fast_failed = fast is None
                if fast_failed:  # the checks row by row, and an error that names the column
                    record, diff = self.shape(
                        source, line, dict(zip(fields, values, strict=True)), names
                    )
                records.append(record)
                diffs.append(diff)
                lines_of.append(line)
        except csv.Error as exc:
            line = reader.line_num + first_line - 1
            raise FileInputError(f"{source}, line {line}: {exc}", path=source, line=line) from exc
        return Rows(source, records, diffs, lines_of)

    def _fast(
        self, fields: Sequence[str], names: Tuple[str, ...]
    ) -> Optional[Callable[[Sequence[str]], Tuple[Any, int]]]:
        """A row -> (record, diff) function by field index, when the row-by-row checks can
        only fail by raising (no ``record``, only the built-in converters, every schema column
        in the record); None otherwise."""
        builtin = set(NAMED_TYPES.values())
        if (
            self.record is not None
            or any(c not in builtin for c in self.schema.values())
            or any(n not in names and n != self.diff for n in self.schema)
        ):
            return None
        picks = [(fields.index(n), self.schema.get(n)) for n in names]
        at = fields.index(self.diff) if self.diff else None
        scalar = self.scalar

        def fast(values: Sequence[str]) -> Tuple[Any, int]:
            record = tuple([values[i] if c is None else c(values[i]) for i, c in picks])
            return (record[0] if scalar else record), (1 if at is None else _int(values[at]))

        return fast


class JsonLines(FileFormat):
    """One JSON value per line (blank lines skipped). Objects are shaped by ``columns`` /
    ``schema`` / ``record``; without those, lists become tuples and scalars stay as they are."""

    suffixes = (".jsonl", ".ndjson")

    def __init__(
        self,
        *,
        columns: Union[None, str, Sequence[str]] = None,
        schema: Optional[Mapping[str, Any]] = None,
        record: Optional[Callable[[Dict[str, Any]], Any]] = None,
        diff: Optional[str] = None,
        encoding: str = "utf-8",
    ) -> None:
        super().__init__(columns=columns, schema=schema, record=record, diff=diff)
        self.encoding = encoding

    def read(self, path: PathLike) -> Rows:
        """Every line of the JSON Lines file at ``path``, parsed and checked."""
        try:
            with _open_text(path, self.encoding) as f:
                return self.parse(f, str(path))
        except UnicodeDecodeError as exc:
            raise _decode_error(path, self.encoding, exc) from exc

    def parse(self, lines: Iterable[str], source: str, first_line: int = 1) -> Rows:
        """Rows from text lines; ``first_line`` numbers the first of them, for messages."""
        records: List[Any] = []
        diffs: List[int] = []
        lines_of: List[int] = []
        shaped = bool(self.columns or self.schema or self.record or self.diff)
        for number, text in enumerate(lines, first_line):
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise FileInputError(
                    f"{source}, line {number}: not JSON ({exc})",
                    path=source,
                    line=number,
                    value=text.rstrip("\n"),
                ) from exc
            if not shaped:
                if isinstance(value, dict):
                    raise FileInputError(
                        f"{source}, line {number}: an object, but the format has no columns= "
                        f"(records must be hashable: say which fields make the record)",
                        path=source,
                        line=number,
                        value=value,
                    )
                records.append(_hashable(value))
                diffs.append(1)
                lines_of.append(number)
                continue
            if not isinstance(value, dict):
                raise FileInputError(
                    f"{source}, line {number}: {value!r} is not an object "
                    f"(the format reads columns)",
                    path=source,
                    line=number,
                    value=value,
                )
            names = self.record_columns(list(value))
            needed = (
                (names if self.record is None else ())
                + tuple(self.schema)
                + ((self.diff,) if self.diff else ())
            )
            for name in needed:
                if name not in value:
                    raise FileInputError(
                        f"{source}, line {number}, column {name!r}: missing",
                        path=source,
                        line=number,
                        column=name,
                        value=value,
                    )
            row = {k: _hashable(v) for k, v in value.items()}
            record, diff = self.shape(source, number, row, names)
            records.append(record)
            diffs.append(diff)
            lines_of.append(number)
        return Rows(source, records, diffs, lines_of)


def require_pyarrow() -> Any:
    """``pyarrow.parquet``, or :class:`FormatUnavailableError` saying what to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise FormatUnavailableError(
            "Parquet files need pyarrow: pip install pyarrow (or the timelypy extra that "
            "carries it)"
        ) from exc
    return pq


class Parquet(FileFormat):
    """Parquet files through pyarrow (imported when a file is read). ``line`` in errors is the
    1-based row number in the file; nulls and NaN in record columns are refused."""

    suffixes = (".parquet", ".pq")

    def read(self, path: PathLike, row_groups: Optional[Sequence[int]] = None) -> Rows:
        """Every row of the Parquet file at ``path`` (or of its ``row_groups`` only, by index),
        read and checked; row numbers in errors count from the start of the file."""
        pq = require_pyarrow()
        source = str(path)
        if not os.path.exists(source):
            raise FileNotFoundError(f"{source}: no such file")
        try:
            parquet = pq.ParquetFile(source)
            offsets = [0]
            for i in range(parquet.num_row_groups):
                offsets.append(offsets[-1] + parquet.metadata.row_group(i).num_rows)
            groups = range(parquet.num_row_groups) if row_groups is None else list(row_groups)
            tables = [(offsets[g], parquet.read_row_group(g)) for g in groups]
            available = list(parquet.schema_arrow.names)
        except Exception as exc:  # noqa: BLE001 - pyarrow's errors for a broken file
            raise FileInputError(
                f"{source}: not a readable Parquet file ({type(exc).__name__}: {exc})", path=source
            ) from exc
        self.check_columns(source, available)
        names = self.record_columns(available)
        wanted = (
            available
            if self.record is not None
            else list(
                dict.fromkeys(list(names) + list(self.schema) + ([self.diff] if self.diff else []))
            )
        )
        records: List[Any] = []
        diffs: List[int] = []
        lines_of: List[int] = []
        for first, table in tables:
            lines_of.extend(range(first + 1, first + table.num_rows + 1))
            if self._clean(table, names):
                self._append_columns(table, names, records, diffs)
                continue
            columns = {name: table.column(name).to_pylist() for name in wanted}
            for i in range(table.num_rows):
                row = {name: _hashable(values[i]) for name, values in columns.items()}
                record, diff = self.shape(source, first + i + 1, row, names)
                records.append(record)
                diffs.append(diff)
        return Rows(source, records, diffs, lines_of)

    def _clean(self, table: Any, names: Tuple[str, ...]) -> bool:
        """Whether ``table`` can skip the row-by-row checks: plain columns (no ``record``, no
        ``schema``), no nulls, no NaN, flat types, an integer diff column without nulls."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.record is not None or self.schema:
            return False
        for name in names + ((self.diff,) if self.diff else ()):
            column = table.column(name)
            kind = column.type
            if column.null_count or pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
                return False
            if name == self.diff and not pa.types.is_integer(kind):
                return False
            if pa.types.is_floating(kind) and pc.any(pc.is_nan(column)).as_py():
                return False
        return True

    def _append_columns(
        self, table: Any, names: Tuple[str, ...], records: List[Any], diffs: List[int]
    ) -> None:
        """The records of a clean table (:meth:`_clean`), column by column."""
        columns = [table.column(name).to_pylist() for name in names]
        if self.scalar:
            records.extend(columns[0])
        else:
            records.extend(zip(*columns, strict=True))
        if self.diff:
            diffs.extend(table.column(self.diff).to_pylist())
        else:
            diffs.extend([1] * table.num_rows)

    def row_groups(self, path: PathLike) -> int:
        """How many row groups the file at ``path`` has."""
        try:
            return require_pyarrow().ParquetFile(str(path)).num_row_groups
        except FormatUnavailableError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise FileInputError(
                f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})", path=str(path)
            ) from exc


def format_for(path: PathLike, **options: Any) -> FileFormat:
    """The format of ``path`` by its suffix (``.csv``, ``.jsonl``/``.ndjson``,
    ``.parquet``/``.pq``; ``.csv.gz`` and ``.jsonl.gz`` are read through gzip), built with
    ``options``. (A ``.json`` file is usually one document,
    not lines: give ``JsonLines()`` explicitly if it holds one value per line.)"""
    name = pathlib.Path(path)
    suffix = name.suffix.lower()
    if suffix == ".gz":  # a.csv.gz: the format of a.csv, read through gzip
        suffix = name.with_suffix("").suffix.lower()
        if suffix in Parquet.suffixes:
            suffix = ".gz"
    for kind in (Csv, JsonLines, Parquet):
        if suffix in kind.suffixes:
            return kind(**options)
    raise ValueError(
        f"{path}: unknown file suffix {suffix!r}; give a format (Csv(...), "
        f"JsonLines(...), Parquet(...))"
    )


def parse_text(fmt: FileFormat, text: str, source: str = "<text>") -> Rows:
    """Rows from a string (tests, small inputs) with a line-based format."""
    parse = getattr(fmt, "parse", None)
    if parse is None:
        raise ValueError(f"{type(fmt).__name__} reads files only, not text")
    return parse(_io.StringIO(text), source)
