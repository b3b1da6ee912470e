"""File formats for sources: CSV, JSON Lines and Parquet rows parsed into records, or refused.

One module per format, what they share in :mod:`.base`:

- :class:`Csv` (:mod:`.csv`): the ``csv`` module; a header (or ``columns`` for files without
  one), typed columns through ``schema`` (``{"id": int, "score": float}``; names ``"int"``,
  ``"float"``, ``"str"``, ``"bool"`` or any callable that raises ``ValueError`` on a bad value).
- :class:`JsonLines` (:mod:`.json_lines`): one JSON value per line; objects give their
  ``columns``, lists become tuples, scalars stay scalars.
- :class:`Parquet` (:mod:`.parquet`): pyarrow (imported when a file is read;
  :class:`FileInputError`'s sibling :class:`FormatUnavailableError` says what to install if it
  is missing).

A new format is a :class:`FileFormat` whose ``read(path)`` parses and checks a whole file into
:class:`Rows`; :func:`format_for` picks one by a file's suffix.
"""

from __future__ import annotations

import pathlib
from typing import Any

from .base import FileFormat, FileInputError, FormatUnavailableError, PathLike, Rows, parse_text
from .csv import Csv
from .json_lines import JsonLines
from .parquet import Parquet, require_pyarrow

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
    "PathLike",
]


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
