"""Fixed-width values: which Python values have a shape of scalar columns (a leaf module).

A value is *fixed-width* when it is an ``int``, ``float`` or ``bool`` (exactly those types, not
subclasses) or a plain ``tuple`` of fixed-width values; its *shape* is ``"i"``, ``"f"`` or
``"b"`` for a scalar and the tuple of its items' shapes for a tuple. Where a caller asks
(``strings=True``), a ``str`` (shape ``"s"``) or ``bytes`` (``"y"``) is a scalar too: an
arrangement keeps it as an ``int32`` code into a sorted dictionary of the batch's strings.
Arrangements keep such records as numpy columns (``timelypy.differential.trace.layout``) and
the wire packs lists of fixed-width ones as columns (``timelypy.communication.wire_columns``,
which also takes ``Product(int, int)`` times, shape ``"P"``); both detect shapes here.

>>> shape_of((1, (2.5, True))), shape_of((1, "a"))
(('i', ('f', 'b')), None)
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import numpy as np

from .order import Product

__all__ = [
    "DTYPE_OF_KIND",
    "KIND_OF_TYPE",
    "PRODUCT",
    "STRING_KINDS",
    "Shape",
    "TYPE_OF_KIND",
    "TYPE_OF_STRING_KIND",
    "shape_of",
]

Shape = Union[str, Tuple[Any, ...]]
"""``"i"``, ``"f"``, ``"b"`` (``"P"``: a ``Product`` of two ints), or a tuple of shapes."""

KIND_OF_TYPE: Dict[type, str] = {int: "i", float: "f", bool: "b"}
"""The shape of each scalar type."""
STRING_KINDS: Dict[type, str] = {str: "s", bytes: "y"}
"""The shape of each string type (scalars only where ``strings=True``)."""
TYPE_OF_KIND: Dict[str, type] = {"i": int, "f": float, "b": bool}
"""The scalar type of each fixed-width scalar shape (the wire's shapes)."""
TYPE_OF_STRING_KIND: Dict[str, type] = {"s": str, "y": bytes}
"""The type of each string shape."""
DTYPE_OF_KIND: Dict[str, Any] = {"i": np.int64, "f": np.float64, "b": np.bool_}
"""The numpy type a scalar shape's column takes at full width."""
PRODUCT = "P"
"""The shape of a ``Product(int, int)`` (only where ``products=True``)."""


def shape_of(
    value: Any,
    products: bool = False,
    limit: Optional[int] = None,
    depth: int = 0,
    strings: bool = False,
) -> Optional[Shape]:
    """The shape of ``value``, or None when it is not fixed-width (or is nested more than
    ``limit`` tuples deep). ``products``: a ``Product`` of two ints is a value too (``"P"``);
    ``strings``: a ``str`` or ``bytes`` is a scalar too (``"s"``, ``"y"``).

    >>> from timelypy.order import Product
    >>> shape_of(((1, 2), Product(0, 1)), products=True), shape_of(Product(0, 1))
    ((('i', 'i'), 'P'), None)
    >>> shape_of(("a", 1), strings=True), shape_of(("a", 1))
    (('s', 'i'), None)
    """
    cls = type(value)
    kind = KIND_OF_TYPE.get(cls)
    if kind is not None:
        return kind
    if strings:
        kind = STRING_KINDS.get(cls)
        if kind is not None:
            return kind
    if cls is Product:
        if products and type(value[0]) is int and type(value[1]) is int:
            return PRODUCT
        return None
    if cls is not tuple or (limit is not None and depth >= limit):
        return None
    parts = []
    for item in value:
        part = shape_of(item, products, limit, depth + 1, strings)
        if part is None:
            return None
        parts.append(part)
    return tuple(parts)
