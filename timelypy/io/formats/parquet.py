"""Parquet through pyarrow (imported when a file is read), read and checked row group by group."""

from __future__ import annotations

import os
from typing import Any, List, Optional, Sequence, Tuple

from .base import (
    FileFormat,
    FileInputError,
    FormatUnavailableError,
    PathLike,
    Rows,
    hashable,
)

__all__ = ["Parquet", "require_pyarrow"]


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
                row = {name: hashable(values[i]) for name, values in columns.items()}
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
