"""JSON Lines: one JSON value per line; objects give their columns, lists become tuples."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .base import (
    FileFormat,
    FileInputError,
    PathLike,
    Rows,
    decode_error,
    hashable,
    open_text,
)

__all__ = ["JsonLines"]


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
            with open_text(path, self.encoding) as f:
                return self.parse(f, str(path))
        except UnicodeDecodeError as exc:
            raise decode_error(path, self.encoding, exc) from exc

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
                records.append(hashable(value))
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
            row = {k: hashable(v) for k, v in value.items()}
            record, diff = self.shape(source, number, row, names)
            records.append(record)
            diffs.append(diff)
            lines_of.append(number)
        return Rows(source, records, diffs, lines_of)
