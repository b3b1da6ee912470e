"""Fixed-width records on the wire as numpy columns: the payload of :data:`~.wire.EXT_FIXED`.

A list of records is *fixed-width* when every record has the shape of the first: an exact
``int`` that fits ``int64``, an exact ``float`` (neither NaN nor ``-0.0``), an exact ``bool``,
a ``Product`` of two such ints (a time of a nested scope), or a plain ``tuple`` of such shapes
(nested; the update ``((key, val), time, diff)`` of an exchange is one). Such a list travels
as one buffer per scalar column instead of record by record:

* each ``int`` column in the narrowest of ``int8`` .. ``int64`` that holds its values, and a
  column of one repeated value (the time of a batch, diffs of ``+1``) as that value alone;
* ``float`` columns as ``float64``, ``bool`` columns as one byte per value.

The payload is a little-endian ``u32`` header length, the msgpack header
``[shape as text, count, as_list, specs]`` and the columns' bytes back to back. Decoding gives equal
records of the same types (a ``list`` or a ``tuple`` of tuples, as ``as_list`` says): the
columns become Python values with ``ndarray.tolist`` and the records are zipped back together.

Which values are taken is the rule of the differential layer's ``Layout`` (types exactly,
``int64``, no NaN or ``-0.0``, no subclass of ``int``, ``float`` or ``tuple``), so a batch that
fits an arrangement's columns fits the wire too. NaN and ``-0.0`` would survive the bytes, but
stay with the record encoding so that "fits" means one thing everywhere.

>>> payload = pack_fixed([((1, 2.5), 7, 1), ((3, 0.5), 7, 1)], as_list=True)
>>> unpack_fixed(payload)
[((1, 2.5), 7, 1), ((3, 0.5), 7, 1)]
>>> pack_fixed([("a", 7, 1)], as_list=True) is None
True
"""

from __future__ import annotations

import os
import struct
from functools import partial
from itertools import repeat
from operator import countOf, itemgetter
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import msgpack
import numpy as np

from ..fixed_width import DTYPE_OF_KIND, PRODUCT, TYPE_OF_KIND, Shape
from ..fixed_width import shape_of as fixed_shape
from ..order import Product

__all__ = [
    "Shape",
    "shape_of",
    "pack_fixed",
    "unpack_fixed",
    "fixed_payload",
    "FIXED_MIN_ROWS",
    "WIRE_COLUMNS_VARIABLE",
    "wire_columns_mode",
]

FIXED_MIN_ROWS = 64
"""Sequences of at least this many fixed-width records may travel as numpy columns; below it
the per-record encodings cost less CPU (``benchmarks/exchange_throughput.py --codec-only``)."""
WIRE_COLUMNS_VARIABLE = "TIMELYPY_WIRE_COLUMNS"
"""The environment variable choosing when fixed-width records travel as numpy columns, for
the CPU or for the bytes:

* ``auto`` (the default): where they cost less CPU than the record encodings: records that
  hold ``Product`` times (the messages of nested scopes), which msgpack encodes one Python
  call per time. Records of ints, floats and bools only are packed in C by the pickler
  (a root scope's data messages) or msgpack at least as fast, so they keep those.
* ``always``: every fixed-width list of :data:`FIXED_MIN_ROWS` or more, root-scope data
  messages included: 2-5x fewer bytes (narrowed ints, a repeated time or diff sent once) for
  more CPU, for links where bytes cost more than CPU (a network between machines).
* ``off``: never.

Read by :func:`wire_columns_mode` when a mesh is made."""
_MODES = ("auto", "always", "off")
mode = "auto"
"""The mode :func:`wire_columns_mode` read last (what :func:`~.wire.encode` follows)."""


def wire_columns_mode() -> str:
    """The mode of :data:`WIRE_COLUMNS_VARIABLE`, read now (and kept in :data:`mode`);
    ValueError names a value that is not a mode.

    >>> wire_columns_mode() in ("auto", "always", "off")
    True
    """
    global mode
    value = os.environ.get(WIRE_COLUMNS_VARIABLE, "auto").strip().lower() or "auto"
    if value not in _MODES:
        raise ValueError(f"{WIRE_COLUMNS_VARIABLE}={value!r}: expected one of {', '.join(_MODES)}")
    mode = value
    return value


_INT_WIDTHS = (
    ("<i1", -(1 << 7), (1 << 7) - 1),
    ("<i2", -(1 << 15), (1 << 15) - 1),
    ("<i4", -(1 << 31), (1 << 31) - 1),
)
_new_product = partial(tuple.__new__, Product)  # no Python frame per Product
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_SMALL = 512  # columns up to this long take the bounds of their values in Python
_HEADER_LENGTH = struct.Struct("<I")
_NESTING_LIMIT = 8
_DTYPES = {spec: np.dtype(spec) for spec in ("<i1", "<i2", "<i4", "<i8", "<f8", "|b1")}
_shapes: Dict[str, Tuple[Shape, int]] = {}  # a header's shape -> (shape, its column count)


def shape_of(value: Any) -> Optional[Shape]:
    """The fixed-width shape of ``value`` as the wire packs it (``Product(int, int)`` times
    included, nested at most 8 tuples deep), or None.

    >>> shape_of(((1, 2), 0, 1)), shape_of((1, "a"))
    ((('i', 'i'), 'i', 'i'), None)
    """
    return fixed_shape(value, products=True, limit=_NESTING_LIMIT)


def _column(kind: str, values: Sequence[Any], n: int) -> Optional[Tuple[Any, Optional[bytes]]]:
    """The spec and bytes of one scalar column (bytes None for a constant), None if a value
    does not fit ``kind``."""
    if countOf(map(type, values), TYPE_OF_KIND[kind]) != n:
        return None
    if kind == "i" and n <= _SMALL:
        return _small_int_column(values, n)
    try:
        column: np.ndarray = np.fromiter(values, DTYPE_OF_KIND[kind], n)
    except OverflowError:  # an int beyond int64
        return None
    if kind == "f":
        if np.isnan(column).any() or np.signbit(column[column == 0]).any():
            return None
        if (column == column[0]).all():
            return [values[0]], None
        return "<f8", column.tobytes()
    if kind == "b":
        if column.all() or not column.any():
            return [values[0]], None
        return "|b1", column.tobytes()
    lo, hi = int(column.min()), int(column.max())
    if lo == hi:
        return [lo], None
    for spec, low, high in _INT_WIDTHS:
        if low <= lo and hi <= high:
            return spec, column.astype(spec).tobytes()
    return "<i8", column.tobytes()


def _small_int_column(values: Sequence[int], n: int) -> Optional[Tuple[Any, Optional[bytes]]]:
    """:func:`_column` of a short int column: bounds by Python's ``min``/``max`` (each numpy
    call costs about a microsecond, more than a short column's values), numpy only to pack."""
    lo, hi = min(values), max(values)
    if lo == hi:
        return ([lo], None) if _INT64_MIN <= lo <= _INT64_MAX else None
    for spec, low, high in _INT_WIDTHS:
        if low <= lo and hi <= high:
            return spec, np.fromiter(values, _DTYPES[spec], n).tobytes()
    if lo < _INT64_MIN or hi > _INT64_MAX:
        return None
    return "<i8", np.fromiter(values, np.int64, n).tobytes()


def _columns(
    shape: Shape, values: Sequence[Any], n: int, specs: List[Any], buffers: List[bytes]
) -> bool:
    """Append the specs and bytes of ``values``' columns; False if a value does not fit."""
    if shape == PRODUCT:  # Products are tuples: their coordinates as two int columns
        if countOf(map(type, values), Product) != n:
            return False
        shape = ("i", "i")
    elif type(shape) is str:
        found = _column(shape, values, n)
        if found is None:
            return False
        spec, data = found
        specs.append(spec)
        if data is not None:
            buffers.append(data)
        return True
    elif countOf(map(type, values), tuple) != n:
        return False
    if countOf(map(len, values), len(shape)) != n:
        return False
    for i, part in enumerate(shape):
        if not _columns(part, list(map(itemgetter(i), values)), n, specs, buffers):
            return False
    return True


def _shape_text(shape: Shape) -> str:
    """``shape`` as text: its kinds, a tuple in parentheses (``(("i", "i"), "P")`` is
    ``((ii)P)``), a cheap key for the decoder's cache."""
    if type(shape) is str:
        return shape
    return "(" + "".join(map(_shape_text, shape)) + ")"


def pack_fixed(
    records: Sequence[Any], as_list: bool, products_only: bool = False
) -> Optional[bytes]:
    """The column payload of ``records`` (a non-empty list or tuple of tuples of one fixed-width
    shape), or None when they do not all fit the shape of the first (then the record encoding
    takes them), or, with ``products_only``, when they hold no ``Product``. ``as_list``: whether
    :func:`unpack_fixed` gives a list or a tuple.

    >>> len(pack_fixed([(k, 0, 1) for k in range(1000)], as_list=True)) < 2100
    True
    """
    n = len(records)
    if not n or type(records[0]) is not tuple:
        return None
    shape = shape_of(records[0])
    if not shape:  # not fixed-width, or the empty tuple (no column to count by)
        return None
    text = _shape_text(shape)
    if products_only and PRODUCT not in text:
        return None
    specs: List[Any] = []
    buffers: List[bytes] = []
    if not _columns(shape, records, n, specs, buffers):
        return None
    header = msgpack.packb([text, n, as_list, specs], use_bin_type=True)
    return b"".join([_HEADER_LENGTH.pack(len(header)), header, *buffers])


def _shape_back(text: str) -> Shape:
    """The shape :func:`_shape_text` wrote, validated."""
    stack: List[List[Shape]] = [[]]
    for char in text:
        if char == "(":
            stack.append([])
        elif char == ")" and len(stack) > 1:
            part = tuple(stack.pop())
            stack[-1].append(part)
        elif char in TYPE_OF_KIND or char == PRODUCT:
            stack[-1].append(char)
        else:
            raise ValueError(f"timelypy wire: not a column shape: {text!r}")
    if len(stack) != 1 or len(stack[0]) != 1:
        raise ValueError(f"timelypy wire: not a column shape: {text!r}")
    return stack[0][0]


def _column_count(shape: Shape) -> int:
    if type(shape) is str:
        return 2 if shape == PRODUCT else 1
    return sum(map(_column_count, shape))


def _assemble(shape: Shape, columns: Iterator[Any], n: int) -> Any:
    """An iterable of the values of ``shape``, taking its columns from ``columns`` in order
    (a column is a list, or a ``repeat`` of its one value)."""
    if shape == PRODUCT:
        outer, inner = next(columns), next(columns)
        if type(outer) is repeat and type(inner) is repeat:  # one time: one Product
            return repeat(Product(next(outer), next(inner)), n)
        return map(_new_product, zip(outer, inner))
    if type(shape) is str:
        return next(columns)
    if not shape:
        return repeat((), n)
    return zip(*[_assemble(part, columns, n) for part in shape])


def unpack_fixed(payload: Any) -> Union[List[Any], Tuple[Any, ...]]:
    """The records :func:`pack_fixed` packed (``payload`` any bytes-like object); ValueError
    for a payload that is not one."""
    view = memoryview(payload)
    (length,) = _HEADER_LENGTH.unpack_from(view, 0)
    offset = _HEADER_LENGTH.size + length
    text, n, as_list, specs = msgpack.unpackb(view[_HEADER_LENGTH.size : offset])
    if type(text) is not str:
        raise ValueError(f"timelypy wire: not a column shape: {text!r}")
    known = _shapes.get(text)
    if known is None:
        shape = _shape_back(text)
        known = (shape, _column_count(shape))
        if len(_shapes) < 1024:
            _shapes[text] = known
    shape, width = known
    if type(n) is not int or n < 0 or type(specs) is not list or len(specs) != width:
        raise ValueError(f"timelypy wire: a column batch header that does not fit {shape!r}")
    columns: List[Any] = []
    for spec in specs:
        if type(spec) is list:
            columns.append(repeat(spec[0], n))
            continue
        dtype = _DTYPES.get(spec)
        if dtype is None:
            raise ValueError(f"timelypy wire: unknown column type {spec!r}")
        columns.append(np.frombuffer(view, dtype, n, offset).tolist())
        offset += n * dtype.itemsize
    if offset != len(view):
        raise ValueError(f"timelypy wire: a column batch of {len(view)} bytes, {offset} expected")
    rows = _assemble(shape, iter(columns), n)
    return list(rows) if as_list else tuple(rows)


def fixed_payload(message: Any) -> Optional[bytes]:
    """The column payload of the records of a data message ``("d", channel, time, records)``
    whose records are a list of at least :data:`FIXED_MIN_ROWS` fixed-width records (decoded as
    a ``list``, as a pickled message's) that :data:`mode` sends as columns, else None.

    >>> fixed_payload(("d", 3, 7, [(1, 7, 1)])) is None  # too few to pay
    True
    """
    if type(message) is not tuple or len(message) != 4 or message[0] != "d" or mode == "off":
        return None
    records = message[3]
    if type(records) is not list or len(records) < FIXED_MIN_ROWS:
        return None
    return pack_fixed(records, as_list=True, products_only=mode == "auto")
