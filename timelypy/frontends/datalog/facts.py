"""Soufflé's fact files in (``.facts``), its output files out (``.csv``), and change files.

The files are ``<relation>.facts``, ``<relation>.csv`` and ``<relation>.delta``.

* A ``.facts`` file holds one fact a line, its fields separated by tabs, as Soufflé's ``-F``
  directory does (https://souffle-lang.github.io/io): a ``number`` field is a decimal integer,
  ``unsigned`` a non-negative one, ``float`` a decimal number, ``symbol`` the text as is (no
  quotes, no escapes: a symbol cannot hold a tab or a line break). Empty lines are skipped.
  A relation of no fields has the line ``()`` for its one fact.
* A ``.csv`` output file is written the same way (tab-separated, no header, as Soufflé's
  default ``.output``), its lines sorted by the typed facts (numbers in numeric order).
* A ``.delta`` file (a timelypy addition, for ``--watch``) holds changes: each line is ``+``
  or ``-``, a tab, then the fact's fields as in a ``.facts`` file.

Every error is a :class:`~timelypy.errors.DatalogError` naming the file, the line, the
relation, the field and the value.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Dict, Iterable, List, Sequence, Tuple, Union

from ...errors import DatalogError
from .normal import Relation

__all__ = [
    "parse_field",
    "parse_facts",
    "parse_delta",
    "read_facts",
    "read_delta",
    "format_fact",
    "sorted_facts",
    "write_csv",
    "facts_files",
]

PathLike = Union[str, "os.PathLike[str]"]


def parse_field(text: str, type_: str) -> Any:
    """The value of one field of a facts file for a column of ``type_``; ``ValueError`` saying
    what was expected otherwise."""
    if type_ == "symbol":
        return text
    if type_ == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"expects a float, got {text!r}") from None
    try:
        value = int(text, 0) if text.lower().startswith(("0x", "0b")) else int(text)
    except ValueError:
        raise ValueError(
            f"expects {'an unsigned' if type_ == 'unsigned' else 'a number'}, got {text!r}"
        ) from None
    if type_ == "unsigned" and value < 0:
        raise ValueError(f"expects an unsigned, got {text!r}")
    return value


def _fields(relation: Relation, fields: Sequence[str], path: str, number: int) -> Tuple[Any, ...]:
    if relation.arity == 0 and [f.strip() for f in fields] == ["()"]:
        return ()
    if len(fields) != relation.arity:
        raise DatalogError(
            f"a fact of {relation.name} has {relation.arity} tab-separated field"
            f"{'s' if relation.arity != 1 else ''} "
            f"({', '.join(f'{a}: {t}' for a, t in relation.columns)}), got {len(fields)}: "
            f"{chr(9).join(fields)!r}",
            source=path,
            line=number,
            relation=relation.name,
        )
    out = []
    for i, (text, (attr, type_)) in enumerate(zip(fields, relation.columns)):
        try:
            out.append(parse_field(text, type_))
        except ValueError as exc:
            raise DatalogError(
                f"a fact of {relation.name}: field {i + 1} ({attr}) {exc}",
                source=path,
                line=number,
                relation=relation.name,
            ) from None
    return tuple(out)


def _lines(text: str, first_line: int = 1) -> Iterable[Tuple[int, str]]:
    for number, line in enumerate(text.split("\n"), start=first_line):
        line = line.rstrip("\r")
        if line.strip():
            yield number, line


def _read(path: PathLike) -> str:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            return f.read()
    except OSError as exc:
        raise DatalogError(f"cannot read: {exc.strerror or exc}", source=os.fspath(path)) from None
    except UnicodeDecodeError as exc:
        raise DatalogError(f"not UTF-8 text: {exc}", source=os.fspath(path)) from None


def parse_facts(
    text: str, relation: Relation, source: str = "<facts>", first_line: int = 1
) -> List[Tuple[Any, ...]]:
    """The facts of the text of a ``.facts`` file for ``relation`` (errors name ``source``
    and the line, counted from ``first_line``)."""
    return [
        _fields(relation, line.split("\t"), source, number)
        for number, line in _lines(text, first_line)
    ]


def read_facts(path: PathLike, relation: Relation) -> List[Tuple[Any, ...]]:
    """The facts of a Soufflé ``.facts`` file for ``relation`` (see the module docstring)."""
    return parse_facts(_read(path), relation, os.fspath(path))


def parse_delta(
    text: str, relation: Relation, source: str = "<delta>", first_line: int = 1
) -> List[Tuple[Tuple[Any, ...], int]]:
    """The changes in the text of a ``.delta`` file: ``(fact, +1 or -1)`` per line."""
    out = []
    for number, line in _lines(text, first_line):
        sign, _, rest = line.partition("\t")
        if sign.strip() not in ("+", "-"):
            raise DatalogError(
                f"a change of {relation.name} starts with '+' or '-' and a tab, got {line!r}",
                source=source,
                line=number,
                relation=relation.name,
            )
        fact = _fields(relation, rest.split("\t"), source, number)
        out.append((fact, 1 if sign.strip() == "+" else -1))
    return out


def read_delta(path: PathLike, relation: Relation) -> List[Tuple[Tuple[Any, ...], int]]:
    """The changes of a ``.delta`` file for ``relation``: ``(fact, +1 or -1)`` per line."""
    return parse_delta(_read(path), relation, os.fspath(path))


def format_fact(fact: Sequence[Any]) -> str:
    """One line of a ``.facts`` / ``.csv`` file (without the line break); ``()`` for a fact of
    no fields, as Soufflé writes it."""
    if not len(fact):
        return "()"
    return "\t".join(repr(v) if isinstance(v, float) else str(v) for v in fact)


def _sort_key(fact: Tuple[Any, ...]) -> Tuple[Tuple[int, Any], ...]:
    return tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in fact)


def sorted_facts(facts: Iterable[Tuple[Any, ...]]) -> List[Tuple[Any, ...]]:
    """``facts`` in the order the output files list them (numbers before symbols, field by
    field)."""
    return sorted(facts, key=_sort_key)


def write_csv(path: PathLike, facts: Iterable[Tuple[Any, ...]]) -> int:
    """Write ``facts`` to ``path`` as Soufflé writes an output relation (tab-separated, one a
    line, sorted), atomically (a temporary file renamed over it); returns how many."""
    rows = sorted_facts(facts)
    target = pathlib.Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8", newline="") as f:
        for fact in rows:
            f.write(format_fact(fact) + "\n")
    os.replace(temporary, target)
    return len(rows)


def facts_files(directory: PathLike, relations: Iterable[str], suffix: str) -> Dict[str, str]:
    """``relation -> path`` of the ``<relation><suffix>`` files present in ``directory``."""
    base = pathlib.Path(directory)
    return {
        name: str(base / f"{name}{suffix}")
        for name in relations
        if (base / f"{name}{suffix}").is_file()
    }
