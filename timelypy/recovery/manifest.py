"""The manifest: the one small file whose presence makes a checkpoint exist.

A manifest is JSON at ``manifests/<checkpoint_id>.json``::

    {"format": "timelypy-checkpoint", "format_version": 2,
     "sha256": "<hex SHA-256 of the body's canonical JSON>",
     "body": {"checkpoint_id": ..., "created": <seconds since the epoch>,
              "time": <the closed time, tagged JSON>, "peers": <workers>,
              "key_groups": <keyed pieces are in key group routing_hash % key_groups>,
              "fingerprint": {operator_id: description},
              "parts": [<one per worker: its part index file, size, counts>],
              "extra": <tagged JSON>}}

Tagged JSON keeps what plain JSON would lose: a tuple is ``{"tuple": [...]}``, a
:class:`~timelypy.order.Product` ``{"product": [outer, inner]}``, bytes ``{"bytes": "<base64>"}``,
a dict whose keys are not all strings ``{"items": [[k, v], ...]}``; any other dict is
``{"dict": {...}}``. Lists, strings, numbers, booleans and null are themselves.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

from ..errors import CheckpointError
from ..order import Product
from .format import FORMAT_VERSION, KEY_GROUPS

__all__ = ["Manifest", "to_json", "from_json", "fingerprint_difference", "FORMAT_NAME"]

FORMAT_NAME = "timelypy-checkpoint"


def to_json(value: Any) -> Any:
    """``value`` as tagged JSON data (see the module's docstring)."""
    cls = type(value)
    if value is None or cls in (bool, int, float, str):
        return value
    if cls is list:
        return [to_json(v) for v in value]
    if cls is tuple:
        return {"tuple": [to_json(v) for v in value]}
    if cls is Product:
        return {"product": [to_json(value[0]), to_json(value[1])]}
    if cls is bytes:
        return {"bytes": base64.b64encode(value).decode("ascii")}
    if cls is dict:
        if all(type(k) is str for k in value):
            return {"dict": {k: to_json(v) for k, v in value.items()}}
        return {"items": [[to_json(k), to_json(v)] for k, v in value.items()]}
    raise TypeError(
        f"a checkpoint manifest holds plain data (None, bool, int, float, str, bytes, list, "
        f"tuple, dict, Product), not a {cls.__qualname__}: {value!r:.80}"
    )


def from_json(value: Any) -> Any:
    """The value :func:`to_json` tagged."""
    if type(value) is list:
        return [from_json(v) for v in value]
    if type(value) is not dict:
        return value
    ((tag, inner),) = value.items()
    if tag == "tuple":
        return tuple(from_json(v) for v in inner)
    if tag == "product":
        return Product(from_json(inner[0]), from_json(inner[1]))
    if tag == "bytes":
        return base64.b64decode(inner)
    if tag == "dict":
        return {k: from_json(v) for k, v in inner.items()}
    if tag == "items":
        return {from_json(k): from_json(v) for k, v in inner}
    raise ValueError(f"unknown tag {tag!r}")


@dataclass
class Manifest:
    """A published checkpoint: its id, the closed time it holds, the number of workers that
    wrote it, the program's fingerprint, the user's ``extra``, its creation time, the parts
    (one per worker: the part index file naming its chunks) and the number of key groups."""

    checkpoint_id: str
    time: Any
    peers: int
    fingerprint: Dict[str, str]
    extra: Dict[str, Any]
    created: float
    parts: List[Dict[str, Any]] = field(default_factory=list)
    format_version: int = FORMAT_VERSION
    path: str = ""
    key_groups: int = KEY_GROUPS

    def to_bytes(self) -> bytes:
        """The manifest file's content."""
        body = {
            "checkpoint_id": self.checkpoint_id,
            "created": self.created,
            "time": to_json(self.time),
            "peers": self.peers,
            "key_groups": self.key_groups,
            "fingerprint": dict(self.fingerprint),
            "parts": to_json(self.parts),
            "extra": to_json(self.extra),
        }
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        document = {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "sha256": hashlib.sha256(canonical.encode()).hexdigest(),
            "body": body,
        }
        return json.dumps(document, indent=1, sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes, path: str) -> "Manifest":
        """The manifest in ``data`` (read from ``path``), checked: JSON, format, version and
        checksum; a refusal is a :class:`~timelypy.errors.CheckpointError` naming ``path``."""

        def refuse(reason: str) -> CheckpointError:
            return CheckpointError(f"checkpoint manifest {path}: {reason}", path, reason)

        try:
            document = json.loads(data)
        except ValueError as exc:
            raise refuse(f"truncated or corrupt: not JSON ({exc})") from None
        if not isinstance(document, dict) or document.get("format") != FORMAT_NAME:
            raise refuse(f"not a timelypy checkpoint manifest (format {FORMAT_NAME!r} expected)")
        version = document.get("format_version")
        if version != FORMAT_VERSION:
            raise refuse(f"format version {version}; this timelypy reads version {FORMAT_VERSION}")
        body = document.get("body")
        if not isinstance(body, dict):
            raise refuse("corrupt: no body")
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
        if hashlib.sha256(canonical.encode()).hexdigest() != document.get("sha256"):
            raise refuse("corrupt: the SHA-256 of its body differs from the one it records")
        try:
            return cls(
                checkpoint_id=body["checkpoint_id"],
                time=from_json(body["time"]),
                peers=int(body["peers"]),
                fingerprint=dict(body["fingerprint"]),
                extra=from_json(body["extra"]),
                created=float(body["created"]),
                parts=from_json(body["parts"]),
                format_version=version,
                path=path,
                key_groups=int(body["key_groups"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise refuse(f"corrupt: a field is missing or malformed ({exc!r})") from None


def fingerprint_difference(saved: Dict[str, str], current: Dict[str, str]) -> List[str]:
    """What differs between the fingerprint of a checkpoint and of the program restoring it,
    one line per operator (missing, new, or changed), in operator order; empty when equal."""
    lines = []
    for op in sorted(set(saved) | set(current), key=_natural):
        before, now = saved.get(op), current.get(op)
        if before == now:
            continue
        if now is None:
            lines.append(f"{op}: {before} in the checkpoint, not in this program")
        elif before is None:
            lines.append(f"{op}: {now} in this program, not in the checkpoint")
        else:
            lines.append(f"{op}: {before} in the checkpoint, {now} in this program")
    return lines


def _natural(op: str) -> Tuple[Tuple[int, int, str], ...]:
    """Sort ``scope/10`` after ``scope/9``."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in op.split("/"))
