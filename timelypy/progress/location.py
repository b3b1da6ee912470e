"""Locations: the ports of a scope's operators, which progress tracking counts at.

A *location* is an operator port (timely dataflow's vocabulary, as on the timely wiki): a
*source* is an operator output, a *target* an operator input. Node 0 is the scope's boundary
seen from inside: ``Source(0, i)`` is scope input ``i`` and ``Target(0, j)`` is scope output
``j``. :mod:`.reachability` computes the paths between them and tracks the times at each.

>>> Source(2, 0), Target(0, 1)
(Source(2, 0), Target(0, 1))
>>> Location.from_bytes(Source(2, 0).to_bytes()) == Source(2, 0)
True
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["Location", "Source", "Target"]


class Location(NamedTuple):
    """A port: ``node`` index in its scope, ``port`` index, and whether it is a source."""

    node: int
    port: int
    is_source: bool

    def __repr__(self) -> str:
        kind = "Source" if self.is_source else "Target"
        return f"{kind}({self.node}, {self.port})"

    def to_bytes(self) -> bytes:
        """17 bytes (``<qq?``), for a transport (:meth:`from_bytes` reverses it); struct.error
        for a node or port outside int64."""
        return _LOCATION.pack(*self)

    @classmethod
    def from_bytes(cls, data: bytes) -> "Location":
        """The location :meth:`to_bytes` encoded."""
        return cls(*_LOCATION.unpack(data))


_LOCATION = struct.Struct("<qq?")


def Source(node: int, port: int) -> Location:
    """An operator output (or scope input ``port`` when ``node == 0``)."""
    return Location(node, port, True)


def Target(node: int, port: int) -> Location:
    """An operator input (or scope output ``port`` when ``node == 0``)."""
    return Location(node, port, False)
