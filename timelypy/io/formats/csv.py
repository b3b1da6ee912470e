"""CSV rows through the ``csv`` module, typed by a schema, checked whole before anything is sent."""

from __future__ import annotations

import csv
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from .base import (
    NAMED_TYPES,
    FileFormat,
    FileInputError,
    PathLike,
    Rows,
    decode_error,
    open_text,
    to_int,
)

__all__ = ["Csv"]


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
            with open_text(path, self.encoding, newline="") as f:
                return self.parse(f, str(path))
        except UnicodeDecodeError as exc:
            raise decode_error(path, self.encoding, exc) from exc

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
                fast_failed = fast is None
                if fast is not None:
                    try:
                        record, diff = fast(values)
                    except (ValueError, TypeError, ArithmeticError):
                        fast_failed = True
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
            return (record[0] if scalar else record), (1 if at is None else to_int(values[at]))

        return fast
