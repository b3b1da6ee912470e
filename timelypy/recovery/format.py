"""The checkpoint file format: how one chunk of operator state becomes a self-checking file.

Every file of a checkpoint but the manifest is a *chunk file*: an 80-byte header, then the
payload.

======  ======  =============================================================================
offset  size    field
======  ======  =============================================================================
0       4       magic ``b"TPCK"``
4       2       format version (little-endian; this is version :data:`FORMAT_VERSION`)
6       1       encoding: ``0`` msgpack (:data:`MSGPACK`), ``1`` cloudpickle (:data:`PICKLE`),
                ``2`` columns (:data:`COLUMNS`)
7       1       reserved, 0
8       8       payload length in bytes (little-endian)
16      32      SHA-256 of the payload
48      32      HMAC-SHA256 of the payload under the user's ``signing_key`` (pickle); zeros
                for msgpack
======  ======  =============================================================================

A file is named by the SHA-256 of its whole content (header and payload), so a chunk identical
to one an earlier checkpoint wrote has the same name and is referenced, not written again.

**msgpack** (encoding 0) carries plain data and never executes code when read: ``None``,
``bool``, ``int`` (any size), ``float``, ``str``, ``bytes``, ``list`` (stays a list), ``dict``
(any keys), and, as msgpack extensions: ``tuple`` (stays a tuple),
:class:`~timelypy.order.Product`, :class:`~timelypy.windows.Window`, ``set``, ``frozenset``,
ints beyond 64 bits, numpy scalars (dtype and bytes), ``date``, naive ``datetime`` and
``time``, ``timedelta``, ``Decimal``, ``Fraction`` and ``UUID``. A set is written with its
elements sorted by their encoding, so that equal states give equal bytes.

**columns** (encoding 2) lay a chunk of keyed pieces out column-wise when every piece has the
same shape of ints, floats, plain scalars, tuples, ``Product``, lists and string-keyed dicts
(see :mod:`.columns`): decoding builds the pieces with C-level calls, several times faster than
msgpack's per-tuple extension hook. Other keyed chunks are msgpack.

**cloudpickle** (encoding 1) is the fallback for a chunk holding anything else (a user's record
class, a ``datetime`` with a time zone): loading pickle executes code, so a pickled chunk is
written and read only with a ``signing_key``, and its HMAC is checked before it is unpickled.
Keep checkpoints with pickled chunks on trusted storage, and the key apart from them.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import threading
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any, List, Optional, Sequence, Tuple
from uuid import UUID

import cloudpickle
import msgpack

from ..communication.wire_records import STDLIB_FIELDS, rebuild_stdlib
from ..errors import CheckpointError
from ..order import Product
from ..windows.spec import Window
from .columns import ColumnsError, decode_columns, encode_columns

__all__ = [
    "FORMAT_VERSION",
    "KEY_GROUPS",
    "KEY_GROUP_CLASSES",
    "MAGIC",
    "MSGPACK",
    "PICKLE",
    "COLUMNS",
    "HEADER_SIZE",
    "NeedsPickle",
    "pack",
    "unpack",
    "encode_chunk",
    "encode_keyed_chunk",
    "decode_chunk",
    "read_header",
    "content_name",
]

FORMAT_VERSION = 2
KEY_GROUPS = 720
"""Keyed pieces fall in key group ``routing_hash % KEY_GROUPS``. A worker ``i`` of ``n``
owns the pieces whose ``routing_hash % n == i`` (as the exchange routes them), which the key
group decides when ``n`` divides 720 (1-6, 8-10, 12, 15, 16, 18, 20, 24, 30, 36, 40, 45, 48,
60, ...)."""
KEY_GROUP_CLASSES = 60
"""Chunks never mix key groups of two classes ``key_group % 60``: every group of a chunk has
the same owner for every worker count dividing 60 (1-6, 10, 12, 15, 20, 30, 60)."""
MAGIC = b"TPCK"
MSGPACK, PICKLE, COLUMNS = 0, 1, 2
_ENCODINGS = {MSGPACK: "msgpack", PICKLE: "cloudpickle", COLUMNS: "columns"}
_HEADER = struct.Struct("<4sHBBQ32s32s")
HEADER_SIZE = _HEADER.size
_NO_MAC = bytes(32)

# msgpack extension codes of the format (independent of the wire's: a checkpoint outlives a run)
_EXT_TUPLE, _EXT_PRODUCT, _EXT_BIGINT, _EXT_SET, _EXT_FROZENSET = 1, 2, 3, 4, 5
_EXT_STDLIB, _EXT_NUMPY, _EXT_WINDOW = 6, 7, 8
_PLAIN_STDLIB = (date, timedelta, Decimal, Fraction, UUID)


class NeedsPickle(TypeError):
    """A value the msgpack encoding cannot carry exactly; ``value_type`` names its type."""

    def __init__(self, value_type: type):
        super().__init__(
            f"msgpack cannot carry a {value_type.__module__}.{value_type.__qualname__}"
        )
        self.value_type = value_type


def _default(obj: Any) -> Any:
    cls = type(obj)
    if cls is tuple:
        return msgpack.ExtType(_EXT_TUPLE, pack(list(obj)))
    if cls is Product:
        return msgpack.ExtType(_EXT_PRODUCT, pack([obj[0], obj[1]]))
    if cls is Window:  # a window's results and pending updates are keyed by it
        return msgpack.ExtType(_EXT_WINDOW, pack([obj[0], obj[1]]))
    if cls is int:  # past msgpack's 64 bits
        size = (obj.bit_length() + 8) // 8
        return msgpack.ExtType(_EXT_BIGINT, obj.to_bytes(size, "little", signed=True))
    if cls is set or cls is frozenset:
        code = _EXT_SET if cls is set else _EXT_FROZENSET
        return msgpack.ExtType(code, pack(sorted(obj, key=pack)))  # canonical: by encoding
    if cls in _PLAIN_STDLIB or (cls in (datetime, time) and obj.tzinfo is None):
        return msgpack.ExtType(_EXT_STDLIB, pack(STDLIB_FIELDS[cls](obj)))
    if cls.__module__ == "numpy" and hasattr(obj, "dtype") and obj.shape == ():
        return msgpack.ExtType(_EXT_NUMPY, pack([obj.dtype.str, obj.tobytes()]))
    raise NeedsPickle(cls)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == _EXT_TUPLE:
        return tuple(unpack(data))
    if code == _EXT_PRODUCT:
        outer, inner = unpack(data)
        return Product(outer, inner)
    if code == _EXT_WINDOW:
        start, end = unpack(data)
        return Window(start, end)
    if code == _EXT_BIGINT:
        return int.from_bytes(data, "little", signed=True)
    if code == _EXT_SET:
        return set(unpack(data))
    if code == _EXT_FROZENSET:
        return frozenset(unpack(data))
    if code == _EXT_STDLIB:
        return rebuild_stdlib(unpack(data))
    if code == _EXT_NUMPY:
        import numpy

        dtype, raw = unpack(data)
        if numpy.dtype(dtype).hasobject:
            raise ValueError(f"numpy scalar of object dtype {dtype!r}")
        return numpy.frombuffer(raw, dtype=dtype)[0]
    raise ValueError(f"unknown msgpack extension code {code}")


class _Packers(threading.local):
    """One reusable packer per nesting depth (an extension packs its content inside
    ``_default``, while the packer of the level above is busy): half the time of ``packb``."""

    def __init__(self) -> None:
        self.by_depth: List[Any] = []
        self.depth = 0


_packers = _Packers()


def pack(obj: Any) -> bytes:
    """``obj`` as msgpack of the checkpoint format; raises :class:`NeedsPickle` for a value it
    cannot carry exactly."""
    packers = _packers
    depth = packers.depth
    if depth == len(packers.by_depth):
        packers.by_depth.append(
            msgpack.Packer(default=_default, strict_types=True, use_bin_type=True)
        )
    packers.depth = depth + 1
    try:
        return packers.by_depth[depth].pack(obj)
    except BaseException:
        packers.by_depth[depth:] = []  # a packer interrupted mid-object keeps its buffer
        raise
    finally:
        packers.depth = depth


def unpack(data: bytes) -> Any:
    """The value :func:`pack` wrote; executes no code of the data."""
    return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False, use_list=True)


def _mac(key: bytes, payload: bytes) -> bytes:
    return hmac.new(key, payload, hashlib.sha256).digest()


def encode_chunk(value: Any, signing_key: Optional[bytes], what: str) -> Tuple[bytes, int]:
    """A chunk file holding ``value`` and its encoding: msgpack when it carries the value, else
    cloudpickle signed under ``signing_key``. Without a key such a value is refused with a
    :class:`~timelypy.errors.CheckpointError` naming ``what`` (the operator) and the type."""
    try:
        payload, encoding = pack(value), MSGPACK
    except NeedsPickle as exc:
        if signing_key is None:
            raise CheckpointError(
                f"{what}: the state holds a {exc.value_type.__qualname__!r} (module "
                f"{exc.value_type.__module__!r}), which the msgpack format cannot carry; such a "
                "chunk is written with cloudpickle, and that needs a signing_key (loading "
                "pickle executes code: the key proves the chunk is one this job wrote; keep "
                "checkpoints on trusted storage)",
                reason="pickle needs a signing_key",
            ) from None
        payload, encoding = cloudpickle.dumps(value, protocol=5), PICKLE
    return _framed(payload, encoding, signing_key), encoding


def _framed(payload: bytes, encoding: int, signing_key: Optional[bytes]) -> bytes:
    mac = _mac(signing_key, payload) if encoding == PICKLE and signing_key else _NO_MAC
    digest = hashlib.sha256(payload).digest()
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, encoding, 0, len(payload), digest, mac)
    return header + payload


def encode_keyed_chunk(
    hashes: Sequence[int], pieces: Sequence[Any], signing_key: Optional[bytes], what: str
) -> Tuple[bytes, int]:
    """A chunk file holding the keyed pieces ``zip(hashes, pieces)``: columns when the pieces
    fit that layout, else as :func:`encode_chunk` the value ``{"h": hashes, "p": pieces}``.
    :func:`decode_chunk` returns ``{"h": [...], "p": [...]}`` for either."""
    payload = encode_columns(hashes, pieces)
    if payload is not None:
        return _framed(payload, COLUMNS, None), COLUMNS
    return encode_chunk({"h": list(hashes), "p": list(pieces)}, signing_key, what)


def content_name(data: bytes) -> str:
    """The name of a chunk file: the SHA-256 of its content, in hex."""
    return hashlib.sha256(data).hexdigest()


def _refuse(path: str, reason: str) -> CheckpointError:
    return CheckpointError(f"checkpoint file {path}: {reason}", path=path, reason=reason)


def read_header(data: bytes, path: str) -> Tuple[int, bytes, bytes, bytes]:
    """The encoding, payload, payload digest and MAC of a chunk file, after checking its magic,
    version and length; raises :class:`~timelypy.errors.CheckpointError` naming ``path``."""
    if len(data) < HEADER_SIZE:
        raise _refuse(path, f"truncated: {len(data)} bytes, shorter than the header")
    magic, version, encoding, _reserved, length, digest, mac = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise _refuse(path, f"not a timelypy checkpoint chunk (magic {magic!r})")
    if version != FORMAT_VERSION:
        raise _refuse(
            path, f"format version {version}; this timelypy reads version {FORMAT_VERSION}"
        )
    if encoding not in _ENCODINGS:
        raise _refuse(path, f"unknown encoding {encoding}")
    payload = data[HEADER_SIZE:]
    if len(payload) != length:
        reason = "truncated" if len(payload) < length else "longer than its header says"
        raise _refuse(path, f"{reason}: payload of {len(payload)} bytes, header says {length}")
    return encoding, payload, digest, mac


def decode_chunk(
    data: bytes, path: str, signing_key: Optional[bytes], *, checked: bool = False
) -> Any:
    """The value of a chunk file, verified: its header, its checksum, and for a pickled chunk
    its signature under ``signing_key`` before anything is unpickled. ``checked``: the
    caller has verified the whole file's SHA-256 already (against its name), so the payload's
    is not computed again. Every refusal is a :class:`~timelypy.errors.CheckpointError`
    naming ``path`` and the reason."""
    encoding, payload, digest, mac = read_header(data, path)
    if not checked and hashlib.sha256(payload).digest() != digest:
        raise _refuse(path, "corrupt: the SHA-256 of its payload differs from its header's")
    if encoding == PICKLE:
        if signing_key is None:
            raise _refuse(
                path,
                "a pickled chunk, and no signing_key was given: loading pickle executes code, "
                "so it is read only when its signature proves this job's key wrote it (pass "
                "the signing_key the checkpoint was written with; trusted storage only)",
            )
        if not hmac.compare_digest(_mac(signing_key, payload), mac):
            raise _refuse(
                path, "bad signature: not signed with this signing_key (another key, or altered)"
            )
        return cloudpickle.loads(payload)
    if encoding == COLUMNS:
        try:
            hashes, pieces = decode_columns(payload)
        except ColumnsError as exc:
            raise _refuse(path, f"corrupt column payload ({exc})") from None
        return {"h": hashes, "p": pieces}
    try:
        return unpack(payload)
    except Exception as exc:  # noqa: BLE001 - any malformed payload is a corrupt file
        raise _refuse(path, f"corrupt msgpack payload ({type(exc).__name__}: {exc})") from None
