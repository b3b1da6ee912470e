"""The record types of the guide on the wire: user classes and standard values, for :mod:`.wire`.

:mod:`.wire` packs these into two msgpack extensions; this module says what goes into them and
rebuilds the objects from it:

* A frozen dataclass, a named tuple or an Enum member (:data:`~.wire.EXT_RECORD`): a header
  naming its class, then its state packed as data (the dataclass's fields, the tuple's items,
  the member's value). The class is pickled (cloudpickle) the first time a message holds it and
  named by a number after that, so a batch of ten thousand records carries its class once.
  The object is rebuilt as pickle rebuilds it: without calling ``__init__``.
* A ``date``, ``datetime``, ``time``, ``timedelta``, ``Decimal``, ``Fraction`` or ``UUID``
  (:data:`~.wire.EXT_STDLIB`): ``[kind, *fields]`` of ints and strings (a ``Decimal`` as its
  exact string, keeping its exponent; a time zone pickled once a message, then a number).

The numbers are per message: :func:`reset` starts a message, on each side.
"""

from __future__ import annotations

import dataclasses
import pickle
import struct
import threading
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import EnumMeta
from fractions import Fraction
from typing import Any, Callable, Dict, List, Optional, Tuple
from uuid import UUID

import cloudpickle

from ..hashing import instance_fields

__all__ = [
    "reset",
    "record_kind",
    "record_header",
    "rebuild_record",
    "STDLIB_FIELDS",
    "rebuild_stdlib",
    "KIND_DATACLASS",
    "KIND_TUPLE",
    "KIND_ENUM",
]

KIND_DATACLASS, KIND_TUPLE, KIND_ENUM = 0, 1, 2
_CACHE_LIMIT = 1 << 12
_KNOWN = struct.Struct("<BI")  # 0, the class's number in the message
_NEW = struct.Struct("<BII")  # 1, its number, the length of its pickle (then the pickle)


class _References(threading.local):
    """The classes and time zones of the message being encoded / decoded, by number."""

    def __init__(self) -> None:
        self.sent: Dict[Any, int] = {}
        self.received: Dict[int, Any] = {}


_refs = _References()
_record_kinds: Dict[type, Optional[int]] = {}
_class_pickles: Dict[type, bytes] = {}
_unpickled: Dict[bytes, Any] = {}
_new_object = object.__new__
_new_tuple = tuple.__new__
_set_attribute = object.__setattr__


def reset() -> None:
    """Forget the numbers of the previous message (on this thread)."""
    refs = _refs
    if refs.sent:
        refs.sent = {}
    if refs.received:
        refs.received = {}


def _remember(cache: Dict[Any, Any], key: Any, value: Any) -> Any:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def record_kind(cls: type) -> Optional[int]:
    """How instances of ``cls`` travel (``KIND_*``), or None: not a record class."""
    kind = _record_kinds.get(cls, -1)
    if kind != -1:
        return kind
    if isinstance(cls, EnumMeta):
        kind = KIND_ENUM
    elif dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen:  # type: ignore
        kind = KIND_DATACLASS
    elif issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        kind = KIND_TUPLE
    else:
        kind = None
    return _remember(_record_kinds, cls, kind)


def _reference(key: Any, dump: Callable[[Any], bytes]) -> Tuple[int, Optional[bytes]]:
    """``key``'s number in this message, and its pickle if the message did not hold it yet."""
    sent = _refs.sent
    n = sent.get(key)
    if n is not None:
        return n, None
    n = sent[key] = len(sent)
    return n, dump(key)


def _class_pickle(cls: type) -> bytes:
    data = _class_pickles.get(cls)
    if data is None:
        data = _remember(_class_pickles, cls, cloudpickle.dumps(cls, protocol=5))
    return data


def record_header(obj: Any, cls: type, kind: int) -> Optional[Tuple[bytes, List[Any]]]:
    """The header naming ``cls`` and the state to pack after it; None if the object holds more
    than that state (attributes besides a dataclass's fields, or on a named tuple subclass:
    pickle carries those). Raises what cloudpickle raises for a class it cannot pickle."""
    if kind == KIND_DATACLASS:
        fields = instance_fields(cls)
        extra = getattr(obj, "__dict__", None)
        if extra is not None and len(extra) != len(fields):
            return None
        state = [getattr(obj, f.name) for f in fields]
    elif kind == KIND_TUPLE:
        if getattr(obj, "__dict__", None):
            return None
        state = list(obj)
    else:
        state = [obj.value]
    n, data = _reference(cls, _class_pickle)
    header = _KNOWN.pack(0, n) if data is None else _NEW.pack(1, n, len(data)) + data
    return header, state


def _load(data: bytes, load: Callable[[bytes], Any]) -> Any:
    """``load(data)``, once per process for the same bytes (a class is unpickled once)."""
    value = _unpickled.get(data)
    if value is None:
        value = _remember(_unpickled, data, load(data))
    return value


def rebuild_record(data: bytes, unpack: Callable[[Any], Any]) -> Any:
    """The object an :data:`~.wire.EXT_RECORD` payload describes; ``unpack`` reads its state.
    The header is read before the state, so a record may hold records of its own class."""
    view = memoryview(data)
    tag, n = _KNOWN.unpack_from(view)
    received = _refs.received
    if tag == 0:
        try:
            cls = received[n]
        except KeyError:
            raise ValueError(f"timelypy wire: class number {n} before its definition") from None
        start = _KNOWN.size
    else:
        _tag, n, length = _NEW.unpack_from(view)
        start = _NEW.size + length
        cls = received[n] = _load(bytes(view[_NEW.size : start]), cloudpickle.loads)
    state = unpack(view[start:])
    kind = record_kind(cls)
    if kind == KIND_ENUM:
        return cls(state[0])
    if kind == KIND_TUPLE:
        return _new_tuple(cls, state)
    if kind == KIND_DATACLASS:
        obj = _new_object(cls)
        for field, value in zip(instance_fields(cls), state, strict=True):
            _set_attribute(obj, field.name, value)
        return obj
    raise ValueError(f"timelypy wire: {cls!r} is not a record class")


def _zone(zone: Any) -> Any:
    """A time zone as ``n`` or ``(n, pickle)`` (see :func:`_reference`), or None."""
    if zone is None:
        return None
    n, data = _reference(zone, lambda z: pickle.dumps(z, protocol=5))
    return n if data is None else (n, data)


def _zone_of(ref: Any) -> Any:
    if ref is None:
        return None
    received = _refs.received
    if type(ref) is int:
        try:
            return received[ref]
        except KeyError:
            raise ValueError(f"timelypy wire: zone number {ref} before its definition") from None
    n, data = ref
    zone = received[n] = _load(data, pickle.loads)
    return zone


def _day_microseconds(value: Any) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _clock(us: int) -> Tuple[int, int, int, int]:
    seconds, us = divmod(us, 1_000_000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return hours, minutes, seconds, us


STDLIB_FIELDS: Dict[type, Callable[[Any], List[Any]]] = {
    date: lambda v: [0, v.toordinal()],
    datetime: lambda v: [1, v.toordinal(), _day_microseconds(v), v.fold, _zone(v.tzinfo)],
    time: lambda v: [2, _day_microseconds(v), v.fold, _zone(v.tzinfo)],
    timedelta: lambda v: [3, v.days, v.seconds, v.microseconds],
    Decimal: lambda v: [4, str(v)],
    Fraction: lambda v: [5, v.numerator, v.denominator],
    UUID: lambda v: [6, v.bytes],
}
"""Per exact type, ``value`` as the ``[kind, *fields]`` of an :data:`~.wire.EXT_STDLIB`."""


def rebuild_stdlib(items: Any) -> Any:
    """The value of an :data:`~.wire.EXT_STDLIB` payload's ``[kind, *fields]``."""
    kind, *fields = items
    if kind == 0:
        return date.fromordinal(fields[0])
    if kind == 1:
        ordinal, us, fold, zone = fields
        day = date.fromordinal(ordinal)
        return datetime(day.year, day.month, day.day, *_clock(us), _zone_of(zone), fold=fold)
    if kind == 2:
        us, fold, zone = fields
        return time(*_clock(us), _zone_of(zone), fold=fold)
    if kind == 3:
        return timedelta(*fields)
    if kind == 4:
        return Decimal(fields[0])
    if kind == 5:
        return Fraction(*fields)
    if kind == 6:
        return UUID(bytes=fields[0])
    raise ValueError(f"timelypy wire: unknown standard value kind {kind}")
