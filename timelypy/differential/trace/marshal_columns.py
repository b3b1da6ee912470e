"""Fixed-width updates to columns in one C pass: the updates as marshal bytes, read by numpy.

Encoding ``((key, val), time, diff)`` tuples into columns one attribute at a time costs a
Python-level pass per column plus a pass per type check (~0.4 µs per ``(int, int)`` update).
The standard library's :mod:`marshal` writes a list of tuples in one C loop, and in its format
version 2 every ``int`` that fits 32 bits is ``i`` and four little-endian bytes, every float
``g`` and eight bytes, ``True``/``False`` one byte ``T``/``F``, every tuple ``(`` and a 4-byte
length: when every update has the layouts' shape, each takes the same number of bytes and the
whole list is an array of fixed-size rows, which numpy reads as a structured array
(~0.12 µs per update).

Exactness: marshal refuses subclasses of ``int``, ``float`` and ``tuple`` (ValueError) and
writes other types with other codes (``numpy.int64`` is ``s``, a ``bool`` is ``T``, an ``int``
beyond 32 bits is ``l`` and a variable number of digits), so :func:`marshal_encode` checks the
total length and every structural byte of every row (a row whose bytes all match the template
can only be a value of the template's shape: the codes fix the lengths), and gives None when
anything differs: the caller then takes the general path (:meth:`.layout.Layout.encode`), which
also takes ``int`` values beyond 32 bits. Float columns are checked for NaN and ``-0.0`` as
there. Layouts with strings are never tried here (their rows differ in size).

Example:

>>> from timelypy.differential.trace.layout import Layout
>>> ints = Layout.of(0)
>>> key_cols, val_cols, times, diffs = marshal_encode([((1, 2), 0, 1), ((3, 4), 5, -1)], ints, ints)
>>> key_cols[0].tolist(), val_cols[0].tolist(), times.tolist(), diffs.tolist()
([1, 3], [2, 4], [0, 5], [1, -1])
>>> marshal_encode([((1, True), 0, 1)], ints, ints) is None
True
"""

from __future__ import annotations

import marshal
from functools import lru_cache
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .layout import Layout, Shape

__all__ = ["marshal_encode"]

_VERSION = 2
"""The marshal format version read here (2: no back-references, 4-byte tuple lengths)."""

_TUPLE, _INT, _FLOAT, _TRUE, _FALSE, _LIST = (ord(c) for c in "(igTF[")

_Template = Tuple[np.dtype, List[Tuple[str, int]], List[Tuple[str, str]], int]
"""``(row dtype, [(structure field, expected value)], [(value field, kind)], row size)``."""


def _walk(shape: Shape, offset: int, structure: List[int], fields: List[Tuple[int, str]]) -> int:
    """Append the structural byte offsets (``structure``: offset -> byte, as a flat list of
    pairs) and value fields of ``shape`` written at ``offset``; return the offset after it."""
    if shape == "i":
        structure += [offset, _INT]
        fields.append((offset + 1, "i"))
        return offset + 5
    if shape == "f":
        structure += [offset, _FLOAT]
        fields.append((offset + 1, "f"))
        return offset + 9
    if shape == "b":
        fields.append((offset, "b"))
        return offset + 1
    assert isinstance(shape, tuple)
    for i, byte in enumerate((_TUPLE, *len(shape).to_bytes(4, "little"))):
        structure += [offset + i, byte]
    offset += 5
    for part in shape:
        offset = _walk(part, offset, structure, fields)
    return offset


_WIDTHS = ((8, "<u8"), (4, "<u4"), (2, "<u2"), (1, "u1"))


@lru_cache(maxsize=64)
def _template(key_shape: Shape, val_shape: Shape) -> _Template:
    """The row of one ``((key, val), time, diff)`` update: a structured dtype whose fields
    are the structural bytes (in runs read as one unsigned integer) and the values."""
    flat: List[int] = []
    fields: List[Tuple[int, str]] = []
    size = _walk(((key_shape, val_shape), "i", "i"), 0, flat, fields)
    expected = dict(zip(flat[::2], flat[1::2]))
    names: List[str] = []
    formats: List[str] = []
    offsets: List[int] = []
    checks: List[Tuple[str, int]] = []
    positions = sorted(expected)
    i = 0
    while i < len(positions):  # contiguous structural bytes, compared 8, 4, 2 or 1 at a time
        start = positions[i]
        run = 1
        while i + run < len(positions) and positions[i + run] == start + run:
            run += 1
        at = start
        while at < start + run:
            width, fmt = next(w for w in _WIDTHS if w[0] <= start + run - at)
            value = int.from_bytes(bytes(expected[at + j] for j in range(width)), "little")
            name = f"s{at}"
            names.append(name)
            formats.append(fmt)
            offsets.append(at)
            checks.append((name, value))
            at += width
        i += run
    values: List[Tuple[str, str]] = []
    for offset, kind in fields:
        name = f"v{offset}"
        names.append(name)
        formats.append({"i": "<i4", "f": "<f8", "b": "u1"}[kind])
        offsets.append(offset)
        values.append((name, kind))
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})
    return dtype, checks, values, size


def marshal_encode(
    updates: Sequence[Tuple[Tuple[Any, Any], Any, int]], key_layout: Layout, val_layout: Layout
) -> Optional[Tuple[List[np.ndarray], List[np.ndarray], np.ndarray, np.ndarray]]:
    """``(key_cols, val_cols, times, diffs)`` of updates whose keys and values have the
    layouts (ints within 32 bits, int times and diffs within 32 bits), or None (the caller
    encodes them on the general path)."""
    if key_layout.strings or val_layout.strings:
        return None  # strings are of variable width: rows of many sizes
    n = len(updates)
    dtype, checks, values, size = _template(key_layout.shape, val_layout.shape)
    try:
        data = marshal.dumps(updates if type(updates) is list else list(updates), _VERSION)
    except ValueError:  # a subclass, or an object marshal does not write
        return None
    if len(data) != 5 + n * size or data[0] != _LIST:
        return None
    rows = np.frombuffer(data, dtype=dtype, count=n, offset=5)
    for name, value in checks:
        if not (rows[name] == value).all():
            return None
    columns: List[np.ndarray] = []
    for name, kind in values:
        field = rows[name]
        if kind == "b":
            truth = field == _TRUE
            if not (truth | (field == _FALSE)).all():
                return None
            columns.append(truth)
        elif kind == "i":
            columns.append(field.astype(np.int64))
        else:
            column = field.astype(np.float64)
            if np.isnan(column).any() or np.signbit(column[column == 0]).any():
                return None
            columns.append(column)
    k = key_layout.width
    v = k + val_layout.width
    return columns[:k], columns[k:v], columns[v], columns[v + 1]
