"""What the file formats share: errors, value converters, :class:`Rows`, :class:`FileFormat`.

A format turns one file (or one batch of lines) into a :class:`Rows`: the records and their
diffs, all parsed and checked before anything is inserted anywhere. A row that does not parse
raises :class:`FileInputError` naming the file, the line (the row number for Parquet), the
column and the value, so nothing of that file is applied. Every format takes the same shaping
options (:class:`FileFormat`): ``columns`` (which columns make the record, in order; one name
gives a scalar record), ``record`` (a function of the row as a dict, for any other shape),
``schema`` (typed columns) and ``diff`` (the name of an integer column holding each row's diff;
default +1).
"""

from __future__ import annotations

import gzip
import io as _io
import math
import pathlib
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ...errors import TimelyError

__all__ = [
    "Rows",
    "FileFormat",
    "FileInputError",
    "FormatUnavailableError",
    "PathLike",
    "Converter",
    "parse_text",
    "converter",
    "to_int",
    "hashable",
    "is_hashable",
    "gzipped",
    "open_text",
    "decode_error",
    "NAMED_TYPES",
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


def to_int(value: Any) -> int:
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


def to_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("a bool is not a float")
    if isinstance(value, (int, float, str)):
        out = float(value.strip() if isinstance(value, str) else value)
        if math.isnan(out):
            raise ValueError("NaN is not a record value (NaN != NaN)")
        return out
    raise ValueError(f"a {type(value).__name__} is not a float")


def to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"a {type(value).__name__} is not a string")


_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError("not a bool (true/false, 1/0, yes/no)")


NAMED_TYPES: Dict[Any, Converter] = {
    "int": to_int,
    int: to_int,
    "float": to_float,
    float: to_float,
    "str": to_str,
    str: to_str,
    "bool": to_bool,
    bool: to_bool,
}
"""The converters behind ``schema`` type names: strict (``int`` refuses ``"2.5"`` and ``True``,
``float`` refuses NaN, ``bool`` takes true/false, 1/0, yes/no)."""


def converter(kind: Any) -> Converter:
    if kind in NAMED_TYPES:
        return NAMED_TYPES[kind]
    if callable(kind):
        return kind
    raise TypeError(
        f"schema: {kind!r} is neither a type name (int, float, str, bool) nor a callable"
    )


def hashable(value: Any) -> Any:
    """JSON lists as tuples (records must be hashable), recursively."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    return value


def is_hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def gzipped(path: PathLike) -> bool:
    return str(path).lower().endswith(".gz")


def open_text(path: PathLike, encoding: str, newline: Optional[str] = None) -> Any:
    """A text file, through gzip if its name ends in ``.gz``."""
    if gzipped(path):
        return gzip.open(path, "rt", encoding=encoding, newline=newline)
    return open(path, encoding=encoding, newline=newline)


def decode_error(path: PathLike, encoding: str, exc: UnicodeDecodeError) -> FileInputError:
    """The line of ``path`` that is not ``encoding`` text, found again line by line."""
    with gzip.open(path, "rb") if gzipped(path) else open(path, "rb") as f:
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
        self.schema = {name: converter(kind) for name, kind in (schema or {}).items()}
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
            diff = self._convert(source, line, self.diff, row.get(self.diff), to_int)
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
            name = next(n for n in names if not is_hashable(row[n]))
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


def parse_text(fmt: FileFormat, text: str, source: str = "<text>") -> Rows:
    """Rows from a string (tests, small inputs) with a line-based format."""
    parse = getattr(fmt, "parse", None)
    if parse is None:
        raise ValueError(f"{type(fmt).__name__} reads files only, not text")
    return parse(_io.StringIO(text), source)
