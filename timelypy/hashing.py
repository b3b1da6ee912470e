"""A key hash that is identical in every process (Python's ``hash()`` of str/bytes is salted)."""

from __future__ import annotations

import struct
from typing import Any
from zlib import crc32

from .errors import UnhashableDataError

__all__ = ["stable_hash"]

_MASK = (1 << 64) - 1


def _mix(h: int) -> int:
    """A 64-bit finaliser (splitmix64): every input bit affects every output bit."""
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    h = (h ^ (h >> 27)) * 0x94D049BB133111EB & _MASK
    return h ^ (h >> 31)


def stable_hash(value: Any) -> int:
    """A non-negative 64-bit hash of ``value`` that does not depend on ``PYTHONHASHSEED``.

    Supports ints, bools, floats, str, bytes, None, tuples (and Products) and frozensets of
    those. Values that compare equal hash equal (``1 == 1.0 == True``). Cost: O(size of value);
    ints are their own hash.

    >>> stable_hash(7), stable_hash(("a", 1)) == stable_hash(("a", 1))
    (7, True)
    """
    t = type(value)
    if t is int:
        return value & _MASK
    if t is str:
        return crc32(value.encode("utf-8", "surrogatepass")) * 0x9E3779B1 & _MASK
    if isinstance(value, tuple):
        h = 0x345678 + len(value)
        for item in value:
            # _mix inlined, and ints hashed in place: tuples of ints are the common key.
            h = (h * 1000003 + (item & _MASK if type(item) is int else stable_hash(item))) & _MASK
            h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
            h = (h ^ (h >> 27)) * 0x94D049BB133111EB & _MASK
            h ^= h >> 31
        return h
    if t is bool:
        return int(value)
    if value is None:
        return 0x5BD1E995
    if t is float:
        if value.is_integer():
            return int(value) & _MASK
        return crc32(struct.pack("<d", value)) * 0x85EBCA6B & _MASK
    if t is bytes or t is bytearray:
        return crc32(bytes(value)) * 0xC2B2AE35 & _MASK
    if t is frozenset:
        h = 0x1F3D5B79 + len(value)
        for item in value:
            h = (h + _mix(stable_hash(item))) & _MASK  # order-independent
        return _mix(h)
    if isinstance(value, int):
        return int(value) & _MASK
    if isinstance(value, str):
        return stable_hash(str(value))
    raise UnhashableDataError(
        f"cannot route by key {value!r} of type {t.__name__}: keys must be ints, strings, "
        f"bytes, floats, None, or tuples of those"
    )
