"""A key hash that is identical in every process (Python's ``hash()`` of str/bytes is salted).

Each type's hash follows from its equality, so that values that compare equal hash equal, and
uses nothing a process chooses (no ``id``, no salted ``hash()``):

* ints are themselves (mod 2**64); a float equal to an int hashes as it; bools as 0 and 1;
* a tuple, a named tuple and a ``Product`` combine their items in order (a named tuple equals
  the plain tuple of its items, so it hashes as it); a frozenset sums its items' hashes;
* a subclass of int, str, float or bytes (``IntEnum``, ``StrEnum``) hashes as the value it
  equals; other integers (numpy's) as their int;
* a frozen dataclass combines its class's module and qualified name with its fields that take
  part in ``==`` (``compare=True``); an Enum member its class's name with its value;
* ``Decimal`` and ``Fraction`` as the int or the float they equal, else their exact ratio;
* ``date`` its ordinal; a naive ``datetime`` its microseconds since year 1; an aware one the
  same of its UTC instant (one instant in any zone is one value); ``time`` likewise within a
  day; ``timedelta`` its microseconds; ``UUID`` its 128-bit int. Each kind starts from its own
  constant, so a date and its ordinal do not collide.
"""

from __future__ import annotations

import dataclasses
import numbers
import struct
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from fractions import Fraction
from operator import attrgetter, itemgetter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple
from uuid import UUID
from zlib import crc32

from .errors import UnhashableDataError

__all__ = [
    "stable_hash",
    "stable_hashes",
    "tuple_hashes",
    "owners",
    "shape_hashes",
    "float_hashes",
    "RECORD_TYPES",
    "ACCEPTED",
    "instance_fields",
]

_MASK = (1 << 64) - 1


def _mix(h: int) -> int:
    """A 64-bit finaliser (splitmix64): every input bit affects every output bit."""
    h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    h = (h ^ (h >> 27)) * 0x94D049BB133111EB & _MASK
    return h ^ (h >> 31)


def stable_hash(value: Any) -> int:
    """A non-negative 64-bit hash of ``value`` that does not depend on ``PYTHONHASHSEED``.

    Supports ints, bools, floats, str, bytes, None, tuples (named tuples and Products too) and
    frozensets of supported values, frozen dataclasses, Enum members, and the standard types of
    :data:`RECORD_TYPES` (``datetime.date`` / ``datetime`` / ``time`` / ``timedelta``,
    ``decimal.Decimal``, ``fractions.Fraction``, ``uuid.UUID``). Values that compare equal
    hash equal (``1 == 1.0 == True == Decimal("1.0")``, a named tuple and the plain tuple of its
    items, aware datetimes of one instant in different zones). Cost: O(size of value); ints are
    their own hash. Anything else raises :class:`~timelypy.errors.UnhashableDataError` naming
    the type, the value and what is accepted.

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
    rule = _RULES.get(t)
    if rule is None:
        rule = _rule_for(t)
    return rule(value)


def _combine(h: int, x: int) -> int:
    """One step of the tuple hash: ``h`` extended by ``x``."""
    return _mix((h * 1000003 + x) & _MASK)


def _tag(name: str) -> int:
    """The starting hash of values of the kind ``name`` (a constant per kind)."""
    return _mix(crc32(name.encode("utf-8")))


_TAG_DATE = _tag("datetime.date")
_TAG_DATETIME = _tag("datetime.datetime")
_TAG_DATETIME_AWARE = _tag("datetime.datetime+utcoffset")
_TAG_TIME = _tag("datetime.time")
_TAG_TIME_AWARE = _tag("datetime.time+utcoffset")
_TAG_TIMEDELTA = _tag("datetime.timedelta")
_TAG_RATIO = _tag("exact ratio")
_TAG_DECIMAL_NAN = _tag("decimal.Decimal NaN")
_TAG_UUID = _tag("uuid.UUID")
_ONE_US = timedelta(microseconds=1)


def _microseconds(hours: int, minutes: int, seconds: int, micro: int) -> int:
    return ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micro


def _hash_date(value: date) -> int:
    return _combine(_TAG_DATE, value.toordinal())


def _hash_datetime(value: datetime) -> int:
    # As Python: naive and aware datetimes are never equal; aware ones are equal when they are
    # the same instant (whatever their zones), with the offset of fold=0 (as datetime.__hash__).
    offset = value.replace(fold=0).utcoffset() if value.tzinfo is not None else None
    us = value.toordinal() * 86_400_000_000 + _microseconds(
        value.hour, value.minute, value.second, value.microsecond
    )
    if offset is None:
        return _combine(_TAG_DATETIME, us & _MASK)
    return _combine(_TAG_DATETIME_AWARE, (us - offset // _ONE_US) & _MASK)


def _hash_time(value: time) -> int:
    offset = value.utcoffset()
    us = _microseconds(value.hour, value.minute, value.second, value.microsecond)
    if offset is None:
        return _combine(_TAG_TIME, us)
    return _combine(_TAG_TIME_AWARE, (us - offset // _ONE_US) & _MASK)


def _hash_timedelta(value: timedelta) -> int:
    return _combine(_TAG_TIMEDELTA, (value // _ONE_US) & _MASK)


def _hash_exact_number(value: Any) -> int:
    """A Decimal or Fraction: as the int or the float it equals, else by its exact ratio (equal
    Decimals such as ``Decimal("1.0")`` and ``Decimal("1")`` have one ratio)."""
    if isinstance(value, Decimal) and not value.is_finite():
        if value.is_snan():
            raise UnhashableDataError(
                f"cannot route by key {value!r} of type Decimal: a signaling NaN has no hash"
            )
        if value.is_nan():
            return _TAG_DECIMAL_NAN
        return stable_hash(float(value))  # Decimal("Infinity") == float("inf")
    numerator, denominator = value.as_integer_ratio()
    if denominator == 1:
        return numerator & _MASK
    as_float = float(value)
    if as_float.as_integer_ratio() == (numerator, denominator):
        return stable_hash(as_float)  # Decimal("0.5") == 0.5
    return _combine(_combine(_TAG_RATIO, numerator & _MASK), denominator & _MASK)


def _hash_uuid(value: UUID) -> int:
    n = value.int
    return _combine(_combine(_TAG_UUID, n >> 64), n & _MASK)


def _hash_as(convert: Callable[[Any], Any]) -> Callable[[Any], int]:
    """Hash a value as the equal builtin ``convert(value)`` (an ``IntEnum`` as its int)."""
    return lambda value: stable_hash(convert(value))


def _hash_enum(cls: type) -> Callable[[Any], int]:
    # Members are singletons: equal only to themselves, found by class and value (as pickle
    # does); a value stable_hash cannot take falls back to the member's name.
    tag = _tag(f"enum {cls.__module__}.{cls.__qualname__}")

    def rule(value: Any) -> int:
        try:
            return _combine(tag, stable_hash(value.value))
        except UnhashableDataError:
            return _combine(tag, stable_hash(value.name))

    return rule


def instance_fields(cls: type) -> Tuple[dataclasses.Field, ...]:
    """The instance fields of the dataclass ``cls``, in order, as ``dataclasses.fields``.

    ``dataclasses.fields`` tells fields from ``ClassVar`` / ``InitVar`` pseudo-fields by the
    identity of a module sentinel; a class that cloudpickle before 3.0 sent by value (one
    defined in ``__main__`` or a test module) carries a copy of the sentinel, and
    ``dataclasses.fields`` returns nothing for it. This compares the sentinel's name."""
    return tuple(
        f
        for f in getattr(cls, "__dataclass_fields__", {}).values()
        if getattr(getattr(f, "_field_type", None), "name", "_FIELD") == "_FIELD"
    )


def _hash_dataclass(cls: type) -> Callable[[Any], int]:
    # A dataclass's __eq__ compares the class and the tuple of its compare=True fields.
    tag = _tag(f"dataclass {cls.__module__}.{cls.__qualname__}")
    names = tuple(f.name for f in instance_fields(cls) if f.compare)
    get = attrgetter(*names) if len(names) > 1 else None

    def rule(value: Any) -> int:
        if get is not None:
            return _combine(tag, stable_hash(get(value)))
        if names:
            return _combine(tag, stable_hash(getattr(value, names[0])))
        return tag

    return rule


ACCEPTED = (
    "ints, floats, bools, str, bytes, None, tuples (named tuples too), frozensets, "
    "frozen dataclasses, Enums, datetime.date/datetime/time/timedelta, Decimal, Fraction, "
    "UUID, and any nesting of those"
)
"""What :func:`stable_hash` takes, for messages."""

RECORD_TYPES: Tuple[type, ...] = (date, datetime, time, timedelta, Decimal, Fraction, UUID)
"""The standard library's value types :func:`stable_hash` takes (besides the builtin scalars,
tuples, frozensets, frozen dataclasses and Enums)."""

_RULES: Dict[type, Callable[[Any], int]] = {
    date: _hash_date,
    datetime: _hash_datetime,
    time: _hash_time,
    timedelta: _hash_timedelta,
    Decimal: _hash_exact_number,
    Fraction: _hash_exact_number,
    UUID: _hash_uuid,
}
_BASE_RULES = dict(_RULES)
_RULES_LIMIT = 4096


def _refuse(cls: type, why: str) -> Callable[[Any], int]:
    def rule(value: Any) -> int:
        raise UnhashableDataError(
            f"cannot route by key {value!r} of type {cls.__qualname__}: {why}; keys and records "
            f"must be {ACCEPTED}"
        )

    return rule


def _rule_for(cls: type) -> Callable[[Any], int]:
    """The hash rule of a type met for the first time (remembered unless it refuses)."""
    rule: Optional[Callable[[Any], int]] = None
    # Subclasses of the builtins (IntEnum, StrEnum, an Enum mixed with float, numpy's float64)
    # equal their builtin value, so they hash as it; the builtin's own method reads the value
    # even where the subclass overrides __str__ or __and__ (Enum, IntFlag).
    if issubclass(cls, int):
        rule = _hash_as(int.__index__)
    elif issubclass(cls, str):
        rule = _hash_as(str.__str__)
    elif issubclass(cls, float):
        rule = _hash_as(float.__float__)
    elif issubclass(cls, bytes):
        rule = _hash_as(bytes)
    elif issubclass(cls, numbers.Integral):  # numpy's integers
        rule = _hash_as(int)
    elif issubclass(cls, Enum):
        rule = _hash_enum(cls)
    elif dataclasses.is_dataclass(cls):
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        if not params.eq:
            return _refuse(
                cls,
                "a dataclass with eq=False compares by identity, which does not "
                "survive a copy to another worker",
            )
        if not params.frozen:
            return _refuse(
                cls,
                "a mutable dataclass (a record changed after it was sent would "
                "be lost or miscounted); declare it @dataclass(frozen=True)",
            )
        rule = _hash_dataclass(cls)
    else:
        for base in cls.__mro__[1:]:  # subclasses of the standard types, e.g. of datetime
            rule = _BASE_RULES.get(base)
            if rule is not None:
                break
    if rule is None:
        if cls in (list, dict, set, bytearray) or issubclass(cls, (list, dict, set)):
            why = "it is mutable: use a tuple, a frozenset or a tuple of pairs instead"
        else:
            why = "its hash is not known to be the same in every process"
        return _refuse(cls, why)
    if len(_RULES) >= _RULES_LIMIT:
        _RULES.clear()
        _RULES.update(_BASE_RULES)
    _RULES[cls] = rule
    return rule


def stable_hashes(values: Sequence[Any]) -> List[int]:
    """:func:`stable_hash` of every one of ``values``, in order; raises what it raises.

    A list of ints, or of equal-length tuples of ints (the common records), is hashed column
    by column with numpy when it is installed (about 0.15 µs a record instead of 1.5 µs);
    anything else one value at a time.

    >>> stable_hashes([(1, 2), (3, 4)]) == [stable_hash((1, 2)), stable_hash((3, 4))]
    True
    """
    hashes = _int_row_hashes(values)
    if hashes is not None:
        return hashes.tolist()
    return [stable_hash(v) for v in values]


def owners(values: Sequence[Any], workers: int) -> Sequence[int]:
    """The worker that owns each of ``values``: ``stable_hash(value) % workers``. A numpy
    array when the values were hashed column-wise (see :func:`stable_hashes`), else a list;
    raises what :func:`stable_hash` raises.

    >>> list(owners([(1, 2), (3, 4)], 2)) == [stable_hash((1, 2)) % 2, stable_hash((3, 4)) % 2]
    True
    """
    hashes = _int_row_hashes(values)
    if hashes is not None:
        import numpy as np

        return (hashes % np.uint64(workers)).astype(np.intp)
    return [stable_hash(v) % workers for v in values]


def _int_row_hashes(values: Sequence[Any]) -> Optional[Any]:
    """The hashes of ``values`` as a numpy ``uint64`` array if they are all ints, or all tuples
    of the same length of ints that fit in 64 bits; None otherwise (or without numpy).

    The arithmetic is :func:`stable_hash`'s: numpy's ``uint64`` wraps modulo 2**64, which is the
    ``& _MASK`` of the Python code, and an ``int64`` viewed as ``uint64`` is ``value & _MASK``."""
    if len(values) < 64:
        return None
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with the spark and ray extras
        return None
    kinds = set(map(type, values))
    if kinds == {int}:
        columns = [values]
    elif kinds == {tuple}:
        lengths = set(map(len, values))
        if len(lengths) != 1:
            return None
        width = lengths.pop()
        columns = [list(map(itemgetter(j), values)) for j in range(width)]
        if any(set(map(type, c)) != {int} for c in columns):
            return None
    else:
        return None
    try:
        arrays = [np.array(c, dtype=np.int64) for c in columns]
    except OverflowError:
        return None
    if kinds == {int}:
        return arrays[0].view(np.uint64)
    return tuple_hashes([column.view(np.uint64) for column in arrays], len(values))


def tuple_hashes(items: Sequence[Any], count: Optional[int] = None) -> Any:
    """The :func:`stable_hash` of tuples whose items hash to ``items`` (numpy ``uint64``
    arrays, one per position; ``count`` tuples, needed for the empty tuple), computed
    column-wise: ``h = h * 1000003 + item``, then the
    splitmix64 finaliser, per item (``uint64`` wraps modulo 2**64, the ``& _MASK`` of the
    Python code).

    >>> import numpy as np
    >>> ones, twos = np.array([1], np.uint64), np.array([2], np.uint64)
    >>> int(tuple_hashes([ones, twos])[0]) == stable_hash((1, 2))
    True
    """
    import numpy as np

    n = len(items[0]) if items else count
    if n is None:
        raise ValueError("tuple_hashes: no item arrays, so the count of tuples must be given")
    h = np.full(n, 0x345678 + len(items), dtype=np.uint64)
    for item in items:
        h = h * np.uint64(1000003) + item
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def shape_hashes(
    shape: Any, columns: Sequence[Any], count: int, dicts: Optional[Sequence[Any]] = None
) -> Any:
    """The :func:`stable_hash` of ``count`` fixed-width values of ``shape`` (``"i"``, ``"f"``,
    ``"b"``, ``"s"`` (``str``), ``"y"`` (``bytes``) or a tuple of shapes, nested) given as
    numpy columns, one per scalar in order (``int64``, ``float64``, ``bool``), as a numpy
    ``uint64`` array: the hashes of the values the columns decode to, computed column-wise.
    A string column is an object array of the strings, or integer codes into ``dicts[i]``
    (one entry per column, None for the others: an array of the distinct strings), whose
    strings are then hashed once each.

    >>> import numpy as np
    >>> h = shape_hashes(("i", "f"), [np.array([1, 2]), np.array([0.5, 3.0])], 2)
    >>> [int(x) for x in h] == [stable_hash((1, 0.5)), stable_hash((2, 3.0))]
    True
    >>> words = np.array(["a", "b"], dtype=object)
    >>> h = shape_hashes(("s", "i"), [np.array([1, 0, 1]), np.array([7, 8, 9])], 3, [words, None])
    >>> [int(x) for x in h] == [stable_hash(("b", 7)), stable_hash(("a", 8)), stable_hash(("b", 9))]
    True
    """
    per_column = list(dicts) if dicts is not None else [None] * len(columns)
    hashes, rest, _ = _shape_hashes(shape, list(columns), count, per_column)
    if rest:
        raise ValueError(f"shape_hashes: {len(rest)} columns more than the shape {shape!r} has")
    return hashes


def _shape_hashes(
    shape: Any, columns: List[Any], count: int, dicts: List[Any]
) -> Tuple[Any, List[Any], List[Any]]:
    import numpy as np

    if isinstance(shape, str):
        column = columns[0]
        if shape == "f":
            hashes = float_hashes(np.asarray(column, dtype=np.float64))
        elif shape in ("s", "y"):
            hashes = _string_hashes(column, dicts[0])
        else:
            hashes = np.asarray(column).astype(np.int64).view(np.uint64)
        return hashes, columns[1:], dicts[1:]
    parts = []
    for part in shape:
        hashes, columns, dicts = _shape_hashes(part, columns, count, dicts)
        parts.append(hashes)
    return tuple_hashes(parts, count), columns, dicts


def _string_hashes(column: Any, dictionary: Any) -> Any:
    """The hashes of a string column: its strings (an object array), or its codes into
    ``dictionary`` (each distinct string hashed once)."""
    import numpy as np

    if dictionary is None:
        values = column.tolist()
        return np.fromiter(map(stable_hash, values), np.uint64, len(values))
    words = dictionary.tolist()
    return np.fromiter(map(stable_hash, words), np.uint64, len(words))[column]


def float_hashes(values: Any) -> Any:
    """:func:`stable_hash` of each of the float64 array ``values``, as a ``uint64`` array:
    whole numbers hash as the int they equal.

    Example: ``float_hashes(numpy.array([2.0]))[0] == stable_hash(2)``."""
    import numpy as np

    with np.errstate(invalid="ignore"):
        whole = np.isfinite(values) & (values == np.floor(values)) & (np.abs(values) < 2.0**63)
    hashes = np.where(whole, values, 0.0).astype(np.int64).view(np.uint64)
    others = np.flatnonzero(~whole)
    if len(others):
        hashes[others] = [stable_hash(v) for v in values[others].tolist()]
    return hashes
