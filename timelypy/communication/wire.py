"""The wire codec between worker processes: msgpack with a few extension types, plus framing.

What crosses a process boundary is a *batch* (usually a list of ``(data, time, diff)`` tuples),
a progress update, or a small control message. :func:`encode` turns one such object into bytes and
:func:`decode` turns the bytes back into an equal object:

* ``None``, ``bool``, ``int`` (any size), ``float``, ``str``, ``bytes`` and ``dict`` travel as
  themselves (``bytearray`` and ``memoryview`` arrive as ``bytes``).
* Every sequence (``tuple`` or ``list``) arrives as a ``tuple``: records are hashable on both sides.
* :class:`timelypy.order.Product` arrives as a ``Product`` (nested Products too).
* ``set`` and ``frozenset`` arrive as themselves.
* A class registered with :func:`register_type` arrives as itself, packed by its own codec (the
  dataflow layer registers progress's ``Location`` this way: the transport knows no progress
  type). ``Product`` is built in instead: it is a leaf type of every layer, the time of every
  message, and its codec's caches are specialised to it.
* The record types of the guide (frozen dataclasses, named tuples, Enum members;
  ``datetime.date`` / ``datetime`` / ``time`` / ``timedelta``, ``Decimal``, ``Fraction``,
  ``UUID``) arrive as themselves, with their exact class: a user class is a
  :data:`EXT_RECORD` (the class pickled once per message, then named by a number; its fields
  or value packed as data), a standard type an :data:`EXT_STDLIB` (its fields as ints; a
  time zone pickled once per message).
* Anything else msgpack cannot carry exactly (other user classes and subclasses of builtins,
  functions and lambdas, ...) travels as a cloudpickle payload inside a msgpack extension.
  Plain data never touches pickle.
* A list or tuple of 64 or more fixed-width records (ints in int64, floats, bools,
  ``Product(int, int)``, tuples of them) may travel as numpy columns (:mod:`.wire_columns`:
  by default those holding ``Product`` times, where columns cost less CPU).

>>> from ..order import Product
>>> decode(encode([(1, "a"), (Product(2, 3), {4, 5})]))
((1, 'a'), (Product(2, 3), {4, 5}))

Why ``strict_types``: a non-strict msgpack packer sends any tuple subclass as a plain array, so a
``Product`` would silently come back as a ``tuple``. With ``strict_types=True`` the packer only
handles exact builtin types and hands everything else - including every plain tuple - to
``_default``. Plain tuples cost one Python call each (they are returned as lists); see
``benchmarks/`` and the transport report for the measured price (roughly 1.5-2x the encode time of
a non-strict packer, decode unchanged).

Records of the root scope, fast: :func:`pickle_records` pickles a data message
``("d", channel, time, records)`` whose ``time`` is an ``int`` (every message of a root scope)
with a reused C pickler (protocol 5, no memo), and :func:`unpickle_records` reverses it: 50-80
ns per record each way for a list of plain tuples, against about 250 ns to encode column by
column above. Records keep their exact types (a list stays a list, a named tuple a named
tuple), as on one worker. Messages at ``Product`` times stay with msgpack, whose extension
caches times, and so does a message the pickler refuses (a cycle, a function or class sent by
value, something that cannot be pickled).

Framing: :func:`frame` prefixes a payload with its length (8 bytes, little-endian) and
:class:`FrameReader` reassembles payloads from a byte stream delivered in arbitrary chunks.

Security note: decoding may unpickle (the cloudpickle extension), so only decode bytes from an
authenticated peer. :class:`timelypy.communication.mesh.SocketMesh` authenticates every
connection with the job's secret before reading a single frame from it.
"""

from __future__ import annotations

import io
import pickle
import struct
import threading
from operator import itemgetter
from typing import Any, Callable, Dict, List, Optional, Tuple

import cloudpickle
import msgpack

from ..order import Product
from . import wire_columns
from .wire_columns import fixed_payload, pack_fixed, unpack_fixed
from .wire_records import STDLIB_FIELDS, rebuild_record, rebuild_stdlib, record_header, record_kind
from .wire_records import reset as reset_records

__all__ = [
    "encode",
    "decode",
    "pickle_records",
    "unpickle_records",
    "plainly_sendable",
    "frame",
    "FrameReader",
    "HEADER_SIZE",
    "EXT_PRODUCT",
    "EXT_PRODUCT_INTS",
    "EXT_BIGINT",
    "EXT_SET",
    "EXT_FROZENSET",
    "EXT_PICKLE",
    "EXT_COLUMNS",
    "register_type",
    "EXT_RECORD",
    "EXT_STDLIB",
    "EXT_FIXED",
    "fixed_records",
]

# msgpack extension type codes (0..127 are free for applications; -1 is msgpack's Timestamp).
EXT_PRODUCT = 1
"""``Product(outer, inner)``; payload is the msgpack array ``[outer, inner]``."""
EXT_PRODUCT_INTS = 2
"""``Product(int, int)`` with both coordinates in int64; payload is 16 bytes (two ``<q``)."""
EXT_BIGINT = 3
"""An ``int`` outside the 64-bit range msgpack carries; payload is little-endian two's
complement."""
EXT_SET = 4
"""A ``set``; payload is the msgpack array of its elements."""
EXT_FROZENSET = 5
"""A ``frozenset``; payload is the msgpack array of its elements."""
EXT_PICKLE = 6
"""Anything else; payload is a cloudpickle pickle."""
EXT_COLUMNS = 7
"""A list of ``n`` plain tuples of one length ``k`` sent column by column: the payload is the
msgpack array ``[k, column_0, ..., column_{k-1}]`` (each column itself maybe columnar); it
decodes to the tuple of the ``n`` row tuples (as every sequence decodes)."""
# Code 8 is the first free code: the dataflow layer registers progress's Location under it.
EXT_RECORD = 9
"""A frozen dataclass, a named tuple or an Enum member: a header naming its class (its pickle
the first time a message holds it, then its number), then the msgpack array of its state (see
:mod:`.wire_records`)."""
EXT_STDLIB = 10
"""A ``date``, ``datetime``, ``time``, ``timedelta``, ``Decimal``, ``Fraction`` or ``UUID``: the
msgpack array ``[kind, *fields]`` (see :mod:`.wire_records`)."""
EXT_FIXED = 11
"""A list or tuple of fixed-width records (ints in int64, floats, bools, ``Product(int, int)``,
tuples of them) as numpy columns: the layout, the count and each column's raw bytes (see
:mod:`.wire_columns`)."""

_INT_PAIR = struct.Struct("<qq")
_HEADER = struct.Struct("<Q")
HEADER_SIZE = _HEADER.size
"""Size in bytes of the length prefix written by :func:`frame`."""


# --------------------------------------------------------------------------------------
# Encoding


class _PackerPool(threading.local):
    """Per-thread msgpack packers, one per nesting depth.

    A ``Product``, a set or a big container inside ``_default`` must be packed *while* the outer
    packer is in the middle of ``pack`` - and a msgpack ``Packer`` is not reentrant (reusing it
    corrupts its buffer). So depth ``d`` uses its own packer ``packers[d]``. The pool is
    thread-local because a packer is not thread-safe either.
    """

    def __init__(self) -> None:
        self.packers: List[msgpack.Packer] = []
        self.depth = 0


_pool = _PackerPool()


def _pack(obj: Any) -> bytes:
    """Pack ``obj`` with the packer of the current nesting depth."""
    pool = _pool
    depth = pool.depth
    packers = pool.packers
    if depth == len(packers):
        # The outermost packer keeps msgpack's default 256 KiB buffer; nested ones pack small
        # values (one Product, one set) and start small.
        packers.append(
            msgpack.Packer(
                default=_default,
                use_bin_type=True,
                strict_types=True,
                unicode_errors="surrogatepass",
                buf_size=1 << 18 if depth == 0 else 256,
            )
        )
    pool.depth = depth + 1
    try:
        return packers[depth].pack(obj)
    finally:
        pool.depth = depth


_new_tuple = tuple.__new__
_ExtType = msgpack.ExtType

# Times repeat a lot inside a batch (often one time per batch), so the extension encoding of a
# Product whose leaves are all ints is cached, and so is the decoded Product. Only int-leaved
# Products are cached: ``Product(1, 2) == Product(1.0, 2)``, so a cache keyed by value must not
# see other leaf types. The caches are plain dicts (atomic under the GIL), cleared when full.
_CACHE_LIMIT = 1 << 16
_encode_cache: Dict[Product, msgpack.ExtType] = {}
_decode_int_pairs: Dict[bytes, Product] = {}
_decode_nested: Dict[bytes, Product] = {}


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    # ExtType's own __new__ validates in Python and costs ~3x this.
    return _new_tuple(_ExtType, (code, data))


def _int_leaves(t: Any) -> bool:
    """Whether ``t`` is an int or a (nested) Product of ints - the shape of every time."""
    cls = type(t)
    return cls is int or (cls is Product and _int_leaves(t[0]) and _int_leaves(t[1]))


def _remember(obj: Product, ext: msgpack.ExtType) -> msgpack.ExtType:
    if len(_encode_cache) >= _CACHE_LIMIT:
        _encode_cache.clear()
    _encode_cache[obj] = ext
    return ext


def _encode_product(obj: Product) -> msgpack.ExtType:
    """The extension of a Product; cached when its leaves are ints (every time is)."""
    outer, inner = obj
    if type(inner) is int:
        if type(outer) is int:
            ext = _encode_cache.get(obj)
            if ext is not None:
                return ext
            try:
                return _remember(obj, _ext(EXT_PRODUCT_INTS, _INT_PAIR.pack(outer, inner)))
            except struct.error:
                pass  # a coordinate beyond int64: the general form carries big ints
            return _remember(obj, _ext(EXT_PRODUCT, _pack([outer, inner])))
        if _int_leaves(outer):
            ext = _encode_cache.get(obj)
            if ext is not None:
                return ext
            return _remember(obj, _ext(EXT_PRODUCT, _pack([outer, inner])))
    return _ext(EXT_PRODUCT, _pack([outer, inner]))


COLUMNAR_MIN_ROWS = 16
"""Sequences of at least this many plain tuples of one length travel column by column."""
_COLUMNAR_MAX_WIDTH = 8
_BUILT_IN_CODES = frozenset(range(1, 8)) | {9, 10, EXT_FIXED}
# exact class -> (code, encode, its cache by value or None); code -> decode
_encoders: Dict[type, Tuple[int, Callable[[Any], bytes], Optional[Dict[Any, Any]]]] = {}
_decoders: Dict[int, Callable[[bytes], Any]] = {}


def register_type(
    cls: type,
    code: int,
    encode: Callable[[Any], bytes],
    decode: Callable[[bytes], Any],
    *,
    cache: bool = False,
) -> None:
    """Carry instances of exactly ``cls`` as msgpack extension ``code``: ``encode(obj)`` gives
    the payload bytes and ``decode(payload)`` the equal object back. An instance ``encode``
    refuses (``TypeError``, ``ValueError``, ``OverflowError``, ``struct.error``) travels
    pickled instead. ``cache=True`` for immutable, hashable values of which few are distinct
    (the payload is then computed once per value). Both ends of a link must register the same
    types (registering at import of the module that sends them does it). Registering the same
    class under the same code again is a no-op; ValueError for a code that is built in, outside
    0..127, or taken by another class."""
    if not 0 <= code <= 127 or code in _BUILT_IN_CODES:
        raise ValueError(f"register_type({cls.__name__}): code {code} is built in or not 0..127")
    taken = _encoders.get(cls)
    if taken is not None and taken[0] != code:
        raise ValueError(f"register_type({cls.__name__}): already registered as code {taken[0]}")
    other = _decoders.get(code)
    if other is not None and taken is None:
        raise ValueError(f"register_type({cls.__name__}): code {code} is taken by another type")
    _encoders[cls] = (code, encode, {} if cache else None)
    _decoders[code] = decode


def _columns(rows: Any) -> Optional[msgpack.ExtType]:
    """``rows`` (a list or tuple) as one :data:`EXT_FIXED` extension when they are fixed-width
    records (decoded as a tuple, as every sequence), else as one :data:`EXT_COLUMNS` extension
    when every row is an exact ``tuple`` of one length (1..8), else None. The type and length
    checks and the transposition run in C (``map``, ``set``, ``zip``), so a batch of
    ``((k, v), t, r)`` updates costs a few C passes instead of two Python calls per update; the
    columns are tuples again and may go columnar in turn (the ``(k, v)`` column)."""
    if type(rows[0]) is not tuple:
        return None
    mode = wire_columns.mode
    if len(rows) >= wire_columns.FIXED_MIN_ROWS and mode != "off":
        fixed = pack_fixed(rows, as_list=False, products_only=mode == "auto")
        if fixed is not None:
            return _ext(EXT_FIXED, fixed)
    types = set(map(type, rows))
    if len(types) != 1 or tuple not in types:
        return None
    widths = set(map(len, rows))
    if len(widths) != 1:
        return None
    (width,) = widths
    if not 0 < width <= _COLUMNAR_MAX_WIDTH:
        return None
    return _ext(EXT_COLUMNS, _pack([width, *zip(*rows)]))


def _encode_registered(
    obj: Any, code: int, encode: Callable[[Any], bytes], cache: Optional[Dict[Any, Any]]
) -> Any:
    """The extension of an instance of a class registered by :func:`register_type`."""
    if cache is not None:
        ext = cache.get(obj)
        if ext is not None:
            return ext
    try:
        ext = _ext(code, encode(obj))
    except (struct.error, TypeError, ValueError, OverflowError):
        return _ext(EXT_PICKLE, cloudpickle.dumps(obj, protocol=5))
    if cache is not None:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[obj] = ext
    return ext


def _default(obj: Any) -> Any:
    """msgpack's fallback under ``strict_types``: everything that is not an exact builtin.

    Ordered by frequency: plain tuples first (they are most of every batch).
    """
    cls = type(obj)
    if cls is tuple:
        if len(obj) >= COLUMNAR_MIN_ROWS:
            ext = _columns(obj)
            if ext is not None:
                return ext
        return list(obj)
    if cls is Product:
        return _encode_product(obj)
    registered = _encoders.get(cls)
    if registered is not None:
        return _encode_registered(obj, *registered)
    if cls is int:
        # Only reached when the int does not fit msgpack's 64-bit encodings.
        size = obj.bit_length() // 8 + 1
        return _ext(EXT_BIGINT, obj.to_bytes(size, "little", signed=True))
    if cls is set:
        return _ext(EXT_SET, _pack(list(obj)))
    if cls is frozenset:
        return _ext(EXT_FROZENSET, _pack(list(obj)))
    fields = STDLIB_FIELDS.get(cls)
    if fields is not None:
        return _ext(EXT_STDLIB, _pack(fields(obj)))
    kind = record_kind(cls)
    if kind is not None:
        try:
            record = record_header(obj, cls, kind)
        except (TypeError, pickle.PicklingError):  # the class cannot be pickled: the object
            record = None  # may (pickle names what it refuses)
        if record is not None:
            return _ext(EXT_RECORD, record[0] + _pack(record[1]))
    return _ext(EXT_PICKLE, cloudpickle.dumps(obj, protocol=5))


def _encode_rows(obj: Any) -> Any:
    """``obj`` with a top-level list of rows (or a list among a tuple's items, as the records
    of a data message ``("d", channel, time, records)``) replaced by its columnar extension.
    msgpack packs lists itself, so :func:`_default` never sees them."""
    cls = type(obj)
    if cls is list:
        if len(obj) >= COLUMNAR_MIN_ROWS:
            return _columns(obj) or obj
        return obj
    if cls is tuple and len(obj) <= 4:
        for i, item in enumerate(obj):
            if type(item) is list and len(item) >= COLUMNAR_MIN_ROWS:
                ext = _columns(item)
                if ext is not None:
                    return (*obj[:i], ext, *obj[i + 1 :])
    return obj


def encode(obj: Any) -> bytes:
    """Serialize ``obj`` to bytes for another worker; :func:`decode` reverses it.

    Cost: one C-level pass plus one Python call per tuple, Product, set, big int and pickled
    value - except that a list (or tuple) of 16 or more plain tuples of one length goes column
    by column (:data:`EXT_COLUMNS`: a few C passes, one Python call per column); a data message's
    records therefore cost about a third of the per-tuple encoding. Raises whatever cloudpickle
    raises for an object that cannot be pickled at all.

    >>> decode(encode({"k": [1, 2]}))
    {'k': (1, 2)}
    """
    try:
        return _pack(_encode_rows(obj))
    finally:
        reset_records()  # record classes are numbered per message


# --------------------------------------------------------------------------------------
# Decoding


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_FIXED:
        return unpack_fixed(data)
    if code == EXT_COLUMNS:
        width, *columns = _unpack(data)
        if len(columns) != width:
            raise ValueError("timelypy wire: a columnar batch with a wrong number of columns")
        return tuple(zip(*columns))
    decoder = _decoders.get(code)
    if decoder is not None:
        return decoder(data)
    if code == EXT_PRODUCT_INTS:
        product = _decode_int_pairs.get(data)
        if product is None:
            product = _new_tuple(Product, _INT_PAIR.unpack(data))
            if len(_decode_int_pairs) >= _CACHE_LIMIT:
                _decode_int_pairs.clear()
            _decode_int_pairs[data] = product
        return product
    if code == EXT_PRODUCT:
        product = _decode_nested.get(data)
        if product is None:
            product = _new_tuple(Product, _unpack(data))
            if _int_leaves(product):  # otherwise it may hold mutable values: never share it
                if len(_decode_nested) >= _CACHE_LIMIT:
                    _decode_nested.clear()
                _decode_nested[data] = product
        return product
    if code == EXT_BIGINT:
        return int.from_bytes(data, "little", signed=True)
    if code == EXT_SET:
        return set(_unpack(data))
    if code == EXT_FROZENSET:
        return frozenset(_unpack(data))
    if code == EXT_RECORD:
        return rebuild_record(data, _unpack)
    if code == EXT_STDLIB:
        return rebuild_stdlib(_unpack(data))
    if code == EXT_PICKLE:
        return cloudpickle.loads(data)
    raise ValueError(f"timelypy wire: unknown msgpack extension type {code}")


def _unpack(data: Any) -> Any:
    return msgpack.unpackb(
        data,
        use_list=False,
        raw=False,
        strict_map_key=False,
        ext_hook=_ext_hook,
        unicode_errors="surrogatepass",
    )


def decode(data: Any) -> Any:
    """Rebuild the object :func:`encode` serialized. ``data`` is any bytes-like object.

    Sequences come back as tuples. Only decode data from a trusted (authenticated) peer: the
    pickle extension can run code.
    """
    try:
        return _unpack(data)
    finally:
        reset_records()  # record classes are numbered per message


# --------------------------------------------------------------------------------------
# Records of the root scope: pickled


class _PicklerSlot(threading.local):
    """A per-thread cloudpickle pickler over its own buffer, reused across messages (making a
    pickler costs about a microsecond; a closed-loop message holds one record).

    The pickler runs in ``fast`` mode: no memo, so an object referenced twice is written twice
    (records are values; identity does not cross workers with msgpack either). A batch of
    ``((k, v), t, r)`` updates: 48 instead of 72 ns per record to pickle, 78 instead of 88 to
    unpickle. What fast mode refuses - a cycle, such as a record that contains itself, or a
    function or class sent by value - is left to :func:`encode`, as before (which carries
    such functions and classes, and reports such records)."""

    def __init__(self) -> None:
        self.buffer = io.BytesIO()
        self.renew()

    def renew(self) -> None:
        """A new pickler (a failed dump may leave the pickler's state half written)."""
        self.pickler = cloudpickle.Pickler(self.buffer, protocol=5)
        self.pickler.fast = True


_pickler = _PicklerSlot()


_PLAIN_SCALARS = frozenset({int, float, bool, bytes, type(None)})
_PLAIN_DEPTH = 8


def plainly_sendable(values: List[Any], depth: int = 0) -> bool:
    """True if every one of ``values`` is built only of ints, floats, bools, bytes, None,
    strings that encode to UTF-8 and tuples of one length of those (nested at most
    8 deep), so that :func:`encode` and pickle take them for certain. Checked a column at a
    time in C (``map``, ``set``, ``join``): a cheap test before trying to encode a large
    batch. False means "not known", not "unsendable".

    >>> plainly_sendable([(1, "a"), (2, "b")]), plainly_sendable([{1}])
    (True, False)
    """
    kinds = set(map(type, values))
    if kinds <= _PLAIN_SCALARS:
        return True
    if str in kinds and kinds - {str} <= _PLAIN_SCALARS:
        strings = values if len(kinds) == 1 else [v for v in values if type(v) is str]
        try:
            "".join(strings).encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: msgpack refuses them
            return False
        return True
    if kinds != {tuple} or depth >= _PLAIN_DEPTH:
        return False
    widths = set(map(len, values))
    if len(widths) != 1:
        return False
    return all(
        plainly_sendable(list(map(itemgetter(j), values)), depth + 1) for j in range(widths.pop())
    )


def pickle_records(message: Any) -> Optional[bytes]:
    """A data message ``("d", channel, time, records)`` with an ``int`` time as a pickle, or
    None when it has another shape or time, or holds a cycle or something that cannot be
    pickled (then :func:`encode` takes it, and reports what it cannot carry).

    >>> unpickle_records(pickle_records(("d", 3, 7, [((1, 2), 7, 1)])))
    ('d', 3, 7, [((1, 2), 7, 1)])
    """
    if (
        type(message) is not tuple
        or len(message) != 4
        or type(message[2]) is not int
        or message[0] != "d"
    ):
        return None
    slot = _pickler
    buffer, pickler = slot.buffer, slot.pickler
    buffer.seek(0)
    buffer.truncate()
    try:
        pickler.dump(message)
    except Exception:  # noqa: BLE001 - encode() takes the message
        slot.renew()
        return None
    return buffer.getvalue()


def fixed_records(message: Any) -> Optional[bytes]:
    """A data message ``("d", channel, time, records)`` with its records as numpy columns
    (:data:`EXT_FIXED`; see :func:`.wire_columns.fixed_payload`), for :func:`decode`, which
    gives them back as a ``list``; None when the records do not fit.

    >>> time = Product(7, 1)
    >>> decode(fixed_records(("d", 3, time, [((k, 2), time, 1) for k in range(99)])))[3][:2]
    [((0, 2), Product(7, 1), 1), ((1, 2), Product(7, 1), 1)]
    """
    payload = fixed_payload(message)
    return None if payload is None else encode((*message[:3], _ext(EXT_FIXED, payload)))


def unpickle_records(data: Any) -> Any:
    """Rebuild the data message :func:`pickle_records` pickled (any bytes-like ``data``).
    Only from an authenticated peer: unpickling can run code."""
    return pickle.loads(data)


# --------------------------------------------------------------------------------------
# Framing


def frame(payload: bytes) -> bytes:
    """``payload`` prefixed by its length as 8 little-endian bytes.

    >>> frame(b"abc")
    b'\\x03\\x00\\x00\\x00\\x00\\x00\\x00\\x00abc'
    """
    return _HEADER.pack(len(payload)) + payload


class FrameReader:
    """Reassembles framed payloads from a byte stream that arrives in arbitrary chunks.

    >>> r = FrameReader()
    >>> data = frame(b"one") + frame(b"two")
    >>> r.feed(data[:5]), r.feed(data[5:13]), r.feed(data[13:])
    ([], [b'one'], [b'two'])

    ``max_frame`` (bytes) rejects absurd length prefixes with ``ValueError`` instead of trying to
    buffer them. Each payload is copied once out of the internal buffer; the buffer is compacted
    once per :meth:`feed`, so the cost is linear in the bytes fed.
    """

    __slots__ = ("_buf", "max_frame")

    def __init__(self, max_frame: Optional[int] = None) -> None:
        self._buf = bytearray()
        self.max_frame = max_frame

    @property
    def pending(self) -> int:
        """Bytes received that do not yet form a complete payload."""
        return len(self._buf)

    def feed(self, chunk: Any) -> List[bytes]:
        """Append ``chunk`` (bytes-like) and return every payload now complete, in order."""
        buf = self._buf
        buf += chunk
        size = len(buf)
        if size < HEADER_SIZE:
            return []
        out: List[bytes] = []
        pos = 0
        header = _HEADER
        max_frame = self.max_frame
        with memoryview(buf) as view:
            while size - pos >= HEADER_SIZE:
                (length,) = header.unpack_from(view, pos)
                if max_frame is not None and length > max_frame:
                    raise ValueError(
                        f"frame of {length} bytes exceeds the limit of {max_frame} bytes"
                    )
                end = pos + HEADER_SIZE + length
                if end > size:
                    break
                out.append(bytes(view[pos + HEADER_SIZE : end]))
                pos = end
        if pos:
            del buf[:pos]
        return out
