"""Column layout of a chunk of keyed pieces: records laid out column-wise where their shape allows.

A chunk holds ``n`` keyed pieces ``(routing_hash, piece)``. When every piece has the same
*shape* (built from the rules below), the chunk is stored column by column instead of value by
value: each leaf of the shape is one buffer, and decoding rebuilds the pieces with C-level
``array``, ``zip`` and ``map`` calls rather than one Python call per value (msgpack's extension
hook runs once per tuple). The layout needs no numpy and no pyarrow.

Shapes (each a small JSON-like list in the chunk's header), and their buffers:

=========================  =================================================================
shape                      values and buffers
=========================  =================================================================
``["q", c]``               ints of 64 bits (exactly ``int``): one buffer, little-endian, of
                           the narrowest width that holds them all (``c`` is the ``array``
                           code: ``b`` 8, ``h`` 16, ``i`` 32, ``q`` 64 bits, signed)
``["k", v]``               ints all equal to ``v``: no buffer
``["d"]``                  floats (exactly ``float``): one buffer, little-endian float64
``["m"]``                  ``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes`` mixed:
                           one buffer, a msgpack array of them (no extension types)
``["t", [s1, ..., sk]]``   tuples of length ``k``: the ``k`` columns, each of its shape
``["p", [s1, s2]]``        :class:`~timelypy.order.Product`: its outer and inner columns
``["l", n, s]``            lists: the int column of their lengths (shape ``n``), then the
                           column of all their items (concatenated) of shape ``s``
``["r", [k1...], [s...]]`` dicts with exactly the string keys ``k1...`` in this order: one
                           column per key
``["e"]``                  an empty column (no buffer)
=========================  =================================================================

The routing hashes are one more buffer (little-endian uint64), first. Buffers follow the
shape depth-first, left to right. Anything else (a set, a dict with other keys, tuples of
several lengths, an int beyond 64 bits, a user's class) does not fit, and the chunk falls back
to msgpack (see :mod:`.format`).
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import chain, islice, repeat
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import msgpack

from ..order import Product

__all__ = ["encode_columns", "decode_columns", "ColumnsError"]

_LEN = struct.Struct("<I")
_NATIVE = frozenset((type(None), bool, int, float, str, bytes))
_SWAP = sys.byteorder != "little"
_WIDTHS = (("b", 7), ("h", 15), ("i", 31), ("q", 63))
_CODES = {"b": 1, "h": 2, "i": 4, "q": 8}


class ColumnsError(ValueError):
    """A column payload that does not decode: its reason."""


class _Misfit(Exception):
    """The values do not fit the column layout (the caller falls back to msgpack)."""


def _array(code: str, values: Sequence[Any]) -> bytes:
    a = array(code, values)
    if _SWAP:  # pragma: no cover - big-endian hosts
        a.byteswap()
    return a.tobytes()


def _encode(values: Sequence[Any], out: List[bytes]) -> List[Any]:
    """The shape of the column ``values``; appends its buffers to ``out``."""
    if not values:
        return ["e"]
    types = set(map(type, values))
    if len(types) > 1:
        if types <= _NATIVE:
            return _native(values, out)
        raise _Misfit
    (cls,) = types
    if cls is int:
        low, high = min(values), max(values)
        if low == high and -(1 << 63) <= low < 1 << 63:
            return ["k", low]
        for code, bits in _WIDTHS:
            if -(1 << bits) <= low and high < 1 << bits:
                out.append(_array(code, values))
                return ["q", code]
        return _native(values, out)
    if cls is float:
        out.append(_array("d", values))
        return ["d"]
    if cls is tuple or cls is Product:
        sizes = set(map(len, values))
        if len(sizes) != 1:
            raise _Misfit
        (k,) = sizes
        children = [_encode(column, out) for column in zip(*values)] if k else []
        return ["t", children] if cls is tuple else ["p", children]
    if cls is list:
        lengths = list(map(len, values))
        return ["l", _encode(lengths, out), _encode(list(chain.from_iterable(values)), out)]
    if cls is dict:
        keys = set(map(tuple, values))
        if len(keys) != 1:
            raise _Misfit
        (names,) = keys
        if not all(type(k) is str for k in names):
            raise _Misfit
        children = [_encode([v[k] for v in values], out) for k in names]
        return ["r", list(names), children]
    if cls in _NATIVE:
        return _native(values, out)
    raise _Misfit


def _native(values: Sequence[Any], out: List[bytes]) -> List[Any]:
    try:
        out.append(msgpack.packb(list(values), strict_types=True, use_bin_type=True))
    except (TypeError, OverflowError, ValueError):
        raise _Misfit from None
    return ["m"]


def encode_columns(hashes: Sequence[int], pieces: Sequence[Any]) -> Optional[bytes]:
    """The column payload of the keyed pieces ``zip(hashes, pieces)``, or None when the pieces
    do not fit the layout (see the module's docstring)."""
    buffers: List[bytes] = []
    try:
        buffers.append(_array("Q", hashes))
        shape = _encode(pieces, buffers)
    except (_Misfit, OverflowError, TypeError):
        return None
    header = msgpack.packb(
        {"n": len(pieces), "shape": shape, "sizes": [len(b) for b in buffers]}, use_bin_type=True
    )
    return b"".join([_LEN.pack(len(header)), header, *buffers])


def _from(code: str, data: bytes, n: int) -> List[Any]:
    a = array(code)
    a.frombytes(data)
    if _SWAP:  # pragma: no cover - big-endian hosts
        a.byteswap()
    if len(a) != n:
        raise ColumnsError(f"a column of {len(a)} values where {n} were expected")
    return a.tolist()


def _decode(shape: List[Any], n: int, buffers: Iterator[bytes]) -> List[Any]:
    kind = shape[0]
    if kind == "e":
        if n:
            raise ColumnsError(f"an empty column where {n} values were expected")
        return []
    if kind == "q":
        if shape[1] not in _CODES:
            raise ColumnsError(f"unknown int width {shape[1]!r}")
        return _from(shape[1], next(buffers), n)
    if kind == "k":
        if type(shape[1]) is not int:
            raise ColumnsError(f"a constant column of {type(shape[1]).__name__}")
        return [shape[1]] * n
    if kind == "d":
        return _from("d", next(buffers), n)
    if kind == "m":
        values = msgpack.unpackb(next(buffers), raw=False, use_list=True)
        if type(values) is not list or len(values) != n:
            raise ColumnsError(f"a msgpack column that is not a list of {n} values")
        return values
    if kind == "t":
        columns = [_decode(child, n, buffers) for child in shape[1]]
        return list(zip(*columns)) if columns else [()] * n
    if kind == "p":
        outer, inner = (_decode(child, n, buffers) for child in shape[1])
        return list(map(tuple.__new__, repeat(Product, n), zip(outer, inner)))
    if kind == "l":
        lengths = _decode(shape[1], n, buffers)
        items = _decode(shape[2], sum(lengths), buffers)
        if shape[1] == ["k", 1]:  # one item each: the common case of a trace's keys
            return list(map(list, zip(items)))
        it = iter(items)
        return list(map(list, map(islice, repeat(it), lengths)))
    if kind == "r":
        names = tuple(shape[1])
        columns = [_decode(child, n, buffers) for child in shape[2]]
        return list(map(dict, map(zip, repeat(names), zip(*columns))))
    raise ColumnsError(f"unknown column kind {kind!r}")


def decode_columns(payload: bytes) -> Tuple[List[int], List[Any]]:
    """The routing hashes and pieces :func:`encode_columns` laid out; :class:`ColumnsError`
    says why a payload does not decode."""
    try:
        (size,) = _LEN.unpack_from(payload)
        header = msgpack.unpackb(payload[4 : 4 + size], raw=False, use_list=True)
        n, shape, sizes = header["n"], header["shape"], header["sizes"]
    except (struct.error, ValueError, KeyError, TypeError, msgpack.ExtraData) as exc:
        raise ColumnsError(f"a malformed column header ({type(exc).__name__}: {exc})") from None
    view = memoryview(payload)
    offset = 4 + size
    buffers: List[bytes] = []
    for length in sizes:
        if offset + length > len(payload):
            raise ColumnsError("the column buffers run past the payload")
        buffers.append(view[offset : offset + length])  # type: ignore[arg-type]  # bytes-like
        offset += length
    if offset != len(payload):
        raise ColumnsError("bytes after the last column buffer")
    it = iter(buffers)
    try:
        hashes = _from("Q", next(it), n)
        pieces = _decode(shape, n, it)
    except StopIteration:
        raise ColumnsError("fewer column buffers than the shape needs") from None
    except (IndexError, TypeError, ValueError) as exc:
        if isinstance(exc, ColumnsError):
            raise
        raise ColumnsError(f"a malformed column ({type(exc).__name__}: {exc})") from None
    if next(it, None) is not None:
        raise ColumnsError("more column buffers than the shape needs")
    return hashes, pieces
